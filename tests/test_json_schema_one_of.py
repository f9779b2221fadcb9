"""JSON Schema ``oneOf``: branches told apart exactly (by type, by a tag or a required
key, by which keys are present, by member-by-member supersets) or left to automaton
algebra, and a document valid under two branches refused; documents are judged as
``jsonschema`` judges them.
"""

from __future__ import annotations

import json

import jsonschema
import pytest
from json_helpers import compact, dfa_for, ordered, reference_validator

from guided.grammars.json_schema.compiler import compile_json_schema


def test_one_of_closed_objects_told_apart_by_their_keys():
    """Two closed objects with array values: {} matches both (excluded), one key picks
    a branch, both keys match neither."""
    schema = {"oneOf": [
        {"type": "object", "additionalProperties": False, "properties": {"except": {"type": "array", "items": {"type": "string"}}}},
        {"type": "object", "additionalProperties": False, "properties": {"only": {"type": "array", "items": {"type": "string"}}}},
    ]}
    dfa = compile_json_schema(schema, "compact")
    validator = reference_validator(schema)
    for doc in ({}, {"except": ["a"]}, {"only": []}, {"except": [], "only": []}, {"only": ["x"], "except": ["y"]}):
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


def test_one_of_told_apart_by_a_required_key_stays_exact():
    """Branches that require a key with disjoint values are a plain union (a string
    "pattern" against an object one); where the values overlap,
    a document matching both is still refused."""
    dfa = dfa_for("discriminated_by_value_type")
    assert dfa.matches(compact({"version": "5.10", "pattern": "u-boot"}))
    assert dfa.matches(compact({"version": "5.10", "pattern": {"regexp": "x"}}))
    overlap = {"oneOf": [
        {"type": "object", "required": ["kind"], "properties": {"kind": {"enum": ["a", "b"]}}, "additionalProperties": False},
        {"type": "object", "required": ["kind"], "properties": {"kind": {"enum": ["b", "c"]}}, "additionalProperties": False},
    ]}
    dfa = compile_json_schema(overlap, "compact")
    validator = reference_validator(overlap)
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
    validator = reference_validator(schema)
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
    validator = reference_validator(schema)
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
    validator = reference_validator(schema)
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
    validator = reference_validator(schema)
    for doc in ({"id": 1, "result": 2}, {"id": 1, "error": "e"}, {"id": 1, "result": 2, "error": "e"}, {"id": 1},
                {"result": 1}, {"id": 1, "error": 3}, [], "x"):
        assert dfa.matches(compact(ordered(doc, schema))) == validator.is_valid(doc), doc


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
    refused: the array branch's superset, subtracted there, is too coarse.)"""
    dfa = compile_json_schema(schema, "compact")
    validator = reference_validator(schema)
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
    validator = reference_validator(schema)
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
    only, so ``{"name": ..., "step": ...}`` is accepted with keys in any order."""
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
    validator = reference_validator(schema)
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
    validator = reference_validator(schema)
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


def test_one_of_overlap_shown_by_a_sampled_value(monkeypatch):
    """A sampled value valid under both branches shows they overlap: no superset of
    either (a 2000-character string's counter) is built to find that out, and a
    document matching both is still refused."""
    schema = {"oneOf": [
        {"type": "object", "required": ["a"], "properties": {"a": {"type": "string", "maxLength": 2000}}},
        {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}]}
    docs = [{"a": "x"}, {}, {"b": 1}, {"a": "x", "b": 1}, {"a": 1}, {"a": "x" * 2001}]
    assert _judged_as_jsonschema_judges(schema, docs, True, monkeypatch) == [False]


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
    validator = reference_validator(schema)
    docs = ([], [{"kind": "a", "p0": "w3x21"}], [{"kind": "b", "p1": "w39x273", "p3": "w0x0"}, {"kind": "a"}],
            [{"kind": "a", "p0": "w3x22"}], [{"kind": "c"}], [{"p0": "w1x7"}])
    for doc in docs:
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


def test_one_of_is_exclusive():
    dfa = dfa_for("one_of_overlapping")
    assert dfa.matches(b"-5") and dfa.matches(b"11")
    assert not dfa.matches(b"5")  # matches both branches


def test_one_of_beside_a_branch_that_takes_every_value_is_subtracted_exactly():
    """``oneOf [{}, X]`` holds exactly the values outside X. Where such a ``oneOf`` is
    itself subtracted (the items of another branch here), its superset is split by
    type too, not the union of its branches (any value), which would refuse
    ``["a","b"]``: valid, since the array branch refuses string items. ``instanceof``
    is no draft's keyword: that branch takes every value."""
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
    """A list of noise modules told apart by a ``type`` pattern, cut to three
    branches: the selector is not shown apart from the others, so each branch is
    taken minus the others' supersets, but not minus the superset of a branch shown
    apart from it (Perlin would lose every value to Billow's)."""
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
    validator = reference_validator(schema)
    assert any(validator.is_valid(d) for d in docs) and not all(validator.is_valid(d) for d in docs)
    for doc in docs:
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


def test_one_of_branches_of_different_types_are_apart_and_numbers_overlap_integers():
    """Branches told apart by type alone (no superset automata: a 2000-character
    string's is a long counter), while an integer branch and a number branch still
    overlap: 7 matches both, so it is refused."""
    schema = {"oneOf": [{"type": "string", "maxLength": 2000}, {"type": "null"}, {"type": "integer"},
                        {"type": "number", "minimum": 5}]}
    dfa = compile_json_schema(schema, "compact")
    validator = reference_validator(schema)
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
    validator = reference_validator(schema)
    for doc in ["ab", "abcd", "a", 7, 2.5, None, {"c": ["x"]}, {"c": ["y"]}, {"c": 1}, {"c": 2}, {}]:
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


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
    validator = reference_validator(twice)
    for doc in ({"a": "xy", "b": "abcd"}, {"a": "ab", "b": "xyz"}, {"a": "", "b": "axxxx"}, {"b": "xyzw"}, {"a": 1}):
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


def test_one_of_split_by_type_with_branches_every_value_of_the_type_satisfies():
    """Split by type, a branch that says nothing about a type (``minLength`` for
    arrays, ``required`` for strings) takes every value of it: with one such branch
    the type's part is what no other branch holds; with two, no value of that type
    is valid. Checked against jsonschema."""
    schema = {"oneOf": [{"minLength": 2}, {"type": "array", "maxItems": 1}, {"required": ["a"]}]}
    dfa = compile_json_schema(schema, "compact")
    validator = reference_validator(schema)
    for doc in ["", "x", "xy", [], [1], [1, 2], {}, {"a": 1}, {"b": 1}, 3, None, True]:
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc
