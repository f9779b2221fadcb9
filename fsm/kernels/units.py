"""``grammars.grammar_index._walk_units`` as a depth-first walk compiled with numba
(used where it is installed: the `fast` extra).

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

Over a rule's table (``_table_walk_py``): a lexer state whose members all sit in
one state of one terminal table (98% of token views on recursive JSON Schemas:
a rule's points share one compiled subset construction) is walked over that table
itself, each pair carrying the terminals still alive as bits. The lexer makes no
state for the pairs the walk passes (it made one, and a row in Python, per pair
before: ~45% of a token view), and rows the table lacks are built in the kernel
(``fsm.kernels.subsets._row``, with their accept and live bits); Python builds
only where the construction meets a deferred fragment or a buffer must grow.
A counted string (``maxLength``, ``{1,500}``) has no self-loop: each character
moves on to the next count. There a node is taken whole by *room*
(``_table_room``, the rule of ``fsm.kernels.narrow``'s rooms): when every byte below
it leads its state alike, step after step, for at least as many bytes as any unit
below reads (``_height``). The chain is followed only as far as a node needs, so
rows are not built further ahead than the walk would. On o79409 (strings of
``maxLength`` 250 in a recursive schema) its masks summed ~0.9 -> ~0.6 s.
``read_pieces`` reads a few pieces (a token's rest after a lexeme ends) the same
way, one by one, where a piece view walked every piece of the vocabulary.

Cost notes: a walk visits each live (node, state) pair once, and lists each dead
child (``child_end - child_start`` checks per live pair). Inside an open string
that was most of the ~150k nodes of the pieces' trie (~0.5 ms a lexer state); the
self-loop rule leaves the subtrees holding non-ASCII bytes or a quote. The buffers
hold one entry per trie node at most (a trie has one state per node in a walk),
kept per trie and shared by its walkers (``_scratch``).
"""

from __future__ import annotations

import weakref

import numpy as np
from numba import njit

from guided.fsm.kernels import compiled
from guided.fsm.kernels.narrow import loops_cover
from guided.fsm.kernels.subsets import _DONE, _N_DFA, _row, members_or
from guided.fsm.narrow import below_words, class_words
from guided.fsm.trie import subtree_heights

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


def _walk_py(child_start, child_end, node_class, own, trans, below, loops, loop_known, class_words, stack, sp, runs,
             n_runs, wholes, n_wholes, exits, n_exits, asks, accepting, mids):
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
            target = trans[state, node_class[child]]
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
    """Build table state ``state``'s row here (``fsm.kernels.subsets._row``) and
    the bits of the states it makes; False when Python must (a buffer to grow, a
    deferred fragment to build, no room for the bits)."""
    if _row(state, b[0], b[1], b[2], b[3], b[4], b[5], b[6], trans, b[7], b[8], b[9], b[10], b[11], b[12], b[13],
            b[14]) != _DONE:
        return False
    n = b[7][_N_DFA]
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


def _table_walk_py(child_start, child_end, node_class, own, to_table, trans, bits, known, nfa_bits, b, below, loops,
                   loop_known, class_words, height, sizes, probes, rooms, chains, chain_to, path, stack, sp, runs, n_runs,
                   wholes, n_wholes, exits, n_exits, asks, mids):
    """``_walk_py`` over one terminal table instead of the lexer: a pair's state is
    (table state, terminals still alive as bits), the lexer's one-group state
    without interning it. ``to_table``: the table's class of each lexer class;
    ``bits[1]``: per table state, the terminals it still leads to; a row not built
    yet is built here (``_table_row``), or its state is asked for.
    ``stack``/``exits`` rows: (node, table state, bits, depth). A self-loop keeps
    the bits (they are already within the state's live ones), so loops are per
    table state. A node below which every byte is of its state's chain, and no
    deeper than the state's room (``_table_room``: a counted string, such as
    ``maxLength``), is taken whole as well. ``mids``: as in ``_walk_py``."""
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
            target = trans[state, to_table[node_class[child]]]
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


def _read_pieces_py(pieces, first_class, suffix, to_table, trans, bits, known, nfa_bits, b, start, alive_at_start,
                    i0, inside, keys, rests, mid):
    """Read each of ``pieces`` (from the ``i0``-th on) from table state ``start``
    with the terminals ``alive_at_start`` (a piece: its first byte's lexer class
    ``first_class``, then the piece ``suffix`` names): ``inside[i]`` when all its
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
            target = trans[state, to_table[first_class[piece]]]
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


@njit(cache=True, nogil=True)
def _live_classes(trans, state, to_table, live, alive, out):
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
def group_exits(nodes, keys, depths, order, lo, hi, unit_piece, suffix):
    """The units below each exit (dead child ``nodes[i]``, what the lexeme read
    before it accepts: ``keys[i]``, 0 for nothing, and its length ``depths[i]``),
    grouped by key: ``(keys, starts, units, rests)``, group g's units
    ``units[starts[g]:starts[g + 1]]`` with the piece each reads after the lexeme
    (``unit_piece`` of the unit less its first ``depth`` bytes, by ``suffix``)."""
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
    starts = np.zeros(n_keys + 1, dtype=np.int64)
    for g in range(n_keys):
        starts[g + 1] = starts[g] + sizes[g]
    fill = starts[:n_keys].copy()
    units = np.empty(starts[n_keys], dtype=np.int64)
    rests = np.empty(starts[n_keys], dtype=np.int64)
    for i in range(n):
        g = group[i]
        if g < 0:
            continue
        for j in range(lo[nodes[i]], hi[nodes[i]]):
            u = order[j]
            piece = unit_piece[u]
            for _ in range(depths[i]):
                piece = suffix[piece]
            units[fill[g]] = u
            rests[fill[g]] = piece
            fill[g] += 1
    return distinct[:n_keys], starts, units, rests


class CompiledUnitWalk:
    """The compiled walks over one unit trie for one lexer (buffers: ``_scratch``).

    Example::

        >>> walker = CompiledUnitWalk(trie, symbol_class, own, lexer.byte_to_class)
        >>> runs, wholes, exits = walker.walk(lexer, start)
    """

    def __init__(self, trie, symbol_class: np.ndarray, own: np.ndarray, byte_to_class: np.ndarray):
        self._walk = compiled(_walk_py)
        self._table_walk = compiled(_table_walk_py)
        self._read_pieces = compiled(_read_pieces_py)
        # walk_table's facts: per lexer table its classes, per rows' owner the loops.
        self._to_table: dict[int, np.ndarray] = {}
        self._facts: dict = {}
        self.child_start, self.child_end = _children(trie)
        self.node_class = np.ascontiguousarray(symbol_class, dtype=np.int64)
        self.own = np.ascontiguousarray(own, dtype=np.int64)
        self.below = _below(trie)
        self.height = _height(trie)
        self._cap = int(self.height.max(initial=0))  # no unit reads more bytes below a node
        self.class_words = class_words(byte_to_class)
        self.loops = np.zeros((0, 4), dtype=np.uint64)
        self.loop_known = np.zeros(0, dtype=np.int64)
        self._trie = trie

    def walk(self, lexer, start: int, mids: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(runs, wholes, exits)`` from lexer state ``start``: the nodes whose own
        units stay inside the lexeme, those whose whole subtree does, and the exits
        as ``[k, 3]`` (node, lexer state, depth); with ``mids``, also where the
        lexeme may end and units read on (``_walk_py``)."""
        sc = _scratch(self._trie)
        try:
            sc.stack[0, :3] = (0, start, 0)
            sp, n_runs, n_wholes, n_exits = 1, 0, 0, 0
            while sp:
                # (the lexer may have grown: facts for its new states)
                self.loops, self.loop_known = _grown_loops(self.loops, self.loop_known, len(lexer.transitions))
                sp, n_runs, n_wholes, n_exits, n_asks = self._walk(
                    self.child_start, self.child_end, self.node_class, self.own, lexer.transitions, self.below,
                    self.loops, self.loop_known, self.class_words, sc.stack, sp, sc.runs, n_runs, sc.wholes, n_wholes,
                    sc.exits, n_exits, sc.asks, lexer.accept_id_array(), mids)
                if not n_asks:
                    break
                lexer.ensure_rows(sc.asks[:n_asks])
            return sc.runs[:n_runs].copy(), sc.wholes[:n_wholes].copy(), sc.exits[:n_exits, :3].copy()
        finally:
            _SCRATCH[self._trie].append(sc)

    def read_pieces(self, lexer, k: int, start: int, bits: int, pieces: np.ndarray, first_class: np.ndarray,
                    suffix: np.ndarray):
        """``(inside, keys, rests, mid)`` of ``pieces`` read from the lexer's one-group
        state ``(k, start, bits)`` over table ``k`` (``_read_pieces_py``): what a
        piece view says of them, for a few pieces, without walking every piece."""
        table, to_table = lexer.table(k), self._table_classes(lexer, k)
        n = len(pieces)
        inside, keys, rests = np.empty(n, dtype=np.bool_), np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        mid = np.empty(n, dtype=np.bool_)
        i = 0
        while True:
            trans, table_bits, known, nfa_bits, builder = table.walk_builder()
            i, ask = self._read_pieces(pieces, first_class, suffix, to_table, trans, table_bits, known, nfa_bits,
                                       builder, start, bits, i, inside, keys, rests, mid)
            table.build_rows((ask,) if ask >= 0 else ())
            if i == n:
                return inside, keys, rests, mid

    def live_classes(self, lexer, k: int, start: int, bits: int) -> tuple[int, ...]:
        """``Lexer.live_classes`` of the one-group state ``(k, start, bits)``, from
        table ``k``'s row (built by a walk from there), without making the lexer's
        row or its states."""
        table, to_table = lexer.table(k), self._table_classes(lexer, k)
        trans, table_bits = table.walk_builder()[:2]
        if trans[start, 0] == UNKNOWN:
            table.build_rows((start,))
            trans, table_bits = table.walk_builder()[:2]
        out = np.empty(len(to_table), dtype=np.int64)
        return tuple(out[: _live_classes(trans, start, to_table, table_bits[1], bits, out)].tolist())

    def _table_classes(self, lexer, k: int) -> np.ndarray:
        to_table = self._to_table.get(k)
        if to_table is None:
            to_table = self._to_table[k] = np.ascontiguousarray(lexer.table_classes(k), dtype=np.int64)
        return to_table

    def walk_table(self, lexer, k: int, start: int, bits: int, mids: bool = False):
        """``walk`` from the lexer's one-group state ``(k, start, bits)``
        (``Lexer.table_group``), over table ``k`` itself: the lexer makes no state or
        row for the pairs the walk passes. Exits come as ``[k, 4]`` (node, table
        state, the terminals that accept the lexeme read before the node, depth)."""
        table, to_table = lexer.table(k), self._table_classes(lexer, k)
        # Tables whose rows are one construction's (a grammar rule's points) share its
        # facts (rooms differ with ``mids``: there a chain stops where a lexeme may end).
        facts = self._facts.get((table.rows_owner, mids))
        if facts is None:
            facts = self._facts[(table.rows_owner, mids)] = _TableFacts(table.byte_to_class, self._cap)
        sc = _scratch(self._trie)
        try:
            sc.stack[0] = (0, start, bits, 0)
            sp, n_runs, n_wholes, n_exits = 1, 0, 0, 0
            while True:
                trans, table_bits, known, nfa_bits, builder = table.walk_builder()
                facts.grow(len(trans))  # (the table may have grown)
                sp, n_runs, n_wholes, n_exits, n_asks = self._table_walk(
                    self.child_start, self.child_end, self.node_class, self.own, to_table, trans, table_bits, known,
                    nfa_bits, builder, self.below, facts.loops, facts.loop_known, facts.words, self.height,
                    facts.sizes, facts.probes, facts.rooms, facts.chains, facts.chain_to, facts.path, sc.stack, sp,
                    sc.runs, n_runs, sc.wholes, n_wholes, sc.exits, n_exits, sc.asks, mids)
                # Rows asked for, or none: either way the table takes in the states made.
                table.build_rows(np.unique(sc.asks[:n_asks]).tolist() if n_asks else ())
                if not n_asks:
                    return sc.runs[:n_runs].copy(), sc.wholes[:n_wholes].copy(), sc.exits[:n_exits].copy()
        finally:
            _SCRATCH[self._trie].append(sc)


#: Bytes whose targets are a table state's candidate chain steps (``_chain_target``):
#: letters, digits and a space cover counted strings and patterns of words or numbers.
_PROBE_BYTES = b"aA0 "


class _TableFacts:
    """What walks over one table construction memoise per table state: the
    self-loop bytes (``loops``, ``loop_known``), the room and chain bytes
    (``rooms``, -1 not known; ``chains``), and the table's byte classes read as
    sets (``words``), sizes, and the classes of ``_PROBE_BYTES``."""

    __slots__ = ("words", "sizes", "probes", "loops", "loop_known", "rooms", "chains", "chain_to", "path")

    def __init__(self, byte_to_class: np.ndarray, cap: int):
        self.words = class_words(byte_to_class)
        classes = np.asarray(byte_to_class[:256], dtype=np.int64)
        self.sizes = np.bincount(classes, minlength=len(self.words)).astype(np.int64)
        self.probes = np.unique(classes[list(_PROBE_BYTES)])
        self.loops, self.loop_known = np.zeros((0, 4), np.uint64), np.zeros(0, dtype=np.int64)
        self.rooms, self.chain_to = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        self.chains = np.zeros((0, 4), np.uint64)
        self.path = np.zeros(cap + 1, dtype=np.int64)  # a room's chain, in the kernel

    def grow(self, n: int) -> None:
        """Room for ``n`` table states (the new ones not known)."""
        if len(self.rooms) >= n:
            return
        self.loops, self.loop_known = _grown_loops(self.loops, self.loop_known, n)
        rooms, chain_to = np.full(n, -1, dtype=np.int64), np.full(n, -2, dtype=np.int64)
        rooms[: len(self.rooms)], chain_to[: len(self.chain_to)] = self.rooms, self.chain_to
        chains = np.zeros((n, 4), dtype=np.uint64)
        chains[: len(self.chains)] = self.chains
        self.rooms, self.chain_to, self.chains = rooms, chain_to, chains


def _grown_loops(loops: np.ndarray, loop_known: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``loops`` and ``loop_known`` with room for ``n`` states (the new ones not known)."""
    if len(loop_known) >= n:
        return loops, loop_known
    grown = np.zeros((n, 4), dtype=np.uint64)
    grown[: len(loops)] = loops
    known = np.zeros(n, dtype=np.int64)
    known[: len(loop_known)] = loop_known
    return grown, known


class _Scratch:
    """A walk's buffers over one trie: one entry per trie node at most (a walk has
    one pair per node), written before they are read."""

    __slots__ = ("stack", "runs", "wholes", "exits", "asks")

    def __init__(self, n: int):
        self.stack, self.exits = np.empty((n, 4), dtype=np.int64), np.empty((n, 4), dtype=np.int64)
        self.runs, self.wholes, self.asks = (np.empty(n, dtype=np.int64) for _ in range(3))


# Free buffers per trie, shared by the walkers of every grammar over it: a walker's
# own (~20 MB for the pieces' trie) cost ~8-20 ms to allocate, paid in the mask of
# each grammar that first needed it. A walk takes a set (or makes one, when other
# threads hold them all) and gives it back.
_SCRATCH: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _scratch(trie) -> _Scratch:
    free = _SCRATCH.get(trie)
    if free is None:
        free = _SCRATCH.setdefault(trie, [])
    try:
        return free.pop()
    except IndexError:
        return _Scratch(trie.num_nodes + 1)


_CHILDREN: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _children(trie) -> tuple[np.ndarray, np.ndarray]:
    """A trie's child ranges as int64 arrays, made once per trie."""
    got = _CHILDREN.get(trie)
    if got is None:
        got = _CHILDREN[trie] = (np.ascontiguousarray(trie.child_start, dtype=np.int64),
                                 np.ascontiguousarray(trie.child_end, dtype=np.int64))
    return got


_BELOW: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _below(trie) -> np.ndarray:
    """``fsm.narrow.below_words`` of a unit trie (its first level carries bytes),
    computed once per trie (~0.1 s for the pieces of a 49k vocabulary)."""
    got = _BELOW.get(trie)
    if got is None:
        got = _BELOW[trie] = below_words(trie, first_byte_level=1)
    return got


_HEIGHT: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _height(trie) -> np.ndarray:
    """Per node of a unit trie, the most bytes a unit reads below it (0 at a leaf),
    computed once per trie."""
    got = _HEIGHT.get(trie)
    if got is None:
        got = _HEIGHT[trie] = subtree_heights(trie)
    return got
