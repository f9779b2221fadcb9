"""Objects of extra keys only (``additionalProperties`` / ``patternProperties``) whose
``minProperties`` / ``maxProperties`` count past ``MAX_COUNTED_PROPERTIES``: a counted
repetition of the entry, in the regular compiler and inside recursive schemas, judged
as ``jsonschema`` judges them."""

from __future__ import annotations

import json

import pytest
from json_helpers import reference_validator

import guided
from guided.grammar_matcher import GrammarGuide
from guided.grammars.json_schema.compiler import compile_json_schema
from guided.grammars.json_schema.keywords import MAX_COUNTED_PROPERTIES
from guided.grammars.json_schema.recursive import compile_recursive_schema

HI = MAX_COUNTED_PROPERTIES + 76  # 100: past what count tracks take


def _objects(value, counts) -> list[dict]:
    return [{f"k{i}": value for i in range(n)} for n in counts]


def _texts(docs, whitespace: str) -> list[bytes]:
    if whitespace == "compact":
        return [json.dumps(d, separators=(",", ":")).encode() for d in docs]
    return [json.dumps(d, indent=None).encode() for d in docs]  # ", " and ": "


CASES = {
    "max": ({"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": HI},
            _objects(3, [0, 1, 2, HI - 1, HI, HI + 1, HI + 7]) + [{"a": "x"}, {"a": 1, "b": [1]}]),
    "min": ({"type": "object", "additionalProperties": {"type": "integer", "minimum": 0},
             "minProperties": MAX_COUNTED_PROPERTIES + 6},
            _objects(1, [0, 1, MAX_COUNTED_PROPERTIES + 5, MAX_COUNTED_PROPERTIES + 6, MAX_COUNTED_PROPERTIES + 40])
            + _objects(-1, [MAX_COUNTED_PROPERTIES + 6])),
    "min_and_max": ({"type": "object", "patternProperties": {"^k[0-9]+$": {"type": "boolean"}},
                     "additionalProperties": False, "minProperties": 1, "maxProperties": 60},
                    _objects(True, [0, 1, 59, 60, 61]) + [{"x": True}, {"k1": 1}]),
}


@pytest.mark.parametrize("whitespace", ["compact", "flexible"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_counted_extra_keys_agree_with_jsonschema(name, whitespace):
    schema, docs = CASES[name]
    dfa = compile_json_schema(schema, whitespace)
    validator = reference_validator(schema)
    verdicts = [validator.is_valid(d) for d in docs]
    assert True in verdicts and False in verdicts  # both kinds are tried
    for doc, text, valid in zip(docs, _texts(docs, whitespace), verdicts):
        assert dfa.matches(text) == valid, (name, len(doc), text[:60])


def test_counted_extra_keys_with_keys_in_any_order():
    schema, docs = CASES["max"]
    dfa = compile_json_schema(schema, "compact", key_order="any")
    validator = reference_validator(schema)
    for doc, text in zip(docs, _texts(docs, "compact")):
        assert dfa.matches(text) == validator.is_valid(doc)


def test_counted_extra_keys_inside_a_recursive_schema(smollm2_vocab):
    """A tree whose nodes carry up to 100 attributes (MaskBench o6020's shape)."""
    schema = {"$ref": "#/$defs/shape", "$defs": {"shape": {
        "type": "object", "required": ["name"], "additionalProperties": False,
        "properties": {"name": {"type": "string"},
                       "attr": {"type": "object", "maxProperties": HI,
                                "additionalProperties": {"oneOf": [{"type": "string"}, {"type": "number"}]}},
                       "children": {"type": "array", "items": {"$ref": "#/$defs/shape"}}}}}}
    guide = GrammarGuide(compile_recursive_schema(schema, "compact"), smollm2_vocab)
    validator = reference_validator(schema)
    docs = [{"name": "a", "attr": attr, "children": [{"name": "b", "attr": attr}]}
            for attr in _objects("v", [0, 3, HI, HI + 1]) + [{"x": None}]]
    index = guide.index
    for doc in docs:
        state = index.consume(index.initial(), json.dumps(doc, separators=(",", ":")).encode())
        accepted = state is not None and index.can_end(state)
        assert accepted == validator.is_valid(doc), len(doc["attr"])


def test_counted_keys_beside_listed_properties_stay_refused():
    """Listed keys with a large count would need a count track per key: a clear error."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "maxProperties": HI}
    with pytest.raises(guided.UnsupportedSchemaError, match="maxProperties"):
        compile_json_schema(schema, "compact")
