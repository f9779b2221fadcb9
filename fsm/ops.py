"""Boolean operations on DFAs (product construction) and embedding a DFA in an NFA.

Spec compilers use these where a constraint is a conjunction or a difference that
regex syntax cannot say: JSON Schema ``allOf`` that cannot be merged keyword by
keyword, ``oneOf`` (union minus pairwise overlaps), ``not``, a ``pattern`` together
with ``minLength``. Each result is minimised, so sizes stay honest (an intersection
headed for a lazily determinised NFA may ask for dead states trimmed only).

Cost notes: the product visits only reachable state pairs; byte classes are the
common refinement of the operands' classes (at most 256).
"""

from __future__ import annotations

import numpy as np

from .dfa import DFA, minimize, trim
from .errors import RegexTooLargeError
from .nfa import NFA

MAX_PRODUCT_STATES = 200_000


def _product(a: DFA, b: DFA, accept, both: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reachable pairs of (a-state, b-state), either side may be dead (-1); with
    ``both`` (an intersection, where such a pair can never accept) neither may."""
    pair_classes = a.byte_to_class.astype(np.int64) * (b.num_classes + 1) + b.byte_to_class
    uniq, byte_to_class = np.unique(pair_classes, return_inverse=True)
    ca = (uniq // (b.num_classes + 1)).tolist()
    cb = (uniq % (b.num_classes + 1)).tolist()
    ta, tb = a.transitions.tolist(), b.transitions.tolist()
    acc_a, acc_b = a.accepting.tolist(), b.accepting.tolist()
    ids = {(0, 0): 0}
    pairs = [(0, 0)]
    table = []
    i = 0
    while i < len(pairs):
        sa, sb = pairs[i]
        row = []
        for x, y in zip(ca, cb):
            na = ta[sa][x] if sa >= 0 else -1
            nb = tb[sb][y] if sb >= 0 else -1
            if (na < 0 or nb < 0) if both else (na < 0 and nb < 0):
                row.append(-1)
                continue
            key = (na, nb)
            j = ids.get(key)
            if j is None:
                if len(pairs) >= MAX_PRODUCT_STATES:
                    raise RegexTooLargeError(f"combined automaton exceeds {MAX_PRODUCT_STATES} states")
                j = ids[key] = len(pairs)
                pairs.append(key)
            row.append(j)
        table.append(row)
        i += 1
    accepting = np.array(
        [accept(sa >= 0 and acc_a[sa], sb >= 0 and acc_b[sb]) for sa, sb in pairs], dtype=bool
    )
    return np.array(table, dtype=np.int32).reshape(len(pairs), len(ca)), byte_to_class.reshape(-1), accepting


def _combine(a: DFA, b: DFA, accept, both: bool = False) -> DFA:
    trans, classes, accepting = _product(a, b, accept, both)
    return minimize(trans, classes, accepting)


def intersect(a: DFA, b: DFA, minimal: bool = True) -> DFA:
    """Strings both accept. Raises ``EmptyLanguageError`` when there are none.

    ``minimal=False`` only trims dead states (``fsm.dfa.trim``): for a product that
    goes straight into a lazily determinised NFA, where size matters less than the
    seconds minimisation costs."""
    if minimal:
        return _combine(a, b, lambda x, y: x and y, both=True)
    return trim(*_product(a, b, lambda x, y: x and y, both=True))


def union(a: DFA, b: DFA) -> DFA:
    return _combine(a, b, lambda x, y: x or y)


def difference(a: DFA, b: DFA) -> DFA:
    """Strings ``a`` accepts and ``b`` does not. Raises ``EmptyLanguageError`` if none.

    Disjoint operands (``oneOf`` branches that cannot overlap, the common case) return
    ``a`` itself after a cheap search, without a product to build and minimise."""
    if is_empty_intersection(a, b):
        return a
    return _combine(a, b, lambda x, y: x and not y)


def is_empty_intersection(a: DFA, b: DFA) -> bool:
    """Whether no string is accepted by both: a search over pairs of live states that
    stops at the first pair accepting in both."""
    pair_classes = a.byte_to_class.astype(np.int64) * (b.num_classes + 1) + b.byte_to_class
    uniq = np.unique(pair_classes)
    classes = list(zip((uniq // (b.num_classes + 1)).tolist(), (uniq % (b.num_classes + 1)).tolist()))
    ta, tb = a.transitions.tolist(), b.transitions.tolist()
    acc_a, acc_b = a.accepting.tolist(), b.accepting.tolist()
    seen = {(0, 0)}
    stack = [(0, 0)]
    while stack:
        sa, sb = stack.pop()
        if acc_a[sa] and acc_b[sb]:
            return False
        row_a, row_b = ta[sa], tb[sb]
        for x, y in classes:
            key = (row_a[x], row_b[y])
            if key[0] >= 0 and key[1] >= 0 and key not in seen:
                seen.add(key)
                stack.append(key)
    return True


def embed(nfa: NFA, dfa: DFA) -> tuple[int, int]:
    """Copy ``dfa`` into ``nfa`` as a fragment ``(start, end)``."""
    edges, accepting = dfa.edge_list()
    base = nfa.add_states(len(edges) + 1)
    end = base + len(edges)
    nfa_edges = nfa.edges
    for s, out in enumerate(edges):
        nfa_edges[base + s] = [(lo, hi, base + t) for lo, hi, t in out]
    for s in accepting:
        nfa.eps[base + s].append(end)
    return base, end
