"""Small values that may be valid under a schema: witnesses that two schemas overlap.

``oneOf`` needs to know which branches no value satisfies together. Automata answer
that exactly but can take seconds (a superset of each whole branch, a 1024-character
string's counter). Often one small value settles it first: if the reference
validator accepts it under both schemas, they overlap, and no automaton is built.
The values here are only candidates; the caller checks each with the validator, so a
poor guess costs a validation, never correctness.

Cost notes: ``sample`` walks the schema once, following required keys and
``minItems`` items only, at most ``MAX_SAMPLE_DEPTH`` levels deep.
"""

from __future__ import annotations

#: Containers nested deeper than this are sampled as empty ones.
MAX_SAMPLE_DEPTH = 8
_SIMPLE = [None, True, False, 0, 1, 0.5, -1, [], {}]


def listed_values(schema) -> list | None:
    """The values a schema lists (``const``, else ``enum``), or None."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return [schema["const"]]
    values = schema.get("enum")
    return values if isinstance(values, list) else None


def witnesses(a, b) -> list:
    """Values to try against two value schemas: one of each simple kind, and strings
    of the lengths their bounds name.

    Example::

        >>> witnesses({"type": "string", "maxLength": 3}, {"minLength": 2})[-3:]
        ['x', 'xx', 'xxx']
    """
    lengths = {0, 1}
    for s in (a, b):
        if isinstance(s, dict):
            for k in ("minLength", "maxLength"):
                n = s.get(k)
                if isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= 4096:
                    lengths.add(n)
    return _SIMPLE + ["x" * n for n in sorted(lengths)]


def sample(schema, deref, depth: int = 0):
    """A guess at a small valid value of ``schema``: its first listed value, or the
    least value of its first type (required keys and ``minItems`` items sampled in
    turn). ``deref`` follows a ``$ref``; ``allOf`` parts are read as one schema.

    Example::

        >>> sample({"type": "object", "required": ["n"], "properties": {"n": {"minimum": 3}}}, lambda s: s)
        {'n': 3}
    """
    schema = _flat(schema, deref)
    if not isinstance(schema, dict):
        return None
    listed = listed_values(schema)
    if listed:
        return listed[0]
    for branches in ("anyOf", "oneOf"):
        if isinstance(schema.get(branches), list) and schema[branches]:
            return sample({**{k: v for k, v in schema.items() if k != branches}, "allOf": [schema[branches][0]]},
                          deref, depth)
    kind = _first_type(schema)
    if kind == "object":
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        required = [r for r in schema.get("required", []) if isinstance(r, str)] if depth < MAX_SAMPLE_DEPTH else []
        return {r: sample(props.get(r, True), deref, depth + 1) for r in required}
    if kind == "array":
        n = schema.get("minItems", 0)
        if not isinstance(n, int) or depth >= MAX_SAMPLE_DEPTH or n > 16:
            return []
        items = schema.get("items", True)
        return [sample(items if isinstance(items, dict) else True, deref, depth + 1) for _ in range(n)]
    if kind == "string":
        n = schema.get("minLength", 0)
        return "x" * n if isinstance(n, int) and 0 <= n <= 4096 else ""
    if kind in ("integer", "number"):
        for k, step in (("minimum", 0), ("exclusiveMinimum", 1), ("maximum", 0), ("exclusiveMaximum", -1)):
            v = schema.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return int(v) + step if kind == "integer" or step else v
        return 0
    return {"boolean": True, "null": None}.get(kind)


def _flat(schema, deref):
    """``schema`` with its ``$ref`` followed and its ``allOf`` parts laid over it."""
    schema = deref(schema)
    if not isinstance(schema, dict) or not isinstance(schema.get("allOf"), list):
        return schema
    out = {k: v for k, v in schema.items() if k != "allOf"}
    for part in schema["allOf"]:
        part = _flat(part, deref)
        if isinstance(part, dict):
            for k, v in part.items():
                if k == "required" and isinstance(v, list):
                    out["required"] = list(dict.fromkeys(out.get("required", []) + v))
                elif k == "properties" and isinstance(v, dict):
                    out["properties"] = {**out.get("properties", {}), **v}
                else:
                    out.setdefault(k, v)
    return out


def _first_type(schema: dict) -> str | None:
    t = schema.get("type")
    if isinstance(t, list):
        t = t[0] if t else None
    if isinstance(t, str):
        return t
    if "properties" in schema or "required" in schema:
        return "object"
    if "items" in schema:
        return "array"
    if any(k in schema for k in ("minLength", "maxLength", "pattern", "format")):
        return "string"
    if any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")):
        return "number"
    return None
