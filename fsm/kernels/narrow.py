"""The kernels of ``fsm.compiled_walk``'s walk: the walk itself and every fact it
needs about a DFA state, in one compiled call (imported only where numba is
installed, by ``fsm.compiled_walk.CompiledWalk``).

Python twins: ``fsm.narrow.narrow_walk`` and ``start_pairs`` for the walk
(``walk_round``), ``fsm.index.TokenIndex._plain_run``, ``_text_run``,
``_utf8_target`` and ``fsm.narrow.loop_bytes`` for the facts, ``RunTrie.plain_rows``
and ``chain_rows`` for the rows by length, ``fsm.index``'s bit setting for
``runs_row``. Held equal by ``tests/test_narrow_walk.py`` (``compiled``-parametrised
tests: ``test_narrow_rows_equal_batched_rows``, ``test_narrow_rows_match_brute_force``,
``test_narrow_rows_equal_batched_rows_json``; and
``test_compiled_walk_over_rows_built_in_python``,
``test_plain_tokens_that_fit_near_the_end_of_a_counted_string``,
``test_plain_tokens_of_one_byte_set_near_the_end_of_a_counted_run``,
``test_walks_paste_open_values_themselves``).

::

    walk_round: pop (node, state) ─ a fact missing? ─> computed here, memoised in ``facts``:
        take a subtree whole by room or self-loop        row       fsm.kernels.subsets.build_row
        push live children, set token ends' bits         loop      its self-loop bytes
                                                         rooms     chains of rows (``_room``)
                                                         UTF-8     rows of each sequence
        a row the construction cannot build here (a deferred fragment to build, a
        buffer to grow, or a DFA with no compiled construction) sets the pair aside
        and asks Python for it ──> ``LazyDFA.next_states``; the next round resumes
        (a deferred copy of a kept template: pasted in the round by
        ``paste_wanted``, and the pair walked again; no trip to Python)

Two rules are the compiled walk's own: at the plain root, a state with less room
than the longest plain token, whose room ends where no plain byte is taken (a
counted string near its end), allows exactly the plain tokens that fit, one row of
``RunTrie.plain_rows`` (``_dies_after``). Walking them visits every prefix of the
longer tokens: 27k-50k checks at 4-11 bytes left, past the budget, and the batched
walk it would fall back to takes ~30 ms. Likewise a state that takes one smaller set of
plain bytes, each into one next state, until it takes none (``[0-9A-Za-z]{12}``,
``[a-f0-9]{40}``), or keeps taking it past the longest token: one row of
``RunTrie.chain_rows`` (``_chain``; sets with fewer than ~1,000 tokens are walked; a
set met for the first time waits aside while Python makes its rows, once per
vocabulary, kept in its ``ChainBank``, but for sets of fewer than 3 plain bytes,
which the kernel walks at once). Walking the alphanumeric tokens takes 28k checks, ~400 µs; with the
row, ~30 µs. The Python walk returns runs, which a row by length is not; it keeps
walking there (its rows are the same).

Tokens found go straight into the row's bits, but for long runs (whole subtrees of
``LONG_RUN`` tokens or more: ``_emit``), which Python ORs in from the trie's bank of
kept rows. The other rules are the Python twins' (above).

Cost notes: a row costs its construction (~1 µs) and a fact a few reads per row;
a round ~10 µs plus ~1-2 µs a new state. Computing a fact in Python instead (the
pair set aside, rows built through ``LazyDFA`` at ~7 µs a row, room chains and
UTF-8 sequences followed over row lists) costs ~5-8 µs a new state, and a miss in a
counted string builds ~10-40 rows. Helpers are called only for facts not known
yet: each call passes ~15 arrays, reference-counted one by one, and calling them
for every pair would make a round cost ~200 µs. Compiling these kernels takes ~7 s
once (cached on disk).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import watch_first_compile
from .subsets import DONE as ROW_DONE  # (a row's outcome; ``DONE`` below is a round's)
from .subsets import MEETS_PENDING, TPL, build_row, member_room, paste_here
from .subsets import NEED as _MET  # (counts' slot: the deferred start a row met)

watch_first_compile()

UNKNOWN = -2  # a row not built yet (``fsm.lazy.UNKNOWN``)

# Columns of the node table (``fsm.compiled_walk.TrieTable``).
_START, _END, _SYMBOL, _OWN, _LO, _HI, _KIND, _HEIGHT, _NEED = range(9)
_PLAIN, _TEXT = 1, 2  # _KIND
# Columns of ``facts``, per DFA state: its rooms (-1: not known), whether it loops on
# some bytes (then ``loops`` holds them), the one state every non-ASCII character
# leads to (-1: none; -2: not known), the stamp of the room chain it is on.
ROOM, TEXT_ROOM, LOOP, UTF8, MARK = range(5)
UNKNOWN_LOOP, NO_LOOP, SOME_LOOP = range(3)
# Slots of ``params``.
(P_TEXT_ROOT, P_FIRST_WIDE, P_REST_CHARS, P_PLAIN_CAP, P_TEXT_CAP, P_BUDGET, P_BUILD, P_LONG_RUN, P_PLAIN_ROOT,
 P_CHAIN_BYTES, P_ROOT_LO, P_ROOT_HI, P_START) = range(13)
# Slots of ``ctl``: the state a fact waits on (its row: Python's to build), the last
# room chain's stamp, how many deferred starts wait to be pasted (``_want_paste``),
# then those starts.
_ASKED, _STAMP, N_PASTES = range(3)
#: The most deferred starts a round notes to be pasted (``paste_wanted``).
PASTES = 8
# A helper's answer when the fact waits on a row Python must build (``ctl[_ASKED]``).
_ASK = -(1 << 40)
_CHAIN_ASKED = -2  # ``_chain``'s, likewise
# Outcomes of a round.
DONE, FULL, OVER_BUDGET = range(3)
#: A state with at most this many live byte classes gets no self-loop bytes
#: (``fsm.narrow._FEW_LOOP_CLASSES``).
FEW_LOOP_CLASSES = 8
#: The most states a UTF-8 sequence may reach at one step before the state counts
#: as having no single target (the target only saves walking characters one by one).
UTF8_SPREAD = 64


# ``_built`` and ``_ready`` are inlined: a call passes ``b``'s ~16 arrays, each
# reference-counted on the way in and out, and they are called for most pairs of a
# walk that builds rows (inlined, a cold round is ~20% faster).
@njit(cache=True, nogil=True, inline="always")
def _built(s, trans, params, ctl, b):
    """Whether DFA state ``s``'s row is built, building it here where the DFA's
    construction is compiled (``params[P_BUILD]``); else ``s`` is asked for, and
    a deferred fragment its closures met that may be pasted without Python is
    noted (``_want_paste``)."""
    if trans[s, 0] != UNKNOWN:
        return True
    if params[P_BUILD]:
        outcome = build_row(s, b[0], b[1], b[2], b[3], b[4], b[5], b[6], trans, b[7], b[8], b[9], b[10], b[11], b[12],
                            b[13], b[14])
        if outcome == ROW_DONE:
            return True
        if outcome == MEETS_PENDING and b[0][b[7][_MET], TPL] > 0:
            _want_paste(ctl, b[7][_MET])
    ctl[_ASKED] = s
    return False


@njit(cache=True, nogil=True, inline="always")
def _want_paste(ctl, x):
    """Note deferred start ``x`` to be pasted after the round (once)."""
    n = ctl[N_PASTES]
    for i in range(n):
        if ctl[N_PASTES + 1 + i] == x:
            return
    if n < PASTES:
        ctl[N_PASTES + 1 + n] = x
        ctl[N_PASTES] = n + 1


@njit(cache=True, nogil=True)
def paste_wanted(ctl, b, px):
    """Paste the copies a pair's rows met (``_want_paste``; ``fsm.kernels.subsets.
    paste_here``, ``px``: ``fsm.subset_arrays.Buffers.px``), and say how many were;
    ``walk_round`` then walks the pair again. Otherwise each would be a trip to
    Python (``LazyDFA.next_states``: ~40 µs with the round it costs), then a paste
    after the round and one round more: a round that starts cold (its arrays out of
    the caches since the last mask) costs 10-60 µs with its call. ``px`` is handed
    to no helper of the walk (a tuple passed to a helper is reference-counted array
    by array at each call)."""
    n = 0
    for i in range(ctl[N_PASTES]):
        if paste_here(ctl[N_PASTES + 1 + i], b[0], b[1], b[3], b[7], px):
            n += 1
    ctl[N_PASTES] = 0
    return n


@njit(cache=True, nogil=True, inline="always")
def _ready(s, trans, facts, params, ctl, b):
    """Whether DFA state ``s`` has a facts row (states the construction made in this
    round may not: Python makes room) and a built row; else ``s`` is asked for."""
    if s >= facts.shape[0]:
        ctl[_ASKED] = s
        return False
    return _built(s, trans, params, ctl, b)


@njit(cache=True, nogil=True)
def _loop_known(s, trans, facts, loops, class_words, params, ctl, b):
    """``facts[s, LOOP]`` (and ``loops[s]``) known, computed if need be; False when
    ``s``'s row is asked for."""
    if facts[s, LOOP] != UNKNOWN_LOOP:
        return True
    if not _ready(s, trans, facts, params, ctl, b):
        return False
    n_classes = trans.shape[1]
    live = 0
    for c in range(n_classes):
        if trans[s, c] >= 0:
            live += 1
    some = False
    if live > FEW_LOOP_CLASSES:
        for c in range(n_classes):
            if trans[s, c] == s:
                for w in range(4):
                    loops[s, w] |= class_words[c, w]
                some = True
    facts[s, LOOP] = SOME_LOOP if some else NO_LOOP
    return True


@njit(cache=True, nogil=True)
def _plain_successor(s, trans, plain_classes):
    """The one state every plain byte leads to from ``s`` (-1: none)."""
    first = trans[s, plain_classes[0]]
    for i in range(1, plain_classes.shape[0]):
        if trans[s, plain_classes[i]] != first:
            return -1
    return first


@njit(cache=True, nogil=True)
def _utf8(s, trans, facts, u_seq, u_steps, u_classes, sets, params, ctl, b):
    """The one state every whole non-ASCII character leads to from ``s`` (which is
    ready), or -1 (``TokenIndex._utf8_target``); ``_ASK`` while a row is asked for."""
    got = facts[s, UTF8]
    if got != -2:
        return got
    target = -3
    for q in range(u_seq.shape[0]):
        cur = 0
        sets[cur, 0] = s
        n = 1
        for st in range(u_seq[q, 0], u_seq[q, 1]):
            m = 0
            for i in range(n):
                x = sets[cur, i]
                if not _built(x, trans, params, ctl, b):
                    return _ASK
                for k in range(u_steps[st, 0], u_steps[st, 1]):
                    t = trans[x, u_classes[k]]
                    if t < 0:
                        facts[s, UTF8] = -1
                        return -1
                    seen = False
                    for j in range(m):
                        if sets[1 - cur, j] == t:
                            seen = True
                            break
                    if not seen:
                        if m == UTF8_SPREAD:
                            facts[s, UTF8] = -1
                            return -1
                        sets[1 - cur, m] = t
                        m += 1
            cur = 1 - cur
            n = m
        if n != 1 or (target != -3 and sets[cur, 0] != target):
            facts[s, UTF8] = -1
            return -1
        target = sets[cur, 0]
    facts[s, UTF8] = target
    return target


@njit(cache=True, nogil=True)
def _room(s, col, trans, facts, plain_classes, u_seq, u_steps, u_classes, path, sets, params, ctl, b):
    """How many plain bytes (``col == ROOM``) or characters of text (``TEXT_ROOM``)
    keep the DFA alive from ``s``, by ``TokenIndex._room``'s chain rule (memoised
    alike, cut at the cap alike); ``_ASK`` while a row on the chain is asked for."""
    cap = params[P_PLAIN_CAP] if col == ROOM else params[P_TEXT_CAP]
    stamp = ctl[_STAMP] + 1
    ctl[_STAMP] = stamp
    n = 0
    room = -1
    while n < cap:
        if not _ready(s, trans, facts, params, ctl, b):
            return _ASK
        known = facts[s, col]
        if known >= 0:
            room = known
            break
        if facts[s, MARK] == stamp:  # back on the chain: nothing on it ever dies
            room = cap
            break
        if params[P_BUILD]:  # its NFA states' rooms (``LazyDFA.member_room``)
            bound = member_room(s, b[0], b[4], b[5])
            if bound >= cap // 2:
                room = min(cap, bound)
                facts[s, col] = room
                break
        path[n] = s
        n += 1
        facts[s, MARK] = stamp
        nxt = _plain_successor(s, trans, plain_classes)
        if col == TEXT_ROOM and nxt >= 0:
            u = _utf8(s, trans, facts, u_seq, u_steps, u_classes, sets, params, ctl, b)
            if u == _ASK:
                return _ASK
            if u != nxt:
                nxt = -1
        if nxt < 0:
            room = 0
            n -= 1
            facts[s, col] = 0
            break
        s = nxt
    if room < 0:  # cut at cap states: the first half keeps lower bounds
        for d in range(min(n, cap // 2)):
            facts[path[d], col] = cap - d
        return facts[path[0], col] if n > 0 else 0
    for i in range(n - 1, -1, -1):
        room = min(cap, room + 1)
        facts[path[i], col] = room
    return facts[path[0], col] if n > 0 else room


@njit(cache=True, nogil=True)
def _dies_after(s, room, trans, plain_classes):
    """Whether the state ``room`` plain bytes after ``s`` (along its chain, where
    every plain byte leads to one state) takes no plain byte at all: then ``s``
    allows exactly the plain tokens of at most ``room`` bytes. False where a row on
    the way is not built (the walk then goes on as usual)."""
    for _ in range(room):
        if trans[s, 0] == UNKNOWN:
            return False
        s = _plain_successor(s, trans, plain_classes)
        if s < 0:
            return False
    if trans[s, 0] == UNKNOWN:
        return False
    for i in range(plain_classes.shape[0]):
        if trans[s, plain_classes[i]] >= 0:
            return False
    return True


@njit(cache=True, nogil=True, inline="always")
def loops_cover(loops, state, below, node):
    """Whether every byte below trie ``node`` is a self-loop of ``state`` (both bit
    sets in ``fsm.narrow.below_words``' layout): the node's subtree is taken whole.
    Inlined: shared with ``fsm.kernels.units``'s walk."""
    for w in range(4):
        if below[node, w] & ~loops[state, w]:
            return False
    return True


@njit(cache=True, nogil=True, inline="always")
def _emit(lo, hi, out, n_out, row, order, long_run):
    """Tokens ``order[lo:hi]`` are allowed: a long run is kept in ``out`` (its bits
    come from the trie's bank of kept rows), a short one's bits are set in ``row``.
    Returns the new ``n_out``."""
    if hi - lo >= long_run:
        out[n_out, 0], out[n_out, 1] = lo, hi
        return n_out + 1
    for j in range(lo, hi):
        t = order[j]
        row[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
    return n_out


@njit(cache=True, nogil=True)
def _one_target(x, trans, plain_classes, plain_bytes, mask):
    """The one state every plain byte ``x`` takes leads to, or -1 (none taken) or -2
    (several targets); the plain classes taken (their indices) as bits of ``mask``,
    and how many plain bytes they hold (``plain_bytes``: per class) in ``mask[2]``."""
    target = -1
    mask[0] = mask[1] = mask[2] = 0
    for j in range(plain_classes.shape[0]):
        t = trans[x, plain_classes[j]]
        if t >= 0:
            if target < 0:
                target = t
            elif t != target:
                return -2
            mask[j >> 6] |= np.uint64(1) << np.uint64(j & 63)
            mask[2] += np.uint64(plain_bytes[j])
    return target


@njit(cache=True, nogil=True)
def _chain(state, trans, plain_classes, plain_bytes, longest, chain_keys, chain_len, n_keys, ask, mask, params, ctl,
           b):
    """``RunTrie.chain_rows``' rule at the plain root: ``(slot, n)`` where ``state``
    takes one set of plain bytes, each into one next state, ``n`` times and then
    none (or keeps doing so for ``longest`` bytes, the longest plain token: a token
    with another byte dies at it), and the set's rows are in ``slot``; else
    ``(-1, 0)``. ``chain_keys``: per known set, its bits and its slot plus one (0:
    too few tokens to be worth it: the chain is not followed). A set that is not
    known goes to ``ask``, and a row on the chain that is not built is asked for:
    both give ``(_CHAIN_ASKED, 0)``, and the walk sets the pair aside until Python
    has decided on the set (made its rows, or found it too small: ~0.3 ms, once per
    vocabulary) or built the row. Walking the tokens instead takes ~29k checks
    (~450 µs) at the first sight of each set in each schema, and at every position
    of ``[0-9a-zA-Z_-]{1,255}`` (a counted run longer than the longest token ends in
    deferred copies). A set of fewer than ``params[P_CHAIN_BYTES]`` plain bytes is
    walked without asking: Python would find it too small, and the round trip to
    hear so (~50 µs) costs more than the walk, at each new byte of a key."""
    if trans[state, 0] == UNKNOWN:
        return -1, 0
    x = _one_target(state, trans, plain_classes, plain_bytes, mask)
    if x < 0 or mask[2] < params[P_CHAIN_BYTES]:
        return -1, 0
    first0, first1 = mask[0], mask[1]
    slot = -2
    for key in range(n_keys):
        if chain_keys[key, 0] == first0 and chain_keys[key, 1] == first1:
            slot = np.int64(chain_keys[key, 2]) - 1
            break
    if slot == -2:
        if ask[0] == 0:
            ask[0], ask[1], ask[2] = 1, first0, first1
        ctl[_ASKED] = state  # built: nothing to build, the pair waits for the set's rows
        return _CHAIN_ASKED, 0
    if slot < 0:
        return -1, 0
    for n in range(1, longest):
        if not _built(x, trans, params, ctl, b):
            return _CHAIN_ASKED, 0
        nxt = _one_target(x, trans, plain_classes, plain_bytes, mask)
        if nxt == -1:
            return slot, min(n, chain_len[slot])
        if nxt < 0 or mask[0] != first0 or mask[1] != first1:
            return -1, 0
        x = nxt
    return slot, chain_len[slot]


@njit(cache=True, nogil=True, inline="always")
def _wait(node, state, stack, sp, aside, n_aside, asks, n_asks, ctl, b, px):
    """A pair whose fact waits on a row: walked again at once where the copies its
    rows met could be pasted here (``paste_wanted``), else set aside with the state
    asked for. Returns the new ``(sp, n_aside, n_asks)``."""
    if ctl[N_PASTES] and paste_wanted(ctl, b, px):
        stack[sp, 0], stack[sp, 1] = node, state
        return sp + 1, n_aside, n_asks
    aside[n_aside, 0], aside[n_aside, 1] = node, state
    asks[n_asks] = ctl[_ASKED]
    return sp, n_aside + 1, n_asks + 1


@njit(cache=True, nogil=True)
def walk_round(nodes, below, classes, trans, facts, loops, class_words, plain_classes, plain_bytes, u_seq, u_steps,
               u_classes, params, ctl, path, sets, stack, sp, order, row, out, n_out, aside, asks, checks, plain_rows,
               chain_keys, chain_len, chain_rows, n_keys, ask, mask, b, px):
    """One round: walk the pairs on ``stack[:sp]`` (``sp < 0``: a walk's first round,
    the pairs of the trie's roots ``params[P_ROOT_LO:P_ROOT_HI]`` and the state
    ``params[P_START]``); returns (outcome, sp, n_out,
    n_asks, checks). The tokens found so far: in ``row`` (uint32 bits), but the long
    runs, ``out[:n_out]`` as ``(lo, hi)`` of ``order`` (``_emit``); a pair
    whose facts wait on a row Python must build goes to ``aside``, and back on the
    stack when the round ends, the row's state to ``asks``. On ``FULL`` the pair
    being walked is back on the stack too, and the buffers must grow. ``b``: the
    lazy DFA's construction buffers (``Buffers.builder_args``; used where
    ``params[P_BUILD]``), ``px`` its templates to paste (``Buffers.px``: a copy a
    pair's row meets is pasted at once, ``paste_wanted``); ``plain_rows``:
    ``fsm.trie.RunTrie.plain_rows``; ``chain_keys``: the byte sets known so far and
    their slots, ``chain_len`` / ``chain_rows``: the vocabulary's ``fsm.trie.ChainBank``
    (``RunTrie.chain_rows`` of each set, by slot; ``_chain``)."""
    n_aside = n_asks = 0
    cap = stack.shape[0]
    if sp < 0:  # a walk's first round: the trie's roots, from its start state
        sp = 0
        for root in range(params[P_ROOT_LO], params[P_ROOT_HI]):
            stack[sp, 0], stack[sp, 1] = root, params[P_START]
            sp += 1
    text_root, first_wide = params[P_TEXT_ROOT], params[P_FIRST_WIDE]
    budget, long_run = params[P_BUDGET], params[P_LONG_RUN]
    outcome = DONE
    while sp > 0:
        if n_out + 2 > out.shape[0]:
            outcome = FULL
            break
        n_out_before = n_out
        sp -= 1
        node = stack[sp, 0]
        state = stack[sp, 1]
        a, b_end = nodes[node, _START], nodes[node, _END]
        # Facts known are read here, not through the helpers: a call passes ~15
        # arrays, each reference-counted (a round would cost ~200 µs that way).
        asked = not (state < facts.shape[0] and trans[state, 0] != UNKNOWN) and not _ready(state, trans, facts,
                                                                                          params, ctl, b)
        whole = shortcut = False
        if not asked and node == text_root and first_wide >= 0:
            # ``start_pairs``' shortcut: text tokens that open with a non-ASCII
            # character are one run when every such character leads to one state
            # with room for the rest; the ASCII children are walked.
            after = _utf8(state, trans, facts, u_seq, u_steps, u_classes, sets, params, ctl, b)
            asked = after == _ASK
            if after >= 0:
                room = _room(after, TEXT_ROOM, trans, facts, plain_classes, u_seq, u_steps, u_classes, path, sets,
                             params, ctl, b)
                asked = room == _ASK
                if not asked and room >= params[P_REST_CHARS]:
                    n_out = _emit(nodes[first_wide, _LO], nodes[text_root, _HI], out, n_out, row, order, long_run)
                    b_end = first_wide
                    shortcut = True
        if not asked and not shortcut:
            kind = nodes[node, _KIND]
            if kind:  # a plain or text node: whole by its room (in bytes, or characters)
                col = ROOM if kind == _PLAIN else TEXT_ROOM
                room = facts[state, col]
                if room < 0:
                    room = _room(state, col, trans, facts, plain_classes, u_seq, u_steps, u_classes, path, sets,
                                 params, ctl, b)
                asked = room == _ASK
                whole = not asked and room >= nodes[node, _HEIGHT if kind == _PLAIN else _NEED]
            if not asked and not whole:
                if facts[state, LOOP] == UNKNOWN_LOOP:
                    asked = not _loop_known(state, trans, facts, loops, class_words, params, ctl, b)
                whole = not asked and facts[state, LOOP] == SOME_LOOP and loops_cover(loops, state, below, node)
        if asked:
            sp, n_aside, n_asks = _wait(node, state, stack, sp, aside, n_aside, asks, n_asks, ctl, b, px)
            continue
        if whole:
            n_out = _emit(nodes[node, _LO], nodes[node, _HI], out, n_out, row, order, long_run)
            continue
        if node == params[P_PLAIN_ROOT]:
            # Too little room for the longest plain token: where no plain byte is
            # taken once the room is spent, the plain tokens that fit are one row.
            room = facts[state, ROOM]
            if 0 <= room < plain_rows.shape[0] and _dies_after(state, room, trans, plain_classes):
                for w in range(row.shape[0]):
                    row[w] |= plain_rows[room, w]
                continue
            # Likewise where it takes fewer plain bytes, the same ones all along.
            key, n = _chain(state, trans, plain_classes, plain_bytes, plain_rows.shape[0] - 1, chain_keys, chain_len,
                            n_keys, ask, mask, params, ctl, b)
            if key == _CHAIN_ASKED:
                sp, n_aside, n_asks = _wait(node, state, stack, sp, aside, n_aside, asks, n_asks, ctl, b, px)
                continue
            if key >= 0:
                for w in range(row.shape[0]):
                    row[w] |= chain_rows[key, n, w]
                continue
        if sp + n_aside + (b_end - a) > cap or n_out + (b_end - a) + 1 > out.shape[0]:
            stack[sp, 0], stack[sp, 1] = node, state
            sp += 1
            n_out = n_out_before  # the shortcut's run is taken again (bits: no harm)
            outcome = FULL
            break
        own = nodes[node, _OWN]
        if own:
            n_out = _emit(nodes[node, _LO], nodes[node, _LO] + own, out, n_out, row, order, long_run)
        checks += b_end - a
        for child in range(a, b_end):
            target = trans[state, classes[nodes[child, _SYMBOL]]]
            if target >= 0:
                if nodes[child, _START] == nodes[child, _END]:  # a leaf: its own tokens
                    n_out = _emit(nodes[child, _LO], nodes[child, _HI], out, n_out, row, order, long_run)
                else:
                    stack[sp, 0], stack[sp, 1] = child, target
                    sp += 1
        if checks > budget:
            return OVER_BUDGET, sp, n_out, n_asks, checks
    for i in range(n_aside):  # fits: pushes kept stack + aside within the stack
        stack[sp, 0], stack[sp, 1] = aside[i, 0], aside[i, 1]
        sp += 1
    return outcome, sp, n_out, n_asks, checks


@njit(cache=True, nogil=True)
def runs_row(row, order, lo, hi, long_run, bank, bank_ids):
    """Set the bits of the tokens ``order[lo[i]:hi[i]]`` in a uint32 row (a walk's
    runs): a run of ``long_run`` tokens or more from its ``bank`` row (the next of
    ``bank_ids``, in order), the others token by token (``np.bitwise_or.at`` over
    them costs ~50 ns a token, and a numpy OR per long run a few µs)."""
    k = 0
    for i in range(lo.shape[0]):
        if hi[i] - lo[i] >= long_run:
            r = bank_ids[k]
            k += 1
            for w in range(row.shape[0]):
                row[w] |= bank[r, w]
        else:
            for j in range(lo[i], hi[i]):
                t = order[j]
                row[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
