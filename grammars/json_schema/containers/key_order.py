"""Objects whose keys may come in any order (``JsonSchema(..., key_order="any")``).

Schema order is a chain: property 1, then 2, ..., each optional one skippable. Any
order must remember which keys were written, so the object becomes a graph of
*nodes*, one per (keys written, key count)::

    { ──> node(∅) ──"b":v──> node({b}) ──,"a":v──> node({a,b}) ──> }
             └─────"a":v──> node({a}) ──,"b":v──────┘   (each key at most once)

Extra keys (``additionalProperties`` / ``patternProperties``) loop on a node: they
may stand anywhere. A node can close the object once every required key is written
and the ``minProperties`` count is reached; no node is made from which the object
cannot be finished (``maxProperties`` with required keys still missing).

n properties have 2^n key sets, so in a lazily determinised NFA only the first node
is built at compile time; every other node is a deferred NFA fragment
(``NFA.deferred``) built when decoding first reaches it, and inside nodes each value
(an extra key's too) is deferred until its key is written. Decoding an object builds
one node per key written (plus what the token index's look-ahead touches).
Recursive schemas' grammar rules make their nodes lazy nonterminals instead
(``recursive_objects``).

The sub-automata built whole for ``oneOf`` / ``not`` / ``if`` algebra cannot defer:
there every node is built at once, for objects of at most
``SchemaCompiler.whole_keys`` keys and ``WHOLE_OBJECT_STATES`` NFA states (past it,
``AnyOrderTooLarge``); larger objects keep schema order (stricter, never looser).

Cost notes: compile builds each value once (in the first node), as schema order
does; a node costs its key strings and a comma; a value costs what it costs in
schema order, once per node that writes it (built whole: n keys' values n * 2^(n-1)
times).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property

from guided.errors import RegexTooLargeError, UnsatisfiableSchemaError
from guided.fsm.nfa import NFA

#: An object built whole with keys in any order may add this many NFA states.
WHOLE_OBJECT_STATES = 75_000


class AnyOrderTooLarge(RegexTooLargeError):
    """An object (or an automaton holding one) built whole with keys in any order
    passed its size limits; the caller builds it again with fewer such objects."""


@dataclass(frozen=True)
class ObjectShape:
    """What an object allows, as ``ObjectCompiler.object`` works it out: the input of
    ``any_order_object`` and of the grammar engine's any-order objects.

    Attributes:
        entries: ``(name, value schema, required, JSON pointer)`` for the named keys.
        extras: a builder of one extra ``"key":value`` fragment in the NFA
            (``ObjectCompiler.extra_entries``), or None.
        lo: the least key count (``minProperties``; 0 where the required keys
            already make it).
        hi: the most keys (``maxProperties``; None: unbounded).
        cap: counts are tracked up to here (``hi``, or ``max(lo, 1)``: past it only
            "some key" matters).

    Example::

        >>> shape = ObjectShape((("a", {}, True, "#/properties/a"), ("b", {}, False, "#/properties/b")),
        ...                     None, 0, None, 1)
        >>> shape.required, shape.count_after(0), shape.can_close(frozenset({1}), 1)
        (frozenset({0}), 1, False)
    """

    entries: tuple
    extras: object
    lo: int
    hi: int | None
    cap: int

    @cached_property
    def required(self) -> frozenset[int]:
        """The indices of the required entries."""
        return frozenset(i for i, (_, _, req, _) in enumerate(self.entries) if req)

    def count_after(self, c: int) -> int | None:
        """The key count after one more key is written (None: maxProperties reached)."""
        if self.hi is not None and c >= self.hi:
            return None
        return min(c + 1, self.cap)

    def can_close(self, written: frozenset, c: int) -> bool:
        """May a node that wrote ``written`` (``c`` keys, at least one) close the object?"""
        return self.required <= written and c >= max(self.lo, 1)

    def can_finish(self, written: frozenset, c: int, usable: frozenset, extras: bool) -> bool:
        """Can the object still be finished after writing ``written`` (``c`` keys), with
        the entries ``usable`` (and extra keys, if ``extras``) left to write?"""
        missing = self.required - written
        if not missing <= usable:
            return False
        if self.hi is not None and c + len(missing) > self.hi:
            return False
        return extras or c + len(usable - written) >= self.lo


def any_order_object(compiler, nfa: NFA, shape: ObjectShape, path: str, depth: int) -> tuple[int, int]:
    """The fragment of ``shape``'s objects with keys in any order (see the module).

    Optional keys with no possible value are left out.

    Args:
        compiler: the ``SchemaCompiler`` (its whitespace and ``entry``).
        nfa: the NFA being built; lazy: nodes deferred, else built whole.
        shape: the object's keys and counts.
        path: the object's JSON pointer (for errors).
        depth: its nesting depth.

    Returns:
        The fragment ``(start, end)``.

    Raises:
        UnsatisfiableSchemaError: a required key can have no value, or
            ``minProperties`` cannot be reached.
        AnyOrderTooLarge: built whole, the object passes ``WHOLE_OBJECT_STATES``.
    """
    ws = compiler.ws
    entries = shape.entries
    required = shape.required
    open_, close = ws.brackets(nfa, b"{", b"}", depth, not required and shape.lo == 0)
    if not entries and shape.extras is None:
        return open_[0], close[1]
    finish = ws.site(nfa, "close", depth)
    nfa.epsilon(finish[1], close[0])

    keys = [json.dumps(name, ensure_ascii=False).encode("utf-8") for name, _, _, _ in entries]
    # Byte classes are fixed before any deferred node exists: the first node holds every
    # key, value and extra entry; the comma is the one piece it lacks.
    sample = NFA()
    sample.concat([sample.byte_string(b","), ws.site(sample, "comma", depth)])
    cuts = sample.edge_cuts(0)
    usable = set(range(len(entries)))  # less the optional keys that can have no value
    extras = shape.extras

    def viable(written: frozenset, c: int) -> bool:
        return shape.can_finish(written, c, usable, extras is not None)

    later = cuts if nfa.lazy else None  # values in later nodes: deferred where possible

    def entry(i: int, eager: bool) -> tuple[int, int]:
        _, sub, _, ptr = entries[i]
        return compiler.entry(nfa, nfa.byte_string(keys[i]), sub, ptr, depth, None if eager else later)

    nodes: dict[tuple, int] = {}  # (written, count) -> the node's start state
    mark = len(nfa)

    def node(written: frozenset, c: int) -> int:
        key = (written, c)
        if key not in nodes:
            if nfa.lazy:
                s, e = nfa.deferred(lambda: build(written, c), cuts)
                nodes[key] = s
            else:  # built whole: now (registered first: extra keys loop back to it)
                if len(nfa) - mark > WHOLE_OBJECT_STATES:
                    raise AnyOrderTooLarge(f"an object with keys in any order passes {WHOLE_OBJECT_STATES} states")
                s, e = nfa.state(), nfa.state()
                nodes[key] = s
                hub, done = build(written, c)
                nfa.epsilon(s, hub)
                nfa.epsilon(done, e)
            nfa.epsilon(e, finish[0])
        return nodes[key]

    def build(written: frozenset, c: int, first: dict | None = None) -> tuple[int, int]:
        """Node (written, c); ``first``: the first node's entries, already built."""
        hub, done = nfa.state(), nfa.state()
        if shape.can_close(written, c):
            nfa.epsilon(hub, done)
        nxt = shape.count_after(c)
        if nxt is None:
            return hub, done
        start = hub
        if c > 0:
            comma = nfa.concat([nfa.byte_string(b","), ws.site(nfa, "comma", depth)])
            nfa.epsilon(hub, comma[0])
            start = comma[1]
        for i in sorted(usable - written):
            if viable(written | {i}, nxt):
                frag = entry(i, eager=False) if first is None else first[i]
                nfa.epsilon(start, frag[0])
                nfa.epsilon(frag[1], node(written | {i}, nxt))
        if extras is not None and viable(written, nxt):
            frag = extras(later) if first is None else first["extra"]
            nfa.epsilon(start, frag[0])
            nfa.epsilon(frag[1], node(written, nxt))
        return hub, done

    # The first node is built now, its values too: that finds the keys that can have
    # no value, and puts every byte range the deferred nodes will use into the NFA.
    first = {}
    for i in range(len(entries)):
        try:
            first[i] = entry(i, eager=True)
        except UnsatisfiableSchemaError:
            if i in required:
                raise
            usable.discard(i)
    if extras is not None:
        try:
            first["extra"] = extras()
        except UnsatisfiableSchemaError:
            extras = None  # no extra key can have a valid value: the object has none
    if not viable(frozenset(), 0):
        raise UnsatisfiableSchemaError("minProperties exceeds the number of allowed keys", path)
    o = ws.site(nfa, "open", depth)
    nfa.epsilon(open_[1], o[0])
    nfa.epsilon(o[1], build(frozenset(), 0, first)[0])
    return open_[0], close[1]
