"""Tokens to the end of a match, per DFA state: what budget-aware masks need.

::

    state q ──TokenIndex.successors──> the states one token leads to
    distance(q) = the fewest tokens from q to an accepting state (EOS not counted)

      exact   (automata without deferred parts, up to EXACT_MAX_STATES states)
              every state tokens reach from the start enumerated, then a
              breadth-first search back from the accepting states
      bound   (the others) a witness: q's cheapest byte completion (closing bytes
              cheap, whitespace and openers dear; it may end at a state that has a
              bound already), split into the fewest tokens; every state on that
              token path gets the rest of the path's length as its bound if smaller

    within(q, k) = the tokens whose target has distance <= k (+ EOS where q accepts)

Both kinds are **sound**: a distance is the length of a real token path, so a token
allowed under a budget always leaves room to finish. Both are **consistent**: a state
at distance d has a token to a state at distance at most d - 1 (the next token of its
path), so while the budget covers the current state's distance the mask is never
empty. A bound is exact where the shortest completion in bytes is also the one in
fewest tokens (closing brackets, required keys); it can only push the model to close
earlier than it had to.

Cost notes: exact enumeration walks the vocabulary trie once per state (batched; a
free string's inside is one run per node that loops, a few hundred runs); it gives up
past EXACT_MAX_STATES. A witness is a cheapest-first byte search (up to
WITNESS_CHEAPEST_STATES states expanded), else a depth-first one trying the cheapest
byte first (up to WITNESS_MAX_STATES), and a tokenisation of its few dozen bytes. The
weights keep the search narrow: a breadth-first one expands every state within the
completion's length, and in open JSON those are every whitespace run and every
nesting the next bytes could open, each a part of the lazy automaton built for
nothing; where the completion is long (many required keys with open values), even
the cheapest-first search meets too many of them, and the depth-first one walks
straight to an end. Neither builds more than WITNESS_NFA_GROWTH NFA states. A state's
target distances are computed the first time a budget mask is asked for there and
kept (a few integers); budget rows are kept per (state, level), like index rows.
"""

from __future__ import annotations

import bisect
import heapq
import threading
import weakref
from collections import deque

import numpy as np

from .lazy import GrowthDeferred
from .nfa import MAX_GROWN_NFA_STATES

#: The distance of a state from which no token path reaches acceptance.
INFINITE = 1 << 30

#: Exact distances only where the token graph from the start has at most this many states.
EXACT_MAX_STATES = 2_000
#: A witness's cheapest-first search gives way to a depth-first one past this many states.
WITNESS_CHEAPEST_STATES = 10_000
#: A witness search gives up (the state's distance is then INFINITE) past this many states.
WITNESS_MAX_STATES = 20_000
#: NFA states a witness search may build in a lazy automaton (deferred parts).
WITNESS_NFA_GROWTH = 50_000
#: States walked together while enumerating the token graph.
_BATCH = 512

_TOKENS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def token_strings(vocab) -> tuple[frozenset, int]:
    """The byte strings of ``vocab``'s text tokens and the longest one's length
    (built once per vocabulary)."""
    got = _TOKENS.get(vocab)
    if got is None:
        strings = frozenset(b for b in vocab.token_bytes if b)
        got = _TOKENS[vocab] = (strings, max(map(len, strings), default=0))
    return got


def fewest_tokens(data: bytes, strings: frozenset, longest: int) -> list[int] | None:
    """The cut positions ``[0, ..., len(data)]`` of ``data`` split into the fewest
    tokens of ``strings``, or None where no split exists.

    Example::

        >>> fewest_tokens(b"abc", frozenset({b"a", b"bc", b"b", b"c"}), 2)
        [0, 1, 3]
    """
    n = len(data)
    best = [0] + [INFINITE] * n
    back = [0] * (n + 1)
    for i in range(n):
        if best[i] == INFINITE:
            continue
        for j in range(i + 1, min(n, i + longest) + 1):
            if best[i] + 1 < best[j] and data[i:j] in strings:
                best[j], back[j] = best[i] + 1, i
    if best[n] == INFINITE:
        return None
    cuts = [n]
    while cuts[-1]:
        cuts.append(back[cuts[-1]])
    return cuts[::-1]


class TokenDistances:
    """Fewest tokens from each DFA state of a token index to acceptance, and the
    rows that keep a match finishable within a budget.

    Made once per guide, on the first budget-aware mask (``FSMGuide.distances``);
    thread-safe (it works under the index's lock).

    Args:
        index: the guide's ``TokenIndex`` (its DFA, vocabulary and trie walks).
        tops: where to keep each state's largest target distance as ``levels``
            finds it (a caller's dict: a fill checks it before calling ``within``).

    Example::

        >>> d = TokenDistances(guide.index)
        >>> d.distance(guide.dfa.start)        # tokens to the shortest match
        3
        >>> d.within(state, 2)                 # None: every allowed token fits
    """

    def __init__(self, index, tops: dict | None = None):
        self.index = index
        self.dfa = index.dfa
        self._lock: threading.RLock = index._lock
        self._dist: dict[int, int] = {}
        self._levels: dict[int, list[int]] = {}
        #: Per state: its targets' largest distance (-1: no token); the budget binds
        #: at a state only where ``remaining - 2`` is below it.
        self.tops: dict[int, int] = {} if tops is None else tops
        self._rows: dict[tuple[int, int], np.ndarray] = {}
        self._strings, self._longest = token_strings(index.vocab)
        self._byte_of_class = self._class_bytes()
        self._key_of_class = [(_byte_cost(b), _byte_rank(b)) for b in self._byte_of_class]
        self._moves: dict[int, list[tuple[int, int, int]]] = {}
        self._last_runs: tuple | None = None
        with self._lock:
            #: Whether every distance is exact (the token graph was enumerated).
            self.exact = self._enumerate()

    # -- distances --------------------------------------------------------------

    def distance(self, state: int) -> int:
        """The fewest tokens from ``state`` to an accepting state (0 if it accepts;
        ``INFINITE`` if no token path gets there): exact, or a sound upper bound
        (see the module notes)."""
        got = self._dist.get(state)
        if got is not None:
            return got
        if self.exact and self.dfa.is_accepting(state):
            return 0
        with self._lock:
            return self._witness(state)

    def levels(self, state: int) -> list[int]:
        """The distinct distances of the states ``state``'s tokens lead to, sorted
        (kept per state)."""
        got = self._levels.get(state)
        if got is None:
            _, _, _, targets = self._successors(state)
            got = sorted({self.distance(t) for t in np.unique(targets).tolist()})
            self._levels[state] = got
            self.tops[state] = got[-1] if got else -1
        return got

    # -- rows -------------------------------------------------------------------

    def within(self, state: int, remaining: int, build: bool = True) -> np.ndarray | None:
        """The mask at ``state`` with ``remaining`` tokens left, EOS included: the
        tokens after which an accepting state and then EOS fit in the rest, plus EOS
        where ``state`` accepts. None when that is every allowed token (the plain
        row serves). Where nothing fits (a budget smaller than the state's own
        distance), the tokens that come closest.

        Args:
            state: a DFA state.
            remaining: tokens that may still be generated, this one included.
            build: compute what is missing; with False, return None unless the
                answer is known (``False`` means "ask again with build=True").

        Returns:
            Packed int32 words, None (the plain row), or False (not known; only with
            ``build=False``).
        """
        levels = self._levels.get(state)
        if levels is None:
            if not build:
                return False
            levels = self.levels(state)
        k = remaining - 2  # one token now, then the target's distance, then EOS
        if not levels or k >= levels[-1]:
            return None
        accepting = self.dfa.is_accepting(state)
        level = bisect.bisect_right(levels, k) - 1
        if level < 0 and not accepting:
            level = 0  # nothing fits: the tokens that come closest
        key = (state, level)
        row = self._rows.get(key)
        if row is None:
            if not build:
                return False
            with self._lock:
                row = self._row(state, levels[level] if level >= 0 else -1, accepting)
            self._rows[key] = row
        return row

    def _successors(self, state: int):
        """``TokenIndex.successors`` of one state; the last one kept, since a state
        where the budget binds asks for its levels and then for its row."""
        last = self._last_runs
        if last is None or last[0] != state:
            last = self._last_runs = (state, self.index.successors([state]))
        return last[1]

    def _row(self, state: int, limit: int, accepting: bool) -> np.ndarray:
        _, lo, hi, targets = self._successors(state)
        keep = np.array([self.distance(t) <= limit for t in targets.tolist()], dtype=bool)
        return self.index.row_from_runs(lo[keep], hi[keep], accepting)

    # -- exact ------------------------------------------------------------------

    def _enumerate(self) -> bool:
        """Exact distances of every state tokens reach from the start; False
        (nothing kept) for an automaton with deferred parts or too many states."""
        if getattr(self.dfa, "has_deferred", False):
            return False
        start = self.dfa.start
        seen, frontier = {start}, [start]
        edges: list[np.ndarray] = []
        while frontier:
            if len(seen) > EXACT_MAX_STATES:
                return False
            batch, frontier = frontier[:_BATCH], frontier[_BATCH:]
            member, targets = self.index.successor_targets(batch)
            pairs = np.stack([np.asarray(batch, dtype=np.int64)[member], targets])  # (source, target), each once
            edges.append(pairs)
            for t in np.unique(pairs[1]).tolist():
                if t not in seen:
                    seen.add(t)
                    frontier.append(t)
        back: dict[int, list[int]] = {}
        for pairs in edges:
            for s, t in pairs.T.tolist():
                back.setdefault(t, []).append(s)
        dist = {s: 0 for s in seen if self.dfa.is_accepting(s)}
        queue = deque(dist)
        while queue:
            t = queue.popleft()
            for s in back.get(t, ()):
                if s not in dist:
                    dist[s] = dist[t] + 1
                    queue.append(s)
        for s in seen:
            dist.setdefault(s, INFINITE)
        self._dist = dist
        # Every state's levels come with the enumeration: no walk at decoding time.
        reached: dict[int, set[int]] = {}
        for t, sources in back.items():
            for s in sources:
                reached.setdefault(s, set()).add(dist[t])
        for s in seen:
            levels = sorted(reached.get(s, ()))
            self._levels[s] = levels
            self.tops[s] = levels[-1] if levels else -1
        return True

    # -- bounds -----------------------------------------------------------------

    def _class_bytes(self) -> list[int]:
        """A byte of each byte class to spell witnesses with: printable single-byte
        tokens first, then any single-byte token, then any byte."""
        single = {s[0] for s in self._strings if len(s) == 1}
        classes = self.dfa.byte_to_class[:256].tolist()
        out = [-1] * (max(classes) + 1)
        for wanted in (lambda b: b in single and 0x20 <= b < 0x7F, lambda b: b in single, lambda b: True):
            for b, c in enumerate(classes):
                if out[c] < 0 and wanted(b):
                    out[c] = b
        return out

    def _witness(self, state: int) -> int:
        """Bound ``state``'s distance by a cheap byte completion (``_byte_cost``),
        split into the fewest tokens; the states at that split's cuts get bounds
        too. The search ends at an accepting state or at one with a finite bound:
        cheapest-first where that stays small, else depth-first, cheapest byte
        first. Neither builds more than WITNESS_NFA_GROWTH states of a lazy
        automaton's NFA (a state whose row would build more is left unexpanded)."""
        got = self._dist.get(state)
        if got is not None:
            return got
        found = self._search(state, cheapest=True) or self._search(state, cheapest=False)
        cuts = None
        if found is not None:
            end, tail, parent = found
            path, data = [end], []
            while parent[path[-1]] is not None:
                s, b = parent[path[-1]]
                path.append(s)
                data.append(b)
            path.reverse()
            data.reverse()
            cuts = fewest_tokens(bytes(data), self._strings, self._longest)
        if cuts is None:
            self._dist[state] = INFINITE
            return INFINITE
        m = len(cuts) - 1
        for j, pos in enumerate(cuts):
            s = path[pos]
            if m - j + tail < self._dist.get(s, INFINITE):
                self._dist[s] = m - j + tail
        return self._dist[state]

    def _search(self, state: int, cheapest: bool):
        """A byte path from ``state`` to an accepting state or one with a finite
        bound: ``(that state, its bound or 0, parent links)``, or None. ``cheapest``:
        least total ``_byte_cost`` first, up to WITNESS_CHEAPEST_STATES expanded;
        else depth-first, the cheapest byte tried first, up to WITNESS_MAX_STATES."""
        lazy = getattr(self.dfa, "lazy", False)
        if lazy:  # each search its own allowance: the second must not find it spent
            self.dfa.growth_limit = min(self.dfa.nfa_size + WITNESS_NFA_GROWTH, MAX_GROWN_NFA_STATES // 4)
        try:
            return self._cheapest(state) if cheapest else self._depth_first(state)
        finally:
            if lazy:
                self.dfa.growth_limit = None

    def _depth_first(self, state: int):
        # A state's parent is set when it is expanded, not when first seen: a state
        # seen early but deep in the stack must not hold back the branch that
        # reaches it again now.
        parent: dict[int, tuple[int, int] | None] = {}
        stack: list[tuple[int, int | None, int]] = [(state, None, 0)]
        while stack and len(parent) < WITNESS_MAX_STATES:
            s, before, b = stack.pop()
            if s in parent:
                continue
            parent[s] = None if before is None else (before, b)
            end = self._end(s, state)
            if end is not None:
                if end >= 0:
                    return s, end, parent
                continue  # a dead end (or a search given up): not through there
            moves = self._moves_of(s)
            for _, byte, t in reversed(moves or ()):  # the first move is popped first
                if t not in parent:
                    stack.append((t, s, byte))
        return None

    def _end(self, s: int, state: int) -> int | None:
        """Where a search stops at ``s``: 0 (accepting), its bound (a finite one
        known), -1 (a dead end known), or None (go on)."""
        if self.dfa.is_accepting(s):
            return 0
        known = self._dist.get(s)
        if known is None or s == state:
            return None
        return known if known < INFINITE else -1

    def _cheapest(self, state: int):
        parent: dict[int, tuple[int, int] | None] = {state: None}
        best = {state: 0}
        heap = [(0, state)]
        expanded = 0
        while heap and expanded < WITNESS_CHEAPEST_STATES:
            cost, s = heapq.heappop(heap)
            if cost > best[s]:
                continue
            end = self._end(s, state)
            if end is not None:
                if end >= 0:
                    return s, end, parent
                continue  # a dead end (or a search given up): not through there
            expanded += 1
            for step, b, t in self._moves_of(s) or ():
                if cost + step < best.get(t, INFINITE):
                    best[t] = cost + step
                    parent[t] = (s, b)
                    heapq.heappush(heap, (cost + step, t))
        return None

    def _moves_of(self, s: int) -> list[tuple[int, int, int]] | None:
        """``(cost, byte, target)`` per state ``s`` leads to, by its cheapest byte,
        in the order a depth-first search tries them (kept: searches meet the same
        states again and again); None where the row would grow the NFA too far."""
        got = self._moves.get(s)
        if got is None:
            try:
                row = self.dfa.next_states(s)
            except GrowthDeferred:
                return None
            best: dict[int, tuple[int, int, int]] = {}
            for c, t in enumerate(row):
                if t >= 0:
                    key = self._key_of_class[c]
                    if t not in best or key < best[t][:2]:
                        best[t] = (*key, self._byte_of_class[c])
            got = self._moves[s] = [(cost, b, t) for t, (cost, _, b) in sorted(best.items(), key=lambda x: x[1])]
        return got


def _byte_rank(b: int) -> int:
    """Among bytes of one cost, the order a depth-first witness tries them: closers,
    then a quote, digits, a colon, letters, a comma (which opens another member)."""
    for rank, group in enumerate((b"}]", b'"', b"0123456789", b":")):
        if b in group:
            return rank
    return 4 if chr(b).isalpha() and b < 0x80 else 5


def _byte_cost(b: int) -> int:
    """A byte's weight in the witness search: what closes a structure or spells a
    key is cheap; openers, whitespace, escapes and bytes outside ASCII are dear."""
    if b in b'"}]:,' or 0x30 <= b <= 0x39 or 0x41 <= b <= 0x5A or 0x61 <= b <= 0x7A:
        return 1
    if b in b"{[":
        return 3
    if 0x21 <= b < 0x7F and b != 0x5C:
        return 2
    return 6
