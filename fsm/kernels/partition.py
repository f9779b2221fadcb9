"""``fsm.dfa.coarsest_partition`` compiled with numba (``coarsest_partition``), and the
breadth-first numbering of ``fsm.dfa._quotient`` (``quotient_order``); imported by
``fsm.dfa`` only where numba is installed. Python twins: ``fsm.dfa._hopcroft`` and
``_moore``, and ``_quotient``'s loop; held equal by ``tests/test_compiled_automata.py``
(``test_compiled_partition_equals_python_partitions``,
``test_compiled_minimisation_equals_python_minimisation``,
``test_compiled_determinize_equals_python_determinize``).

Hopcroft's algorithm over arrays: the states kept in one permutation where each block
is a contiguous slice, so splitting a block moves its marked members to the slice's
front and cuts it in two. A splitter (a block) is taken with every class at once, as
in ``fsm.dfa._hopcroft``; the smaller half of a split joins the work list.

The coarsest partition is unique, so this finds the same blocks as the Python
algorithms (``_hopcroft``, ``_moore``), perhaps numbered otherwise; ``_quotient``
renumbers states canonically (breadth first), so minimised automata come out equal
(the tests compare them).

Cost notes: O(classes × states × log states), about 20 ns a move; the Python
algorithms cost ~1 µs a move (Hopcroft) or a numpy pass per round (Moore).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import watch_first_compile

watch_first_compile()


@njit(cache=True, nogil=True)
def coarsest_partition(t, accepting, sink):
    """Block id per state of the coarsest partition compatible with the complete
    table ``t`` (``sink``: its all-dead row, which no state leaves) that keeps
    accepting states, other states and the sink apart."""
    n, k = t.shape
    # Moves into each state, by class (moves into the sink never split anything: its
    # block is never a splitter).
    first_pred = np.zeros(n + 1, dtype=np.int64)
    for p in range(n):
        for c in range(k):
            if t[p, c] != sink:
                first_pred[t[p, c] + 1] += 1
    for q in range(n):
        first_pred[q + 1] += first_pred[q]
    fill = first_pred[:-1].copy()
    pred_state = np.empty(first_pred[n], dtype=np.int64)
    pred_class = np.empty(first_pred[n], dtype=np.int64)
    for p in range(n):
        for c in range(k):
            q = t[p, c]
            if q != sink:
                pred_state[fill[q]] = p
                pred_class[fill[q]] = c
                fill[q] += 1
    # Blocks: slices of ``elems``; a state's block and its place in ``elems``.
    elems = np.empty(n, dtype=np.int64)
    where = np.empty(n, dtype=np.int64)
    block = np.empty(n, dtype=np.int64)
    start = np.zeros(n + 1, dtype=np.int64)
    end = np.zeros(n + 1, dtype=np.int64)
    marked = np.zeros(n + 1, dtype=np.int64)
    n_blocks = 0
    i = 0
    for kind in range(3):  # accepting, the rest, the sink (empty ones left out)
        first = i
        for s in range(n):
            if (kind == 0 and accepting[s] and s != sink) or (kind == 1 and not accepting[s] and s != sink) or (
                    kind == 2 and s == sink):
                elems[i] = s
                where[s] = i
                block[s] = n_blocks
                i += 1
        if i > first:
            start[n_blocks], end[n_blocks] = first, i
            n_blocks += 1
    work = np.empty(n + 1, dtype=np.int64)  # blocks to split by (each once at most)
    n_work = 0
    for b in range(n_blocks - 1):  # all but the sink's
        work[n_work] = b
        n_work += 1
    # Scratch: the splitter's incoming moves sorted by class, the blocks they touch.
    by_class = np.empty(first_pred[n], dtype=np.int64)
    class_count = np.zeros(k + 1, dtype=np.int64)
    touched = np.empty(n, dtype=np.int64)
    while n_work:
        n_work -= 1
        splitter = work[n_work]
        # Its members' incoming moves, bucketed by class (before any split).
        class_count[:] = 0
        for j in range(start[splitter], end[splitter]):
            q = elems[j]
            for e in range(first_pred[q], first_pred[q + 1]):
                class_count[pred_class[e] + 1] += 1
        for c in range(k):
            class_count[c + 1] += class_count[c]
        slot = class_count[:k].copy()
        for j in range(start[splitter], end[splitter]):
            q = elems[j]
            for e in range(first_pred[q], first_pred[q + 1]):
                c = pred_class[e]
                by_class[slot[c]] = pred_state[e]
                slot[c] += 1
        for c in range(k):
            n_touched = 0
            for e in range(class_count[c], class_count[c + 1]):  # each state once a class
                p = by_class[e]
                b = block[p]
                if marked[b] == 0:
                    touched[n_touched] = b
                    n_touched += 1
                to = start[b] + marked[b]  # move p to the marked front of its block
                other = elems[to]
                at = where[p]
                elems[to], elems[at] = p, other
                where[p], where[other] = to, at
                marked[b] += 1
            for ti in range(n_touched):
                b = touched[ti]
                m = marked[b]
                marked[b] = 0
                size = end[b] - start[b]
                if m == size:
                    continue
                nb = n_blocks
                n_blocks += 1
                if m <= size - m:  # the marked front becomes the new block
                    start[nb], end[nb] = start[b], start[b] + m
                    start[b] += m
                else:
                    start[nb], end[nb] = start[b] + m, end[b]
                    end[b] = start[b] + m
                for j in range(start[nb], end[nb]):
                    block[elems[j]] = nb
                # The smaller half joins the work list (both, if b is in it already).
                work[n_work] = nb
                n_work += 1
    return block


@njit(cache=True, nogil=True)
def quotient_order(t, block, sink_block):
    """``fsm.dfa._quotient``'s breadth-first numbering of the blocks from the start
    state's: ``(number per block, -1 where unreached or the sink's; one state per
    numbered block, in order)``."""
    order = np.full(block.max() + 1, -1, dtype=np.int64)
    reps = np.empty(block.max() + 1, dtype=np.int64)
    order[block[0]] = 0
    reps[0] = 0
    n = 1
    i = 0
    while i < n:
        r = reps[i]
        for c in range(t.shape[1]):
            nxt = t[r, c]
            b = block[nxt]
            if b != sink_block and order[b] < 0:
                order[b] = n
                reps[n] = nxt
                n += 1
        i += 1
    return order, reps[:n]
