"""The unit walk's kernels: ``grammars.grammar_index._walk_units`` as a depth-first
walk over a unit trie (tokens, or pieces), over the lexer's table or over one
terminal table, and pieces read one by one. Imported only where numba is installed;
the Python side (per-trie buffers and facts, the rounds of a walk) is
``grammars.unit_walk.CompiledUnitWalk``.

Python twins, and the tests that hold them equal:

- ``walk_py`` (a round of the walk; compiled by ``fsm.kernels.compiled``):
  ``grammars.grammar_index._walk_units`` and ``_walk_levels``
  (``tests/test_grammar.py::test_lexer_state_walks_give_the_brute_force_masks``, and the
  ``walk_modes`` tests of ``tests/test_json_recursive.py``, id ``byte_trie_compiled_depth_first``).
- ``table_walk_py`` (``_table_room``, ``_table_row``): ``walk_py`` over the lexer's
  own states (``tests/test_json_recursive.py::test_token_views_walked_over_rule_tables_are_the_lexer_walks``,
  ``test_table_walks_read_only_the_terminals_allowed``).
- ``read_pieces_py``: the piece view, ``GrammarIndex._build_piece_view`` and
  ``_piece_ends`` (``tests/test_json_recursive.py::test_pieces_read_over_rule_tables_are_the_piece_views``).
- ``read_lexer_pieces_py``: ``GrammarIndex._read_piece``
  (``tests/test_grammar.py::test_pieces_read_over_lexer_rows_are_read_one_by_one``).
- ``live_classes``: ``grammars.lexer.Lexer.live_classes``; ``group_exits``:
  ``grammar_index._exit_units`` then ``_Exits.of`` (both in the walk tests above).
- ``mark_below`` and ``group_exits`` with ``starts`` (a walk below a token view's
  exits, read into the positions of its rests: ``GrammarIndex._read_below``):
  ``_read_piece`` through ``read_lexer_pieces_py``
  (``tests/test_grammar.py::test_rests_read_by_walking_below_the_exits_are_read_one_by_one``).

::

    byte trie of units (tokens, or pieces)      lexer state L
    root ─"─> n1 ─a─> n2 ─b─> ...               pairs (node, state) pushed while
              │       └─c─> dead: an exit       the lexer takes the node's byte;
              └─ a token ends at n1: inside     a dead child's subtree leaves at
                                                its parent's depth

The numpy walk pays ~20 array calls per trie level whatever the frontier's size, so
a lexer state inside a key or a literal (a few live pairs) costs 0.3-1 ms. Here each
pair costs nanoseconds; a pair whose lexer state has no row yet is set aside, its
row is built in Python (``Lexer.ensure_rows``), and the walk resumes.

A node whose every byte below is a self-loop of its lexer state (``fsm.narrow``'s
rule: inside an open string, most ASCII subtrees) is taken whole, without walking
it: it has no exits, and its units all stay inside.

Over a rule's table (``table_walk_py``): a lexer state whose members all sit in
one state of one terminal table (98% of token views on recursive JSON Schemas:
a rule's points share one compiled subset construction) is walked over that table
itself, each pair carrying the terminals still alive as bits. The lexer makes no
state for the pairs the walk passes (a state and a row in Python per pair would
cost ~45% of a token view), and rows the table lacks are built in the kernel
(``fsm.kernels.subsets.build_row``, with their accept and live bits); Python builds
only where the construction meets a deferred fragment or a buffer must grow.
A counted string (``maxLength``, ``{1,500}``) has no self-loop: each character
moves on to the next count. There a node is taken whole by *room*
(``_table_room``, the rule of ``fsm.kernels.narrow``'s rooms): when every byte below
it leads its state alike, step after step, for at least as many bytes as any unit
below reads (the trie's heights). The chain is followed only as far as a node needs,
so rows are not built further ahead than the walk would. ``read_pieces_py`` reads a
few pieces (a token's rest after a lexeme ends) the same way, one by one, where a
piece view walks every piece of the vocabulary.

Cost notes: a walk visits each live (node, state) pair once, and lists each dead
child (``child_end - child_start`` checks per live pair). Inside an open string
that is most of the ~150k nodes of the pieces' trie (~0.5 ms a lexer state); the
self-loop rule leaves the subtrees holding non-ASCII bytes or a quote.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from guided.fsm.kernels import watch_first_compile
from guided.fsm.kernels.narrow import loops_cover
from guided.fsm.kernels.subsets import DONE, N_DFA, build_row, members_or

watch_first_compile()

UNKNOWN = -2  # grammars.lexer: a row not built yet


@njit(cache=True, nogil=True, inline="always")
def _takes_whole(state, node, trans, loops, loop_known, class_words, below):
    """Whether every byte below ``node`` is a self-loop of ``state`` (its subtree is
    taken whole); the state's self-loop bytes are found on its first ask
    (``loop_known``: 0 not yet, 1 none, 2 some, in ``loops``)."""
    if loop_known[state] == 0:
        loop_known[state] = 1
        for c in range(trans.shape[1]):
            if trans[state, c] == state:
                for w in range(4):
                    loops[state, w] |= class_words[c, w]
                loop_known[state] = 2
    return loop_known[state] == 2 and loops_cover(loops, state, below, node)


def walk_py(child_start, child_end, node_byte, byte_class, own, trans, below, loops, loop_known, class_words, stack, sp,
             runs, n_runs, wholes, n_wholes, exits, n_exits, asks, accepting, mids):
    """One round from the (node, state, depth) triples on ``stack[:sp]``: returns
    ``(sp, n_runs, n_wholes, n_exits, n_asks)``. ``runs``: nodes where a unit ends
    inside the lexeme (their own units); ``wholes``: nodes whose whole subtree stays
    inside (every byte below is a self-loop of their state: ``below``, ``loops``);
    ``exits``: (dead child, parent's state, parent's depth) at depths > 0; ``asks``:
    states whose rows must be built (their triples back on the stack after them).
    ``loop_known`` per lexer state: 0 not yet, 1 no self-loop, 2 some (in ``loops``).
    With ``mids`` (lexing with every end kept), a live child of a node whose state
    accepts (``accepting``: per lexer state, nonzero where some terminal accepts)
    is an exit too: the lexeme may end there and the units below read on after it."""
    n_asks = 0
    top = 0  # triples set aside go back to the bottom of the stack
    while sp > top:
        sp -= 1
        node, state, depth = stack[sp, 0], stack[sp, 1], stack[sp, 2]
        if trans[state, 0] == UNKNOWN:
            asks[n_asks] = state
            n_asks += 1
            stack[sp, 0], stack[sp, 1], stack[sp, 2] = stack[top, 0], stack[top, 1], stack[top, 2]
            stack[top, 0], stack[top, 1], stack[top, 2] = node, state, depth
            top += 1
            sp += 1
            continue
        ends_here = mids and depth > 0 and accepting[state] != 0
        if not ends_here and _takes_whole(state, node, trans, loops, loop_known, class_words, below):
            wholes[n_wholes] = node
            n_wholes += 1
            continue
        for child in range(child_start[node], child_end[node]):
            target = trans[state, byte_class[node_byte[child]]]
            if target >= 0:
                if own[child] > 0:
                    runs[n_runs] = child
                    n_runs += 1
                if child_end[child] > child_start[child]:
                    stack[sp, 0], stack[sp, 1], stack[sp, 2] = child, target, depth + 1
                    sp += 1
            if depth > 0 and (target < 0 or ends_here):
                exits[n_exits, 0], exits[n_exits, 1], exits[n_exits, 2] = child, state, depth
                n_exits += 1
    return top, n_runs, n_wholes, n_exits, n_asks


@njit(cache=True, nogil=True, inline="always")
def _table_row(state, trans, bits, known, nfa_bits, b):
    """Build table state ``state``'s row here (``fsm.kernels.subsets.build_row``) and
    the bits of the states it makes; False when Python must (a buffer to grow, a
    deferred fragment to build, no room for the bits)."""
    if build_row(state, b[0], b[1], b[2], b[3], b[4], b[5], b[6], trans, b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                 b[14]) != DONE:
        return False
    n = b[7][N_DFA]
    if n > bits.shape[1]:
        return False
    members_or(b[4], b[5], nfa_bits, known[0], n, bits)
    known[0] = n
    return True


@njit(cache=True, nogil=True, inline="always")
def _chain_target(state, trans, sizes, probes, class_words, chains, chain_to):
    """The state that most of ``state``'s bytes lead to, of those the bytes
    ``probes`` lead to (-1: none), its bytes set in ``chains[state]``: the step a
    counted string takes on any of its characters. Memoised in ``chain_to`` (-2:
    not known); ``state``'s row must be built."""
    if chain_to[state] != -2:
        return chain_to[state]
    best, best_size = -1, 0
    for p in range(len(probes)):
        t = trans[state, probes[p]]
        if t < 0 or t == best:
            continue
        size = 0
        for c in range(trans.shape[1]):
            if trans[state, c] == t:
                size += sizes[c]
        if size > best_size:
            best, best_size = t, size
    if best >= 0:
        for c in range(trans.shape[1]):
            if trans[state, c] == best:
                for w in range(4):
                    chains[state, w] |= class_words[c, w]
    chain_to[state] = best
    return best


@njit(cache=True, nogil=True, inline="always")
def _covers(words, a, b):
    """Whether byte set ``words[a]`` holds every byte of ``words[b]``."""
    for w in range(4):
        if words[b, w] & ~words[a, w]:
            return False
    return True


@njit(cache=True, nogil=True)
def _table_room(state, need, trans, bits, known, nfa_bits, b, sizes, probes, class_words, rooms, chains, chain_to,
                path, mids):
    """How many more bytes of ``chains[state]`` table state ``state`` takes, each
    byte of them leading alike and keeping the terminals alive as they are, found
    up to ``need``: the room, or ``need`` where it is at least that; or ``-2 - s``
    where the row of state ``s`` must be built in Python first. A chain goes on
    while each state's chain bytes hold the previous one's, so any text of
    ``chains[state]`` as long as the room follows it. ``rooms`` memoises per
    state: -1 not known, ``r >= 0`` exactly r, ``-3 - r`` at least r (a chain
    followed only as far as was needed, so rows are not built further ahead).
    With ``mids`` (lexing with every end kept) a chain stops at a state where some
    terminal accepts: a lexeme may end there, so what follows is not taken whole."""
    known_room = rooms[state]
    if known_room >= 0 or known_room <= -3 - need:
        return known_room if known_room >= 0 else need
    n, cur, tail, exact = 0, state, 0, True
    while True:
        if mids and bits[0, cur] != 0:
            if n == 0:
                rooms[cur] = 0
                return 0
            tail = 1  # the last state steps here, and the chain stops
            break
        r = rooms[cur]
        if n > 0 and (r >= 0 or r <= -3 - (need - n)):
            if not _covers(chains, cur, path[n - 1]):
                tail = 1
            else:
                exact = r >= 0
                tail = 1 + (r if exact else -3 - r)
            break
        if trans[cur, 0] == UNKNOWN and not _table_row(cur, trans, bits, known, nfa_bits, b):
            return -2 - cur
        t = _chain_target(cur, trans, sizes, probes, class_words, chains, chain_to)
        if n > 0 and not _covers(chains, cur, path[n - 1]):
            tail = 1  # the last state steps here, and the chain stops
            break
        path[n] = cur
        n += 1
        if t < 0 or bits[1, t] != bits[1, cur]:
            tail = 0
            break
        if n >= need:  # far enough: the states on the way have at least their rest
            for i in range(n):
                if rooms[path[i]] == -1 or -3 - rooms[path[i]] < need - i:
                    rooms[path[i]] = -3 - (need - i)
            return need
        cur = t
    # The rooms on the way: exact where the chain ended, else at least so much.
    for i in range(n - 1, -1, -1):
        if exact:
            rooms[path[i]] = tail
        elif rooms[path[i]] == -1 or -3 - rooms[path[i]] < tail:
            rooms[path[i]] = -3 - tail
        tail += 1
    return min(tail - 1, need)


def table_walk_py(child_start, child_end, node_byte, own, byte_table, trans, bits, known, nfa_bits, b, below, loops,
                   loop_known, class_words, height, sizes, probes, rooms, chains, chain_to, path, stack, sp, runs, n_runs,
                   wholes, n_wholes, exits, n_exits, asks, mids):
    """``walk_py`` over one terminal table instead of the lexer: a pair's state is
    (table state, terminals still alive as bits), the lexer's one-group state
    without interning it. ``byte_table``: the table's class of each byte;
    ``bits[1]``: per table state, the terminals it still leads to; a row not built
    yet is built here (``_table_row``), or its state is asked for.
    ``stack``/``exits`` rows: (node, table state, bits, depth). A self-loop keeps
    the bits (they are already within the state's live ones), so loops are per
    table state. A node below which every byte is of its state's chain, and no
    deeper than the state's room (``_table_room``: a counted string, such as
    ``maxLength``), is taken whole as well. ``mids``: as in ``walk_py``."""
    n_asks = 0
    top = 0
    while sp > top:
        sp -= 1
        node, state, alive_here, depth = stack[sp, 0], stack[sp, 1], stack[sp, 2], stack[sp, 3]
        ask, whole = -1, False  # a state whose row Python must build; the subtree taken whole
        ends_here = mids and depth > 0 and bits[0, state] & alive_here != 0
        if trans[state, 0] == UNKNOWN and not _table_row(state, trans, bits, known, nfa_bits, b):
            ask = state
        elif ends_here:
            pass
        elif _takes_whole(state, node, trans, loops, loop_known, class_words, below):
            whole = True
        elif height[node] > 1 and _chain_target(state, trans, sizes, probes, class_words, chains, chain_to) >= 0 \
                and loops_cover(chains, state, below, node):
            room = _table_room(state, height[node], trans, bits, known, nfa_bits, b, sizes, probes, class_words,
                               rooms, chains, chain_to, path, mids)
            ask, whole = (-2 - room, False) if room < -1 else (-1, room >= height[node])
        if ask >= 0:  # the pair set aside until Python has built the row
            asks[n_asks] = ask
            n_asks += 1
            for j in range(4):
                stack[sp, j] = stack[top, j]
            stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = node, state, alive_here, depth
            top += 1
            sp += 1
            continue
        if whole:
            wholes[n_wholes] = node
            n_wholes += 1
            continue
        for child in range(child_start[node], child_end[node]):
            target = trans[state, byte_table[node_byte[child]]]
            alive = bits[1, target] & alive_here if target >= 0 else 0
            if alive != 0:
                if own[child] > 0:
                    runs[n_runs] = child
                    n_runs += 1
                if child_end[child] > child_start[child]:
                    stack[sp, 0], stack[sp, 1], stack[sp, 2], stack[sp, 3] = child, target, alive, depth + 1
                    sp += 1
            if depth > 0 and (alive == 0 or ends_here):
                exits[n_exits, 0], exits[n_exits, 1] = child, state
                exits[n_exits, 2], exits[n_exits, 3] = bits[0, state] & alive_here, depth
                n_exits += 1
    return top, n_runs, n_wholes, n_exits, n_asks


def read_pieces_py(pieces, first_byte, suffix, byte_table, trans, bits, known, nfa_bits, b, start, alive_at_start,
                    i0, inside, keys, rests, mid):
    """Read each of ``pieces`` (from the ``i0``-th on) from table state ``start``
    with the terminals ``alive_at_start`` (a piece: its first byte ``first_byte``,
    of the table's class ``byte_table`` names, then the piece ``suffix`` names): ``inside[i]`` when all its
    bytes stay inside the lexeme; else where it leaves the lexeme after a byte
    at least, ``keys[i]`` (the terminals accepting the lexeme read) and
    ``rests[i]`` (the piece left); ``mid[i]`` when, after a byte at least, it
    passes a state where some terminal accepts and reads on (with every end kept,
    it may also leave there). Returns ``(len(pieces), -1)``, or ``(i, state)``
    where piece i met a row Python must build (``_table_row``)."""
    for i in range(i0, len(pieces)):
        state, alive, piece, offset = start, alive_at_start, pieces[i], 0
        inside[i], keys[i], rests[i], mid[i] = False, 0, -1, False
        while True:
            if trans[state, 0] == UNKNOWN and not _table_row(state, trans, bits, known, nfa_bits, b):
                return i, state
            target = trans[state, byte_table[first_byte[piece]]]
            after = bits[1, target] & alive if target >= 0 else 0
            if after == 0:
                if offset > 0:
                    keys[i], rests[i] = bits[0, state] & alive, piece
                break
            if offset > 0 and bits[0, state] & alive != 0:
                mid[i] = True
            state, alive, piece, offset = target, after, suffix[piece], offset + 1
            if piece < 0:
                inside[i] = True
                break
    return len(pieces), -1


def read_lexer_pieces_py(pieces, first_byte, byte_class, suffix, trans, accepting, start, i0, inside, accept, rests):
    """Read each of ``pieces`` (from the ``i0``-th on) from lexer state ``start``
    over the lexer's own rows (``trans``; ``byte_class``: the lexer's class of each
    byte; ``accepting``: each state's accept id), longest match: ``inside[i]`` when all its bytes stay inside the lexeme; else,
    where it leaves after a byte at least in an accepting state, ``accept[i]``
    (that accept id) and ``rests[i]`` (the piece left); ``accept[i] == -1`` where
    it dies without one. Returns ``(len(pieces), -1)``, or ``(i, state)`` where
    piece i met a row Python must build (``Lexer.ensure_rows``)."""
    for i in range(i0, len(pieces)):
        state, piece, offset = start, pieces[i], 0
        inside[i], accept[i], rests[i] = False, -1, -1
        while True:
            if trans[state, 0] == UNKNOWN:
                return i, state
            target = trans[state, byte_class[first_byte[piece]]]
            if target < 0:
                if offset > 0 and accepting[state] > 0:
                    accept[i], rests[i] = accepting[state], piece
                break
            state, piece, offset = target, suffix[piece], offset + 1
            if piece < 0:
                inside[i] = True
                break
    return len(pieces), -1


@njit(cache=True, nogil=True)
def live_classes(trans, state, to_table, live, alive, out):
    """The lexer classes (``out[:n]``, returns n) on which table state ``state``
    with the terminals ``alive`` has a successor still alive."""
    n = 0
    for c in range(len(to_table)):
        target = trans[state, to_table[c]]
        if target >= 0 and live[target] & alive:
            out[n] = c
            n += 1
    return n


@njit(cache=True, nogil=True)
def group_exits(nodes, keys, depths, order, lo, hi, first_rest, suffix, starts, shifts):
    """The units below each exit (dead child ``nodes[i]``, what the lexeme read
    before it accepts: ``keys[i]``, 0 for nothing, and its length ``depths[i]``),
    grouped by key: ``(keys, group starts, units, rests)``, group g's units
    ``units[starts[g]:starts[g + 1]]`` with the piece each reads after the lexeme
    (``first_rest[j]``, the piece unit ``order[j]`` reads after its first byte, less
    ``depth - 1`` bytes more, by ``suffix``: read in the order's own order, so the
    walk over a subtree's units reads memory in sequence). Given ``starts`` (not
    empty), each unit's place in rests that list subtrees one after another
    (``_shift``) instead of the unit: a walk below exits (``mark_below``)."""
    n = len(nodes)
    group = np.empty(n, dtype=np.int64)
    distinct = np.empty(n + 1, dtype=np.int64)
    sizes = np.zeros(n + 1, dtype=np.int64)
    n_keys = 0
    for i in range(n):
        key = keys[i]
        if key == 0:
            group[i] = -1
            continue
        g = 0
        while g < n_keys and distinct[g] != key:
            g += 1
        if g == n_keys:
            distinct[g] = key
            n_keys += 1
        group[i] = g
        sizes[g] += hi[nodes[i]] - lo[nodes[i]]
    begin = np.zeros(n_keys + 1, dtype=np.int64)
    for g in range(n_keys):
        begin[g + 1] = begin[g] + sizes[g]
    fill = begin[:n_keys].copy()
    units = np.empty(begin[n_keys], dtype=np.int64)
    rests = np.empty(begin[n_keys], dtype=np.int64)
    places = len(starts) > 0
    for i in range(n):
        g = group[i]
        if g < 0:
            continue
        first = lo[nodes[i]]
        shift = _shift(starts, shifts, first) if places else 0
        f = fill[g]
        for j in range(first, hi[nodes[i]]):
            piece = first_rest[j]
            for _ in range(depths[i] - 1):
                piece = suffix[piece]
            units[f] = j + shift if places else order[j]
            rests[f] = piece
            f += 1
        fill[g] = f
    return distinct[:n_keys], begin, units, rests


@njit(cache=True, nogil=True, inline="always")
def _shift(starts, shifts, j):
    """The shift from position ``j`` of the token order to its place in rests that
    list subtrees one after another (``starts``: the subtrees' first positions,
    sorted; ``shifts``: what to add to a position in each)."""
    lo, hi = 0, len(starts)
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if starts[mid] <= j:
            lo = mid
        else:
            hi = mid
    return shifts[lo]


@njit(cache=True, nogil=True)
def mark_below(entered, runs, wholes, lo, hi, own, starts, shifts, inside):
    """Set ``inside`` at the places of the units a walk below exits found inside the
    lexeme: the own units of ``entered`` and ``runs``, every unit below ``wholes``
    (positions of the order mapped by ``starts`` / ``shifts``, see ``_shift``)."""
    for which in range(3):
        nodes = entered if which == 0 else (runs if which == 1 else wholes)
        for x in nodes:
            first = lo[x]
            stop = hi[x] if which == 2 else first + own[x]
            if stop > first:
                at = first + _shift(starts, shifts, first)
                for t in range(stop - first):
                    inside[at + t] = True
