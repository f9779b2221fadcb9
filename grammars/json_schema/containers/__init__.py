"""JSON Schema containers: arrays (``arrays.ArrayCompiler``), objects
(``objects.ObjectCompiler``), keys in any order, and ``uniqueItems`` beside the
automaton."""
