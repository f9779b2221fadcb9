"""The narrow walk of ``fsm.narrow``, compiled with numba where numba is installed.

::

    Python (TokenIndex)                          compiled (_walk_py)
    start pairs (roots, the text shortcut) ────> pop (node, state); take a subtree whole
                                                 by room or by self-loop; push live
                                                 children; add token ends
    facts of the set-aside states  <──────────── a pair whose state lacks a fact (its
    (subset construction, rooms: Python)         row, room or loop set) is set aside,
                ... rounds until none is set aside, or past the budget

The compiled loop never calls back into Python: the facts it needs come from code
that grows a lazy DFA's NFA (subset construction, deferred fragments), which stays
Python. So a round walks every pair whose facts are known, sets the others aside
with the fact they lack, and Python computes those facts for all of them before
the next round resumes from them. A walk's rounds are about as many as the new
states it meets in a row along one token.

The rules are ``fsm.narrow.narrow_walk``'s, so both give the same runs (the tests
compare them): a plain or text node whose state has room for its longest token, a
node whose bytes below are all self-loops of its state, a token end's own tokens.
Children are checked one by one (compiled, ~1 ns each), so neither ``few_moves``
nor the numpy gather is needed here.

Cost notes: a round costs ~1 µs of dispatch and ~3 µs of walking on MaskBench (a pair
takes nanoseconds); Python's side of a round (filling the facts asked for, outside
subset construction) ~5 µs, and a walk has ~5 rounds. Compiling on first use takes
~1 s, cached on disk (numba's ``cache=True``) so a later process loads it in ~0.5 s
(numba's import included). Without numba, ``AVAILABLE`` is False and ``TokenIndex``
walks in Python.
"""

from __future__ import annotations

import numpy as np

from .jit import compiled

#: The compiled walk gives up after checking this many (child, state) pairs (the
#: Python walk: ``fsm.narrow.NARROW_BUDGET``). Checks cost nanoseconds here; what a
#: wide state costs is the facts of the many states it reaches, set aside to Python.
COMPILED_BUDGET = 20_000

# Columns of the node table.
_START, _END, _SYMBOL, _OWN, _LO, _HI, _KIND, _HEIGHT, _NEED = range(9)
_PLAIN, _TEXT = 1, 2  # _KIND
# Columns of the facts table: rooms (-1: not known, -2: asked for this round) and
# whether the state loops on some bytes (_NO_LOOP, _SOME_LOOP; its row is built then).
_ROOM, _TEXT_ROOM, _LOOP = range(3)
_UNKNOWN_LOOP, _NO_LOOP, _SOME_LOOP, _ASKED_LOOP = range(4)
# What a set-aside pair's state lacks (-1: asked for already, by another pair): a
# room's need is its column's number.
NEED_ROOM, NEED_TEXT_ROOM, NEED_LOOP = _ROOM, _TEXT_ROOM, 2
# Outcomes of a round.
_DONE, _FULL, _OVER_BUDGET = range(3)


def _walk_py(nodes, below, classes, trans, facts, loops, stack, sp, out, n_out, aside, asks, checks, budget):
    """One round: walk the pairs on ``stack[:sp]``; returns (outcome, sp, n_out,
    asks, checks). ``out[:n_out]``: the runs found so far, ``(lo, hi)``; pairs
    whose state lacks a fact go to ``aside`` (node, state), and back on the stack
    when the round ends; ``asks``: (state, need), each asked for once (marked asked
    in ``facts``). On ``_FULL`` the pair being walked is back on the stack too, and
    the buffers must grow."""
    n_aside = n_asks = 0
    cap = stack.shape[0]
    while sp > 0:
        if n_out == out.shape[0]:
            outcome = _FULL
            break
        sp -= 1
        node = stack[sp, 0]
        state = stack[sp, 1]
        kind = nodes[node, _KIND]
        need = -2  # -2: lacks nothing yet; -1: lacks a fact already asked for; else NEED_*
        if kind:  # a plain or text node: whole by its room (in bytes, or characters)
            col = _ROOM if kind == _PLAIN else _TEXT_ROOM  # also the need's number
            room = facts[state, col]
            if room < 0:
                need = col if room == -1 else -1
                facts[state, col] = -2
            elif room >= nodes[node, _HEIGHT if kind == _PLAIN else _NEED]:
                out[n_out, 0], out[n_out, 1] = nodes[node, _LO], nodes[node, _HI]
                n_out += 1
                continue
        if need == -2:
            loop = facts[state, _LOOP]
            if loop == _UNKNOWN_LOOP or loop == _ASKED_LOOP:
                need = NEED_LOOP if loop == _UNKNOWN_LOOP else -1
                facts[state, _LOOP] = _ASKED_LOOP
            elif loop == _SOME_LOOP:
                covered = True
                for w in range(4):
                    if below[node, w] & ~loops[state, w]:
                        covered = False
                        break
                if covered:
                    out[n_out, 0], out[n_out, 1] = nodes[node, _LO], nodes[node, _HI]
                    n_out += 1
                    continue
        if need != -2:
            aside[n_aside, 0], aside[n_aside, 1] = node, state
            n_aside += 1
            if need >= 0:
                asks[n_asks, 0], asks[n_asks, 1] = state, need
                n_asks += 1
            continue
        a, b = nodes[node, _START], nodes[node, _END]
        if sp + n_aside + (b - a) > cap or n_out + (b - a) + 1 > out.shape[0]:
            stack[sp, 0], stack[sp, 1] = node, state
            sp += 1
            outcome = _FULL
            break
        own = nodes[node, _OWN]
        if own:
            out[n_out, 0], out[n_out, 1] = nodes[node, _LO], nodes[node, _LO] + own
            n_out += 1
        checks += b - a
        for child in range(a, b):
            target = trans[state, classes[nodes[child, _SYMBOL]]]
            if target >= 0:
                if nodes[child, _START] == nodes[child, _END]:  # a leaf: its own tokens
                    out[n_out, 0], out[n_out, 1] = nodes[child, _LO], nodes[child, _HI]
                    n_out += 1
                else:
                    stack[sp, 0], stack[sp, 1] = child, target
                    sp += 1
        if checks > budget:
            return _OVER_BUDGET, sp, n_out, n_asks, checks
    else:
        outcome = _DONE
    for i in range(n_aside):  # fits: pushes kept stack + aside within the stack
        stack[sp, 0], stack[sp, 1] = aside[i, 0], aside[i, 1]
        sp += 1
    return outcome, sp, n_out, n_asks, checks


class TrieTable:
    """A ``RunTrie``'s node arrays as one int64 table (one argument per call: numba
    checks each argument's type on every call) plus ``below`` as uint64 [n, 4]."""

    __slots__ = ("nodes", "below")

    def __init__(self, runs, below: list[int]) -> None:
        t = runs.trie
        kind = np.where(runs.plain_node, _PLAIN, np.where(runs.text_node, _TEXT, 0))
        cols = [t.child_start, t.child_end, np.maximum(t.symbol, 0), runs.own, runs.lo, runs.hi, kind, runs.height,
                runs.text_need]
        self.nodes = np.ascontiguousarray(np.stack([np.asarray(c, dtype=np.int64) for c in cols], axis=1))
        raw = b"".join(x.to_bytes(32, "little") for x in below)
        self.below = np.frombuffer(raw, dtype="<u8").reshape(-1, 4).astype(np.uint64)


class CompiledWalk:
    """One token index's compiled narrow walks: the facts known per DFA state (kept
    across walks) and the walk's buffers.

    Example::

        >>> walker = CompiledWalk(table, classes)
        >>> walker.walk(dfa, pairs, lo, hi, fill)   # (lo, hi) runs, or None
    """

    #: Rows of the stack and run buffers to begin with (they double when full).
    BUFFER = 4096

    def __init__(self, table: TrieTable, classes: np.ndarray) -> None:
        self._walk = compiled(_walk_py)
        self.table = table
        self.classes = np.ascontiguousarray(classes, dtype=np.int64)
        self.facts = np.full((64, 3), -1, dtype=np.int64)
        self.facts[:, _LOOP] = _UNKNOWN_LOOP
        self.loops = np.zeros((64, 4), dtype=np.uint64)
        self._stack = np.zeros((self.BUFFER, 2), dtype=np.int64)
        self._aside = np.zeros((self.BUFFER, 2), dtype=np.int64)
        self._asks = np.zeros((self.BUFFER, 2), dtype=np.int64)
        self._out = np.zeros((self.BUFFER, 2), dtype=np.int64)

    def _fit(self, num_states: int) -> None:
        n = len(self.facts)
        if n < num_states:  # the DFA grew
            size = max(2 * n, num_states)
            facts = np.full((size, 3), -1, dtype=np.int64)
            facts[:, _LOOP] = _UNKNOWN_LOOP
            facts[:n] = self.facts
            loops = np.zeros((size, 4), dtype=np.uint64)
            loops[:n] = self.loops
            self.facts, self.loops = facts, loops

    def _forget_asked(self) -> None:
        """Facts marked asked for but never filled in (the walk gave up, or filling
        one raised) go back to unknown."""
        f = self.facts
        for col in (_ROOM, _TEXT_ROOM):
            f[f[:, col] == -2, col] = -1
        f[f[:, _LOOP] == _ASKED_LOOP, _LOOP] = _UNKNOWN_LOOP

    def set_loop(self, state: int, loop: int) -> None:
        """Record ``fsm.narrow.loop_bytes`` of ``state`` (its row is built then)."""
        self.facts[state, _LOOP] = _SOME_LOOP if loop else _NO_LOOP
        if loop:
            self.loops[state] = np.frombuffer(loop.to_bytes(32, "little"), dtype="<u8")

    def walk(self, dfa, pairs: list[tuple[int, int]], lo: list[int], hi: list[int], fill, budget: int = COMPILED_BUDGET):
        """The runs alive from the (node, state) ``pairs`` (plus ``lo``/``hi``, runs
        already found), or None past ``budget`` checks. ``fill(state, need)``
        computes the fact a set-aside state lacks (``NEED_*``) and records it here
        (``facts``, ``set_loop``)."""
        sp = len(pairs)
        if sp > len(self._stack):
            self._stack = np.zeros((2 * sp, 2), dtype=np.int64)
            self._aside = np.zeros((2 * sp, 2), dtype=np.int64)
            self._asks = np.zeros((2 * sp, 2), dtype=np.int64)
        if sp:
            self._stack[:sp] = pairs
        n_out, checks = 0, 0
        while True:
            if len(self.facts) < dfa.num_states:
                self._fit(dfa.num_states)
            outcome, sp, n_out, n_asks, checks = self._walk(
                self.table.nodes, self.table.below, self.classes, dfa.transitions, self.facts, self.loops, self._stack,
                sp, self._out, n_out, self._aside, self._asks, checks, budget)
            if outcome == _OVER_BUDGET:
                self._forget_asked()
                return None
            if n_asks:
                try:
                    for state, need in self._asks[:n_asks].tolist():
                        fill(state, need)
                except BaseException:  # no fact stays marked asked for
                    self._forget_asked()
                    raise
            if outcome == _FULL:  # grow the buffers, keep what is in them
                self._stack = _doubled(self._stack)
                self._aside = _doubled(self._aside)
                self._asks = _doubled(self._asks)
                self._out = _doubled(self._out)
            elif not sp:
                break
        out = self._out[:n_out]
        if lo:
            out = np.concatenate([np.array([lo, hi], dtype=np.int64).T, out])
        return out[:, 0].copy(), out[:, 1].copy()


def _doubled(a: np.ndarray) -> np.ndarray:
    grown = np.zeros((2 * len(a), a.shape[1]), dtype=a.dtype)
    grown[: len(a)] = a
    return grown
