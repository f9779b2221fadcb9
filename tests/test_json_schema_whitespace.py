"""JSON Schema whitespace modes: compact, flexible (bounded) and a fixed indent."""

from __future__ import annotations

import json

import pytest
from json_helpers import FAMILIES, compact, dfa_for

from guided.grammars.json_schema.compiler import compile_json_schema


@pytest.mark.parametrize("name", ["closed_object", "nested", "array_bounds", "enum_mixed", "typed_extras"])
def test_whitespace_modes(name):
    schema = FAMILIES[name]
    samples = {
        "closed_object": {"name": "Ada", "age": 36},
        "nested": {"id": 1, "tags": ["a", "b"], "owner": {"name": "x", "email": "a@b.co"}},
        "array_bounds": [1, 2, 3],
        "enum_mixed": "green",
        "typed_extras": {"a": True, "n": 3},
    }
    value = samples[name]
    flexible = compile_json_schema(schema)
    indent2 = compile_json_schema(schema, {"indent": 2})
    compact_dfa = dfa_for(name)
    assert compact_dfa.matches(compact(value))
    assert not compact_dfa.matches(json.dumps(value).encode()) or json.dumps(value) == compact(value).decode()
    assert flexible.matches(compact(value))  # the compact form is always accepted
    assert flexible.matches(json.dumps(value).encode())  # ", " and ": "
    assert flexible.matches(json.dumps(value, indent=2).encode())
    assert indent2.matches(json.dumps(value, indent=2).encode())
    if isinstance(value, (dict, list)) and value:
        assert not indent2.matches(compact(value))


def test_flexible_whitespace_is_bounded():
    dfa = compile_json_schema({"type": "array", "items": {"type": "integer"}})
    assert dfa.matches(b"[\n  1,\n  2\n]")
    assert not dfa.matches(b"[\n\n\n1]")  # one newline per gap
    assert not dfa.matches(b"[" + b" " * 40 + b"1]")
