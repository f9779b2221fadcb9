"""JSON Schema arrays: ``items`` / ``prefixItems`` / ``minItems`` / ``contains`` shapes
judged as ``jsonschema`` judges them, and ``uniqueItems`` over enum values (over open
kinds of items: test_unique_items.py).
"""

from __future__ import annotations

import itertools

import pytest
from json_helpers import compact, reference_validator

import guided
from guided.grammars.json_schema.compiler import compile_json_schema

ARRAY_SHAPES = {
    "items": {"type": "array", "items": {"type": "integer"}},
    "min_items": {"type": "array", "items": {"type": "integer"}, "minItems": 3},
    "prefix_then_items": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "string"}],
                          "items": {"type": "integer"}, "minItems": 3},
    "prefix_open": {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}},
    "nested": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}, "minItems": 1}},
}


@pytest.mark.parametrize("contains", [False, True])
@pytest.mark.parametrize("name", sorted(ARRAY_SHAPES))
def test_array_shapes_agree_with_jsonschema(name, contains):
    """Every array of up to 5 items from a small pool: spelled positions, prefixes and
    the loop of more items (which reuses the last spelled item), both in the lazily
    built top-level automaton and (under ``contains``) in an eagerly built one."""
    schema = dict(ARRAY_SHAPES[name], **({"contains": {"enum": [1, [1]]}} if contains else {}))
    dfa = compile_json_schema(schema, "compact")
    validator = reference_validator(schema)
    pool = [1, 2, "s", [1], []]
    for length in range(6):
        for doc in itertools.product(pool, repeat=length):
            assert dfa.matches(compact(list(doc))) == validator.is_valid(list(doc)), doc


def test_unique_items_over_enum_values():
    dfa = compile_json_schema({"type": "array", "items": {"enum": ["x", "y", 2]}, "uniqueItems": True}, "compact")
    assert dfa.matches(b'["x","y",2]') and dfa.matches(b"[2.0]") and dfa.matches(b"[]")
    assert not dfa.matches(b'["x","x"]') and not dfa.matches(b"[2,2.0]")
    with pytest.raises(guided.UnsupportedSchemaError, match="uniqueItems"):
        compile_json_schema({"type": "array", "items": {"type": "string"}, "uniqueItems": True})


def test_unevaluated_items_is_refused_unless_items_evaluates_every_item():
    """Beside ``prefixItems`` alone, ``unevaluatedItems: false`` would limit the length:
    refused rather than ignored. With ``items`` every item is evaluated and it is idle."""
    with pytest.raises(guided.UnsupportedSchemaError, match="unevaluatedItems") as e:
        compile_json_schema({"type": "array", "prefixItems": [{"type": "integer"}], "unevaluatedItems": False},
                            "compact")
    assert e.value.pointer == "#/unevaluatedItems"
    schema = {"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "string"},
              "unevaluatedItems": False}
    dfa = compile_json_schema(schema, "compact")
    for value in ([1], [1, "a", "b"], [1, 2], ["a"], []):
        assert dfa.matches(compact(value)) == reference_validator(schema).is_valid(value), value
    tuple_form = {"$schema": "https://json-schema.org/draft/2019-09/schema", "type": "array",
                  "items": [{"type": "integer"}], "additionalItems": False, "unevaluatedItems": False}
    dfa = compile_json_schema(tuple_form, "compact")
    for value in ([1], [1, 2], []):
        assert dfa.matches(compact(value)) == reference_validator(tuple_form).is_valid(value), value
