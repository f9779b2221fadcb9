"""Sub-schemas used more than once: built at the first use, deferred at the others
(``guided.grammars.json_schema.reuse``)."""

import json

import jsonschema
import pytest

from guided.fsm.nfa import NFA
from guided.grammars.json_schema.compiler import compile_json_schema
from guided.grammars.json_schema.reuse import MIN_DEFERRED_STATES, ReusedValues

ITEM = {
    "type": "object",
    "properties": {f"field_{i}": {"type": "string", "maxLength": 6} for i in range(10)},
    "required": ["field_0"],
    "additionalProperties": False,
}
SCHEMA = {
    "$defs": {"item": ITEM},
    "type": "object",
    "properties": {name: {"$ref": "#/$defs/item"} for name in ("a", "b", "c", "d")},
    "additionalProperties": False,
}


def _text(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def test_later_uses_of_a_definition_are_deferred_and_agree_with_jsonschema():
    dfa = compile_json_schema(SCHEMA, whitespace="compact")
    nfa = dfa._nfa
    later = [s for s in nfa.pending]  # b, c and d (and nothing else in this schema)
    assert len(later) == 3
    before = len(nfa)
    good = {"field_0": "x", "field_3": "abcdef", "field_9": ""}
    cases = [
        {"a": good, "b": good, "c": good, "d": good},
        {"d": good},
        {"b": {"field_0": "y"}, "d": {"field_0": "z", "field_1": "q"}},
        {"c": {"field_0": "abcdefg"}},  # too long, in a deferred copy
        {"d": {"field_1": "x"}},  # field_0 missing
        {"a": good, "d": {"field_0": "x", "field_10": "x"}},  # no such field
        {"b": good, "a": good},  # out of properties order: refused as a subset
    ]
    for value in cases:
        valid = jsonschema.Draft202012Validator(SCHEMA).is_valid(value)
        in_order = list(value) == sorted(value)
        assert dfa.matches(_text(value)) == (valid and in_order), value
    assert len(nfa) > before  # the later copies were built as the texts reached them


def test_a_definition_used_once_or_small_is_built_in_place():
    closed = {"type": "object", "additionalProperties": False}
    once = compile_json_schema({"$defs": {"item": ITEM}, "properties": {"a": {"$ref": "#/$defs/item"}}, **closed},
                               whitespace="compact")
    assert not once._nfa.pending
    small = {"type": "string", "maxLength": 3}
    many = compile_json_schema({"properties": {k: small for k in "abcdef"}, **closed}, whitespace="compact")
    assert not many._nfa.pending


def _filler(nfa, linked: bool):
    """A fragment of more than ``MIN_DEFERRED_STATES`` states whose start reaches its
    end only when ``linked``."""
    s, _ = nfa.byte_string(b"x" * MIN_DEFERRED_STATES)
    e = nfa.state()
    if linked:
        nfa.epsilon(len(nfa) - 2, e)
    return s, e


def _use(reuse, nfa, schema, linked):
    """One use of ``schema``, as ``SchemaCompiler.value`` makes it."""
    later = reuse.later_copy(nfa, schema, 0, lambda: _filler(nfa, linked))
    if later is not None:
        return later
    first = len(nfa)
    frag = _filler(nfa, linked)
    reuse.built(nfa, schema, 0, first, frag)
    return frag


@pytest.mark.parametrize("linked", [True, False])
def test_a_first_copy_that_cannot_end_is_never_deferred(linked):
    nfa = NFA(lazy=True)
    reuse = ReusedValues()
    schema = {}
    _use(reuse, nfa, schema, linked)
    s, e = _use(reuse, nfa, schema, linked)
    assert (s in nfa.pending) == linked


def test_a_first_copy_dropped_by_truncate_is_not_read():
    nfa = NFA(lazy=True)
    reuse = ReusedValues()
    schema = {}
    mark = len(nfa)
    _use(reuse, nfa, schema, True)
    nfa.truncate(mark)
    nfa.byte_string(b"y")  # other states where the first copy was
    s, e = _use(reuse, nfa, schema, True)
    assert s not in nfa.pending  # built again: the new first copy
    s, e = _use(reuse, nfa, schema, True)
    assert s in nfa.pending
