"""``oneOf`` / ``not`` (with ``anyOf`` / ``allOf``) that only say which keys are present.

Function-calling schemas often write "either length and width, or base and height"::

    {"type": "object", "properties": {...},
     "oneOf": [{"required": ["length", "width"], "not": {"required": ["base", "height"]}},
               {"required": ["base", "height"], "not": {"required": ["length", "width"]}}]}

Automaton algebra over such branches (each branch minus the others) builds and
minimises DFAs of whole objects: seconds for five numeric properties. But the
branches only constrain which of a few keys appear, so the schema is exactly the
union, over the combinations of those keys that satisfy the logic, of the object
with those keys required and the others forbidden.

Combinations that differ only in keys the logic does not care about there are one
object, with those keys left as the schema has them (the prime implicants of the
logic, picked to cover every combination): ``"not": {"required": [7 keys]}`` is 7
objects ("this key is missing"), not the 127 combinations. The objects may overlap;
their union is the same.

Cost: 2 ** (keys named in the logic) evaluations of the logic, and one object per
implicant picked (at most ``MAX_PRESENCE_KEYS`` keys are enumerated). Logic with
neither ``oneOf`` nor ``not`` is left to keyword merging, which is cheaper there.
"""

from __future__ import annotations

from .merge import ANNOTATIONS

#: The logic keywords read here.
LOGIC = ("allOf", "anyOf", "oneOf", "not")
#: Most keys whose combinations of presence are enumerated (2 ** n evaluations).
MAX_PRESENCE_KEYS = 8


def presence_keys(schema: dict) -> list[str] | None:
    """The keys named by ``schema``'s logic keywords when every branch speaks only of
    ``required`` (in properties order), else None (also where the logic needs no
    algebra, names a key outside ``properties`` or more than ``MAX_PRESENCE_KEYS``).

    Example::

        >>> presence_keys({"properties": {"a": {}, "b": {}}, "not": {"required": ["b", "a"]}})
        ['a', 'b']
    """
    if not any(k in schema for k in LOGIC):
        return None
    named: list[str] = []
    for k in LOGIC:
        if k in schema:
            subs = schema[k] if k != "not" else [schema[k]]
            if not isinstance(subs, list) or not all(presence_only(s, named) for s in subs):
                return None
    props = schema.get("properties")
    if not named or not isinstance(props, dict) or any(n not in props for n in named):
        return None  # a required key outside properties could sit among the extras
    if len(set(named)) > MAX_PRESENCE_KEYS or not _needs_algebra(schema):
        return None
    return [k for k in props if k in named]


def _needs_algebra(node) -> bool:
    """Whether the logic has a ``oneOf`` or ``not`` (which automata can only do by
    subtraction). ``allOf`` / ``anyOf`` of ``required`` merge cheaply as they are."""
    if not isinstance(node, dict):
        return False
    if "oneOf" in node or "not" in node:
        return True
    return any(_needs_algebra(s) for k in ("allOf", "anyOf") for s in node.get(k, []) or [])


def presence_only(node, named: list[str]) -> bool:
    """Whether ``node`` speaks only of ``required`` (through the logic keywords),
    adding the keys it names to ``named``."""
    if isinstance(node, bool):
        return True
    if not isinstance(node, dict) or not set(node) - ANNOTATIONS <= {"required", *LOGIC}:
        return False
    req = node.get("required", [])
    if not isinstance(req, list) or not all(isinstance(r, str) for r in req):
        return False
    named.extend(req)
    for k in LOGIC:
        if k in node:
            subs = node[k] if k != "not" else [node[k]]
            if not isinstance(subs, list) or not all(presence_only(s, named) for s in subs):
                return False
    return True


def holds(node, present: set | None) -> bool:
    """Does the logic hold for an object with the ``present`` keys (None: a value that
    is not an object, for which every ``required`` holds)?"""
    if isinstance(node, bool):
        return node
    ok = present is None or all(r in present for r in node.get("required", []))
    if ok and "not" in node:
        ok = not holds(node["not"], present)
    if ok and "allOf" in node:
        ok = all(holds(s, present) for s in node["allOf"])
    if ok and "anyOf" in node:
        ok = any(holds(s, present) for s in node["anyOf"])
    if ok and "oneOf" in node:
        ok = sum(holds(s, present) for s in node["oneOf"]) == 1
    return ok


def presence_variants(schema: dict, keys: list[str]) -> list[dict]:
    """``schema`` without its logic keywords, once per implicant of the combinations
    of ``keys`` that satisfy them (``_cover``): the keys it has present required, those
    it has absent forbidden, the others as ``schema`` has them. Non-object types the
    schema allows come as one more variant when the logic holds for them.

    Example::

        >>> schema = {"type": "object", "properties": {"a": {}, "b": {}}, "not": {"required": ["a", "b"]}}
        >>> [v["properties"] for v in presence_variants(schema, ["a", "b"])]
        [{'a': False, 'b': {}}, {'a': {}, 'b': False}]
    """
    logic = {k: schema[k] for k in LOGIC if k in schema}
    base = {k: v for k, v in schema.items() if k not in LOGIC}
    required = list(base.get("required", []) or [])
    satisfying = []
    for mask in range(1 << len(keys)):
        present = {k for i, k in enumerate(keys) if mask >> i & 1}
        if not any(k in required and k not in present for k in keys) and holds(logic, present):
            satisfying.append(mask)
    variants = []
    for bits, care in _cover(satisfying, len(keys)):
        props = dict(base["properties"])
        for i, k in enumerate(keys):
            if care >> i & 1 and not bits >> i & 1:
                props[k] = False
        present = [k for i, k in enumerate(keys) if care >> i & 1 and bits >> i & 1]
        variants.append(dict(base, type="object", properties=props, required=list(dict.fromkeys(required + present))))
    types = base.get("type")
    others = [t for t in (types if isinstance(types, list) else [types]) if t not in (None, "object")]
    if types is None:
        others = ["null", "boolean", "number", "string", "array"]
    if others and holds(logic, None):
        variants.append(dict(base, type=others))
    return variants


def _cover(minterms: list[int], n: int) -> list[tuple[int, int]]:
    """Cubes ``(bits, care)`` whose union is exactly the set ``minterms`` of ``n``-bit
    masks: a cube holds every mask that agrees with ``bits`` where ``care`` has a 1.
    Quine-McCluskey's prime implicants (two cubes that differ in one cared-for bit
    merge), then greedily the one covering most masks not yet covered."""
    full = (1 << n) - 1
    level = {(m, full) for m in minterms}
    primes: set[tuple[int, int]] = set()
    while level:
        merged, used = set(), set()
        for bits, care in level:
            for i in range(n):
                bit = 1 << i
                other = (bits ^ bit, care)
                if care & bit and other in level:
                    merged.add((bits & ~bit, care & ~bit))
                    used.update({(bits, care), other})
        primes |= level - used
        level = merged
    left, out = set(minterms), []
    while left:
        best = max(sorted(primes), key=lambda c: sum(m & c[1] == c[0] for m in left))
        out.append(best)
        left = {m for m in left if m & best[1] != best[0]}
    return out
