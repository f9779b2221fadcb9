"""A state's token hits by a depth-first walk in plain Python, for *narrow* states
(``fsm.compiled_walk`` is the same walk compiled, used where numba is installed).

::

    split trie (byte level)           state s: a key's next letters, a digit, a literal
    root ─256─> plain ─s─> t ─a─> ...   only a few (node, state) pairs stay alive,
         ─258─> text  ─é─> ...          so visiting each pair's children one by one
         ─257─> rest  ─"─> ...          costs microseconds, not a level-by-level
                                        numpy walk (~20 array calls per trie level)

The batched walk in ``fsm.index`` pays a fixed ~40 µs of numpy calls per trie level
whatever the frontier's size, so one state's row costs 0.4-1 ms even when it allows
ten tokens. Most states decoding reaches are narrow: inside a key, a number, a
keyword, between a value and the next key. This walk visits their alive pairs one by
one and gives up (returns ``None``) past a budget of child checks, leaving wide
states (an open value) to the batched walk. It takes a node's whole subtree where the
state allows all of it: inside a free string the plain and text subtries (by room,
``TokenIndex._plain_run``), and wherever the state loops on every byte below the
node (``loop_bytes``: a URI's path or host takes the ``example`` subtree whole), so
those states are narrow too.

Cost notes: a child check is a few list lookups (~0.1-0.2 µs). Under a node with
many children (the roots: ~300 between them) a state with few live bytes (a key's
next letter) looks each one up by bisection, since children come in byte order; a
state with many is one numpy gather (~20 µs; a gather at every root would make a
walk about three times as long at the median). A leaf child adds its tokens without
being pushed. Warm (rows known), a walk costs ~16 µs at the median and ~75 µs on
average over a sample of MaskBench schemas. Cold, the walk makes the lazy DFA build
the states it reaches: ~30 µs each by the Python subset construction (half of a miss
or more). The compiled walk (``fsm.compiled_walk``) builds them, and every fact
above, in its own kernel: ~1-2 µs a new state.
"""

from __future__ import annotations

from bisect import bisect_left

import numpy as np

#: A narrow walk gives up after checking this many (child node, state) pairs.
NARROW_BUDGET = 2_000

# Nodes with more children than this are checked in one numpy gather ...
_WIDE = 32
# ... and those with more than this look up the alive bytes instead, where a state
# has few (at most FEW_BYTES, and fewer than half the children).
_LOOKUP = 8
#: A state with more bytes alive than this counts as wide for ``few_moves``.
FEW_BYTES = 48
# A state with at most this many live byte classes gets no ``loop_bytes`` (a key, a
# number, a literal: computing them costs more than the subtrees they take whole).
_FEW_LOOP_CLASSES = 8


class TrieLists:
    """A ``RunTrie``'s arrays as Python lists (per-element access from Python is
    ~10x faster on lists than on numpy arrays). Built once per trie.

    Args:
        runs: the ``RunTrie`` (the byte-level split trie) the walk goes over.

    Example::

        >>> lists = TrieLists(split_vocabulary(vocab).byte_level)"""

    __slots__ = ("roots", "child_start", "child_end", "symbol", "own", "lo", "hi", "plain", "text", "height",
                 "text_need", "text_root", "text_first_wide", "text_rest_chars", "symbol_np", "_trie", "_below")

    def __init__(self, runs) -> None:
        t = runs.trie
        self.roots = runs.roots.tolist()
        self.child_start = t.child_start.tolist()
        self.child_end = t.child_end.tolist()
        self.symbol_np = np.maximum(t.symbol, 0)
        self.symbol = self.symbol_np.tolist()
        self.own = runs.own.tolist()
        self.lo = runs.lo.tolist()
        self.hi = runs.hi.tolist()
        self.plain = runs.plain_node.tolist()
        self.height = runs.height.tolist()
        self.text = runs.text_node.tolist()
        self.text_need = runs.text_need.tolist()
        self._trie, self._below = t, None
        # The text root, its first child on a non-ASCII byte (the children come in
        # byte order, so those children's subtrees are the tail of its run), and the
        # most characters below such a child.
        texts = [r for r in self.roots if self.text[r]]
        self.text_root = texts[0] if texts else -1
        self.text_first_wide, self.text_rest_chars = -1, 0
        if texts:
            a, b = self.child_start[self.text_root], self.child_end[self.text_root]
            wide = [c for c in range(a, b) if self.symbol[c] >= 0x80]
            if wide:
                self.text_first_wide = wide[0]
                self.text_rest_chars = int(runs.chars[wide].max())

    @property
    def below(self) -> list[int]:
        """``bytes_below`` of the trie, on first use (only the Python walk needs it as
        ints; the compiled one reads ``below_words``)."""
        if self._below is None:
            self._below = bytes_below(self._trie)
        return self._below


def bytes_below(t) -> list[int]:
    """For each node of a byte-level trie, the set of bytes on the edges below it
    (bit b: byte b), as a Python int: a state that loops on every one of them
    allows the node's whole subtree (see ``loop_bytes``)."""
    raw = below_words(t).astype("<u8").tobytes()
    return [int.from_bytes(raw[32 * i: 32 * i + 32], "little") for i in range(t.num_nodes)]


def below_words(t, first_byte_level: int = 2) -> np.ndarray:
    """``bytes_below`` as uint64 [nodes, 4] (bit b of the set: bit b % 64 of word
    b // 64), for compiled walks. ``first_byte_level``: the first trie level whose
    symbols are bytes (2 in a split trie, under its markers; 1 in a plain one)."""
    n = t.num_nodes
    words = np.zeros((n, 4), dtype=np.uint64)
    sym = np.maximum(t.symbol, 0)
    for d in range(t.depth, first_byte_level - 1, -1):
        nodes = np.arange(t.level_start[d], t.level_start[d + 1])
        if not len(nodes):
            continue
        bits = words[nodes].copy()  # what is below each node, and its own byte
        b = sym[nodes].astype(np.uint64)
        bits[np.arange(len(nodes)), (b >> np.uint64(6)).astype(np.int64)] |= np.uint64(1) << (b & np.uint64(63))
        parent = t.parent[nodes]  # a level's nodes come grouped by parent
        first = np.flatnonzero(np.r_[True, parent[1:] != parent[:-1]])
        words[parent[first]] |= np.bitwise_or.reduceat(bits, first, axis=0)
    return words


def loop_bytes(row: list[int], state: int, class_masks: list[int]) -> int:
    """The bytes on which ``state`` loops to itself (bit b: byte b; ``class_masks``:
    each byte class's bytes so): any text of them keeps it where it is, so a trie
    node with only such bytes below it is allowed whole (a URI's path, a pattern like
    ``^[a-z0-9-]+$``, a free string); 0 for a state with few live classes."""
    if len(row) - row.count(-1) <= _FEW_LOOP_CLASSES:  # a narrow state: not worth it
        return 0
    mask = 0
    c = -1
    try:
        while True:  # list.index finds each self-loop class at C speed
            c = row.index(state, c + 1)
            mask |= class_masks[c]
    except ValueError:
        return mask


def class_bytes(byte_to_class) -> list[list[int]]:
    """The bytes of each byte class, in byte order (for ``few_moves``)."""
    out: list[list[int]] = [[] for _ in range(int(max(byte_to_class)) + 1)]
    for b, c in enumerate(byte_to_class[:256].tolist()):
        out[c].append(b)
    return out


def class_words(byte_to_class) -> np.ndarray:
    """The bytes of each byte class as uint64 [classes, 4] (``below_words``' layout),
    for compiled walks' self-loop sets."""
    # One row per class id, those past the bytes' (a trie's markers) included.
    words = np.zeros((int(np.max(byte_to_class)) + 1, 4), dtype=np.uint64)
    classes = np.asarray(byte_to_class[:256], dtype=np.int64)
    b = np.arange(256)
    np.bitwise_or.at(words, (classes, b >> 6), np.left_shift(np.uint64(1), (b & 63).astype(np.uint64)))
    return words


def few_moves(row: list[int], bytes_of_class: list[list[int]]):
    """``(byte, target)`` for every byte alive in ``row``, or ``None`` when more
    than ``FEW_BYTES`` are (a wide state: its children are checked one by one, or in
    numpy, instead of looked up)."""
    if len(row) - row.count(-1) > FEW_BYTES:  # each live class has a byte at least
        return None
    out = []
    for c, target in enumerate(row):
        if target >= 0:
            out.extend([(b, target) for b in bytes_of_class[c]])
            if len(out) > FEW_BYTES:
                return None
    return out


def start_pairs(tl: TrieLists, classes: list[int], row_of, text_room, utf8_target, start: int):
    """Where a walk from ``start`` begins: ``(lo, hi, pairs)``, the runs found
    before walking and the (node, state) pairs to walk (arguments as
    ``narrow_walk``'s, ``classes`` as a list). The pairs are the roots, but for text
    tokens that open with a non-ASCII character: one run when every such character
    leads to one state with room for the rest (a key or a string whose first letter
    is constrained only among ASCII ones)."""
    lo: list[int] = []
    hi: list[int] = []
    stack = [(r, start) for r in tl.roots]
    if tl.text_first_wide >= 0:
        after = utf8_target(start)
        if after >= 0 and text_room(after) >= tl.text_rest_chars:
            lo.append(tl.lo[tl.text_first_wide])
            hi.append(tl.hi[tl.text_root])
            stack.remove((tl.text_root, start))
            row = row_of(start)
            symbol = tl.symbol
            for child in range(tl.child_start[tl.text_root], tl.text_first_wide):
                target = row[classes[symbol[child]]]
                if target >= 0:
                    stack.append((child, target))
    return lo, hi, stack


def narrow_walk(tl: TrieLists, classes: np.ndarray, row_of, few_of, loop_of, plain_room, text_room, utf8_target,
                start: int, budget: int = NARROW_BUDGET):
    """The token runs alive from DFA state ``start``, or ``None`` past ``budget``.

    ``classes``: int64 [259], the DFA's class of each trie symbol (bytes, and the
    markers, which are never stepped);
    ``row_of(state)``: that state's targets per class as a list (-1: dead), computing
    it if needed (and caching it: it is asked for at every node the state reaches);
    ``few_of(state)``: ``few_moves`` of that row (cached too); ``loop_of(state)``:
    ``loop_bytes`` of it (cached too);
    ``plain_room(state)``: how many plain bytes of any kind keep the DFA alive from
    ``state`` (``TokenIndex._plain_run``); ``text_room(state)``: the same in
    characters of text (``TokenIndex._text_run``); ``utf8_target(state)``: the one
    state every whole non-ASCII character leads to, or -1.

    Returns ``(lo, hi)``: the runs ``order[lo[i]:hi[i]]`` of the split trie's token
    order that are allowed (a token-end node's own tokens, or a plain or text node's
    whole subtree).
    """
    child_start, child_end = tl.child_start, tl.child_end
    own, lo_of, hi_of, plain, height = tl.own, tl.lo, tl.hi, tl.plain, tl.height
    text, text_need = tl.text, tl.text_need
    symbol, class_np, classes = tl.symbol, classes, classes.tolist()
    lo, hi, stack = start_pairs(tl, classes, row_of, text_room, utf8_target, start)
    rooms: dict[int, int] = {}
    checks = 0
    below = tl.below
    loops: dict[int, int] = {}
    while stack:
        node, state = stack.pop()
        if plain[node]:
            room = rooms.get(state)
            if room is None:
                room = rooms[state] = plain_room(state)
            if room >= height[node]:
                lo.append(lo_of[node])
                hi.append(hi_of[node])
                continue
        elif text[node] and text_room(state) >= text_need[node]:
            lo.append(lo_of[node])
            hi.append(hi_of[node])
            continue
        loop = loops.get(state)
        if loop is None:
            loop = loops[state] = loop_of(state)
        if loop and not below[node] & ~loop:
            lo.append(lo_of[node])
            hi.append(hi_of[node])
            continue
        if own[node]:
            lo.append(lo_of[node])
            hi.append(lo_of[node] + own[node])
        a, b = child_start[node], child_end[node]
        if a == b:
            continue
        few = few_of(state) if b - a > _LOOKUP else None
        if few is not None and 2 * len(few) < b - a:
            # Few bytes alive, many children (a key's next letter under a root): look
            # each alive byte up among the children, which are in byte order.
            checks += len(few)
            alive = [(c, t) for byte, t in few if (c := bisect_left(symbol, byte, a, b)) < b and symbol[c] == byte]
        elif b - a > _WIDE:
            # Many children, many bytes alive: one gather in numpy.
            targets = np.array(row_of(state))[class_np[tl.symbol_np[a:b]]]
            live = np.flatnonzero(targets >= 0)
            checks += _WIDE + len(live)
            alive = zip((live + a).tolist(), targets[live].tolist())
        else:
            row = row_of(state)
            checks += b - a
            alive = [(c, t) for c in range(a, b) if (t := row[classes[symbol[c]]]) >= 0]
        for child, target in alive:
            if child_start[child] == child_end[child]:  # a leaf: its own tokens
                lo.append(lo_of[child])
                hi.append(hi_of[child])
            else:
                stack.append((child, target))
        if checks > budget:
            return None
    return lo, hi

