"""The narrow walk of ``fsm.narrow``, compiled with numba: the Python side of the
kernels of ``fsm.kernels.narrow`` (the walker's buffers, its rounds, the rows
Python builds between them). Used where numba is installed; ``fsm.narrow`` is the
Python twin.

::

    TokenIndex ── walk(dfa, state) ──> round: walk the pairs; compute each fact a
                                       state lacks (its row too, with the lazy DFA's
                                       compiled construction)
         rows the construction     <── pairs whose row needs Python are set aside
         cannot build here              (a deferred fragment to build, a buffer to grow)
         (LazyDFA.next_states)          ... rounds until none is set aside, or past the budget

The rules are ``fsm.narrow.narrow_walk``'s, so both give the same rows (the tests
compare them): a plain or text node whose state has room for its longest token, a
node whose bytes below are all self-loops of its state, a token end's own tokens,
and ``start_pairs``' text shortcut; and one of its own, the plain tokens that fit a
counted string's end as one row (``fsm.kernels.narrow._dies_after``). Children are
checked one by one (compiled, ~1 ns each), so neither ``few_moves`` nor the numpy
gather is needed here.

Cost notes: a round costs ~3 µs of dispatch (~30 arguments) and ~3 µs of walking on
MaskBench (a pair takes nanoseconds); a walk needs one round, plus one per deferred
fragment it meets. Every fact a state lacks is computed in the kernel: a round
trip to Python for each would cost ~5-8 µs a new state (~5 rounds a walk).
Compiling on first use takes a few seconds, cached on disk (numba's
``cache=True``). Without numba, ``fsm.kernels.AVAILABLE`` is False and
``TokenIndex`` walks in Python.
"""

from __future__ import annotations

import numpy as np

from .gc_pause import gc_paused
from .narrow import below_words, class_words
from .trie import PLAIN_BYTES
from .utf8 import UTF8_SEQUENCES

#: The compiled walk gives up after checking this many (child, state) pairs (the
#: Python walk: ``fsm.narrow.NARROW_BUDGET``), for the batched walk. Checks cost
#: nanoseconds here: 200k take a few ms, where the batched walk a wide state falls
#: back to takes 10-140 ms (a hostname, an alphanumeric pattern, an unanchored
#: alternation of 300 words).
COMPILED_BUDGET = 200_000

#: Rows of facts a walker starts with (40 + 32 bytes a state).
FACTS_ROWS = 1024

_NO_RUNS = np.zeros(0, dtype=np.int64)  # a walk's runs where it found none (read only)
_NO_RUNS.flags.writeable = False
_PLAIN, _TEXT = 1, 2  # TrieTable's kind column (``fsm.kernels.narrow``)
_PLAIN_BYTE = np.zeros(256, dtype=bool)  # whether each byte is plain
_PLAIN_BYTE[np.frombuffer(PLAIN_BYTES, dtype=np.uint8)] = True


class TrieTable:
    """A ``RunTrie``'s node arrays as one int32 table (one argument per call: numba
    checks each argument's type on every call; int32, so a node's row is half a
    cache line: a walk reads nodes scattered over the table's ~3.6 MB) plus
    ``below`` as uint64 [n, 4].

    Args:
        runs: the ``RunTrie`` (the byte-level split trie).

    Example::

        >>> table = TrieTable(split_vocabulary(vocab).byte_level)"""

    __slots__ = ("nodes", "below", "plain_root")

    def __init__(self, runs) -> None:
        t = runs.trie
        kind = np.where(runs.plain_node, _PLAIN, np.where(runs.text_node, _TEXT, 0))
        cols = [t.child_start, t.child_end, np.maximum(t.symbol, 0), runs.own, runs.lo, runs.hi, kind, runs.height,
                runs.text_need]
        self.nodes = np.ascontiguousarray(np.stack([np.asarray(c, dtype=np.int32) for c in cols], axis=1))
        self.below = below_words(t)
        plain_roots = runs.roots[runs.plain_node[runs.roots]]
        self.plain_root = int(plain_roots[0]) if len(plain_roots) else -1


class CompiledWalk:
    """One token index's compiled narrow walks: the facts known per DFA state (kept
    across walks), the DFA's per-class tables and the walk's buffers.

    Args:
        table: the trie's ``TrieTable``; ``lists``: its ``fsm.narrow.TrieLists``.
        symbol_class: the DFA's class of each trie symbol.
        dfa: the ``DFA`` or ``LazyDFA`` walked.
        plain_classes: the DFA's classes of the plain bytes.
        plain_cap, text_cap: how far plain and text rooms are followed.
        order: the trie's token order (runs are slices of it).
        words: the words of a mask row.
        long_run: runs this long or longer are left to Python (``fsm.trie.LONG_RUN``).
        runs: the ``RunTrie`` (its bank of kept rows, its rows by length).

    Example::

        >>> walker = CompiledWalk(table, lists, symbol_class, dfa, plain_classes, plain_cap, text_cap, order,
        ...                       words, LONG_RUN, runs)
        >>> walker.walk(dfa, state)   # (lo, hi, row): long runs and the other tokens' bits, or None
    """

    #: Rows of the stack and run buffers to begin with (they double when full).
    BUFFER = 4096
    #: A plain byte set gets rows (``_add_chain``) where it has at least this many
    #: bytes and tokens (fewer are walked in a few µs: the last byte of every key is
    #: such a set).
    CHAIN_BYTES = 3
    CHAIN_TOKENS = 1000

    def __init__(self, table: TrieTable, lists, symbol_class: np.ndarray, dfa, plain_classes: list[int],
                 plain_cap: int, text_cap: int, order: np.ndarray, words: int, long_run: int, runs) -> None:
        from .kernels import narrow as wc  # imports numba

        self._wc = wc
        self.runs_row = wc.runs_row  # for the caller: sets the bits of a walk's long runs
        self.table = table
        self.order = order
        self.words = words
        roots = np.array(lists.roots, dtype=np.int64)
        if len(roots) and not (roots[-1] - roots[0] == len(roots) - 1 and len(roots) <= self.BUFFER):
            raise AssertionError("the trie's roots are not one range of node ids")
        self.classes = np.ascontiguousarray(symbol_class, dtype=np.int64)
        byte_to_class = dfa.byte_to_class
        self.class_words = class_words(byte_to_class)
        self.plain_classes = np.array(plain_classes, dtype=np.int64)
        self.u_seq, self.u_steps, self.u_classes = _utf8_tables(byte_to_class)
        self.params = np.zeros(13, dtype=np.int64)
        p = self.params
        p[wc.P_ROOT_LO], p[wc.P_ROOT_HI] = (roots[0], roots[-1] + 1) if len(roots) else (0, 0)
        p[wc.P_TEXT_ROOT], p[wc.P_FIRST_WIDE], p[wc.P_REST_CHARS] = (lists.text_root, lists.text_first_wide,
                                                                      lists.text_rest_chars)
        p[wc.P_PLAIN_CAP], p[wc.P_TEXT_CAP], p[wc.P_LONG_RUN] = plain_cap, text_cap, long_run
        p[wc.P_PLAIN_ROOT] = table.plain_root
        p[wc.P_CHAIN_BYTES] = self.CHAIN_BYTES
        # Per plain class, its plain bytes: the kernel walks a smaller set than
        # CHAIN_BYTES without asking _add_chain.
        counts = np.bincount(np.asarray(byte_to_class[:256], dtype=np.int64)[_PLAIN_BYTE],
                             minlength=int(np.max(byte_to_class)) + 1)
        self.plain_bytes = counts[self.plain_classes]
        self.runs = runs  # the RunTrie: rows by length of its plain tokens
        chains = runs.chain_bank(words)  # (its arrays are never replaced)
        self._chain_longest, self._chain_rows = chains.longest, chains.rows
        self.plain_rows = runs.plain_rows(words)
        # The plain byte sets met so far (``_chain``): a set as bits of plain_classes'
        # indices and its slot in the vocabulary's ``ChainBank`` plus one (0: none).
        if len(plain_classes) > 128:
            raise AssertionError("more than 128 plain byte classes")
        self.chain_keys = np.zeros((4, 3), dtype=np.uint64)
        self.n_keys = 0
        self.n_slots = 0  # the sets with a slot
        self.chain_ask = np.zeros(3, dtype=np.uint64)
        self.mask = np.zeros(3, dtype=np.uint64)
        self._byte_to_class = byte_to_class[:256]
        builder = getattr(dfa, "compiled_builder", None)
        p[wc.P_BUILD] = builder is not None and builder() is not None
        self.ctl = np.zeros(3 + wc.PASTES, dtype=np.int64)
        self.path = np.zeros(max(plain_cap, text_cap) + 1, dtype=np.int64)
        self.sets = np.zeros((2, wc.UTF8_SPREAD), dtype=np.int64)
        # Facts rows for the states a lazy DFA is built with room for
        # (``fsm.subset_arrays.LAZY_STATES``) and more: a walk that meets a state
        # past the table's end goes back to Python to grow it, a round trip (~40 µs).
        rows = max(FACTS_ROWS, dfa.num_states + 256)
        self.facts = _fresh_facts(rows)
        self.loops = np.zeros((rows, 4), dtype=np.uint64)
        self._stack = np.zeros((self.BUFFER, 2), dtype=np.int64)
        self._aside = np.zeros((self.BUFFER, 2), dtype=np.int64)
        self._asks = np.zeros(self.BUFFER, dtype=np.int64)
        self._out = np.zeros((self.BUFFER, 2), dtype=np.int64)
        self._no_builder = _no_builder()

    def _fit(self, num_states: int) -> None:
        """Facts rows for every state the DFA has, and some to spare (a round may
        make states; one it reaches past the table's end costs a round trip)."""
        n = len(self.facts)
        size = max(2 * n, num_states + 256)
        facts = _fresh_facts(size)
        facts[:n] = self.facts
        loops = np.zeros((size, 4), dtype=np.uint64)
        loops[:n] = self.loops
        self.facts, self.loops = facts, loops

    def walk(self, dfa, state: int, budget: int = COMPILED_BUDGET):
        """The tokens alive from DFA state ``state``: ``(lo, hi, row)``, the long runs
        ``order[lo[i]:hi[i]]`` (at least ``long_run`` tokens: whole subtrees) and the
        bits of the others (uint32 [words]); None past ``budget`` checks. Rows the
        kernel cannot build are built by ``dfa.next_states`` (deferred fragments,
        growing the construction's buffers)."""
        wc = self._wc
        row = np.zeros(self.words, dtype=np.uint32)
        params = self.params
        params[wc.P_BUDGET], params[wc.P_START] = budget, state
        sp = -1  # the roots' pairs: pushed by the first round
        n_out = checks = 0
        t = self.table
        build = params[wc.P_BUILD]
        while True:
            if len(self.facts) < dfa.num_states:
                self._fit(dfa.num_states)
            builder = dfa.compiled_builder() if build else None
            b, px = (builder.builder_args(), builder.px) if builder is not None else self._no_builder
            outcome, sp, n_out, n_asks, checks = wc.walk_round(
                t.nodes, t.below, self.classes, dfa.transitions, self.facts, self.loops, self.class_words,
                self.plain_classes, self.plain_bytes, self.u_seq, self.u_steps, self.u_classes, params, self.ctl,
                self.path, self.sets, self._stack, sp, self.order, row, self._out, n_out, self._aside, self._asks,
                checks, self.plain_rows, self.chain_keys, self._chain_longest, self._chain_rows, self.n_keys,
                self.chain_ask, self.mask, b, px)
            if builder is not None:
                dfa.sync_states()
            if self.chain_ask[0]:  # a byte set met for the first time: its pairs wait aside
                self._add_chain(int(self.chain_ask[1]), int(self.chain_ask[2]))
            if outcome == wc.OVER_BUDGET:
                return None
            if n_asks:
                with gc_paused():  # (Python builds NFA fragments: many small objects)
                    for s in set(self._asks[:n_asks].tolist()):
                        dfa.next_states(s)  # its row, building what the kernel could not
            if outcome == wc.FULL:  # grow the buffers, keep what is in them
                self._stack = _doubled(self._stack)
                self._aside = _doubled(self._aside)
                self._asks = _doubled(self._asks)
                self._out = _doubled(self._out)
            elif not sp:
                break
        if not n_out:
            return _NO_RUNS, _NO_RUNS, row
        out = self._out[:n_out]
        return out[:, 0].copy(), out[:, 1].copy(), row

    def _add_chain(self, low: int, high: int) -> None:
        """Take in the plain byte set a walk asked for (bits of plain_classes'
        indices): its slot in the vocabulary's ``ChainBank``, for the walks after it,
        where walking its tokens costs more than its rows do (``CHAIN_TOKENS``)."""
        self.chain_ask[0] = 0
        bits = low | high << 64
        chosen = [c for j, c in enumerate(self.plain_classes.tolist()) if bits >> j & 1]
        flags = np.zeros(len(self.class_words), dtype=np.uint8)
        flags[chosen] = 1  # (np.isin costs ~100 µs here, inside the walk's mask)
        allowed = flags[self._byte_to_class]
        allowed[~_PLAIN_BYTE] = 0
        slot = -1
        if allowed.sum() >= self.CHAIN_BYTES:
            slot = self.runs.chain_bank(self.words).slot(allowed.tobytes(), self.CHAIN_TOKENS)
            self.n_slots += slot >= 0
        if self.n_keys == len(self.chain_keys):
            self.chain_keys = np.concatenate([self.chain_keys, np.zeros_like(self.chain_keys)])
        self.chain_keys[self.n_keys] = (low, high, slot + 1)
        self.n_keys += 1


def _fresh_facts(n: int) -> np.ndarray:
    """``n`` rows of facts, none known (``fsm.kernels.narrow``'s columns: rooms -1,
    loop unknown (0), UTF-8 target -2, chain stamp 0)."""
    facts = np.zeros((n, 5), dtype=np.int64)
    facts[:, 0:2] = -1
    facts[:, 3] = -2
    return facts


def _utf8_tables(byte_to_class: np.ndarray):
    """``UTF8_SEQUENCES`` over byte classes: per sequence its steps' slice (int64
    [8, 2]), per step its classes' slice (int64 [steps, 2]), the classes."""
    classes = byte_to_class[:256].tolist()
    seq, steps, flat = [], [], []
    of_range: dict[tuple[int, int], list[int]] = {}  # (13 distinct ranges in 26 steps)
    for ranges in UTF8_SEQUENCES:
        seq.append((len(steps), len(steps) + len(ranges)))
        for lo, hi in ranges:
            got = of_range.get((lo, hi))
            if got is None:
                got = of_range[(lo, hi)] = sorted(set(classes[lo : hi + 1]))
            steps.append((len(flat), len(flat) + len(got)))
            flat.extend(got)
    return (np.array(seq, dtype=np.int64), np.array(steps, dtype=np.int64), np.array(flat, dtype=np.int64))


def _no_builder() -> tuple:
    """Stand-ins for ``Buffers.builder_args`` and ``Buffers.px`` where the DFA has no
    compiled construction (every row is built, or Python builds it): the same types,
    so the kernel is compiled once."""
    one, two = np.zeros(1, dtype=np.int64), np.zeros((1, 12), dtype=np.int64)
    b = (two, one, one, np.zeros((1, 3), dtype=np.int64), np.zeros((1, 3), dtype=np.int64), one, one, one, one,
         one, one, one, np.zeros((1, 3), dtype=np.int64), one, one)
    pairs, flags = np.zeros((1, 2), dtype=np.int64), np.zeros(1, dtype=bool)
    px = (np.zeros((1, 9), dtype=np.int64), one, np.zeros((1, 3), dtype=np.int64), pairs, one, flags, one, flags,
          pairs)
    return b, px


def _doubled(a: np.ndarray) -> np.ndarray:
    grown = np.zeros((2 * len(a), *a.shape[1:]), dtype=a.dtype)
    grown[: len(a)] = a
    return grown
