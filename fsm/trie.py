"""Level-ordered tries over token strings, stored as flat numpy arrays.

::

    tokens  "a" "ab" "b"        level 1:  a(1)  b(2)        parent = [-, 0, 0, 1]
                                level 2:  ab(3)             symbol = [-, a, b, b]
                                                            token_node = [1, 3, 2]

Nodes are numbered level by level and, inside a level, by (parent, symbol), so the
children of a node are contiguous (``child_start[n] .. child_end[n]``). That lets a
walk expand a whole frontier of (node, state) pairs with a few array operations and
drop dead branches at once.

The same builder makes the vocabulary's byte trie (built once per vocabulary) and,
per DFA, the much smaller trie over byte *classes* (many tokens collapse when the DFA
cannot tell their bytes apart).
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from . import footprint
from .kernels import ready as kernels_ready


class Trie:
    """A trie of token symbols (bytes, or byte classes), stored level by level:
    node 0 is the root, and the nodes of each level are contiguous, so a node's
    children are ``child_start[n]:child_end[n]``. ``token_node[t]``: the node where
    token t ends; ``end_nodes``/``token_column``: the distinct such nodes and each
    token's column among them.

    Args:
        parent: int32 ``[N]``, each node's parent (-1 for the root).
        symbol: int32 ``[N]``, the byte or class on the edge into each node.
        level_start: int64 ``[L + 2]``: the nodes of level d are ``[ls[d], ls[d+1])``.
        token_node: int32 ``[V]``: -1 for tokens that are never text.

    Example::

        >>> trie = build_trie(symbols, lengths, token_ids, vocab.size)
        >>> trie.num_nodes, trie.depth
    """

    __slots__ = (
        "parent", "symbol", "level_start", "child_start", "child_end", "token_node",
        "end_nodes", "token_column", "derived", "__weakref__",
    )

    def __init__(self, parent, symbol, level_start, token_node):
        self.parent = parent            # int32 [N]; -1 for the root
        self.symbol = symbol            # int32 [N]; byte or class on the edge into the node
        self.level_start = level_start  # int64 [L + 2]; nodes of level d are [ls[d], ls[d+1])
        self.token_node = token_node    # int32 [V]; -1 for tokens that are never text
        n = len(parent)
        counts = np.bincount(parent[1:], minlength=n) if n > 1 else np.zeros(n, dtype=np.int64)
        self.child_end = np.cumsum(counts) + 1   # root's children start at node 1
        self.child_start = self.child_end - counts
        # The distinct nodes where tokens end, and each token's column among them
        # (column 0 is node -1, "not text", when such tokens exist).
        self.end_nodes, col = np.unique(token_node, return_inverse=True)
        self.token_column = col.reshape(-1)
        self.derived: dict = {}  # ``derive``

    def derive(self, key: str, make):
        """``make(self)``, made once and kept with the trie: what walkers compute per
        trie (its byte sets below each node, its heights) is shared by every guide
        over it, as the trie is, so no guide counts it (``fsm.footprint.also_shared``).

        Example::

            >>> heights = trie.derive("heights", subtree_heights)
        """
        got = self.derived.get(key)
        if got is None:
            got = self.derived.setdefault(key, _shared_with(self, make(self)))
        return got

    @property
    def num_nodes(self) -> int:
        return len(self.parent)

    @property
    def depth(self) -> int:
        return len(self.level_start) - 2

    def nbytes(self) -> int:
        return sum(getattr(self, a).nbytes
                   for a in ("parent", "symbol", "level_start", "child_start", "child_end", "token_node"))


def build_trie(symbols: np.ndarray, lengths: np.ndarray, token_ids: np.ndarray, vocab_size: int) -> Trie:
    """Trie of the rows ``symbols[i, :lengths[i]]`` (token ``token_ids[i]``).

    ``symbols`` is an int matrix padded past each length; rows must be sorted by
    length, longest first, so each level's active rows are a prefix.
    """
    num_rows, max_len = symbols.shape
    node_of_row = np.zeros(num_rows, dtype=np.int64)
    levels = _Levels(int(symbols.max()) + 1 if symbols.size else 1)
    active_counts = np.searchsorted(-lengths, -np.arange(1, max_len + 1), side="right")
    for d in range(max_len):
        active = int(active_counts[d])  # rows longer than d
        if active == 0:
            break
        node_of_row[:active] = levels.add(node_of_row[:active], symbols[:active, d])
    token_node = np.full(vocab_size, -1, dtype=np.int32)
    token_node[token_ids] = node_of_row
    return levels.trie(token_node)


class _Levels:
    """Accumulates a trie level by level: each new node is a distinct
    (parent, symbol) pair among the items of the level."""

    def __init__(self, n_symbols: int):
        self.n_symbols = n_symbols
        self.parents = [np.array([-1], dtype=np.int64)]
        self.symbols = [np.array([-1], dtype=np.int64)]
        self.level_start = [0, 1]

    def add(self, parent: np.ndarray, symbol: np.ndarray) -> np.ndarray:
        """Node id of each item ``(parent[i], symbol[i])`` on a new level."""
        n, prev, k = self.level_start[-1], self.level_start[-2], self.n_symbols
        uniq, inverse = _unique_keys(parent * k + symbol, (n - prev) * k, prev * k)
        self.parents.append(uniq // k)
        self.symbols.append(uniq % k)
        self.level_start.append(n + len(uniq))
        return inverse + n

    def trie(self, token_node: np.ndarray) -> Trie:
        return Trie(
            np.concatenate(self.parents).astype(np.int32),
            np.concatenate(self.symbols).astype(np.int32),
            np.array(self.level_start, dtype=np.int64),
            token_node,
        )


def _unique_keys(key: np.ndarray, span: int, base: int):
    """``np.unique(key, return_inverse=True)`` for keys in ``[base, base + span)``.

    A dense mark-and-cumsum is O(span) instead of a sort; used when span is small.
    """
    if span > 4 * len(key) + 1024:
        uniq, inverse = np.unique(key, return_inverse=True)
        return uniq, inverse.reshape(-1)
    mark = np.zeros(span, dtype=bool)
    rel = key - base
    mark[rel] = True
    rank = np.cumsum(mark) - 1
    return np.nonzero(mark)[0] + base, rank[rel]


_VOCAB_TRIES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class VocabularyBytes:
    """The padded byte matrix of a vocabulary's text tokens, sorted longest first,
    and their byte trie (``trie``).

    Args:
        token_bytes: each token's bytes (None or empty: no text).
        vocab_size: the vocabulary's size.

    Example::

        >>> vb = vocabulary_bytes(vocab)        # built once per Vocabulary
        >>> vb.matrix.shape, vb.trie.num_nodes
    """

    __slots__ = ("matrix", "lengths", "token_ids", "trie", "_runs", "_bank", "_first_bytes", "_node_bytes",
                 "_token_first")

    def __init__(self, token_bytes, vocab_size: int):
        ids = [i for i, b in enumerate(token_bytes) if b]
        lengths = np.array([len(token_bytes[i]) for i in ids], dtype=np.int64)
        order = np.argsort(-lengths, kind="stable")
        self.token_ids = np.array(ids, dtype=np.int64)[order]
        self.lengths = lengths[order]
        max_len = int(self.lengths[0]) if len(ids) else 0
        flat = np.frombuffer(b"".join(token_bytes[i] for i in self.token_ids.tolist()), dtype=np.uint8)
        self.matrix = np.zeros((len(ids), max_len), dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(self.lengths)[:-1]])
        mask = np.arange(max_len)[None, :] < self.lengths[:, None]
        self.matrix[mask] = flat[(starts[:, None] + np.arange(max_len)[None, :])[mask]]
        self.trie = build_trie(self.matrix, self.lengths, self.token_ids, vocab_size)
        self._runs = self._bank = self._first_bytes = self._node_bytes = self._token_first = None

    @property
    def first_bytes(self) -> np.ndarray:
        """Each token's first byte, in ``token_ids``' order (``matrix[:, 0]``, kept:
        reading a column of the matrix touches a cache line per token)."""
        if self._first_bytes is None:
            self._first_bytes = _shared_with(self, np.ascontiguousarray(self.matrix[:, 0]))
        return self._first_bytes

    @property
    def token_first_byte(self) -> np.ndarray:
        """Each token's first byte by token id, 256 for a token without bytes (kept: a
        grammar's rows of the tokens whose first byte is of some classes gather it)."""
        if self._token_first is None:
            first = np.full(len(self.trie.token_node), 256, dtype=np.int64)
            first[self.token_ids] = self.first_bytes
            self._token_first = _shared_with(self, first)
        return self._token_first

    @property
    def node_bytes(self) -> np.ndarray:
        """Each trie node's byte as an index (the root's -1 read as 0), kept: a
        lexer's class of every node is one gather from it."""
        if self._node_bytes is None:
            self._node_bytes = _shared_with(self, np.maximum(self.trie.symbol, 0).astype(np.intp))
        return self._node_bytes

    @property
    def runs(self):
        """``subtree_runs(self.trie)``, computed on first use (~10 ms)."""
        if self._runs is None:
            self._runs = _shared_with(self, subtree_runs(self.trie))
        return self._runs

    @property
    def bank(self) -> "RunBank":
        """A ``RunBank`` over ``runs``' order: the kept bits of its long runs."""
        if self._bank is None:
            self._bank = _shared_with(self, RunBank(self.runs[0]))
        return self._bank


def _shared_with(owner, value):
    """``value``, made on use by ``owner`` (a vocabulary's table): shared by every
    guide that shares ``owner``, so not theirs to count (``fsm.footprint.also_shared``)."""
    footprint.also_shared(owner, value)
    return value


def vocabulary_bytes(vocab) -> VocabularyBytes:
    """The byte trie of ``vocab`` (built once per Vocabulary object)."""
    got = _VOCAB_TRIES.get(vocab)
    if got is None:
        got = _VOCAB_TRIES[vocab] = VocabularyBytes(vocab.token_bytes, vocab.size)
    return got


#: Printable ASCII but the quote and the backslash: the bytes that stay inside a
#: JSON string (and most free text) without changing the automaton's state.
PLAIN_BYTES = bytes(b for b in range(0x20, 0x7F) if b not in b'"\\')


#: Level-1 symbols of a ``SplitVocabulary`` trie: plain tokens hang under the
#: first, text tokens under the third, the rest under the second.
PLAIN_MARK, REST_MARK, TEXT_MARK = 256, 257, 258


def is_text_token(data: bytes) -> bool:
    """Whole UTF-8 characters, some beyond ASCII, the others plain: what a JSON
    string holds unescaped besides plain bytes (``"é"``, ``" 日本"``)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return any(ord(c) > 0x7F for c in text) and all(ord(c) > 0x7F or c.encode() in _PLAIN_SET for c in text)


_PLAIN_SET = frozenset(bytes([b]) for b in PLAIN_BYTES)
_IS_PLAIN = np.zeros(256, dtype=bool)
_IS_PLAIN[list(PLAIN_BYTES)] = True


#: ``RunTrie`` attributes made after it, on first use.
_MADE_ON_USE = frozenset(("lists", "table", "_plain_rows", "_chain_banks", "_node_depth", "_token_ends",
                          "_plain_lengths"))

#: Runs of at least this many tokens have their bits kept (``RunBank``);
#: shorter ones are cheaper to set position by position.
LONG_RUN = 256

#: ``RunBank.ids`` remembers this many sets of runs (~1 KB each at most) before
#: it starts again.
_BANK_ID_MEMO = 20_000


#: A ``ChainBank`` holds the rows of this many byte sets (per vocabulary); sets met
#: after that are walked token by token.
CHAIN_SETS_KEPT = 64

_CHAIN_BANK_LOCK = threading.Lock()


class ChainBank:
    """``RunTrie.chain_rows`` of the plain byte sets compiled walks meet, one slot per
    set, shared by every guide over a vocabulary: a set's rows are made once per
    process, and a walker passes the bank's arrays to its kernel instead of copying
    rows of its own.

    ``longest[slot]`` is the set's longest token, ``rows[slot, n]`` its tokens of at
    most ``n`` bytes. The arrays are made once at their full size
    (``CHAIN_SETS_KEPT`` slots; untouched pages take no memory) so a kernel that
    holds them never sees them replaced; a slot is written before it is handed out.

    Args:
        runs: the ``RunTrie`` whose plain tokens the rows hold.
        words: bitmask words per row.

    Example::

        >>> bank = runs.chain_bank(words)
        >>> slot = bank.slot(allowed, min_count=1000)     # -1: no rows for this set
        >>> bank.rows[slot, 3]                             # its tokens of at most 3 bytes
    """

    __slots__ = ("_lock", "_runs", "_slot_of", "_words", "longest", "rows")

    def __init__(self, runs: RunTrie, words: int):
        self._runs, self._words = runs, words
        self.rows = np.zeros((CHAIN_SETS_KEPT, runs.plain_rows(words).shape[0], words), dtype=np.uint32)
        self.longest = np.zeros(CHAIN_SETS_KEPT, dtype=np.int64)
        self._slot_of: dict[bytes, int] = {}
        self._lock = threading.Lock()

    def slot(self, allowed: bytes, min_count: int) -> int:
        """The slot of the byte set ``allowed`` (256 bytes, nonzero where the byte is
        in), its rows made the first time; -1 where it has fewer than ``min_count``
        plain tokens or the bank is full (decided once per set)."""
        got = self._slot_of.get(allowed)
        if got is not None:
            return got
        with self._lock:
            got = self._slot_of.get(allowed)
            if got is None:
                got = -1
                used = len([v for v in self._slot_of.values() if v >= 0])
                if used < CHAIN_SETS_KEPT:
                    rows, longest, _ = self._runs.chain_rows(allowed, self._words, min_count)
                    if rows is not None:
                        got = used
                        self.rows[got, : len(rows)] = rows
                        self.longest[got] = longest
                self._slot_of[allowed] = got
        return got


class RunBank:
    """The bits of long runs of a token order, kept as rows (uint32 [words]): a free
    string's subtrees recur in every row that allows them. One bank serves every
    guide of a vocabulary, in any thread.

    Args:
        order: the token order whose runs the rows hold.

    Example::

        >>> bank = RunBank(order)
        >>> ids, rows = bank.ids(lo, hi, words)   # rows[ids[i]]: the bits of order[lo[i]:hi[i]]
    """

    __slots__ = ("order", "rows", "_of", "_memo", "_lock")

    def __init__(self, order: np.ndarray) -> None:
        self.order = order
        self.rows = np.zeros((0, 0), dtype=np.uint32)
        self._of: dict[tuple[int, int], int] = {}
        self._memo: dict[bytes, np.ndarray] = {}  # ids' memo
        self._lock = threading.Lock()

    def ids(self, lo: np.ndarray, hi: np.ndarray, words: int) -> tuple[np.ndarray, np.ndarray]:
        """``made`` of a walk's runs (int64 arrays), memoised by the runs: the
        string-interior states of every schema end in the same few dozen subtrees,
        where looking each run up again costs more than the walk's own overhead."""
        key = lo.tobytes() + hi.tobytes()
        ids = self._memo.get(key)
        if ids is None:
            ids, _ = self.made(lo.tolist(), hi.tolist(), words)
            if len(self._memo) >= _BANK_ID_MEMO:
                self._memo.clear()
            self._memo[key] = ids
        return ids, self.rows

    def made(self, lo: list[int], hi: list[int], words: int) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, rows)``: the rows holding the bits of the runs ``order[lo[i]:hi[i]]``,
        made where missing. A row is filled before its id is published."""
        got = self._of
        ids = [got.get(key) for key in zip(lo, hi)]
        if None in ids:
            with self._lock:
                for i, key in enumerate(zip(lo, hi)):
                    if ids[i] is None:
                        ids[i] = got.get(key)
                    if ids[i] is None:
                        n = len(got)
                        if n == len(self.rows):
                            grown = np.zeros((max(16, 2 * n), words), dtype=np.uint32)
                            if n:
                                grown[:n] = self.rows
                            self.rows = grown
                        set_bits(self.rows[n], self.order[key[0] : key[1]])
                        ids[i] = got[key] = n
        return np.array(ids, dtype=np.int64), self.rows


class RunTrie:
    """A trie whose every subtree's tokens are one run of a token order.

    Tokens sorted by the preorder of the node where they end make each node's
    subtree the run ``order[lo[n]:hi[n]]``, and the tokens that end at ``n`` its
    first ``own[n]`` entries (``is_end[n]``: some do). ``plain_node[n]``: ``n`` lies below the plain marker;
    ``text_node[n]``: below the text marker; ``height[n]``: the most symbols a token
    goes on below ``n``; ``chars[n]``: the most characters below ``n`` (counted
    as UTF-8 lead bytes and ASCII bytes); ``text_need[n]``: the room in characters
    a state needs at ``n`` to allow its whole subtree, ``chars[n]`` where ``n``
    ends a whole character, else more than any room (in the middle of one, or over
    byte classes, where characters cannot be told).

    Args:
        trie: the ``Trie``, its first level the markers.
        plain_marker, text_marker: the symbols of the plain and text roots (-1: none).
        bytes_are_symbols: the symbols are bytes (so characters can be counted).

    Example::

        >>> runs = split_vocabulary(vocab).byte_level
        >>> runs.order[runs.lo[node]:runs.hi[node]]    # the tokens of node's subtree
    """

    __slots__ = ("trie", "roots", "plain_node", "text_node", "height", "chars", "text_need", "order", "lo", "hi",
                 "own", "is_end", "lists", "table", "bank", "_plain_rows",
                 "_chain_banks", "_node_depth", "_token_ends", "_plain_lengths")

    def __init__(self, trie: Trie, plain_marker: int, text_marker: int = -1, bytes_are_symbols: bool = False):
        self.trie = trie
        t = trie
        n = t.num_nodes
        self.roots = np.arange(t.level_start[1], t.level_start[2])
        self.plain_node = np.zeros(n, dtype=bool)
        self.plain_node[self.roots[t.symbol[self.roots] == plain_marker]] = True
        self.text_node = np.zeros(n, dtype=bool)
        self.text_node[self.roots[t.symbol[self.roots] == text_marker]] = True
        levels = [np.arange(t.level_start[d], t.level_start[d + 1]) for d in range(t.depth + 1)]
        for nodes in levels[2:]:
            self.plain_node[nodes] = self.plain_node[t.parent[nodes]]
            self.text_node[nodes] = self.text_node[t.parent[nodes]]
        # height[n]: the most symbols below n (a token continues at most this far).
        self.height = subtree_heights(t, first_level=2)
        self.chars = np.zeros(n, dtype=np.int64)
        sym = t.symbol
        # A UTF-8 continuation byte (0x80-0xBF) adds no character.
        starts_char = ~((sym >= 0x80) & (sym < 0xC0))
        for nodes in reversed(levels[2:]):
            _into_parents(t, nodes, self.chars + starts_char, self.chars, np.maximum)
        self.text_need = np.full(n, 1 << 30, dtype=np.int64)
        if bytes_are_symbols:
            # Continuation bytes still owed at each node: a node ends a whole
            # character where none is.
            owed = np.zeros(n, dtype=np.int64)
            for nodes in levels[2:]:
                b = sym[nodes]
                lead = np.where(b >= 0xF0, 3, np.where(b >= 0xE0, 2, np.where(b >= 0xC0, 1, 0)))
                owed[nodes] = np.where((b >= 0x80) & (b < 0xC0), np.maximum(owed[t.parent[nodes]] - 1, 0), lead)
            whole = owed == 0
            self.text_need[whole] = self.chars[whole]
        self.order, self.lo, self.hi, self.own = subtree_runs(t)
        self.is_end = self.own > 0
        self.bank = RunBank(self.order)  # the bits of long runs, kept
        self.lists = None  # fsm.narrow.TrieLists, made on first use
        self.table = None  # fsm.compiled_walk.TrieTable, likewise
        self._plain_rows = None  # plain_rows
        self._chain_banks = None  # chain_bank
        self._node_depth = None  # _depth
        self._token_ends = None  # _ends
        self._plain_lengths = None  # _rows_by_length: each unit's bytes below the marker, the most

    def __setattr__(self, name: str, value) -> None:
        object.__setattr__(self, name, value)
        if value is not None and name in _MADE_ON_USE:
            _shared_with(self, value)  # (this trie is a vocabulary's)

    def run_bits(self, lo: int, hi: int, words: int) -> np.ndarray:
        """uint32 [words]: the bits of the tokens ``order[lo:hi]`` (long runs are
        kept in ``bank``)."""
        if hi - lo >= LONG_RUN:
            ids, rows = self.bank.made([lo], [hi], words)
            return rows[ids[0]]
        got = np.zeros(words, dtype=np.uint32)
        set_bits(got, self.order[lo:hi])
        return got

    def plain_rows(self, words: int) -> np.ndarray:
        """uint32 [longest plain token + 1, words]: row ``n`` holds the bits of the
        tokens below the plain marker of at most ``n`` bytes. A state that can take
        any ``n`` plain bytes and then none allows exactly these plain tokens (the
        inside of a counted string near its end), where a walk would visit every
        prefix of the longer ones (50k checks at 8 bytes left). Made once (~5 ms)."""
        got = self._plain_rows
        if got is None or got.shape[1] != words:
            got = self._plain_rows = self._rows_by_length(self.plain_node, words)[0]
        return got

    def chain_rows(self, allowed: bytes, words: int, min_count: int = 0) -> tuple[np.ndarray | None, int, int]:
        """``plain_rows`` of the plain tokens whose every byte is in ``allowed``
        (256 bytes, nonzero where the byte is in), the length of the longest of
        them and their number. A state that takes just those bytes, each into one
        next state, ``n`` times and then no plain byte allows exactly row ``n`` of
        these (the end of ``[0-9A-Za-z]{12}``: 28k checks to walk, ~400 µs). Rows
        go only up to the set's longest token (8 KB for the digits, ~500 KB for all
        plain bytes); ``chain_bank`` keeps them. A set of fewer than ``min_count``
        tokens gets no rows (None, 0, its count): a walk costs less than they would
        (the digits of a date: 10 one-byte tokens)."""
        ok = np.append(np.frombuffer(allowed, dtype=np.uint8).astype(bool), False)
        if kernels_ready():
            return self._chain_rows_compiled(ok, words, min_count)
        return self._chain_rows_numpy(ok, words, min_count)

    def chain_bank(self, words: int) -> ChainBank:
        """The ``ChainBank`` of this trie's rows over ``words`` bitmask words."""
        banks = self._chain_banks
        if banks is None:
            banks = self._chain_banks = {}
        got = banks.get(words)
        if got is None:
            with _CHAIN_BANK_LOCK:
                got = banks.setdefault(words, ChainBank(self, words))
        return got

    def _chain_rows_numpy(self, ok: np.ndarray, words: int, min_count: int) -> tuple:
        """``chain_rows`` of the bytes ``ok`` (bool [257]) in numpy."""
        t = self.trie
        # every byte from the plain marker down is allowed (markers are symbols past 255)
        inside = self.plain_node & ok[np.minimum(t.symbol, 256)]
        inside[self.roots] = self.plain_node[self.roots]
        for d in range(2, t.depth + 1):
            lo, hi = t.level_start[d], t.level_start[d + 1]
            inside[lo:hi] &= inside[t.parent[lo:hi]]
            if not inside[lo:hi].any():  # nor anything below
                inside[hi:] = False
                break
        count = int(np.count_nonzero(inside[self._ends()[1]]))
        if count < min_count:
            return None, 0, count
        rows, length = self._rows_by_length(inside, words, own_longest=True)
        return rows, len(rows) - 1, len(length)

    def _chain_rows_compiled(self, ok: np.ndarray, words: int, min_count: int) -> tuple:
        """``chain_rows`` of the bytes ``ok`` by ``fsm.kernels.chains`` (one pass over
        the trie, ~10x the numpy passes' speed)."""
        from guided.fsm.kernels.chains import chain_rows  # imports numba

        t = self.trie
        units, ends = self._ends()
        rows, count = chain_rows(t.symbol, t.parent, t.level_start, self.plain_node, self.roots, ok, units, ends,
                                 self._unit_lengths()[0], words, min_count)
        return (rows, len(rows) - 1, count) if len(rows) else (None, 0, count)

    def _ends(self) -> tuple[np.ndarray, np.ndarray]:
        """The units (``trie.token_node``'s indices) and the nodes where they end."""
        if self._token_ends is None:
            units = np.nonzero(self.trie.token_node >= 0)[0]
            self._token_ends = (units, self.trie.token_node[units])
        return self._token_ends

    def _depth(self) -> np.ndarray:
        if self._node_depth is None:
            self._node_depth = node_depth(self.trie)
        return self._node_depth

    def _unit_lengths(self) -> tuple[np.ndarray, int]:
        """Each unit's bytes below the plain marker (``_ends``' order), and the most
        of a plain unit; kept (~100 µs over the whole trie)."""
        if self._plain_lengths is None:
            ends = self._ends()[1]
            length = self._depth()[ends] - 1
            self._plain_lengths = (length, int(length[self.plain_node[ends]].max(initial=0)))
        return self._plain_lengths

    def _rows_by_length(self, keep: np.ndarray, words: int,
                        own_longest: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """uint32 [longest plain token + 1, words]: row ``n``, the tokens of at most
        ``n`` bytes below the plain marker that end at a node where ``keep`` is set;
        and those tokens' lengths. With ``own_longest``, rows only up to the longest
        of those tokens (the later ones would repeat it)."""
        lengths, longest = self._unit_lengths()
        units, ends = self._ends()
        kept = keep[ends]
        units, length = units[kept], lengths[kept]
        if own_longest:
            longest = int(length.max(initial=0))
        # Each token's bit in the row of its length (one scatter: sorting the
        # tokens by length and packing a row per length costs ~3 ms a set), then
        # each row takes the shorter ones' too.
        got = np.zeros((longest + 1, words), dtype=np.uint32)
        np.bitwise_or.at(got, (length, units >> 5), np.left_shift(np.uint32(1), (units & 31).astype(np.uint32)))
        return np.bitwise_or.accumulate(got, axis=0), length


def node_depth(t: Trie) -> np.ndarray:
    """Each node's level: 0 at the root, 1 for its children, and so on."""
    depth = np.zeros(t.num_nodes, dtype=np.int64)
    for d in range(1, t.depth + 1):
        depth[t.level_start[d] : t.level_start[d + 1]] = d
    return depth


def subtree_runs(t: Trie) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(order, lo, hi, own)``: the units (``t.token_node``'s indices: tokens, or
    pieces) sorted by the preorder of the node where they end, so that node n's
    subtree holds the units ``order[lo[n]:hi[n]]``, of which the first ``own[n]``
    end at n itself. One pass per level over the nodes (~10 ms at 100k nodes)."""
    n = t.num_nodes
    levels = [np.arange(t.level_start[d], t.level_start[d + 1]) for d in range(1, t.depth + 1)]
    # Preorder: a node comes right after its parent and the subtrees of its
    # earlier siblings (siblings are contiguous, so an exclusive cumsum per level).
    size = np.ones(n, dtype=np.int64)
    for nodes in reversed(levels):
        _into_parents(t, nodes, size, size, np.add)
    pre = np.zeros(n, dtype=np.int64)
    for nodes in levels:
        before = np.cumsum(size[nodes]) - size[nodes]
        parent = t.parent[nodes]
        first = t.child_start[parent]
        pre[nodes] = pre[parent] + 1 + before - before[first - nodes[0]]
    units = np.nonzero(t.token_node >= 0)[0]
    end = t.token_node[units].astype(np.int64)
    sort = np.argsort(pre[end], kind="stable")
    own = np.bincount(end, minlength=n).astype(np.int64)
    count = own.copy()
    for nodes in reversed(levels):
        _into_parents(t, nodes, count, count, np.add)
    lo = np.searchsorted(pre[end][sort], pre)
    return units[sort], lo, lo + count, own


def subtree_heights(t: Trie, first_level: int = 1) -> np.ndarray:
    """Per node, the most symbols below it (0 at a leaf), counting the nodes from
    level ``first_level`` down (2: below a split trie's root markers)."""
    height = np.zeros(t.num_nodes, dtype=np.int64)
    for d in range(t.depth, first_level - 1, -1):
        _into_parents(t, np.arange(t.level_start[d], t.level_start[d + 1]), height + 1, height, np.maximum)
    return height


def _into_parents(t: Trie, nodes: np.ndarray, values: np.ndarray, out: np.ndarray, ufunc) -> None:
    """``out[p] = ufunc(out[p], ufunc over values[children of p])`` for the parents of
    one level's ``nodes`` (contiguous, grouped by parent: a ``reduceat``, no ``.at``)."""
    if not len(nodes):
        return
    parent = t.parent[nodes]
    first = np.flatnonzero(np.r_[True, parent[1:] != parent[:-1]])
    p = parent[first]
    out[p] = ufunc(out[p], ufunc.reduceat(values[nodes], first))


class SplitVocabulary:
    """One trie over the vocabulary, split at the root into *plain* tokens (every
    byte in ``PLAIN_BYTES``) and the rest.

    ::

        root ─256─> plain tokens' bytes   (47.9k of SmolLM2's 49k tokens)
             ─258─> text tokens' bytes    (whole non-ASCII characters, plain bytes)
             ─257─> the rest's bytes      (quotes, escapes, newlines, parts of characters)

    A state that stays alive on any plain text as long as the longest token below a
    node (the inside of a free string, of a free key, ``.*``, a ``maxLength`` string
    with room left) allows every plain token below it, so a walk can stop there and
    take the node's whole subtree, one run of a ``RunTrie``; likewise a state that
    stays alive on any characters but the quote, the backslash and controls (a free
    string's inside) for text tokens.
    ``byte_level`` walks bytes (no per-automaton set-up); ``for_classes`` gives the
    trie over an automaton's byte classes, where the tokens it cannot tell apart
    share nodes (a counted string's trie is a few hundred nodes).

    Args:
        token_bytes: each token's bytes (None or empty: no text).
        vocab_size: the vocabulary's size.

    Example::

        >>> split = split_vocabulary(vocab)     # built once per Vocabulary
        >>> split.byte_level.roots
    """

    __slots__ = ("byte_level", "__weakref__")

    def __init__(self, token_bytes, vocab_size: int):
        ids = np.array([i for i, b in enumerate(token_bytes) if b], dtype=np.int64)
        texts = [token_bytes[i] for i in ids.tolist()]
        size = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        flat = np.frombuffer(b"".join(texts), dtype=np.uint8)
        # Bulk, not token by token: this runs once per vocabulary, in a fresh
        # process's first compile.
        owner = np.repeat(np.arange(len(texts)), size)
        start = np.cumsum(size) - size
        mark = np.full(len(texts), PLAIN_MARK, dtype=np.int64)
        if len(texts):
            mark[np.logical_or.reduceat(~_IS_PLAIN[flat], start)] = REST_MARK
        for k in np.flatnonzero(mark == REST_MARK).tolist():
            if is_text_token(texts[k]):
                mark[k] = TEXT_MARK
        lengths = size + 1
        by_len = np.argsort(-lengths, kind="stable")
        row = np.empty_like(by_len)
        row[by_len] = np.arange(len(by_len))
        symbols = np.zeros((len(texts), int(lengths.max()) if len(texts) else 1), dtype=np.int64)
        symbols[row, 0] = mark
        symbols[row[owner], 1 + np.arange(len(flat)) - start[owner]] = flat
        trie = build_trie(symbols, lengths[by_len], ids[by_len], vocab_size)
        self.byte_level = RunTrie(trie, PLAIN_MARK, TEXT_MARK, bytes_are_symbols=True)

    def for_classes(self, byte_to_class: np.ndarray) -> RunTrie:
        """The split trie over ``byte_to_class``'s classes (the markers keep their own)."""
        n = int(byte_to_class.max()) + 1
        marked = np.concatenate([byte_to_class, [n, n + 1, n + 2]])
        return RunTrie(class_trie_of(self.byte_level.trie, marked), n, n + 2)


_SPLITS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def split_vocabulary(vocab) -> SplitVocabulary:
    """The plain/rest trie of ``vocab`` (built once per Vocabulary object)."""
    got = _SPLITS.get(vocab)
    if got is None:
        got = _SPLITS[vocab] = SplitVocabulary(vocab.token_bytes, vocab.size)
    return got


#: ``set_bits`` with more tokens than this packs a bool row instead of scattering bits
#: (49k-token vocabulary: the same ~10 µs at 500 tokens, 4x faster at 5k, 13x at 40k).
_PACK_FROM = 500


def set_bits(row: np.ndarray, tokens: np.ndarray) -> None:
    """Set bit ``t`` (word ``t // 32``, bit ``t % 32``) of a uint32 row for each token."""
    if len(tokens) > _PACK_FROM:
        flags = np.zeros(len(row) * 32, dtype=bool)
        flags[tokens] = True
        row |= np.packbits(flags, bitorder="little").view(np.uint32)
    else:
        np.bitwise_or.at(row, tokens >> 5, np.left_shift(np.uint32(1), (tokens & 31).astype(np.uint32)))


def class_trie_of(bt: Trie, byte_to_class: np.ndarray) -> Trie:
    """``bt`` with its symbols replaced by ``byte_to_class[symbol]``.

    Derived level by level from the byte trie (whose nodes are far fewer than
    tokens x length), so its cost is one pass over the byte trie's nodes.
    """
    n_classes = int(byte_to_class.max()) + 1
    cls_of_node = byte_to_class[np.maximum(bt.symbol, 0)]
    cnode = np.zeros(bt.num_nodes, dtype=np.int64)
    levels = _Levels(n_classes)
    for d in range(1, bt.depth + 1):
        lo, hi = bt.level_start[d], bt.level_start[d + 1]
        cnode[lo:hi] = levels.add(cnode[bt.parent[lo:hi]], cls_of_node[lo:hi])
    token_node = np.where(bt.token_node >= 0, cnode[np.maximum(bt.token_node, 0)], -1).astype(np.int32)
    return levels.trie(token_node)
