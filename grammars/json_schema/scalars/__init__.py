"""JSON Schema scalars: ``enum`` / ``const``, the per-type dispatch and strings
(``values.ScalarCompiler``), numbers within bounds, ``multipleOf``, ``format``."""
