"""A DFA under a count bound, built into a lazy NFA a few levels at a time.

::

    body DFA Q (no bound)  x  count 0..hi  ->  states (q, n), n = counted steps so far

    level a          level a+1                 level a+chunk
    (q, a) --step--> (q', a)      (mid-char)   entries of the next chunk:
           --count-> (q'', a+1) ... ---------> deferred starts, one per counted state

A string ``pattern`` under ``maxLength`` is such a product: Q is the pattern's body
DFA and a step into a state that ends a character counts one. Built whole it has
``|Q| * (hi + 1)`` states (a Unicode class pattern of 319 states under maxLength
1024: 327k, past ``MAX_PRODUCT_STATES``), of which decoding one string visits a few
levels. ``CountedLevels.fragment`` builds them as the automaton reaches them, in
chunks of ``chunk`` levels: an entry into a chunk builds the states it reaches there
(``_reach``; later entries add what they reach and was not built), and steps out of
the chunk's last level go to the next chunk's entries, deferred starts
(``NFA.deferred``), one per counted state, made once per chunk. With no upper bound
(``hi`` None) the count stops at ``lo``: that level loops on itself.

Every state built can still finish: an edge goes to ``(t, n)`` only when ``t`` can
reach acceptance with a count that ends in ``[lo, hi]``. At ``n >= lo`` that is the
fewest counted steps from ``t`` (``fewest``) being at most ``hi - n``; below ``lo``
a table per level, worked backwards from level ``lo`` (``_below``).

Each level's states are new DFA states. Far from the bounds (``far_from_bounds``: no
token is long enough to reach them) a level's states take the same tokens as the
next level's: the token index takes their rows from the states of a copy of the
DFA without counts (``Instance``'s shadow, ``LazyDFA.mask_twin``) instead of
walking the vocabulary from each.

Cost notes: set-up is a 0-1 breadth-first search over Q's edges, plus ``lo`` levels
of numpy for the table below ``lo``. Building is Python, ~5 µs a state, and each use
copies Q once for its shadow (~1 ms for 1,000 states) when its first mask needs it.
Near ``maxLength`` (the last ~80 characters with this tokenizer) and below
``minLength`` masks walk from the level itself, as for a product built whole.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from guided.errors import EmptyLanguageError

from .dfa import DFA
from .nfa import NFA
from .ops import embed

#: Levels built per chunk. An entry builds what it reaches in its chunk, and a level
#: far from the bounds is walked in the shadow, so only the text's own path builds
#: levels: one a chunk keeps that to the few states of one character (for a pattern
#: that counts words under maxLength 300, 4 levels a chunk make the masks' p90 about
#: half as long again).
CHUNK_LEVELS = 1

_FAR = np.iinfo(np.int64).max // 4


class CountedLevels:
    """``dfa``'s language whose paths count between ``lo`` and ``hi`` (None: no
    bound) steps into the states flagged in ``counts``, as a lazily built NFA
    fragment (``fragment``).

    Args:
        dfa: the body ``DFA`` (no bound).
        counts: bool per state of ``dfa``: a step into it counts one.
        lo, hi: the bounds on the count (``hi`` None: none).
        chunk: levels built per chunk (``CHUNK_LEVELS``).

    Raises:
        EmptyLanguageError: no path's count lands in the bounds.

    Example (bytes of a digit string counted, 2 to 3 of them)::

        >>> from guided.fsm import compile_regex
        >>> from guided.fsm.lazy import LazyDFA
        >>> q = compile_regex(r"[0-9]*")
        >>> levels = CountedLevels(q, np.ones(q.num_states, dtype=bool), 2, 3)
        >>> nfa = NFA(lazy=True); s, e = levels.fragment(nfa)
        >>> d = LazyDFA(nfa, s, e)
        >>> [d.matches(t) for t in (b"1", b"12", b"123", b"1234")]
        [False, True, True, False]
    """

    def __init__(self, dfa: DFA, counts: np.ndarray, lo: int, hi: int | None, chunk: int = CHUNK_LEVELS):
        if hi is not None and hi < lo:
            raise EmptyLanguageError("the count bounds are empty")
        self.dfa, self.lo, self.hi, self.chunk = dfa, lo, hi, max(1, chunk)
        self.top = hi if hi is not None else lo  # the last level
        lows, highs, targets, spans, accepting = dfa.flat_edges()
        self.size = dfa.num_states
        self._spans = spans
        self._sources = np.repeat(np.arange(len(spans)), [b - a for a, b in spans])
        self._targets = np.asarray(targets, dtype=np.int64)
        self._steps = np.asarray(counts, dtype=np.int64)[self._targets]  # 1 where an edge counts
        self._accepting = np.zeros(self.size, dtype=bool)
        self._accepting[np.asarray(accepting, dtype=np.int64)] = True
        self.cuts = frozenset(lows) | frozenset(h + 1 for h in highs) | {0, 256}
        self.fewest = self._fewest()
        self._fewest_list = self.fewest.tolist()
        finite = self.fewest[self.fewest < _FAR]
        self._farthest = int(finite.max(initial=0))
        self._accepting_list = self._accepting.tolist()
        # Per DFA state, its moves as (lo, hi, target, 1 if it counts) tuples.
        moves = list(zip(lows, highs, self._targets.tolist(), self._steps.tolist()))
        self._moves = [moves[a:b] for a, b in spans]
        self._lists: dict[int, list[bool]] = {}
        self._tables = self._below()
        if not self.live(np.array([0]), 0)[0]:  # (DFA state 0 is the start)
            raise EmptyLanguageError("no string of the automaton has a count within the bounds")

    # -- liveness ------------------------------------------------------------------

    def _fewest(self) -> np.ndarray:
        """The fewest counted steps from each state to acceptance (``_FAR``: none)."""
        into: list[list[tuple[int, int]]] = [[] for _ in range(self.size)]
        for s, t, w in zip(self._sources.tolist(), self._targets.tolist(), self._steps.tolist()):
            into[t].append((s, w))
        best = [_FAR] * self.size
        todo = deque()
        for s in np.flatnonzero(self._accepting).tolist():
            best[s] = 0
            todo.append(s)
        while todo:
            t = todo.popleft()
            d = best[t]
            for s, w in into[t]:
                if d + w < best[s]:
                    best[s] = d + w
                    if w:
                        todo.append(s)
                    else:
                        todo.appendleft(s)
        return np.array(best, dtype=np.int64)

    def _below(self) -> list[np.ndarray]:
        """For each level n < lo, which states can still finish (an accepted path
        whose count ends in the bounds)."""
        tables: list[np.ndarray] = [None] * self.lo  # type: ignore[list-item]
        if not self.lo:
            return tables
        above = self.live(np.arange(self.size), self.lo)
        counted = self._steps == 1
        c_src, c_dst = self._sources[counted], self._targets[counted]
        m_src, m_dst = self._sources[~counted], self._targets[~counted]
        for n in range(self.lo - 1, -1, -1):
            here = np.zeros(self.size, dtype=bool)
            here[c_src[above[c_dst]]] = True  # no acceptance below lo
            while True:  # steps that count nothing stay on the level
                grown = here.copy()
                grown[m_src[here[m_dst]]] = True
                if (grown == here).all():
                    break
                here = grown
            tables[n] = above = here
        return tables

    def live(self, states: np.ndarray, n: int) -> np.ndarray:
        """Whether each of ``states`` at level ``n`` can still finish."""
        if n < self.lo:
            return self._tables[n][states]
        if self.hi is None:
            return self.fewest[states] < _FAR
        return self.fewest[states] <= self.hi - n

    # -- building ------------------------------------------------------------------

    def fragment(self, nfa: NFA, cuts=None) -> tuple[int, int]:
        """The fragment ``(start, end)`` in ``nfa`` (which must be lazy): nothing is
        built until the automaton reaches the start. ``cuts``: byte boundaries for
        the deferred fragments (default: this DFA's own)."""
        cuts = self.cuts if cuts is None else cuts

        def start() -> tuple[int, int]:
            # Fresh states at each call: a template holding the start (an array's
            # item, copied) gives every copy this builder.
            end = nfa.state()
            here = Instance(self, end)
            shadow, shadow_end = nfa.deferred(lambda: here.build_shadow(nfa), cuts)
            nfa.epsilon(shadow_end, end)
            here.shadow_start = shadow
            chunks: dict[int, tuple[dict, dict]] = {}  # first level -> (states built, next entries)

            def entry(q: int, level: int) -> int:
                def build() -> tuple[int, int]:
                    return self._reach(nfa, level, q, chunks.setdefault(level, ({}, {})), here, entry), nfa.state()

                s, e = nfa.deferred(build, cuts)
                nfa.epsilon(e, end)
                return s

            return self._reach(nfa, 0, 0, chunks.setdefault(0, ({}, {})), here, entry), end

        return nfa.deferred(start, cuts)

    def _reach(self, nfa: NFA, first: int, q: int, chunk: tuple[dict, dict], here: "Instance", entry) -> int:
        """The NFA state of ``(q, first)``, building with it every state it reaches
        in the chunk of levels ``first`` to ``first + chunk - 1`` (at most ``top``)
        that earlier entries did not: one string's path through a level touches few
        of its states. Counted steps out of the last level go to the next chunk's
        entries (``entry(t, level)``, made once per chunk for each live ``t``)."""
        states, nexts = chunk
        end = here.end
        size, last, lo, hi, top = self.size, min(first + self.chunk - 1, self.top), self.lo, self.hi, self.top
        key = q  # (level - first) * size + state
        if key in states:
            return states[key]
        moves, fewest, below, accepting = self._moves, self._fewest_list, self._below_lists, self._accepting_list
        capped = hi is None
        levelled = nfa.levelled
        states[key] = got = nfa.state()
        levelled[got] = (here, q, first)
        todo = [key]
        eps, edges = nfa.eps, nfa.edges
        while todo:
            key = todo.pop()
            n, q = divmod(key, size)
            n += first
            at = states[key]
            out = edges[at]
            if n >= lo and accepting[q]:
                eps[at].append(end)
            for lo_b, hi_b, t, step in moves[q]:
                to = n + step
                if to < lo:
                    if not below(to)[t]:
                        continue
                elif capped:
                    to = lo
                elif to > top or fewest[t] > hi - to:
                    continue
                if to > last:
                    target = nexts.get(t)
                    if target is None:
                        target = nexts[t] = entry(t, last + 1)
                else:
                    k = (to - first) * size + t
                    target = states.get(k)
                    if target is None:
                        target = states[k] = nfa.state()
                        levelled[target] = (here, t, to)
                        todo.append(k)
                out.append((lo_b, hi_b, target))
        return got

    def _below_lists(self, n: int) -> list[bool]:
        """``_below``'s table of level ``n`` as a list (made on first use)."""
        got = self._lists.get(n)
        if got is None:
            got = self._lists[n] = self._tables[n].tolist()
        return got

    def far_from_bounds(self, n: int, reach: int) -> bool:
        """Whether every text of at most ``reach`` counted steps from level ``n``
        keeps or kills a state exactly as it would with no bounds: ``n >= lo``, and
        ``hi`` at least ``reach`` plus the largest finite ``fewest`` away. The
        states of such levels that differ only in level take the same tokens."""
        return n >= self.lo and (self.hi is None or n + reach + self._farthest <= self.hi)


class Instance:
    """One use of a ``CountedLevels`` fragment: its ``end``, and its *shadow*, a
    copy of the DFA without counts that ends there too, reached by no text. A state
    of a level far from the bounds takes the tokens its DFA state takes in the
    shadow (``LazyDFA.mask_twin``), so the token index walks the vocabulary from
    the shadow's few states instead of from each level's new ones (a walk from a
    level builds the levels ahead of it that its tokens reach: ~80 with this
    tokenizer's longest token).

    Args:
        levels: the ``CountedLevels`` whose fragment this use is.
        end: the fragment's end state in the NFA.

    Example::

        >>> s, e = levels.fragment(nfa)
        >>> use = Instance(levels, e)"""

    __slots__ = ("levels", "end", "shadow_start", "shadow_base")

    def __init__(self, levels: CountedLevels, end: int):
        self.levels, self.end = levels, end
        self.shadow_start = -1  # the shadow's deferred start
        self.shadow_base: int | None = None  # its first NFA state, once built (DFA state q: base + q)

    def build_shadow(self, nfa: NFA) -> tuple[int, int]:
        base, end = embed(nfa, self.levels.dfa)
        self.shadow_base = base
        return base, end

