"""The Python side of the compiled unit walk (kernels: ``fsm.kernels.units``): a
walker per unit trie and lexer that runs the walk's rounds, builds the rows a round
asks for, and keeps what walks memoise. Imported only where numba is installed (by
``grammars.grammar_index._UnitTrie``); without numba the numpy walk runs
(``grammar_index._walk_units``).

The walk's buffers hold one entry per trie node at most (a trie has one state per
node in a walk), kept per trie and shared by its walkers (``_scratch``); per table
construction, the facts its walks memoise (``_TableFacts``); per trie, its child
ranges, byte sets below each node and heights, computed once.
"""

from __future__ import annotations

import weakref

import numpy as np

from guided.fsm.kernels import compiled
from guided.fsm.kernels.units import UNKNOWN, read_lexer_pieces_py, read_pieces_py, table_walk_py, walk_py
from guided.fsm.kernels.units import live_classes as table_live_classes
from guided.fsm.narrow import below_words, class_words
from guided.fsm.trie import subtree_heights


class CompiledUnitWalk:
    """The compiled walks over one unit trie for one lexer's byte classes (the
    kernels of ``fsm.kernels.units``; buffers: ``_scratch``).

    Args:
        trie: the units' byte trie (``fsm.trie.Trie``: tokens, or pieces).
        node_byte: each trie node's byte (``VocabularyBytes.node_bytes``).
        own: per node, how many units end there.
        byte_to_class: the lexer's class of each byte.

    Example::

        >>> walker = CompiledUnitWalk(trie, vb.node_bytes, own, lexer.byte_to_class)
        >>> runs, wholes, exits = walker.walk(lexer, start)
    """

    def __init__(self, trie, node_byte: np.ndarray, own: np.ndarray, byte_to_class: np.ndarray):
        self._walk = compiled(walk_py)
        self._table_walk = compiled(table_walk_py)
        self._read_pieces = compiled(read_pieces_py)
        # walk_table's facts: per lexer table its classes (of the lexer's classes, of
        # bytes), per rows' owner the loops.
        self._to_table: dict[int, np.ndarray] = {}
        self._byte_table: dict[int, np.ndarray] = {}
        self._facts: dict = {}
        self.child_start, self.child_end = _children(trie)
        # (a node's class is read through its byte: no per-node array for each lexer)
        self.node_byte = np.ascontiguousarray(node_byte, dtype=np.int64)
        self.byte_class = np.ascontiguousarray(byte_to_class, dtype=np.int64)
        self.own = np.ascontiguousarray(own, dtype=np.int64)
        self.below = _below(trie)
        self.height = _height(trie)
        self._cap = int(self.height[0]) if len(self.height) else 0  # the root's: no unit reads more bytes
        self.class_words = class_words(byte_to_class)
        self.loops = np.zeros((0, 4), dtype=np.uint64)
        self.loop_known = np.zeros(0, dtype=np.int64)
        self._trie = trie

    def walk(self, lexer, start: int, mids: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(runs, wholes, exits)`` from lexer state ``start``: the nodes whose own
        units stay inside the lexeme, those whose whole subtree does, and the exits
        as ``[k, 3]`` (node, lexer state, depth); with ``mids``, also where the
        lexeme may end and units read on (``walk_py``)."""
        return self._walk_from(lexer, np.zeros(1, dtype=np.int64), np.array([start]), np.zeros(1, dtype=np.int64),
                               mids)

    def walk_below(self, lexer, start: int, nodes: np.ndarray, depths: np.ndarray):
        """``walk`` of the units below ``nodes`` (each at ``depths[i]`` bytes below
        the root), their bytes from node ``nodes[i]``'s own on read from lexer state
        ``start``: what a fresh lexeme reads of the rests a token view's exits leave
        (``GrammarIndex._read_below``). Returns ``(entered, runs, wholes, exits)``:
        the nodes whose byte ``start`` takes, and ``walk``'s three from there."""
        if lexer.transitions[start, 0] == UNKNOWN:
            lexer.ensure_rows(np.array([start]))
        target = lexer.transitions[start, self.byte_class[self.node_byte[nodes]]]
        alive = target >= 0
        entered = nodes[alive]
        return (entered, *self._walk_from(lexer, entered, target[alive], depths[alive] + 1, False))

    def _walk_from(self, lexer, nodes: np.ndarray, states: np.ndarray, depths: np.ndarray, mids: bool):
        """``walk``'s rounds from the (node, lexer state, depth) triples given."""
        sc = _scratch(self._trie)
        try:
            sp = len(nodes)
            sc.stack[:sp, 0], sc.stack[:sp, 1], sc.stack[:sp, 2] = nodes, states, depths
            n_runs, n_wholes, n_exits = 0, 0, 0
            while sp:
                # (the lexer may have grown: facts for its new states)
                self.loops, self.loop_known = _grown_loops(self.loops, self.loop_known, len(lexer.transitions))
                sp, n_runs, n_wholes, n_exits, n_asks = self._walk(
                    self.child_start, self.child_end, self.node_byte, self.byte_class, self.own, lexer.transitions,
                    self.below, self.loops, self.loop_known, self.class_words, sc.stack, sp, sc.runs, n_runs,
                    sc.wholes, n_wholes, sc.exits, n_exits, sc.asks, lexer.accept_id_array(), mids)
                if not n_asks:
                    break
                lexer.ensure_rows(sc.asks[:n_asks])
            return sc.runs[:n_runs].copy(), sc.wholes[:n_wholes].copy(), sc.exits[:n_exits, :3].copy()
        finally:
            _SCRATCH[self._trie].append(sc)

    def read_pieces(self, lexer, k: int, start: int, bits: int, pieces: np.ndarray, first_byte: np.ndarray,
                    suffix: np.ndarray):
        """``(inside, keys, rests, mid)`` of ``pieces`` read from the lexer's one-group
        state ``(k, start, bits)`` over table ``k`` (``read_pieces_py``): what a
        piece view says of them, for a few pieces, without walking every piece."""
        table, byte_table = lexer.table(k), self._byte_classes(lexer, k)
        n = len(pieces)
        inside, keys, rests = np.empty(n, dtype=np.bool_), np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        mid = np.empty(n, dtype=np.bool_)
        i = 0
        while True:
            trans, table_bits, known, nfa_bits, builder = table.walk_builder()
            i, ask = self._read_pieces(pieces, first_byte, suffix, byte_table, trans, table_bits, known, nfa_bits,
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
        return tuple(out[: table_live_classes(trans, start, to_table, table_bits[1], bits, out)].tolist())

    def _table_classes(self, lexer, k: int) -> np.ndarray:
        to_table = self._to_table.get(k)
        if to_table is None:
            to_table = self._to_table[k] = np.ascontiguousarray(lexer.table_classes(k), dtype=np.int64)
        return to_table

    def _byte_classes(self, lexer, k: int) -> np.ndarray:
        """Table ``k``'s byte class of each byte."""
        got = self._byte_table.get(k)
        if got is None:
            got = self._byte_table[k] = self._table_classes(lexer, k)[self.byte_class]
        return got

    def walk_table(self, lexer, k: int, start: int, bits: int, mids: bool = False):
        """``walk`` from the lexer's one-group state ``(k, start, bits)``
        (``Lexer.table_group``), over table ``k`` itself: the lexer makes no state or
        row for the pairs the walk passes. Exits come as ``[k, 4]`` (node, table
        state, the terminals that accept the lexeme read before the node, depth)."""
        table, byte_table = lexer.table(k), self._byte_classes(lexer, k)
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
                    self.child_start, self.child_end, self.node_byte, self.own, byte_table, trans, table_bits, known,
                    nfa_bits, builder, self.below, facts.loops, facts.loop_known, facts.words, self.height,
                    facts.sizes, facts.probes, facts.rooms, facts.chains, facts.chain_to, facts.path, sc.stack, sp,
                    sc.runs, n_runs, sc.wholes, n_wholes, sc.exits, n_exits, sc.asks, mids)
                # Rows asked for, or none: either way the table takes in the states made.
                table.build_rows(np.unique(sc.asks[:n_asks]).tolist() if n_asks else ())
                if not n_asks:
                    return sc.runs[:n_runs].copy(), sc.wholes[:n_wholes].copy(), sc.exits[:n_exits].copy()
        finally:
            _SCRATCH[self._trie].append(sc)


def read_lexer_pieces(lexer, start: int, pieces: np.ndarray, first_byte: np.ndarray, suffix: np.ndarray):
    """``(inside, accept, rests)`` of ``pieces`` read from lexer state ``start`` over
    the lexer's own rows (``fsm.kernels.units.read_lexer_pieces_py``), the rows it
    lacks built as it meets them: ``GrammarIndex._read_piece`` of each, for any
    lexer state, without walking every piece of the vocabulary."""
    read = compiled(read_lexer_pieces_py)
    n = len(pieces)
    inside, accept, rests = np.empty(n, dtype=np.bool_), np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    i = 0
    while True:
        i, ask = read(pieces, first_byte, lexer.byte_to_class, suffix, lexer.transitions, lexer.accept_id_array(), start,
                      i, inside, accept, rests)
        if i == n:
            return inside, accept, rests
        lexer.ensure_rows(np.array([ask]))


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
# own (~20 MB for the pieces' trie) would cost ~8-20 ms to allocate, paid in the mask
# of each grammar that first needs it. A walk takes a set (or makes one, when other
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


def _children(trie) -> tuple[np.ndarray, np.ndarray]:
    """A trie's child ranges as int64 arrays, made once per trie."""
    return trie.derive("children", lambda t: (np.ascontiguousarray(t.child_start, dtype=np.int64),
                                               np.ascontiguousarray(t.child_end, dtype=np.int64)))


def _below(trie) -> np.ndarray:
    """``fsm.narrow.below_words`` of a unit trie (its first level carries bytes),
    computed once per trie (~0.1 s for the pieces of a 49k vocabulary)."""
    return trie.derive("below", lambda t: below_words(t, first_byte_level=1))


def _height(trie) -> np.ndarray:
    """Per node of a unit trie, the most bytes a unit reads below it (0 at a leaf),
    computed once per trie."""
    return trie.derive("height", subtree_heights)
