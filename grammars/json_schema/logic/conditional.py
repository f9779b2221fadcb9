"""``if`` / ``then`` / ``else`` and ``not`` over object properties, as unions of schemas.

Real schemas branch on a property's value::

    {"type": "object", "properties": {"kind": {"enum": ["a", "b"]}, "x": {}, "y": {}},
     "if": {"properties": {"kind": {"const": "a"}}},
     "then": {"required": ["x"]}, "else": {"required": ["y"]}}

Automaton algebra (the condition's automaton intersected with the object, or its
superset subtracted) needs the condition's object in the same key order as the
object's own, and the subtracted superset of an object ignores optional keys: the
"else" side comes out empty, and such a schema reads as unsatisfiable.

When the condition only says ``type: object``, ``required`` and ``properties``, its
negation is a short union of schemas too: a value fails it when it is not an object
(if the condition asked for one), when a required key is missing, or when some key
is present with a value that fails that key's schema::

    not {"required": ["r"], "properties": {"k": S}}
      = anyOf [{"type": "object", "properties": {"r": false}},
               {"type": "object", "required": ["k"], "properties": {"k": {"not": S}}}]

The same holds for an array schema of counts alone (too short, too long), for a
``not`` of such a schema (what fails ``not X`` is what X holds: Prometheus writes
"this key is set" as ``not {"properties": {"k": {"const": null}}}``), and for a
``oneOf`` with a branch that every value satisfies (``{}``, or a misspelt
``{"#ref": ...}``): it holds where no other branch does, so it fails where one does.
An ``allOf`` of such schemas fails where one part fails, and an ``anyOf`` where a
way to fail each branch holds (one schema per choice, up to ``MAX_NEGATED_CHOICES``).

So ``{base, if: I, then: T, else: E}`` is exactly ``{base, anyOf: [allOf [I, T],
allOf [not-I part, E] for each part]}``, and ``{base, not: N}`` is ``{base, anyOf:
[not-N parts]}``. Each branch merges with the base by keywords, so keys stay in the
base's ``properties`` order and nothing but a property's own ``not`` (a small value
automaton) needs algebra. Conditions of any other shape are left to the algebra.

The same negation makes overlapping ``oneOf`` branches exact without algebra (the
compiler joins each branch with a way of failing each branch it overlaps), and
``conditionals_by_value`` turns an ``allOf`` of conditionals on one key into one
branch per value of that key.
"""

from __future__ import annotations

import json

from .merge import ANNOTATIONS
from .witness import listed_values

#: JSON types other than "object" / "array" ("number" includes the integers).
NOT_OBJECT = ["null", "boolean", "number", "string", "array"]
NOT_ARRAY = ["null", "boolean", "number", "string", "object"]


def negation(schema, deref=None, keys: list | None = None) -> list | None:
    """Schemas whose union is exactly the values that fail ``schema``, or None when
    ``schema`` is not an object schema of ``type``, ``required`` and ``properties``,
    an array schema of ``type``, ``minItems`` and ``maxItems`` (``items`` only
    ``true`` or ``false``), or (given ``deref``, which follows ``$ref`` and drops
    keywords no draft defines) a ``oneOf`` with a branch that every value satisfies
    or an ``anyOf`` / ``allOf`` of such schemas; or a ``not`` of one of these.

    Args:
        schema: the schema to negate.
        deref: follows a ``$ref`` (and drops undefined keywords); without it
            ``oneOf`` / ``anyOf`` / ``allOf`` are not read.
        keys: the only keys an object may have where the negation will be used (a
            closed object: ``additionalProperties: false``). There an object schema
            may be closed too: an object fails it by having one of those keys that
            it does not list. (Without such a list, "some key not listed" is no
            union of schemas.)

    Returns:
        The schemas of the union (``[]``: nothing fails ``schema``), or None.

    Example::

        >>> missing_r, bad_k = negation({"required": ["r"], "properties": {"k": {"type": "string"}}})
        >>> missing_r
        {'type': 'object', 'properties': {'r': False}}
        >>> bad_k
        {'type': 'object', 'required': ['k'], 'properties': {'k': {'not': {'type': 'string'}}}}
    """
    if schema is True:
        return []
    if schema is False:
        return [True]
    if not isinstance(schema, dict):
        return None
    words = set(schema) - ANNOTATIONS
    kind = schema.get("type")
    if keys is not None and schema.get("additionalProperties") is False:
        words -= {"additionalProperties"}
    if not words - _OBJECT_WORDS and kind in (None, "object", ["object"]):
        return _object_negation(schema, keys)
    if not words - _ARRAY_WORDS and kind in (None, "array", ["array"]):
        return _array_negation(schema)
    if words == {"not"}:
        # What fails "not X" is what X holds, for an X of the shapes above (of others,
        # such as string patterns, the algebra's automata stay smaller than unions).
        inner = schema["not"] if deref is None else deref(schema["not"])
        return [schema["not"]] if negation(inner, deref, keys) is not None else None
    if words == {"oneOf"} and deref is not None:
        return _one_of_negation(schema["oneOf"], deref)
    if words in ({"anyOf"}, {"allOf"}) and deref is not None and isinstance(schema[min(words)], list):
        return _combined_negation(schema, min(words), deref, keys)
    return None


#: Most schemas a negated ``anyOf`` may spread into (one per choice of a way to fail
#: each branch): past it the algebra takes it.
MAX_NEGATED_CHOICES = 64


def _combined_negation(schema, word: str, deref, keys) -> list | None:
    """A value fails ``allOf`` parts where it fails one of them (the union of their
    negations), and fails ``anyOf`` branches where it fails every one (a choice of
    a negation part per branch, all holding: ``not {"anyOf": [{"required": ["a"]},
    {"required": ["b"]}]}`` is the objects with neither key). Over-mode supersets of
    such an ``anyOf`` hold required keys found anywhere inside, so the algebra's
    ``not`` would refuse ``{"a": {"ref": 1}}`` under ``not {"anyOf": [{"required":
    ["ref"]}]}``."""
    if not schema[word]:
        return None
    parts = []
    for b in schema[word]:
        got = negation(deref(b), deref, keys)
        if got is None:
            return None
        parts.append(got)
    if word == "allOf":
        return [p for got in parts for p in got]
    choices: list[dict] = [{}]
    for got in parts:
        choices = choices_with(choices, got)
        if len(choices) > MAX_NEGATED_CHOICES:
            return None
    return [{"allOf": list(c.values())} if len(c) > 1 else next(iter(c.values())) for c in choices]


def choices_with(choices: list[dict], parts: list) -> list[dict]:
    """Each choice (parts that must all hold, by their JSON text) joined with one of
    ``parts`` (one must hold), with no choice that only narrows another: a choice
    that holds one of ``parts`` already stays as it is, and a choice holding every
    part of another is dropped. The union of the choices is the same; there are far
    fewer of them where the negations share parts (GeoJSON's geometries: "no
    ``coordinates``" fails every shape at once, so a GeometryCollection's 256
    choices against four shapes become 18).

    Args:
        choices: dicts from each part's JSON text (``sort_keys``) to the part.
        parts: the schemas of which one must hold.

    Returns:
        The grown choices, in the same form.

    Example::

        >>> a, b = {"required": ["a"]}, {"required": ["b"]}
        >>> [list(c.values()) for c in choices_with(choices_with([{}], [a, b]), [a])]
        [[{'required': ['a']}]]
    """
    named = {json.dumps(p, sort_keys=True): p for p in parts}
    grown: dict[frozenset, dict] = {}
    for c in choices:
        for more in ([c] if any(k in c for k in named) else ({**c, k: p} for k, p in named.items())):
            grown.setdefault(frozenset(more), more)
    kept: list[frozenset] = []
    for held in sorted(grown, key=len):
        if not any(k <= held for k in kept):
            kept.append(held)
    return [grown[k] for k in kept]


_OBJECT_WORDS = {"type", "required", "properties"}
_ARRAY_WORDS = {"type", "items", "minItems", "maxItems"}


def _object_negation(schema, keys: list | None = None) -> list | None:
    required = schema.get("required", [])
    props = schema.get("properties", {})
    if not isinstance(required, list) or not isinstance(props, dict):
        return None
    parts: list = [{"type": NOT_OBJECT}] if "type" in schema else []
    for name in dict.fromkeys(required):
        if isinstance(name, str):
            parts.append({"type": "object", "properties": {name: False}})
    for name, sub in props.items():
        if sub is True or sub == {}:
            continue  # no value fails it
        inner = {} if sub is False else {"properties": {name: _negated(sub)}}
        parts.append({"type": "object", "required": [name], **inner})
    if keys is not None and schema.get("additionalProperties") is False:
        parts += [{"type": "object", "required": [k]} for k in keys if k not in props]
    return parts


def _array_negation(schema) -> list | None:
    """An array fails ``schema`` when it is too short or too long (or, under
    ``items: false``, not empty); a value that is no array fails it only if
    ``type`` says array. Arrays with an ``items`` schema are left to the algebra:
    as a union, "some item fails it" is a ``contains`` of a negated schema, which
    makes compiling up to 40x slower on MaskBench's ``oneOf`` schemas."""
    items = schema.get("items", True)
    lo, hi = schema.get("minItems", 0), schema.get("maxItems")
    if items not in (True, False, {}):
        return None
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (lo, 0 if hi is None else hi)):
        return None
    parts: list = [{"type": NOT_ARRAY}] if "type" in schema else []
    if lo > 0:
        parts.append({"type": "array", "maxItems": lo - 1})
    if hi is not None:
        parts.append({"type": "array", "minItems": hi + 1})
    if items is False:
        parts.append({"type": "array", "minItems": 1})
    return parts


def _one_of_negation(branches, deref) -> list | None:
    """A ``oneOf`` with one branch that every value satisfies (``{}``, or a branch of
    misspelt keywords: ``{"#ref": ...}``) holds where no other branch does, so it
    fails where some other branch holds; with two such branches it always fails."""
    if not isinstance(branches, list):
        return None
    others, every = [], 0
    for b in branches:
        d = deref(b)
        if d is True or (isinstance(d, dict) and not set(d) - ANNOTATIONS):
            every += 1
        else:
            others.append(b)
    if not every:
        return None
    return [True] if every > 1 else others


def _negated(schema):
    """``{"not": schema}``, where ``schema = {"not": x}`` is just ``x`` (``"length":
    {"not": {}}`` forbids a key: failing it is having the key, with any value)."""
    if isinstance(schema, dict) and set(schema) - ANNOTATIONS == {"not"}:
        return schema["not"]
    return {"not": schema}


def conditional_as_union(schema: dict, deref) -> dict | None:
    """``schema`` (which has no ``anyOf`` of its own) with its ``if`` / ``then`` /
    ``else`` as an ``anyOf``, or None when the condition's negation is not a union of
    schemas. ``deref`` follows ``$ref``.

    Example::

        >>> holds, fails = conditional_as_union({"if": {"required": ["a"]}, "then": {"required": ["b"]}},
        ...                                     lambda s: s)["anyOf"]
        >>> holds
        {'allOf': [{'required': ['a']}, {'required': ['b']}]}
        >>> fails
        {'allOf': [{'type': 'object', 'properties': {'a': False}}, True]}
    """
    cond = deref(schema["if"])
    then, otherwise = schema.get("then", True), schema.get("else", True)
    negated = negation(cond, deref)
    if negated is None:
        return None
    branches = ([{"allOf": [cond, then]}] if cond is not False else []) + [{"allOf": [n, otherwise]} for n in negated]
    rest = {k: v for k, v in schema.items() if k not in ("if", "then", "else")}
    return {**rest, "anyOf": branches}


def not_as_union(schema: dict, deref) -> dict | None:
    """``schema`` with its ``not`` as an ``anyOf`` (None as above, and when no value
    fails the negated schema, which ``SchemaCompiler.value`` reports unsatisfiable
    before asking)."""
    negated = negation(deref(schema["not"]), deref)
    if not negated:
        return None
    rest = {k: v for k, v in schema.items() if k != "not"}
    return {**rest, "anyOf": negated}


def _discriminator(cond) -> tuple[str, dict] | None:
    """``(key, schema)`` when the condition only tests the value of one key:
    ``{"properties": {key: schema}}``, optionally with ``required: [key]`` and
    ``type: object``; None otherwise."""
    if not isinstance(cond, dict) or set(cond) - {"type", "required", "properties"} - ANNOTATIONS:
        return None
    props = cond.get("properties")
    if not isinstance(props, dict) or len(props) != 1 or cond.get("type", "object") not in ("object", ["object"]):
        return None
    (key, sub), = props.items()
    if cond.get("required", []) not in ([], [key]) or not isinstance(sub, dict):
        return None
    return key, sub


def _listed_values(sub) -> list | None:
    """The values a ``const`` / ``enum`` schema lists (None for any other schema)."""
    if set(sub) - {"const", "enum", "type"} - ANNOTATIONS:
        return None
    return listed_values(sub)


def conditionals_by_value(schema: dict, deref, view, holds) -> dict | None:
    """An ``allOf`` of ``if`` / ``then`` / ``else`` parts that all branch on one key's
    value, as an ``anyOf`` with one branch per value, or None when ``schema`` is not
    of that shape.

    Schemas such as JSON Schema Store's cloudify or schema-app list a conditional
    per value of a ``type`` key::

        {"properties": {"type": {"enum": ["a", "b", "c"]}, ...}, "required": ["type"],
         "allOf": [{"if": {"properties": {"type": {"const": "a"}}}, "then": A},
                   {"if": {"properties": {"type": {"const": "b"}}}, "then": B}]}

    Unioning each conditional (``conditional_as_union``) and intersecting the unions
    multiplies branches; fixing the key's value decides every condition at once, so
    the value ``"a"`` gets ``A`` and every other part's ``else``, and so on: one branch
    per listed value, one for any other value (when the key's own schema does not
    list its values; conditions must then list theirs) and one for the key's absence
    (when it is optional).

    Args:
        schema: the schema with the ``allOf``.
        deref: follows a ``$ref``.
        view: ``view(schema)`` gives the ``(types, required, properties, ...)`` every
            value of a schema has, or None (``LogicCompiler.object_view``).
        holds: ``holds(value, schema)``, the reference validator.

    Returns:
        ``{"anyOf": [...]}``, one branch per case, or None.
    """
    parts = [deref(p) for p in schema.get("allOf", [])]
    conds = [p for p in parts if isinstance(p, dict) and "if" in p]
    if len(conds) < 2:
        return None
    key, tests = None, []
    for c in conds:
        found = _discriminator(deref(c["if"]))
        if found is None or (key is not None and found[0] != key):
            return None
        key = found[0]
        tests.append((found[1], bool(deref(c["if"]).get("required")), c.get("then", True), c.get("else", True)))
    is_cond = {id(c) for c in conds}
    rest = [{k: v for k, v in p.items() if k not in ("if", "then", "else")} if id(p) in is_cond else p for p in parts]
    kept = [p for p in rest if p != {}]
    base = {k: (v if k != "allOf" else kept) for k, v in schema.items()}
    shape = view(base if kept else {k: v for k, v in base.items() if k != "allOf"})
    if shape is None or shape[0] != {"object"}:
        return None  # a condition on properties holds for every non-object: keep it simple
    types, required, props = shape[:3]
    own = deref(props.get(key, True))
    domain = _listed_values(own) if isinstance(own, dict) else None
    if domain is None:  # any value: the conditions must list the ones they pick
        listed = [_listed_values(t) for t, _, _, _ in tests]
        if any(v is None for v in listed):
            return None
        domain = list({json.dumps(v, sort_keys=True): v for vs in listed for v in vs}.values())
        others = {"properties": {key: {"not": {"enum": domain}}}, "required": [key]}
    else:
        others = None

    def branch(pin, pick):
        return {**base, "allOf": base["allOf"] + [pin] + [then if pick(t, req) else otherwise
                                                          for t, req, then, otherwise in tests]}

    branches = [branch({"properties": {key: {"const": v}}, "required": [key]}, lambda t, req, v=v: holds(v, t))
                for v in domain]
    if others is not None:
        branches.append(branch(others, lambda t, req: False))
    if key not in required:
        branches.append(branch({"properties": {key: False}}, lambda t, req: not req))
    return {"anyOf": branches}
