"""``grammars.json_schema.text._key_excluding_by_byte``'s fragment (an object's
other keys: any string but the listed names) made by a numba kernel straight in
``fsm.nfa.Template.packed``'s layout (``key_trie_packed``; imported only where numba
is installed, by ``grammars.json_schema.text.key_trie_template``). Its Python twin
is that builder; ``tests/test_json_text.py::test_the_compiled_key_trie_makes_the_python_builders_states``
holds the two equal.

::

    names (sorted, UTF-8) --trie by shared prefixes--> nodes, each with its body-DFA state
    packed = body copy | open quote | close quote | trie nodes   (numbered as the Python builder does)

The Python builder makes the same states in the same order (a test compares the
two arrays); decoding builds this fragment the first time an object's other key
is reached, and the compiled construction pastes it without Python lists
(``NFA.paste_pending``). Cost notes: 60 names take ~120 µs to build in Python,
~50 µs to keep as a template and ~90 µs to read into the construction's arrays;
the kernel makes the arrays in a few microseconds.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import watch_first_compile

watch_first_compile()

QUOTE = ord('"')


@njit(cache=True, nogil=True)
def _widest(spans):
    """The most moves any one state has."""
    best = 0
    for s in range(spans.shape[0]):
        best = max(best, spans[s, 1] - spans[s, 0])
    return best


@njit(cache=True, nogil=True)
def key_trie_packed(text, n_names, trans, byte_to_class, accepting, lo, hi, target, spans):
    """The packed states of a quoted string that is none of the names: ``n_names``
    names in ``text``, sorted and distinct, each followed by a NUL byte (no name
    holds one: names with control characters are built by character); the string body
    is a DFA (``trans``, ``byte_to_class``, ``accepting`` as bools) whose moves are
    ``lo``, ``hi``, ``target`` with each state's ``spans``  (``DFA.flat_edges``).

    Returns ``(packed, number of states, start, end)``, states counted from 0; no
    states when a name leaves the body DFA (the caller builds it in Python)."""
    nb = spans.shape[0]
    q0 = nb + 1  # open quote: q0 -"-> q0 + 1; close quote: q0 + 2 -"-> q0 + 3
    root = nb + 5
    offsets = np.zeros(n_names + 1, dtype=np.int64)  # name i: text[offsets[i]:offsets[i + 1] - 1]
    k = 1
    for i in range(len(text)):
        if k <= n_names and text[i] == 0:
            offsets[k] = i + 1
            k += 1
    cap = len(text) + 1
    state_of = np.zeros(cap, dtype=np.int64)  # each node's body state (root: 0)
    terminal = np.zeros(cap, dtype=np.bool_)
    first_kid = np.full(cap, -1, dtype=np.int64)
    last_kid = np.full(cap, -1, dtype=np.int64)
    next_kid = np.full(cap, -1, dtype=np.int64)
    byte_of = np.zeros(cap, dtype=np.int64)
    path = np.zeros(cap, dtype=np.int64)  # the nodes along the previous name
    n_nodes = 1
    for i in range(n_names):
        a, b = offsets[i], offsets[i + 1] - 1
        shared = 0
        if i > 0:  # sorted: the nodes of the prefix shared with the previous name exist
            pa, pb = offsets[i - 1], offsets[i] - 1
            while shared < pb - pa and shared < b - a and text[pa + shared] == text[a + shared]:
                shared += 1
        node = path[shared]
        for d in range(shared, b - a):
            byte = text[a + d]
            nxt = trans[state_of[node], byte_to_class[byte]]
            if nxt < 0:
                return np.zeros(0, dtype=np.int64), 0, 0, 0
            kid = n_nodes
            n_nodes += 1
            state_of[kid] = nxt
            byte_of[kid] = byte
            if first_kid[node] < 0:
                first_kid[node] = kid
            else:
                next_kid[last_kid[node]] = kid
            last_kid[node] = kid
            node = kid
            path[d + 1] = kid
        terminal[node] = True
    n = root + n_nodes
    e_count = np.zeros(n, dtype=np.int64)
    m_count = np.zeros(n, dtype=np.int64)
    eps = np.zeros(n, dtype=np.int64)  # at most one epsilon move a state here
    n_body = spans[nb - 1, 1] if nb else 0
    moves = np.zeros((n_body + 2 + n_nodes * (_widest(spans) + 3), 3), dtype=np.int64)
    n_e = 0
    n_m = 0
    # The body copy (``fsm.ops.embed``): its moves, its accepting states into its end.
    for s in range(nb):
        for k in range(spans[s, 0], spans[s, 1]):
            moves[n_m, 0], moves[n_m, 1], moves[n_m, 2] = lo[k], hi[k], target[k]
            n_m += 1
        m_count[s] = spans[s, 1] - spans[s, 0]
        if accepting[s]:
            eps[n_e] = nb
            n_e += 1
            e_count[s] = 1
    eps[n_e] = q0 + 2  # the body's end into the close quote
    n_e += 1
    e_count[nb] = 1
    for quote in (q0, q0 + 2):
        moves[n_m, 0], moves[n_m, 1], moves[n_m, 2] = QUOTE, QUOTE, quote + 1
        n_m += 1
        m_count[quote] = 1
    eps[n_e] = root  # the open quote into the trie
    n_e += 1
    e_count[q0 + 1] = 1
    # Trie nodes: their body state's moves less the bytes a name continues with,
    # then those bytes into the children; a node that ends no name where the body
    # may end closes the string.
    for node in range(n_nodes):
        s = state_of[node]
        m0 = n_m
        for k in range(spans[s, 0], spans[s, 1]):
            cur, t = lo[k], target[k]
            kid = first_kid[node]
            while kid >= 0:
                hole = byte_of[kid]
                if cur <= hole <= hi[k]:
                    if cur < hole:
                        moves[n_m, 0], moves[n_m, 1], moves[n_m, 2] = cur, hole - 1, t
                        n_m += 1
                    cur = hole + 1
                kid = next_kid[kid]
            if cur <= hi[k]:
                moves[n_m, 0], moves[n_m, 1], moves[n_m, 2] = cur, hi[k], t
                n_m += 1
        kid = first_kid[node]
        while kid >= 0:
            moves[n_m, 0], moves[n_m, 1], moves[n_m, 2] = byte_of[kid], byte_of[kid], root + kid
            n_m += 1
            kid = next_kid[kid]
        m_count[root + node] = n_m - m0
        if not terminal[node] and accepting[s]:
            eps[n_e] = q0 + 2
            n_e += 1
            e_count[root + node] = 1
    packed = np.empty(2 * n + n_e + 3 * n_m, dtype=np.int64)
    packed[:n] = e_count
    packed[n : 2 * n] = m_count
    packed[2 * n : 2 * n + n_e] = eps[:n_e]
    packed[2 * n + n_e :] = moves[:n_m].ravel()
    return packed, n, q0, q0 + 3
