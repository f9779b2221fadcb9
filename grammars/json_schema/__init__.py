"""JSON Schema -> token-level automaton: the compiler behind ``guided.JsonSchema``.

Entry point: ``compile_json_schema(schema, whitespace, strict, key_order)`` returns a
byte-level automaton (a lazily determinised ``LazyDFA``) accepting exactly the JSON
texts this compiler can write for the schema; ``guided.compile`` calls it, and falls
back to ``recursive.compile_recursive_schema`` (the Earley grammar engine) for
schemas whose ``$ref`` recurses. Every refusal is a ``guided.errors.SchemaError``
naming the keyword and its JSON pointer.

Layout, by concern::

    compiler.py          SchemaCompiler: $ref, the per-node keyword dispatch, open
                         values, DFA algebra's budget; the entry point
    keywords.py          keyword tables, limits and helpers shared by the parts
    drafts.py            older drafts' vocabularies ($schema)
    reuse.py             sub-schemas used more than once: built once, deferred after
    text.py              JSON text as byte automata: string characters, keys, whitespace
    strings.py           string-body and key automata shared across a schema
    superset.py          container texts of "over" mode (what DFA algebra subtracts)
    recursive.py         recursive schemas as Earley grammars
    recursive_objects.py any-order objects inside recursive schemas
    logic/               allOf / anyOf / oneOf / not / if (mixin ``LogicCompiler``)
    scalars/             enum / const, numbers, strings (mixin ``ScalarCompiler``)
    containers/          arrays and objects (mixins ``ArrayCompiler``, ``ObjectCompiler``)

``SchemaCompiler`` is one class made of the four mixins: each keyword family lives in
its own module, and all share the compiler's state (the NFA being built, the ``$ref``
table, the limits).

Example::

    >>> from guided.grammars.json_schema import compile_json_schema
    >>> dfa = compile_json_schema({"type": "integer", "maximum": 20}, "compact")
    >>> dfa.matches(b"17"), dfa.matches(b"21")
    (True, False)
"""

from .compiler import OPEN_DEPTH, SchemaCompiler, Whitespace, compile_json_schema

__all__ = ["OPEN_DEPTH", "SchemaCompiler", "Whitespace", "compile_json_schema"]
