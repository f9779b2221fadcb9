"""Rows of the plain tokens made of one byte set, by length: the compiled twin of the
numpy passes in ``fsm.trie.RunTrie.chain_rows``.

One pass over the trie's levels marks the nodes whose path below the plain marker
stays in the set; one pass over the token ends sets each such token's bit in the
row of its length; a running OR gives row ``n`` every token of at most ``n`` bytes.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import watch_first_compile

watch_first_compile()


@njit(cache=True, nogil=True)
def chain_rows(symbol, parent, level_start, plain_node, roots, ok, units, ends, lengths, words, min_count):
    """``(rows, count)``: ``rows[n]`` (uint32 [longest + 1, words]) the units of at
    most ``n`` bytes below the plain marker whose every byte has ``ok`` set (``ok``:
    bool [257], symbols past 255 are markers, index 256 is False), and their
    number; ``rows`` has no rows when the count is under ``min_count``."""
    n = len(symbol)
    inside = np.zeros(n, dtype=np.bool_)  # (levels past the last with a node inside stay False)
    for i in range(level_start[2]):  # the root and the markers: no parent to check
        s = symbol[i]
        inside[i] = plain_node[i] and ok[min(s, 256)]
    for r in roots:
        inside[r] = plain_node[r]
    for d in range(2, len(level_start) - 1):
        some = False
        for i in range(level_start[d], level_start[d + 1]):
            if inside[parent[i]] and plain_node[i]:
                s = symbol[i]
                if ok[min(s, 256)]:
                    inside[i] = True
                    some = True
        if not some:  # nor anything below
            break
    count, longest = 0, 0
    for k in range(len(units)):
        if inside[ends[k]]:
            count += 1
            longest = max(longest, lengths[k])
    if count < min_count:
        return np.zeros((0, words), dtype=np.uint32), count
    rows = np.zeros((longest + 1, words), dtype=np.uint32)
    for k in range(len(units)):
        if inside[ends[k]]:
            u = units[k]
            rows[lengths[k], u >> 5] |= np.uint32(1) << np.uint32(u & 31)
    for r in range(1, longest + 1):
        for w in range(words):
            rows[r, w] |= rows[r - 1, w]
    return rows, count
