"""JSON Schema objects: the order keys are written in (``properties`` order, where the
keys of merged parts go, ``key_order="any"`` and the key sets it builds lazily), and
extra keys whose values no value satisfies.
"""

from __future__ import annotations

import itertools
import json

import pytest
from json_helpers import KEY_ORDER_SHAPES, compact, reference_validator

import guided
from guided.grammars.json_schema.compiler import compile_json_schema


def test_extra_keys_whose_value_is_impossible_are_simply_absent():
    """additionalProperties that no value satisfies (here an allOf of two types, as a
    merged allOf of {} and false gives) means no extra key, not an impossible object."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}},
              "additionalProperties": {"allOf": [{"type": "string"}, {"type": "integer"}]}}
    dfa = compile_json_schema(schema, "compact")
    validator = reference_validator(schema)
    for doc in ({"a": 1}, {}, {"a": 1, "b": "x"}, {"b": 1}):
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


def test_merged_keys_follow_the_order_the_schema_names_them():
    """An allOf / oneOf listed before "properties" puts its keys first (a base type
    "extended" by its own properties), one listed after puts them last."""
    base = {"type": "object", "properties": {"level": {"type": "string"}}}
    own = {"spaces": {"type": "integer"}}
    for logic in ("allOf", "oneOf"):
        before = compile_json_schema({logic: [base], "properties": own}, "compact")
        after = compile_json_schema({"properties": own, logic: [base]}, "compact")
        assert before.matches(b'{"level":"x","spaces":1}') and not before.matches(b'{"spaces":1,"level":"x"}')
        assert after.matches(b'{"spaces":1,"level":"x"}') and not after.matches(b'{"level":"x","spaces":1}')
    # A part whose keys sit one level down (in its own oneOf) also comes first
    # (grunt-watch-task in JSON Schema Store).
    nested = {"allOf": [{"oneOf": [{"properties": {"events": {"type": "array"}}},
                                   {"properties": {"events": {"type": "string"}}}]}],
              "properties": {"spawn": {"type": "boolean"}}}
    dfa = compile_json_schema(nested, "compact")
    assert dfa.matches(b'{"events":"all","spawn":true}') and not dfa.matches(b'{"spawn":true,"events":"all"}')


def test_a_branch_naming_only_known_keys_keeps_the_properties_order():
    """A oneOf branch that pins some of the object's own properties (an enum per
    grant type) does not move them ahead of the others, even listed before
    "properties" (as in key-sorted schemas): the keys keep the properties' order."""
    schema = {
        "oneOf": [{"properties": {"grant": {"enum": ["code"]}, "response": {"enum": ["c"]}}, "required": ["grant"]},
                  {"properties": {"grant": {"enum": ["token"]}, "response": {"enum": ["t"]}}, "required": ["grant"]}],
        "properties": {"grant": {"type": "string"}, "uris": {"type": "array"}, "response": {"type": "string"}},
        "additionalProperties": False, "type": "object",
    }
    dfa = compile_json_schema(schema, "compact")
    doc = {"grant": "code", "uris": ["x"], "response": "c"}
    assert reference_validator(schema).is_valid(doc) and dfa.matches(compact(doc))
    assert not dfa.matches(compact({"grant": "code", "response": "c", "uris": ["x"]}))
    assert not dfa.matches(compact({"grant": "code", "uris": ["x"], "response": "t"}))


def test_an_any_of_part_between_all_of_parts_writes_its_keys_in_place():
    """The keys an allOf part's anyOf branch adds come where that part stands among
    the parts, not after every other part's keys (browscap's ``child``): ``match``,
    then ``devices`` or ``device``, then ``platforms``. Also where another part would
    not merge and the anyOf is spread into choices, and where the anyOf stands beside
    its part's properties, listed first."""
    first = {"type": "object", "properties": {"match": {"type": "string"}}, "required": ["match"]}
    # (each branch requires its key: written late, it cannot pass as an extra key)
    either = {"anyOf": [{"properties": {"devices": {"type": "object"}}, "required": ["devices"]},
                        {"properties": {"device": {"type": "string"}}, "required": ["device"]}]}
    last = {"properties": {"platforms": {"type": "array"}, "engine": {"type": "string"}}}
    in_order = [{"match": "a", "devices": {}, "platforms": []}, {"match": "a", "device": "d", "engine": "x"},
                {"match": "a", "device": "d"}]
    late = [{"match": "a", "platforms": [], "devices": {}}, {"match": "a", "engine": "x", "device": "d"}]
    unmerged = {"not": {"required": ["device", "devices"]}}  # a part left to the union below
    for schema in ({"allOf": [first, either, last]}, {"allOf": [first, either, last, unmerged]},
                   {"allOf": [first, {**either, "properties": {"browser": {"type": "string"}}}, last]}):
        dfa = compile_json_schema(schema, "compact")
        validator = reference_validator(schema)
        for doc in in_order:
            assert validator.is_valid(doc) and dfa.matches(compact(doc)), (schema, doc)
        for doc in late:
            assert validator.is_valid(doc) and not dfa.matches(compact(doc)), (schema, doc)
    # The branch's keys come before its part's own properties when the anyOf is
    # listed first in that part.
    schema = {"allOf": [first, {**either, "properties": {"browser": {"type": "string"}}}, last]}
    assert compile_json_schema(schema, "compact").matches(compact({"match": "a", "device": "d", "browser": "b"}))
    assert not compile_json_schema(schema, "compact").matches(compact({"match": "a", "browser": "b", "device": "d"}))


@pytest.mark.parametrize("whitespace", ["compact", "flexible", {"indent": 2}], ids=["compact", "flexible", "indent"])
@pytest.mark.parametrize("name", sorted(KEY_ORDER_SHAPES))
def test_any_key_order_agrees_with_jsonschema(name, whitespace):
    """key_order="any": every ordering of up to four keys (named, extra, nested) is
    judged as jsonschema judges it; schema order refuses the reordered valid ones."""

    schema = KEY_ORDER_SHAPES[name]
    dfa = compile_json_schema(schema, whitespace, key_order="any")
    ordered_only = compile_json_schema(schema, whitespace)
    validator = reference_validator(schema)
    values = {"a": 1, "b": "x", "c": True, "d": None, "x1": False}
    docs = [{k: values[k] for k in keys} for n in range(5) for keys in itertools.permutations(values, n)]
    docs += [{"b": 1, "a": {"q": None, "p": 2}}, {"a": {"p": "no"}}]
    reordered = 0
    for doc in docs:
        text = {"compact": compact(doc), "flexible": json.dumps(doc).encode()}.get(
            whitespace if isinstance(whitespace, str) else "", json.dumps(doc, indent=2).encode())
        assert dfa.matches(text) == validator.is_valid(doc), text
        if validator.is_valid(doc) and not ordered_only.matches(text):
            reordered += 1
    assert reordered > 0  # the option makes a difference on every shape


def test_any_key_order_builds_only_the_key_sets_decoding_reaches():
    """20 optional properties have 2**20 key sets; writing 3 keys builds a handful."""
    schema = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(20)}}
    dfa = compile_json_schema(schema, "compact", key_order="any")
    before = len(dfa._nfa)
    assert dfa.matches(b'{"k19":1,"k3":2,"k0":3}')
    assert not dfa.matches(b'{"k19":1,"k19":2}')  # each key at most once
    assert len(dfa._nfa) < before + 2000


def test_any_key_order_defers_extra_values_and_skips_impossible_ones():
    """Each key set's node holds the extra-key entries too: their values (a large
    object here) are built only where an extra key is written, and a pattern whose
    values are impossible stays closed in every node, without an error mid-decoding."""
    big = {"type": "object", "properties": {f"f{j}": {"type": "string", "pattern": "^[a-z]{2,9}$"} for j in range(30)}}
    schema = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(6)},
              "patternProperties": {"^p": big, "^z": {"type": "string", "minLength": 3, "maxLength": 1}},
              "additionalProperties": False}
    dfa = compile_json_schema(schema, "compact", key_order="any")
    validator = reference_validator(schema)
    before = len(dfa._nfa)
    assert dfa.matches(b'{"k3":1,"k1":2,"k5":3,"p1":{"f2":"ab"},"k0":4}')
    # Five nodes: built in each, the large value took ~29,000 states; deferred, ~8,000.
    assert len(dfa._nfa) - before < 12_000
    docs = [{"k3": 1, "k1": 2, "zz": "abc"}, {"k2": 1, "p": {"f1": "x"}}, {"k4": 0, "p": {}, "q": 1},
            {"k0": 1, "k1": 1, "k2": 1, "k3": 1, "k4": 1, "k5": 1, "pp": {"f29": "zz", "f0": "aa"}}]
    for doc in docs:
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


# oneOf branches that overlap (a document can satisfy both) and whose negations are no
# union of schemas: built whole and combined by automaton algebra.
ALGEBRA_ONE_OF = {"oneOf": [
    {"type": "object", "additionalProperties": False, "required": ["a"],
     "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}}},
    {"type": "object", "required": ["b"], "minProperties": 2, "properties": {"b": {"type": "string"}}},
]}


def _orderings(values, most):

    return [{k: values[k] for k in keys} for n in range(most + 1) for keys in itertools.permutations(values, n)]


@pytest.mark.parametrize("whitespace", ["compact", "flexible"])
def test_any_key_order_reaches_objects_built_for_automaton_algebra(whitespace):
    """Objects inside the automata built whole for oneOf algebra take their keys in any
    order too: every ordering of up to four keys is judged as jsonschema judges it."""
    dfa = compile_json_schema(ALGEBRA_ONE_OF, whitespace, key_order="any")
    ordered_only = compile_json_schema(ALGEBRA_ONE_OF, whitespace)
    validator = reference_validator(ALGEBRA_ONE_OF)
    reordered = 0
    for doc in _orderings({"a": 1, "b": "x", "c": True, "d": None}, 4):
        text = compact(doc) if whitespace == "compact" else json.dumps(doc).encode()
        assert dfa.matches(text) == validator.is_valid(doc), text
        reordered += validator.is_valid(doc) and not ordered_only.matches(text)
    assert reordered > 10


def test_any_key_order_in_algebra_falls_back_to_schema_order(monkeypatch):
    """Objects past the whole-build limits (more keys than the ladder's first rung, or
    more NFA states than allowed) keep schema order there: stricter, never looser."""
    import guided.grammars.json_schema.containers.key_order as ko

    nine = {f"k{i}": {"type": "integer"} for i in range(9)}
    wide = {"oneOf": [{"type": "object", "properties": nine, "additionalProperties": False, "required": ["k0"]},
                      {"type": "object", "required": ["k8"], "minProperties": 2}]}
    dfa = compile_json_schema(wide, "compact", key_order="any")
    assert dfa.matches(b'{"k0":1,"k3":2}') and not dfa.matches(b'{"k3":2,"k0":1}')
    small = ALGEBRA_ONE_OF
    monkeypatch.setattr(ko, "WHOLE_OBJECT_STATES", 10)  # every object is too large
    dfa = compile_json_schema(small, "compact", key_order="any")
    validator = reference_validator(small)
    for doc in _orderings({"a": 1, "b": "x", "c": True}, 3):
        if dfa.matches(compact(doc)):
            assert validator.is_valid(doc), doc
    assert dfa.matches(b'{"a":1,"c":true}') and not dfa.matches(b'{"c":true,"a":1}')


def test_key_order_through_the_public_api(smollm2_tokenizer):
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"]}
    text = '{"age":36,"name":"Ada"}'
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    verdicts = {}
    for order in ("schema", "any"):
        m = guided.compile(guided.JsonSchema(schema, whitespace="compact", key_order=order), smollm2_tokenizer).matcher()
        verdicts[order] = m.accept_tokens(ids) and m.is_accepting()
    assert verdicts == {"schema": False, "any": True}
    with pytest.raises(ValueError, match="key_order"):
        guided.JsonSchema(schema, key_order="sorted")
