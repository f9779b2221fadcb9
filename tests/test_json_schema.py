"""JSON Schema compiler: agreement with ``jsonschema`` (the reference validator).

Valid instances come from hypothesis-jsonschema; mutations of them give (mostly)
invalid ones. An accepted text must always be valid; a valid instance, written
compactly with keys in ``properties`` order, must be accepted.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import random

import jsonschema
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import guided
from guided.grammars.json_schema.compiler import compile_json_schema

hypothesis_jsonschema = pytest.importorskip("hypothesis_jsonschema")

FAMILIES = {
    "integer_range": {"type": "integer", "minimum": -50, "maximum": 1234},
    "number_range": {"type": "number", "minimum": 0.5, "exclusiveMaximum": 99.5},
    "string_length": {"type": "string", "minLength": 2, "maxLength": 5},
    "string_anchored_pattern": {"type": "string", "pattern": "^[a-z]+-[0-9]{2}$"},
    "string_search_pattern": {"type": "string", "pattern": "ab", "maxLength": 6},
    "string_pattern_found_everywhere": {"type": "string", "pattern": "([A-Z]+)?", "maxLength": 6},
    "date": {"type": "string", "format": "date"},
    "ipv4": {"type": "string", "format": "ipv4"},
    "uuid": {"type": "string", "format": "uuid"},
    "enum_mixed": {"enum": ["red", "green", 1, None, {"a": [1, 2]}, 2.5]},
    "const": {"const": "x/y \"quoted\""},
    "closed_object": {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer", "minimum": 0}},
        "required": ["name"],
        "additionalProperties": False,
    },
    "typed_extras": {
        "type": "object",
        "properties": {"a": {"type": "boolean"}},
        "additionalProperties": {"type": "integer"},
    },
    "tagged_union": {"properties": {"kind": {}, "x": {}, "y": {}}, "additionalProperties": {"type": ["integer", "null"]}, "oneOf": [
        {"type": "object", "required": ["kind"], "properties": {"kind": {"enum": ["a"]}, "x": {"type": "integer"}}},
        {"type": "object", "required": ["kind"], "properties": {"kind": {"const": "b"}, "y": {"type": "string"}}},
    ]},
    "discriminated_by_value_type": {"properties": {"version": {}, "pattern": {}}, "oneOf": [
        {"type": "string", "enum": ["sha256sum"]},
        {"type": "object", "properties": {"version": {"type": "string"}, "pattern": {"enum": ["linux-kernel", "u-boot"]}},
         "required": ["version", "pattern"], "additionalProperties": False},
        {"type": "object", "properties": {"version": {"type": "string"}, "pattern": {
            "type": "object", "properties": {"regexp": {"type": "string"}, "seek": {"type": "integer"}},
            "required": ["regexp"], "additionalProperties": False}},
         "required": ["version", "pattern"], "additionalProperties": False},
    ]},
    "closed_variants": {"oneOf": [
        {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "boolean"}},
         "required": ["a", "b", "c"], "additionalProperties": False},
        {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
         "required": ["a", "b"], "additionalProperties": False},
    ]},
    "unique_enum_items": {"type": "array", "items": {"enum": ["a", "b", "c", 1, 1.0, True, None]},
                          "uniqueItems": True, "minItems": 1, "maxItems": 4},
    "impossible_optional": {"type": "object", "properties": {"a": {"type": "object", "enum": ["x"]}, "b": {"type": "integer"}}},
    "integer_multiple_of_seven": {"type": "integer", "multipleOf": 7},
    "integer_multiple_of_a_decimal": {"type": "integer", "multipleOf": 2.5, "maximum": 1000},
    "number_multiple_of_a_quarter": {"type": "number", "multipleOf": 0.25, "minimum": -10, "maximum": 10},
    "enum_with_logic": {"enum": [1, 2, 3, 4, 5, 6, 7, "s"], "not": {"type": "integer", "multipleOf": 2}, "oneOf": [{"type": "integer"}, {"maximum": 3}]},
    "overlapping_patterns": {
        "type": "object",
        "properties": {"ab": {"type": "integer"}},
        "patternProperties": {"^a": {"type": "integer"}, "b$": {"minimum": 3, "maximum": 1000}, "^c": False},
        "additionalProperties": {"type": "string"},
    },
    # OCDS-style language-tagged keys: no listed key matches a pattern, so the pattern
    # keys are taken whole, and the other keys once per pattern set.
    "language_tagged_keys": {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 3}, "name_x": {"type": "integer"}},
        "patternProperties": {"^name_[a-z]{2}$": {"type": "string", "maxLength": 2}, "^n": {"type": ["string", "integer"]}},
        "additionalProperties": {"type": "boolean"},
    },
    "pattern_properties": {
        "type": "object",
        "patternProperties": {"^x-": {"type": "string", "maxLength": 4}},
        "additionalProperties": False,
    },
    "array_bounds": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 4},
    "tuple": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
    "contains": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "contains": {"const": 3}},
    "any_of": {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "integer"}]},
    "one_of_overlapping": {"oneOf": [{"type": "integer", "minimum": 0}, {"type": "integer", "maximum": 10}]},
    "not": {"type": "integer", "minimum": 0, "maximum": 20, "not": {"enum": [3, 4]}},
    "all_of": {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": False},
            {"properties": {"a": {"minimum": 5}}},
        ]
    },
    "type_list": {"type": ["string", "null"], "maxLength": 4},
    "if_then_else": {"type": "integer", "if": {"minimum": 10}, "then": {"maximum": 12}, "else": {"minimum": 5}},
    "property_names": {"type": "object", "propertyNames": {"maxLength": 3}, "additionalProperties": {"type": "null"}},
    "if_on_a_property": {  # the "else" side used to be emptied by a superset: "unsatisfiable"
        "type": "object", "additionalProperties": False,
        "properties": {"a": {"type": "string", "maxLength": 3}, "b": {"type": "integer"}, "c": {"enum": ["x", "y", "z"]}},
        "if": {"properties": {"c": {"const": "x"}}}, "then": {"required": ["a", "b", "c"]}, "else": {"required": ["a", "c"]}},
    "if_typed_condition": {
        "type": ["object", "integer"], "properties": {"k": {"type": "integer"}, "m": {"type": "boolean"}},
        "additionalProperties": False, "if": {"type": "object", "required": ["k"]},
        "then": {"properties": {"k": {"minimum": 5}}}, "else": {"maximum": 3, "required": ["m"]}},
    "not_on_properties": {
        "type": "object", "additionalProperties": False,
        "properties": {"kind": {"enum": ["a", "b", "c"]}, "n": {"type": "integer", "minimum": 0, "maximum": 9}},
        "not": {"properties": {"kind": {"const": "a"}, "n": {"maximum": 4}}, "required": ["n"]}},
    "no_property_names": {"type": "object", "properties": {"a": {"type": "integer"}}, "propertyNames": False},
    "some_property": {"type": "object", "not": {"propertyNames": False}, "additionalProperties": {"type": "integer"}},
    "not_empty_object": {"not": {"maxProperties": 0}, "type": ["object", "integer"], "additionalProperties": {"type": "null"}},
    "one_of_overlapping_objects": {  # optional keys tell the branches apart (o25731)
        "type": "object", "required": ["n"], "oneOf": [
            {"properties": {"attrs": {"type": "object", "required": ["sys"], "properties": {"sys": {"enum": ["rpm", "any"]}}},
                            "n": {"type": "integer", "minimum": 0}}},
            {"properties": {"attrs": {"type": "object", "required": ["sys"], "properties": {"sys": {"enum": ["dpkg", "any"]}}},
                            "n": {"type": "integer", "maximum": 5}}}]},
    "all_of_before_properties": {  # keys in the order the text names them: "level" first
        "$defs": {"base": {"type": "object", "properties": {"level": {"enum": ["error", "warn"]}}}},
        "allOf": [{"$ref": "#/$defs/base"}],
        "properties": {"spaces": {"type": "integer", "enum": [0, 1]}}, "additionalProperties": False},
    "conditionals_on_a_listed_key": {  # one branch per value of "type" (schema-app, cloudify)
        "type": "object", "required": ["type"], "additionalProperties": False,
        "properties": {"type": {"enum": ["a", "b", "c"]}, "x": {"type": "integer"}, "y": {"type": "string"}},
        "allOf": [{"if": {"properties": {"type": {"const": "a"}}}, "then": {"required": ["x"]}},
                  {"if": {"properties": {"type": {"const": "b"}}}, "then": {"required": ["y"]},
                   "else": {"properties": {"y": {"maxLength": 2}}}}]},
    "conditionals_on_an_open_key": {  # any other value, and the key's absence, get the "else" parts
        "type": "object", "additionalProperties": {"type": "integer"},
        "allOf": [{"if": {"properties": {"k": {"const": "a"}}}, "then": {"required": ["x"]}, "else": {"maxProperties": 2}},
                  {"if": {"properties": {"k": {"enum": ["b", 1]}}, "required": ["k"]}, "then": {"required": ["y"]},
                   "else": {"properties": {"y": False}}}]},
    "dependent_required": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "boolean"}},
        "dependentRequired": {"a": ["b"]},
        "additionalProperties": False,
    },
    "dependencies_schema": {
        "$schema": "http://json-schema.org/draft-07/schema#",  # "dependencies" is draft 4-7
        "type": "object",
        "properties": {"credit": {"type": "integer"}, "billing": {"type": "string", "maxLength": 3}},
        "dependencies": {"credit": {"required": ["billing"]}},
        "additionalProperties": False,
    },
    "counted_properties": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "null"}, "c": {"type": "boolean"}},
        "minProperties": 1,
        "maxProperties": 2,
        "additionalProperties": {"type": "integer"},
    },
    "ref": {"$defs": {"pos": {"type": "integer", "minimum": 1}}, "type": "array", "items": {"$ref": "#/$defs/pos"}, "maxItems": 3},
    "nested": {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 3},
            "owner": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "email": {"type": "string", "format": "email"}},
                "required": ["name"],
                "additionalProperties": False,
            },
        },
        "required": ["id"],
        "additionalProperties": False,
    },
}


#: Formats hypothesis-jsonschema does not generate (it writes any string instead).
CUSTOM_STRATEGIES = {
    "uuid": st.uuids().map(str),
    # The generator writes multiples of 2.5 as floats (0.0, 5.0); integers are written
    # as integer texts here.
    "integer_multiple_of_a_decimal": st.integers(max_value=200).map(lambda i: 5 * i),
}


def _validator(schema):
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def ordered(value, schema, root=None):
    """``value`` with object keys in the schema's ``properties`` order (extras last)."""
    root = root if root is not None else schema

    def deref(s):
        if isinstance(s, dict) and "$ref" in s:
            node = root
            for part in s["$ref"][2:].split("/"):
                node = node[part] if part else node  # "#" is the root
            return node
        return s

    schema = deref(schema)
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        # Keys follow the schema text: the properties of allOf / anyOf / oneOf parts
        # listed before "properties" come first, with those named by an if / then /
        # else in such a part (the compiler reads a conditional as parts too).
        props = {}
        for keyword in schema:
            parts = [schema] if keyword == "properties" else (
                [deref(s) for s in schema[keyword]] if keyword in ("allOf", "anyOf", "oneOf") else [])
            for s in parts:
                if isinstance(s, dict):
                    for named in [s] + [deref(s[c]) for c in ("if", "then", "else") if c in s and s is not schema]:
                        if isinstance(named, dict):
                            props.update({k: v for k, v in named.get("properties", {}).items() if k not in props})
        out = {k: ordered(value[k], props[k], root) for k in props if k in value}
        extra = schema.get("additionalProperties", True)
        for k in value:
            if k not in props:
                out[k] = ordered(value[k], extra if isinstance(extra, dict) else {}, root)
        return out
    if isinstance(value, list):
        prefix = schema.get("prefixItems", [])
        items = schema.get("items", {})
        return [ordered(v, prefix[i] if i < len(prefix) else (items if isinstance(items, dict) else {}), root)
                for i, v in enumerate(value)]
    return value


def compact(value) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def mutations(value, rng: random.Random, n=6):
    """Small edits of a JSON value: change a leaf, drop or add a key, grow a list."""
    out = []
    leaves = [1, -7, 0.25, "x", "", None, True, [], {}, "a-12", 10**6]
    for _ in range(n):
        v = copy.deepcopy(value)
        if isinstance(v, dict) and v and rng.random() < 0.3:
            k = rng.choice(list(v))
            if rng.random() < 0.5:
                del v[k]
            else:
                v[k] = rng.choice(leaves)
        elif isinstance(v, dict) and rng.random() < 0.3:
            v[rng.choice(["zz", "name", "x-y", "a"])] = rng.choice(leaves)
        elif isinstance(v, list) and v and rng.random() < 0.5:
            v[rng.randrange(len(v))] = rng.choice(leaves)
        elif isinstance(v, list):
            v.append(rng.choice(leaves))
        else:
            v = rng.choice(leaves)
        out.append(v)
    return out


_dfas = {}


def dfa_for(name, whitespace="compact"):
    key = (name, json.dumps(whitespace))
    if key not in _dfas:
        _dfas[key] = compile_json_schema(FAMILIES[name], whitespace)
    return _dfas[key]


@pytest.mark.parametrize("name", sorted(FAMILIES))
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_agrees_with_jsonschema(name, data):
    schema = FAMILIES[name]
    dfa = dfa_for(name)
    validator = _validator(schema)
    strategy = CUSTOM_STRATEGIES.get(name)  # (`or` would ask a strategy for its truth: a HypothesisWarning)
    if strategy is None:
        strategy = hypothesis_jsonschema.from_schema(schema)
    instance = data.draw(strategy)
    # The generator does not know every format (it writes any string for "uuid").
    assume(validator.is_valid(instance))
    text = compact(ordered(instance, schema))
    assert dfa.matches(text), f"valid instance rejected: {text!r}"
    for m in mutations(instance, random.Random(repr(instance))):
        text = compact(ordered(m, schema))
        if dfa.matches(text):
            assert validator.is_valid(m), f"invalid instance accepted: {text!r}"
        elif validator.is_valid(m):
            pytest.fail(f"valid mutated instance rejected: {text!r}")


def test_extra_keys_whose_value_is_impossible_are_simply_absent():
    """additionalProperties that no value satisfies (here an allOf of two types, as a
    merged allOf of {} and false gives) means no extra key, not an impossible object."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}},
              "additionalProperties": {"allOf": [{"type": "string"}, {"type": "integer"}]}}
    dfa = compile_json_schema(schema, "compact")
    validator = _validator(schema)
    for doc in ({"a": 1}, {}, {"a": 1, "b": "x"}, {"b": 1}):
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


def test_one_of_closed_objects_told_apart_by_their_keys():
    """Two closed objects with array values: {} matches both (excluded), one key picks
    a branch, both keys match neither (dart-test.json in MaskBench)."""
    schema = {"oneOf": [
        {"type": "object", "additionalProperties": False, "properties": {"except": {"type": "array", "items": {"type": "string"}}}},
        {"type": "object", "additionalProperties": False, "properties": {"only": {"type": "array", "items": {"type": "string"}}}},
    ]}
    dfa = compile_json_schema(schema, "compact")
    validator = _validator(schema)
    for doc in ({}, {"except": ["a"]}, {"only": []}, {"except": [], "only": []}, {"only": ["x"], "except": ["y"]}):
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


def test_one_of_told_apart_by_a_required_key_stays_exact():
    """Branches that require a key with disjoint values are a plain union (a string
    "pattern" against an object one: o66073 in MaskBench); where the values overlap,
    a document matching both is still refused."""
    dfa = dfa_for("discriminated_by_value_type")
    assert dfa.matches(compact({"version": "5.10", "pattern": "u-boot"}))
    assert dfa.matches(compact({"version": "5.10", "pattern": {"regexp": "x"}}))
    overlap = {"oneOf": [
        {"type": "object", "required": ["kind"], "properties": {"kind": {"enum": ["a", "b"]}}, "additionalProperties": False},
        {"type": "object", "required": ["kind"], "properties": {"kind": {"enum": ["b", "c"]}}, "additionalProperties": False},
    ]}
    dfa = compile_json_schema(overlap, "compact")
    validator = _validator(overlap)
    assert not dfa.matches(compact({"kind": "b"}))  # matches both branches
    for doc in ({"kind": "a"}, {"kind": "c"}, {"kind": "d"}, {}):
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


def test_one_of_told_apart_by_a_key_only_one_branch_requires():
    """A key one branch requires and the other lists with a disjoint value (the
    Ethereum ABI schemas: "type" is "event" in one, optional "function" in the
    other) keeps the branches apart: a plain union, so keys come in any order
    where asked, and every document is judged as jsonschema judges it."""
    schema = {"oneOf": [
        {"type": "object", "required": ["type", "name"], "additionalProperties": False,
         "properties": {"type": {"enum": ["event"]}, "name": {"type": "string"}}},
        {"type": "object", "required": ["name"], "additionalProperties": False,
         "properties": {"type": {"enum": ["function"]}, "name": {"type": "string"}, "inputs": {"type": "array"}}},
    ]}
    validator = _validator(schema)
    docs = ({"type": "event", "name": "a"}, {"name": "a"}, {"type": "function", "name": "f", "inputs": []},
            {"type": "event", "name": "a", "inputs": []}, {"type": "other", "name": "a"}, {"name": "a", "type": "event"})
    for order in ("schema", "any"):
        dfa = compile_json_schema(schema, "compact", key_order=order)
        for doc in docs:
            in_order = list(doc) == [k for k in ("type", "name", "inputs") if k in doc]
            expected = validator.is_valid(doc) and (in_order or order == "any")
            assert dfa.matches(compact(doc)) == expected, (order, doc)


def _judged_as_jsonschema_judges(schema, docs, apart_without_supersets, monkeypatch):
    """Compile ``schema`` recording the branches whose supersets are built; every
    doc is judged as jsonschema judges it."""
    import guided.grammars.json_schema.compiler as js
    import guided.grammars.json_schema.logic.combinators as logic

    asked = []
    original = logic.disjoint_pairs

    def recording(compiler, branches, depth):
        got = original(compiler, branches, depth)
        n = len(branches)
        asked.append(len(got) == n * (n - 1) // 2)
        return got

    monkeypatch.setattr(js.SchemaCompiler, "negated_dfa", _no_supersets(js.SchemaCompiler.negated_dfa, apart_without_supersets))
    monkeypatch.setattr(logic, "disjoint_pairs", recording)
    dfa = compile_json_schema(schema, "compact")
    validator = _validator(schema)
    for doc in docs:
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc
    return asked


def _no_supersets(original, forbid):
    def guarded(self, schema, path, depth):
        # Value schemas of keys (depth > 0 below a branch) are fine; whole branches not.
        if forbid and path.split("/")[-2:-1] == ["oneOf"]:
            raise AssertionError(f"superset of a whole branch built: {path}")
        return original(self, schema, path, depth)
    return guarded


def test_one_of_tags_restricted_by_the_enum_beside_them_are_apart(monkeypatch):
    """Rc2's messages: the outer ``msg`` enum lists the commands and each branch
    narrows it to one; a branch naming a command the outer enum lacks is empty.
    Every pair is apart by the tag's listed values (no superset automaton), and
    every document is judged as jsonschema judges it."""
    schema = {"type": "object", "required": ["msg"],
              "properties": {"msg": {"type": "string", "enum": ["open", "close", "help"]}},
              "oneOf": [{"properties": {"msg": {"enum": ["open"]}, "port": {"type": "integer"}}},
                        {"properties": {"msg": {"enum": ["close"]}}},
                        {"properties": {"msg": {"enum": ["help"]}, "topic": {"type": "string"}}},
                        {"properties": {"msg": {"enum": ["preview"]}}, "required": ["fileId"]}]}
    docs = [{"msg": "open", "port": 1}, {"msg": "close"}, {"msg": "help", "topic": "x"}, {"msg": "open", "port": "x"},
            {"msg": "preview", "fileId": 1}, {"msg": "other"}, {}]
    assert _judged_as_jsonschema_judges(schema, docs, True, monkeypatch) == [True]


REPOSITORY_KINDS = {"kind": {"type": "object", "oneOf": [
    {"required": ["type", "url"], "properties": {"type": {"const": "git"}, "url": {"type": "string"}}},
    {"required": ["type", "path"], "properties": {"type": {"const": "path"}, "path": {"type": "string"}}}]}}


def test_one_of_a_union_branch_is_apart_when_each_of_its_branches_is(monkeypatch):
    """Composer's repositories: a tagged union of objects against an object whose
    every value must be ``false``. Each kind requires ``type`` (a string), which the
    other branch's ``additionalProperties`` cannot hold: apart, with no superset."""
    schema = {"$defs": REPOSITORY_KINDS, "type": "array", "items": {"oneOf": [
        {"$ref": "#/$defs/kind"},
        {"type": "object", "additionalProperties": {"const": False}, "minProperties": 1, "maxProperties": 1}]}}
    docs = [[{"type": "git", "url": "u"}], [{"type": "path", "path": "p"}], [{"type": "svn", "url": "u"}],
            [{"x": False}], [{"type": False}], [{"x": True}], [{}], [{"type": "git"}], [{"x": False, "y": False}]]
    assert _judged_as_jsonschema_judges(schema, docs, True, monkeypatch) == [True, True]


def test_one_of_a_branch_of_any_type_is_apart_from_an_object_by_a_tag(monkeypatch):
    """One branch says no ``type`` (tree-sitter's ``field-rule``): common values
    are objects, where the required tag tells the branches apart."""
    schema = {"oneOf": [
        {"required": ["t"], "properties": {"t": {"type": "string", "pattern": "^FIELD$"}}},
        {"type": "object", "required": ["t"], "properties": {"t": {"type": "string", "pattern": "^BLANK$"}}}]}
    docs = ["x", 3, None, {"t": "FIELD"}, {"t": "BLANK"}, {"t": "OTHER"}, {}, [1]]
    assert _judged_as_jsonschema_judges(schema, docs, True, monkeypatch) == [True]


def _no_supersets_at_all(monkeypatch):
    import guided.grammars.json_schema.compiler as js

    def refuse(self, schema, path, depth):
        raise AssertionError(f"superset built at {path}")
    monkeypatch.setattr(js.SchemaCompiler, "negated_dfa", refuse)


def test_one_of_apart_by_the_keys_of_a_key_value(monkeypatch):
    """dependency-cruiser's rules: both kinds require ``to``, whose objects differ by
    a key one requires (``reachable``) and the other's ``additionalProperties:
    false`` forbids. Told apart a level down, by keys, with no superset."""
    _no_supersets_at_all(monkeypatch)
    to_plain = {"type": "object", "additionalProperties": False, "properties": {"path": {"type": "string"}}}
    to_reach = {"required": ["reachable"], "additionalProperties": False,
                "properties": {"path": {"type": "string"}, "reachable": {"type": "boolean"}}}
    schema = {"type": "array", "items": {"oneOf": [
        {"type": "object", "required": ["to"], "additionalProperties": False, "properties": {"name": {"type": "string"}, "to": to_plain}},
        {"type": "object", "required": ["to"], "additionalProperties": False, "properties": {"name": {"type": "string"}, "to": to_reach}}]}}
    dfa = compile_json_schema(schema, "compact")
    validator = _validator(schema)
    for doc in ([{"to": {}}], [{"to": {"path": "a"}}], [{"to": {"reachable": True}}], [{"name": "n", "to": {"path": "a", "reachable": False}}],
                [{"to": "x"}], [{"to": {"reachable": 1}}], [{}], [{"to": {"other": 1}}]):
        assert dfa.matches(compact(ordered(doc, schema))) == validator.is_valid(doc), doc


def test_one_of_apart_by_which_keys_are_present(monkeypatch):
    """JSON-RPC responses: a success requires ``result``, an error requires ``error``,
    and both say ``not: {required: [result, error]}`` (through ``allOf`` and
    ``$ref``): no object is both, shown from the keys alone, with no superset."""
    _no_supersets_at_all(monkeypatch)
    schema = {"$defs": {
        "common": {"type": "object", "required": ["id"], "not": {"required": ["result", "error"]},
                   "properties": {"id": {"type": "integer"}}},
        "success": {"allOf": [{"$ref": "#/$defs/common"}, {"required": ["result"]}]},
        "error": {"allOf": [{"$ref": "#/$defs/common"}, {"required": ["error"], "properties": {"error": {"type": "string"}}}]}},
        "oneOf": [{"$ref": "#/$defs/success"}, {"$ref": "#/$defs/error"}]}
    dfa = compile_json_schema(schema, "compact")
    validator = _validator(schema)
    for doc in ({"id": 1, "result": 2}, {"id": 1, "error": "e"}, {"id": 1, "result": 2, "error": "e"}, {"id": 1},
                {"result": 1}, {"id": 1, "error": 3}, [], "x"):
        assert dfa.matches(compact(ordered(doc, schema))) == validator.is_valid(doc), doc


@pytest.mark.parametrize("schema", [
    # A oneOf with a branch every value satisfies (a misspelt "$ref") holds where no
    # other branch does; its negation is "some other branch holds".
    {"not": {"oneOf": [{"#ref": "#/$defs/x"}, {"type": "string"}]}},
    {"not": {"oneOf": [{}, {"x-note": 1}]}},
    {"oneOf": [{"type": "object", "required": ["a"]}, {"oneOf": [{}, {"x-note": 1}]}]},
    {"type": "object", "properties": {"a": {"not": {"oneOf": [{"title": "t"}, {"type": "integer"}, {"maxLength": 1}]}}}},
    # Arrays told apart by their counts alone.
    {"oneOf": [{"type": "array", "maxItems": 2}, {"type": "array", "minItems": 1}]},
    # ... or by their counts and items: the superset subtracted counts items too.
    {"oneOf": [{"items": {"type": "integer"}}, {"maxItems": 1}]},
    {"oneOf": [{"type": "array", "items": {"type": "string"}, "minItems": 2},
               {"type": "array", "items": {"type": "string"}, "maxItems": 3}]},
    {"properties": {"a": {"not": {"type": "array", "minItems": 1}}}},
    {"if": {"type": "array", "maxItems": 1, "items": False}, "then": {"type": "array"}, "else": {"type": "string"}},
])
def test_negations_of_one_of_and_array_counts_are_exact(schema):
    """These negations are unions of schemas, or supersets that count items. Before,
    the ``oneOf`` negations and the count-only ``oneOf`` were refused as
    unsatisfiable, and ``{"a": []}`` under a negated ``minItems``, ``[1, 2]`` and
    ``["a", "b", "c", "d"]`` under the counted ``oneOf`` were refused."""
    dfa = compile_json_schema(schema, "compact")
    validator = _validator(schema)
    docs = ["ab", "a", 1, 2.5, None, [], [1], [1, 2], [1, 2, 3], ["a"], ["a", "b"], ["a", "b", "c", "d"], {},
            {"a": []}, {"a": [1]}, {"a": 1}, {"a": "x"}, {"a": "xy"}, {"a": 1.5}, {"b": 1}]
    for doc in docs:
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


@pytest.mark.parametrize("schema", [
    # Composer's package: an untyped object schema (any array, string... passes it)
    # against an array of them. Arrays of packages match both; objects only the first.
    {"$defs": {"pkg": {"required": ["name"], "properties": {"name": {"type": "string"}}}},
     "oneOf": [{"$ref": "#/$defs/pkg"}, {"type": "array", "items": {"$ref": "#/$defs/pkg"}}]},
    {"oneOf": [{"type": ["integer", "string"], "minimum": 3}, {"type": ["number", "null"]}, {"maxLength": 2}]},
])
def test_one_of_split_by_type_is_exact(schema):
    """Split by JSON type, each type's part holds only the branches that allow it.
    (Arrays with an item that is not a package are valid in the first schema but
    refused: the array branch's superset, subtracted there, is too coarse. Before
    the split they were refused too, and objects went through the same subtraction.)"""
    dfa = compile_json_schema(schema, "compact")
    validator = _validator(schema)
    docs = [{"name": "a"}, {}, {"name": 1}, [], [{"name": "a"}], "ab", "abc", None, 2, 3, 4.5, True]
    for doc in docs:
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


def test_one_of_key_values_overlap_through_additional_properties(monkeypatch):
    """A required key whose value the other branch leaves to ``additionalProperties``
    of an overlapping type: not apart, so a document valid under both is refused."""
    schema = {"oneOf": [
        {"type": "object", "required": ["k"], "properties": {"k": {"type": "string"}}},
        {"type": "object", "additionalProperties": {"type": "string"}}]}
    docs = [{"k": "x"}, {"k": "x", "z": 1}, {"z": "y"}, {}, {"k": 1}, {"k": "x", "z": "y"}]
    assert _judged_as_jsonschema_judges(schema, docs, False, monkeypatch) == [False]


def test_one_of_a_required_key_the_other_branch_forbids(monkeypatch):
    schema = {"oneOf": [
        {"type": "object", "required": ["k"]},
        {"type": "object", "properties": {"j": {}}, "additionalProperties": False}]}
    docs = [{"k": 1}, {"j": 1}, {}, {"k": 1, "j": 2}, {"z": 1}, {"j": 1, "z": 1}]
    assert _judged_as_jsonschema_judges(schema, docs, True, monkeypatch) == [True]


def _one_of_unions(mp) -> list:
    """Record, per ``oneOf`` compiled, which branches were exact unions of merged
    schemas (True) and which were left to subtraction (False)."""
    import guided.grammars.json_schema.logic.combinators as logic

    seen: list = []
    original = logic.LogicCompiler._one_of_as_unions

    def recording(self, *args):
        got = original(self, *args)
        seen.append([u is not None for u in got])
        return got

    mp.setattr(logic.LogicCompiler, "_one_of_as_unions", recording)
    return seen


def _exact_unions_in_any_order(schema, docs):
    """Every ``oneOf`` of ``schema`` compiles as exact unions (no branch subtracted),
    and every doc, keys in any order, is judged as jsonschema judges it."""
    validator = _validator(schema)
    with pytest.MonkeyPatch.context() as mp:
        unions = _one_of_unions(mp)
        dfa = compile_json_schema(schema, "compact", key_order="any")
    assert unions and all(all(u) for u in unions)
    for doc in docs:
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


def test_one_of_closed_branches_overlapping_on_the_empty_object_stay_unions():
    """Closed objects of optional keys (bitbucket's ``step`` / ``stage`` /
    ``parallel``) all take ``{}``. A closed branch fails another closed one by having
    a key the other does not list, so each branch minus the others is a union of
    merged schemas: no automaton algebra, which holds keys in ``properties`` order
    only. Before, ``{"name": ..., "step": ...}`` was refused with keys in any order."""
    schema = {"type": "array", "items": {"oneOf": [
        {"type": "object", "properties": {"step": {"type": "object", "properties": {"a": {"type": "integer"}}},
                                          "name": {"type": "string"}}, "additionalProperties": False},
        {"type": "object", "properties": {"stage": {"type": "string"}}, "additionalProperties": False},
        {"type": "object", "properties": {"parallel": {"type": "array"}, "step": {"type": "object"}},
         "additionalProperties": False},
    ]}}
    docs = [[{"step": {"a": 1}}], [{"name": "x", "step": {"a": 1}}], [{"step": {"a": 1}, "name": "x"}],
            [{"stage": "x"}], [{}], [{"parallel": []}], [{"parallel": [], "step": {}}], [{"step": {}}],
            [{"step": {"a": "x"}}], [{"stage": "x", "step": {}}], [{"name": "x"}], [{"name": 1}],
            [{"step": {}, "name": "n"}], [{"stage": 1}]]
    validator = _validator(schema)
    with pytest.MonkeyPatch.context() as mp:
        unions = _one_of_unions(mp)
        for order in ("schema", "any"):
            dfa = compile_json_schema(schema, "compact", key_order=order)
            for doc in docs:
                in_order = order == "any" or list(doc[0]) == [k for k in ("step", "name") if k in doc[0]] \
                    or "stage" in doc[0] or "parallel" in doc[0]
                if in_order:
                    assert dfa.matches(compact(doc)) == validator.is_valid(doc), (order, doc)
    assert unions and all(all(u) for u in unions)


def test_one_of_subtracts_only_the_branches_whose_negations_are_no_unions():
    """Branch C is open, so "has a key that closed A does not list" is no union of
    schemas in C: C alone is left to subtraction. A and B are still exact unions of
    merged schemas, so B's keys stand in any order."""
    schema = {"oneOf": [
        {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "string"}}, "additionalProperties": False},
        {"type": "object", "properties": {"x": {"type": "string"}, "z": {}}, "additionalProperties": False},
        {"type": "object", "properties": {"x": {"type": "integer"}}},
    ]}
    validator = _validator(schema)
    docs = [{}, {"x": 1}, {"x": "s"}, {"x": "s", "z": 1}, {"z": 1, "x": "s"}, {"z": 1}, {"x": 1, "y": "t"},
            {"y": "t"}, {"x": 1, "w": True}, {"w": True}, {"x": 1.5}, {"x": "s", "w": 1}, [], "s"]
    with pytest.MonkeyPatch.context() as mp:
        unions = _one_of_unions(mp)
        for order in ("schema", "any"):
            dfa = compile_json_schema(schema, "compact", key_order=order)
            for doc in docs:
                if order == "any" or not isinstance(doc, dict) or list(doc) != ["z", "x"]:
                    assert dfa.matches(compact(doc)) == validator.is_valid(doc), (order, doc)
    assert unions == [[True, True, False]] * 2


def test_one_of_choices_that_only_narrow_others_are_dropped():
    """GeoJSON's geometries: a GeometryCollection fails each of four shapes in four
    ways, 256 choices (past ``MAX_ONE_OF_CHOICES``), but "no coordinates" fails all
    four at once: 18 choices are left, so the ``oneOf`` is a union of merged schemas
    (keys in any order)."""
    def shape(kind, coordinates):
        return {"type": "object", "required": ["type", "coordinates"], "properties": {
            "type": {"enum": [kind]}, "coordinates": coordinates, "bbox": {"type": "array", "minItems": 4}}}

    point = {"type": "array", "minItems": 2, "items": {"type": "number"}}
    line = {"type": "array", "minItems": 2, "items": point}
    schema = {"oneOf": [{"type": "null"}, shape("Point", point), shape("LineString", line),
                        shape("MultiPoint", {"type": "array", "items": point}),
                        shape("MultiLineString", {"type": "array", "items": line}),
                        {"type": "object", "required": ["type", "geometries"],
                         "properties": {"type": {"type": "string"}, "geometries": {"type": "array"},
                                        "bbox": {"type": "array", "minItems": 4}}}]}
    docs = [None, {"type": "Point", "coordinates": [1, 2]}, {"coordinates": [1, 2], "type": "Point"},
            {"type": "Point", "coordinates": [1]}, {"type": "LineString", "coordinates": [[1, 2], [3, 4]]},
            {"type": "MultiPoint", "coordinates": []}, {"type": "GeometryCollection", "geometries": []},
            {"type": "Point", "coordinates": [1, 2], "geometries": []}, {"type": "Point"},
            {"type": "Point", "geometries": [], "bbox": [1]}, {"type": "X", "geometries": [], "bbox": [1, 2, 3, 4]}]
    _exact_unions_in_any_order(schema, docs)


def test_one_of_branches_that_are_all_of_a_shared_base_negate_merged():
    """vzlogger's meters: each branch is ``allOf [{"$ref": meter}, {its protocol and
    keys}]``, and the protocol is optional, so the branches overlap. Merged, each is
    an object of ``type`` / ``required`` / ``properties``, which negates as a union of
    schemas: no subtraction, keys in any order."""
    schema = {"$defs": {"meter": {"type": "object", "required": ["enabled"],
                                  "properties": {"enabled": {"type": "boolean"}, "interval": {"type": "integer"}}}},
              "type": "array", "items": {"oneOf": [
                  {"allOf": [{"$ref": "#/$defs/meter"}, {"properties": {"protocol": {"enum": ["s0"]}, "gpio": {"type": "integer"}}}]},
                  {"allOf": [{"$ref": "#/$defs/meter"}, {"properties": {"protocol": {"enum": ["d0"]}, "host": {"type": "string"}}}]},
              ]}}
    docs = [[{"enabled": True, "protocol": "s0"}], [{"protocol": "d0", "enabled": True, "host": "h"}],
            [{"enabled": True}], [{"enabled": True, "gpio": 1}], [{"enabled": True, "gpio": "x"}],
            [{"enabled": True, "host": 1}], [{"enabled": True, "protocol": "d0", "gpio": 1}],
            [{"enabled": True, "protocol": "x"}], [{"protocol": "s0"}], [{"interval": 5, "enabled": False, "host": 1}]]
    _exact_unions_in_any_order(schema, docs)


def test_a_forbidden_key_merges_into_an_object_with_pattern_properties():
    """``"not": {"required": ["docker"]}`` beside ``patternProperties`` and
    ``additionalProperties: false`` (bitbucket's caches) merges as ``docker: false``
    whatever the patterns say of that key. Before, the merge gave up and the
    automaton algebra bounded how deep the values under the patterns may nest."""
    schema = {"type": "object", "additionalProperties": False, "not": {"required": ["docker"]},
              "patternProperties": {"^[a-z]+$": {"oneOf": [{"type": "string"}, {
                  "type": "object", "properties": {"key": {"type": "object", "properties": {"files": {
                      "type": "array", "items": {"type": "string"}}}}}}]}}}
    validator = _validator(schema)
    docs = [{"cache": {"key": {"files": ["pom.xml"]}}}, {"cache": "x"}, {}, {"docker": "x"}, {"Docker": "x"},
            {"cache": {"key": {"files": [1]}}}, {"cache": {"key": {"files": [["deep"]]}}}]
    for order in ("schema", "any"):
        dfa = compile_json_schema(schema, "compact", key_order=order)
        for doc in docs:
            assert dfa.matches(compact(doc)) == validator.is_valid(doc), (order, doc)


def test_one_of_overlap_shown_by_a_sampled_value(monkeypatch):
    """A sampled value valid under both branches shows they overlap: no superset of
    either (a 2000-character string's counter) is built to find that out, and a
    document matching both is still refused."""
    schema = {"oneOf": [
        {"type": "object", "required": ["a"], "properties": {"a": {"type": "string", "maxLength": 2000}}},
        {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}]}
    docs = [{"a": "x"}, {}, {"b": 1}, {"a": "x", "b": 1}, {"a": 1}, {"a": "x" * 2001}]
    assert _judged_as_jsonschema_judges(schema, docs, True, monkeypatch) == [False]


def test_all_of_parts_with_their_own_all_of_merge_without_algebra(monkeypatch):
    """Two ``allOf`` parts that are each an ``allOf`` of a shared base and more keys
    (cloudify's Kubernetes types) are spread into one list of parts and merged by
    keywords, not intersected as whole-object automata; documents are judged as
    jsonschema judges them, in both key orders."""
    import guided.grammars.json_schema.compiler as js

    def no_algebra(*args, **kwargs):
        raise AssertionError("allOf parts intersected as automata")

    monkeypatch.setattr(js, "intersect", no_algebra)
    schema = {
        "definitions": {
            "base": {"type": "object", "properties": {"kind": {"type": "string"}, "name": {"type": "string"}},
                     "required": ["kind"]},
            "sized": {"allOf": [{"$ref": "#/definitions/base"},
                                {"properties": {"size": {"type": "integer", "minimum": 1}}}]},
            "tagged": {"allOf": [{"$ref": "#/definitions/base"},
                                 {"properties": {"tags": {"type": "array", "items": {"type": "string"}}},
                                  "required": ["tags"]}]},
        },
        "allOf": [{"$ref": "#/definitions/sized"}, {"$ref": "#/definitions/tagged"}],
    }
    validator = _validator(schema)
    values = {"kind": ["k", 1], "name": ["n"], "size": [3, 0], "tags": [["t"], [1]]}
    docs = []
    for n in range(5):
        for keys in itertools.combinations(values, n):
            for choice in itertools.product(*(values[k] for k in keys)):
                docs.append(dict(zip(keys, choice)))
    assert any(validator.is_valid(d) for d in docs) and not all(validator.is_valid(d) for d in docs)
    for order in ("schema", "any"):
        dfa = compile_json_schema(schema, "compact", key_order=order)
        for doc in docs:
            assert dfa.matches(compact(doc)) == validator.is_valid(doc), (order, doc)


@pytest.mark.parametrize("schema", [
    # Two nots in one allOf (calculate_area in MaskBench: "not a circle", "not a square").
    {"type": "object", "allOf": [{"not": {"required": ["a"]}}, {"not": {"required": ["b", "c"]}}]},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "not": {"properties": {"x": {"not": {}}}, "required": ["y"]},
     "allOf": [{"not": {"required": ["b"]}}]},
    {"type": "object", "allOf": [{"if": {"properties": {"k": {"const": 1}}, "required": ["k"]}, "then": {"required": ["a"]}},
                                 {"not": {"required": ["b"]}}]},
])
def test_all_of_logic_parts_spread_as_unions_of_merged_schemas(schema, monkeypatch):
    """``not`` and ``if`` parts of an ``allOf`` whose conditions negate to unions of
    schemas become choices of merged schemas: no intersection of whole-object
    automata, exact."""
    import guided.grammars.json_schema.compiler as js

    def no_algebra(*args, **kwargs):
        raise AssertionError("allOf parts intersected as automata")

    monkeypatch.setattr(js, "intersect", no_algebra)
    dfa = compile_json_schema(schema, "compact", key_order="any")  # extra keys stand anywhere
    validator = _validator(schema)
    keys = ["a", "b", "c", "k", "x", "y"]
    for n in range(4):
        for chosen in itertools.combinations(keys, n):
            for value in (1, "s"):
                doc = {k: value for k in chosen}
                assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


def test_one_of_union_too_large_for_the_nfa_falls_back_to_algebra(monkeypatch):
    """Branches kept as NFA fragments copy every sub-schema in full; when the copies
    outgrow the NFA's limit (lowered here; 400,000 states in use), the half-built
    union is dropped and the branches are subtracted as minimal DFAs instead, with
    the same language, not a size error."""
    import guided.fsm.nfa

    word = {"type": "string", "pattern": "^(" + "|".join(f"w{i}x{i * 7}" for i in range(40)) + ")$"}
    schema = {"type": "array", "items": {"oneOf": [
        {"type": "object", "required": ["kind"], "additionalProperties": False,
         "properties": {"kind": {"const": k}, **{f"p{i}": word for i in range(4)}}}
        for k in ("a", "b")]}}
    monkeypatch.setattr(guided.fsm.nfa, "MAX_NFA_STATES", 12_000)
    dfa = compile_json_schema(schema, "compact")
    validator = _validator(schema)
    docs = ([], [{"kind": "a", "p0": "w3x21"}], [{"kind": "b", "p1": "w39x273", "p3": "w0x0"}, {"kind": "a"}],
            [{"kind": "a", "p0": "w3x22"}], [{"kind": "c"}], [{"p0": "w1x7"}])
    for doc in docs:
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


def test_one_string_type_in_many_places_keeps_each_places_bounds():
    """Bounded pattern strings are built once per (constraints, bounds) in a compile:
    places that share the pattern but not the bounds each keep their own."""
    word = "^x+$"
    schema = {"type": "object", "properties": {
        "a": {"type": "string", "pattern": word, "maxLength": 3},
        "b": {"type": "string", "pattern": word, "maxLength": 5},
        "c": {"type": "string", "pattern": word, "minLength": 2},
        "d": {"type": "string", "pattern": word, "maxLength": 3},
        "e": {"type": "string", "pattern": word, "format": "email", "maxLength": 3}}}
    dfa = compile_json_schema(schema, "compact")
    validator = _validator(schema)
    for key in "abcde":
        for n in range(7):
            doc = {key: "x" * n}
            assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


@pytest.mark.parametrize("pattern,everywhere", [
    ("([0-9a-zA-Z]+)?", True), (".*", True), ("(?s).*", True), ("a|", True), ("x?y?", True),
    ("^.*$", False),      # "a\nb": $ matches only at the end or before a final newline
    ("^$|.", False),      # "\n\n"
    ("^[a-z]*$", False), ("[a-z]+", False), ("^$", False),
])
def test_a_pattern_found_in_every_string_is_dropped_and_no_other(pattern, everywhere):
    """``re.search`` always succeeds for such a pattern, so it constrains nothing; the
    check must agree with ``re`` itself (newlines and anchors included)."""
    import re

    from guided.grammars.json_schema.strings import always_found as _always_found

    assert _always_found(pattern) is everywhere
    samples = ["", "a", "A1", "\n", "\n\n", "a\nb", "x y", "é", "-", "ab\n"]
    assert all(re.search(pattern, t) for t in samples) or not everywhere
    schema = {"type": "string", "pattern": pattern, "maxLength": 4}
    dfa = compile_json_schema(schema, "compact")
    for t in samples:
        assert dfa.matches(compact(t)) == _validator(schema).is_valid(t), (pattern, t)


@pytest.mark.parametrize("pattern", [
    "^.*$", "a$", "^a$", "^$", "(?m)^a$", "(?m)a$", "(?m)^a", "(?m)^$", r"a\Z", r"\Aa", "^a|b$", "(a|^b)$",
])
def test_pattern_anchors_mean_what_re_search_means(pattern):
    """``$`` also holds before a final newline and ``(?m)`` anchors at any line's
    ends, as in ``re.search``, which the validator runs."""
    import itertools

    schema = {"type": "string", "pattern": pattern}
    dfa = compile_json_schema(schema, "compact")
    validator = _validator(schema)
    for n in range(4):
        for chars in itertools.product("ab\n", repeat=n):
            text = "".join(chars)
            assert dfa.matches(compact(text)) == validator.is_valid(text), (pattern, text)


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
    "properties" (as in key-sorted schemas): the keys keep the properties' order
    (Github_easy o10011, which llguidance passes)."""
    schema = {
        "oneOf": [{"properties": {"grant": {"enum": ["code"]}, "response": {"enum": ["c"]}}, "required": ["grant"]},
                  {"properties": {"grant": {"enum": ["token"]}, "response": {"enum": ["t"]}}, "required": ["grant"]}],
        "properties": {"grant": {"type": "string"}, "uris": {"type": "array"}, "response": {"type": "string"}},
        "additionalProperties": False, "type": "object",
    }
    dfa = compile_json_schema(schema, "compact")
    doc = {"grant": "code", "uris": ["x"], "response": "c"}
    assert _validator(schema).is_valid(doc) and dfa.matches(compact(doc))
    assert not dfa.matches(compact({"grant": "code", "response": "c", "uris": ["x"]}))
    assert not dfa.matches(compact({"grant": "code", "uris": ["x"], "response": "t"}))


def test_an_any_of_part_between_all_of_parts_writes_its_keys_in_place():
    """The keys an allOf part's anyOf branch adds come where that part stands among
    the parts, not after every other part's keys (browscap's ``child``:
    Github_medium o60846, which llguidance passes): ``match``, then ``devices`` or
    ``device``, then ``platforms``. Also where another part would not merge and the
    anyOf is spread into choices, and where the anyOf stands beside its part's
    properties, listed first."""
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
        validator = _validator(schema)
        for doc in in_order:
            assert validator.is_valid(doc) and dfa.matches(compact(doc)), (schema, doc)
        for doc in late:
            assert validator.is_valid(doc) and not dfa.matches(compact(doc)), (schema, doc)
    # The branch's keys come before its part's own properties when the anyOf is
    # listed first in that part.
    schema = {"allOf": [first, {**either, "properties": {"browser": {"type": "string"}}}, last]}
    assert compile_json_schema(schema, "compact").matches(compact({"match": "a", "device": "d", "browser": "b"}))
    assert not compile_json_schema(schema, "compact").matches(compact({"match": "a", "browser": "b", "device": "d"}))


def test_all_of_parts_differing_in_unknown_keywords_still_merge():
    """Keywords no draft defines (x-intellij-html-description beside a $ref in the
    skaffold schemas) constrain nothing: two allOf parts that disagree on one must
    merge, not fall back to automaton algebra, whose open values nest only
    ANY_DEPTH levels (that refused deep valid documents)."""
    deep = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {}}}}, "x-doc": "one"}
    schema = {"$defs": {"deep": deep}, "properties": {"top": {"$ref": "#/$defs/deep", "x-doc": "two"}}}
    dfa = compile_json_schema(schema, "compact")
    doc = {"top": {"a": {"b": {"c": {"d": {"e": [1, {"f": 2}]}}}}}}
    assert _validator(schema).is_valid(doc)
    assert dfa.matches(compact(doc))


PRESENCE_LOGIC = [
    {"oneOf": [{"required": ["length", "width"], "not": {"required": ["base", "height"]}},
               {"required": ["base", "height"], "not": {"required": ["length", "width"]}}]},
    {"not": {"allOf": [{"required": ["base"]}, {"required": ["width"]}]}},
    {"anyOf": [{"required": ["base"], "not": {"required": ["height"]}}, {"oneOf": [{"required": ["length"]}, {"required": ["width"]}]}]},
    {"oneOf": [{"required": ["base"]}, {}]},
    {"not": {"required": ["base", "height", "length", "width"]}},
]


@pytest.mark.parametrize("logic", PRESENCE_LOGIC, ids=["either_or", "not_both", "nested", "one_of_true", "not_all"])
@pytest.mark.parametrize("typed", [True, False])
def test_logic_over_which_keys_are_present(logic, typed):
    """oneOf / not over required keys compile to a union of key sets: every subset of
    the keys (and, untyped, other JSON values) is judged as jsonschema judges it."""
    keys = ["base", "height", "length", "width"]
    schema = {"properties": {k: {"type": "number"} for k in keys + ["radius"]}, "required": ["radius"], **logic}
    if typed:
        schema["type"] = "object"
    dfa = compile_json_schema(schema, "compact")
    validator = _validator(schema)
    for mask in range(1 << len(keys)):
        for radius in (True, False):
            doc = {k: i + 1 for i, k in enumerate(keys) if mask >> i & 1}
            if radius:
                doc["radius"] = 2.5
            text = compact(ordered(doc, schema))
            assert dfa.matches(text) == validator.is_valid(doc), text
    for other in ("x", 3, None, [1]):
        assert dfa.matches(compact(other)) == validator.is_valid(other), other


def test_logic_over_present_keys_is_one_object_per_implicant():
    """"Not all of these seven keys": seven objects (one key missing each), not one
    per combination of the seven (127); ansible's meta schema spread such an object
    of 60 platforms into four ``allOf`` choices, past the automaton size limit."""
    from guided.grammars.json_schema.logic.presence import presence_keys, presence_variants

    keys = [f"k{i}" for i in range(7)]
    schema = {"type": "object", "properties": {k: {"type": "integer"} for k in keys + ["d"]},
              "required": ["d"], "not": {"required": keys}}
    variants = presence_variants(schema, presence_keys(schema))
    missing = [[k for k in keys if v["properties"][k] is False] for v in variants]
    assert sorted(missing) == [[k] for k in keys]
    assert all(v["required"] == ["d"] for v in variants)


KEY_ORDER_SHAPES = {
    "closed": {"type": "object", "additionalProperties": False, "required": ["a"],
               "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 3}, "c": {"type": "boolean"}}},
    "max_properties": {"type": "object", "maxProperties": 2, "required": ["b"],
                       "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}},
    "min_properties": {"type": "object", "minProperties": 3,
                       "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}},
    "patterns": {"type": "object", "additionalProperties": False,
                 "properties": {"a": {"type": "integer"}}, "patternProperties": {"^x": {"type": "boolean"}}},
    "impossible_optional": {"type": "object", "required": ["a"],
                            "properties": {"a": {"type": "integer"}, "b": {"not": {}}}},
    "nested": {"type": "object", "properties": {
        "a": {"type": "object", "properties": {"p": {"type": "integer"}, "q": {"type": "null"}}},
        "b": {"type": "integer"}}},
}


@pytest.mark.parametrize("whitespace", ["compact", "flexible", {"indent": 2}], ids=["compact", "flexible", "indent"])
@pytest.mark.parametrize("name", sorted(KEY_ORDER_SHAPES))
def test_any_key_order_agrees_with_jsonschema(name, whitespace):
    """key_order="any": every ordering of up to four keys (named, extra, nested) is
    judged as jsonschema judges it; schema order refuses the reordered valid ones."""
    import itertools

    schema = KEY_ORDER_SHAPES[name]
    dfa = compile_json_schema(schema, whitespace, key_order="any")
    ordered_only = compile_json_schema(schema, whitespace)
    validator = _validator(schema)
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
    validator = _validator(schema)
    before = len(dfa._nfa)
    assert dfa.matches(b'{"k3":1,"k1":2,"k5":3,"p1":{"f2":"ab"},"k0":4}')
    # Five nodes: built in each, the large value took ~29,000 states; deferred, ~8,000.
    assert len(dfa._nfa) - before < 12_000
    docs = [{"k3": 1, "k1": 2, "zz": "abc"}, {"k2": 1, "p": {"f1": "x"}}, {"k4": 0, "p": {}, "q": 1},
            {"k0": 1, "k1": 1, "k2": 1, "k3": 1, "k4": 1, "k5": 1, "pp": {"f29": "zz", "f0": "aa"}}]
    for doc in docs:
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


def test_large_format_automata_are_copied_in_where_decoding_reaches_them():
    """A format with a large DFA (regex: 22k edges; hostname: 3.3k) is copied into
    the lazy automaton only where a document reaches it: 40 hostnames compile to a
    few thousand NFA states instead of ~40 copies, and reading builds the copies it
    needs. Verdicts are those of the formats' own tests (``test_json_formats``:
    jsonschema checks hostnames only with the optional fqdn package)."""
    schema = {"type": "object", "additionalProperties": False,
              "properties": {f"h{i}": {"type": "string", "format": "hostname"} for i in range(40)}
              | {"rx": {"type": "array", "items": {"type": "string", "format": "regex"}}}}
    dfa = compile_json_schema(schema, "compact")
    compiled = dfa.nfa_size
    assert compiled < 5_000  # one hostname copy is ~750 NFA states, one regex copy ~770
    for doc, valid in [({"h39": "example.com"}, True), ({"h39": "-bad.com"}, False), ({"h0": "a.b", "h7": "exa_mple.com"}, False),
                       ({"rx": ["^a+$", "(?:x)"]}, True), ({"rx": ["a**"]}, False), ({"rx": ["[z-a]"]}, False),
                       ({"h12": "localhost", "rx": ["\\d+", "[a-z]{2,}"]}, True)]:
        assert dfa.matches(compact(doc)) == valid, doc
    assert dfa.nfa_size > compiled + 1_000  # the copies the documents reached


# oneOf branches that overlap (a document can satisfy both) and whose negations are no
# union of schemas: built whole and combined by automaton algebra.
ALGEBRA_ONE_OF = {"oneOf": [
    {"type": "object", "additionalProperties": False, "required": ["a"],
     "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}}},
    {"type": "object", "required": ["b"], "minProperties": 2, "properties": {"b": {"type": "string"}}},
]}


def _orderings(values, most):
    import itertools

    return [{k: values[k] for k in keys} for n in range(most + 1) for keys in itertools.permutations(values, n)]


@pytest.mark.parametrize("whitespace", ["compact", "flexible"])
def test_any_key_order_reaches_objects_built_for_automaton_algebra(whitespace):
    """Objects inside the automata built whole for oneOf algebra take their keys in any
    order too: every ordering of up to four keys is judged as jsonschema judges it."""
    dfa = compile_json_schema(ALGEBRA_ONE_OF, whitespace, key_order="any")
    ordered_only = compile_json_schema(ALGEBRA_ONE_OF, whitespace)
    validator = _validator(ALGEBRA_ONE_OF)
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
    validator = _validator(small)
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


def test_one_of_is_exclusive():
    dfa = dfa_for("one_of_overlapping")
    assert dfa.matches(b"-5") and dfa.matches(b"11")
    assert not dfa.matches(b"5")  # matches both branches


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


# -- bad input -------------------------------------------------------------------------


def test_unsupported_keyword_names_keyword_and_pointer():
    schema = {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}}
    with pytest.raises(guided.UnsupportedSchemaError) as e:
        compile_json_schema(schema)
    assert "uniqueItems" in str(e.value) and "#/properties/tags/uniqueItems" in str(e.value)
    assert e.value.keyword == "uniqueItems"


BIG_UNIQUE = {"type": "array", "items": {"enum": [f"v{i}" for i in range(30)]}, "uniqueItems": True}


@pytest.mark.parametrize("schema, pointer", [
    # A oneOf split by JSON type (some branch allows no objects): the parts are made
    # by the compiler, and errors inside them still name the user's branch.
    ({"properties": {"a": {"type": ["array", "null"], "oneOf": [{"$ref": "#/$defs/k"}, {"type": "array", "maxItems": 1},
                                                                 {"type": "null"}]}},
      "$defs": {"k": BIG_UNIQUE}}, "#/properties/a/oneOf/0/uniqueItems"),
    ({"type": ["array", "string"], "oneOf": [{"type": "string"}, {"type": "string", "maxLength": 2}, BIG_UNIQUE]},
     "#/oneOf/2/uniqueItems"),
    ({"type": ["array", "string"], "oneOf": [{"type": "string"}, BIG_UNIQUE, {"type": "array", "maxItems": 3}]},
     "#/oneOf/1/uniqueItems"),
])
def test_errors_inside_a_one_of_split_by_type_name_the_branch(schema, pointer):
    with pytest.raises(guided.UnsupportedSchemaError) as e:
        compile_json_schema(schema, "compact")
    assert e.value.pointer == pointer and e.value.keyword == "uniqueItems"


def test_one_of_beside_a_branch_that_takes_every_value_is_subtracted_exactly():
    """``oneOf [{}, X]`` holds exactly the values outside X. Where such a ``oneOf`` is
    itself subtracted (the items of another branch here), its superset is split by
    type too, not the union of its branches (any value): ``["a","b"]`` is valid, since
    the array branch refuses string items, and was refused. ``instanceof`` is no
    draft's keyword: that branch takes every value."""
    items = {"oneOf": [{"instanceof": "RegExp"}, {"type": "string"}]}
    schema = {"oneOf": [{}, {"type": "string"}, {"type": "array", "items": items, "minItems": 1}]}
    dfa = compile_json_schema(schema, "compact")
    validator = jsonschema.Draft202012Validator(schema)
    for value in [["a", "b"], ["a", 1], [1, "a"], [1], [[]], [], "a", 1, None, {}]:
        text = json.dumps(value, separators=(",", ":")).encode()
        assert dfa.matches(text) == validator.is_valid(value), value


def _noise_module(name: str) -> dict:
    return {"type": "object", "additionalProperties": False, "required": ["type"],
            "properties": {"type": {"type": "string", "pattern": f"^{name}$"}, "Frequency": {"type": "number"},
                           "Lacunarity": {"type": "number"}, "Persistence": {"type": "number"},
                           "OctaveCount": {"type": "number", "multipleOf": 1},
                           "NoiseQuality": {"$ref": "#/definitions/quality"}, "Seed": {"type": "number", "multipleOf": 1},
                           "comment": {"type": "string"}}}


def test_one_of_branch_is_not_cut_by_the_superset_of_a_branch_apart_from_it():
    """Github_ultra o17072 (a list of noise modules, told apart by a ``type``
    pattern), cut to three branches: the selector is not shown apart from the
    others, so each branch is taken minus the others' supersets, and Perlin lost
    every value to Billow's superset, though the two were shown apart."""
    properties = {"type": {"type": "string", "pattern": "^QuadrantSelector$"},
                  "SourceModule": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}}
    exclusive = []  # per group: "Translate" or some of X/Y/ZTranslate, not both
    for group in ("Translate", "TranslateIgnored"):
        properties[group] = {"type": "array", "minItems": 3, "maxItems": 3, "items": {"type": "boolean"}}
        properties.update({axis + group: {"type": "boolean"} for axis in "XYZ"})
        axes = [{"not": {"required": [axis + group]}} for axis in "XYZ"]
        exclusive.append({"anyOf": [{"not": {"required": [group]}}, {"allOf": axes},
                                    {"allOf": axes + [{"not": {"required": [group]}}]}]})
    selector = {"type": "object", "additionalProperties": False, "properties": properties,
                "allOf": [{"required": ["type", "SourceModule"]}] + exclusive}
    schema = {"$schema": "http://json-schema.org/draft-04/schema#",
              "definitions": {"quality": {"oneOf": [{"type": "string", "enum": ["Fast", "Standard", "Best"]},
                                                    {"type": "number", "enum": [0, 1, 2]}]}},
              "oneOf": [_noise_module("Perlin"), _noise_module("Billow"), selector]}
    dfa = compile_json_schema(schema, "compact", key_order="any")
    validator = jsonschema.Draft4Validator(schema)
    for value in [{"type": "Perlin", "Frequency": 1.0, "OctaveCount": 6, "NoiseQuality": "Standard", "Seed": 1},
                  {"type": "Billow"}, {"type": "QuadrantSelector", "SourceModule": "a", "XTranslate": True},
                  {"type": "QuadrantSelector", "SourceModule": "a", "XTranslate": True, "Translate": [True] * 3},
                  {"type": "Perlin", "SourceModule": "a"}, {"type": "Perlin", "Seed": 1.5}]:
        text = json.dumps(value, separators=(",", ":")).encode()
        assert dfa.matches(text) == validator.is_valid(value), value


def test_not_of_any_of_is_a_union_of_schemas():
    """``not {"anyOf": [...]}`` of object schemas is the values failing every branch,
    a union of schemas (a way to fail each branch, all holding), and ``not {"allOf":
    [...]}`` those failing some part: exact, in any key order. Left to the algebra,
    the over-mode superset of ``{"required": ["ref"]}`` holds a ``ref`` key found
    anywhere inside, so ``{"a": {"ref": 1}}`` was refused (Github_medium o83286)."""
    key_order = "any"
    schemas = [
        {"not": {"anyOf": [{"required": ["ref"]}]}},
        {"not": {"anyOf": [{"required": ["a"]}, {"required": ["b"], "properties": {"c": {"type": "string"}}}]}},
        {"type": "object", "not": {"allOf": [{"required": ["a"]}, {"properties": {"b": {"type": "integer"}}}]}},
    ]
    values = [{"a": {"ref": 1}}, {"ref": 1}, {"a": 1}, {"b": 1}, {"b": 1, "c": 2}, {"b": 1, "c": "x"},
              {"a": 1, "b": 2}, {"a": 1, "b": "x"}, {"c": {"a": 1, "b": 1}}, {}, [1], 1]
    for schema in schemas:
        dfa = compile_json_schema(schema, "compact", key_order=key_order)
        validator = jsonschema.Draft202012Validator(schema)
        for value in values:
            text = json.dumps(value, separators=(",", ":")).encode()
            assert dfa.matches(text) == validator.is_valid(value), (schema, value)


@pytest.mark.parametrize("key_order", ["schema", "any"])
def test_one_of_beside_a_branch_that_lists_keys_with_any_values(key_order):
    """JSONSchemaStore's tye: a service is ``oneOf [executable, image, dockerFile,
    project]``, where ``image`` lists two keys with any values, so it takes every
    object. Split by type, the objects' part is those that no other branch holds,
    one subtraction; subtracting every branch's superset from ``image`` instead
    refused ``{"name":"my-image","image":"x"}``. The others' negations pass the
    choice limit, so that subtraction is of supersets too: nothing invalid is
    accepted, but ``{"project":"p","args":1}`` (``args`` not a string) is refused."""
    defs = {
        "executable": {"properties": {"executable": {"type": "string"}, "workingDirectory": {"type": "string"}},
                       "required": ["executable"]},
        "image": {"properties": {"image": {}, "bindings": {}}},
        "dockerFile": {"properties": {"dockerFileArgs": {"items": {}}, "dockerFileContext": {"type": "string"}},
                       "required": ["name", "dockerFile"]},
        "project": {"properties": {"buildProperties": {"items": {}}, "args": {"type": "string"},
                                   "build": {"type": "boolean"}, "replicas": {"type": "integer"},
                                   "bindings": {"items": {}}}, "required": ["project"]},
    }
    schema = {"definitions": defs, "properties": {"services": {"items": {"oneOf": [
        {"$ref": f"#/definitions/{name}"} for name in defs]}}}}
    dfa = compile_json_schema(schema, "compact", key_order=key_order)
    validator = jsonschema.Draft7Validator(schema)
    for service in [{"name": "my-image", "image": "x", "volumes": []}, {"image": "x"}, {}, {"executable": "x"},
                    {"executable": 1}, {"name": "n", "dockerFile": "d"}, {"project": "p", "args": 1},
                    {"project": "p", "executable": "x"}, 1, "s"]:
        value = {"services": [service]}
        text = json.dumps(value, separators=(",", ":")).encode()
        if dfa.matches(text):
            assert validator.is_valid(value), service
        else:
            assert service == {"project": "p", "args": 1} or not validator.is_valid(value), service


def test_algebra_over_supersets_is_not_reported_as_a_proof_of_no_value():
    # [1] is valid (exactly one branch holds), but branches are told apart by
    # subtracting a superset of the other ("any bracketed text"), which leaves nothing.
    schema = {"oneOf": [{"type": "array", "contains": {"type": "integer"}},
                        {"type": "array", "contains": {"type": "string"}}]}
    with pytest.raises(guided.UnsupportedSchemaError, match="cannot be told apart exactly") as e:
        compile_json_schema(schema)
    assert "#/oneOf" in str(e.value)
    # A oneOf whose branches are the same schema really has no value.
    same = {"oneOf": [{"type": "string", "multipleOf": 2}, {"type": "string"}]}
    with pytest.raises(guided.UnsatisfiableSchemaError) as e:
        compile_json_schema(same)
    assert not isinstance(e.value, guided.UnsupportedSchemaError)


def test_approximation_limit_under_an_optional_key_is_an_error_not_a_dropped_key():
    """Where algebra over supersets leaves a value with nothing, the key, array items or
    extra keys holding it must not silently vanish: the compile says so."""
    limit = {"oneOf": [{"type": "array", "contains": {"type": "integer"}},
                       {"type": "array", "contains": {"type": "string"}}]}
    for schema, where in [({"type": "object", "properties": {"a": limit, "b": {"type": "integer"}}}, "#/properties/a/oneOf"),
                          ({"type": "array", "items": limit}, "#/items/oneOf"),
                          ({"type": "object", "additionalProperties": limit}, "#/additionalProperties/oneOf")]:
        with pytest.raises(guided.ApproximationLimitError) as e:
            compile_json_schema(schema, "compact")
        assert where in str(e.value)
    # A proof of no value is another matter: the key is simply never written.
    forbidden = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"not": {}}}}
    dfa = compile_json_schema(forbidden, "compact")
    assert dfa.matches(b'{"a":1}') and not dfa.matches(b'{"a":1,"b":1}')


def test_not_of_an_open_schema_forbids_the_key_without_algebra(monkeypatch):
    """``"not": {}`` (or ``true``, or annotations only) beside other keywords, as
    ``oneOf`` branches write forbidden properties once merged, excludes every value at
    once: no automaton difference is built, and the verdicts agree with jsonschema."""
    from guided.grammars.json_schema.compiler import SchemaCompiler

    def no_algebra(*args):
        raise AssertionError("DFA algebra for a not of an open schema")

    monkeypatch.setattr(SchemaCompiler, "logic_dfa", no_algebra)
    schema = {"type": "object", "required": ["shape", "dims"], "properties": {
        "shape": {"type": "string"},
        "dims": {"type": "object", "properties": {"r": {"type": "number"}, "w": {"type": "number"}}, "oneOf": [
            {"properties": {"w": {"not": {}}}, "required": ["r"]},
            {"properties": {"r": {"not": True}}, "required": ["w"]},
            {"properties": {"r": {"not": {"description": "never"}}, "w": {"not": {}}}, "required": ["z"]}]}}}
    dfa = compile_json_schema(schema, "compact")
    validator = _validator(schema)
    for value in [{"shape": "c", "dims": {"r": 1}}, {"shape": "c", "dims": {"w": 2}}, {"shape": "c", "dims": {"r": 1, "w": 2}},
                  {"shape": "c", "dims": {}}, {"shape": "c", "dims": {"z": 0}}, {"shape": "c", "dims": {"r": 1, "z": 0}}]:
        assert dfa.matches(compact(ordered(value, schema))) == validator.is_valid(value), value


TAGGED = {"type": "object", "properties": {"p": {"const": "a"}}}
SUPERSET_CASES = {
    # Optional tags: only objects holding one of them match exactly one branch.
    "optional_tags": ({"type": "object", "properties": {"m": {"oneOf": [TAGGED, {"type": "object", "properties": {"p": {"const": "b"}}}]}}},
                      [{"m": {"p": "a"}}, {"m": {"p": "b", "x": [1]}}, {"m": {}}, {"m": {"p": "c"}}, {}, {"m": {"x": {"p": "a"}}}]),
    # A closed object's container value may not run over the keys after it.
    "closed_objects": ({"oneOf": [{"type": "object", "additionalProperties": False,
                                   "properties": {"a": {"type": "object"}, "b": {"type": "integer"}}},
                                  {"type": "object", "additionalProperties": False, "properties": {"a": {"type": "object"}}}]},
                       [{"a": {}, "b": 1}, {"a": {"b": 1}}, {"b": 2}, {"a": {}}, {}]),
    # What an array holds tells it apart from an array of arrays.
    "array_of_arrays": ({"type": "array", "items": {"type": "object", "required": ["c"], "properties": {"c": {"oneOf": [
                            {"type": "array"}, {"type": "array", "items": {"type": "array"}}]}}}},
                        [[{"c": [1.5]}], [{"c": [[1]]}], [{"c": []}], [{"c": [[], 2]}], [{"c": 1}]]),
    # A property value's own constraint, not only its key, is in the superset.
    "negated_value": ({"oneOf": [{"not": {"properties": {"t": {"enum": ["car"]}}}}, {"properties": {"t": {"enum": ["car", "bus"]}}}]},
                      [{"t": "car"}, {"t": "bus"}, {"t": "van"}, {}, 3]),
    # Container values of an enum / const are spelled out (any whitespace, any key order).
    "container_enum": ({"oneOf": [{"type": "object", "required": ["c"], "properties": {"c": {"type": "array", "items": {"type": "string"}}}},
                                  {"type": "object", "required": ["c"], "properties": {"c": {"enum": [["deleted"], {"a": 1, "b": [2]}]}}}]},
                       [{"c": ["a"]}, {"c": ["deleted"]}, {"c": []}, {"c": ["a", "deleted"]}, {"c": {"a": 1, "b": [2]}}, {"c": [1]}]),
    # An additional property's value schema counts too.
    "additional_values": ({"oneOf": [{"type": "object", "required": ["t"], "properties": {"t": {"enum": ["c"]}}},
                                     {"type": "object", "additionalProperties": {"enum": [False]}}]},
                          [{"t": "c"}, {"t": "c", "u": False}, {"u": False}, {}, {"t": False}, {"u": 1}]),
}


@pytest.mark.parametrize("name", sorted(SUPERSET_CASES))
def test_one_of_told_apart_by_member_by_member_supersets(name):
    schema, docs = SUPERSET_CASES[name]
    dfa = compile_json_schema(schema, "compact")
    validator = _validator(schema)
    assert any(validator.is_valid(d) for d in docs) and not all(validator.is_valid(d) for d in docs)
    for doc in docs:
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


ALL_OF_ANY_OFS = {
    "required_choices": {"allOf": [{"anyOf": [{"required": ["a"]}]}, {"anyOf": [{"required": ["b"]}, {"required": ["c"]}]}]},
    "typed_with_logic": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "string"}},
                         "allOf": [{"anyOf": [{"required": ["a"]}, {"required": ["b"]}], "properties": {"a": {"minimum": 2}}},
                                   {"anyOf": [{"required": ["c"]}, {"not": {"required": ["a"]}}]}]},
}


@pytest.mark.parametrize("name", sorted(ALL_OF_ANY_OFS))
def test_all_of_any_ofs_spread_into_choices(name):
    """allOf parts that are anyOfs (which do not merge by keywords) become the union of
    every choice of their branches, merged: exact where algebra over eagerly built parts
    was not (each part wanted its own required key first, and the intersection was empty)."""
    schema = ALL_OF_ANY_OFS[name]
    dfa = compile_json_schema(schema, "compact")
    validator = _validator(schema)
    docs = [dict(zip(keys, values)) for r in range(4) for keys in itertools.permutations("abc", r)
            for values in itertools.product([1, 3, "s"], repeat=r)]
    for doc in docs:
        listed = list(doc) == sorted(doc)  # the order properties / required name them
        accepted = dfa.matches(compact(doc))
        assert accepted == validator.is_valid(doc) if listed else not accepted or validator.is_valid(doc), doc


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
    validator = _validator(schema)
    pool = [1, 2, "s", [1], []]
    for length in range(6):
        for doc in itertools.product(pool, repeat=length):
            assert dfa.matches(compact(list(doc))) == validator.is_valid(list(doc)), doc


def test_one_of_branches_of_different_types_are_apart_and_numbers_overlap_integers():
    """Branches told apart by type alone (no superset automata: a 2000-character
    string's is a long counter), while an integer branch and a number branch still
    overlap: 7 matches both, so it is refused."""
    schema = {"oneOf": [{"type": "string", "maxLength": 2000}, {"type": "null"}, {"type": "integer"},
                        {"type": "number", "minimum": 5}]}
    dfa = compile_json_schema(schema, "compact")
    validator = _validator(schema)
    for doc in ["ab", "", None, 3, 7, 5.5, 4.5, -1, True, [], {}]:
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


@pytest.mark.parametrize("schema", [
    {"oneOf": [{"type": ["string", "number"]}, {"type": "string", "maxLength": 3}]},
    {"oneOf": [{"minLength": 2}, {"type": "string"}]},  # no type: every type
    {"type": "object", "oneOf": [{"properties": {"c": {"type": "array", "items": {"type": "string"}}}},
                                 {"properties": {"c": {"enum": [["x"], 1]}}}]},
])
def test_one_of_branches_sharing_a_type_with_a_number_branch_overlap(schema):
    """A branch that allows numbers (and more) shares those other types with the
    rest: a string valid under both branches is refused."""
    dfa = compile_json_schema(schema, "compact")
    validator = _validator(schema)
    for doc in ["ab", "abcd", "a", 7, 2.5, None, {"c": ["x"]}, {"c": ["y"]}, {"c": 1}, {"c": 2}, {}]:
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


DRAFT_04 = "http://json-schema.org/draft-04/schema#"


@pytest.mark.parametrize("declared, enforced", [
    (DRAFT_04, set()),
    ("http://json-schema.org/draft-06/schema#", {"const", "propertyNames"}),
    ("http://json-schema.org/draft-07/schema#", {"const", "propertyNames", "if"}),
    (None, {"const", "propertyNames", "if"}),
])
def test_keywords_a_declared_draft_lacks_constrain_nothing(declared, enforced):
    """Draft 4 has no ``const``, ``if``/``then`` or ``propertyNames``, draft 6 no
    ``if``: the reference validator ignores them there, and so does the compiler
    (in nested sub-schemas too); a schema without ``$schema`` is read as 2020-12."""
    schema = {"type": "object", "properties": {
        "a": {"type": "integer", "const": 1},
        "b": {"type": "object", "propertyNames": {"maxLength": 1}},
        "c": {"type": "array", "items": {"if": {"type": "integer"}, "then": {"minimum": 5}}},
    }}
    if declared:
        schema = {"$schema": declared, **schema}
    dfa = compile_json_schema(schema, "compact")
    validator = _validator(schema)
    cases = {"const": {"a": 2}, "propertyNames": {"b": {"long": 1}}, "if": {"c": [1]}}
    for keyword, doc in cases.items():
        assert validator.is_valid(doc) == (keyword not in enforced), keyword
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), (declared, keyword)
    assert dfa.matches(compact({"a": 1, "b": {"k": 1}, "c": [7]}))


@pytest.mark.parametrize("schema, doc", [
    # An if with neither then nor else constrains nothing.
    ({"type": "object", "properties": {"s": {"if": {"items": {"type": "string"}}}}}, {"s": [{}]}),
    # An else with no if beside it does nothing, even next to an allOf part's if.
    ({"type": "object", "allOf": [{"if": {"properties": {"a": {"const": 1}}}, "then": {}}],
      "else": {"required": ["zz"]}}, {"a": 2}),
])
def test_idle_conditional_keywords_do_nothing(schema, doc):
    assert _validator(schema).is_valid(doc)
    assert compile_json_schema(schema, "compact").matches(compact(doc))


def test_lenient_mode_warns_and_drops():
    schema = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
    with pytest.warns(UserWarning, match="uniqueItems at #/uniqueItems"):
        dfa = compile_json_schema(schema, "compact", strict=False)
    assert dfa.matches(b"[1,1]")


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer", "minimum": 5, "maximum": 3},
        {"type": "string", "minLength": 4, "maxLength": 2},
        {"allOf": [{"type": "string"}, {"type": "integer"}]},
        {"type": "object", "required": ["a"], "properties": {"a": False}},
        {"type": "object", "required": ["a"], "propertyNames": False},
        False,
        {"enum": [1, 2], "type": "string"},
    ],
)
def test_unsatisfiable_schema_is_an_error(schema):
    with pytest.raises(guided.UnsatisfiableSchemaError):
        compile_json_schema(schema)


def test_recursive_ref_is_a_clear_error():
    schema = {"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}}, "$ref": "#/$defs/node"}
    with pytest.raises(guided.RecursiveSchemaError, match="recursive"):
        compile_json_schema(schema)


def test_invalid_pattern_is_named():
    with pytest.raises(guided.UnsupportedSchemaError, match="pattern"):
        compile_json_schema({"type": "string", "pattern": "(?<=a)b"})


def test_remote_ref_is_refused():
    with pytest.raises(guided.SchemaError, match="neither a local JSON pointer"):
        compile_json_schema({"$ref": "https://example.com/schema.json"})
    with pytest.raises(guided.UnsupportedSchemaError, match="identifier this schema declares"):
        compile_json_schema({"$defs": {"a": {"$anchor": "a"}}, "$ref": "#b"})


ANCHORED = {
    # draft 4: "id": "#name" (EVE's ESI route schemas, Github_easy o35904)
    "draft-04 id": {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
                    "properties": {"jump": {"$ref": "#jump"}},
                    "definitions": {"jump": {"id": "#jump", "type": "integer", "minimum": 1}}},
    "draft-07 $id": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                     "properties": {"jump": {"$ref": "#jump"}},
                     "definitions": {"jump": {"$id": "#jump", "type": "integer", "minimum": 1}}},
    "2020-12 $anchor": {"type": "object", "properties": {"jump": {"$ref": "#jump"}},
                        "$defs": {"jump": {"$anchor": "jump", "type": "integer", "minimum": 1}}},
    # the root's own absolute id, and a pointer below it (ninjs in JSON Schema Store)
    "absolute id": {"$schema": "http://json-schema.org/draft-04/schema#", "id": "http://example.com/s.json#",
                    "type": "object",
                    "properties": {"jump": {"$ref": "http://example.com/s.json#/definitions/jump"},
                                   "kids": {"type": "array", "items": {"$ref": "http://example.com/s.json#"}}},
                    "definitions": {"jump": {"type": "integer", "minimum": 1}}},
}


@pytest.mark.parametrize("name", list(ANCHORED))
def test_refs_to_identifiers_the_schema_declares(name, smollm2_vocab, smollm2_tokenizer):
    """A ``$ref`` may name a sub-schema by an identifier the schema declares (a
    plain-name fragment, or an ``$id``'s URI with a pointer below it), in the
    declared draft's keyword; compiled documents agree with jsonschema, recursion
    through such a ref included."""
    schema = ANCHORED[name]
    guide = guided.compile(guided.JsonSchema(schema, whitespace="compact"), smollm2_vocab)
    validator = _validator(schema)
    docs = [{}, {"jump": 3}, {"jump": 0}, {"jump": "x"}, {"jump": 2, "kids": [{"jump": 5}, {"kids": []}]},
            {"kids": [{"jump": 0}]}]
    for doc in docs:
        m = guide.matcher()
        text = json.dumps(doc, separators=(",", ":"))
        ok = m.accept_tokens(smollm2_tokenizer.encode(text, add_special_tokens=False)) and m.is_accepting()
        assert ok == validator.is_valid(doc), (name, doc)
    # In another draft's keyword the identifier is not one.
    legacy = copy.deepcopy(ANCHORED["draft-04 id"])
    legacy["$schema"] = "http://json-schema.org/draft-07/schema#"
    with pytest.raises(guided.UnsupportedSchemaError, match="identifier"):
        compile_json_schema(legacy)


# -- through the public API ------------------------------------------------------------


def test_generate_with_tiny_model_50_schemas(tiny_model, smollm2_tokenizer):
    names = sorted(FAMILIES)
    failures = []
    for seed in range(50):
        name = names[seed % len(names)]
        schema = FAMILIES[name]
        r = guided.generate(tiny_model, smollm2_tokenizer, "JSON:", guided.JsonSchema(schema),
                            max_new_tokens=96, temperature=1.0, top_k=40, seed=seed)
        if r.finish_reason == "length":
            continue  # a random model may ramble inside an unbounded string
        if not _validator(schema).is_valid(json.loads(r.text)):
            failures.append((name, r.text))
    assert not failures, failures


def test_generate_any_key_order_with_tiny_model(tiny_model, smollm2_tokenizer):
    """A random model under key_order="any" writes valid objects, in orders of its own."""
    schema = KEY_ORDER_SHAPES["closed"]
    orders = set()
    for seed in range(12):
        r = guided.generate(tiny_model, smollm2_tokenizer, "JSON:", guided.JsonSchema(schema, key_order="any"),
                            max_new_tokens=48, temperature=1.0, top_k=40, seed=seed)
        if r.finish_reason == "length":
            continue
        value = json.loads(r.text)
        assert _validator(schema).is_valid(value), r.text
        orders.add(tuple(value))
    assert any(list(o) != sorted(o) for o in orders), orders


def test_pydantic_round_trip(tiny_model, smollm2_tokenizer):
    from typing import Literal, Optional

    import pydantic

    class Pet(pydantic.BaseModel):
        kind: Literal["cat", "dog"]
        age: int = pydantic.Field(ge=0, le=30)
        name: Optional[str] = pydantic.Field(default=None, max_length=12)

    for seed in range(5):
        r = guided.generate(tiny_model, smollm2_tokenizer, "A pet:", Pet, max_new_tokens=64, temperature=1.0, seed=seed)
        if r.finish_reason == "length":
            continue
        assert isinstance(r.value, Pet)
        assert 0 <= r.value.age <= 30


def test_dict_spec_value_is_parsed(tiny_model, smollm2_tokenizer):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": False}
    r = guided.generate(tiny_model, smollm2_tokenizer, "x", schema, max_new_tokens=20)
    assert r.value in ({"ok": True}, {"ok": False})


@pytest.mark.parametrize(
    "pattern",
    [
        r"^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$|^[0-9a-f]{16}$",  # Python factors out the shared ^
        r"^ab|cd$", r"(^a|b)c", r"x(y$|z)", r"^$", r"a", r"^(a|b)+$", r"(?:^|,)x(?:,|$)", r"\d{2}",
        r"^[\w-]{8,12}$", r"[^,]{8}", r"x.{8,}",  # long counted runs of one class (laid out as one DFA)
        r"\w{1,16}", r"\d+[a-d]", r"^a{2,5}", r"b{2,5}$", r"x*", r"(ab){2,}z?",  # counted ends cut under search
    ],
)
def test_pattern_has_re_search_semantics(pattern):
    import re

    dfa = compile_json_schema({"type": "string", "pattern": pattern}, "compact")
    rng = random.Random(pattern)
    alphabet = "abcdxyz,0f-19/\"é"
    for _ in range(1500):
        value = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 18)))
        assert dfa.matches(compact(value)) == bool(re.search(pattern, value)), value


def test_validated_format_we_cannot_enforce_is_refused():
    # uri-template is checked by the reference validator: ignoring it would be looser.
    with pytest.raises(guided.UnsupportedSchemaError, match="uri-template"):
        compile_json_schema({"type": "string", "format": "uri-template"})
    # A format validators do not know is an annotation.
    assert compile_json_schema({"type": "string", "format": "my-own-format"}, "compact").matches(b'"x"')


def test_unique_items_over_enum_values():
    dfa = compile_json_schema({"type": "array", "items": {"enum": ["x", "y", 2]}, "uniqueItems": True}, "compact")
    assert dfa.matches(b'["x","y",2]') and dfa.matches(b"[2.0]") and dfa.matches(b"[]")
    assert not dfa.matches(b'["x","x"]') and not dfa.matches(b"[2,2.0]")
    with pytest.raises(guided.UnsupportedSchemaError, match="uniqueItems"):
        compile_json_schema({"type": "array", "items": {"type": "string"}, "uniqueItems": True})


@pytest.mark.parametrize("cond", [
    {"properties": {"kind": {"const": "a"}}},
    {"type": "object", "required": ["x", "y"], "properties": {"x": {"type": "integer", "minimum": 3}, "z": False}},
    {"properties": {"n": True, "m": {"enum": [1, 2]}}, "required": ["m"]},
    {"not": {"properties": {"kind": {"const": "a"}}}},
    {"not": {"type": "array"}},
    True,
    False,
])
def test_negated_condition_parts_fail_exactly_where_the_condition_holds(cond):
    """json_conditional.negation: a value satisfies one of the parts iff it fails the
    condition (checked by jsonschema on objects and non-objects alike)."""
    from guided.grammars.json_schema.logic.conditional import negation

    parts = negation(cond)
    samples = [None, 1, "a", [], {}, {"kind": "a"}, {"kind": "b"}, {"x": 3, "y": 0}, {"x": 2, "y": 0},
               {"x": 5}, {"x": 4, "y": 1, "z": 0}, {"m": 1}, {"m": 3}, {"n": 0}, {"n": 0, "m": 2}]
    for v in samples:
        fails = not _validator(cond).is_valid(v)
        assert any(_validator(p).is_valid(v) for p in parts) == fails, (cond, v)
    assert negation({"properties": {"a": {}}, "minProperties": 1}) is None  # not a union of schemas


@pytest.mark.parametrize("key_order", ["schema", "any"])
def test_conditions_written_as_not_negate_as_schemas(key_order, monkeypatch):
    """Prometheus' auth: at most one of several keys set, written as ``if: {not:
    {properties: {k: {const: null}}}}, then: {properties: {others: {const:
    null}}}``. What fails ``not X`` is what X holds, so each conditional is a union
    of schemas and no object's superset is built (it was left to the algebra, where
    objects of many keys in any order fell back to schema order: valid configs
    refused). A key's ``not {const: null}`` is a small value automaton."""
    import guided.grammars.json_schema.compiler as js

    def no_object_supersets(original):
        def guarded(self, schema, path, depth):
            assert not (isinstance(schema, dict) and "properties" in schema), f"superset of an object at {path}"
            return original(self, schema, path, depth)
        return guarded
    monkeypatch.setattr(js.SchemaCompiler, "negated_dfa", no_object_supersets(js.SchemaCompiler.negated_dfa))
    keys = ["basic_auth", "authorization", "oauth2"]
    schema = {"type": "object",
              "properties": {"url": {"type": "string"}, **{k: {"type": ["object", "null"]} for k in keys}},
              "allOf": [{"if": {"not": {"properties": {k: {"const": None}}}},
                         "then": {"properties": {o: {"const": None} for o in keys if o != k}}} for k in keys]}
    dfa = compile_json_schema(schema, "compact", key_order=key_order)
    validator = _validator(schema)
    docs = [{}, {"url": "u"}, {"basic_auth": {}}, {"url": "u", "oauth2": {"a": 1}}, {"basic_auth": {}, "oauth2": None},
            {"basic_auth": None, "authorization": None}, {"basic_auth": {}, "oauth2": {}},
            {"authorization": {}, "basic_auth": {}, "url": "u"}, {"oauth2": 1}, []]
    for doc in docs:
        text = compact(doc if key_order == "any" else ordered(doc, schema))
        assert dfa.matches(text) == validator.is_valid(doc), doc


def test_running_out_of_stack_inside_the_validator_is_a_clear_error(monkeypatch):
    # jsonschema's `referencing` uses rpds (Rust): out of stack there, pyo3 raises a
    # PanicException (a BaseException), which must not kill the caller.
    import jsonschema

    class PanicException(BaseException):
        pass

    def panics(self, instance):
        raise PanicException("__eq__ failed!: PyErr { value: <unprintable RecursionError object> }")

    monkeypatch.setattr(jsonschema.Draft202012Validator, "is_valid", panics)
    with pytest.raises(guided.UnsupportedSchemaError, match="nests too deeply"):
        compile_json_schema({"enum": ["a", "b"], "minLength": 1})


def test_a_schema_past_the_recursion_limit_names_where_it_got_to():
    # 120 nested objects, each an anyOf branch (built at once, not deferred): the
    # error says where the expansion stood when it met Python's recursion limit.
    schema = {"type": "string"}
    for _ in range(120):
        schema = {"anyOf": [{"type": "object", "properties": {"c": schema}, "required": ["c"]}, {"type": "null"}]}
    with pytest.raises(guided.UnsupportedSchemaError, match="nests too deeply") as info:
        compile_json_schema(schema)
    assert info.value.pointer.startswith("#/anyOf/0/properties/c/anyOf/0/properties/c")
    assert "/…/" in info.value.pointer and len(info.value.pointer) < 200  # shortened in the middle


def test_a_first_compile_past_the_recursion_limit_leaves_numba_usable(tmp_path):
    # Under pytest's deeper stack, a first compile that nests 120 objects reached
    # its first compiled call (numba's import) near the recursion limit, which cut
    # the import short: numba stayed half-initialised and the next compile failed
    # ("partially initialized module 'numba.core.types'"). A fresh pytest process,
    # as numba is long imported in this one.
    import subprocess
    import sys

    (tmp_path / "test_first_compile.py").write_text(
        "from grammars.json_schema.compiler import compile_json_schema\n"
        "def test_deep_first():\n"
        "    s = {'type': 'string'}\n"
        "    for _ in range(120):\n"
        "        s = {'type': 'object', 'properties': {'c': s}, 'required': ['c']}\n"
        "    try:\n"
        "        compile_json_schema(s)\n"
        "    except Exception as e:\n"
        "        assert 'nests too deeply' in str(e), e\n"
        "def test_then_another():\n"
        "    dfa = compile_json_schema({'type': 'array', 'items': {'type': 'integer'}}, 'compact')\n"
        "    assert dfa.matches(b'[1,22]') and not dfa.matches(b'[1,')\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", root,
                           "-c", os.path.join(root, "pyproject.toml"), str(tmp_path / "test_first_compile.py")],
                          cwd=root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]


def test_one_of_tags_are_compared_before_container_values(monkeypatch):
    # Both branches require "meta" (an object) and "kind" (the tag). Comparing the
    # objects' supersets may take seconds on real schemas; the tag decides at once,
    # whatever order the set of keys comes in.
    from guided.grammars.json_schema.compiler import SchemaCompiler

    asked = []
    original = SchemaCompiler.negated_dfa

    def recording(self, schema, path, depth):
        asked.append(json.dumps(schema, sort_keys=True))
        return original(self, schema, path, depth)

    monkeypatch.setattr(SchemaCompiler, "negated_dfa", recording)
    meta = {"type": "object", "properties": {"a": {"type": "string"}}}
    schema = {"oneOf": [
        {"type": "object", "properties": {"meta": meta, "kind": {"const": "x"}}, "required": ["meta", "kind"]},
        {"type": "object", "properties": {"meta": meta, "kind": {"const": "y"}}, "required": ["meta", "kind"]},
    ]}
    dfa = compile_json_schema(schema, "compact")
    assert dfa.matches(b'{"meta":{},"kind":"x"}') and not dfa.matches(b'{"meta":{},"kind":"z"}')
    assert json.dumps(meta, sort_keys=True) not in asked


def test_a_definition_used_twice_subtracts_once(monkeypatch):
    """The differences ``oneOf`` needs are memoised per compile: a definition used
    under two keys (composer's repository, under ``items`` and under
    ``additionalProperties``) costs one set of subtractions, and both places judge
    documents as jsonschema does."""
    import guided.grammars.json_schema.compiler as js

    calls = []
    original = js.minus
    monkeypatch.setattr(js, "minus", lambda *args: calls.append(1) or original(*args))
    overlapping = {"oneOf": [{"type": "string", "maxLength": 3}, {"type": "string", "pattern": "^a"}]}
    once = {"$defs": {"o": overlapping}, "type": "object", "properties": {"a": {"$ref": "#/$defs/o"}}}
    compile_json_schema(once, "compact")
    single = len(calls)
    twice = {"$defs": {"o": overlapping}, "type": "object",
             "properties": {"a": {"$ref": "#/$defs/o"}, "b": {"$ref": "#/$defs/o"}}}
    calls.clear()
    dfa = compile_json_schema(twice, "compact")
    assert 0 < len(calls) == single
    validator = _validator(twice)
    for doc in ({"a": "xy", "b": "abcd"}, {"a": "ab", "b": "xyz"}, {"a": "", "b": "axxxx"}, {"b": "xyzw"}, {"a": 1}):
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


def test_one_of_split_by_type_with_branches_every_value_of_the_type_satisfies():
    """Split by type, a branch that says nothing about a type (``minLength`` for
    arrays, ``required`` for strings) takes every value of it: with one such branch
    the type's part is what no other branch holds; with two, no value of that type
    is valid. Checked against jsonschema."""
    schema = {"oneOf": [{"minLength": 2}, {"type": "array", "maxItems": 1}, {"required": ["a"]}]}
    dfa = compile_json_schema(schema, "compact")
    validator = _validator(schema)
    for doc in ["", "x", "xy", [], [1], [1, 2], {}, {"a": 1}, {"b": 1}, 3, None, True]:
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc
