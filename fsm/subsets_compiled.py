"""``fsm.dfa.subset_table`` compiled with numba (imported by ``fsm.dfa`` only where
numba is installed: the `fast` extra).

::

    NFA (Python lists) --one copy into arrays--> closures, sweeps, interning (compiled)
                                                 --> transition table, accepting states

The rules are the Python ones (``fsm.dfa.subset_table``, ``sweep_row``): the same
closures, the same sweep over each subset's class intervals, new states numbered in
the same order, so both build the same table (the tests compare them) and
minimisation sees the same input.

Cost notes: the Python construction costs ~50 µs a DFA state on JSON Schema parts
(sweeping intervals, unioning frozensets), about a quarter of compiling a large
schema; compiled, a state costs about a microsecond. Copying the NFA costs about
half a microsecond a state, and the byte classes come from the same copy.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .dfa import nfa_byte_classes
from .errors import RegexTooLargeError

# Columns per NFA state: its closure's slice of ``cl`` (-1: not known yet), its moves'
# slice of ``mv`` (class intervals), its epsilon moves' slice of ``ep``, the DFA state
# its closure alone is (-1: none yet), whether it has byte moves.
_CL_LO, _CL_HI, _MV_LO, _MV_HI, _EP_LO, _EP_HI, _SINGLE, _MOVES = range(8)
# Columns per DFA state: its subset's slice of ``sub``, whether it accepts (the
# slice first, as for target sets: ``_rehash`` serves both).
_SUB_LO, _SUB_HI, _ACCEPT = range(3)
# Columns per remembered target set (``sweep_row``'s ``known``): its slice of
# ``titems``, its DFA state.
_T_LO, _T_HI, _T_STATE = range(3)
# Slots of ``counts``.
_N_DFA, _N_SUB, _N_CL, _FINAL, _MAX, _NEED, _STAMP, _N_T, _N_TITEMS = range(9)
# Outcomes: done, or the buffer named must grow (``counts[_NEED]``: to how many).
(_DONE, _FULL_DFA, _FULL_SUB, _FULL_TABLE, _FULL_SCRATCH, _FULL_CL, _FULL_T, _FULL_TITEMS,
 _TOO_LARGE) = range(9)
# A sweep event: class << 42 | opens << 41 | NFA target.
_SHIFT, _OPEN, _TARGET = 42, 1 << 41, (1 << 41) - 1


@njit(cache=True, nogil=True)
def _closure(t, nf, ep, cl, counts, seen, mark):
    """Record the closure of NFA state ``t`` in ``cl``: the states epsilon moves reach
    from it that have byte moves, or are the final state, sorted."""
    stamp = counts[_STAMP] + 1
    counts[_STAMP] = stamp
    seen[0] = t
    mark[t] = stamp
    n_seen = 1
    i = 0
    while i < n_seen:
        x = seen[i]
        i += 1
        for k in range(nf[x, _EP_LO], nf[x, _EP_HI]):
            y = ep[k]
            if mark[y] != stamp:
                mark[y] = stamp
                seen[n_seen] = y
                n_seen += 1
    lo = counts[_N_CL]
    if lo + n_seen > cl.shape[0]:
        counts[_NEED] = lo + n_seen
        return _FULL_CL
    final = counts[_FINAL]
    hi = lo
    for k in range(n_seen):
        x = seen[k]
        if nf[x, _MOVES] or x == final:
            cl[hi] = x
            hi += 1
    cl[lo:hi].sort()
    nf[t, _CL_LO], nf[t, _CL_HI] = lo, hi
    counts[_N_CL] = hi
    return _DONE


@njit(cache=True, nogil=True)
def _mix(t):
    """splitmix64's finaliser: a set's hash is the sum of its members' (so the sweep
    keeps its open targets' hash as they open and close)."""
    z = np.uint64(t) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True, nogil=True)
def _intern(items, lo, hi, df, sub, table, counts):
    """The DFA state whose subset is ``items[lo:hi]`` (sorted), made if new; minus an
    outcome (``-_FULL_DFA`` ...) when a buffer must grow first."""
    h = np.uint64(0)
    for i in range(lo, hi):
        h += _mix(items[i])
    mask = table.shape[0] - 1
    pos = np.int64(h & np.uint64(mask))
    while True:
        j = table[pos]
        if j < 0:
            break
        if df[j, _SUB_HI] - df[j, _SUB_LO] == hi - lo:
            base = df[j, _SUB_LO] - lo
            same = True
            for i in range(lo, hi):
                if sub[base + i] != items[i]:
                    same = False
                    break
            if same:
                return j
        pos = (pos + 1) & mask
    n = counts[_N_DFA]
    ns = counts[_N_SUB]
    if n >= counts[_MAX]:
        return -_TOO_LARGE
    if n >= df.shape[0]:
        return -_FULL_DFA
    if 2 * (n + 1) > table.shape[0]:
        return -_FULL_TABLE
    if ns + hi - lo > sub.shape[0]:
        counts[_NEED] = ns + hi - lo
        return -_FULL_SUB
    final = counts[_FINAL]
    acc = 0
    for i in range(lo, hi):
        sub[ns + i - lo] = items[i]
        if items[i] == final:
            acc = 1
    df[n, _SUB_LO], df[n, _SUB_HI], df[n, _ACCEPT] = ns, ns + hi - lo, acc
    counts[_N_SUB] = ns + hi - lo
    counts[_N_DFA] = n + 1
    table[pos] = n
    return n


@njit(cache=True, nogil=True)
def _rehash(slices, items, n, table):
    """Enter sets ``0 .. n-1`` (``items[slices[k, 0]:slices[k, 1]]``: DFA states'
    subsets, or remembered target sets) into an empty ``table``."""
    mask = table.shape[0] - 1
    for k in range(n):
        h = np.uint64(0)
        for i in range(slices[k, 0], slices[k, 1]):
            h += _mix(items[i])
        pos = np.int64(h & np.uint64(mask))
        while table[pos] >= 0:
            pos = (pos + 1) & mask
        table[pos] = k


@njit(cache=True, nogil=True)
def _state_of(t, nf, ep, cl, df, sub, table, counts, seen, mark):
    """The DFA state of NFA state ``t``'s closure (made if new), or minus an outcome."""
    if nf[t, _SINGLE] >= 0:
        return nf[t, _SINGLE]
    if nf[t, _CL_LO] < 0:
        outcome = _closure(t, nf, ep, cl, counts, seen, mark)
        if outcome != _DONE:
            return -outcome
    j = _intern(cl, nf[t, _CL_LO], nf[t, _CL_HI], df, sub, table, counts)
    if j >= 0:
        nf[t, _SINGLE] = j
    return j


@njit(cache=True, nogil=True)
def _row(d, nf, ep, cl, mv, df, sub, table, trans, counts, scratch, cnt, seen, mark, tsets, titems, ttable):
    """Build DFA state ``d``'s row (``fsm.dfa.sweep_row``) into ``trans[d]``; an
    outcome other than ``_DONE`` leaves it to be built again once the buffer has
    grown (the states it made stay). ``cnt`` (per NFA state, zero between calls):
    intervals open in the sweep. Target sets of several states are remembered with
    the state they lead to (``tsets``, ``titems``, ``ttable``), as ``sweep_row``'s
    ``known``: a state inside a large subset meets the same ones row after row."""
    n_classes = trans.shape[1]
    n_ev = 0
    bound = 0  # the most members a target set's union can have
    for p in range(df[d, _SUB_LO], df[d, _SUB_HI]):
        m = sub[p]
        for q in range(nf[m, _MV_LO], nf[m, _MV_HI]):
            t = mv[q, 2]
            if nf[t, _CL_LO] < 0:
                outcome = _closure(t, nf, ep, cl, counts, seen, mark)
                if outcome != _DONE:
                    return outcome
            bound += nf[t, _CL_HI] - nf[t, _CL_LO]
            n_ev += 2
    # scratch: events, then the open targets, the union, the row.
    act0 = n_ev
    uni0 = act0 + n_ev // 2
    row0 = uni0 + bound
    if row0 + n_classes > scratch.shape[0]:
        counts[_NEED] = row0 + n_classes
        return _FULL_SCRATCH
    k = 0
    for p in range(df[d, _SUB_LO], df[d, _SUB_HI]):
        m = sub[p]
        for q in range(nf[m, _MV_LO], nf[m, _MV_HI]):
            t = mv[q, 2]
            scratch[k] = (mv[q, 0] << _SHIFT) | _OPEN | t
            scratch[k + 1] = ((mv[q, 1] + 1) << _SHIFT) | t
            k += 2
    scratch[:n_ev].sort()  # by class; at a class, closing events first
    for c in range(n_classes):
        scratch[row0 + c] = -1
    n_act = 0
    h = np.uint64(0)  # the open targets' hash
    tmask = ttable.shape[0] - 1
    e = 0
    while e < n_ev:
        at = scratch[e] >> _SHIFT
        while e < n_ev and scratch[e] >> _SHIFT == at:
            x = scratch[e]
            t = x & _TARGET
            if x & _OPEN:
                if cnt[t] == 0:
                    scratch[act0 + n_act] = t
                    n_act += 1
                    h += _mix(t)
                cnt[t] += 1
            else:
                cnt[t] -= 1
                if cnt[t] == 0:
                    for a in range(act0, act0 + n_act):
                        if scratch[a] == t:
                            scratch[a] = scratch[act0 + n_act - 1]
                            break
                    n_act -= 1
                    h -= _mix(t)
            e += 1
        if n_act == 0:
            continue
        nxt = scratch[e] >> _SHIFT  # an open interval closes later: e < n_ev
        if n_act == 1:
            j = _state_of(scratch[act0], nf, ep, cl, df, sub, table, counts, seen, mark)
        else:
            j = -1
            pos = np.int64(h & np.uint64(tmask))
            while ttable[pos] >= 0:  # remembered? (the open targets are those with cnt > 0)
                k = ttable[pos]
                if tsets[k, _T_HI] - tsets[k, _T_LO] == n_act:
                    j = tsets[k, _T_STATE]
                    for i in range(tsets[k, _T_LO], tsets[k, _T_HI]):
                        if cnt[titems[i]] == 0:
                            j = -1
                            break
                    if j >= 0:
                        break
                pos = (pos + 1) & tmask
            if j < 0:  # the union of the open targets' closures, sorted, no repeats
                u = uni0
                for a in range(act0, act0 + n_act):
                    y = scratch[a]
                    for i in range(nf[y, _CL_LO], nf[y, _CL_HI]):
                        scratch[u] = cl[i]
                        u += 1
                scratch[uni0:u].sort()
                w = uni0
                for i in range(uni0, u):
                    if w == uni0 or scratch[i] != scratch[w - 1]:
                        scratch[w] = scratch[i]
                        w += 1
                j = _intern(scratch, uni0, w, df, sub, table, counts)
                if j >= 0:  # remember the target set (pos: the free slot found)
                    k = counts[_N_T]
                    ti = counts[_N_TITEMS]
                    if k >= tsets.shape[0] or 2 * (k + 1) > ttable.shape[0]:
                        j = -_FULL_T
                    elif ti + n_act > titems.shape[0]:
                        counts[_NEED] = ti + n_act
                        j = -_FULL_TITEMS
                    else:
                        titems[ti : ti + n_act] = scratch[act0 : act0 + n_act]
                        tsets[k, _T_LO], tsets[k, _T_HI], tsets[k, _T_STATE] = ti, ti + n_act, j
                        ttable[pos] = k
                        counts[_N_T] = k + 1
                        counts[_N_TITEMS] = ti + n_act
        if j < 0:
            for a in range(act0, act0 + n_act):  # leave the counters at zero
                cnt[scratch[a]] = 0
            return -j
        for c in range(at, nxt):
            scratch[row0 + c] = j
    for c in range(n_classes):
        trans[d, c] = scratch[row0 + c]
    return _DONE


@njit(cache=True, nogil=True)
def _rows(first, start, nf, ep, cl, mv, df, sub, table, trans, counts, scratch, cnt, seen, mark, tsets, titems,
          ttable):
    """The rows of the states from ``first`` on, as they are made (state 0: the
    closure of ``start``): ``(outcome, the state to go on from)``."""
    if counts[_N_DFA] == 0:
        j = _state_of(start, nf, ep, cl, df, sub, table, counts, seen, mark)
        if j < 0:
            return -j, 0
    d = first
    while d < counts[_N_DFA]:
        outcome = _row(d, nf, ep, cl, mv, df, sub, table, trans, counts, scratch, cnt, seen, mark, tsets, titems,
                       ttable)
        if outcome != _DONE:
            return outcome, d
        d += 1
    return _DONE, d


def subset_table(nfa, start: int, final: int, classes: np.ndarray | None, limit: int):
    """``fsm.dfa.subset_table`` (one final state): ``(transitions, byte classes,
    accepting)``; the NFA must have no deferred fragments."""
    counts, eps, moves = nfa.flat()
    if classes is None:
        classes = nfa_byte_classes(nfa, moves)
    n = len(nfa)
    nf = np.full((n, 8), -1, dtype=np.int64)
    ends = np.cumsum(counts, axis=0)
    nf[:, _EP_LO], nf[:, _EP_HI] = ends[:, 0] - counts[:, 0], ends[:, 0]
    nf[:, _MV_LO], nf[:, _MV_HI] = ends[:, 1] - counts[:, 1], ends[:, 1]
    nf[:, _MOVES] = counts[:, 1] > 0
    mv = np.stack([classes[moves[:, 0]], classes[moves[:, 1]], moves[:, 2]], axis=1).astype(np.int64)
    n_classes = int(classes[-1]) + 1
    size = 64
    df = np.zeros((size, 3), dtype=np.int64)
    trans = np.full((size, n_classes), -1, dtype=np.int32)
    table = np.full(2 * size, -1, dtype=np.int64)
    cl, sub, scratch, titems = (np.zeros(1024, dtype=np.int64) for _ in range(4))
    tsets = np.zeros((size, 3), dtype=np.int64)
    ttable = np.full(2 * size, -1, dtype=np.int64)
    cnt, seen, mark = (np.zeros(max(n, 1), dtype=np.int64) for _ in range(3))
    state = np.array([0, 0, 0, final, limit, 0, 0, 0, 0], dtype=np.int64)
    d = 0
    while True:
        outcome, d = _rows(d, start, nf, eps, cl, mv, df, sub, table, trans, state, scratch, cnt, seen, mark, tsets,
                           titems, ttable)
        if outcome == _DONE:
            break
        if outcome == _TOO_LARGE:
            raise RegexTooLargeError(f"pattern needs more than {limit} DFA states")
        if outcome == _FULL_DFA:
            df = _grown(df, 2 * len(df), 0)
            trans = _grown(trans, 2 * len(trans), -1)
        elif outcome == _FULL_TABLE:
            table = np.full(2 * len(table), -1, dtype=np.int64)
            _rehash(df, sub, int(state[_N_DFA]), table)
        elif outcome == _FULL_T:
            tsets = _grown(tsets, 2 * len(tsets), 0)
            ttable = np.full(2 * len(ttable), -1, dtype=np.int64)
            _rehash(tsets, titems, int(state[_N_T]), ttable)
        else:
            need = int(state[_NEED])
            if outcome == _FULL_SUB:
                sub = _grown(sub, max(2 * len(sub), need), 0)
            elif outcome == _FULL_CL:
                cl = _grown(cl, max(2 * len(cl), need), 0)
            elif outcome == _FULL_TITEMS:
                titems = _grown(titems, max(2 * len(titems), need), 0)
            else:
                scratch = np.zeros(max(2 * len(scratch), need), dtype=np.int64)
    n_dfa = int(state[_N_DFA])
    return trans[:n_dfa], classes, df[:n_dfa, _ACCEPT].astype(bool)


def _grown(a: np.ndarray, size: int, fill: int) -> np.ndarray:
    """``a`` with room for ``size`` rows (the new ones ``fill``)."""
    grown = np.full((size, *a.shape[1:]), fill, dtype=a.dtype)
    grown[: len(a)] = a
    return grown
