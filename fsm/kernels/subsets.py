"""The subset construction's kernels, over the NFA as arrays: ``fsm.dfa.subset_table``
compiled (``build_rows``), ``fsm.lazy.LazyDFA``'s rows one at a time (``build_row``,
``state_of``) and the lazy NFA's growth (``take_in``, ``paste_in``, ``paste_here``,
``chunk_packed``). Imported only where numba is installed; the Python side (the
arrays, their growth, the templates a walk may paste) is ``fsm.subset_arrays``.

Python twins, and the tests that hold them equal (in ``tests/test_compiled_automata.py``
unless named otherwise):

- ``build_rows``, ``build_row``: ``fsm.dfa.subset_table`` and ``sweep_row``
  (``test_compiled_table_equals_the_python_table``,
  ``test_compiled_construction_refuses_past_the_limit_like_python``).
- ``build_row``, ``state_of``, ``take_in``, ``members_or``, ``member_room``: ``LazyDFA``'s
  Python construction (``LazyDFA._closure``, ``fsm.lazy._co_reachable_new``)
  (``test_compiled_lazy_rows_equal_the_python_rows``,
  ``test_compiled_lazy_rows_are_the_same_when_every_buffer_grows``).
- ``paste_in``, ``paste_here``: ``NFA.paste_pending`` with ``LazySubsets.add_states``
  (``test_compiled_lazy_construction_pastes_kept_fragments_from_their_arrays``;
  ``tests/test_narrow_walk.py::test_walks_paste_open_values_themselves``).
- ``chunk_packed``: ``fsm.nfa._chunk_template``'s Python build
  (``test_middle_chunks_of_a_long_string_are_made_as_arrays``).

::

    NFA (Python lists) --one copy into arrays--> closures, sweeps, interning (compiled)
                                                 --> transition table, accepting states

The rules are the Python ones (``fsm.dfa.subset_table``, ``sweep_row``): the same
closures, the same sweep over each subset's class intervals, new states numbered in
the same order, so both build the same table and minimisation sees the same input.

Cost notes: the Python construction costs ~50 µs a DFA state on JSON Schema parts
(sweeping intervals, unioning frozensets), about a quarter of compiling a large
schema; compiled, a state costs about a microsecond. Copying the NFA costs about
half a microsecond a state, and the byte classes come from the same copy.

Lazily, a closure that meets a deferred fragment stops (``MEETS_PENDING``) before
the row makes any state; Python builds the fragment and ``LazySubsets.add_states``
appends its states to the arrays (the fragment's start state gets its epsilon
moves a new slice at the end), and the row is asked for again. A copy of a kept
fragment (``NFA.paste_pending``) comes from the template's arrays instead
(``LazySubsets.paste``), without Python lists: an open value's copy (~100 states)
costs ~18 µs so, where pasting lists and reading them back costs ~75 µs (more when
the new tuples set off a garbage collection). A one-state row costs ~7 µs in
Python and ~2 µs compiled, the call included.

A compiled walk pastes such copies itself (``paste_here``) where Python allowed
it ahead (``allow_paste``: a template made, its holes' templates in slots filled
as they are made), and logs them; Python makes the NFA's side of them
(``NFA.paste_pending``) only before it next builds on the NFA
(``LazyDFA._replay_pastes``). Going back to Python for an open value would cost a
round more and the copy taken in, ~40 µs, plus ~20 µs of lists.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from guided.fsm.kernels import MAX_NFA_STATES, watch_first_compile

watch_first_compile()

# Columns per NFA state (``nf``): its closure's slice of ``cl`` (-1: not known yet), its
# moves' slice of ``mv`` (class intervals), its epsilon moves' slice of ``ep``, the DFA
# state its closure alone is (-1: none yet), whether it has byte moves, whether it starts
# a deferred fragment not built yet (lazy NFAs: ``fsm.subset_arrays.LazySubsets``), its
# ``NFA.rooms`` (0: none); for a deferred start whose copy a walk may paste itself
# (``LazySubsets.allow_paste``), its template's number plus one (0: none) and the
# fragment's end. ``fsm.subset_arrays.nfa_arrays`` fills them.
CL_LO, CL_HI, MV_LO, MV_HI, EP_LO, EP_HI, SINGLE, MOVES, PENDING, ROOM, TPL, LINK = range(12)
# Columns per DFA state: its subset's slice of ``sub``, whether it accepts (the
# slice first, as for target sets: ``rehash`` serves both).
SUB_LO, SUB_HI, ACCEPT = range(3)
# Columns per remembered target set (``sweep_row``'s ``known``): its slice of
# ``titems``, its DFA state.
_T_LO, _T_HI, _T_STATE = range(3)
# Slots of ``counts``; the last ones are ``LazySubsets``': the NFA's states, the used
# part of ``ep`` and ``mv``, the NFA size below which a walk may paste (0: it may not;
# ``LazyDFA.growth_limit``), the pastes logged (``paste_here``).
(N_DFA, N_SUB, N_CL, FINAL, MAX, NEED, STAMP, N_T, N_TITEMS,
 N_NFA, N_EP, N_MV, GROWTH, N_PASTED) = range(14)
# Columns of a template's entry (``LazySubsets.allow_paste``): its slices of the
# packed states, of the holes and of the rooms, its size, start and end.
(_P_LO, _P_HI, _H_LO, _H_HI, _R_LO, _R_HI, _P_N, _P_START, _P_END) = range(9)
# Outcomes: done, or the buffer named must grow (``counts[NEED]``: to how many), or a
# closure met a deferred fragment (``counts[NEED]``: its start) that must be built.
(DONE, FULL_DFA, FULL_SUB, FULL_TABLE, FULL_SCRATCH, FULL_CL, FULL_T, FULL_TITEMS,
 TOO_LARGE, MEETS_PENDING) = range(10)
# A sweep event: class << 42 | opens << 41 | NFA target.
_SHIFT, _OPEN, _TARGET = 42, 1 << 41, (1 << 41) - 1


# The helpers of ``build_row`` are inlined (``inline="always"``): a call would pass its
# arrays reference-counted one by one, per target of every row (inlined, rows are ~5% faster).
@njit(cache=True, nogil=True, inline="always")
def _closure(t, nf, ep, cl, counts, seen, mark):
    """Record the closure of NFA state ``t`` in ``cl``: the states epsilon moves reach
    from it that have byte moves, or are the final state, sorted. Nothing is recorded
    when it meets a deferred fragment: that fragment must be built first."""
    stamp = counts[STAMP] + 1
    counts[STAMP] = stamp
    seen[0] = t
    mark[t] = stamp
    n_seen = 1
    i = 0
    while i < n_seen:
        x = seen[i]
        i += 1
        if nf[x, PENDING] > 0:
            counts[NEED] = x
            return MEETS_PENDING
        for k in range(nf[x, EP_LO], nf[x, EP_HI]):
            y = ep[k]
            if mark[y] != stamp:
                mark[y] = stamp
                seen[n_seen] = y
                n_seen += 1
    lo = counts[N_CL]
    if lo + n_seen > cl.shape[0]:
        counts[NEED] = lo + n_seen
        return FULL_CL
    final = counts[FINAL]
    hi = lo
    for k in range(n_seen):
        x = seen[k]
        if nf[x, MOVES] or x == final:
            cl[hi] = x
            hi += 1
    cl[lo:hi].sort()
    nf[t, CL_LO], nf[t, CL_HI] = lo, hi
    counts[N_CL] = hi
    return DONE


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
    outcome (``-FULL_DFA`` ...) when a buffer must grow first."""
    h = np.uint64(0)
    for i in range(lo, hi):
        h += _mix(items[i])
    mask = table.shape[0] - 1
    pos = np.int64(h & np.uint64(mask))
    while True:
        j = table[pos]
        if j < 0:
            break
        if df[j, SUB_HI] - df[j, SUB_LO] == hi - lo:
            base = df[j, SUB_LO] - lo
            same = True
            for i in range(lo, hi):
                if sub[base + i] != items[i]:
                    same = False
                    break
            if same:
                return j
        pos = (pos + 1) & mask
    n = counts[N_DFA]
    ns = counts[N_SUB]
    if n >= counts[MAX]:
        return -TOO_LARGE
    if n >= df.shape[0]:
        return -FULL_DFA
    if 2 * (n + 1) > table.shape[0]:
        return -FULL_TABLE
    if ns + hi - lo > sub.shape[0]:
        counts[NEED] = ns + hi - lo
        return -FULL_SUB
    final = counts[FINAL]
    acc = 0
    for i in range(lo, hi):
        sub[ns + i - lo] = items[i]
        if items[i] == final:
            acc = 1
    df[n, SUB_LO], df[n, SUB_HI], df[n, ACCEPT] = ns, ns + hi - lo, acc
    counts[N_SUB] = ns + hi - lo
    counts[N_DFA] = n + 1
    table[pos] = n
    return n


@njit(cache=True, nogil=True)
def rehash(slices, items, n, table):
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
def state_of(t, nf, ep, cl, df, sub, table, counts, seen, mark):
    """The DFA state of NFA state ``t``'s closure (made if new), or minus an outcome."""
    if nf[t, SINGLE] >= 0:
        return nf[t, SINGLE]
    if nf[t, CL_LO] < 0:
        outcome = _closure(t, nf, ep, cl, counts, seen, mark)
        if outcome != DONE:
            return -outcome
    j = _intern(cl, nf[t, CL_LO], nf[t, CL_HI], df, sub, table, counts)
    if j >= 0:
        nf[t, SINGLE] = j
    return j


@njit(cache=True, nogil=True)
def build_row(d, nf, ep, cl, mv, df, sub, table, trans, counts, scratch, cnt, seen, mark, tsets, titems, ttable):
    """Build DFA state ``d``'s row (``fsm.dfa.sweep_row``) into ``trans[d]``; an
    outcome other than ``DONE`` leaves it to be built again once the buffer has
    grown (the states it made stay). ``cnt`` (per NFA state, zero between calls):
    intervals open in the sweep. Target sets of several states are remembered with
    the state they lead to (``tsets``, ``titems``, ``ttable``), as ``sweep_row``'s
    ``known``: a state inside a large subset meets the same ones row after row."""
    n_classes = trans.shape[1]
    n_ev = 0
    bound = 0  # the most members a target set's union can have
    for p in range(df[d, SUB_LO], df[d, SUB_HI]):
        m = sub[p]
        for q in range(nf[m, MV_LO], nf[m, MV_HI]):
            t = mv[q, 2]
            if nf[t, CL_LO] < 0:
                outcome = _closure(t, nf, ep, cl, counts, seen, mark)
                if outcome != DONE:
                    return outcome
            bound += nf[t, CL_HI] - nf[t, CL_LO]
            n_ev += 2
    # scratch: events, then the open targets, the union, the row.
    act0 = n_ev
    uni0 = act0 + n_ev // 2
    row0 = uni0 + bound
    if row0 + n_classes > scratch.shape[0]:
        counts[NEED] = row0 + n_classes
        return FULL_SCRATCH
    k = 0
    for p in range(df[d, SUB_LO], df[d, SUB_HI]):
        m = sub[p]
        for q in range(nf[m, MV_LO], nf[m, MV_HI]):
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
            j = state_of(scratch[act0], nf, ep, cl, df, sub, table, counts, seen, mark)
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
                    for i in range(nf[y, CL_LO], nf[y, CL_HI]):
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
                    k = counts[N_T]
                    ti = counts[N_TITEMS]
                    if k >= tsets.shape[0] or 2 * (k + 1) > ttable.shape[0]:
                        j = -FULL_T
                    elif ti + n_act > titems.shape[0]:
                        counts[NEED] = ti + n_act
                        j = -FULL_TITEMS
                    else:
                        titems[ti : ti + n_act] = scratch[act0 : act0 + n_act]
                        tsets[k, _T_LO], tsets[k, _T_HI], tsets[k, _T_STATE] = ti, ti + n_act, j
                        ttable[pos] = k
                        counts[N_T] = k + 1
                        counts[N_TITEMS] = ti + n_act
        if j < 0:
            for a in range(act0, act0 + n_act):  # leave the counters at zero
                cnt[scratch[a]] = 0
            return -j
        for c in range(at, nxt):
            scratch[row0 + c] = j
    for c in range(n_classes):
        trans[d, c] = scratch[row0 + c]
    return DONE


@njit(cache=True, nogil=True)
def build_rows(first, stop, start, nf, ep, cl, mv, df, sub, table, trans, counts, scratch, cnt, seen, mark, tsets, titems,
               ttable):
    """The rows of the states from ``first`` on, as they are made (state 0: the
    closure of ``start``), up to ``stop`` (the caller checks its deadline between
    calls): ``(outcome, the state to go on from)``."""
    if counts[N_DFA] == 0:
        j = state_of(start, nf, ep, cl, df, sub, table, counts, seen, mark)
        if j < 0:
            return -j, 0
    d = first
    while d < counts[N_DFA] and d < stop:
        outcome = build_row(d, nf, ep, cl, mv, df, sub, table, trans, counts, scratch, cnt, seen, mark, tsets, titems,
                            ttable)
        if outcome != DONE:
            return outcome, d
        d += 1
    return DONE, d


@njit(cache=True, nogil=True)
def members_or(df, sub, values, first, last, out):
    """For DFA states ``first`` to ``last - 1``: ``out[i, d]``, the OR of ``values[i]``
    (int64 bit sets per NFA state) over state d's NFA states."""
    for d in range(first, last):
        for i in range(values.shape[0]):
            acc = 0
            for j in range(df[d, SUB_LO], df[d, SUB_HI]):
                acc |= values[i, sub[j]]
            out[i, d] = acc


@njit(cache=True, nogil=True)
def member_room(s, nf, df, sub):
    """The largest ``NFA.rooms`` among DFA state ``s``'s NFA states (0: none)."""
    best = 0
    for p in range(df[s, SUB_LO], df[s, SUB_HI]):
        r = nf[sub[p], ROOM]
        if r > best:
            best = r
    return best


@njit(cache=True, nogil=True)
def paste_here(x, nf, ep, mv, counts, px):
    """``LazySubsets.paste`` of the deferred fragment that starts at ``x``, within a
    compiled walk, where ``allow_paste`` allowed it and the arrays have room; its
    ``(x, first state)`` logged for Python to follow (``LazySubsets.pasted``). False
    where it cannot: the walk asks Python, as for any deferred fragment (~40 µs a
    time, a round of the walk included, besides the copy)."""
    meta, data, holes_all, rooms, slot_tid, live, classes, class_starts, log = px
    tid = nf[x, TPL] - 1
    base = counts[N_NFA]
    k = counts[N_PASTED]
    if tid < 0 or base >= counts[GROWTH] or k >= log.shape[0]:
        return False
    n = meta[tid, _P_N]
    rel = data[meta[tid, _P_LO] : meta[tid, _P_HI]]
    holes = holes_all[meta[tid, _H_LO] : meta[tid, _H_HI]]
    n_old = nf[x, EP_HI] - nf[x, EP_LO]
    size = len(rel) + 2 + n_old + 2 * len(holes)  # (``LazySubsets._make_room``'s bound)
    n_ep, n_mv = counts[N_EP], counts[N_MV]
    if (base + n > MAX_NFA_STATES or base + n > nf.shape[0] or base + n > live.shape[0]
            or n_ep + size > ep.shape[0] or n_mv + size // 3 > mv.shape[0]):
        return False
    built_eps = np.empty(n_old + 1, dtype=np.int64)
    built_eps[:n_old] = ep[nf[x, EP_LO] : nf[x, EP_HI]]
    built_eps[n_old] = base + meta[tid, _P_START]
    got = paste_in(rel, n, base, meta[tid, _P_END], nf[x, LINK], built_eps, holes, x, classes, class_starts, live,
                   nf, ep, n_ep, mv, n_mv)
    if got[0] < 0:  # (Python raises it)
        return False
    for r in range(meta[tid, _R_LO], meta[tid, _R_HI]):
        nf[base + rooms[r, 0], ROOM] = rooms[r, 1]
    for h in range(len(holes)):  # (``allow_paste``)
        hole_tid = slot_tid[holes[h, 2]] if holes[h, 2] >= 0 else -1
        if hole_tid >= 0:
            nf[base + holes[h, 0], TPL], nf[base + holes[h, 0], LINK] = hole_tid + 1, base + holes[h, 1]
    nf[x, TPL] = 0
    counts[N_EP], counts[N_MV], counts[N_NFA] = got[0], got[1], base + n
    log[k, 0], log[k, 1] = x, base
    counts[N_PASTED] = k + 1
    return True


@njit(cache=True, nogil=True)
def take_in(first, n, packed, n_built, n_pending, built, classes, class_starts, live, nf, ep, n_ep, mv, n_mv):
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
        nf[s, CL_LO] = nf[s, CL_HI] = nf[s, SINGLE] = -1
        nf[s, EP_LO] = n_ep
        for k in range(e, e + e_count[i]):
            if live[eps[k]]:
                ep[n_ep] = eps[k]
                n_ep += 1
        nf[s, EP_HI] = n_ep
        nf[s, MV_LO] = n_mv
        for k in range(m, m + m_count[i]):
            if live[moves[k, 2]]:
                mv[n_mv, 0] = classes[moves[k, 0]]
                mv[n_mv, 1] = classes[moves[k, 1]]
                mv[n_mv, 2] = moves[k, 2]
                n_mv += 1
        nf[s, MV_HI] = n_mv
        nf[s, MOVES] = 1 if m_count[i] > 0 else 0
        nf[s, PENDING] = 1 if end_of[i] >= 0 else 0
        nf[s, TPL] = 0
        e += e_count[i]
        m += m_count[i]
    nf[built, EP_LO] = n_ep
    for k in range(n_built):
        if live[built_eps[k]]:
            ep[n_ep] = built_eps[k]
            n_ep += 1
    nf[built, EP_HI] = n_ep
    nf[built, PENDING] = nf[built, TPL] = 0
    out[0], out[1] = n_ep, n_mv
    return out


@njit(cache=True, nogil=True)
def paste_in(rel, n, first, end, link, built_eps, holes, built, classes, class_starts, live, nf, ep, n_ep, mv, n_mv):
    """``take_in`` of a template's copy (``_pasted``), in one call from Python."""
    packed = _pasted(rel, n, first, end, link, built_eps, holes)
    return take_in(first, n, packed, len(built_eps), len(holes), built, classes, class_starts, live, nf, ep, n_ep,
                    mv, n_mv)


@njit(cache=True, nogil=True)
def _pasted(rel, n, first, end, link, built_eps, holes):
    """``take_in``'s ``packed`` for a copy of a template numbered from ``first`` on:
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
