"""JSON Schema logic beside ``oneOf``: ``allOf`` parts merged by keywords (no automaton
intersection), ``anyOf`` parts spread into choices, ``not`` and ``if`` / ``then`` /
``else`` negated as unions of schemas, and logic over which keys are present; documents
are judged as ``jsonschema`` judges them (``oneOf``: test_json_schema_one_of.py).
"""

from __future__ import annotations

import itertools
import json

import jsonschema
import pytest
from json_helpers import compact, ordered, reference_validator

from guided.grammars.json_schema.compiler import compile_json_schema


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
    """These negations are unions of schemas, or supersets that count items: the
    ``oneOf`` negations and the count-only ``oneOf`` are satisfiable, and ``{"a": []}``
    under a negated ``minItems``, ``[1, 2]`` and ``["a", "b", "c", "d"]`` under the
    counted ``oneOf`` are accepted."""
    dfa = compile_json_schema(schema, "compact")
    validator = reference_validator(schema)
    docs = ["ab", "a", 1, 2.5, None, [], [1], [1, 2], [1, 2, 3], ["a"], ["a", "b"], ["a", "b", "c", "d"], {},
            {"a": []}, {"a": [1]}, {"a": 1}, {"a": "x"}, {"a": "xy"}, {"a": 1.5}, {"b": 1}]
    for doc in docs:
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


def test_a_forbidden_key_merges_into_an_object_with_pattern_properties():
    """``"not": {"required": ["docker"]}`` beside ``patternProperties`` and
    ``additionalProperties: false`` (bitbucket's caches) merges as ``docker: false``
    whatever the patterns say of that key, so no automaton algebra bounds how deep
    the values under the patterns may nest."""
    schema = {"type": "object", "additionalProperties": False, "not": {"required": ["docker"]},
              "patternProperties": {"^[a-z]+$": {"oneOf": [{"type": "string"}, {
                  "type": "object", "properties": {"key": {"type": "object", "properties": {"files": {
                      "type": "array", "items": {"type": "string"}}}}}}]}}}
    validator = reference_validator(schema)
    docs = [{"cache": {"key": {"files": ["pom.xml"]}}}, {"cache": "x"}, {}, {"docker": "x"}, {"Docker": "x"},
            {"cache": {"key": {"files": [1]}}}, {"cache": {"key": {"files": [["deep"]]}}}]
    for order in ("schema", "any"):
        dfa = compile_json_schema(schema, "compact", key_order=order)
        for doc in docs:
            assert dfa.matches(compact(doc)) == validator.is_valid(doc), (order, doc)


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
    validator = reference_validator(schema)
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
    # Two nots in one allOf ("not a circle", "not a square").
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
    validator = reference_validator(schema)
    keys = ["a", "b", "c", "k", "x", "y"]
    for n in range(4):
        for chosen in itertools.combinations(keys, n):
            for value in (1, "s"):
                doc = {k: value for k in chosen}
                assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


def test_all_of_parts_differing_in_unknown_keywords_still_merge():
    """Keywords no draft defines (x-intellij-html-description beside a $ref in the
    skaffold schemas) constrain nothing: two allOf parts that disagree on one must
    merge, not fall back to automaton algebra, whose open values nest only
    ANY_DEPTH levels (that refused deep valid documents)."""
    deep = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {}}}}, "x-doc": "one"}
    schema = {"$defs": {"deep": deep}, "properties": {"top": {"$ref": "#/$defs/deep", "x-doc": "two"}}}
    dfa = compile_json_schema(schema, "compact")
    doc = {"top": {"a": {"b": {"c": {"d": {"e": [1, {"f": 2}]}}}}}}
    assert reference_validator(schema).is_valid(doc)
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
    validator = reference_validator(schema)
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


def test_not_of_any_of_is_a_union_of_schemas():
    """``not {"anyOf": [...]}`` of object schemas is the values failing every branch,
    a union of schemas (a way to fail each branch, all holding), and ``not {"allOf":
    [...]}`` those failing some part: exact, in any key order. (Left to the algebra,
    the over-mode superset of ``{"required": ["ref"]}`` would hold a ``ref`` key found
    anywhere inside, and refuse ``{"a": {"ref": 1}}``.)"""
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
    validator = reference_validator(schema)
    for value in [{"shape": "c", "dims": {"r": 1}}, {"shape": "c", "dims": {"w": 2}}, {"shape": "c", "dims": {"r": 1, "w": 2}},
                  {"shape": "c", "dims": {}}, {"shape": "c", "dims": {"z": 0}}, {"shape": "c", "dims": {"r": 1, "z": 0}}]:
        assert dfa.matches(compact(ordered(value, schema))) == validator.is_valid(value), value


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
    validator = reference_validator(schema)
    docs = [dict(zip(keys, values)) for r in range(4) for keys in itertools.permutations("abc", r)
            for values in itertools.product([1, 3, "s"], repeat=r)]
    for doc in docs:
        listed = list(doc) == sorted(doc)  # the order properties / required name them
        accepted = dfa.matches(compact(doc))
        assert accepted == validator.is_valid(doc) if listed else not accepted or validator.is_valid(doc), doc


@pytest.mark.parametrize("schema, doc", [
    # An if with neither then nor else constrains nothing.
    ({"type": "object", "properties": {"s": {"if": {"items": {"type": "string"}}}}}, {"s": [{}]}),
    # An else with no if beside it does nothing, even next to an allOf part's if.
    ({"type": "object", "allOf": [{"if": {"properties": {"a": {"const": 1}}}, "then": {}}],
      "else": {"required": ["zz"]}}, {"a": 2}),
])
def test_idle_conditional_keywords_do_nothing(schema, doc):
    assert reference_validator(schema).is_valid(doc)
    assert compile_json_schema(schema, "compact").matches(compact(doc))


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
        fails = not reference_validator(cond).is_valid(v)
        assert any(reference_validator(p).is_valid(v) for p in parts) == fails, (cond, v)
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
    validator = reference_validator(schema)
    docs = [{}, {"url": "u"}, {"basic_auth": {}}, {"url": "u", "oauth2": {"a": 1}}, {"basic_auth": {}, "oauth2": None},
            {"basic_auth": None, "authorization": None}, {"basic_auth": {}, "oauth2": {}},
            {"authorization": {}, "basic_auth": {}, "url": "u"}, {"oauth2": 1}, []]
    for doc in docs:
        text = compact(doc if key_order == "any" else ordered(doc, schema))
        assert dfa.matches(text) == validator.is_valid(doc), doc
