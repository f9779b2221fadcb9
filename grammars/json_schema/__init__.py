"""JSON Schema -> byte-level automaton: the compiler behind ``guided.JsonSchema``.

Entry point: ``compile_json_schema(schema, whitespace="flexible", strict=True,
key_order="schema", *, with_unique_sites=False)`` returns a ``LazyDFA`` (an NFA
determinised as decoding visits it) accepting the JSON texts this compiler writes
for the schema: always valid against it, never looser. ``guided.compile`` calls it,
and where it raises ``RecursiveSchemaError`` (a ``$ref`` that recurses) falls back to
``recursive.compile_recursive_schema``, which turns the schema into an Earley grammar.
Every refusal is a ``guided.errors.SchemaError`` naming the keyword and its JSON
pointer.

Layout, by concern::

    compiler.py          SchemaCompiler (the four mixins below, joined) and
                         compile_json_schema: $ref, the per-node keyword dispatch,
                         open values, DFA algebra's budget, Whitespace
    keywords.py          keyword tables, limits and small helpers shared by the parts
    drafts.py            older drafts' vocabularies ($schema), identifiers ($id, $anchor)
    reuse.py             sub-schemas used more than once: built once, deferred after
    text.py              JSON text as byte automata: string characters, keys, numbers
    strings.py           string-body and key automata shared across schemas, products
    superset.py          container texts of "over" mode (what DFA algebra subtracts)
    recursive.py         recursive schemas as Earley grammars (compile_recursive_schema)
    recursive_objects.py any-order objects inside recursive schemas
    logic/               combinators.py: allOf / anyOf / oneOf / not / if (mixin
                         LogicCompiler); merge.py (allOf by keywords), conditional.py
                         (negations as unions of schemas), disjoint.py (oneOf branches
                         shown apart), presence.py (logic over which keys are present),
                         witness.py (small values that show an overlap)
    scalars/             values.py: enum / const, the per-type dispatch, numbers and
                         strings (mixin ScalarCompiler); numbers.py (number ranges as
                         regexes), multiple_of.py, formats.py
    containers/          arrays.py (mixin ArrayCompiler), objects.py (mixin
                         ObjectCompiler), key_order.py (keys in any order: ObjectShape),
                         unique.py (uniqueItems checked beside the automaton: SiteMap)

``SchemaCompiler`` is one class made of the four mixins: each keyword family lives in
its own module, and all share the compiler's state (the schema, the settings, the
per-compile caches and limits), so inside a mixin ``self`` is the compiler.

Example::

    >>> from guided.grammars.json_schema import compile_json_schema
    >>> dfa = compile_json_schema({"type": "integer", "maximum": 20}, "compact")
    >>> dfa.matches(b"17"), dfa.matches(b"21")
    (True, False)
"""

from .compiler import OPEN_DEPTH, SchemaCompiler, Whitespace, compile_json_schema

__all__ = ["OPEN_DEPTH", "SchemaCompiler", "Whitespace", "compile_json_schema"]
