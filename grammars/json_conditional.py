"""``if`` / ``then`` / ``else`` and ``not`` over object properties, as unions of schemas.

Real schemas branch on a property's value::

    {"type": "object", "properties": {"kind": {"enum": ["a", "b"]}, "x": {}, "y": {}},
     "if": {"properties": {"kind": {"const": "a"}}},
     "then": {"required": ["x"]}, "else": {"required": ["y"]}}

Automaton algebra (the condition's automaton intersected with the object, or its
superset subtracted) needs the condition's object in the same key order as the
object's own, and the subtracted superset of an object ignores optional keys: the
"else" side came out empty and the compiler called such schemas unsatisfiable.

When the condition only says ``type: object``, ``required`` and ``properties``, its
negation is a short union of schemas too: a value fails it when it is not an object
(if the condition asked for one), when a required key is missing, or when some key
is present with a value that fails that key's schema::

    not {"required": ["r"], "properties": {"k": S}}
      = anyOf [{"type": "object", "properties": {"r": false}},
               {"type": "object", "required": ["k"], "properties": {"k": {"not": S}}}]

So ``{base, if: I, then: T, else: E}`` is exactly ``{base, anyOf: [allOf [I, T],
allOf [not-I part, E] for each part]}``, and ``{base, not: N}`` is ``{base, anyOf:
[not-N parts]}``. Each branch merges with the base by keywords, so keys stay in the
base's ``properties`` order and nothing but a property's own ``not`` (a small value
automaton) needs algebra. Conditions of any other shape are left to the algebra.
"""

from __future__ import annotations

from .json_merge import ANNOTATIONS

#: JSON types other than "object" ("number" includes the integers).
NOT_OBJECT = ["null", "boolean", "number", "string", "array"]


def negation(schema) -> list | None:
    """Schemas whose union is exactly the values that fail ``schema``, or None when
    ``schema`` says more than ``type: object``, ``required`` and ``properties``.
    ``[]`` means nothing fails it."""
    if schema is True:
        return []
    if schema is False:
        return [True]
    if not isinstance(schema, dict):
        return None
    if set(schema) - {"type", "required", "properties"} - ANNOTATIONS:
        return None
    kind = schema.get("type")
    required = schema.get("required", [])
    props = schema.get("properties", {})
    if kind not in (None, "object", ["object"]) or not isinstance(required, list) or not isinstance(props, dict):
        return None
    parts: list = [{"type": NOT_OBJECT}] if kind is not None else []
    for name in dict.fromkeys(required):
        if isinstance(name, str):
            parts.append({"type": "object", "properties": {name: False}})
    for name, sub in props.items():
        if sub is True or sub == {}:
            continue  # no value fails it
        inner = {} if sub is False else {"properties": {name: {"not": sub}}}
        parts.append({"type": "object", "required": [name], **inner})
    return parts


def conditional_as_union(schema: dict, deref) -> dict | None:
    """``schema`` (which has no ``anyOf`` of its own) with its ``if`` / ``then`` /
    ``else`` as an ``anyOf``, or None when the condition's negation is not a union of
    schemas. ``deref`` follows ``$ref``."""
    cond = deref(schema["if"])
    then, otherwise = schema.get("then", True), schema.get("else", True)
    negated = negation(cond)
    if negated is None:
        return None
    branches = ([{"allOf": [cond, then]}] if cond is not False else []) + [{"allOf": [n, otherwise]} for n in negated]
    rest = {k: v for k, v in schema.items() if k not in ("if", "then", "else")}
    return {**rest, "anyOf": branches}


def not_as_union(schema: dict, deref) -> dict | None:
    """``schema`` with its ``not`` as an ``anyOf`` (None as above, and when no value
    fails the negated schema: the algebra then reports the schema unsatisfiable)."""
    negated = negation(deref(schema["not"]))
    if not negated:
        return None
    rest = {k: v for k, v in schema.items() if k != "not"}
    return {**rest, "anyOf": negated}
