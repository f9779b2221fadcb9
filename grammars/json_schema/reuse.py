"""Sub-schemas used more than once in a schema: built at their first use, deferred at
the others.

::

    "#/$defs/address" used 40 times ──> 1st use: built now (states first..last)
                                        2nd..40th: NFA.deferred(build), built if reached

Large real schemas (Github_ultra, JSON Schema Store) use a few definitions in many
places, and the object chains around them repeat a property's value once per count
of keys written: in the 200 slowest MaskBench schemas to compile, 70-90% of the NFA
is such later copies. A later copy is a deferred fragment
(``NFA.deferred``), built when decoding first reaches it, so compile time follows
the schema's distinct parts.

A deferred fragment must be able to reach its end (the automaton counts it as
live before it is built), and its byte ranges must fall on the automaton's byte
classes. Both follow from the first copy, which is in the NFA as built (its caller
has only linked its end onward since): its start reaches its end (a search over its
states), and its byte ranges are among those the classes were cut from (the
deferred fragments inside it declared their cuts when it was built). So a later
copy declares no cuts of its own.

Cost notes: one dict lookup per value; the search once per sub-schema used again,
over its first copy's states (well under a µs a state, against ~5 µs a state to
build the copies it saves). A later copy built while decoding costs what building
it at compile time would have, in the first mask that reaches it.
"""

from __future__ import annotations

from guided.fsm.nfa import NFA

#: A sub-schema whose first copy has fewer NFA states than this is built at each use:
#: building a small fragment costs less than a deferred one's bookkeeping, and a
#: deferred build is a slower mask later.
MIN_DEFERRED_STATES = 300


class _FirstCopy:
    """Where a sub-schema's first copy stands in the NFA, and what it allows."""

    __slots__ = ("schema", "nfa", "first", "last", "start", "end", "truncations", "deferrable")

    def __init__(self, schema, nfa, first, last, start, end):
        # The schema is kept so that its id() stays its own for the compile.
        self.schema, self.nfa, self.first, self.last, self.start, self.end = schema, nfa, first, last, start, end
        self.truncations = len(nfa.truncations)
        self.deferrable: bool | None = None  # None: not looked at yet


class ReusedValues:
    """The values a compile has built, by sub-schema (the dict itself) and depth.

    Example::

        >>> nfa = NFA(lazy=True)
        >>> reuse = ReusedValues()
        >>> schema = {"type": "string"}
        >>> build = lambda: nfa.byte_string(b"x" * 400)
        >>> reuse.later_copy(nfa, schema, 0, build) is None  # none built yet
        True
        >>> first = len(nfa); reuse.built(nfa, schema, 0, first, build())
        >>> s, e = reuse.later_copy(nfa, schema, 0, build)
        >>> s in nfa.pending
        True
    """

    def __init__(self) -> None:
        self._first: dict[tuple[int, int], _FirstCopy] = {}

    def later_copy(self, nfa: NFA, schema: dict, depth: int, build) -> tuple[int, int] | None:
        """A deferred fragment of ``build()`` where ``schema`` at ``depth`` has a first
        copy in ``nfa`` that allows one; else None: the caller builds it now and
        says so (``built``). Two calls, not one taking a builder, so that a schema's
        nesting costs one Python frame less a level (deep schemas reach Python's
        recursion limit)."""
        copy = self._kept(nfa, (id(schema), depth))
        if copy is None:
            return None
        if copy.deferrable is None:
            copy.deferrable = _deferrable(nfa, copy)
        return nfa.deferred(build, ()) if copy.deferrable else None

    def built(self, nfa: NFA, schema: dict, depth: int, first: int, frag: tuple[int, int]) -> None:
        """``frag``, made as the states numbered from ``first`` on, is a copy of
        ``schema`` at ``depth``: the first one, unless a first copy is kept."""
        key = (id(schema), depth)
        if self._kept(nfa, key) is None:
            self._first[key] = _FirstCopy(schema, nfa, first, len(nfa), *frag)

    def _kept(self, nfa: NFA, key) -> _FirstCopy | None:
        copy = self._first.get(key)
        if copy is None or copy.nfa is not nfa or not self._still_there(copy):
            return None
        return copy

    @staticmethod
    def _still_there(copy: _FirstCopy) -> bool:
        """Whether no ``NFA.truncate`` since the first copy was made dropped its states."""
        return all(mark >= copy.last for mark in copy.nfa.truncations[copy.truncations:])


def _deferrable(nfa: NFA, copy: _FirstCopy) -> bool:
    """Whether later copies may be deferred: the first copy is large enough, and its
    start reaches its end within its own states (a deferred fragment inside it
    counts as reaching its end). The search stops at the end (its caller has linked
    it onward since) and as soon as it gets there."""
    first, last, end = copy.first, copy.last, copy.end
    if last - first < MIN_DEFERRED_STATES or not first <= copy.start < last or not first <= end < last:
        return False
    if copy.start == end:
        return True
    eps, edges, pending = nfa.eps, nfa.edges, nfa.pending
    seen = bytearray(last - first)
    seen[copy.start - first] = 1
    stack = [copy.start]
    while stack:
        s = stack.pop()
        nxt = eps[s] + [m[2] for m in edges[s]]
        if s in pending:
            nxt.append(pending[s][1])
        for t in nxt:
            if t == end:
                return True
            if first <= t < last and not seen[t - first]:
                seen[t - first] = 1
                stack.append(t)
    return False
