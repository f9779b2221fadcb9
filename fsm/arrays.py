"""Array helpers shared by the automaton and trie code."""

from __future__ import annotations

import numpy as np


def spans(lo: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Every position of the spans ``[lo[i], lo[i] + count[i])``, span after span, in
    one array: the starts repeated plus offsets, no Python loop (children of trie
    nodes, a CSR row's entries, runs of a token order).

    Example::

        >>> spans(np.array([10, 3]), np.array([2, 3])).tolist()
        [10, 11, 3, 4, 5]
    """
    return np.repeat(lo - (np.cumsum(count) - count), count) + np.arange(int(count.sum()))
