"""Tokens to the end of a match, per DFA state: what budget-aware masks need.

::

    state q ──TokenIndex.successors──> the states one token leads to
    distance(q) = the fewest tokens from q to an accepting state (EOS not counted)

      exact   (automata without deferred parts, up to EXACT_MAX_STATES states)
              every state tokens reach from the start enumerated, then a
              breadth-first search back from the accepting states
      bound   (the others) a witness: q's shortest byte completion, split into the
              fewest tokens; every state on that token path gets the rest of the
              path's length as its distance if that is smaller

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
past EXACT_MAX_STATES. A witness is a byte-level breadth-first search (up to
WITNESS_MAX_STATES states) and a tokenisation of its few dozen bytes. A state's
target distances are computed the first time a budget mask is asked for there and
kept (a few integers); budget rows are kept per (state, level), like index rows.
"""

from __future__ import annotations

import bisect
import threading
import weakref
from collections import deque

import numpy as np

#: The distance of a state from which no token path reaches acceptance.
INFINITE = 1 << 30

#: Exact distances only where the token graph from the start has at most this many states.
EXACT_MAX_STATES = 2_000
#: A witness search gives up (the state's distance is then INFINITE) past this many states.
WITNESS_MAX_STATES = 200_000
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

    Example::

        >>> d = TokenDistances(guide.index)
        >>> d.distance(guide.dfa.start)        # tokens to the shortest match
        3
        >>> d.within(state, 2)                 # None: every allowed token fits
    """

    def __init__(self, index):
        self.index = index
        self.dfa = index.dfa
        self._lock: threading.RLock = index._lock
        self._dist: dict[int, int] = {}
        self._levels: dict[int, list[int]] = {}
        self._rows: dict[tuple[int, int], np.ndarray] = {}
        self._strings, self._longest = token_strings(index.vocab)
        self._byte_of_class = self._class_bytes()
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
            _, _, _, targets = self.index.successors([state])
            got = sorted({self.distance(t) for t in np.unique(targets).tolist()})
            self._levels[state] = got
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

    def _row(self, state: int, limit: int, accepting: bool) -> np.ndarray:
        _, lo, hi, targets = self.index.successors([state])
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
            member, _, _, targets = self.index.successors(batch)
            pairs = np.unique(np.stack([np.asarray(batch, dtype=np.int64)[member], targets]), axis=1)
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
        """Bound ``state``'s distance by its shortest byte completion, split into
        the fewest tokens; the states at that split's cuts get bounds too."""
        got = self._dist.get(state)
        if got is not None:
            return got
        parent: dict[int, tuple[int, int] | None] = {state: None}
        queue = deque([state])
        found = -1
        while queue and len(parent) <= WITNESS_MAX_STATES:
            s = queue.popleft()
            if self.dfa.is_accepting(s):
                found = s
                break
            for c, t in enumerate(self.dfa.next_states(s)):
                if t >= 0 and t not in parent:
                    parent[t] = (s, self._byte_of_class[c])
                    queue.append(t)
        cuts = None
        if found >= 0:
            path, data = [found], []
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
            if m - j < self._dist.get(s, INFINITE):
                self._dist[s] = m - j
        return self._dist[state]
