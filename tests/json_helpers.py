"""Helpers shared by the JSON Schema tests: the reference validator, compact JSON text,
values with keys in a schema's order, small mutations of a value, and schema families
with their compiled DFAs.
"""

from __future__ import annotations

import copy
import json
import random

import jsonschema

from guided.grammars.json_schema.compiler import compile_json_schema

#: Small schemas, one per keyword group the compiler handles: the hypothesis agreement
#: test runs each, and other tests compile them through :func:`dfa_for`.
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
    "if_on_a_property": {  # the "else" side must not be emptied by a superset
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
    "one_of_overlapping_objects": {  # optional keys tell the branches apart
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


def reference_validator(schema):
    """The ``jsonschema`` validator of the draft ``schema`` declares (2020-12 without
    ``$schema``), checking formats with the checkers installed.

    Example::

        assert reference_validator({"type": "string", "format": "date"}).is_valid("2024-02-29")
    """
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _decimal_fraction(x):
    """The exact value of a JSON number as written: a float by its shortest decimal
    spelling (``0.1`` is 1/10, not the binary float nearest it)."""
    from decimal import Decimal
    from fractions import Fraction

    return Fraction(Decimal(repr(x))) if isinstance(x, float) else Fraction(x)


def exact_reference_validator(schema):
    """``reference_validator``, with ``multipleOf`` decided exactly on the numbers'
    decimal values: ``jsonschema`` divides floats, so ``-8`` is no multiple of ``1e-09``
    to it (``-8 / 1e-09`` is not a whole float), while the JSON text ``-8`` is one.

    Example::

        assert exact_reference_validator({"multipleOf": 1e-09}).is_valid(-8)
    """
    base = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)

    def multiple_of(validator, step, instance, _schema):
        if not validator.is_type(instance, "number") or not validator.is_type(step, "number"):
            return
        import math

        if isinstance(instance, float) and not math.isfinite(instance):
            yield jsonschema.ValidationError(f"{instance!r} is not a multiple of {step}")
            return
        if (_decimal_fraction(instance) / _decimal_fraction(step)).denominator != 1:
            yield jsonschema.ValidationError(f"{instance!r} is not a multiple of {step}")

    cls = jsonschema.validators.extend(base, {"multipleOf": multiple_of})
    return cls(schema, format_checker=base.FORMAT_CHECKER)


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
    """``value`` as compact JSON text (no spaces, non-ASCII kept), UTF-8 encoded."""
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


_dfas = {}  # (family, whitespace) -> DFA, for the whole session


def dfa_for(name, whitespace="compact"):
    """The DFA of ``FAMILIES[name]`` under ``whitespace``, compiled once per session."""
    key = (name, json.dumps(whitespace))
    if key not in _dfas:
        _dfas[key] = compile_json_schema(FAMILIES[name], whitespace)
    return _dfas[key]


#: Object shapes for ``key_order="any"``: closed, counted, pattern keys, an impossible
#: optional key, nested objects.
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
