"""Token masks for a grammar: lexer work precomputed per lexer state, parser work
only where a token completes a terminal.

::

    token t from (parser P, lexer state L):

      bytes of t  ──stay inside the lexeme──────────────> allowed, whatever P is
                                                          (precomputed per L: "inside row")
                  ──die at offset k > 0, where L·t[:k]
                    accepts terminals E──> P' = P scan E, then t[k:] from a fresh lexeme
                                            (grouped by E; t[k:] is a *piece*, see below)
                  ──die at offset 0 (L accepts E)──> P' = P scan E; t allowed iff it is
                                            allowed from (P', fresh lexeme): that mask,
                                            cached on P', AND "t's first byte ends L"

A *piece* is any nonempty suffix of a token's bytes (112k distinct for SmolLM2's 49k
tokens). For the lexer state that starts a lexeme of the terminals a parser
state allows, the "piece view" says for every piece whether it stays inside that
lexeme or where it leaves it, so a token that crosses several terminals (``"},``) is
checked by a few array gathers per terminal boundary, grouped by the terminals
completed, never by walking its bytes again.

Exactness: lexing is longest match among the allowed terminals (see
``grammars.lexer``), so a token's reading is unique and the mask allows exactly the
tokens that ``GrammarIndex.consume`` accepts. Every lexer state can still reach an
accepting one and the grammar is trimmed, so an allowed token leaves a state from
which the parse can go on, with one caveat of longest match: a grammar that puts two
terminals back to back with no separator, where the first could swallow the second's
first bytes (``NAME NAME``), can reach a state where nothing fits.

With ``every_end`` (grammars compiled from recursive JSON Schemas), a lexeme may end
wherever its terminals accept, even where it could go on. A token then also leaves
at every offset > 0 where the lexeme read so far accepts and the token reads on
(its *mid exits*: the walks list them beside the dead children), and a state with
an accepting lexeme allows whatever the next lexeme allows, not only the tokens whose
first byte ends it. A matcher state is then one reading or several (``Readings``),
one per lexer state, readings meeting in a lexer state merged into one Earley set
(``EarleyParser.merge``); its mask is the union of theirs. A piece read from a fresh
lexeme is read by longest match first (compiled, in bulk), and only the refused
ones that pass an accepting state on the way are read again with every end
(``_piece_ends``, in Python; they are rare).

Cost notes: one lexer state's view is one walk over the vocabulary's trie (over
byte classes where the lexer has few), cached for the life of the guide: in numpy
~0.1-0.4 ms inside a key or a literal, where few nodes stay live, ~2-5 ms inside an
open string, where most of the ~100k do; compiled (``grammars.unit_walk``,
depth first over live pairs, over the terminals' own table where they share one)
microseconds for a key and ~0.1 ms for an open string, plus the rows it builds. A
mask is a copy of the inside row, plus, per group of completed terminals, a
memoised parser scan and the group's rests read from the next lexeme's start:
compiled, by one walk of the trie below the nodes where the group's tokens left
the lexeme (``_read_below``: ~0.1 ms for the 32k tokens after whitespace) or piece
by piece for smaller sets that are not such a group; else through the piece view
(one walk of every piece). Token views whose tokens leave at the same nodes share
the group's arrays, and with them what was read of it.
What a group of rests reads after a parse state is memoised on the state cut a few
open constructs deep (``EarleyParser.cut``), so states that differ only further down
their stacks share it: a new state's mask costs a few Earley steps (~20 µs each in
Python) where its innermost constructs are new, and lookups where they are not. A
group whose rests once completed an item below the cut starts one depth deeper from
then on (``_depth_hint``). Where a group's lexeme opens a construct like the one being read (``-`` after ``-``), its
rests read on from the same cut set: every suffix of such pieces is read with them,
once (``_read_folded``), so a token of k dashes costs one read, not k.
"""

from __future__ import annotations

import weakref
from functools import partial

import numpy as np

from guided.fsm.arrays import spans
from guided.fsm.gc_pause import gc_paused
from guided.fsm.index import CLASS_TRIE_MAX_CLASSES, bitmask_words, pack_bits
from guided.fsm.kernels import AVAILABLE as COMPILED_AVAILABLE
from guided.fsm.trie import LONG_RUN, VocabularyBytes, class_trie_of, node_depth, set_bits, vocabulary_bytes

from .earley import EarleyParser, EarleySet, OpaqueOrigin
from .lexer import Lexer

#: Parse states cached (across sequences) before the cache is dropped (see ``drop_caches``).
MAX_CACHED_SCANS = 50_000
_MISSING = object()

#: How deep ``GrammarIndex._viable`` cuts a parse state first: stack depths, each
#: tried where the one before met an item it left out.
CUT_DEPTHS = (1, 2, 4)
_DEEPER = object()  # "the cut was too shallow", memoised on the cut set

# A lexer-state walk with more live (node, state) pairs than this on one level goes
# on over whole trie levels (see ``_walk_units``).
_DENSE_FROM = 2_000

#: ``GrammarIndex._read`` reads up to this many pieces one by one ...
_FEW_PIECES = 8
#: ... and at least this many, where they are the rests of a token view's exits, by
#: walking the trie below the exits (``_read_below``).
_READ_BELOW_FROM = 1_000
#: ``GrammarIndex._read_on`` folds groups of up to this many pieces (``_folds``).
_FOLD_MAX = 256


class Pieces:
    """Every distinct nonempty suffix of a vocabulary's token texts.

    ``token_piece[t]`` is token t's own piece (-1 for tokens with no text);
    ``suffix[p]`` is piece p without its first byte (-1 for one-byte pieces),
    ``first_byte[p]`` that byte.

    Args:
        vocab: the ``Vocabulary`` (``vocabulary_pieces`` builds one per vocabulary).

    Example::

        >>> pieces = vocabulary_pieces(vocab)
        >>> pieces.texts[pieces.suffix[pieces.token_piece[t]]]   # token t less its first byte
    """

    def __init__(self, vocab):
        ids: dict[bytes, int] = {}
        token_piece = np.full(vocab.size, -1, dtype=np.int64)
        suffix: list[int] = []
        texts: list[bytes] = []
        for t, data in enumerate(vocab.token_bytes):
            if not data:
                continue
            # Register the suffixes shortest first so each one's own suffix has an id.
            prev = -1
            for k in range(len(data) - 1, -1, -1):
                piece = data[k:]
                pid = ids.get(piece)
                if pid is None:
                    pid = ids[piece] = len(texts)
                    texts.append(piece)
                    suffix.append(prev)
                prev = pid
            token_piece[t] = prev
        self.texts = texts
        self.size = len(texts)
        self.first_byte = np.frombuffer(bytes(t[0] for t in texts), dtype=np.uint8).astype(np.int64)
        self.token_piece = token_piece
        self.suffix = np.array(suffix, dtype=np.int64)
        self.bytes = VocabularyBytes(texts, len(texts))
        self._first_rests: tuple | None = None  # first_rests

    def first_rests(self, order: np.ndarray) -> np.ndarray:
        """Per position of a token order (``order[j]``: a token with text, as in
        ``fsm.trie.subtree_runs``), the piece that token reads after its first byte
        (-1 for a one-byte token); kept for the last order asked (a vocabulary's
        token trie has one).

        Example::

            >>> rests = pieces.first_rests(order)
            >>> rests[j] == pieces.suffix[pieces.token_piece[order[j]]]
            True
        """
        got = self._first_rests
        if got is None or got[0] is not order:
            got = self._first_rests = (order, self.suffix[self.token_piece[order]])
        return got[1]

    def after(self, piece: int, offset: int) -> int:
        """``piece`` without its first ``offset`` bytes."""
        for _ in range(offset):
            piece = int(self.suffix[piece])
        return piece

    def suffix_at(self, pieces: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """``pieces[i]`` without its first ``offsets[i]`` bytes."""
        out = pieces.copy()
        k = offsets.copy()
        while True:
            sel = k > 0
            if not sel.any():
                return out
            out[sel] = self.suffix[out[sel]]
            k[sel] -= 1


_PIECES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def vocabulary_pieces(vocab) -> Pieces:
    """The ``Pieces`` of a vocabulary (built once per Vocabulary object, ~0.7 s)."""
    got = _PIECES.get(vocab)
    if got is None:
        got = _PIECES[vocab] = Pieces(vocab)
    return got


class _UnitTrie:
    """The trie a grammar walks its units (tokens, or pieces) over: their byte trie,
    walked over live nodes only with its subtree runs, computed once per vocabulary:
    depth first, compiled (``grammars.unit_walk``), where numba is installed (unless
    ``compiled=False``). Without it, for a lexer with few byte classes, the units'
    class trie (a few thousand nodes, built per guide) walked whole level by level
    (``_walk_levels``); else the byte trie level by level in numpy (``_walk_units``)."""

    __slots__ = ("trie", "depth", "runs", "bank", "symbol_class", "walker", "_exit_groups")

    def __init__(self, units: VocabularyBytes, byte_to_class: np.ndarray, compiled: bool | None = None):
        self.walker = None
        # walk_row's exit groups by their key and dead children: lexer states that
        # leave alike (the whitespace before any lexeme) share one array of units
        # and one of rests, and with them the reads memoised on those arrays.
        self._exit_groups: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        compiled = COMPILED_AVAILABLE if compiled is None else compiled
        if not compiled and int(byte_to_class.max()) + 1 <= CLASS_TRIE_MAX_CLASSES:
            self.trie = class_trie_of(units.trie, byte_to_class)
            self.depth, self.runs, self.bank, self.symbol_class = node_depth(self.trie), None, None, None
        else:
            self.trie, self.depth, self.runs, self.bank = units.trie, None, units.runs, units.bank
            self.symbol_class = None
            if compiled:
                from guided.grammars.unit_walk import CompiledUnitWalk  # imports numba

                self.walker = CompiledUnitWalk(self.trie, units.node_bytes, self.runs[3], byte_to_class)
            else:  # (the numpy walk's: each node's class)
                self.symbol_class = byte_to_class[units.node_bytes]

    def walk(self, lexer: Lexer, start: int, mids: bool = False):
        """``(inside, units, accept, offset)``: see ``_walk_units``."""
        if self.runs is None:
            return _walk_levels(self.trie, self.depth, lexer, start, mids)
        if self.walker is not None:
            runs, (nodes, keys, depths, accept_id) = self._compiled_walk(lexer, start, mids)
            order = self.runs[0]
            inside = np.zeros(len(self.trie.token_node), dtype=bool)
            for first, stop in runs:
                inside[order[spans(first, stop - first)]] = True
            return (inside, *_exit_units(self, nodes, _mapped(keys, accept_id), depths))
        return _walk_units(self, lexer, start, mids)

    def walk_row(self, lexer: Lexer, start: int, pieces: Pieces, mids: bool = False):
        """``(inside, exits)``: the units that stay inside the lexeme as a packed
        bitmask row (int32 words), and the others that leave it where some
        terminals accept, as ``_Exits`` (with the piece each reads next, of
        ``pieces``; with ``mids``, also where they read on past an accepting
        state: every lexeme end kept). A compiled walk's runs set their bits in a kernel
        (``fsm.kernels.narrow.runs_row``: marking a bool per unit and packing them
        would cost ~20% of a token view) and its exits are grouped in one
        (``fsm.kernels.units.group_exits``), once per group of dead children."""
        if self.walker is None:
            inside, units, accept, offset = self.walk(lexer, start, mids)
            rest = pieces.suffix_at(pieces.token_piece[units], offset)
            return pack_bits(inside[None, :])[0], _Exits.of(units, accept, rest)
        from guided.fsm.kernels.narrow import runs_row  # imports numba (as the walker did)
        from guided.fsm.kernels.units import group_exits

        runs, (nodes, keys, depths, accept_id) = self._compiled_walk(lexer, start, mids)
        words = bitmask_words(len(self.trie.token_node))
        row = np.zeros(words, dtype=np.uint32)
        for first, stop in runs:
            if len(first):
                long = stop - first >= LONG_RUN  # whole subtrees of a free string's inside: kept rows
                ids, bank = self.bank.ids(first[long], stop[long], words) if long.any() else (_NO_BANK_IDS, _NO_BANK)
                runs_row(row, self.runs[0], first, stop, LONG_RUN, bank, ids)
        order, lo, hi, _ = self.runs
        groups, sources = [], []
        some = keys != 0
        if some.any():
            distinct, first = np.unique(keys[some], return_index=True)
            for key in distinct[np.argsort(first)].tolist():
                sel = keys == key
                memo = (key, nodes[sel].tobytes(), depths[sel].tobytes())
                got = self._exit_groups.get(memo)
                if got is None:
                    _, _, units, rests = group_exits(nodes[sel], keys[sel], depths[sel], order, lo, hi,
                                                     pieces.first_rests(order), pieces.suffix, _NO_LAYOUT,
                                                     _NO_LAYOUT)
                    got = self._exit_groups[memo] = (units, rests)
                groups.append((accept_id(key), *got))
                sources.append((nodes[sel], depths[sel]))
        return row.view(np.int32), _Exits(groups, None if mids else sources)

    def _compiled_walk(self, lexer: Lexer, start: int, mids: bool):
        """The compiled walk from ``start``: the runs of units that stay inside the
        lexeme, as ``(first, stop)`` positions of the runs' order (the units that
        end at a node, the whole subtrees), and the exits: ``(dead children, keys,
        depths, accept_id)``, a key telling what the lexeme read before the child
        accepts (0: nothing), ``accept_id(key)`` its id in ``lexer.accept_sets``.
        With ``mids``, live children below an accepting state are exits too."""
        group = lexer.table_group(start)
        if group is None:
            ends, wholes, exits = self.walker.walk(lexer, start, mids)
            keys, accept_id = lexer.accept_id_array()[exits[:, 1]], int
        else:  # over the terminals' own table: no lexer state for each pair passed
            k, s, bits = group
            ends, wholes, exits = self.walker.walk_table(lexer, k, s, bits, mids)
            keys, accept_id = exits[:, 2], partial(lexer.accept_id_of_bits, k)
        _, lo, hi, own = self.runs
        runs = ((lo[ends], lo[ends] + own[ends]), (lo[wholes], hi[wholes]))
        # (columns copied: a column of one row or none is C-contiguous, of more not, and
        # each layout is a kernel specialisation of its own, loaded at its first use)
        nodes, depths = np.ascontiguousarray(exits[:, 0]), np.ascontiguousarray(exits[:, -1])
        return runs, (nodes, np.ascontiguousarray(keys), depths, accept_id)


# ``group_exits``' layout where it writes units, not their places.
_NO_LAYOUT = np.zeros(0, dtype=np.int64)

# ``runs_row``'s bank where no run is long.
_NO_BANK = np.zeros((1, 1), dtype=np.uint32)
_NO_BANK_IDS = np.zeros(1, dtype=np.int64)


def _walk_levels(trie, depth: np.ndarray, lexer: Lexer, start: int, mids: bool = False):
    """``_walk_units`` over a whole small trie, level by level: the lexer state at
    every node, then each unit's deepest live prefix (and, with ``mids``, its
    accepting live prefixes above that)."""
    n = trie.num_nodes
    state = np.full(n, -1, dtype=np.int64)
    state[0] = start
    deep = np.zeros(n, dtype=np.int64)  # each node's deepest live ancestor (itself when live)
    ls = trie.level_start
    for d in range(1, trie.depth + 1):
        lo, hi = int(ls[d]), int(ls[d + 1])
        parent = trie.parent[lo:hi]
        ps = state[parent]
        live = ps >= 0
        if live.any():
            lexer.ensure_rows(ps[live])
            st = np.full(hi - lo, -1, dtype=np.int64)
            st[live] = lexer.transitions[ps[live], trie.symbol[lo:hi][live]]
            state[lo:hi] = st
        deep[lo:hi] = np.where(state[lo:hi] >= 0, np.arange(lo, hi), deep[parent])
    node = trie.token_node.astype(np.int64)
    has_text = node >= 0
    safe = np.maximum(node, 0)
    inside = has_text & (state[safe] >= 0)
    dnode = deep[safe]
    accept_of = lexer.accept_id_array()
    accept = accept_of[state[dnode]]
    offset = depth[dnode]
    units = np.flatnonzero(has_text & ~inside & (offset > 0) & (accept > 0))
    accept, offset = accept[units], offset[units]
    if mids:
        # Every live prefix above the deepest is followed by a live byte: where its
        # state accepts, the lexeme may end there too.
        node_accept = np.where(state >= 0, accept_of[np.maximum(state, 0)], 0)
        parent = trie.parent.astype(np.int64)
        alls, accs, offs = [units], [accept], [offset]
        who = np.flatnonzero(has_text)
        above = parent[dnode[who]]
        keep = depth[dnode[who]] >= 2
        who, above = who[keep], above[keep]
        while len(who):
            hit = node_accept[above] > 0
            alls.append(who[hit])
            accs.append(node_accept[above[hit]])
            offs.append(depth[above[hit]])
            keep = depth[above] >= 2
            who, above = who[keep], parent[above[keep]]
        units, accept, offset = np.concatenate(alls), np.concatenate(accs), np.concatenate(offs)
    return inside, units, accept, offset


def _walk_units(units: _UnitTrie, lexer: Lexer, start: int, mids: bool = False):
    """Where each unit (a token or a piece) of ``units`` goes from lexer state ``start``
    (a byte trie, with its runs).

    Returns ``(inside, units, accept,
    offset)``: ``inside`` (bool per unit): the unit's bytes all stay inside the
    lexeme; ``units`` (with ``accept`` and ``offset``, one per unit): the units that
    leave it at an offset > 0 where some terminals accept (the terminal set's id in
    ``lexer.accept_sets``, and the offset). A unit that dies at offset 0, or where
    nothing accepts, is in neither. With ``mids`` (lexing with every end kept), a
    unit is also listed at each offset > 0 where it reads on past an accepting
    state (the lexeme may end there too).

    The walk follows live (node, state) pairs only, level by level; a dead child's
    whole subtree is then one run of units that leave at its parent. Inside a key
    or a literal few pairs live, so that costs a few levels of small arrays, not a
    pass over the trie's ~100k nodes. Past ``_DENSE_FROM`` live pairs (an open
    string: most of the trie) it goes on over whole levels, where slices are cheaper
    than gathering children.
    """
    trie, symbol_class = units.trie, units.symbol_class
    order, lo, hi, own = units.runs
    inside = np.zeros(len(trie.token_node), dtype=bool)
    exit_nodes, exit_states, exit_depths = [], [], []
    f_node = np.zeros(1, dtype=np.int64)
    f_state = np.array([start], dtype=np.int64)
    state_at = None  # every node's state (-1: dead), once the walk goes dense
    ls = trie.level_start
    depth = 0  # of the parents
    while depth < trie.depth:
        if state_at is None:
            first = trie.child_start[f_node]
            count = trie.child_end[f_node] - first
            child = spans(first, count)
            parent_state = np.repeat(f_state, count)
        else:
            child = np.arange(ls[depth + 1], ls[depth + 2])
            parent_state = state_at[trie.parent[child]]
            live_parent = parent_state >= 0
            child, parent_state = child[live_parent], parent_state[live_parent]
        if not len(child):
            break
        lexer.ensure_rows(parent_state)
        state = lexer.transitions[parent_state, symbol_class[child]]
        alive = state >= 0
        leave = ~alive
        if mids and depth > 0:
            leave |= lexer.accept_id_array()[parent_state] > 0
        if depth > 0 and leave.any():
            exit_nodes.append(child[leave])
            exit_states.append(parent_state[leave])
            exit_depths.append(np.full(int(leave.sum()), depth, dtype=np.int64))
        f_node, f_state = child[alive], state[alive].astype(np.int64)
        ends = f_node[own[f_node] > 0]
        inside[order[spans(lo[ends], own[ends])]] = True
        if state_at is None and len(f_node) > _DENSE_FROM:
            state_at = np.full(trie.num_nodes, -1, dtype=np.int64)
        if state_at is not None:
            state_at[f_node] = f_state
        depth += 1
    if not exit_nodes:
        empty = np.zeros(0, dtype=np.int64)
        return inside, empty, empty, empty
    states = np.concatenate(exit_states)
    return (inside, *_exit_units(units, np.concatenate(exit_nodes), lexer.accept_id_array()[states],
                                 np.concatenate(exit_depths)))


def _mapped(keys: np.ndarray, accept_id) -> np.ndarray:
    """``accept_id`` of each key (0 stays 0)."""
    out = np.zeros(len(keys), dtype=np.int64)
    some = np.flatnonzero(keys)
    if len(some):
        values, where = np.unique(keys[some], return_inverse=True)
        out[some] = np.array([accept_id(v) for v in values.tolist()], dtype=np.int64)[where]
    return out


def _exit_units(units: _UnitTrie, nodes, accept, depths):
    """``(units, accept, offset)`` of the exits (dead child, accept id of the lexeme
    read before it, depth): the units below each child where some terminals accept."""
    order, lo, hi, _ = units.runs
    keep = accept > 0
    nodes, accept, depths = nodes[keep], accept[keep], depths[keep]
    n = hi[nodes] - lo[nodes]
    return order[spans(lo[nodes], n)], np.repeat(accept, n), np.repeat(depths, n)


class _Exits:
    """Units (tokens or pieces) that leave the lexeme at an offset > 0, grouped by
    the id of the terminal set completed there: ``groups`` of ``(accept id, units,
    rest)``, ``rest`` the piece each unit reads next. ``sources``, where the groups
    come from a compiled walk (else None): per group, the dead children and their
    depths whose subtrees' units the group lists, subtree after subtree
    (``GrammarIndex._read_below`` reads the rests by walking them)."""

    __slots__ = ("groups", "sources")

    def __init__(self, groups, sources=None):
        self.groups = groups
        self.sources = sources

    @classmethod
    def of(cls, units, accept, rest) -> "_Exits":
        """The groups of units with their accept ids and rests, one array each."""
        groups = []
        if len(units):
            order = np.argsort(accept, kind="stable")
            accept, units, rest = accept[order], units[order], rest[order]
            cuts = np.flatnonzero(np.diff(accept)) + 1
            for a, u, r in zip(np.split(accept, cuts), np.split(units, cuts), np.split(rest, cuts)):
                groups.append((int(a[0]), u, r))
        return cls(groups)


class Readings:
    """A matcher state of several readings ``(Earley set, lexer state, lexeme
    empty?)`` of the same input, each in its own lexer state (``every_end``
    lexing: a lexeme that could end or go on does both).

    Args:
        readings: the ``(Earley set, lexer state, lexeme empty?)`` triples.
    """

    __slots__ = ("readings",)

    def __init__(self, readings: tuple):
        self.readings = readings

    def __eq__(self, other) -> bool:
        return isinstance(other, Readings) and self.readings == other.readings

    def __hash__(self) -> int:
        return hash(self.readings)


class TokenView:
    """What a lexer state means for whole tokens: the packed row of tokens that stay
    inside the lexeme, the tokens whose first byte ends it, and the later exits.

    Args:
        inside: the packed int32 row of the tokens that stay inside.
        after_end: the tokens whose first byte ends the lexeme.
        exits: the others, grouped by the terminals they complete (``_Exits``).
    """

    __slots__ = ("inside", "after_end", "exits")

    def __init__(self, inside, after_end, exits):
        self.inside = inside
        self.after_end = after_end
        self.exits = exits


class PieceView:
    """What a lexeme-starting lexer state means for every piece (dense arrays):
    whether it stays inside the lexeme, else the accept id it leaves with (0: none)
    and, where that is set, the suffix read after the lexeme's end.

    Args:
        inside: bool per piece.
        exit_accept: int32 per piece, the accept id it leaves with (0: none).
        exit_rest: int64 per piece, the piece read after the lexeme's end.
    """

    __slots__ = ("inside", "exit_accept", "exit_rest")

    def __init__(self, inside, exit_accept, exit_rest):
        self.inside = inside
        self.exit_accept = exit_accept
        self.exit_rest = exit_rest


class GrammarIndex:
    """Masks and token stepping for (Earley state, lexer state) pairs over one vocabulary.

    ``ignore`` terminals (lark's ``%ignore``) may stand between any two lexemes and
    never reach the parser. ``ranks`` (per terminal, comparable) decide which of
    several terminals accepting the same lexeme it is read as; without them the
    parser gets them all.

    Args:
        parser: the ``EarleyParser`` of the grammar's CFG (terminals: the lexer's).
        lexer: the ``Lexer`` over the terminals' DFAs.
        ignore: the ignored terminals.
        vocab: the ``Vocabulary`` the masks are over.
        ranks: per terminal, its rank among terminals accepting one lexeme (or None).
        every_end: keep every lexeme end (``CompiledGrammar.every_end``).

    Example::

        >>> index = GrammarIndex(parser, lexer, ignore, vocab)
        >>> state = index.initial()
        >>> row = index.mask(state)            # int32[ceil(V/32)]
        >>> state = index.consume(state, tok)  # None if tok is not allowed
    """

    def __init__(self, parser: EarleyParser, lexer: Lexer, ignore: frozenset[int], vocab, ranks=None,
                 every_end: bool = False):
        self.parser = parser
        self.lexer = lexer
        self.ignore = ignore
        self.ranks = ranks
        self.every_end = every_end
        self._winners: dict[int, frozenset[int]] = {}
        self._cached_scans = 0
        self.vocab = vocab
        self.words = bitmask_words(vocab.size)
        self.pieces = vocabulary_pieces(vocab)
        vb = vocabulary_bytes(vocab)
        self._token_units = _UnitTrie(vb, lexer.byte_to_class)
        self._piece_units: _UnitTrie | None = None
        self._token_views: dict[int, TokenView] = {}
        self._piece_views: dict[int, PieceView] = {}
        #: Bytes of the arrays the token and piece views hold (a view inside an open
        #: string holds MBs), each counted once (views share them): what the guide's
        #: size estimate adds for them.
        self.view_bytes = 0
        self._view_arrays: set[int] = set()  # ids of the arrays counted (views are kept, so are they)
        self._piece_reads: dict[tuple, tuple] = {}  # _read_piece and _piece_ends, memoised
        self._reads: dict[tuple[int, int], tuple] = {}  # _read, memoised
        self._depth_hint: dict[int, int] = {}  # _viable: id(pieces) -> the index in CUT_DEPTHS to start at
        self._piece_sets: dict[bytes, np.ndarray] = {}  # _same_pieces
        # Rests arrays that list the units below dead children, subtree after subtree:
        # id -> (the array, the children, their depths) (``_read_below``).
        self._rest_sources: dict[int, tuple] = {}
        self._below_layouts: dict[int, tuple] = {}  # _below_layout, by id(rests)
        self._token_bytes = vocab.token_bytes
        self.eos_row = np.zeros(self.words, dtype=np.int32)
        for e in vocab.eos_token_ids:
            self.eos_row[e >> 5] |= np.uint32(1 << (e & 31)).view(np.int32)
        # Tokens by their first byte: "whose first byte ends L".
        self._token_first_byte = vb.token_first_byte
        self._class_rows: dict[tuple[int, ...], np.ndarray] = {}

    # -- parser-side helpers ----------------------------------------------------------

    def scan(self, p: EarleySet, accept_id: int) -> EarleySet | None:
        """The parser state after a lexeme accepted by ``accept_sets[accept_id]``."""
        key = ("scan", accept_id)
        cache = p.cache
        got = cache.get(key, _MISSING)  # (one read: drop_caches may clear the root's)
        if got is not _MISSING:
            return got
        real = self._winners.get(accept_id)
        if real is None:
            real = self._winners[accept_id] = self._tie_winners(accept_id)
        nxt = self.parser.advance(p, real) if real else p
        cache[key] = nxt
        self._cached_scans += 1
        if self._cached_scans > MAX_CACHED_SCANS:
            self.drop_caches()
        return nxt

    @property
    def cached_states(self) -> int:
        """Parse states made (and cached) since the caches were last dropped."""
        return self._cached_scans

    def drop_caches(self) -> None:
        """Forget every parse state reachable from the root, with its masks.

        Parse states and masks are cached on the states themselves, so sequences that
        share a prefix (requests with the same schema: ``{"name": "``) share the work.
        Left alone, that tree would keep every path ever decoded; past
        ``MAX_CACHED_SCANS`` new states it is dropped (sequences in flight keep their
        own states, and only speed is at stake)."""
        root = self.parser.root()
        root.memo.clear()
        root.cache.clear()
        self.parser.forget()
        self._cached_scans = 0

    def _tie_winners(self, accept_id: int) -> frozenset[int]:
        """The terminals a lexeme accepted by ``accept_sets[accept_id]`` is read as
        (ignored terminals lose to any other; ranks break the remaining ties)."""
        terms = self.lexer.accept_sets[accept_id]
        real = terms - self.ignore
        if len(real) > 1 and self.ranks is not None:
            best = max(self.ranks[t] for t in real)
            real = frozenset(t for t in real if self.ranks[t] == best)
        return real

    def start_state(self, p: EarleySet) -> int:
        """The lexer state that begins the next lexeme after ``p``."""
        s = p.cache.get("lex")
        if s is None:
            s = p.cache["lex"] = self.lexer.start(p.expected | self.ignore)
        return s

    # -- matcher states: (Earley set, lexer state, lexeme empty?) ------------------------
    # With ``every_end``, a state is one such reading or a ``Readings`` of several.

    def initial(self):
        root = self.parser.root()
        return (root, self.start_state(root), True)

    def consume(self, state, data: bytes):
        """The state after the bytes ``data``; None if they cannot be read."""
        if self.every_end:
            return self._consume_every_end(state, data)
        p, lx, fresh = state
        lexer = self.lexer
        for b in data:
            nxt = lexer.step_byte(lx, b)
            if nxt < 0:
                if fresh:
                    return None
                a = lexer.accept_id(lx)
                if not a:
                    return None
                p = self.scan(p, a)
                if p is None:
                    return None
                nxt = lexer.step_byte(self.start_state(p), b)
                if nxt < 0:
                    return None
            lx, fresh = nxt, False
        return self._normalize(p, lx, fresh)

    def _consume_every_end(self, state, data: bytes):
        """``consume`` where a lexeme may end wherever its terminals accept, not only
        where it cannot go on: each byte extends every reading's lexeme and, where a
        reading's lexeme accepts, also starts the next lexeme with it. Readings that
        reach one lexer state are merged (``EarleyParser.merge``), so there are never
        more readings than lexer states live at once."""
        lexer = self.lexer
        readings = state.readings if isinstance(state, Readings) else (state,)
        for b in data:
            nxt: dict[tuple[int, bool], EarleySet] = {}
            for p, lx, fresh in readings:
                on = lexer.step_byte(lx, b)
                if on >= 0:
                    self._join(nxt, p, on)
                a = 0 if fresh else lexer.accept_id(lx)
                if a:
                    p2 = self.scan(p, a)
                    if p2 is not None:
                        on = lexer.step_byte(self.start_state(p2), b)
                        if on >= 0:
                            self._join(nxt, p2, on)
            if not nxt:
                return None
            readings = [(p, lx, False) for (lx, _), p in nxt.items()]
        out: dict[tuple[int, bool], EarleySet] = {}
        for p, lx, fresh in readings:
            got = self._normalize(p, lx, fresh)
            if got is not None:
                self._join(out, got[0], got[1], got[2])
        if not out:
            return None
        if len(out) == 1:
            ((lx, fresh), p), = out.items()
            return (p, lx, fresh)
        return Readings(tuple((p, lx, fresh) for (lx, fresh), p in out.items()))

    def _join(self, readings: dict, p: EarleySet, lx: int, fresh: bool = False) -> None:
        """Add the reading ``(p, lx, fresh)``, merged with one in the same lexer state."""
        key = (lx, fresh)
        had = readings.get(key)
        readings[key] = p if had is None else self.parser.merge(had, p)

    def _normalize(self, p, lx, fresh):
        """Close a lexeme that nothing can extend, so equal situations share a state."""
        if not fresh:
            a = self.lexer.accept_id(lx)
            if a and not self.lexer.has_successors(lx):
                p = self.scan(p, a)
                if p is None:
                    return None
                return (p, self.start_state(p), True)
        return (p, lx, fresh)

    def consume_token(self, state, token_id: int):
        data = self._token_bytes[token_id] if 0 <= token_id < self.vocab.size else None
        if not data:
            return None
        return self.consume(state, data)

    def can_end(self, state) -> bool:
        if isinstance(state, Readings):
            return any(self.can_end(r) for r in state.readings)
        p, lx, fresh = state
        if fresh:
            return p.accepts
        a = self.lexer.accept_id(lx)
        if not a:
            return False
        p2 = self.scan(p, a)
        return p2 is not None and p2.accepts

    # -- masks --------------------------------------------------------------------------

    def cached_mask(self, state) -> np.ndarray | None:
        """``mask(state)`` where it is already cached, else None; builds nothing, so a
        thread may call it while another builds (``GrammarGuide`` does)."""
        if isinstance(state, Readings):
            return None
        p, lx, fresh = state
        return p.cache.get(("mask", lx, fresh))

    def mask(self, state) -> np.ndarray:
        """Packed allowed-token row (EOS bits included) of a matcher state; cached."""
        if isinstance(state, Readings):
            row = self.mask(state.readings[0]).copy()
            for r in state.readings[1:]:
                row |= self.mask(r)
            return row
        p, lx, fresh = state
        key = ("mask", lx, fresh)
        row = p.cache.get(key)
        if row is None:
            with gc_paused():
                row = p.cache[key] = self._compute_mask(p, lx, fresh)
        return row

    def _compute_mask(self, p: EarleySet, lx: int, fresh: bool) -> np.ndarray:
        tv = self.token_view(lx)
        row = tv.inside.copy()
        if fresh:
            if p.accepts:
                row |= self.eos_row
        else:
            a = self.lexer.accept_id(lx)
            if a:
                p2 = self.scan(p, a)
                if p2 is not None:
                    # The lexeme ends here: by longest match only for tokens whose
                    # first byte cannot extend it.
                    after = self.mask((p2, self.start_state(p2), True))
                    row |= after if self.every_end else after & tv.after_end
        viable = self._viable_every_end if self.every_end else self._viable
        allowed = []
        for a, tokens, rest in tv.exits.groups:
            p2 = self.scan(p, a)
            if p2 is not None:
                allowed.append(tokens[viable(p2, rest)])
        if allowed:  # (one scatter: ~10 us a call, whatever its size up to hundreds)
            set_bits(row.view(np.uint32), np.concatenate(allowed))
        return row

    def _viable(self, p: EarleySet, pieces: np.ndarray) -> np.ndarray:
        """For each piece, whether it can be read from a fresh lexeme after ``p``.

        ``pieces`` is an array that lives as long as the index (a token view's rests,
        or one of ``_same_pieces``). The result is memoised by its identity on ``p``
        cut ``CUT_DEPTHS`` deep (``EarleyParser.cut``) where reading the pieces
        completes no item below the cut, else on ``p``: states whose innermost open
        constructs agree share it (what a token's rest reads depends on the few
        innermost, not on all of them). Pieces that once met an item a cut left out
        start at the next depth from then on (``_depth_hint``): the shallower cut
        would mostly fail again, after reading and scanning up to the item it lacks."""
        key = ("viable", id(pieces))
        first = self._depth_hint.get(id(pieces), 0)
        for depth in CUT_DEPTHS[first:]:
            q = self.parser.cut(p, depth)
            if q is p:
                break
            cache = q.cache
            got = cache.get(key)
            if got is _DEEPER:
                continue
            if got is not None:
                return got
            try:
                got = cache[key] = self._read_on(q, pieces)
                return got
            except OpaqueOrigin:
                cache[key] = _DEEPER
                self._depth_hint[id(pieces)] = min(CUT_DEPTHS.index(depth) + 1, len(CUT_DEPTHS))
        got = p.cache.get(key)
        if got is None:
            got = p.cache[key] = self._read_on(p, pieces)
        elif got is _DEEPER:  # ``p`` is itself a cut set, too shallow for these pieces
            raise OpaqueOrigin
        return got

    def _read_on(self, p: EarleySet, pieces: np.ndarray) -> np.ndarray:
        """``_viable`` itself: the pieces read from ``p``'s next lexeme (``_read``),
        those that leave it read on after the parser scans what they completed."""
        start = self.start_state(p)
        ok, groups = self._read(start, pieces)
        if len(pieces) < _READ_BELOW_FROM and any(self._folds(p, a, sel) for a, sel, _ in groups):
            return self._read_folded(p, start, pieces, ok, groups)
        ok = ok.copy()
        for a, sel, rests in groups:
            p2 = self.scan(p, a)
            if p2 is not None:
                ok[sel] = self._viable(p2, rests)
        return ok

    def _folds(self, p: EarleySet, a: int, sel: np.ndarray) -> bool:
        """Whether the rests of a small group that completes ``accept_sets[a]`` read on
        from ``p`` itself: the scan's set cuts one deep to ``p`` (``p`` is a cut set,
        and the lexeme opened a construct like the one it is inside: ``-`` in ``- -
        x``), so what a rest reads there is what it reads from ``p``."""
        if len(sel) > _FOLD_MAX:
            return False
        p2 = self.scan(p, a)
        return p2 is not None and p2 is not p and self.parser.cut(p2, 1) is p

    def _read_folded(self, p: EarleySet, start: int, pieces: np.ndarray, inside: np.ndarray, groups) -> np.ndarray:
        """``_read_on`` where some groups fold (``_folds``): a token of k dashes
        would read the dashes one lexeme, one new pieces array and one ``_read``
        at a time; instead every proper suffix of the folded pieces is read from
        ``start`` with them, and each folded piece takes the answer of its rest,
        shorter, found among them. Groups that do not fold read on as in
        ``_read_on``, for the pieces the answer needs."""
        folded = [sel for a, sel, _ in groups if self._folds(p, a, sel)]
        suffix, have, seen, extra = self.pieces.suffix, set(pieces.tolist()), set(), []
        todo = pieces[np.concatenate(folded)].tolist()
        while todo:  # (each suffix once: k dashes have k - 1 suffixes, not k(k - 1) / 2)
            x = int(suffix[todo.pop()])
            if x >= 0 and x not in seen:
                seen.add(x)
                todo.append(x)
                if x not in have:
                    extra.append(x)
        extra = self._same_pieces(np.array(sorted(extra), dtype=pieces.dtype))
        parts = [(pieces, inside, groups)]
        if len(extra):
            parts.append((extra, *self._read(start, extra)))
        every = np.concatenate([part[0] for part in parts])
        ok = np.concatenate([part[1] for part in parts])
        order = np.argsort(every, kind="stable")
        link = np.full(len(every), -1, dtype=np.int64)
        on: list[tuple[np.ndarray, EarleySet, np.ndarray]] = []
        offset = 0
        for part, _, part_groups in parts:
            for a, sel, rests in part_groups:
                p2 = self.scan(p, a)
                if p2 is None:
                    continue
                if self._folds(p, a, sel):
                    at = order[np.searchsorted(every, rests, sorter=order)]
                    if not np.array_equal(every[at], rests):
                        raise AssertionError("a folded rest is not among the suffixes read")
                    link[offset + sel] = at
                else:
                    on.append((offset + sel, p2, rests))
            offset += len(part)
        # Links go to shorter pieces, so they end: each piece takes the answer of the
        # piece its links end at (pointer jumping), and only those pieces are needed.
        end = np.where(link >= 0, link, np.arange(len(every)))
        while True:
            further = end[end]
            if np.array_equal(further, end):
                break
            end = further
        needed = np.zeros(len(every), dtype=bool)
        needed[end[: len(pieces)]] = True
        for at, p2, rests in on:
            want = needed[at]
            if want.all():
                ok[at] = self._viable(p2, rests)
            elif want.any():
                ok[at[want]] = self._viable(p2, self._same_pieces(rests[want]))
        return ok[end[: len(pieces)]]

    def _read(self, start: int, pieces: np.ndarray) -> tuple[np.ndarray, list]:
        """``(inside, groups)`` of ``pieces`` (an array the index keeps) read from lexer
        state ``start``, memoised: whether each stays inside the lexeme, and per
        accept id ``a`` of the lexemes they complete, ``(a, positions, rests)``:
        which pieces and the piece each reads next (kept, so reads of the rests
        are memoised in turn)."""
        key = (start, id(pieces))
        got = self._reads.get(key)
        if got is not None:
            return got[0], got[1]
        if len(pieces) <= _FEW_PIECES:
            return self._read_few(start, pieces)
        lexer = self.lexer
        group = lexer.table_group(start) if self._token_units.walker is not None else None
        source = self._rest_sources.get(id(pieces)) if len(pieces) >= _READ_BELOW_FROM else None
        if group is None and source is not None and source[0] is pieces:
            inside, groups = self._read_below(start, pieces, source[1], source[2])
            self._reads[key] = (inside, groups, pieces)
            return inside, groups
        if group is not None:  # over the terminals' own table, compiled
            k, s, bits = group
            inside, keys, rests, _ = self._token_units.walker.read_pieces(lexer, k, s, bits, pieces,
                                                                          self.pieces.first_byte, self.pieces.suffix)
            accept = np.zeros(len(pieces), dtype=np.int64)
            some = np.flatnonzero(keys)
            for key_bits in np.unique(keys[some]).tolist():
                accept[some[keys[some] == key_bits]] = lexer.accept_id_of_bits(k, key_bits)
        elif COMPILED_AVAILABLE:  # over the lexer's rows (a piece view walks all 112k pieces)
            from guided.grammars.unit_walk import read_lexer_pieces  # imports numba

            inside, accept, rests = read_lexer_pieces(lexer, start, pieces, self.pieces.first_byte,
                                                      self.pieces.suffix)
        else:
            pv = self.piece_view(start)
            inside, accept = pv.inside[pieces], pv.exit_accept[pieces]
            rests = pv.exit_rest[pieces]
        groups = []
        leaving = accept > 0
        if leaving.any():
            for a in np.unique(accept[leaving]).tolist():
                sel = np.flatnonzero(accept == a)
                groups.append((a, sel, self._same_pieces(rests[sel])))
        self._reads[key] = (inside, groups, pieces)  # (pieces kept: the key holds its id)
        return inside, groups

    def _read_below(self, start: int, pieces: np.ndarray, nodes: np.ndarray, depths: np.ndarray):
        """``_read`` of rests that list the units below the token trie's ``nodes``
        (subtree after subtree, each rest the unit less its first ``depths[i]``
        bytes): one compiled walk of those subtrees from lexer state ``start``
        (``CompiledUnitWalk.walk_below``), which passes each trie node once and
        takes a subtree that stays inside the lexeme whole, where reading every rest
        byte by byte costs ~50 ns a rest (the ~32k rests of the tokens that start
        with whitespace: ~1.5 ms). What it finds is written at the rests' places by
        ``fsm.kernels.units.mark_below`` and ``group_exits``; the groups' rests
        come from the walk's exits, so reads after them walk too."""
        from guided.fsm.kernels.units import group_exits, mark_below  # imports numba (as the walker did)

        units = self._token_units
        order, lo, hi, own = units.runs
        entered, runs, wholes, exits = units.walker.walk_below(self.lexer, start, nodes, depths)
        starts, shifts = self._below_layout(pieces, nodes)
        inside = np.zeros(len(pieces), dtype=np.bool_)
        mark_below(entered, runs, wholes, lo, hi, own, starts, shifts, inside)
        groups = []
        if len(exits):
            dead, depth = np.ascontiguousarray(exits[:, 0]), np.ascontiguousarray(exits[:, 2])
            keys = self.lexer.accept_id_array()[exits[:, 1]]
            distinct, begin, places, rests = group_exits(dead, keys, depth, order, lo, hi,
                                                         self.pieces.first_rests(order), self.pieces.suffix, starts,
                                                         shifts)
            for g, a in enumerate(distinct.tolist()):
                rest = self._same_pieces(rests[begin[g]:begin[g + 1]])
                if len(rest) >= _READ_BELOW_FROM and id(rest) not in self._rest_sources:
                    self._rest_sources[id(rest)] = (rest, dead[keys == a], depth[keys == a])
                groups.append((a, places[begin[g]:begin[g + 1]], rest))
        return inside, groups

    def _below_layout(self, pieces: np.ndarray, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For rests listing the units below ``nodes`` subtree after subtree: the
        subtrees' first positions in the token order (``runs[0]``), sorted, and per
        subtree what to add to a position in it to get its place in ``pieces``
        (memoised per array)."""
        got = self._below_layouts.get(id(pieces))
        if got is None or got[0] is not pieces:
            lo, hi = self._token_units.runs[1], self._token_units.runs[2]
            size = hi[nodes] - lo[nodes]
            if int(size.sum()) != len(pieces):
                raise AssertionError("a rests array does not list its sources' units")
            by_lo = np.argsort(lo[nodes], kind="stable")
            got = self._below_layouts[id(pieces)] = (pieces, lo[nodes][by_lo],
                                                     (np.cumsum(size) - size - lo[nodes])[by_lo])
        return got[1], got[2]

    def _read_few(self, start: int, pieces: np.ndarray) -> tuple[np.ndarray, list]:
        """``_read`` of a few pieces, each stepped through the lexer (``_read_piece``):
        a token's rest after a terminal it completes is most often one or two pieces,
        where the arrays' set-up would cost more than the reads."""
        inside = np.zeros(len(pieces), dtype=np.bool_)
        by_accept: dict[int, tuple[list, list]] = {}
        for i, piece in enumerate(pieces.tolist()):
            a, rest = self._read_piece(start, piece)
            if a == 0:
                inside[i] = True
            elif a > 0:
                sel, rests = by_accept.setdefault(a, ([], []))
                sel.append(i)
                rests.append(rest)
        groups = [(a, np.array(sel, dtype=np.int64), self._same_pieces(np.array(rests, dtype=pieces.dtype)))
                  for a, (sel, rests) in sorted(by_accept.items())]
        self._reads[(start, id(pieces))] = (inside, groups, pieces)
        return inside, groups

    def _same_pieces(self, pieces: np.ndarray) -> np.ndarray:
        """The one array the index keeps with ``pieces``' contents (so memos keyed by
        an array's identity meet whatever read led to it)."""
        return self._piece_sets.setdefault(pieces.tobytes(), pieces)

    def _viable_every_end(self, p: EarleySet, pieces: np.ndarray) -> np.ndarray:
        """``_viable`` where every lexeme end is kept: pieces may also leave where
        their lexeme accepts and could go on."""
        start = self.start_state(p)
        group = self.lexer.table_group(start) if self._token_units.walker is not None else None
        if group is None:
            return np.array([self._viable_one(p, x) for x in pieces.tolist()], dtype=bool)
        k, s, bits = group
        ok, keys, rests, mid = self._token_units.walker.read_pieces(self.lexer, k, s, bits, pieces,
                                                                    self.pieces.first_byte, self.pieces.suffix)
        some = np.flatnonzero(keys)
        if len(some):
            for key in np.unique(keys[some]).tolist():
                p2 = self.scan(p, self.lexer.accept_id_of_bits(k, key))
                if p2 is not None:
                    sel = some[keys[some] == key]
                    ok[sel] = self._viable_every_end(p2, rests[sel])
        for i in np.flatnonzero(mid & ~ok).tolist():  # the few refused that could also leave earlier
            ok[i] = self._viable_one(p, int(pieces[i]))
        return ok

    def _viable_one(self, p: EarleySet, piece: int) -> bool:
        """``_viable`` for one piece, memoised on ``p``."""
        key = ("viable", piece)
        got = p.cache.get(key)
        if got is None:
            if self.every_end:
                inside, ends = self._piece_ends(self.start_state(p), piece)
                got = inside or any((p2 := self.scan(p, a)) is not None and self._viable_one(p2, rest)
                                    for a, rest in ends)
            else:
                a, rest = self._read_piece(self.start_state(p), piece)
                p2 = self.scan(p, a) if a > 0 else None
                got = a == 0 or (p2 is not None and self._viable_one(p2, rest))
            p.cache[key] = got
        return got

    def _piece_ends(self, start: int, piece: int) -> tuple[bool, tuple[tuple[int, int], ...]]:
        """``_read_piece`` with every end kept (memoised): whether ``piece`` stays
        inside the lexeme begun at ``start``, and ``(a, rest)`` for each place after
        a byte at least where the lexeme may end (``accept_sets[a]`` accept it), with
        the piece ``rest`` left to read."""
        key = (start, piece, "every end")
        got = self._piece_reads.get(key)
        if got is None:
            lexer, state, ends = self.lexer, start, []
            text = self.pieces.texts[piece]
            inside = True
            for offset, byte in enumerate(text):
                a = lexer.accept_id(state) if offset else 0
                if a:
                    ends.append((a, self.pieces.after(piece, offset)))
                state = lexer.step_byte(state, byte)
                if state < 0:
                    inside = False
                    break
            got = self._piece_reads[key] = (inside, tuple(ends))
        return got

    def _read_piece(self, start: int, piece: int) -> tuple[int, int]:
        """What ``piece`` reads from lexer state ``start``, its bytes stepped through
        the lexer (memoised): ``(0, -1)`` when it stays inside the lexeme, ``(a,
        rest)`` when it leaves after a byte at least where ``accept_sets[a]``
        accept, with the piece ``rest`` left, else ``(-1, -1)``."""
        key = (start, piece)
        got = self._piece_reads.get(key)
        if got is None:
            lexer, state, got = self.lexer, start, (0, -1)
            for offset, byte in enumerate(self.pieces.texts[piece]):
                nxt = lexer.step_byte(state, byte)
                if nxt < 0:
                    a = lexer.accept_id(state) if offset else 0
                    got = (a, self.pieces.after(piece, offset)) if a else (-1, -1)
                    break
                state = nxt
            self._piece_reads[key] = got
        return got

    # -- per lexer state views (cached) -----------------------------------------------------

    def token_view(self, lx: int) -> TokenView:
        tv = self._token_views.get(lx)
        if tv is None:
            tv = self._token_views[lx] = self._build_token_view(lx)
            self._count_view_arrays([tv.inside] + [a for _, u, r in tv.exits.groups for a in (u, r)])
        return tv

    def _count_view_arrays(self, arrays) -> None:
        for a in arrays:
            owner = a
            while isinstance(owner.base, np.ndarray):
                owner = owner.base
            if id(owner) not in self._view_arrays:
                self._view_arrays.add(id(owner))
                self.view_bytes += owner.nbytes

    def _build_token_view(self, lx: int) -> TokenView:
        inside_row, exits = self._token_units.walk_row(self.lexer, lx, self.pieces, self.every_end)
        if exits.sources is not None:
            for (_, _, rest), (nodes, depths) in zip(exits.groups, exits.sources):
                if len(rest) >= _READ_BELOW_FROM:
                    self._rest_sources[id(rest)] = (rest, nodes, depths)
        # Tokens whose first byte cannot extend the lexeme: they may follow its end.
        group = self.lexer.table_group(lx) if self._token_units.walker is not None else None
        live = self.lexer.live_classes(lx) if group is None else \
            self._token_units.walker.live_classes(self.lexer, *group)
        after_end = self._class_rows.get(live)
        if after_end is None:
            dead = np.ones(self.lexer.num_classes, dtype=bool)
            dead[list(live)] = False
            dead = np.append(dead[self.lexer.byte_to_class], False)  # per byte; 256: a token without bytes
            after_end = pack_bits(dead[self._token_first_byte][None, :])[0] | self.eos_row
            self._class_rows[live] = after_end
        return TokenView(inside_row, after_end, exits)

    def piece_view(self, lx: int) -> PieceView:
        pv = self._piece_views.get(lx)
        if pv is None:
            pv = self._piece_views[lx] = self._build_piece_view(lx)
            self._count_view_arrays([pv.inside, pv.exit_accept, pv.exit_rest])
        return pv

    def _build_piece_view(self, lx: int) -> PieceView:
        if self._piece_units is None:
            self._piece_units = _UnitTrie(self.pieces.bytes, self.lexer.byte_to_class)
        inside, pieces, accept, offset = self._piece_units.walk(self.lexer, lx)
        exit_accept = np.zeros(self.pieces.size, dtype=np.int32)
        exit_accept[pieces] = accept
        # Read only where exit_accept is set: zeroed (calloc'd, touched lazily) memory
        # costs nothing up front, where filling ~200k entries costs ~0.8 ms a view.
        exit_rest = np.zeros(self.pieces.size, dtype=np.int64)
        exit_rest[pieces] = self.pieces.suffix_at(pieces, offset)
        return PieceView(inside, exit_accept, exit_rest)
