"""Minimal byte-level DFAs with byte-class compression.

::

    NFA --subset construction--> DFA --drop dead states--> --Hopcroft minimisation--> DFA
          (over NFA byte classes)                             (+ final byte classes)

A ``DFA`` has ``transitions[state, byte_class]`` (``-1`` = dead), ``byte_to_class[256]``
and ``accepting[state]``. State 0 is the start. Every state can still reach an
accepting state (dead states are removed), so "the DFA is alive" means "the input so
far is a prefix of some match".

Cost notes: subset construction is Python over frozensets, each row a sweep over its
NFA states' byte ranges (``sweep_row``: cost per edge, not per byte class; fine up to
~10^5 DFA states, refused beyond ``MAX_DFA_STATES``); minimisation is Hopcroft's
algorithm, O(C n log n) set operations in Python; dead-state searches and edge lists
are numpy.
"""

from __future__ import annotations

import hashlib
import sys

import numpy as np

from guided.errors import EmptyLanguageError, RegexTooLargeError

from . import footprint, memo
from .arrays import spans
from .deadline import check as check_deadline
from .kernels import AVAILABLE as COMPILED_AVAILABLE
from .kernels import use as use_kernels
from .nfa import _INT_BYTES, NFA, nfa_byte_classes

MAX_DFA_STATES = 200_000
#: NFAs of at most this many states are determinised in Python even where the
#: compiled construction is loaded: its set-up (the NFA as arrays, its buffers:
#: ~65 µs) costs more than the whole Python construction of a small terminal
#: (``[0-9]+``: ~30 µs).
SMALL_NFA = 24


@footprint.self_measured
class DFA:
    """A minimal deterministic automaton over bytes.

    Made by ``determinize`` / ``minimize`` (or ``compile_regex``); every state can
    still reach an accepting one, state 0 is the start.

    Args:
        transitions: int32 ``[states, classes]``, the next state per byte class (-1: dead).
        byte_to_class: int32 ``[256]``, the class of each byte.
        accepting: bool ``[states]``.

    Example::

        >>> from guided.fsm import compile_regex
        >>> dfa = compile_regex(r"[0-9]+")
        >>> dfa.matches(b"123"), dfa.matches(b"12a")
        (True, False)
    """

    __slots__ = ("transitions", "byte_to_class", "accepting", "_rows", "_classes", "_edge_list", "_flat_edges",
                 "_free")

    def __init__(self, transitions: np.ndarray, byte_to_class: np.ndarray, accepting: np.ndarray):
        self.transitions = np.ascontiguousarray(transitions, dtype=np.int32)
        self.byte_to_class = np.ascontiguousarray(byte_to_class, dtype=np.int32)
        self.accepting = np.ascontiguousarray(accepting, dtype=bool)
        # Python lists: per-byte stepping from Python is ~5x faster on lists than numpy.
        # Made on first step: a product that is only embedded (80k states) never steps.
        self._rows = None
        self._classes = self.byte_to_class.tolist()
        self._edge_list = None  # (byte-range edges per state, accepting states)
        self._flat_edges = None  # the same flattened, for embedding (flat_edges)
        self._free = None  # ``fsm.ops.free_states``, made on first use

    start = 0

    def footprint_parts(self) -> tuple[int, list, tuple]:
        """Its size for ``fsm.footprint``: the arrays by their data, the Python lists
        of rows and classes in bulk, the cached edge lists walked. Returns
        ``(bytes, to walk, covered)``."""
        t = self.transitions
        size = sys.getsizeof(self) + t.nbytes + self.byte_to_class.nbytes + self.accepting.nbytes
        covered = [self._classes]
        small = self.num_classes  # the interpreter's small ints the lists hold, each counted once
        size += sys.getsizeof(self._classes)
        if self._rows is not None:
            covered.append(self._rows)
            big = t > 256  # ints past 256 are objects of their own
            small = max(small, len(np.unique(t[~big])))
            size += sys.getsizeof(self._rows) + footprint.lists_nbytes(self._rows) + \
                _INT_BYTES * int(np.count_nonzero(big))
        size += _INT_BYTES * small
        rest = [x for x in (self._edge_list, self._flat_edges, self._free) if x is not None]
        return size, rest, tuple(covered)

    @property
    def num_states(self) -> int:
        return self.transitions.shape[0]

    @property
    def num_classes(self) -> int:
        return self.transitions.shape[1]

    def step(self, state: int, data: bytes) -> int:
        """The state after reading ``data`` from ``state``; -1 once the input is dead."""
        rows, classes = self._rows or self._list_rows(), self._classes
        for b in data:
            state = rows[state][classes[b]]
            if state < 0:
                return -1
        return state

    def next_states(self, state: int) -> list[int]:
        """The state reached on each byte class (-1 = dead), as a list."""
        return (self._rows or self._list_rows())[state]

    def _list_rows(self) -> list[list[int]]:
        self._rows = self.transitions.tolist()
        return self._rows

    def matches(self, data: bytes) -> bool:
        s = self.step(0, data)
        return s >= 0 and bool(self.accepting[s])

    def has_successors(self, state: int) -> bool:
        return bool((self.transitions[state] >= 0).any())

    def is_accepting(self, state: int) -> bool:
        return bool(self.accepting[state])

    def ensure_rows(self, states) -> None:
        """Every row is known (a ``LazyDFA`` computes them here)."""

    def edge_list(self) -> tuple[list[list[tuple[int, int, int]]], list[int]]:
        """Per state, its moves as ``(lo, hi, target)`` byte ranges; and the accepting
        states."""
        if self._edge_list is None:
            lo, hi, target, spans, accepting = self.flat_edges()
            flat = list(zip(lo, hi, target.tolist()))
            self._edge_list = ([flat[a:b] for a, b in spans], accepting)
        return self._edge_list

    def flat_edges(self):
        """The edge list flattened, for copying at an offset (``fsm.ops.embed``):
        ``lo`` and ``hi`` (lists), ``target`` (an int64 array), each state's ``(start,
        stop)`` span of them, and the accepting states. Computed once: JSON schemas
        embed the same DFAs thousands of times."""
        if self._flat_edges is None:
            lo, hi, target, state = _edge_ranges(self)
            bounds = np.searchsorted(state, np.arange(self.num_states + 1)).tolist()
            self._flat_edges = (lo.tolist(), hi.tolist(), target, list(zip(bounds[:-1], bounds[1:])),
                                np.nonzero(self.accepting)[0].tolist())
        return self._flat_edges

    lazy = False

    def __repr__(self) -> str:
        return f"DFA(states={self.num_states}, byte_classes={self.num_classes})"


def _edge_ranges(dfa):
    """Every state's moves as sorted byte ranges with neighbours of one target joined
    (fewer NFA edges, and fewer byte classes in the automata they are embedded in):
    arrays ``lo``, ``hi``, ``target``, ``state``, ordered by state then byte. In numpy
    over all states at once: the byte ranges of the classes, in byte order, cover
    0-255 without gaps, so a range is a run of equal targets in a row."""
    ranges = class_byte_ranges(dfa)
    flat = sorted((lo, hi, c) for c, rs in enumerate(ranges) for lo, hi in rs)
    r_lo = np.array([r[0] for r in flat], dtype=np.int64)
    r_hi = np.array([r[1] for r in flat], dtype=np.int64)
    target = dfa.transitions[:, [r[2] for r in flat]]  # [states, ranges in byte order]
    valid = target >= 0
    same = np.zeros_like(valid)
    same[:, 1:] = valid[:, 1:] & (target[:, 1:] == target[:, :-1])
    starts = valid & ~same
    ends = valid.copy()
    ends[:, :-1] &= ~same[:, 1:]
    state, first = np.nonzero(starts)
    last = np.nonzero(ends)[1]
    return r_lo[first], r_hi[last], target[state, first].astype(np.int64), state


def class_byte_ranges(dfa) -> list[list[tuple[int, int]]]:
    """For each byte class of ``dfa``, its bytes as sorted inclusive ranges."""
    out: list[list[tuple[int, int]]] = [[] for _ in range(dfa.num_classes)]
    cls = dfa.byte_to_class.tolist()
    start = 0
    for b in range(1, 257):
        if b == 256 or cls[b] != cls[start]:
            out[cls[start]].append((start, b - 1))
            start = b
    return out


def class_starts(byte_to_class) -> list[bool]:
    """Per byte 0..256, whether it opens a byte class (256 counts as one): a byte
    range a deferred fragment adds later must start and end on these."""
    classes = byte_to_class.tolist() if hasattr(byte_to_class, "tolist") else byte_to_class
    return [b in (0, 256) or classes[b - 1] != classes[b] for b in range(257)]


def determinize(nfa: NFA, start: int, final: int, limit: int = MAX_DFA_STATES, compiled: bool | None = None) -> DFA:
    """Subset construction, then dead-state removal and minimisation; more than
    ``limit`` subsets raise ``RegexTooLargeError``. The construction is compiled
    (``fsm.kernels.subsets``) where numba is installed and the NFA has more than
    ``SMALL_NFA`` states, unless ``compiled`` says."""
    if (COMPILED_AVAILABLE and len(nfa) > SMALL_NFA and use_kernels(len(nfa))) if compiled is None else compiled:
        if nfa.pending:
            raise ValueError("an NFA with deferred fragments is determinised by LazyDFA only")
        from guided.fsm.subset_arrays import subset_table as compiled_table  # imports numba

        trans, classes, accepting = compiled_table(nfa, start, final, None, limit)
    else:
        trans, classes, sets = subset_table(nfa, start, {final}, limit=limit)
        accepting = np.array([final in s for s in sets], dtype=bool)
    return minimize(trans, classes, accepting)


def subset_table(nfa: NFA, start: int, keep: set[int], classes: np.ndarray | None = None,
                 limit: int = MAX_DFA_STATES):
    """The subset construction's table (-1 = no move; dead states not removed), its
    byte classes and each row's NFA state set. ``keep`` are the final states (kept
    in the sets although they have no byte moves). Only the states reached from
    ``start`` are looked at; callers that cut one NFA at many starts pass its
    ``nfa_byte_classes`` once. Each row is a ``sweep_row`` over its states' byte
    ranges: the cost follows edges, not byte classes (a Unicode class has ~100)."""
    if nfa.pending:
        raise ValueError("an NFA with deferred fragments is determinised by LazyDFA only")
    if classes is None:
        classes = nfa_byte_classes(nfa)
    n_classes = int(classes[-1]) + 1
    cls = classes.tolist()
    intervals: dict[int, list[tuple[int, int, int]]] = {}

    def intervals_of(s: int) -> list[tuple[int, int, int]]:
        got = intervals.get(s)
        if got is None:
            got = intervals[s] = [(cls[lo], cls[hi], t) for lo, hi, t in nfa.edges[s]]
        return got

    closure_memo: dict[int, frozenset[int]] = {}

    def closure_of(s: int) -> frozenset[int]:
        got = closure_memo.get(s)
        if got is None:
            seen = {s}
            stack = [s]
            while stack:
                for t in nfa.eps[stack.pop()]:
                    if t not in seen:
                        seen.add(t)
                        stack.append(t)
            got = closure_memo[s] = frozenset(
                x for x in seen if nfa.edges[x] or x in keep
            )  # keep only states that matter: those with byte moves, and the final ones
        return got

    ids: dict[frozenset[int], int] = {}
    sets: list[frozenset[int]] = []
    # Rows repeat their target sets (every state inside a string moves to the same
    # few), so the closure of a set of targets is looked up before it is unioned.
    by_targets: dict[frozenset[int], int] = {}

    def state_of(targets: frozenset[int]) -> int:
        nxt = frozenset().union(*(closure_of(t) for t in targets))
        j = ids.get(nxt)
        if j is None:
            if len(sets) >= limit:
                raise RegexTooLargeError(f"pattern needs more than {limit} DFA states")
            j = ids[nxt] = len(sets)
            sets.append(nxt)
        by_targets[targets] = j
        return j

    state_of(frozenset([start]))
    table: list[list[int]] = []
    while len(table) < len(sets):
        if not len(table) & 255:
            check_deadline()
        table.append(sweep_row([intervals_of(s) for s in sets[len(table)]], n_classes, state_of, by_targets))
    trans = np.array(table, dtype=np.int32).reshape(len(sets), n_classes)
    return trans, classes, sets


def sweep_row(intervals: list[list[tuple[int, int, int]]], n_classes: int, target_id, known: dict) -> list[int]:
    """One subset-construction row: ``intervals`` are the member NFA states' byte moves
    as ``(first class, last class, target)``; ``target_id(frozenset of NFA targets)``
    gives the DFA state they lead to (-1 where none moves) and records it in
    ``known``, which is looked up first (rows repeat their target sets).

    A sweep over the class intervals: between two cut points the set of targets is
    constant, so the cost follows the number of edges, not the number of byte
    classes. ``active`` counts the intervals open at each cut for every target
    (member states may share targets on overlapping ranges)."""
    if len(intervals) == 1:  # most rows: one NFA state, usually with disjoint moves
        row = _single_state_row(intervals[0], n_classes, target_id, known)
        if row is not None:
            return row
    events = []
    for moves in intervals:
        for lo, hi, t in moves:
            events.append((lo, 1, t))
            events.append((hi + 1, -1, t))
    row = [-1] * n_classes
    events.sort()
    active: dict[int, int] = {}
    i, n = 0, len(events)
    while i < n:
        at = events[i][0]
        while i < n and events[i][0] == at:
            _, delta, t = events[i]
            left = active.get(t, 0) + delta
            if left:
                active[t] = left
            else:
                del active[t]
            i += 1
        if active:  # an open interval always closes later, so i < n here
            key = frozenset(active)
            j = known.get(key)
            if j is None:
                j = target_id(key)
            row[at : events[i][0]] = [j] * (events[i][0] - at)
    return row


def _single_state_row(moves, n_classes: int, target_id, known: dict) -> list[int] | None:
    """``sweep_row`` of one NFA state whose moves do not overlap (None if they do,
    found before any target state is made: the sweep makes others). Not tried on
    several states' moves: though about half such rows are disjoint while decoding,
    it makes compiles ~5% slower (their rows overlap more often)."""
    moves = sorted(moves)
    end = -1
    for lo, hi, _ in moves:
        if lo <= end:
            return None
        end = hi
    row = [-1] * n_classes
    for lo, hi, t in moves:
        key = frozenset((t,))
        j = known.get(key)
        if j is None:
            j = target_id(key)
        row[lo : hi + 1] = [j] * (hi + 1 - lo)
    return row


def minimize(trans: np.ndarray, byte_to_class: np.ndarray, accepting: np.ndarray) -> DFA:
    """Remove dead states, merge equivalent ones, recompute byte classes, renumber BFS.

    Results are memoised (``fsm.memo``) by a digest of the input: a schema that uses
    one definition in several places inside ``oneOf`` / ``not`` algebra builds the
    same automaton each time (a schema may minimise one 3,858-state table eight
    times, at 0.13 s each). A DFA is immutable (its caches are derived), so sharing
    is safe."""
    trans = np.ascontiguousarray(trans)
    digest = hashlib.blake2b(digest_size=20)
    for a in (trans, np.ascontiguousarray(byte_to_class), np.ascontiguousarray(accepting)):
        digest.update(str((a.dtype.str, a.shape)).encode())
        digest.update(a.data)
    key = digest.digest()
    got = memo.lookup(minimize, key)
    if got is memo.MISSING:
        check_deadline()
        got = memo.store(minimize, key, _minimize(trans, byte_to_class, accepting))
    return got


def _minimize(trans: np.ndarray, byte_to_class: np.ndarray, accepting: np.ndarray) -> DFA:
    trans, accepting = _drop_dead(trans, accepting)
    n = trans.shape[0]
    sink = n
    t = np.where(trans < 0, sink, trans)
    t = np.vstack([t, np.full((1, t.shape[1]), sink, dtype=t.dtype)])
    block = coarsest_partition(t, np.append(accepting, False), sink)
    check_deadline()
    return _quotient(t, block, accepting, byte_to_class)


def trim(trans: np.ndarray, byte_to_class: np.ndarray, accepting: np.ndarray) -> DFA:
    """``minimize`` without merging equivalent states: dead states removed, the rest
    keeping their order (state 0 stays the start), byte classes recomputed. For
    automata minimisation would barely shrink: a pattern against a length counter
    has ~80k states either way, and Hopcroft's algorithm costs seconds on it.

    Every live state is still reachable (the path to it runs through states that
    reach it, hence live ones), so dropping the dead ones is a renumbering in numpy."""
    trans, accepting = _drop_dead(trans, accepting)
    keep = accepting | (trans >= 0).any(axis=1)  # live: the dead rows are all -1 and not accepting
    keep[0] = True
    remap = np.append(np.cumsum(keep) - 1, -1).astype(np.int32)  # index -1: no move
    table, classes = _merged_classes(remap[trans[keep]], byte_to_class)
    return DFA(table, classes, accepting[keep])


#: Tables of at least this many cells (states x distinct columns) are refined in
#: numpy (``_moore``), smaller ones by Hopcroft's algorithm in Python: the two break
#: even near 8k cells; above, numpy is 1.2x (8k-16k cells) to 3.6x (tables that take
#: Hopcroft over 5 ms) faster.
MOORE_MIN_CELLS = 8192


def coarsest_partition(t: np.ndarray, accepting: np.ndarray, sink: int, compiled: bool | None = None) -> np.ndarray:
    """Block id per state of the coarsest partition compatible with the complete
    table ``t`` (``sink``: its all-dead row) that keeps accepting states, other
    states and the sink apart: states in one block are equivalent. Compiled
    (``fsm.kernels.partition``) where numba is installed, unless ``compiled=False``."""
    # Identical columns split nothing differently: keep one of each.
    t = t[:, _unique_columns(t)[0]]
    if (COMPILED_AVAILABLE and use_kernels(t.size // 16)) if compiled is None else compiled:
        from guided.fsm.kernels.partition import coarsest_partition as compiled_partition  # imports numba

        return compiled_partition(np.ascontiguousarray(t, dtype=np.int64), np.ascontiguousarray(accepting, dtype=bool),
                                  sink)
    if t.size >= MOORE_MIN_CELLS:
        block = _moore(t, accepting, sink)
        if block is not None:
            return block
    return _hopcroft(t, accepting, sink)


def _initial_blocks(accepting: np.ndarray, sink: int) -> list[set[int]]:
    acc = set(np.nonzero(accepting)[0].tolist())
    rest = set(range(len(accepting))) - acc - {sink}
    return [b for b in (acc, rest) if b] + [{sink}]


def _moore(t: np.ndarray, accepting: np.ndarray, sink: int) -> np.ndarray | None:
    """Moore's refinement in numpy, round by round, recomputing only what can split.

    A round groups states by (block, the blocks their moves lead to). Only a state
    with a move into a state that changed block last round (a *dirty* one) can
    leave its block; the block's other members still share one signature, so one
    of them (a representative) stands for all and its group keeps the block's id.
    So a round costs the dirty states' rows, not the table's, and the rounds (as
    many as the longest distinguishing suffix) stay cheap on long counters.

    Signatures are compared by a hash of the row; every group is checked row by row
    and a collision returns None (the caller then uses Hopcroft's algorithm)."""
    n, k = t.shape
    weights = _row_weights(k)
    block = np.zeros(n, dtype=np.int64)
    for i, members in enumerate(_initial_blocks(accepting, sink)):
        block[list(members)] = i
    n_blocks = int(block.max()) + 1
    # Predecessors of each state (moves into the sink never matter: it never moves).
    src = np.repeat(np.arange(n, dtype=np.int64), k)
    dst = t.ravel().astype(np.int64)
    real = dst != sink
    order = np.argsort(dst[real], kind="stable")
    preds = src[real][order]
    bounds = np.searchsorted(dst[real][order], np.arange(n + 1))
    is_dirty = np.zeros(n, dtype=bool)
    states, pinned = np.arange(n, dtype=np.int64), np.zeros(n, dtype=bool)  # round 1: every state
    while True:
        check_deadline()
        sig = block[t[states]]
        key = sig @ weights  # wraps around: a hash
        order = np.lexsort((key, block[states]))
        s_block, s_key, members, sig = block[states][order], key[order], states[order], sig[order]
        starts = np.ones(len(order), dtype=bool)
        starts[1:] = (s_block[1:] != s_block[:-1]) | (s_key[1:] != s_key[:-1])
        group = np.cumsum(starts) - 1
        first = np.flatnonzero(starts)
        if not (sig == sig[first][group]).all():
            return None
        g_block = s_block[first]
        g_size = np.diff(np.append(first, len(order)))
        g_pinned = np.zeros(len(first), dtype=bool)
        g_pinned[group[pinned[order]]] = True
        # Per block, the representative's group keeps the id (the members left out of
        # this round are in it), else the largest group (fewer dirty states next).
        by_block = np.lexsort((-g_size, ~g_pinned, g_block))
        keeps = np.zeros(len(first), dtype=bool)
        kb = g_block[by_block]
        keeps[by_block[np.r_[True, kb[1:] != kb[:-1]]]] = True
        fresh = int((~keeps).sum())
        if fresh == 0:
            return block
        new_id = g_block.copy()
        new_id[~keeps] = n_blocks + np.arange(fresh)
        n_blocks += fresh
        moved = ~keeps[group]
        changed = members[moved]
        block[changed] = new_id[group[moved]]
        # Next round: the states with a move into a changed one, and a representative
        # of the rest of each block they are in.
        at = spans(bounds[changed], bounds[changed + 1] - bounds[changed])
        if not len(at):
            return block
        is_dirty[preds[at]] = True
        dirty = np.flatnonzero(is_dirty)
        affected = np.zeros(n_blocks, dtype=bool)
        affected[block[dirty]] = True
        others = np.flatnonzero(affected[block] & ~is_dirty)
        is_dirty[dirty] = False
        rep = np.full(n_blocks, -1, dtype=np.int64)
        rep[block[others]] = others
        reps = rep[rep >= 0]
        states = np.concatenate([dirty, reps])
        pinned = np.zeros(len(states), dtype=bool)
        pinned[len(dirty):] = True


def _row_weights(k: int) -> np.ndarray:
    """Odd random weights: a row's hash is its dot product with them."""
    return np.random.default_rng(0).integers(1, 2**62, size=k, dtype=np.int64) | 1


def _hopcroft(t: np.ndarray, accepting: np.ndarray, sink: int) -> np.ndarray:
    """Coarsest partition compatible with ``t``: Hopcroft's algorithm, O(C n log n),
    in Python: for small tables, where numpy's per-call overhead would dominate."""
    n = t.shape[0]
    # preds[q] = [(class, [p, ...]), ...]: real edges into q only. The sink's (huge)
    # lists are never needed because the sink block is left out of the work list.
    preds: list[dict[int, list[int]]] = [{} for _ in range(n)]
    ps, cs = np.nonzero(t != sink)
    for p, c, q in zip(ps.tolist(), cs.tolist(), t[ps, cs].tolist()):
        preds[q].setdefault(c, []).append(p)
    blocks = _initial_blocks(accepting, sink)
    block_of = [0] * n
    for i, b in enumerate(blocks):
        for q in b:
            block_of[q] = i
    # Splitting by every block but one of a partition implies splitting by that one
    # too, so the sink block need not be a splitter.
    work = set(range(len(blocks) - 1))
    while work:
        into_splitter: dict[int, list[int]] = {}
        for q in blocks[work.pop()]:
            for c, ps_ in preds[q].items():
                into_splitter.setdefault(c, []).extend(ps_)
        for sources in into_splitter.values():
            touched: dict[int, list[int]] = {}
            for p in sources:
                touched.setdefault(block_of[p], []).append(p)
            for b, members in touched.items():
                if len(members) == len(blocks[b]):
                    continue
                part = set(members)
                blocks[b] -= part
                nb = len(blocks)
                blocks.append(part)
                for p in part:
                    block_of[p] = nb
                if b in work or len(part) <= len(blocks[b]):
                    work.add(nb)
                else:
                    work.add(b)
    return np.array(block_of, dtype=np.int64)


def _drop_dead(trans: np.ndarray, accepting: np.ndarray):
    live = live_states(trans, accepting)
    if not live[0]:
        raise EmptyLanguageError("the pattern matches no string at all")
    trans = np.where((trans >= 0) & live[np.maximum(trans, 0)], trans, -1)
    trans[~live] = -1
    return trans, accepting & live


def live_states(trans: np.ndarray, accepting: np.ndarray, compiled: bool | None = None) -> np.ndarray:
    """The states that can reach an accepting one (searched compiled where numba is
    installed, unless ``compiled=False``)."""
    if (COMPILED_AVAILABLE and use_kernels(trans.size // 16)) if compiled is None else compiled:
        from guided.fsm.kernels.reach import live_in_table  # imports numba

        return live_in_table(np.ascontiguousarray(trans), np.asarray(accepting, dtype=np.bool_))
    src, cls = np.nonzero(trans >= 0)
    return co_reachable(src, trans[src, cls], np.asarray(accepting, dtype=bool))


#: Up to this many edges, ``co_reachable`` searches with a Python stack; beyond, a
#: level at a time in numpy (per-level overhead, but no Python work per edge).
SMALL_SEARCH_EDGES = 20_000


def co_reachable(src: np.ndarray, dst: np.ndarray, targets: np.ndarray, compiled: bool | None = None) -> np.ndarray:
    """Which states reach one of ``targets`` (a bool per state) along the edges
    ``src[i] -> dst[i]``, searched backwards over the edges sorted by target: with a
    stack in Python for small graphs, a level of predecessors at a time in numpy for
    large ones (compiled with numba where it is installed: ``fsm.kernels.reach``,
    unless ``compiled=False``)."""
    if (COMPILED_AVAILABLE and use_kernels(len(src) // 16)) if compiled is None else compiled:
        from guided.fsm.kernels.reach import co_reachable as compiled_search  # imports numba

        return compiled_search(src.astype(np.int64, copy=False), dst.astype(np.int64, copy=False),
                               np.asarray(targets, dtype=np.bool_))
    n = len(targets)
    order = np.argsort(dst, kind="stable")
    src_by_dst = src[order]
    bounds = np.searchsorted(dst[order], np.arange(n + 1))
    live = targets.copy()
    if len(src) <= SMALL_SEARCH_EDGES:  # a stack in Python: no per-level numpy overhead
        preds, cut, stack = src_by_dst.tolist(), bounds.tolist(), np.nonzero(live)[0].tolist()
        while stack:
            d = stack.pop()
            for s in preds[cut[d] : cut[d + 1]]:
                if not live[s]:
                    live[s] = True
                    stack.append(s)
        return live
    frontier = np.nonzero(live)[0]
    while len(frontier):
        at = spans(bounds[frontier], bounds[frontier + 1] - bounds[frontier])
        if not len(at):
            break
        preds = src_by_dst[at]
        frontier = np.unique(preds[~live[preds]])
        live[frontier] = True
    return live


def _unique_columns(mat: np.ndarray) -> tuple[list[int], np.ndarray]:
    """First index of each distinct column (in order of appearance) and, per column,
    the rank of its distinct value. Hashes column bytes: ``np.unique(axis=1)`` sorts
    columns as opaque records and is several times slower on these shapes."""
    cols = np.ascontiguousarray(mat.T)
    first: list[int] = []
    seen: dict[bytes, int] = {}
    rank = np.empty(cols.shape[0], dtype=np.int64)
    for i, col in enumerate(cols):
        key = col.tobytes()
        r = seen.get(key)
        if r is None:
            r = seen[key] = len(first)
            first.append(i)
        rank[i] = r
    return first, rank


def _quotient(t: np.ndarray, block: np.ndarray, accepting: np.ndarray, byte_to_class) -> DFA:
    """One state per block, numbered in BFS order from the start (a canonical
    numbering); byte classes recomputed for the merged automaton."""
    sink_block = int(block[-1])
    if COMPILED_AVAILABLE and use_kernels(t.size // 16):
        from guided.fsm.kernels.partition import quotient_order  # imports numba

        remap, reps_arr = quotient_order(np.ascontiguousarray(t, dtype=np.int64), block.astype(np.int64), sink_block)
        remap = remap.astype(np.int32)
    else:
        block_list = block.tolist()
        rows = t.tolist()
        order = {block_list[0]: 0}
        reps = [0]
        qi = 0
        while qi < len(reps):
            for nxt in rows[reps[qi]]:
                b = block_list[nxt]
                if b != sink_block and b not in order:
                    order[b] = len(order)
                    reps.append(nxt)
            qi += 1
        remap = np.full(int(block.max()) + 1, -1, dtype=np.int32)
        for b, i in order.items():
            remap[b] = i
        reps_arr = np.array(reps)
    new_t = remap[block[t[reps_arr]]]  # [n, classes]; the sink block maps to -1
    acc = accepting[reps_arr]
    table, classes = _merged_classes(new_t, byte_to_class)
    return DFA(table, classes, acc)


def _merged_classes(table: np.ndarray, byte_to_class: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Final byte classes: bytes whose columns agree share a class, numbered in order
    of first appearance (byte 0 is in class 0). Compares the table's class columns,
    not a [states x 256] copy of it (80 MB for an 80k-state product)."""
    _, rank = _unique_columns(table)  # per old class, its distinct column
    byte_rank = rank[byte_to_class]
    distinct, first_byte = np.unique(byte_rank, return_index=True)
    by_first = np.argsort(first_byte, kind="stable")  # distinct columns in order of first byte
    number = np.empty(len(distinct), dtype=np.int64)
    number[by_first] = np.arange(len(distinct))
    classes = number[np.searchsorted(distinct, byte_rank)]
    first_class = byte_to_class[first_byte[by_first]]  # an old class of each new class
    return np.ascontiguousarray(table[:, first_class]), classes
