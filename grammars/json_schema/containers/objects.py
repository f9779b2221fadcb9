"""JSON Schema objects: ``properties`` in schema order (or any order, through
``key_order``), ``required``, counts, ``additionalProperties`` /
``patternProperties`` / ``propertyNames`` as extra entries, and the superset
objects of "over" mode.

Schema order is a chain: the listed keys in turn (optional ones skippable), then
extra keys in a loop. The chain runs on ``k + 1`` parallel *tracks*, track c meaning
"c keys written so far", capped at k (``maxProperties``, else ``max(minProperties,
1)``): a key written from track 0 has no comma before it, and the object may close
on a track that meets ``minProperties``.

Part of ``SchemaCompiler`` (``compiler``), as a mixin: ``self`` is the compiler."""

from __future__ import annotations

import json
import re

from guided.errors import (
    EmptyLanguageError,
    RegexError,
    RegexTooLargeError,
    SchemaError,
    UnsatisfiableSchemaError,
    UnsupportedSchemaError,
)
from guided.fsm.dfa import DFA, determinize
from guided.fsm.nfa import NFA
from guided.fsm.ops import MAX_PRODUCT_STATES, embed, intersect, is_empty_intersection
from guided.grammars.json_schema import superset as sup
from guided.grammars.json_schema import text as jt
from guided.grammars.json_schema.keywords import (
    MAX_COUNTED_PROPERTIES,
    MAX_PATTERN_REGIONS,
    OBJECT_KEYWORDS,
    json_pointer,
    pattern_search,
    scalar_enum,
    scalar_kinds,
)
from guided.grammars.json_schema.strings import (
    body_dfa,
    keys_outside,
    minus,
    other_keys_dfa,
    pattern_key_dfa,
)

from .key_order import ObjectShape, any_order_object


class ObjectCompiler:
    """The objects of ``SchemaCompiler`` (a mixin: ``self`` is the compiler).

    ``SchemaCompiler.typed`` calls ``object`` for a schema that allows objects;
    ``entry`` and ``extra_entries`` build members, which the grammar engine for
    recursive schemas (``recursive``) uses too.

    Example::

        >>> from guided.grammars.json_schema import compile_json_schema
        >>> schema = {"properties": {"a": {"type": "integer"}, "b": {}}, "required": ["b"],
        ...           "additionalProperties": False}
        >>> dfa = compile_json_schema(schema, "compact")
        >>> dfa.matches(b'{"a":1,"b":null}'), dfa.matches(b'{"b":2,"a":1}'), dfa.matches(b'{"a":1}')
        (True, False, False)
        >>> compile_json_schema(schema, "compact", key_order="any").matches(b'{"b":2,"a":1}')
        True
    """

    # -- objects ---------------------------------------------------------------------

    def object(self, nfa, schema, path, depth):
        """The fragment of the objects ``schema`` allows: listed keys in
        ``properties`` order (any order with ``key_order="any"``, ``key_order``),
        required keys, ``minProperties`` / ``maxProperties``, extra keys after the
        listed ones (``extra_entries``); in over mode a superset (``object_superset``).

        Raises:
            UnsatisfiableSchemaError: no object satisfies the keywords.
            UnsupportedSchemaError: counts past ``MAX_COUNTED_PROPERTIES`` or
                ``unevaluatedProperties`` that constrains (``strict=True``).
        """
        if self.over:
            if OBJECT_KEYWORDS.intersection(schema):
                self.approximate()
            return self.object_superset(nfa, schema, path, depth)
        props = schema.get("properties", {}) or {}
        if not isinstance(props, dict):
            raise SchemaError("properties must be an object", json_pointer(path, "properties"), "properties")
        required = schema.get("required", []) or []
        if isinstance(required, bool):
            required = []  # draft 3's boolean: it marks this value required in its parent
        # Draft 3 writes required keys as ``"required": true`` in their own schemas.
        draft3 = [k for k, sub in props.items() if isinstance(sub, dict) and sub.get("required") is True]
        required = list(dict.fromkeys([*required, *draft3]))
        additional = schema.get("additionalProperties", True)
        patterns = schema.get("patternProperties", {}) or {}
        names_schema = schema.get("propertyNames")
        inner = depth + 1
        for k in ("unevaluatedProperties",):
            if k in schema and schema[k] not in ({}, None, True):
                if k == "unevaluatedProperties" and not patterns and additional is False:
                    continue  # nothing is unevaluated
                self.unsupported(k, path, "constraints between keys cannot be checked in property order")

        # Defined keys: properties first (schema order), then required keys not listed.
        order = list(props)
        for r in required:
            if r not in props:
                order.append(r)
        entries = []  # (name, schema, required)
        for name in order:
            sub = props.get(name)
            if sub is None:
                sub = self._extra_schema_for(name, patterns, additional)
            else:
                matching = [p for p in patterns if pattern_search(p, name)]
                if matching:
                    sub = {"allOf": [sub] + [patterns[p] for p in matching]}
            if names_schema is not None and not self.is_valid(name, names_schema):
                sub = False
            is_req = name in required
            if sub is False:
                if is_req:
                    raise UnsatisfiableSchemaError(f"required property {name!r} is not allowed", path)
                continue
            entries.append((name, sub, is_req))

        # Extra keys (additional / pattern properties), after the defined ones.
        extras = self.extra_entries(nfa, schema, order, patterns, additional, names_schema, path, inner)

        n_req = sum(1 for _, _, r in entries if r)
        lo_p = int(schema.get("minProperties", 0) or 0)
        hi_p = schema.get("maxProperties")
        possible = None if extras is not None else len(entries)
        if hi_p is not None:
            hi_p = int(hi_p)
            if hi_p < n_req:
                raise UnsatisfiableSchemaError("maxProperties is below the number of required keys", path)
            if possible is not None and hi_p >= possible:
                hi_p = None  # cannot be exceeded
        if lo_p <= n_req:
            lo_p = 0  # the required keys already make it
        if possible is not None and lo_p > possible:
            raise UnsatisfiableSchemaError("minProperties exceeds the number of allowed keys", path)
        # Count tracks: track c = "c keys written so far", capped at k (or stopping at
        # maxProperties). Without count keywords k = 1: "nothing yet" / "some keys".
        k = hi_p if hi_p is not None else max(lo_p, 1)
        if k > MAX_COUNTED_PROPERTIES and not entries and extras is not None:
            return self._counted_extras(nfa, extras, lo_p, hi_p, depth)
        if k > MAX_COUNTED_PROPERTIES:
            word = "maxProperties" if hi_p is not None else "minProperties"
            self.unsupported(word, path, f"counting up to {k} keys (at most {MAX_COUNTED_PROPERTIES})")
            k, hi_p, lo_p = 1, None, 0

        if self.key_order == "any" and (nfa.lazy or len(entries) <= (self.whole_keys or 0)):
            shape = ObjectShape(
                tuple((name, sub, req, json_pointer(path, "properties", name)) for name, sub, req in entries),
                extras, lo_p, hi_p, k)
            if self.grammar is not None and self.grammar.owns(nfa):
                return self.grammar.any_order_object(self, nfa, shape, path, depth)
            if not nfa.lazy and (len(entries) > 1 or (entries and extras is not None)):
                self._whole_built += 1  # order matters here: this try's limits are lower
            return any_order_object(self, nfa, shape, path, depth)

        def after(c: int):
            if c + 1 <= k:
                return c + 1
            return None if hi_p is not None else k  # at the cap: stay (or stop at max)

        open_, close = self.ws.brackets(nfa, b"{", b"}", depth, n_req == 0 and lo_p == 0)
        if not entries and extras is None:
            return open_[0], close[1]
        o = self.ws.site(nfa, "open", depth)
        nfa.epsilon(open_[1], o[0])
        tracks = [o[1]] + [nfa.state() for _ in range(k)]
        for name, sub, is_req in entries:
            key = json.dumps(name, ensure_ascii=False).encode("utf-8")
            nxt = [nfa.state() for _ in range(k + 1)]
            try:
                self._step(nfa, tracks, nxt, after, lambda: self.entry(
                    nfa, nfa.byte_string(key), sub, json_pointer(path, "properties", name), depth), depth)
            except UnsatisfiableSchemaError:
                if is_req:
                    raise
                # No value is possible, so the optional key is never written (the
                # first entry failed before anything was linked to it).
            if not is_req:
                for c in range(k + 1):
                    nfa.epsilon(tracks[c], nxt[c])
            tracks = nxt
        if extras is not None:
            try:
                self._step(nfa, tracks, tracks, after, extras, depth)
            except UnsatisfiableSchemaError:
                pass  # no extra key can have a valid value, so the object has none
        c_ws = self.ws.site(nfa, "close", depth)
        for c in range(max(lo_p, 1), k + 1):
            nfa.epsilon(tracks[c], c_ws[0])
        nfa.epsilon(c_ws[1], close[0])
        return open_[0], close[1]

    def _counted_extras(self, nfa, extras, lo: int, hi: int | None, depth: int):
        """An object of extra keys only (``additionalProperties`` / ``patternProperties``)
        with ``lo`` to ``hi`` (None: any number) of them: ``{`` entry (``,`` entry){lo-1,
        hi-1} ``}``, a counted repetition (built lazily where the NFA is), where count
        tracks would copy the entry once per count (``MAX_COUNTED_PROPERTIES``)."""
        open_, close = self.ws.brackets(nfa, b"{", b"}", depth, lo == 0)
        try:
            first = extras()
        except UnsatisfiableSchemaError:
            if lo > 0:
                raise
            return open_[0], close[1]  # no extra key can have a valid value: only {}
        more = nfa.repeat(lambda: nfa.concat([nfa.byte_string(b","), self.ws.site(nfa, "comma", depth), extras()]),
                          max(lo, 1) - 1, None if hi is None else hi - 1)
        body = nfa.concat([self.ws.site(nfa, "open", depth), first, more, self.ws.site(nfa, "close", depth)])
        nfa.epsilon(open_[1], body[0])
        nfa.epsilon(body[1], close[0])
        return open_[0], close[1]

    def _step(self, nfa, tracks, nxt, after, make_entry, depth):
        """One more key: track c leads through an entry to track ``after(c)``. Sources
        sharing a target share one entry fragment (with or without a comma)."""
        by_target: dict[int, list[int]] = {}
        for c in range(len(tracks)):
            t = after(c)
            if t is not None:
                by_target.setdefault(t, []).append(c)
        for t, sources in by_target.items():
            entry = make_entry()
            comma = None
            for c in sources:
                if c == 0:
                    nfa.epsilon(tracks[0], entry[0])
                else:
                    if comma is None:
                        comma = nfa.concat([nfa.byte_string(b","), self.ws.site(nfa, "comma", depth)])
                        nfa.epsilon(comma[1], entry[0])
                    nfa.epsilon(tracks[c], comma[0])
            nfa.epsilon(entry[1], nxt[t])

    def _join(self, nfa, a, b, entry, after, depth):
        """``a`` (nothing written) and ``b`` (a comma first) both lead into ``entry``."""
        comma = nfa.concat([nfa.byte_string(b","), self.ws.site(nfa, "comma", depth)])
        nfa.epsilon(a, entry[0])
        nfa.epsilon(b, comma[0])
        nfa.epsilon(comma[1], entry[0])
        nfa.epsilon(entry[1], after)

    def object_superset(self, nfa, schema, path, depth):
        """``{`` members ``}`` (``superset``): each listed key followed by its
        value's superset (a scalar superset where it is surely a scalar: what tells
        ``oneOf`` branches of tagged unions apart), any other key, unless the object
        is closed, by any value; each required key appears somewhere in the text (in
        any of its spellings), followed by one of its values where the property is a
        scalar enum or const. Below ``SUPERSET_LEVELS`` levels, ``{`` any text ``}``.
        Grammar mode keeps the flat form: any text (only the listed keys where the
        object is closed) holding the required keys."""
        if schema.get("propertyNames") is False or schema.get("maxProperties") == 0:
            # No key can appear: exactly the empty object.
            return sup.container(nfa, b"{", b"}", None)
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        if self._superset_levels > 0:
            try:
                body = body_dfa(lambda n: sup.members(n, self._member_superset(schema, props, path, depth)),
                                 sup.SUPERSET_STATES)
                return self._with_required_keys(nfa, schema, props, body, sup.SUPERSET_STATES)
            except RegexTooLargeError:
                pass  # values that may run over the members after them: a coarser form
        if self._superset_levels < sup.SUPERSET_LEVELS and not self._flat_supersets:
            # Inside a member-by-member parent: the parent's automaton would track this
            # one's key positions alongside its own (a subset blow-up); braces are enough.
            return sup.bracketed_text(nfa, b"{", b"}")
        body = self._closed_object_body(schema, props) or body_dfa(lambda n: n.any_bytes())
        return self._with_required_keys(nfa, schema, props, body)

    def _with_required_keys(self, nfa, schema, props, body: DFA, limit: int = MAX_PRODUCT_STATES):
        """``{`` body ``}`` where each required key appears somewhere in ``body``."""
        for name in schema.get("required", []) or []:
            if not isinstance(name, str):
                continue
            tags = scalar_enum(self.deref(props.get(name), "#") if isinstance(props.get(name), dict) else None)

            def needle(n, name=name, tags=tags):
                parts = [jt.quoted(n, jt.full_match_body(n, re.escape(name)))]
                if tags is not None:
                    parts += [jt.regex_fragment(n, r"[ \t\n\r]*:[ \t\n\r]*"),
                              n.union([self.value_superset(n, v) for v in tags])]
                return n.concat([n.any_bytes()] + parts + [n.any_bytes()])

            try:
                body = intersect(body, body_dfa(needle), limit=limit)
            except EmptyLanguageError:
                # A superset without a value: a proof (an EmptyLanguageError would read
                # as an emptied subtraction further up).
                raise UnsatisfiableSchemaError(f"required key {name!r} cannot appear", "#") from None
        return nfa.concat([nfa.byte_string(b"{"), embed(nfa, body), nfa.byte_string(b"}")])

    def _member_superset(self, schema, props, path, depth) -> DFA | None:
        """One ``key: value`` of an object (None when no key can appear): a listed
        key with its value's superset, or any other key with a value, unless
        ``additionalProperties`` is false and there are no ``patternProperties``."""
        additional = schema.get("additionalProperties", True)
        if schema.get("patternProperties"):
            additional = True
        nfa = NFA()
        frags = []
        with self._supersets(self._superset_levels - 1, self._flat_supersets):
            for name, sub in props.items():
                value = self._value_superset_or_any(nfa, sub, json_pointer(path, "properties", name), depth)
                if value is not None:
                    frags.append(sup.member(nfa, jt.quoted(nfa, jt.full_match_body(nfa, re.escape(name))), value))
            if additional is not False:
                value = self._value_superset_or_any(nfa, additional, json_pointer(path, "additionalProperties"), depth)
                if value is not None:
                    frags.append(sup.member(nfa, jt.key_excluding(nfa, props), value))
        return determinize(nfa, *nfa.union(frags), limit=sup.SUPERSET_STATES) if frags else None

    def _value_superset_or_any(self, nfa, sub, path, depth):
        """The superset of ``sub``'s values (a cheap scalar one where it is surely a
        scalar), any value where it cannot be built here, None where ``sub`` has no
        value."""
        try:
            target = self.deref(sub, path)
            if target is False:
                return None
            kinds = scalar_kinds(target)
            if kinds is not None:
                return self._scalar_superset(nfa, kinds)
            return self.value(nfa, sub, path, depth + 1)  # $ref and all: recursion stays bounded
        except UnsatisfiableSchemaError:
            return None  # over mode: a proof that no value exists
        except (SchemaError, RegexError):
            return sup.any_json(nfa, self._superset_levels)

    def _closed_object_body(self, schema, props) -> DFA | None:
        if schema.get("additionalProperties") is not False or schema.get("patternProperties") or not props:
            return None
        scalars = {}
        for name, sub in props.items():
            sub = self.deref(sub, "#")
            if sub is False:
                continue  # the key cannot appear
            scalars[name] = scalar_kinds(sub)  # None: not a scalar, any text stands for it

        def build(n):
            def ws():
                return jt.regex_fragment(n, r"[ \t\n\r]*")

            def entry():
                return n.union([n.concat([jt.quoted(n, jt.full_match_body(n, re.escape(name))), ws(),
                                          n.byte_string(b":"), ws(),
                                          n.any_bytes() if kinds is None else self._scalar_superset(n, kinds)])
                                for name, kinds in scalars.items()])

            if not scalars:
                return ws()
            more = n.repeat(lambda: n.concat([ws(), n.byte_string(b","), ws(), entry()]), 0, None)
            return n.union([ws(), n.concat([ws(), entry(), more, ws()])])

        return body_dfa(build)

    def _scalar_superset(self, nfa, kinds):
        """Every spelling of a value of these scalar kinds (or these enum values)."""
        frags = []
        for kind in kinds:
            if isinstance(kind, tuple):  # ("value", v): an enum / const value
                frags.append(self.value_superset(nfa, kind[1]))
            elif kind == "string":
                frags.append(jt.quoted(nfa, jt.string_body(nfa)))
            elif kind in ("number", "integer"):
                frags.append(jt.any_number(nfa))
            elif kind == "boolean":
                frags.append(nfa.union([nfa.byte_string(b"true"), nfa.byte_string(b"false")]))
            else:
                frags.append(nfa.byte_string(b"null"))
        return nfa.union(frags)

    def entry(self, nfa, key_frag, sub, path, depth, cuts=None):
        """``key_frag : value``; with ``cuts`` (a lazy NFA's byte boundaries that the
        value's ranges already appear among) the value is deferred until the key is written."""
        parts = [key_frag, self.ws.site(nfa, "empty", depth), nfa.byte_string(b":"), self.ws.site(nfa, "colon", depth)]
        if cuts is None:
            parts.append(self.value(nfa, sub, path, depth + 1))
        else:
            parts.append(nfa.deferred(lambda: self.value(nfa, sub, path, depth + 1), cuts))
        return nfa.concat(parts)

    def _extra_schema_for(self, name, patterns, additional):
        matching = [p for p in patterns if pattern_search(p, name)]
        if matching:
            return {"allOf": [patterns[p] for p in matching]} if len(matching) > 1 else patterns[matching[0]]
        return additional

    def extra_entries(self, nfa, schema, defined, patterns, additional, names_schema, path, inner):
        """A builder ``f(cuts=None, into=None) -> fragment`` for one extra key/value
        entry, or None; ``cuts`` defers the values (``entry``); ``into`` builds it in
        another NFA than ``nfa`` (a grammar rule of its own)."""
        if not patterns and additional is False:
            return None
        if not patterns and names_schema is None:
            # JSON Schema's default (any other key): the key fragment goes straight into
            # the automaton; a minimised DFA of it is only needed for key algebra.
            ptr = json_pointer(path, "additionalProperties")

            def build_plain(cuts=None, into=None):
                n = nfa if into is None else into
                try:
                    return self.entry(n, jt.key_excluding(n, defined), additional, ptr, inner - 1, cuts)
                except UnsatisfiableSchemaError:
                    raise UnsatisfiableSchemaError("no additional property value is possible", path) from None

            return build_plain
        kinds = []  # (key DFA, value schema, pointer)
        try:
            excluded = other_keys_dfa(frozenset(defined))
        except EmptyLanguageError:
            return None
        pattern_keys = []
        for p, sub in patterns.items():
            try:
                kd = pattern_key_dfa(p)
                if any(pattern_search(p, name) for name in defined):
                    # Only where a listed key matches is there anything to take out
                    # (OCDS's "^(name_(<language tag>))$" beside "name": nothing).
                    kd = intersect(excluded, kd)
            except EmptyLanguageError:
                continue
            except RegexError as e:
                raise UnsupportedSchemaError(f"patternProperties key {p!r}: {e}", json_pointer(path, "patternProperties"), "patternProperties") from None
            pattern_keys.append((p, kd, sub))
        # A key matching several patterns must satisfy all their schemas: split the
        # keys into regions by the set of patterns they match.
        regions: list[tuple[DFA, list]] = []  # (keys, [(pattern, schema)])
        for p, kd, sub in pattern_keys:
            refined, fresh = [], kd
            for rd, members in regions:
                if is_empty_intersection(rd, kd):
                    refined.append((rd, members))
                    continue
                refined.append((intersect(rd, kd), members + [(p, sub)]))
                only = minus(rd, kd)
                if only is not None:
                    refined.append((only, members))
                fresh = None if fresh is None else minus(fresh, rd)
            if fresh is not None:
                refined.append((fresh, [(p, sub)]))
            regions = refined
            if len(regions) > MAX_PATTERN_REGIONS:
                self.unsupported("patternProperties", path, f"keys match more than {MAX_PATTERN_REGIONS} pattern combinations")
                break
        for rd, members in regions:
            sub = members[0][1] if len(members) == 1 else {"allOf": [m for _, m in members]}
            kinds.append((rd, sub, json_pointer(path, "patternProperties", members[0][0])))
        if additional is not False:
            # Keys no pattern matches, once per pattern set, then only the listed keys
            # taken out: one intersection per object, not a difference per pattern.
            outside = keys_outside(tuple(p for p, _, _ in pattern_keys))
            try:
                rest = None if outside is None else intersect(excluded, outside, minimal=False)
            except EmptyLanguageError:
                rest = None
            if rest is not None:
                kinds.append((rest, additional, json_pointer(path, "additionalProperties")))
        if names_schema is not None:
            try:
                names = body_dfa(lambda n: self.value(n, names_schema, json_pointer(path, "propertyNames"), 0))
            except UnsatisfiableSchemaError:
                return None  # no name is valid (``propertyNames: false``): no extra keys
            narrowed = []
            for kd, sub, ptr in kinds:
                try:
                    narrowed.append((intersect(kd, names), sub, ptr))
                except EmptyLanguageError:
                    continue
            kinds = narrowed
        usable = []
        for kd, sub, ptr in kinds:
            if sub is False:
                continue
            usable.append((kd, sub, ptr))
        if not usable:
            return None
        depth = inner - 1

        empty = set()  # kinds whose value proved impossible (deferred copies leave them out)

        def build(cuts=None, into=None):
            n = nfa if into is None else into
            frags = []
            for i, (kd, sub, ptr) in enumerate(usable):
                if i in empty:
                    continue
                try:
                    frags.append(self.entry(n, embed(n, kd), sub, ptr, depth, cuts))
                except UnsatisfiableSchemaError:
                    empty.add(i)
                    continue
            if not frags:
                raise UnsatisfiableSchemaError("no additional property value is possible", path)
            return n.union(frags)

        return build



def object_of(compiler, nfa, entry, depth):
    """``{}`` or ``{ entry (, entry)* }`` with the compiler's whitespace."""
    ws = compiler.ws
    open_, close = ws.brackets(nfa, b"{", b"}", depth, True)
    o = ws.site(nfa, "open", depth)
    nfa.epsilon(open_[1], o[0])
    after = nfa.state()
    compiler._join(nfa, o[1], after, entry(), after, depth)
    c = ws.site(nfa, "close", depth)
    nfa.epsilon(after, c[0])
    nfa.epsilon(c[1], close[0])
    return open_[0], close[1]
