"""``uniqueItems`` checked beside the automaton: where it may be, and what applies where.

Distinct items of an open kind (strings, objects) are not a regular language, so
the automaton cannot hold them. Where an array's items are not a small enum, the
compiler builds the array without the constraint and a matcher beside the
automaton (``guided.unique_items``) refuses the token that would complete an item
equal to an earlier one. That is exact only if the two agree on which arrays are
constrained, so the compiler drops ``uniqueItems`` only on a schema object that is
*conjunctive*: every route to it from the root goes through keywords that always
apply to the value they name::

    plain (always applies)        properties/k, patternProperties/p,
                                  additionalProperties, items, prefixItems/i,
                                  additionalItems, allOf/i, $ref
    not plain (may or may not)    anyOf, oneOf, not, if/then/else, contains,
                                  dependentSchemas, dependencies, propertyNames, ...

At such an object the constraint holds whenever the instance reaches it, which is
what the matcher beside finds by walking the same keywords down the document's keys
and indices (``SiteMap``). On an object also reached through a keyword that is not
plain, ``uniqueItems`` of open kinds is refused as unsupported.

Cost: one pass over the schema's sub-schemas at compile time; at decoding time a
memoised lookup per container opened.
"""

from __future__ import annotations

import json
import re

from guided.errors import UnsupportedSchemaError
from guided.grammars.json_schema.drafts import LIST_KEYWORDS, MAP_KEYWORDS, ONE_SCHEMA_KEYWORDS

#: Keywords whose sub-schemas always apply to the value (or member) they name.
_PLAIN_ONE = ("additionalProperties", "additionalItems", "items")
_PLAIN_LIST = ("allOf", "items", "prefixItems")
_PLAIN_MAP = ("properties", "patternProperties")
#: Keywords that hold sub-schemas only to be referred to, not applied.
_STORES = ("definitions", "$defs")


def _edges(schema, resolve, legacy: bool):
    """``(plain, other)``: the sub-schemas of ``schema`` that apply always, as
    ``(sub-schema, kind, here)`` (kind None, or "array" / "object": a branch of
    ``anyOf`` / ``oneOf`` that is the only one a value of that kind can satisfy, which
    applies whenever the value is of that kind; ``here``: it applies to the same
    value, not to a member), and those that apply under some other condition
    (``resolve``: a ``$ref`` to its target)."""
    plain, other = [], []
    if not isinstance(schema, dict):
        return plain, other
    ref = schema.get("$ref")
    if isinstance(ref, str):
        plain.append((resolve(ref), None, True))
        if legacy:  # draft 4-7: a $ref's siblings do not apply
            return plain, other
    for k in ONE_SCHEMA_KEYWORDS:
        sub = schema.get(k)
        if isinstance(sub, (dict, bool)):
            (plain.append((sub, None, False)) if k in _PLAIN_ONE else other.append(sub))
    for k in LIST_KEYWORDS:
        subs = schema.get(k)
        if not isinstance(subs, list):
            continue
        subs = [s for s in subs if isinstance(s, (dict, bool))]
        if k in _PLAIN_LIST:
            plain.extend((s, None, k == "allOf") for s in subs)
            continue
        for i, sub in enumerate(subs):
            kinds = [kind for kind in _KINDS if _sole_branch(subs, i, kind, resolve, legacy)] \
                if k in _BRANCHES else []
            plain.extend((sub, kind, True) for kind in kinds)
            if not kinds:
                other.append(sub)
    for k in MAP_KEYWORDS:
        subs = schema.get(k)
        if isinstance(subs, dict) and k not in _STORES:
            for sub in subs.values():
                if isinstance(sub, (dict, bool)):
                    (plain.append((sub, None, False)) if k in _PLAIN_MAP else other.append(sub))
    return plain, other


_KINDS = ("array", "object")
_BRANCHES = ("anyOf", "oneOf")


def _sole_branch(branches: list, i: int, kind: str, resolve, legacy: bool) -> bool:
    """Whether branch ``i`` may hold a value of ``kind`` and no other branch may."""
    return _may_be(branches[i], kind, resolve, legacy, set()) and not any(
        _may_be(b, kind, resolve, legacy, set()) for j, b in enumerate(branches) if j != i)


def _may_be(schema, kind: str, resolve, legacy: bool, seen: set) -> bool:
    """Whether some value of JSON type ``kind`` might satisfy ``schema`` (True where
    unsure: only ``type``, ``enum`` / ``const``, ``$ref`` and the logic keywords are read)."""
    if schema is False:
        return False
    if not isinstance(schema, dict) or id(schema) in seen:
        return True
    seen = seen | {id(schema)}
    ref = schema.get("$ref")
    if isinstance(ref, str):
        if not _may_be(resolve(ref), kind, resolve, legacy, seen):
            return False
        if legacy:
            return True
    types = schema.get("type")
    if isinstance(types, str):
        types = [types]
    if isinstance(types, list) and kind not in types:
        return False
    for key in ("enum", "const"):
        values = schema.get(key) if key == "enum" else [schema[key]] if key in schema else None
        if isinstance(values, list) and not any(isinstance(v, list if kind == "array" else dict) for v in values):
            return False
    if isinstance(schema.get("allOf"), list) and not all(
            _may_be(s, kind, resolve, legacy, seen) for s in schema["allOf"]):
        return False
    for key in _BRANCHES:
        if isinstance(schema.get(key), list) and not any(_may_be(s, kind, resolve, legacy, seen) for s in schema[key]):
            return False
    return True


def conjunctive_sites(root, resolve, legacy: bool) -> tuple[set[int], dict[str, object]]:
    """The ids of the schema objects with ``uniqueItems: true`` that every route from
    ``root`` reaches through plain keywords only (a sole branch only where the value
    is an array), and every ``$ref`` met with its target.

    Args:
        root: the root schema.
        resolve: ``resolve(ref)`` is the schema a ``$ref`` names.
        legacy: draft 4-7 rules (a ``$ref``'s siblings do not apply).

    Returns:
        ``(site ids, {ref: target})``.

    Example::

        >>> tags, other = {"type": "array", "uniqueItems": True}, {"uniqueItems": True}
        >>> root = {"properties": {"tags": tags}, "anyOf": [other, {"type": "array"}]}
        >>> sites, refs = conjunctive_sites(root, None, legacy=False)
        >>> id(tags) in sites, id(other) in sites
        (True, False)
    """
    refs: dict[str, object] = {}

    def resolved(ref: str):
        if ref not in refs:
            refs[ref] = resolve(ref)
        return refs[ref]

    # Reachable through plain keywords, with what the kind of the value there must
    # be (None: any); a sole branch of another kind than the one required is not plain.
    plain_seen: dict[tuple[int, str | None], object] = {}
    stack = [(root, None)]
    others: list = []
    while stack:
        s, kind = stack.pop()
        if (id(s), kind) in plain_seen:
            continue
        plain_seen[(id(s), kind)] = s
        plain, other = _edges(s, resolved, legacy)
        for sub, need, here in plain:
            if not here:
                stack.append((sub, None))
            elif need is None or kind is None or need == kind:
                stack.append((sub, need or kind))
            else:
                others.append(sub)
        others.extend(other)
    anywhere: set[int] = set()
    stack = others
    while stack:  # reachable through some keyword that may not apply
        s = stack.pop()
        if id(s) in anywhere:
            continue
        anywhere.add(id(s))
        plain, other = _edges(s, resolved, legacy)
        stack.extend(sub for sub, _, _ in plain)
        stack.extend(other)
    unsafe = {i for (i, kind) in plain_seen if kind == "object"} | anywhere
    sites = {i for (i, _), s in plain_seen.items()
             if i not in unsafe and isinstance(s, dict) and s.get("uniqueItems") is True
             and not (legacy and isinstance(s.get("$ref"), str))}
    return sites, refs


class SiteMap:
    """Which schemas apply to each container of a document, as far as the arrays
    whose items are checked beside the automaton (``checked``: their schema objects'
    ids) are concerned. A container's *node* is the tuple of schema objects that all
    apply to it (``$ref``, ``allOf`` and sole ``anyOf`` / ``oneOf`` branches of its
    kind followed), or None where no checked array lies below; ``key_child`` and
    ``index_child`` give the schemas of a member, which ``open`` makes a node once
    the member's kind is seen.

    Args:
        root: the root schema.
        refs: every ``$ref`` that ``conjunctive_sites`` met, with its target.
        legacy: draft 4-7 rules (a ``$ref``'s siblings do not apply).
        checked: the ids of the array schemas whose items are checked here
            (``SchemaCompiler.unique_checked``).

    Raises:
        UnsupportedSchemaError: a ``patternProperties`` pattern above a checked
            array that Python's ``re`` cannot read.

    Example::

        >>> schema = {"properties": {"tags": {"type": "array", "uniqueItems": True}}}
        >>> sm = SiteMap(schema, {}, legacy=False, checked={id(schema["properties"]["tags"])})
        >>> top = sm.open(sm.start(), "object")
        >>> sm.unique(sm.open(sm.key_child(top, "tags"), "array")), sm.key_child(top, "other")
        (True, None)
    """

    def __init__(self, root, refs: dict[str, object], legacy: bool, checked: set[int]):
        self.legacy = legacy
        self._resolve = refs.__getitem__  # (every $ref the sites' search met)
        self.checked = checked
        self._memo: dict[tuple, tuple | None] = {}
        # The schema objects from which a checked array is reachable through plain keywords.
        forward: dict[int, list[int]] = {}
        objects: dict[int, object] = {}
        stack = [root]
        while stack:
            s = stack.pop()
            if id(s) in objects:
                continue
            objects[id(s)] = s
            plain = [sub for sub, _, _ in _edges(s, self._resolve, legacy)[0]]
            forward[id(s)] = [id(t) for t in plain]
            stack.extend(plain)
        backward: dict[int, list[int]] = {}
        for a, targets in forward.items():
            for b in targets:
                backward.setdefault(b, []).append(a)
        live = set()
        stack = [i for i in checked if i in objects]
        while stack:
            i = stack.pop()
            if i in live:
                continue
            live.add(i)
            stack.extend(backward.get(i, ()))
        self._live = live
        self._start = (root,) if id(root) in live else None
        self._patterns: dict[str, re.Pattern] = {}
        for obj in objects.values():  # the keys' patterns the tracker matches, as the reference validator does
            patterns = obj.get("patternProperties") if isinstance(obj, dict) else None
            for p in patterns if isinstance(patterns, dict) else ():
                try:
                    self._patterns[p] = re.compile(p)
                except re.error as e:
                    raise UnsupportedSchemaError(
                        f"patternProperties pattern {p!r} above a uniqueItems array is not one Python's re "
                        f"reads ({e}): keys cannot be matched against it beside the automaton",
                        "#", "uniqueItems") from None

    def start(self) -> tuple | None:
        """The schemas of the whole document."""
        return self._start

    def open(self, schemas, kind: str) -> tuple | None:
        """The node of a container of ``kind`` ("array" or "object") that
        ``schemas`` apply to."""
        if schemas is None:
            return None
        memo_key = (tuple(map(id, schemas)), kind)
        got = self._memo.get(memo_key, _UNSET)
        if got is not _UNSET:
            return got
        out: dict[int, dict] = {}
        stack = list(schemas)
        while stack:
            s = stack.pop()
            if not isinstance(s, dict) or id(s) in out:
                continue
            out[id(s)] = s
            ref = s.get("$ref")
            if isinstance(ref, str):
                stack.append(self._resolve(ref))
                if self.legacy:
                    continue
            if isinstance(s.get("allOf"), list):
                stack.extend(s["allOf"])
            for key in _BRANCHES:
                branches = s.get(key)
                if isinstance(branches, list):
                    branches = [b for b in branches if isinstance(b, (dict, bool))]
                    stack.extend(b for i, b in enumerate(branches)
                                 if _sole_branch(branches, i, kind, self._resolve, self.legacy))
        node = None
        if any(i in self._live for i in out):
            node = tuple(s for s in out.values() if not (self.legacy and isinstance(s.get("$ref"), str)))
        self._memo[memo_key] = node
        return node

    def unique(self, node) -> bool:
        """Whether an array at ``node`` has its items checked beside the automaton."""
        return node is not None and any(id(s) in self.checked for s in node)

    def key_child(self, node, key: str) -> tuple | None:
        """The schemas of the value at ``key`` of an object at ``node``."""
        if node is None:
            return None
        subs = []
        for s in node:
            matched = False
            props = s.get("properties")
            if isinstance(props, dict) and key in props:
                subs.append(props[key])
                matched = True
            patterns = s.get("patternProperties")
            if isinstance(patterns, dict):
                for pattern, sub in patterns.items():
                    if self._patterns[pattern].search(key):
                        subs.append(sub)
                        matched = True
            if not matched and "additionalProperties" in s:
                subs.append(s["additionalProperties"])
        return self._live_only(subs)

    def index_child(self, node, index: int) -> tuple | None:
        """The schemas of item ``index`` of an array at ``node`` (``items`` as the
        compiler reads it: a list is the draft 4-2019 tuple form, ``additionalItems``
        the rest)."""
        if node is None:
            return None
        subs = []
        for s in node:
            items = s.get("items")
            prefix = items if isinstance(items, list) else s.get("prefixItems")
            if isinstance(prefix, list) and index < len(prefix):
                subs.append(prefix[index])
            elif isinstance(items, list):
                if "additionalItems" in s:
                    subs.append(s["additionalItems"])
            elif items is not None:
                subs.append(items)
        return self._live_only(subs)

    def _live_only(self, subs: list) -> tuple | None:
        return tuple(subs) if any(id(s) in self._live for s in subs) else None


_UNSET = object()


def canonical(value):
    """A hashable key equal for JSON values that ``uniqueItems`` counts as equal
    (numbers by value, ``true`` apart from ``1``, objects whatever their key order).

    Example::

        >>> canonical({"a": 1, "b": [2.0]}) == canonical({"b": [2], "a": 1.0}), canonical(True) == canonical(1)
        (True, False)
    """
    if isinstance(value, bool):
        return ("b", value)
    if value is None:
        return ("z",)
    if isinstance(value, (int, float)):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, list):
        return ("a", tuple(canonical(v) for v in value))
    return ("o", frozenset((k, canonical(v)) for k, v in value.items()))


def item_key(text: bytes):
    """``canonical`` of one item's JSON text (what ``guided.unique_items`` compares)."""
    return canonical(json.loads(text))
