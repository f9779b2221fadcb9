"""Spec compilers above regex: lark grammars and JSON Schema (installed as ``guided.grammars``).

Layout::

    lark_frontend.py   lark grammar text -> one minimal DFA per terminal + an integer CFG
                       (``compile_lark``)
    lark_reader.py     lark grammar text -> lark's compiled rules and terminals, read
                       directly (lark's own loader outside its subset and on errors)
    lexer.py           one lazily built DFA over all terminals at once (longest match
                       among the terminals the parser allows)
    earley.py          incremental Earley parser with persistent, shareable parse states
    grammar_index.py   token masks for a grammar: lexer work precomputed per lexer state,
                       parser work only where a token completes a terminal
    json_schema/       the JSON Schema compiler: schema -> byte-level automaton
                       (``compile_json_schema``), or an Earley grammar for recursive
                       schemas (``json_schema.recursive.compile_recursive_schema``)
    lark/              the shipped grammars (``guided.Grammar.from_name``): arithmetic,
                       csv, json, python_expr, sql

Entry points: users go through ``guided.compile`` with a ``guided.Grammar`` or
``guided.JsonSchema`` spec; the compilers themselves are
``guided.grammars.lark_frontend.compile_lark`` and
``guided.grammars.json_schema.compile_json_schema``. A compiled grammar is matched
token by token by ``guided.grammar_matcher.GrammarGuide`` (a ``GrammarIndex`` over
the ``Lexer`` and the ``EarleyParser``).

The package imports nothing at import time: import the module you need.
"""
