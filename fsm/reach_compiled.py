"""``fsm.dfa.co_reachable`` and its two callers' edge lists, compiled with numba
(imported by ``fsm.dfa`` and ``fsm.lazy`` only where numba is installed: the `fast`
extra).

Which states reach a target, searched backwards: the edges are counted into a CSR of
predecessors by target, then a stack walks it from the targets. Each edge is read a
fixed number of times, with no per-level set-up: the numpy search in ``fsm.dfa``
pays ~50 µs of calls per level, and the NFAs of large schemas are thousands of
levels deep (a long chain of key bytes), so it cost a tenth of their compile time.

Cost notes: ~10 ns an edge. ``live_in_table`` reads a DFA table where it stands and
``live_in_nfa`` the arrays of ``NFA.flat``, so neither builds an edge list first.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _search_back(first, preds, live):
    """Mark in place every state with a path into one already marked."""
    stack = np.empty(len(live), dtype=np.int64)
    top = 0
    for s in range(len(live)):
        if live[s]:
            stack[top] = s
            top += 1
    while top:
        top -= 1
        d = stack[top]
        for j in range(first[d], first[d + 1]):
            p = preds[j]
            if not live[p]:
                live[p] = True
                stack[top] = p
                top += 1
    return live


@njit(cache=True, nogil=True)
def _by_target(src, dst, n):
    """``(first, preds)``: the sources of the edges into state d are
    ``preds[first[d]:first[d + 1]]``."""
    first = np.zeros(n + 1, dtype=np.int64)
    for d in dst:
        first[d + 1] += 1
    for d in range(n):
        first[d + 1] += first[d]
    fill = first[:-1].copy()
    preds = np.empty(len(src), dtype=np.int64)
    for i in range(len(src)):
        d = dst[i]
        preds[fill[d]] = src[i]
        fill[d] += 1
    return first, preds


@njit(cache=True, nogil=True)
def co_reachable(src, dst, targets):
    """Which states reach one of ``targets`` (a bool per state) along the edges
    ``src[i] -> dst[i]``."""
    first, preds = _by_target(src, dst, len(targets))
    return _search_back(first, preds, targets.copy())


@njit(cache=True, nogil=True)
def live_in_table(trans, accepting):
    """The states of the DFA table ``trans`` (-1: no move) that reach an accepting one."""
    n, k = trans.shape
    m = 0
    for s in range(n):
        for c in range(k):
            if trans[s, c] >= 0:
                m += 1
    src = np.empty(m, dtype=np.int64)
    dst = np.empty(m, dtype=np.int64)
    i = 0
    for s in range(n):
        for c in range(k):
            t = trans[s, c]
            if t >= 0:
                src[i] = s
                dst[i] = t
                i += 1
    first, preds = _by_target(src, dst, n)
    return _search_back(first, preds, accepting.copy())


@njit(cache=True, nogil=True)
def live_in_nfa(counts, eps, moves, pending, final):
    """The states of an NFA (``NFA.flat``'s arrays; ``pending``: ``[start, end]`` of
    each deferred fragment, a move from its start to its end) that reach ``final``."""
    n = len(counts)
    m = len(eps) + len(moves) + len(pending)
    src = np.empty(m, dtype=np.int64)
    dst = np.empty(m, dtype=np.int64)
    i = e = v = 0
    for s in range(n):
        for _ in range(counts[s, 0]):
            src[i] = s
            dst[i] = eps[e]
            i += 1
            e += 1
        for _ in range(counts[s, 1]):
            src[i] = s
            dst[i] = moves[v, 2]
            i += 1
            v += 1
    for j in range(len(pending)):
        src[i] = pending[j, 0]
        dst[i] = pending[j, 1]
        i += 1
    first, preds = _by_target(src, dst, n)
    live = np.zeros(n, dtype=np.bool_)
    live[final] = True
    return _search_back(first, preds, live)
