"""``fsm.dfa.subset_table`` compiled with numba, and ``fsm.lazy.LazyDFA``'s rows one
at a time (``LazySubsets``; imported only where numba is installed: the `fast` extra).

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

Lazily, a closure that meets a deferred fragment stops (``_MEETS_PENDING``) before
the row makes any state; Python builds the fragment and ``LazySubsets.add_states``
appends its states to the arrays (the fragment's start state gets its epsilon
moves a new slice at the end), and the row is asked for again. A copy of a kept
fragment (``NFA.paste_pending``) comes from the template's arrays instead
(``LazySubsets.paste``), without Python lists: an open value's copy (~100 states)
costs ~18 µs so, where pasting lists and reading them back cost ~75 µs (more when
the new tuples set off a garbage collection). A one-state row
costs ~7 µs in Python and ~2 µs compiled, the call included: on 300 MaskBench
schemas stepped through every instance, mask time summed 7.42 -> 6.26 s and p95
262 -> 197 µs (interleaved in one process).

A compiled walk pastes such copies itself (``paste_here``) where Python allowed
it ahead (``allow_paste``: a template made, its holes' templates in slots filled
as they are made), and logs them; Python makes the NFA's side of them
(``NFA.paste_pending``) only before it next builds on the NFA
(``LazyDFA._replay_pastes``). A walk that met an open value had gone back to
Python for it: a round more and the copy taken in, ~40 µs, plus ~20 µs of lists.
"""

from __future__ import annotations

from itertools import chain

import numpy as np
from numba import njit

from guided.errors import RegexTooLargeError
from guided.fsm.dfa import nfa_byte_classes
from guided.fsm.nfa import MAX_NFA_STATES, PastedOnce, pastable

# Columns per NFA state: its closure's slice of ``cl`` (-1: not known yet), its moves'
# slice of ``mv`` (class intervals), its epsilon moves' slice of ``ep``, the DFA state
# its closure alone is (-1: none yet), whether it has byte moves, whether it starts a
# deferred fragment not built yet (lazy NFAs: ``LazySubsets``), its ``NFA.rooms`` (0: none);
# for a deferred start whose copy a walk may paste itself (``LazySubsets.allow_paste``),
# its template's number plus one (0: none) and the fragment's end.
_CL_LO, _CL_HI, _MV_LO, _MV_HI, _EP_LO, _EP_HI, _SINGLE, _MOVES, _PENDING, _ROOM, _TPL, _LINK = range(12)
# Columns per DFA state: its subset's slice of ``sub``, whether it accepts (the
# slice first, as for target sets: ``_rehash`` serves both).
_SUB_LO, _SUB_HI, _ACCEPT = range(3)
# Columns per remembered target set (``sweep_row``'s ``known``): its slice of
# ``titems``, its DFA state.
_T_LO, _T_HI, _T_STATE = range(3)
# Slots of ``counts``; the last ones are ``LazySubsets``': the NFA's states, the used
# part of ``ep`` and ``mv``, the NFA size below which a walk may paste (0: it may not;
# ``LazyDFA.growth_limit``), the pastes logged (``paste_here``).
(_N_DFA, _N_SUB, _N_CL, _FINAL, _MAX, _NEED, _STAMP, _N_T, _N_TITEMS,
 _N_NFA, _N_EP, _N_MV, _GROWTH, _N_PASTED) = range(14)
# Columns of a template's entry (``LazySubsets.allow_paste``): its slices of the
# packed states, of the holes and of the rooms, its size, start and end.
(_P_LO, _P_HI, _H_LO, _H_HI, _R_LO, _R_HI, _P_N, _P_START, _P_END) = range(9)
#: The most copies walks paste before Python follows (``LazySubsets.pasted``).
PASTE_LOG = 256
#: A lazy construction's buffers start with room for this many DFA states, and
#: this many subset (closure, scratch) entries. Each growth while decoding is a
#: round trip from a walk to Python and back (~40-80 µs); from 64 states and 1,024
#: entries, a third of the masks over 200 µs on MaskBench grew a buffer. The room
#: costs a fill of states x classes int32 once (~0.2 MB at 100 classes) and the
#: zeroed entries, which are mapped only as they are touched.
LAZY_STATES = 512
LAZY_ITEMS = 16_384
# Outcomes: done, or the buffer named must grow (``counts[_NEED]``: to how many), or a
# closure met a deferred fragment (``counts[_NEED]``: its start) that must be built.
(_DONE, _FULL_DFA, _FULL_SUB, _FULL_TABLE, _FULL_SCRATCH, _FULL_CL, _FULL_T, _FULL_TITEMS,
 _TOO_LARGE, _MEETS_PENDING) = range(10)
# A sweep event: class << 42 | opens << 41 | NFA target.
_SHIFT, _OPEN, _TARGET = 42, 1 << 41, (1 << 41) - 1


# The helpers of ``_row`` are inlined (``inline="always"``): each call passed its
# arrays reference-counted one by one, per target of every row (rows ~5% faster).
@njit(cache=True, nogil=True, inline="always")
def _closure(t, nf, ep, cl, counts, seen, mark):
    """Record the closure of NFA state ``t`` in ``cl``: the states epsilon moves reach
    from it that have byte moves, or are the final state, sorted. Nothing is recorded
    when it meets a deferred fragment: that fragment must be built first."""
    stamp = counts[_STAMP] + 1
    counts[_STAMP] = stamp
    seen[0] = t
    mark[t] = stamp
    n_seen = 1
    i = 0
    while i < n_seen:
        x = seen[i]
        i += 1
        if nf[x, _PENDING] > 0:
            counts[_NEED] = x
            return _MEETS_PENDING
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


@njit(cache=True, nogil=True, inline="always")
def _mix(t):
    """splitmix64's finaliser: a set's hash is the sum of its members' (so the sweep
    keeps its open targets' hash as they open and close)."""
    z = np.uint64(t) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True, nogil=True, inline="always")
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


@njit(cache=True, nogil=True, inline="always")
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
    n_classes = int(classes[-1]) + 1
    nf, ep, mv = nfa_arrays(counts, eps, moves, classes)
    b = Buffers(nf, ep, mv, n_classes, final, limit, -1, f"pattern needs more than {limit} DFA states")
    d = 0
    while True:
        outcome, d = _rows(d, start, *b.kernel_args())
        if outcome == _DONE:
            break
        b.grow(outcome)
    n_dfa = b.num_states
    return b.trans[:n_dfa], classes, b.df[:n_dfa, _ACCEPT].astype(bool)


def nfa_arrays(counts, eps, moves, classes, live=None, room: int = 0):
    """The per-state table ``nf`` and the epsilon and move arrays of ``NFA.flat``'s
    states, for the kernels (``nf`` with ``room`` rows more, for states to come).
    With ``live`` (bool per NFA state), moves into dead states are left out
    (``LazyDFA`` works on the NFA pruned of them); a state keeps counting as having
    byte moves, as ``LazyDFA._closure`` counts it."""
    n = len(counts)
    if live is not None:
        own = np.arange(n)
        keep = live[eps]
        e_counts = np.bincount(np.repeat(own, counts[:, 0])[keep], minlength=n)
        eps = eps[keep]
        keep = live[moves[:, 2]]
        m_counts = np.bincount(np.repeat(own, counts[:, 1])[keep], minlength=n)
        moves = moves[keep]
    else:
        e_counts, m_counts = counts[:, 0], counts[:, 1]
    nf = np.zeros((n + room, 12), dtype=np.int64)  # (the room's pages stay untouched until used)
    nf[:n, :_PENDING] = -1
    nf[:n, _EP_HI] = np.cumsum(e_counts)
    nf[:n, _EP_LO] = nf[:n, _EP_HI] - e_counts
    nf[:n, _MV_HI] = np.cumsum(m_counts)
    nf[:n, _MV_LO] = nf[:n, _MV_HI] - m_counts
    nf[:n, _MOVES] = counts[:, 1] > 0
    mv = np.stack([classes[moves[:, 0]], classes[moves[:, 1]], moves[:, 2]], axis=1).astype(np.int64)
    return nf, eps.astype(np.int64, copy=False), mv


@njit(cache=True, nogil=True)
def members_or(df, sub, values, first, last, out):
    """For DFA states ``first`` to ``last - 1``: ``out[i, d]``, the OR of ``values[i]``
    (int64 bit sets per NFA state) over state d's NFA states."""
    for d in range(first, last):
        for i in range(values.shape[0]):
            acc = 0
            for j in range(df[d, _SUB_LO], df[d, _SUB_HI]):
                acc |= values[i, sub[j]]
            out[i, d] = acc


class Buffers:
    """The construction's arrays (the NFA's, the DFA's so far, scratch), grown when a
    kernel says one is full. ``empty_row``: what a row holds before it is built."""

    def __init__(self, nf, ep, mv, n_classes: int, final: int, limit: int, empty_row: int, too_large: str,
                 size: int = 64, items: int = 1024):
        self.nf, self.ep, self.mv = nf, ep, mv
        self.empty_row, self.too_large = empty_row, too_large
        self.df = np.zeros((size, 3), dtype=np.int64)
        self.trans = np.full((size, n_classes), empty_row, dtype=np.int32)
        self.table = np.full(2 * size, -1, dtype=np.int64)
        self.cl, self.sub, self.scratch, self.titems = (np.zeros(items, dtype=np.int64) for _ in range(4))
        self.tsets = np.zeros((size, 3), dtype=np.int64)
        self.ttable = np.full(2 * size, -1, dtype=np.int64)
        n = max(len(nf), 1)
        self.cnt, self.seen, self.mark = (np.zeros(n, dtype=np.int64) for _ in range(3))
        self.counts = np.zeros(14, dtype=np.int64)
        self.counts[_FINAL], self.counts[_MAX] = final, limit
        self.px = None  # what paste_here reads: a LazySubsets' (``_set_px``)

    @property
    def num_states(self) -> int:
        return int(self.counts[_N_DFA])

    def kernel_args(self) -> tuple:
        """``_rows``' and ``_row``'s arguments after the first (the state)."""
        return (self.nf, self.ep, self.cl, self.mv, self.df, self.sub, self.table, self.trans, self.counts,
                self.scratch, self.cnt, self.seen, self.mark, self.tsets, self.titems, self.ttable)

    def builder_args(self) -> tuple:
        """``kernel_args`` but ``trans``, as one tuple (``fsm.kernels.narrow`` builds
        rows with them; ``px`` is passed apart: a tuple passed to a kernel's helpers
        has each of its arrays reference-counted at each call)."""
        return (self.nf, self.ep, self.cl, self.mv, self.df, self.sub, self.table, self.counts, self.scratch,
                self.cnt, self.seen, self.mark, self.tsets, self.titems, self.ttable)

    def grow(self, outcome: int) -> None:
        """Make room for what ``outcome`` (``_FULL_*``) says is missing."""
        if outcome == _TOO_LARGE:
            raise RegexTooLargeError(self.too_large)
        if outcome == _FULL_DFA:
            self.df = _grown(self.df, 2 * len(self.df), 0)
            self.trans = _grown(self.trans, 2 * len(self.trans), self.empty_row)
            # The hash table would be full at the next state: grown now, not after
            # one more kernel call that says so (a round trip from a walk).
            if 2 * (self.num_states + 1) <= len(self.table):
                return
            outcome = _FULL_TABLE
        if outcome == _FULL_TABLE:
            self.table = np.full(2 * len(self.table), -1, dtype=np.int64)
            _rehash(self.df, self.sub, self.num_states, self.table)
        elif outcome == _FULL_T:
            self.tsets = _grown(self.tsets, 2 * len(self.tsets), 0)
            self.ttable = np.full(2 * len(self.ttable), -1, dtype=np.int64)
            _rehash(self.tsets, self.titems, int(self.counts[_N_T]), self.ttable)
        else:
            need = int(self.counts[_NEED])
            if outcome == _FULL_SUB:
                self.sub = _grown(self.sub, max(2 * len(self.sub), need), 0)
            elif outcome == _FULL_CL:
                self.cl = _grown(self.cl, max(2 * len(self.cl), need), 0)
            elif outcome == _FULL_TITEMS:
                self.titems = _grown(self.titems, max(2 * len(self.titems), need), 0)
            elif outcome == _FULL_SCRATCH:
                self.scratch = np.zeros(max(2 * len(self.scratch), need), dtype=np.int64)
            else:
                raise AssertionError(f"unexpected outcome {outcome}")


class LazySubsets:
    """``fsm.lazy.LazyDFA``'s subset construction, one row at a time, with the
    kernels above: the NFA's arrays grow as its deferred fragments are built.

    ``row(d)`` builds DFA state ``d``'s row into ``trans`` (``d = -1``: makes the
    start state, DFA state 0) and returns -1, or the start of a deferred fragment a
    closure met: the caller builds it (``NFA.materialize``, extending ``live``),
    calls ``add_states`` and asks again. The states are those ``LazyDFA``'s Python
    construction makes, numbered alike (tests compare the two).

    Example::

        >>> fast = LazySubsets(nfa, start, final, live, classes, class_starts, nfa.flat(), limit)
        >>> fast.row(-1), fast.row(0)       # the start state, then its row
        (-1, -1)
    """

    def __init__(self, nfa, start: int, final: int, live: list[bool], classes: np.ndarray, class_starts: list[bool],
                 flat, limit: int):
        counts, eps, moves = flat
        self.start = start
        self.classes = classes.astype(np.int64)
        # Room for the states deferred fragments will add: as many again (a growth
        # copies every array while decoding, ~0.2 ms a time on 1,000 MaskBench
        # schemas, where room for an eighth more grew ~550 times). The arrays are
        # zeroed, and zeroed pages are mapped only as they are touched: the room
        # costs address space, not memory.
        room = max(4096, len(live))
        self.live = np.zeros(len(live) + room, dtype=bool)
        self.live[: len(live)] = live
        # byte b opens a class (256 counts as one): ranges built later must keep to them
        self.class_starts = np.array(class_starts, dtype=bool)
        nf, ep, mv = nfa_arrays(counts, eps, moves, self.classes, self.live[: len(live)], room)
        nf[list(nfa.pending), _PENDING] = 1
        if nfa.rooms:
            nf[list(nfa.rooms), _ROOM] = list(nfa.rooms.values())
        n_ep, n_mv = len(ep), len(mv)
        ep, mv = _grown(ep, len(ep) + 4 * room, 0), _grown(mv, len(mv) + 2 * room, 0)
        self.b = Buffers(nf, ep, mv, int(classes[-1]) + 1, final, limit, -2,
                         f"automaton needs more than {limit} states", LAZY_STATES, LAZY_ITEMS)
        counts = self.b.counts
        counts[_N_NFA], counts[_N_EP], counts[_N_MV] = len(live), n_ep, n_mv
        # Templates a walk may paste copies of (``allow_paste``): per template its
        # entry (``_P_LO`` ...), and its states, holes and rooms in shared arrays.
        self._tpl_ids: dict[int, int] = {}
        self._tpl_kept: list = []  # (the ids above stay theirs)
        self._meta = np.zeros((4, 9), dtype=np.int64)
        self._data = np.zeros(1024, dtype=np.int64)
        self._holes = np.zeros((16, 3), dtype=np.int64)  # (start, end, its slot or -1)
        self._slot_ids: dict[tuple[int, object], int] = {}  # (id(templates), key): _slot
        self._slot_tid = np.full(16, -1, dtype=np.int64)
        self._rooms = np.zeros((16, 2), dtype=np.int64)
        self._used = [0, 0, 0]  # of _data, _holes, _rooms
        self._data_at: dict[int, list[int]] = {}  # id(packed states): their slice of _data
        # paste_here's: (deferred start, first state), till Python follows (a full
        # log stops walks' pastes: they go to Python, which follows first)
        self._log = np.zeros((PASTE_LOG, 2), dtype=np.int64)
        self._growth_limit: int | None = -1  # limit_pastes' last (-1: none yet: walks may not paste)
        self._set_px()

    def accepting(self) -> np.ndarray:
        """Whether each DFA state made so far accepts."""
        return self.b.df[: self.b.num_states, _ACCEPT].astype(bool)

    def is_accepting(self, d: int) -> bool:
        return bool(self.b.df[d, _ACCEPT])

    def row(self, d: int) -> int:
        b = self.b
        while True:
            if d < 0:
                j = _state_of(self.start, b.nf, b.ep, b.cl, b.df, b.sub, b.table, b.counts, b.seen, b.mark)
                outcome = _DONE if j >= 0 else -j
            else:
                outcome = _row(d, *b.kernel_args())
            if outcome == _DONE:
                return -1
            if outcome == _MEETS_PENDING:
                return int(b.counts[_NEED])
            b.grow(outcome)

    def closure_state(self, t: int) -> tuple[int, int]:
        """``(the DFA state of NFA state t's closure, -1)``, made if new; or ``(-1,
        the start of a deferred fragment the closure meets)``: the caller builds it,
        calls ``add_states`` and asks again (as for ``row``). Several starts may share
        one construction (a grammar rule's points)."""
        b = self.b
        while True:
            j = _state_of(t, b.nf, b.ep, b.cl, b.df, b.sub, b.table, b.counts, b.seen, b.mark)
            if j >= 0:
                return j, -1
            if -j == _MEETS_PENDING:
                return -1, int(b.counts[_NEED])
            b.grow(-j)

    def members(self, d: int) -> np.ndarray:
        """DFA state ``d``'s NFA states."""
        b = self.b
        return b.sub[b.df[d, _SUB_LO] : b.df[d, _SUB_HI]]

    def members_or(self, values: np.ndarray, out: np.ndarray, first: int) -> None:
        """``members_or`` of the DFA states from ``first`` on (``out`` holds them all)."""
        b = self.b
        members_or(b.df, b.sub, values, first, b.num_states, out)

    def keep_in_closures(self, states) -> None:
        """Keep ``states`` in the closures that reach them, as states with byte moves
        and the final state are (a grammar rule's ends)."""
        self.b.nf[list(states), _MOVES] = 1

    def add_states(self, nfa, first: int, built: int) -> None:
        """Take in the NFA states numbered from ``first`` on, made by building the
        deferred fragment that starts at ``built`` (which now has an epsilon move
        into them): their liveness, then their arrays, in one kernel call.

        Their lists are read into one array by one ``fromiter`` over C-level
        iterators (``_take_in`` unpacks it): a fragment is ~100 states, where the
        fixed cost of each numpy call, cold between decoding steps, is what counts
        (``NFA.flat`` and a few small arrays cost ~130 µs a fragment)."""
        n = len(nfa)
        eps, edges = nfa.eps[first:], nfa.edges[first:]
        new_pending = []  # deferred fragments the build made: the newest starts
        for s in reversed(nfa.pending):
            if s < first:
                break
            new_pending.append((s, nfa.pending[s][1]))
        built_eps = nfa.eps[built]
        packed = np.fromiter(chain(map(len, eps), map(len, edges), chain.from_iterable(eps),
                                   chain.from_iterable(chain.from_iterable(edges)), built_eps,
                                   chain.from_iterable(new_pending)), dtype=np.int64)
        self._take(first, n - first, packed, len(built_eps), len(new_pending), built, nfa._rooms_from(first))

    def paste(self, template, first: int, built: int, built_eps: list[int], end: int, rooms) -> None:
        """``add_states`` for a copy of ``template`` numbered from ``first`` on that
        ``NFA.paste_pending`` made without Python lists: its states from the
        template's arrays, its end linked to ``end``, its ``rooms`` ``(state,
        room)``; ``built``'s epsilon moves are ``built_eps``. About a quarter of the
        cost of pasting lists and reading them."""
        rel, holes = template.packed()
        n = template.n
        built_eps = np.array(built_eps, dtype=np.int64)
        self._make_room(first + n, len(rel) + 1 + len(built_eps) + 2 * len(holes))
        b = self.b
        # One kernel call (``_pasted`` then ``_take_in``): in the masks that paste,
        # each call from Python cost ~5-10 µs more than its work.
        got = _paste_in(rel, n, first, template.end, end, built_eps, holes, built, self.classes, self.class_starts,
                        self.live, b.nf, b.ep, b.counts[_N_EP], b.mv, b.counts[_N_MV])
        self._took(got, first + n, rooms)

    def _take(self, first: int, n_new: int, packed: np.ndarray, n_built: int, n_pending: int, built: int,
              rooms) -> None:
        """Make room for ``n_new`` states from ``first`` on, take them in (``_take_in``)
        and note their ``rooms`` (``(state, room)`` pairs)."""
        self._make_room(first + n_new, len(packed))
        b = self.b
        got = _take_in(first, n_new, packed, n_built, n_pending, built, self.classes, self.class_starts, self.live,
                       b.nf, b.ep, b.counts[_N_EP], b.mv, b.counts[_N_MV])
        self._took(got, first + n_new, rooms)

    def _make_room(self, n: int, packed_size: int) -> None:
        """Room for NFA states up to ``n`` and for the moves of a ``_take_in``
        ``packed`` of ``packed_size`` entries (at most that many of each kind)."""
        b = self.b
        if n > len(b.nf):
            size = max(n, 2 * len(b.nf))
            b.nf = _grown(b.nf, size, 0)
            self.live = _grown(self.live, size, False)
            b.cnt, b.seen, b.mark = (_grown(a, size, 0) for a in (b.cnt, b.seen, b.mark))
            self._set_px()
        n_ep, n_mv = int(b.counts[_N_EP]), int(b.counts[_N_MV])
        if n_ep + packed_size > len(b.ep):
            b.ep = _grown(b.ep, max(2 * len(b.ep), n_ep + packed_size), 0)
        if n_mv + packed_size // 3 > len(b.mv):
            b.mv = _grown(b.mv, max(2 * len(b.mv), n_mv + packed_size // 3), 0)

    def _took(self, got: np.ndarray, n: int, rooms) -> None:
        """After ``_take_in``: its new move counts, or its error; the NFA's size
        ``n``; the ``rooms``."""
        if got[0] < 0:
            raise AssertionError(f"deferred fragment uses byte range {got[1]}-{got[2]} missing from its cuts")
        b = self.b
        b.counts[_N_EP], b.counts[_N_MV], b.counts[_N_NFA] = got[0], got[1], n
        for s, room in rooms:
            b.nf[s, _ROOM] = room

    # -- pastes made by a walk ----------------------------------------------------------

    def allow_paste(self, s: int, template, end: int) -> None:
        """Let a walk paste the copy of ``template`` that deferred start ``s`` (its
        fragment's end ``end``) is to be, itself (``paste_here``), as ``paste`` would."""
        if self.b.nf[s, _TPL]:  # (a walk's copy's hole: the walk allowed it)
            return
        self.b.nf[s, _TPL], self.b.nf[s, _LINK] = self._template_id(template) + 1, end

    def template_made(self, build) -> None:
        """``build``'s template was just made: the holes of copies pasted from now
        on that it builds may be pasted too."""
        slot = self._slot_ids.get((id(build.templates), build.key))
        if slot is not None and self._slot_tid[slot] < 0:
            self._slot_tid[slot] = self._template_id(build.templates[build.key])

    def limit_pastes(self, growth_limit: int | None) -> None:
        """Let walks paste while the NFA has fewer than ``growth_limit`` states
        (``LazyDFA.growth_limit``; called before each round of a walk)."""
        if growth_limit != self._growth_limit:
            self._growth_limit = growth_limit
            self.b.counts[_GROWTH] = MAX_NFA_STATES if growth_limit is None else growth_limit

    @property
    def num_nfa_states(self) -> int:
        """The NFA's states, those walks pasted included (``pasted``)."""
        return int(self.b.counts[_N_NFA])

    def pasted(self) -> list[tuple[int, int]]:
        """The pastes walks made since the last call, in order: ``(deferred start,
        first state of the copy)``; the NFA's lists must follow (``NFA.paste_pending``)
        before it is built on."""
        counts = self.b.counts
        k = int(counts[_N_PASTED])
        if not k:
            return []
        counts[_N_PASTED] = 0
        return [tuple(x) for x in self._log[:k].tolist()]

    def _template_id(self, template, ahead: bool = True) -> int:
        tid = self._tpl_ids.get(id(template))
        return self._add_template(template, ahead) if tid is None else tid

    def _slot(self, build, ahead: bool) -> int:
        """The slot that holds the number of ``build``'s template once it is made
        (-1 in the slot till then; a slot of -1: never pasted by a walk). With
        ``ahead``, a template its builder makes as arrays (``PastedOnce.make``: an
        open value one level deeper, a few µs) is made now."""
        if type(build) is not PastedOnce:
            return -1
        key = (id(build.templates), build.key)
        slot = self._slot_ids.get(key)
        if slot is None:
            slot = self._slot_ids[key] = len(self._slot_ids)
            if slot == len(self._slot_tid):
                self._slot_tid = np.concatenate([self._slot_tid, np.full(slot, -1, dtype=np.int64)])
                self._set_px()
        if self._slot_tid[slot] < 0:
            made = pastable(build, ahead)
            if made is not None:
                self._slot_tid[slot] = self._template_id(made, False)
        return slot

    def _add_template(self, template, ahead: bool) -> int:
        """Enter ``template`` for ``paste_here``, and the slots of its holes'
        templates (a copy's holes may be pasted in the same walk; with ``ahead``,
        those made as arrays are made now, one level down); its number."""
        tid = len(self._tpl_kept)
        self._tpl_ids[id(template)] = tid
        self._tpl_kept.append(template)
        if tid == len(self._meta):
            self._meta = _grown(self._meta, 2 * tid, 0)
        rel, holes = template.packed()
        rooms = np.array(template.rooms, dtype=np.int64).reshape(-1, 2)
        slots = [self._slot(build, ahead) for _, _, build in template.holes]
        holes = np.concatenate([holes, np.array(slots, dtype=np.int64).reshape(-1, 1)], axis=1)
        entry = []
        for i, (part, name) in enumerate(((rel, "_data"), (holes, "_holes"), (rooms, "_rooms"))):
            if i == 0 and id(rel) in self._data_at:  # (open values' levels share their states)
                entry += self._data_at[id(rel)]
                continue
            lo = self._used[i]
            hi = self._used[i] = lo + len(part)
            kept = getattr(self, name)
            if hi > len(kept):
                kept = _grown(kept, max(hi, 2 * len(kept)), 0)
                setattr(self, name, kept)
            kept[lo:hi] = part
            entry += [lo, hi]
            if i == 0:
                self._data_at[id(rel)] = [lo, hi]
        self._meta[tid] = entry + [template.n, template.start, template.end]
        self._set_px()
        return tid

    def _set_px(self) -> None:
        """``Buffers.px``, after one of its arrays was replaced."""
        self.b.px = (self._meta, self._data, self._holes, self._rooms, self._slot_tid, self.live, self.classes,
                     self.class_starts, self._log)

    def member_room(self, d: int) -> int:
        """The largest ``NFA.rooms`` among DFA state ``d``'s NFA states (0: none)."""
        b = self.b
        return int(_member_room(d, b.nf, b.df, b.sub))


@njit(cache=True, nogil=True)
def _member_room(s, nf, df, sub):
    """The largest ``NFA.rooms`` among DFA state ``s``'s NFA states (0: none)."""
    best = 0
    for p in range(df[s, _SUB_LO], df[s, _SUB_HI]):
        r = nf[sub[p], _ROOM]
        if r > best:
            best = r
    return best


@njit(cache=True, nogil=True)
def paste_here(x, nf, ep, mv, counts, px):
    """``LazySubsets.paste`` of the deferred fragment that starts at ``x``, within a
    compiled walk, where ``allow_paste`` allowed it and the arrays have room; its
    ``(x, first state)`` logged for Python to follow (``LazySubsets.pasted``). False
    where it cannot: the walk asks Python, as for any deferred fragment.

    A walk that met a copy of an open value or an other-key trie went back to
    Python for it (~40 µs a time, a round of the walk included, besides the copy)."""
    meta, data, holes_all, rooms, slot_tid, live, classes, class_starts, log = px
    tid = nf[x, _TPL] - 1
    base = counts[_N_NFA]
    k = counts[_N_PASTED]
    if tid < 0 or base >= counts[_GROWTH] or k >= log.shape[0]:
        return False
    n = meta[tid, _P_N]
    rel = data[meta[tid, _P_LO] : meta[tid, _P_HI]]
    holes = holes_all[meta[tid, _H_LO] : meta[tid, _H_HI]]
    n_old = nf[x, _EP_HI] - nf[x, _EP_LO]
    size = len(rel) + 2 + n_old + 2 * len(holes)  # (``LazySubsets._make_room``'s bound)
    n_ep, n_mv = counts[_N_EP], counts[_N_MV]
    if (base + n > MAX_NFA_STATES or base + n > nf.shape[0] or base + n > live.shape[0]
            or n_ep + size > ep.shape[0] or n_mv + size // 3 > mv.shape[0]):
        return False
    built_eps = np.empty(n_old + 1, dtype=np.int64)
    built_eps[:n_old] = ep[nf[x, _EP_LO] : nf[x, _EP_HI]]
    built_eps[n_old] = base + meta[tid, _P_START]
    got = _paste_in(rel, n, base, meta[tid, _P_END], nf[x, _LINK], built_eps, holes, x, classes, class_starts, live,
                    nf, ep, n_ep, mv, n_mv)
    if got[0] < 0:  # (Python raises it)
        return False
    for r in range(meta[tid, _R_LO], meta[tid, _R_HI]):
        nf[base + rooms[r, 0], _ROOM] = rooms[r, 1]
    for h in range(len(holes)):  # (``allow_paste``)
        hole_tid = slot_tid[holes[h, 2]] if holes[h, 2] >= 0 else -1
        if hole_tid >= 0:
            nf[base + holes[h, 0], _TPL], nf[base + holes[h, 0], _LINK] = hole_tid + 1, base + holes[h, 1]
    nf[x, _TPL] = 0
    counts[_N_EP], counts[_N_MV], counts[_N_NFA] = got[0], got[1], base + n
    log[k, 0], log[k, 1] = x, base
    counts[_N_PASTED] = k + 1
    return True


@njit(cache=True, nogil=True)
def _take_in(first, n, packed, n_built, n_pending, built, classes, class_starts, live, nf, ep, n_ep, mv, n_mv):
    """``LazySubsets.add_states``' work: the new states' liveness (``fsm.lazy.
    _co_reachable_new``: a new state is live when a move, or its deferred fragment,
    leads to a live state), their ``nf`` rows and live moves appended to ``ep`` and
    ``mv`` (room made by the caller), ``built``'s epsilon moves given a new slice.

    ``packed``: the ``n`` states' epsilon-move counts, byte-move counts, epsilon
    targets, byte moves ``(lo, hi, target)``, then ``built``'s epsilon targets
    (``n_built``) and the new deferred fragments' ``(start, end)`` (``n_pending``).
    Returns the new ``(n_ep, n_mv, 0)``, or ``(-1, lo, hi)`` for a byte range that
    cuts through a byte class (fixed before the fragment was built, from its declared
    cuts: such a range would make the automaton wrong)."""
    out = np.zeros(3, dtype=np.int64)
    e_count = packed[0:n]
    m_count = packed[n : 2 * n]
    n_e = 0
    n_m = 0
    for i in range(n):
        n_e += e_count[i]
        n_m += m_count[i]
    eps = packed[2 * n : 2 * n + n_e]
    at = 2 * n + n_e
    moves = packed[at : at + 3 * n_m].reshape((n_m, 3))
    at += 3 * n_m
    built_eps = packed[at : at + n_built]
    at += n_built
    pending = packed[at : at + 2 * n_pending].reshape((n_pending, 2))
    for k in range(n_m):
        if not (class_starts[moves[k, 0]] and class_starts[moves[k, 1] + 1]):
            out[0], out[1], out[2] = -1, moves[k, 0], moves[k, 1]
            return out
    end_of = np.full(n, -1, dtype=np.int64)  # a new deferred start: its fragment's end
    for k in range(n_pending):
        end_of[pending[k, 0] - first] = pending[k, 1]
    # Predecessors among the new states (counted, then listed), and the new states
    # with a move into an old live state: where the backward search starts.
    n_pred = np.zeros(n + 1, dtype=np.int64)
    pred = np.empty(n_e + n_m + n_pending, dtype=np.int64)
    stack = np.empty(n, dtype=np.int64)
    sp = 0
    for phase in range(2):
        filled = np.zeros(n, dtype=np.int64)
        if phase == 1:
            for i in range(n):
                n_pred[i + 1] += n_pred[i]
        e = m = 0
        for i in range(n):
            found = False
            for k in range(e_count[i] + m_count[i] + 1):
                # epsilon targets, then byte-move targets, then the fragment's end
                if k < e_count[i]:
                    t = eps[e + k]
                elif k < e_count[i] + m_count[i]:
                    t = moves[m + k - e_count[i], 2]
                else:
                    t = end_of[i]
                if t >= first:
                    j = t - first
                    if phase == 0:
                        n_pred[j + 1] += 1
                    else:
                        pred[n_pred[j] + filled[j]] = i
                        filled[j] += 1
                elif t >= 0 and live[t]:
                    found = True
            e += e_count[i]
            m += m_count[i]
            if phase == 1 and found:
                live[first + i] = True
                stack[sp] = i
                sp += 1
    while sp > 0:
        sp -= 1
        i = stack[sp]
        for k in range(n_pred[i], n_pred[i + 1]):
            j = pred[k]
            if not live[first + j]:
                live[first + j] = True
                stack[sp] = j
                sp += 1
    # The new states' rows, their live moves appended.
    e = m = 0
    for i in range(n):
        s = first + i
        nf[s, _CL_LO] = nf[s, _CL_HI] = nf[s, _SINGLE] = -1
        nf[s, _EP_LO] = n_ep
        for k in range(e, e + e_count[i]):
            if live[eps[k]]:
                ep[n_ep] = eps[k]
                n_ep += 1
        nf[s, _EP_HI] = n_ep
        nf[s, _MV_LO] = n_mv
        for k in range(m, m + m_count[i]):
            if live[moves[k, 2]]:
                mv[n_mv, 0] = classes[moves[k, 0]]
                mv[n_mv, 1] = classes[moves[k, 1]]
                mv[n_mv, 2] = moves[k, 2]
                n_mv += 1
        nf[s, _MV_HI] = n_mv
        nf[s, _MOVES] = 1 if m_count[i] > 0 else 0
        nf[s, _PENDING] = 1 if end_of[i] >= 0 else 0
        nf[s, _TPL] = 0
        e += e_count[i]
        m += m_count[i]
    nf[built, _EP_LO] = n_ep
    for k in range(n_built):
        if live[built_eps[k]]:
            ep[n_ep] = built_eps[k]
            n_ep += 1
    nf[built, _EP_HI] = n_ep
    nf[built, _PENDING] = nf[built, _TPL] = 0
    out[0], out[1] = n_ep, n_mv
    return out


@njit(cache=True, nogil=True)
def _paste_in(rel, n, first, end, link, built_eps, holes, built, classes, class_starts, live, nf, ep, n_ep, mv, n_mv):
    """``_take_in`` of a template's copy (``_pasted``), in one call from Python."""
    packed = _pasted(rel, n, first, end, link, built_eps, holes)
    return _take_in(first, n, packed, len(built_eps), len(holes), built, classes, class_starts, live, nf, ep, n_ep,
                    mv, n_mv)


@njit(cache=True, nogil=True)
def _pasted(rel, n, first, end, link, built_eps, holes):
    """``_take_in``'s ``packed`` for a copy of a template numbered from ``first`` on:
    ``rel`` is ``Template.packed``'s (targets counted from 0), the copy's ``end``
    (counted from 0 too) gets ``link`` as its last epsilon move (as
    ``NFA.materialize`` appends it), then ``built_eps`` and the ``holes`` moved."""
    n_e = 0
    n_m = 0
    for i in range(n):
        n_e += rel[i]
        n_m += rel[n + i]
    out = np.empty(2 * n + n_e + 1 + 3 * n_m + len(built_eps) + 2 * len(holes), dtype=np.int64)
    out[: 2 * n] = rel[: 2 * n]
    out[end] += 1
    dst = _copied_moves(rel, n, first, out, 2 * n, end, link, -1)
    for k in range(len(built_eps)):
        out[dst] = built_eps[k]
        dst += 1
    for k in range(len(holes)):
        out[dst] = holes[k, 0] + first
        out[dst + 1] = holes[k, 1] + first
        dst += 2
    return out


@njit(cache=True, nogil=True)
def chunk_packed(rel, m, start, end, chunk):
    """``Template.packed``'s states of a middle chunk of a lazy repetition
    (``fsm.nfa._chunk_template``) from its item's (``rel``: ``m`` states, its
    ``start`` and ``end``): the chunk's start and end, ``chunk`` copies of the item,
    the deferred next chunk's start and end; epsilon moves in the order
    ``NFA._lazy_repeat``'s ``rest`` appends them."""
    n_e = 0
    n_m = 0
    for i in range(m):
        n_e += rel[i]
        n_m += rel[m + i]
    n = 2 + chunk * m + 2
    hole = n - 2
    out = np.zeros(2 * n + 2 + chunk * n_e + 2 * chunk + 3 * chunk * n_m, dtype=np.int64)
    out[0] = 2  # the start: to the end, to the first copy
    for k in range(chunk):
        b = 2 + k * m
        for i in range(m):
            out[b + i] = rel[i]
            out[n + b + i] = rel[m + i]
        out[b + end] += 2 if k < chunk - 1 else 1  # a copy's end: to the end and the next copy, or to the hole
    out[hole + 1] = 1  # the hole's end: to the end
    d = 2 * n
    out[d], out[d + 1] = 1, 2 + start
    d += 2
    for k in range(chunk):
        b = 2 + k * m
        if k < chunk - 1:
            d = _copied_moves(rel, m, b, out, d, end, 1, b + m + start, moves=False)
        else:
            d = _copied_moves(rel, m, b, out, d, end, hole, -1, moves=False)
    out[d] = 1
    d += 1
    for k in range(chunk):
        d = _copied_moves(rel, m, 2 + k * m, out, d, -1, -1, -1, epsilons=False)
    return out[:d]


@njit(cache=True, nogil=True, inline="always")
def _copied_moves(rel, n, shift, out, d, end, extra, extra2, epsilons=True, moves=True):
    """Write a template's epsilon targets then its byte moves (``rel``: ``Template.
    packed``'s, ``n`` states), targets shifted by ``shift``, into ``out`` from ``d``
    on, ``extra`` and ``extra2`` (-1: none) appended to state ``end``'s own
    epsilon targets; only one part where the other is off. The new ``d``."""
    n_e = 0
    n_m = 0
    for i in range(n):
        n_e += rel[i]
        n_m += rel[n + i]
    if epsilons:
        q = 2 * n
        for i in range(n):
            for _ in range(rel[i]):
                out[d] = rel[q] + shift
                d += 1
                q += 1
            if i == end:
                for x in (extra, extra2):
                    if x >= 0:
                        out[d] = x
                        d += 1
    if moves:
        for q in range(2 * n + n_e, 2 * n + n_e + 3 * n_m, 3):
            out[d], out[d + 1], out[d + 2] = rel[q], rel[q + 1], rel[q + 2] + shift
            d += 3
    return d


def _grown(a: np.ndarray, size: int, fill: int) -> np.ndarray:
    """``a`` with room for ``size`` rows (the new ones ``fill``)."""
    if size <= len(a):
        return a
    if fill == 0:  # zeroed pages are mapped as they are touched
        grown = np.zeros((size, *a.shape[1:]), dtype=a.dtype)
    else:  # each element written once (np.full, then the copy, wrote the old part twice)
        grown = np.empty((size, *a.shape[1:]), dtype=a.dtype)
        grown[len(a) :] = fill
    grown[: len(a)] = a
    return grown
