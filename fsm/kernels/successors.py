"""Where each token leads from one DFA state, in runs of a split trie: the compiled
twin of the numpy walk in ``fsm.index.TokenIndex.successors``.

From one state each trie node is reached in at most one DFA state, so a depth-first
walk visits each live node once: a token end is a run of its own tokens, and a plain
(text) node whose state loops on every plain byte (character) is one run of its whole
subtree back to that state. A state whose row is not built yet, or whose loop facts
are not known, is set aside with its node: the caller builds them and walks on from
the pairs set aside (``TokenIndex`` drives the rounds), so each node is walked once.
"""

from __future__ import annotations

from numba import njit

from . import watch_first_compile

watch_first_compile()

UNKNOWN = -2  # fsm.lazy.UNKNOWN: a transition not computed yet


@njit(cache=True, nogil=True)
def successor_runs(sp, stack_node, stack_state, child_start, child_end, sym_cls, is_end, plain_node, text_node, trans,
                   loops, lo, hi, own, n_out, out_lo, out_hi, out_target, pend_node, pend_state, seen, mark):
    """Walk from the ``sp`` (node, state) pairs on the stack; append to ``out_*``
    (from ``n_out``) the runs ``(lo, hi, target)``. ``loops[0 / 1, q]``: whether ``q``
    loops on every plain byte / character (-1: not known). A pair whose state has no
    row yet, or whose loop fact is needed and not known, goes to ``pend_*``, to be
    walked again once the caller has built them. With ``mark >= 0``, only the first
    run to each target is written (``seen[q] == mark`` once one is): the distinct
    targets, where a counted string's state has thousands of runs. Returns ``(runs,
    pending pairs)``."""
    n_pend = 0
    rows = trans.shape[0]
    while sp > 0:
        sp -= 1
        node = stack_node[sp]
        q = stack_state[sp]
        kind = 0 if plain_node[node] else (1 if text_node[node] else -1)
        if q >= rows or trans[q, 0] == UNKNOWN or (kind >= 0 and loops[kind, q] < 0):
            pend_node[n_pend] = node
            pend_state[n_pend] = q
            n_pend += 1
            continue
        if kind >= 0 and loops[kind, q] == 1:
            if mark < 0 or seen[q] != mark:
                if mark >= 0:
                    seen[q] = mark
                out_lo[n_out] = lo[node]
                out_hi[n_out] = hi[node]
                out_target[n_out] = q
                n_out += 1
            continue
        if is_end[node] and (mark < 0 or seen[q] != mark):
            if mark >= 0:
                seen[q] = mark
            out_lo[n_out] = lo[node]
            out_hi[n_out] = lo[node] + own[node]
            out_target[n_out] = q
            n_out += 1
        for c in range(child_start[node], child_end[node]):
            t = trans[q, sym_cls[c]]
            if t >= 0:
                stack_node[sp] = c
                stack_state[sp] = t
                sp += 1
    return n_out, n_pend
