"""JSON Schema combinators: ``allOf`` merged or intersected, ``anyOf`` as unions,
``oneOf`` / ``not`` / ``if`` as exact DFA algebra (``combinators.LogicCompiler``), and
the analyses that keep the algebra small: keyword merging, negation as unions of
schemas, pairwise disjointness, key presence, small witness values."""
