"""JSON Schema arrays: ``items`` / ``prefixItems``, length bounds, ``contains``,
``uniqueItems`` over few known values, and the superset arrays of "over" mode.

Part of ``SchemaCompiler`` (``compiler``), as a mixin: ``self`` is the compiler."""

from __future__ import annotations

import math

from guided.errors import EmptyLanguageError, RegexTooLargeError, UnsatisfiableSchemaError
from guided.fsm.dfa import DFA, MAX_DFA_STATES, determinize
from guided.fsm.nfa import NFA
from guided.fsm.ops import embed
from guided.grammars.json_schema import superset as sup
from guided.grammars.json_schema.keywords import (
    ANY_DEPTH,
    ARRAY_KEYWORDS,
    MAX_UNIQUE_SETS,
    json_pointer,
    scalar_enum,
)
from guided.grammars.json_schema.logic.merge import json_equal as _json_equal
from guided.grammars.json_schema.strings import body_dfa

from .unique import SiteMap, conjunctive_sites

_UNIQUE_WHY = ("distinct items of an open kind are checked beside the automaton only on arrays that every route "
               "reaches through properties, patternProperties, additionalProperties, items, prefixItems, allOf, "
               "$ref or the one anyOf / oneOf branch that takes arrays; this one is also reached through anyOf, "
               "oneOf, not, if/then/else, contains or a merge of schemas")


#: The widest integer range whose values ``uniqueItems`` enumerates (the automaton
#: can track at most 12 of them without maxItems; more go beside it).
MAX_ENUMERATED_INTEGERS = 64

_CANDIDATE_DEPTH = 8


def _integer_span(schema) -> tuple[int, int] | None:
    """Whole numbers ``(lo, hi)`` around every value that ``schema``'s numeric bounds
    allow (inclusive or exclusive, any draft's spelling: a superset), when both sides
    are bounded and at most ``MAX_ENUMERATED_INTEGERS`` apart; else None."""
    def bound(keys, pick):
        got = [schema[k] for k in keys if isinstance(schema.get(k), (int, float))
               and not isinstance(schema.get(k), bool) and math.isfinite(schema[k])]
        return pick(got) if got else None

    lo, hi = bound(("minimum", "exclusiveMinimum"), min), bound(("maximum", "exclusiveMaximum"), max)
    if lo is None or hi is None or hi - lo > MAX_ENUMERATED_INTEGERS:
        return None
    return math.floor(lo), math.ceil(hi)


def _unique_sets(n: int, hi: int | None) -> int:
    """The sets of used values a ``uniqueItems`` array of at most ``hi`` items over
    ``n`` enum values may reach (one automaton state each)."""
    top = n if hi is None else min(hi, n)
    return sum(math.comb(n, j) for j in range(top + 1))


class ArrayCompiler:
    """The arrays of ``SchemaCompiler`` (a mixin: ``self`` is the compiler).

    ``SchemaCompiler.typed`` calls ``array`` for a schema that allows arrays; the
    open values' arrays use ``array_body``, and ``unique_site_map`` tells the caller
    of ``compile_json_schema`` which arrays' ``uniqueItems`` were left beside the
    automaton.

    Example::

        >>> from guided.grammars.json_schema import compile_json_schema
        >>> dfa = compile_json_schema({"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True},
        ...                           "compact")
        >>> dfa.matches(b'["a","b"]'), dfa.matches(b'["a","a"]')
        (True, False)
    """

    # -- arrays ----------------------------------------------------------------------

    def array(self, nfa, schema, path, depth):
        """The fragment of the arrays ``schema`` allows: ``items`` / ``prefixItems``
        (or the draft 4-2019 tuple form), ``minItems`` / ``maxItems``, ``contains``
        (by DFA algebra), ``uniqueItems`` over few known values; in over mode a
        superset (``array_superset``).

        Raises:
            UnsatisfiableSchemaError: no array satisfies the keywords.
            UnsupportedSchemaError: ``unevaluatedItems`` without ``items``, ``uniqueItems``
                the automaton cannot track and no check beside it may take
                (``strict=True``), or ``maxContains``.
        """
        if self.over:
            if ARRAY_KEYWORDS.intersection(schema):
                self.approximate()
            return self.array_superset(nfa, schema, path, depth)
        lo = int(schema.get("minItems", 0))
        hi = schema.get("maxItems")
        hi = None if hi is None else int(hi)
        if hi is not None and hi < lo:
            raise UnsatisfiableSchemaError("maxItems is below minItems", path)
        prefix = schema.get("prefixItems")
        items = schema.get("items")
        rest = True
        if isinstance(items, list):  # draft 4-2019 tuple form
            prefix = items
            rest = schema.get("additionalItems", True)
        elif items is not None:
            rest = items
        prefix = list(prefix or [])
        rest_given = "additionalItems" in schema if isinstance(items, list) else items is not None
        if schema.get("unevaluatedItems", True) not in (True, {}, None) and not rest_given:
            # With ``items`` (or ``additionalItems``) every item is evaluated, so the
            # keyword is idle; without, which items count as evaluated depends on
            # in-place applicators this view no longer shows.
            self.unsupported("unevaluatedItems", path, "items past prefixItems are checked only with items "
                             "or additionalItems")
        if schema.get("uniqueItems") and (hi is None or hi > 1):
            choices = None if prefix or "contains" in schema else self._distinct_choices(rest)
            if choices is not None and (_unique_sets(len(choices), hi) <= MAX_UNIQUE_SETS
                                        or not self.unique_beside(schema)):
                return self.unique_array(nfa, choices, lo, hi, path, depth)  # (past the limit: its error)
            if choices is None and not self.unique_beside(schema):
                self.unsupported("uniqueItems", path, _UNIQUE_WHY if self.unique_beside_allowed else
                                 "distinct items cannot be checked by an automaton (only items from a small enum "
                                 "can; guided.compile checks other items beside it)")
        if "contains" in schema:
            return embed(nfa, self.algebra(lambda: self.contains_dfa(schema, path, depth)))
        if rest is False:
            hi = len(prefix) if hi is None else min(hi, len(prefix))
            if lo > hi:
                raise UnsatisfiableSchemaError("minItems exceeds the number of allowed items", path)

        def element(n, i):
            if i < len(prefix):
                return self.value(n, prefix[i], json_pointer(path, "prefixItems", i), depth + 1)
            return self.value(n, rest, json_pointer(path, "items"), depth + 1)

        return self.array_body(nfa, element, len(prefix), rest is not False, lo, hi, path, depth)

    def unique_beside(self, schema) -> bool:
        """Whether ``schema``'s ``uniqueItems`` may be left to the matcher beside the
        automaton (``unique``: a conjunctive array of the root schema); notes it."""
        if not self.unique_beside_allowed:
            return False
        if self._unique_sites is None:
            self._unique_sites = conjunctive_sites(self.root, lambda ref: self.resolve_pointer(ref, "#"),
                                                   self._legacy_draft())
        if id(schema) not in self._unique_sites[0]:
            return False
        self.unique_checked.add(id(schema))
        return True

    def unique_site_map(self) -> SiteMap | None:
        """What the matcher beside the automaton needs, where this compile left it
        arrays to check; else None."""
        if not self.unique_checked:
            return None
        return SiteMap(self.root, self._unique_sites[1], self._legacy_draft(), set(self.unique_checked))

    def _distinct_choices(self, items) -> list[tuple[object, list[bytes]]] | None:
        """The distinct values an ``items`` schema allows, each with its valid compact
        spellings, when they are few and known (``_finite_candidates``); else None."""
        sub = self.deref(items, "#")
        values = self._finite_candidates(sub)
        if values is None:
            return None
        distinct = []
        for v in values:
            if not any(_json_equal(v, d) for d, _ in distinct):
                texts = self.valid_texts(v, sub)
                if texts:
                    distinct.append((v, texts))
        return distinct

    def _finite_candidates(self, schema, depth: int = 0) -> list | None:
        """Scalar values among which are all that ``schema`` allows, where it says so
        by itself: an enum or const, an ``anyOf`` / ``oneOf`` of them, a ``type`` of
        booleans, null or integers between bounds at most ``MAX_ENUMERATED_INTEGERS``
        apart, or an ``allOf`` part that does; else None. A superset: the caller
        keeps what the validator accepts. Items known this way are tracked by the
        automaton (``unique_array``) rather than beside it, where an array whose
        values run out would leave the matcher no way on (``["a","b",`` with items
        ``^[ab]$`` does: a pattern is not enumerated)."""
        schema = self.deref(schema, "#") if depth else schema
        if not isinstance(schema, dict) or depth > _CANDIDATE_DEPTH:  # (a $ref cycle)
            return None
        values = scalar_enum(schema)
        if values is not None:
            return values
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if isinstance(branches, list) and branches:
                parts = [self._finite_candidates(b, depth + 1) for b in branches]
                if all(p is not None for p in parts):
                    return [v for p in parts for v in p]
        types = schema.get("type")
        types = [types] if isinstance(types, str) else types
        if isinstance(types, list) and types and set(types) <= {"boolean", "null", "integer"}:
            values = []
            for t in dict.fromkeys(types):
                if t == "integer":
                    span = _integer_span(schema)
                    if span is None:
                        break
                    values += range(span[0], span[1] + 1)
                else:
                    values += [True, False] if t == "boolean" else [None]
            else:
                return values
        for part in schema.get("allOf", []) if isinstance(schema.get("allOf"), list) else []:
            got = self._finite_candidates(part, depth + 1)
            if got is not None:
                return got
        return None

    def unique_array(self, nfa, values, lo, hi, path, depth):
        """``uniqueItems`` over few known items (``values``: each value with its
        spellings): one state per set of values used so far."""
        top = len(values) if hi is None else min(hi, len(values))
        if lo > top:
            raise UnsatisfiableSchemaError("minItems exceeds the number of distinct allowed items", path)
        if _unique_sets(len(values), hi) > MAX_UNIQUE_SETS:
            self.unsupported("uniqueItems", path, f"{len(values)} distinct items make more than "
                                                  f"{MAX_UNIQUE_SETS} combinations to track")
        open_, close = nfa.byte_string(b"["), nfa.byte_string(b"]")
        if lo == 0:
            e = self.ws.site(nfa, "empty", depth)
            nfa.epsilon(open_[1], e[0])
            nfa.epsilon(e[1], close[0])
        o = self.ws.site(nfa, "open", depth)
        nfa.epsilon(open_[1], o[0])
        c = self.ws.site(nfa, "close", depth)
        nfa.epsilon(c[1], close[0])
        nodes = {frozenset(): o[1]}
        frontier = [frozenset()]
        while frontier:
            used = frontier.pop(0)
            here = nodes[used]
            if used and len(used) >= lo:
                nfa.epsilon(here, c[0])
            if len(used) == top:
                continue
            for i, (_, texts) in enumerate(values):
                if i in used:
                    continue
                lit = nfa.union([nfa.byte_string(t) for t in texts])
                if used:
                    lit = nfa.concat([nfa.byte_string(b","), self.ws.site(nfa, "comma", depth), lit])
                nfa.epsilon(here, lit[0])
                key = used | {i}
                if key not in nodes:
                    nodes[key] = nfa.state()
                    frontier.append(key)
                nfa.epsilon(lit[1], nodes[key])
        return open_[0], close[1]

    def array_body(self, nfa, element, n_prefix, rest_allowed, lo, hi, path, depth):
        """``[`` e0 ``,`` e1 ... ``]`` with ``element(nfa, i)`` at position i, count in [lo, hi].

        Positions below ``max(lo, n_prefix)`` are spelled out one by one; more
        elements (of the position-independent ``rest`` kind) repeat after them.
        """
        open_, close = self.ws.brackets(nfa, b"[", b"]", depth, lo == 0)
        if hi == 0:
            return open_[0], close[1]
        o = self.ws.site(nfa, "open", depth)
        nfa.epsilon(open_[1], o[0])
        c = self.ws.site(nfa, "close", depth)
        nfa.epsilon(c[1], close[0])

        def comma_then(frag):
            return nfa.concat([nfa.byte_string(b","), self.ws.site(nfa, "comma", depth), frag])

        cur = o[1]
        spelled = max(lo, n_prefix, 1) if hi is None else min(hi, max(lo, n_prefix, 1))
        closable = False
        for i in range(spelled):
            try:
                item = element(nfa, i)
            except UnsatisfiableSchemaError:
                if i < lo:
                    raise
                return open_[0], close[1]  # position i can never be filled: arrays stop before it
            frag = comma_then(item) if i else item
            nfa.epsilon(cur, frag[0])
            cur = frag[1]
            if i + 1 >= lo:
                nfa.epsilon(cur, c[0])
                closable = True
        more = None if hi is None else hi - spelled
        if rest_allowed and more is None and spelled > n_prefix:
            # Unbounded and the last spelled position is already a ``rest`` item:
            # more items loop back into it (one copy of the item schema, not two;
            # nested arrays would otherwise double per level).
            back = comma_then(nfa.empty())
            nfa.epsilon(cur, back[0])
            nfa.epsilon(back[1], item[0])
        elif rest_allowed and (more is None or more > 0):
            try:
                loop = nfa.repeat(lambda: comma_then(element(nfa, spelled)), 0, more)
            except UnsatisfiableSchemaError:
                loop = None
            if loop is not None:
                nfa.epsilon(cur, loop[0])
                nfa.epsilon(loop[1], c[0])
                closable = True
        if not closable:
            raise UnsatisfiableSchemaError("minItems cannot be reached", path)
        return open_[0], close[1]

    def contains_dfa(self, schema, path, depth) -> DFA:
        """The DFA of ``schema``'s arrays with at least ``minContains`` (default 1)
        items valid under ``contains``: the arrays without it, intersected with a
        counter of such items."""
        base = {k: v for k, v in schema.items() if k not in ("contains", "minContains", "maxContains")}
        main = self.dfa(base, path, depth)
        need = int(schema.get("minContains", 1))
        most = schema.get("maxContains")
        if need == 0 and most is None:
            return main
        c = schema["contains"]
        nfa = NFA()
        inner = depth + 1

        def counted(k_min, k_max):
            # Arrays of any elements, exactly/at least k contained ones: tracks 0..k.
            any_el = lambda n: self.any_value(n, inner, ANY_DEPTH)
            con_el = lambda n: self.value(n, c, json_pointer(path, "contains"), inner)
            return _counting_array(self, nfa, any_el, con_el, k_min, depth)

        s, e = counted(need, None)
        try:
            result = self.intersection(main, determinize(nfa, s, e, self.algebra_limit(MAX_DFA_STATES)))
        except EmptyLanguageError:
            raise UnsatisfiableSchemaError("no array satisfies contains", json_pointer(path, "contains")) from None
        if most is not None:
            self.unsupported("maxContains", path, "an upper bound on matching elements needs their exact complement")
        return result

    def array_superset(self, nfa, schema, path, depth):
        """``[`` items ``]`` (``superset``), each item a superset of what
        ``items`` allows (of any value where tuple keywords are present), as many as
        ``minItems`` / ``maxItems`` allow up to ``SUPERSET_COUNT_MAX``; below
        ``SUPERSET_LEVELS`` levels, ``[`` any text ``]``."""
        if self._superset_levels <= 0:
            return sup.bracketed_text(nfa, b"[", b"]")
        items = schema.get("items", True)
        if "prefixItems" in schema or not isinstance(items, (dict, bool)):
            items = True
        lo, hi = schema.get("minItems", 0), schema.get("maxItems")
        lo = min(lo, sup.SUPERSET_COUNT_MAX) if isinstance(lo, int) and lo > 0 else 0
        hi = hi if isinstance(hi, int) and 0 <= hi <= sup.SUPERSET_COUNT_MAX else None
        levels = self._superset_levels - 1
        tries = [(levels, 0, None)]
        if lo or hi is not None:
            # Counting items needs items that cannot run over a comma: one more level
            # of structure (scalars, strings, brackets) where the count means anything.
            # Brackets around any text inside a counted repetition may blow the DFA up
            # (each "]" may or may not end an item): then the count is dropped.
            tries.insert(0, (max(levels, 1), lo, hi))
        for item_levels, lo, hi in tries:
            try:
                return embed(nfa, self._array_superset_dfa(items, item_levels, lo, hi, path, depth))
            except RegexTooLargeError:
                continue
        return sup.bracketed_text(nfa, b"[", b"]")

    def _array_superset_dfa(self, items, levels: int, lo: int, hi: int | None, path, depth) -> DFA:
        sub_nfa = NFA()
        with self._supersets(levels, self._flat_supersets):
            item = self._value_superset_or_any(sub_nfa, items, json_pointer(path, "items"), depth)
        if item is None:
            return body_dfa(lambda n: sup.container(n, b"[", b"]", None))
        item_dfa = determinize(sub_nfa, *item, limit=sup.SUPERSET_STATES)
        # Built apart and checked: an item that may run over the commas after it
        # makes the repetition's subsets blow up.
        return body_dfa(lambda n: sup.container(n, b"[", b"]", item_dfa, lo, hi), sup.SUPERSET_STATES)



def _counting_array(compiler, nfa, any_el, con_el, k_min, depth):
    """Arrays of any elements of which at least ``k_min`` are ``con_el`` elements."""
    ws = compiler.ws
    open_, close = ws.brackets(nfa, b"[", b"]", depth, k_min == 0)
    o = ws.site(nfa, "open", depth)
    nfa.epsilon(open_[1], o[0])
    # track[k][first?]: k contained elements so far (capped at k_min)
    first = [nfa.state() for _ in range(k_min + 1)]
    later = [nfa.state() for _ in range(k_min + 1)]
    nfa.epsilon(o[1], first[0])
    for k in range(k_min + 1):
        for src, comma in ((first[k], False), (later[k], True)):
            for el, nk in ((any_el, k), (con_el, min(k + 1, k_min))):
                parts = []
                if comma:
                    parts += [nfa.byte_string(b","), ws.site(nfa, "comma", depth)]
                parts.append(el(nfa))
                s, e = nfa.concat(parts)
                nfa.epsilon(src, s)
                nfa.epsilon(e, later[nk])
    c = ws.site(nfa, "close", depth)
    nfa.epsilon(later[k_min], c[0])
    nfa.epsilon(c[1], close[0])
    return open_[0], close[1]
