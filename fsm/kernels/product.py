"""``fsm.ops._product`` compiled with numba (``product_pairs``; imported by
``fsm.ops._product_compiled`` only where numba is installed). Python twin:
``fsm.ops._product_by_pair``; held equal by ``tests/test_compiled_automata.py``
(``test_compiled_product_equals_the_python_product``,
``test_compiled_product_refuses_past_the_limit_like_python``) and
``tests/test_regex.py::test_products_agree_with_both_patterns_on_random_pairs``.

The reachable pairs of states of two DFAs, breadth first, pair by pair, as
``fsm.ops._product_by_pair`` does in Python: the same pairs, numbered in the same
order (the tests compare them). A pair ``(a, b)`` (-1: that side is dead) is the key
``(a + 1) * (rows of b + 1) + (b + 1)`` in an open-addressing hash table.

Cost notes: ~10 ns a (pair, class) cell; in Python ~0.3 µs (pair by pair) or a numpy
pass per breadth-first level (``_product_by_level``, for large products).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import watch_first_compile

watch_first_compile()


@njit(cache=True, nogil=True)
def _find(hkeys, key):
    """The slot of ``key`` in the table ``hkeys``, or of the free slot it would take."""
    mask = hkeys.shape[0] - 1
    pos = (key * -7046029254386353131) & mask  # Fibonacci hashing: 0x9E3779B97F4A7C15 as int64
    while hkeys[pos] >= 0 and hkeys[pos] != key:
        pos = (pos + 1) & mask
    return pos


@njit(cache=True, nogil=True)
def product_pairs(ta, tb, both, limit):
    """``(table, pairs a, pairs b)`` of the product of ``ta`` and ``tb`` (transition
    tables over common classes; -1 no move): a move is dead where both sides are
    (with ``both``: where either is). An empty table when more than ``limit`` pairs
    would be needed."""
    k = ta.shape[1]
    width = tb.shape[0] + 1
    cap = 64
    pa = np.empty(cap, dtype=np.int64)
    pb = np.empty(cap, dtype=np.int64)
    table = np.empty((cap, k), dtype=np.int32)
    hkeys = np.full(2 * cap, -1, dtype=np.int64)
    hids = np.empty(2 * cap, dtype=np.int64)
    pa[0], pb[0] = 0, 0
    pos = _find(hkeys, width + 1)
    hkeys[pos], hids[pos] = width + 1, 0
    n = 1
    i = 0
    while i < n:
        sa, sb = pa[i], pb[i]
        for c in range(k):
            x = ta[sa, c] if sa >= 0 else -1
            y = tb[sb, c] if sb >= 0 else -1
            if (x < 0 or y < 0) if both else (x < 0 and y < 0):
                table[i, c] = -1
                continue
            key = (x + 1) * width + (y + 1)
            pos = _find(hkeys, key)
            if hkeys[pos] < 0:  # a new pair
                if n >= limit:
                    return table[:0], pa[:0], pb[:0]
                if n == cap:
                    cap *= 2
                    pa, pb, table = _grown(pa, cap), _grown(pb, cap), _grown(table, cap)
                if 2 * (n + 1) > hkeys.shape[0]:
                    old_keys, old_ids = hkeys, hids
                    hkeys = np.full(2 * old_keys.shape[0], -1, dtype=np.int64)
                    hids = np.empty(2 * old_keys.shape[0], dtype=np.int64)
                    for s in range(old_keys.shape[0]):
                        if old_keys[s] >= 0:
                            p = _find(hkeys, old_keys[s])
                            hkeys[p], hids[p] = old_keys[s], old_ids[s]
                    pos = _find(hkeys, key)
                hkeys[pos], hids[pos] = key, n
                pa[n], pb[n] = x, y
                n += 1
            table[i, c] = hids[pos]
        i += 1
    return table[:n], pa[:n], pb[:n]


@njit(cache=True, nogil=True)
def _grown(a, size):
    grown = np.empty((size,) + a.shape[1:], dtype=a.dtype)
    grown[: a.shape[0]] = a
    return grown
