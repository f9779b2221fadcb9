"""``fsm.dfa.co_reachable`` and its two callers' edge lists, compiled with numba
(imported by ``fsm.dfa``, ``fsm.lazy`` and ``fsm.nfa`` only where numba is installed).
Python twins: ``fsm.dfa.co_reachable`` (``co_reachable``, ``live_in_table``: ``fsm.dfa.
live_states``), ``fsm.lazy``'s liveness search over ``NFA.flat`` (``live_in_nfa``) and
``fsm.nfa.NFA.reach_bits`` (``reach_bits``); held equal by
``tests/test_regex.py::test_live_states_is_reverse_reachability`` and
``tests/test_lazy_nfa.py::test_reach_bits_is_what_a_search_from_each_state_finds``.

Which states reach a target, searched backwards: the edges are counted into a CSR of
predecessors by target, then a stack walks it from the targets. Each edge is read a
fixed number of times, with no per-level set-up: the numpy search in ``fsm.dfa``
pays ~50 µs of calls per level, and the NFAs of large schemas are thousands of
levels deep (a long chain of key bytes), so it would cost a tenth of their compile time.

``reach_bits`` (``fsm.nfa.NFA.reach_bits``: which ends each state of a grammar rule
leads to) groups the same edges by source instead and runs Tarjan's algorithm.

Cost notes: ~10 ns an edge. ``live_in_table`` reads a DFA table where it stands and
``live_in_nfa`` the arrays of ``NFA.flat``: their edge lists are made in the kernel,
not in numpy first.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import watch_first_compile

watch_first_compile()


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
def _grouped(key, value, n):
    """``(first, values)``: the ``value`` of the edges whose ``key`` is state d are
    ``values[first[d]:first[d + 1]]``, in edge order (keyed by target: predecessors;
    by source: successors)."""
    first = np.zeros(n + 1, dtype=np.int64)
    for d in key:
        first[d + 1] += 1
    for d in range(n):
        first[d + 1] += first[d]
    fill = first[:-1].copy()
    values = np.empty(len(value), dtype=np.int64)
    for i in range(len(value)):
        d = key[i]
        values[fill[d]] = value[i]
        fill[d] += 1
    return first, values


@njit(cache=True, nogil=True)
def _nfa_edges(counts, eps, moves, pending):
    """``(src, dst)`` of every move of an NFA given as ``NFA.flat``'s arrays:
    epsilons, byte moves, and each deferred fragment (``pending``: ``[start, end]``)
    as a move from its start to its end."""
    m = len(eps) + len(moves) + len(pending)
    src = np.empty(m, dtype=np.int64)
    dst = np.empty(m, dtype=np.int64)
    i = e = v = 0
    for s in range(len(counts)):
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
    return src, dst


@njit(cache=True, nogil=True)
def co_reachable(src, dst, targets):
    """Which states reach one of ``targets`` (a bool per state) along the edges
    ``src[i] -> dst[i]``."""
    first, preds = _grouped(dst, src, len(targets))
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
    first, preds = _grouped(dst, src, n)
    return _search_back(first, preds, accepting.copy())


@njit(cache=True, nogil=True)
def live_in_nfa(counts, eps, moves, pending, final):
    """The states of an NFA (``NFA.flat``'s arrays; ``pending``: ``[start, end]`` of
    each deferred fragment, a move from its start to its end) that reach ``final``."""
    n = len(counts)
    src, dst = _nfa_edges(counts, eps, moves, pending)
    first, preds = _grouped(dst, src, n)
    live = np.zeros(n, dtype=np.bool_)
    live[final] = True
    return _search_back(first, preds, live)


@njit(cache=True, nogil=True)
def reach_bits(counts, eps, moves, pending, bits):
    """``fsm.nfa.NFA.reach_bits`` over ``NFA.flat``'s arrays: ``bits`` (uint64
    ``[states, words]``, the seeds) is ORed in place, per state, with the bits of
    every state it reaches. One iterative pass of Tarjan's strongly connected
    components, as in the Python method: a component is finished after every
    component it reaches, so its bits are its members' seeds and their successors'."""
    n, words = bits.shape
    src, dst = _nfa_edges(counts, eps, moves, pending)
    first, succ = _grouped(src, dst, n)
    finished = n  # the index of a state whose component is done: above any low
    index = np.full(n, -1, dtype=np.int64)
    low = np.zeros(n, dtype=np.int64)
    stack = np.empty(n, dtype=np.int64)
    work = np.empty(n, dtype=np.int64)  # the depth-first path
    at = np.empty(n, dtype=np.int64)  # per state on it, its next successor to try
    acc = np.empty(words, dtype=np.uint64)
    top = depth = counter = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack[top] = root
        top += 1
        work[0], at[root], depth = root, first[root], 1
        while depth:
            v = work[depth - 1]
            descended = False
            while at[v] < first[v + 1]:
                w = succ[at[v]]
                at[v] += 1
                if index[w] < 0:
                    index[w] = low[w] = counter
                    counter += 1
                    stack[top] = w
                    top += 1
                    work[depth], at[w] = w, first[w]
                    depth += 1
                    descended = True
                    break
                if index[w] < low[v]:
                    low[v] = index[w]
            if descended:
                continue
            depth -= 1
            if depth and low[v] < low[work[depth - 1]]:
                low[work[depth - 1]] = low[v]
            if low[v] == index[v]:
                # v roots a component: the states above it on the stack.
                acc[:] = 0
                i = top
                while True:
                    i -= 1
                    w = stack[i]
                    for k in range(words):
                        acc[k] |= bits[w, k]
                    for j in range(first[w], first[w + 1]):
                        x = succ[j]
                        for k in range(words):
                            acc[k] |= bits[x, k]
                    if w == v:
                        break
                for j in range(i, top):
                    w = stack[j]
                    for k in range(words):
                        bits[w, k] = acc[k]
                    index[w] = finished
                top = i
    return bits
