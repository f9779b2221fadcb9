"""Token index: for each DFA state, the bitmask of tokens that keep the DFA alive.

::

    DFA state s ──walk the split trie from s──> alive hits ──runs of token order──> tokens
                   root ─256─> plain tokens      token ends: their own tokens   row bitmask
                        ─258─> text tokens       pruned nodes: whole subtree    int32[ceil(V/32)]
                        ─257─> the rest                                         + EOS bits if s accepts

Plain tokens (printable ASCII but ``"`` and ``\\``: 47.9k of SmolLM2's 49k) are
walked only until a state from which any plain text stays alive as long as the
longest token below the node (inside a free string, a free key, ``.*``, a
``maxLength`` string with room left, the search of an unanchored pattern); the
node's whole subtree is then allowed at once. Text tokens (whole non-ASCII
characters and plain bytes) are taken whole the same way where every character but
``"``, ``\\`` and controls leads alike, counted in characters. So a free string's
row walks a few hundred tokens, not ~100k trie nodes.

Rows are deduplicated (many states allow the same tokens: all string-interior
states of a JSON schema, every counting state of ``.{0,200}`` but the last few).

Two modes, chosen by the size of the automaton:

* **eager** (``num_states <= EAGER_LIMIT``, not lazily determinised): every row at
  construction, in batched walks;
* **lazy**: a state's row the first time it is asked for. A missed state where few
  (node, state) pairs stay alive is walked depth-first, its row alone: compiled
  where numba is installed (``fsm.compiled_walk``), else in plain Python
  (``fsm.narrow``, tens to hundreds of µs). A wider one takes the
  batched walk below, and (but for the very first row: the first mask's latency)
  goes on with the rows of the states its tokens lead to, breadth-first, until a
  work budget is spent: the walk's fixed numpy cost is shared, and decoding goes
  there next.

Where a token leads is not stored (it would be ``states x V`` integers); it is
``dfa.step(state, token_bytes)``, a few list lookups per byte.

Cost notes: a walk costs O(alive (state, node) pairs) array work plus ~20 numpy
calls per trie level; a digit state visits a few dozen pairs, a free string ~1k.
After the first row, walks of a DFA with few byte classes go over its classes (the
split trie rebuilt per DFA, ~15 ms once), where tokens it cannot tell apart share
nodes.
"""

from __future__ import annotations

import threading
from operator import itemgetter

import numpy as np

from .arrays import spans
from .compiled_walk import CompiledWalk, TrieTable
from .deadline import check as check_deadline
from .dfa import DFA
from .gc_pause import gc_paused
from .kernels import AVAILABLE as COMPILED_AVAILABLE
from .kernels import ready as kernels_ready
from .lazy import GrowthDeferred
from .narrow import NARROW_BUDGET, TrieLists, class_bytes, few_moves, loop_bytes, narrow_walk
from .nfa import MAX_GROWN_NFA_STATES
from .trie import LONG_RUN, PLAIN_BYTES, RunTrie, Trie, set_bits, split_vocabulary
from .utf8 import UTF8_SEQUENCES

#: Automata with at most this many states get every row at compile time.
EAGER_LIMIT = 256

#: A miss goes on computing the rows of token successors until its walks have
#: visited this many (state, token-end node) pairs ...
AHEAD_WORK = 100_000
#: ... or computed this many states.
AHEAD_STATES = 64
#: Rows computed ahead may grow a lazy DFA's NFA by this many states per miss, and
#: not past AHEAD_NFA_MAX (a quarter of fsm.nfa.MAX_GROWN_NFA_STATES: decoding
#: itself may need the rest).
AHEAD_NFA_GROWTH = 50_000
AHEAD_NFA_MAX = MAX_GROWN_NFA_STATES // 4

#: Walks after the first row go over the DFA's byte classes when it has at most
#: this many (else over bytes, see ``TokenIndex._runs``).
CLASS_TRIE_MAX_CLASSES = 24

# Row lists kept for narrow walks, in entries (states x classes): ~8 bytes each.
_ROW_LIST_ENTRIES = 2_000_000

_UNSET = object()

# States per batched walk in build_all (bounds the [states x end nodes] bit sets).
_BATCH_STATES = 1024


def bitmask_words(vocab_size: int) -> int:
    return (vocab_size + 31) // 32


def pack_bits(allowed: np.ndarray) -> np.ndarray:
    """bool [B, V] -> int32 [B, ceil(V/32)], token t at word t // 32, bit t % 32."""
    b, v = allowed.shape
    words = bitmask_words(v)
    padded = np.zeros((b, words * 32), dtype=bool)
    padded[:, :v] = allowed
    return np.packbits(padded, axis=1, bitorder="little").view("<i4").reshape(b, words)


def walk(trie: Trie, symbol_class: np.ndarray, dfa: DFA, starts: np.ndarray, is_end: np.ndarray,
         absorbing=None, roots=(0,)):
    """The alive (start, node) pairs of a walk over ``trie`` from each of ``starts``,
    beginning at the nodes ``roots`` (the root, or the subtries below it).

    Returns ``(ends, pruned)``, each a ``(start_index, node, state)`` triple of
    arrays. ``ends``: trie node ``node``, one where some token ends
    (``is_end[node]``), is alive when walked from ``starts[start_index]`` and leaves
    the DFA in ``state``. ``pruned``: pairs whose state ``absorbing(states) -> bool``
    marks are not walked further (the caller accounts for their whole subtree);
    empty when no ``absorbing`` is given. The cost follows the alive pairs, not
    ``len(starts) x nodes``.

    Works on a ``DFA`` or a ``LazyDFA``: before each level, the rows the frontier
    needs are made to exist (a no-op for an eager DFA).
    """
    k = len(roots)
    f_start = np.repeat(np.arange(len(starts)), k)
    f_node = np.tile(np.asarray(roots, dtype=np.int64), len(starts))
    f_state = np.repeat(np.asarray(starts, dtype=np.int64), k)
    sym_cls = symbol_class[np.maximum(trie.symbol, 0)]
    ends, pruned = ([], [], []), ([], [], [])

    def prune():
        nonlocal f_start, f_node, f_state
        if absorbing is not None and len(f_state):
            stop = absorbing(f_node, f_state)
            for out, a in zip(pruned, (f_start, f_node, f_state)):
                out.append(a[stop])
            f_start, f_node, f_state = f_start[~stop], f_node[~stop], f_state[~stop]

    prune()
    while len(f_node):
        first = trie.child_start[f_node]
        count = trie.child_end[f_node] - first
        child = spans(first, count)
        if not len(child):
            break
        dfa.ensure_rows(f_state)
        rep = np.repeat(np.arange(len(f_node)), count)
        state = dfa.transitions[f_state[rep], sym_cls[child]]
        keep = state >= 0
        f_start, f_node, f_state = f_start[rep][keep], child[keep], state[keep].astype(np.int64)
        prune()
        at_end = is_end[f_node]
        for out, a in zip(ends, (f_start, f_node, f_state)):
            out.append(a[at_end])
    return tuple(_cat(x) for x in ends), tuple(_cat(x) for x in pruned)


def _grown(a: np.ndarray, at_least: int) -> np.ndarray:
    """``a`` (int64, -1 for unknown) extended with -1 to at least twice its size."""
    out = np.full(max(2 * len(a), at_least), -1, dtype=np.int64)
    out[: len(a)] = a
    return out


def _cat(parts: list) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


class TokenIndex:
    """Allowed-token bitmasks of every DFA state over one vocabulary.

    Args:
        dfa: a ``DFA`` or ``LazyDFA``.
        vocab: the ``Vocabulary`` the masks are over.
        eager: build every row now (default: for a DFA that is not lazy and has at
            most ``EAGER_LIMIT`` states); else each row when first asked for.
        compiled: run narrow walks compiled (``fsm.compiled_walk``; default:
            where numba is installed).

    Raises:
        ImportError: ``compiled=True`` where numba cannot be imported.

    Example::

        >>> index = TokenIndex(compile_regex(r"[0-9]+"), vocab)
        >>> row = index.mask(0)        # int32[ceil(V/32)]: digits-only tokens
        >>> index.next_state(0, tok)   # -1 if tok is not allowed
    """

    def __init__(self, dfa: DFA, vocab, eager: bool | None = None, compiled: bool | None = None):
        self.dfa = dfa
        if compiled and not COMPILED_AVAILABLE:
            raise ImportError("compiled=True needs numba (a dependency of guided): pip install numba")
        self._compiled = compiled  # None: compiled once numba is loaded (``compiled``)
        self._walker: CompiledWalk | None = None
        # Misses take the lazy DFA's lock (one guide may serve several threads: the
        # compiled walk's buffers and the DFA's growth must not interleave).
        self._lock = getattr(dfa, "lock", None) or threading.RLock()
        self.vocab = vocab
        self.vocab_size = vocab.size
        self.words = bitmask_words(vocab.size)
        self._split = split_vocabulary(vocab)
        self._class_runs: RunTrie | None = None  # the split trie over this DFA's classes
        self._run_of = np.full(max(dfa.num_states, 64), -1, dtype=np.int64)  # _plain_run; -1: unknown
        self._text_of: dict[int, int] = {}  # _text_run
        # Per state: whether every plain byte / every character loops back (successors;
        # -1: not known yet).
        self._loops = np.full((2, 64), -1, dtype=np.int8)
        self._successor_buffers: tuple | None = None
        # successor_targets: per DFA state, the mark of the last walk that reached it
        self._seen = np.full(64, -1, dtype=np.int64)
        self._seen_mark = -1
        byte_level = self._split.byte_level
        text_roots = byte_level.roots[byte_level.text_node[byte_level.roots]]
        self._text_cap = int(byte_level.chars[text_roots].max(initial=0)) + 1
        # Plain rooms are followed twice as far as the longest plain token (SmolLM2:
        # 48 bytes) and one more: a cut chain's first half keeps lower bounds of at
        # least half that, so a state with room allows every plain token either way.
        # (A fixed cap such as 256 would expand a counted string's first room up to
        # 256 lazy states ahead of the text, which decoding may never reach.)
        plain_roots = byte_level.roots[byte_level.plain_node[byte_level.roots]]
        self._plain_cap = 2 * (int(byte_level.height[plain_roots].max(initial=0)) + 1)
        self._utf8_classes: list[list[itemgetter]] | None = None
        self._plain_list = np.unique(dfa.byte_to_class[np.frombuffer(PLAIN_BYTES, dtype=np.uint8)]).tolist()
        # A row's targets on the plain classes, as a tuple (at C speed).
        self._plain_targets = itemgetter(*self._plain_list, self._plain_list[0])
        self._row_of_state = np.full(max(dfa.num_states, 64), -1, dtype=np.int64)
        self._rows: list[np.ndarray] = []
        self._row_ids: dict[bytes, int] = {}
        self._row_of_runs: dict[tuple, int] = {}  # a narrow walk's runs -> row id
        self._symbol_class: np.ndarray | None = None  # the DFA's class of each trie symbol
        self._row_lists: dict[int, list[int]] = {}
        self._few_of: dict[int, list | None] = {}  # _few_moves
        self._loop_of: dict[int, int] = {}  # _loop_bytes
        self._class_bytes: list[list[int]] = []
        self._class_masks: list[int] = []  # the bytes of each class as bits of an int
        self._utf8_of: dict[int, int] = {}  # _utf8_target
        #: The bits of the EOS tokens alone.
        self.eos_row = np.zeros(self.words, dtype=np.int32)
        for e in vocab.eos_token_ids:
            self.eos_row[e >> 5] |= np.uint32(1 << (e & 31)).view(np.int32)
        self._token_bytes = vocab.token_bytes
        # Bytes of the longest token: the highest subtrie below the root (a max over
        # the token list costs ~45 ms, once per index whose DFA has levels).
        self._longest_token = int(byte_level.height[byte_level.roots].max(initial=0))
        if eager if eager is not None else (not dfa.lazy and dfa.num_states <= EAGER_LIMIT):
            self.build_all()

    # -- rows --------------------------------------------------------------------

    @property
    def complete(self) -> bool:
        return bool((self._row_of_state[: self.dfa.num_states] >= 0).all())

    @property
    def num_rows(self) -> int:
        return len(self._rows)

    def known_row_id(self, state: int) -> int:
        """The deduplicated row of ``state`` if computed already, else -1 (no lock,
        nothing computed)."""
        of_state = self._row_of_state
        return int(of_state[state]) if 0 <= state < len(of_state) else -1

    def row_id(self, state: int) -> int:
        """The deduplicated row of ``state``, computing it on first use."""
        if state < len(self._row_of_state):
            r = self._row_of_state[state]
            if r >= 0:
                return int(r)
        with self._lock:
            if state >= len(self._row_of_state):
                self._grow()
            r = self._row_of_state[state]
            if r < 0 and self._row_from_twin(state):
                r = self._row_of_state[state]
            if r < 0:
                first = self.num_rows == 0  # the first mask computes nothing more (TTFM)
                # The collector is paused where Python builds much: the compiled walk
                # pauses it itself, around the rows it leaves to Python.
                if self.compiled:
                    found = self._narrow_miss(state)
                else:
                    with gc_paused():
                        found = self._narrow_miss(state)
                if not found:
                    with gc_paused():
                        if first:
                            self._compute([state], first=True)
                        else:
                            self._compute_ahead(state)
                r = self._row_of_state[state]
        return int(r)

    def _row_from_twin(self, state: int) -> bool:
        """Give ``state`` the row of its twin (``LazyDFA.mask_twin``: a state of a
        long ``maxLength`` string with a pattern, each character a new state, takes
        the tokens of the pattern's state without counts); True if it did."""
        if not getattr(self.dfa, "has_levels", False):
            return False
        twin = self.dfa.mask_twin(state, self._longest_token)
        if twin is None:
            return False
        r = self.row_id(twin)
        if state >= len(self._row_of_state):
            self._grow()
        self._row_of_state[state] = r
        return True

    def _grow(self) -> None:
        """A lazy DFA found new states: make room for their rows."""
        self._row_of_state = _grown(self._row_of_state, self.dfa.num_states)

    def _narrow_miss(self, state: int) -> bool:
        """Set ``state``'s row alone from a narrow walk; False (nothing set) when
        ``state`` is too wide for one.

        No rows are computed ahead here: narrow walks of the states a miss's tokens
        lead to (6,000 checks per miss) make all mask time 30-40% higher and TBM p99
        about three times higher: the rows computed ahead do not pay for themselves.
        Compiled where numba is loaded (``_compiled_miss``), else the Python walk below."""
        if self.compiled:
            return self._compiled_miss(state)
        if len(self._row_lists) * self.dfa.num_classes > _ROW_LIST_ENTRIES:
            self._row_lists.clear()
            self._few_of.clear()
            self._loop_of.clear()
        split = self._walked_trie()
        if not self._class_bytes:  # (only the Python walk reads them; ~50 µs)
            self._class_bytes = class_bytes(self.dfa.byte_to_class)
            self._class_masks = [sum(1 << b for b in bs) for bs in self._class_bytes]
        got = narrow_walk(split.lists, self._symbol_class, self._row_list, self._few_moves, self._loop_bytes,
                          self._plain_run, self._text_run, self._utf8_target, state, NARROW_BUDGET)
        if got is None:
            return False
        acc = self.dfa.is_accepting(state)
        lo, hi = np.asarray(got[0], dtype=np.int64), np.asarray(got[1], dtype=np.int64)
        order = np.lexsort((hi, lo))
        lo, hi = lo[order], hi[order]
        key = (lo.tobytes(), hi.tobytes(), acc)
        rid = self._row_of_runs.get(key)
        if rid is None:
            row = self._row_from_runs(split, lo, hi, acc)
            rid = self._row_of_runs[key] = self._intern(row)
        self._set_row(state, rid)
        return True

    def _compiled_miss(self, state: int) -> bool:
        """``_narrow_miss`` by ``fsm.compiled_walk``: the walk sets the bits of short
        runs in its row, the long ones come from the vocabulary's bank. (Every line
        here runs once per new state, in the caches the walk left cold.)"""
        walker = self._walker
        if walker is None:
            split = self._walked_trie()
            if split.table is None:
                split.table = TrieTable(split)
            walker = self._walker = CompiledWalk(split.table, split.lists, self._symbol_class, self.dfa,
                                                 self._plain_list, self._plain_cap, self._text_cap, split.order,
                                                 self.words, LONG_RUN, split)
        got = walker.walk(self.dfa, state)
        if got is None:
            return False
        lo, hi, row = got
        if len(lo):
            split = self._split.byte_level
            ids, bank = split.bank.ids(lo, hi, self.words)
            walker.runs_row(row, split.order, lo, hi, LONG_RUN, bank, ids)
        row = row.view(np.int32)
        if self.dfa.is_accepting(state):
            row |= self.eos_row
        self._set_row(state, self._intern(row))
        return True

    def _walked_trie(self) -> RunTrie:
        """The byte-level split trie, with what narrow walks read of it made."""
        split = self._split.byte_level
        if split.lists is None:
            split.lists = TrieLists(split)
        if self._symbol_class is None:
            self._symbol_class = np.append(self.dfa.byte_to_class, [0, 0, 0]).astype(np.int64)
        return split

    def _set_row(self, state: int, rid: int) -> None:
        if self.dfa.num_states > len(self._row_of_state):
            self._grow()
        self._row_of_state[state] = rid

    def _row_list(self, state: int) -> list[int]:
        """The DFA's row of ``state`` as a list (kept across misses, up to
        ``_ROW_LIST_ENTRIES`` entries in all: rows never change once built)."""
        got = self._row_lists.get(state)
        if got is None:
            got = self._row_lists[state] = self.dfa.next_states(state)
        return got

    def _few_moves(self, state: int):
        """``fsm.narrow.few_moves`` of ``state``'s row (kept as ``_row_lists``)."""
        got = self._few_of.get(state, _UNSET)
        if got is _UNSET:
            got = self._few_of[state] = few_moves(self._row_list(state), self._class_bytes)
        return got

    def _loop_bytes(self, state: int) -> int:
        """``fsm.narrow.loop_bytes`` of ``state`` (kept as ``_row_lists``)."""
        got = self._loop_of.get(state)
        if got is None:
            got = self._loop_of[state] = loop_bytes(self._row_list(state), state, self._class_masks)
        return got

    def _compute_ahead(self, state: int) -> None:
        """Compute ``state``'s row and those of the states decoding can reach from it.

        A miss costs a batched walk whose numpy overhead dwarfs one small state, and
        every state decoding visits misses once. So a miss walks breadth-first over
        *token* successors (the states an allowed token leads to, which the walk
        finds anyway) until a work budget is spent: one miss then covers the next
        several tokens of a key, a number or a string instead of one. Those
        extra rows stop where they would grow the NFA past ``AHEAD_NFA_GROWTH``.
        """
        frontier, work, done = [state], 0, 0
        while frontier:
            if done == 0 or not self.dfa.lazy:
                successors, pairs = self._compute(frontier)
            else:
                # Rows ahead of decoding may build deferred NFA fragments only so far:
                # the NFA grows with what they reach, which decoding may never visit.
                self.dfa.growth_limit = min(self.dfa.nfa_size + AHEAD_NFA_GROWTH, AHEAD_NFA_MAX)
                try:
                    successors, pairs = self._compute(frontier)
                except GrowthDeferred:
                    break
                finally:
                    self.dfa.growth_limit = None
            work += pairs
            done += len(frontier)
            if work >= AHEAD_WORK or done >= AHEAD_STATES:
                break
            if self.dfa.num_states > len(self._row_of_state):
                self._grow()
            unknown = successors[self._row_of_state[successors] < 0]
            # Each new state will cost about what this level's did on average.
            per_state = max(1, pairs // len(frontier))
            room = min(AHEAD_STATES - done, max(1, (AHEAD_WORK - work) // per_state))
            frontier = unknown[:room].tolist()

    def mask(self, state: int) -> np.ndarray:
        return self._rows[self.row_id(state)]

    def rows(self) -> list[np.ndarray]:
        return self._rows

    def build_all(self) -> "TokenIndex":
        """Compute every remaining row (batched walks).

        For a lazy DFA this first discovers every reachable state."""
        if self.dfa.lazy:
            seen, stack = {0}, [0]
            while stack:
                for nxt in self.dfa.next_states(stack.pop()):
                    if nxt >= 0 and nxt not in seen:
                        seen.add(nxt)
                        stack.append(nxt)
            if self.dfa.num_states > len(self._row_of_state):
                self._grow()
        todo = np.nonzero(self._row_of_state[: self.dfa.num_states] < 0)[0].tolist()
        for i in range(0, len(todo), _BATCH_STATES):
            check_deadline()
            self._compute(todo[i : i + _BATCH_STATES])
        return self

    def _compute(self, states: list[int], first: bool = False) -> tuple[np.ndarray, int]:
        """Rows of ``states``; returns the distinct states their tokens lead to, and
        the walk's work (alive pairs).

        One walk over the split trie (``fsm.trie.SplitVocabulary``): the ~1.3k
        non-plain tokens in full, the plain ones only until a state that stays alive
        on any plain text as long as the tokens below, whose whole subtree is then
        allowed. A free string's inside or a key that may be any string thus costs
        a few hundred pairs instead of ~49k.
        """
        split, symbol_class = self._runs(first)
        batch = np.asarray(states, dtype=np.int64)
        n = len(batch)
        (em, en, es), (xm, xn, xs) = walk(split.trie, symbol_class, self.dfa, batch, split.is_end,
                                          absorbing=lambda nodes, st: self._plain_subtrees(split, nodes, st),
                                          roots=split.roots)
        # Each hit is a run of ``split.order``: a token end its own tokens, a pruned
        # node its whole subtree.
        member = np.concatenate([em, xm])
        lo = np.concatenate([split.lo[en], split.lo[xn]])
        hi = np.concatenate([split.lo[en] + split.own[en], split.hi[xn]])
        order = np.lexsort((lo, member))
        member, lo, hi = member[order], lo[order], hi[order]
        bounds = np.searchsorted(member, np.arange(n + 1))
        row_of_key: dict[tuple, int] = {}
        ids = []
        for i, state in enumerate(batch.tolist()):
            a, b = bounds[i], bounds[i + 1]
            acc = self.dfa.is_accepting(state)
            key = (lo[a:b].tobytes(), hi[a:b].tobytes(), acc)
            rid = row_of_key.get(key)
            if rid is None:
                rid = row_of_key[key] = self._intern(self._row_from_runs(split, lo[a:b], hi[a:b], acc))
            ids.append(rid)
        self._row_of_state[batch] = ids
        return np.unique(np.concatenate([es, xs])), len(en) + len(xn)

    @property
    def compiled(self) -> bool:
        """Whether walks run compiled (``fsm.compiled_walk``): as asked, else once
        numba is loaded (the rows are the same either way; a fresh process's first
        small compile walks in Python while numba loads behind it)."""
        if self._compiled is None:
            return COMPILED_AVAILABLE and kernels_ready()
        return self._compiled

    @compiled.setter
    def compiled(self, value: bool) -> None:
        self._compiled = value

    def successors(self, states) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Where each allowed token leads from each of ``states``, in runs of the
        split trie's token order (the one rows are built from after the first:
        ``_runs``): ``(member, lo, hi, target)``, the tokens ``order[lo:hi]`` all
        lead from ``states[member]`` to DFA state ``target``.

        A token end is its own run; below a node whose state loops on any plain text
        (any character, for text tokens: the inside of a free string, ``.*``) the
        whole subtree is one run back to that state, so a free string costs a few
        hundred runs, not ~49k. Elsewhere (a counted string) each token is walked.
        For ``fsm.distance``; rows are built from such runs by ``row_from_runs``.
        """
        split, classes = self._runs(first=False)
        batch = np.asarray(states, dtype=np.int64)
        if self.compiled:
            return self._successors_compiled(split, classes, batch, distinct=False)

        def loops(nodes: np.ndarray, st: np.ndarray) -> np.ndarray:
            out = np.zeros(len(st), dtype=bool)
            for kind, marked in enumerate((split.plain_node, split.text_node)):
                on = np.nonzero(marked[nodes])[0]
                if len(on):
                    out[on] = self._loop_facts(np.unique(st[on]).tolist())[kind, st[on]] == 1
            return out

        with self._lock:
            (em, en, es), (xm, xn, xs) = walk(split.trie, classes, self.dfa, batch, split.is_end,
                                              absorbing=loops, roots=split.roots)
        member = np.concatenate([em, xm])
        lo = np.concatenate([split.lo[en], split.lo[xn]])
        hi = np.concatenate([split.lo[en] + split.own[en], split.hi[xn]])
        return member, lo, hi, np.concatenate([es, xs])

    def successor_targets(self, states) -> tuple[np.ndarray, np.ndarray]:
        """The distinct DFA states one token leads to from each of ``states``:
        ``(member, target)`` pairs, ``target`` reached from ``states[member]``, each
        pair once. What ``successors`` gives without its runs (a counted string's
        state has thousands of them, ~3k a state in a JSON schema); for
        ``fsm.distance``'s enumeration of the token graph."""
        if self.compiled:
            split, classes = self._runs(first=False)
            member, _, _, target = self._successors_compiled(split, classes, np.asarray(states, dtype=np.int64),
                                                             distinct=True)
            return member, target
        member, _, _, target = self.successors(states)
        keys = np.unique(member << 32 | target)
        return keys >> 32, keys & 0xFFFFFFFF

    def _successors_compiled(self, split: RunTrie, classes: np.ndarray, batch: np.ndarray, distinct: bool):
        """``successors`` by ``fsm.kernels.successors``: a walk per state, in rounds
        until every row and loop fact it meets is built; with ``distinct``, the first
        run to each target only (``successor_targets``)."""
        from guided.fsm.kernels.successors import successor_runs  # imports numba

        trie = split.trie
        buffers = self._successor_buffers
        if buffers is None or buffers[0] is not split:
            n = trie.num_nodes
            sym = np.asarray(classes, dtype=np.int64)[np.maximum(trie.symbol, 0)]
            buffers = self._successor_buffers = (
                split, sym, *(np.empty(n, dtype=np.int64) for _ in range(7)), split.is_end.astype(np.bool_),
                *(np.asarray(a, dtype=np.int64) for a in (split.lo, split.hi, split.own, split.roots)))
        _, sym, stack_node, stack_state, out_lo, out_hi, out_target, pend_node, pend_state, is_end, lo, hi, own, roots \
            = buffers
        members, los, his, targets = [], [], [], []
        with self._lock:
            for k, state in enumerate(batch.tolist()):
                sp, runs = len(roots), 0
                stack_node[:sp] = roots
                stack_state[:sp] = state
                mark = -1
                if distinct:  # a mark of its own per walk: no clearing between states
                    self._seen_mark += 1
                    mark = self._seen_mark
                while sp:
                    trans = self.dfa.transitions
                    if distinct and len(self._seen) < trans.shape[0]:
                        grown = np.full(max(trans.shape[0], 2 * len(self._seen)), -1, dtype=np.int64)
                        grown[: len(self._seen)] = self._seen
                        self._seen = grown
                    runs, pending = successor_runs(
                        sp, stack_node, stack_state, trie.child_start, trie.child_end, sym, is_end, split.plain_node,
                        split.text_node, trans, self._loop_facts(()), lo, hi, own, runs, out_lo, out_hi, out_target,
                        pend_node, pend_state, self._seen, mark)
                    if pending:
                        need = np.unique(pend_state[:pending])
                        self.dfa.ensure_rows(need)
                        self._loop_facts(need.tolist())
                        stack_node[:pending] = pend_node[:pending]
                        stack_state[:pending] = pend_state[:pending]
                    sp = pending
                members.append(np.full(runs, k, dtype=np.int64))
                los.append(out_lo[:runs].copy())
                his.append(out_hi[:runs].copy())
                targets.append(out_target[:runs].copy())
        return tuple(_cat(x) for x in (members, los, his, targets))

    def _loop_facts(self, states) -> np.ndarray:
        """The table of loop facts, ``[0 / 1, state]``: whether every plain byte /
        every character leads the state back to itself (1, 0; -1 not known), with
        those of ``states`` (rows built) filled in."""
        size = max(self.dfa.num_states, max(states, default=0) + 1)
        if self._loops.shape[1] < size:
            grown = np.full((2, max(size, 2 * self._loops.shape[1])), -1, dtype=np.int8)
            grown[:, : self._loops.shape[1]] = self._loops
            self._loops = grown
        for q in states:
            if self._loops[0, q] < 0:
                self._loops[0, q] = self._plain_successor(q) == q
                self._loops[1, q] = self._char_successor(q) == q
        return self._loops

    def row_from_runs(self, lo: np.ndarray, hi: np.ndarray, accepting: bool) -> np.ndarray:
        """The packed row (int32 words) of the tokens in runs ``order[lo:hi]`` of
        ``successors``' split trie, EOS added where ``accepting``."""
        return self._row_from_runs(self._runs(first=False)[0], lo, hi, accepting)

    def _row_from_runs(self, split: RunTrie, lo: np.ndarray, hi: np.ndarray, accepting: bool) -> np.ndarray:
        row = np.zeros(self.words, dtype=np.uint32)
        big = hi - lo >= LONG_RUN
        if self.compiled:
            from guided.fsm.kernels.narrow import runs_row  # imports numba

            ids, bank = split.bank.made(lo[big].tolist(), hi[big].tolist(), self.words)
            runs_row(row, split.order, lo, hi, LONG_RUN, bank, ids)
        else:
            for a, b in zip(lo[big].tolist(), hi[big].tolist()):
                row |= split.run_bits(a, b, self.words)
            lo, count = lo[~big], (hi - lo)[~big]
            if len(count):
                set_bits(row, split.order[spans(lo, count)])
        row = row.view(np.int32)
        return row | self.eos_row if accepting else row

    def _runs(self, first: bool) -> tuple[RunTrie, np.ndarray]:
        """The split trie to walk and its symbol -> byte class map: bytes for the
        first row (no per-DFA set-up: the first mask's latency) and for DFAs with
        many byte classes (their class trie is barely smaller: 73k of 100k nodes at
        64 classes, for ~25 ms of set-up), else the DFA's classes (built once; a
        counted string's trie is a few hundred nodes)."""
        if first or self.dfa.num_classes > CLASS_TRIE_MAX_CLASSES:
            return self._split.byte_level, np.append(self.dfa.byte_to_class, [0, 0, 0])
        if self._class_runs is None:
            self._class_runs = self._split.for_classes(self.dfa.byte_to_class)
        return self._class_runs, np.arange(self.dfa.num_classes + 3)

    def _plain_run(self, state: int) -> int:
        """How many plain bytes, whichever they are, keep the DFA alive from
        ``state`` (at most ``_plain_cap``, beyond any token), following the
        chain where every plain byte leads to one same state (``_room``; memoised
        in ``_run_of``)."""
        runs = self._run_room()
        got = runs[state]
        if got >= 0:
            return int(got)
        return self._room(state, self._plain_successor, self._plain_memo, self._plain_cap)

    def _plain_successor(self, state: int) -> int:
        """The one state every plain byte leads to from ``state``, or -1."""
        targets = self._plain_targets(self._row_list(state))
        first = targets[0]
        return first if targets.count(first) == len(targets) else -1

    def _plain_memo(self, state: int, room: int | None = None) -> int:
        runs = self._run_room()
        if room is not None:
            runs[state] = room
        return int(runs[state])

    def _room(self, state: int, successor, memo, cap: int) -> int:
        """The fewest characters after which some character kills the DFA, from
        ``state`` (``cap`` if none within reach), following the chain of states
        where every such character leads to one same state (``successor(state)``:
        that state, or -1 where they do not, which counts as dying there).

        Any text of at most that many characters then keeps the DFA alive, so a trie
        node whose tokens are no longer is allowed whole. A free string loops (the
        cap); the inside of a ``maxLength`` string counts down. The room falls by one
        along the chain, so each state on it is memoised; past ``cap`` states the
        chain is cut, and only its first half keeps its rooms, as lower bounds of at
        least half the cap (giving the whole cut chain the cap would, in a string a
        little longer than the cap, allow tokens longer than their room at the
        positions near its end).
        A state whose NFA states say it takes at least half the cap of characters
        (``LazyDFA.member_room``: a long counted string) has that room without
        following the chain, which would build states far ahead of the text (at a
        ``maxLength`` 255 string's start, ~160 of them, ~5 ms).
        ``memo(state)``: a known room, else -1; ``memo(state, room)`` records one."""
        path, on_path = [], set()
        room = -1
        member_room = getattr(self.dfa, "member_room", None)
        while len(path) < cap:
            known = memo(state)
            if known >= 0:
                room = known
                break
            if state in on_path:  # back on the chain: nothing on it ever dies
                room = cap
                break
            if member_room is not None:
                bound = member_room(state)
                if bound >= cap // 2:
                    room = min(cap, bound)
                    memo(state, room)
                    break
            path.append(state)
            on_path.add(state)
            nxt = successor(state)
            if nxt < 0:
                room = 0
                path.pop()
                memo(state, 0)
                break
            state = nxt
        if room < 0:  # cut at cap states: lower bounds
            for d, s in enumerate(path[: cap // 2]):
                memo(s, cap - d)
            return memo(path[0]) if path else 0
        for s in reversed(path):
            room = min(cap, room + 1)
            memo(s, room)
        return memo(path[0]) if path else room

    def _run_room(self) -> np.ndarray:
        """``_run_of``, grown to cover every state the DFA has now."""
        if len(self._run_of) < self.dfa.num_states:
            self._run_of = _grown(self._run_of, self.dfa.num_states)
        return self._run_of

    def _text_run(self, state: int) -> int:
        """How many characters but the quote, the backslash and controls, whichever
        they are (plain bytes or whole UTF-8 sequences), keep the DFA alive from
        ``state``, as ``_plain_run`` (``_room``). Capped at one more than the
        longest text token has, so a 255-character string's chain is not followed to
        its end (each step costs ~10 lazy states)."""
        got = self._text_of.get(state)
        if got is not None:
            return got
        return self._room(state, self._char_successor, self._text_memo, self._text_cap)

    def _char_successor(self, state: int) -> int:
        """The one state every plain byte and every whole non-ASCII character leads
        to from ``state``, or -1."""
        target = self._plain_successor(state)
        return target if target >= 0 and self._utf8_target(state) == target else -1

    def _text_memo(self, state: int, room: int | None = None) -> int:
        if room is not None:
            self._text_of[state] = room
        return self._text_of.get(state, -1)

    def _utf8_target(self, state: int) -> int:
        """The one state every whole non-ASCII UTF-8 character leads to from
        ``state``, or -1 when they do not all lead to one live state (memoised)."""
        got = self._utf8_of.get(state)
        if got is None:
            got = self._utf8_of[state] = self._find_utf8_target(state)
        return got

    def _find_utf8_target(self, state: int) -> int:
        if self._utf8_classes is None:
            cls = self.dfa.byte_to_class[:256].tolist()  # (np.unique per range: ~0.25 ms an index)
            # Per step of each sequence, its classes' targets out of a row, as a
            # tuple (at C speed; the first class twice, so one class is a tuple too).
            self._utf8_classes = [[itemgetter(*(c := sorted(set(cls[lo : hi + 1]))), c[0]) for lo, hi in seq]
                                  for seq in UTF8_SEQUENCES]
        target = None
        for seq in self._utf8_classes:
            reached = {state}
            for targets_of in seq:
                nxt = set()
                for s in reached:
                    nxt.update(targets_of(self._row_list(s)))
                if -1 in nxt:
                    return -1
                reached = nxt
            if len(reached) != 1 or (target is not None and reached != {target}):
                return -1
            (target,) = reached
        return target

    def _plain_subtrees(self, split: RunTrie, nodes: np.ndarray, states: np.ndarray) -> np.ndarray:
        """Which (node, state) pairs allow every plain token below the node: a node
        of the plain subtrie whose state stays alive on any plain text as long as
        the longest token below it."""
        out = np.zeros(len(states), dtype=bool)
        on_plain = np.nonzero(split.plain_node[nodes])[0]
        if len(on_plain):
            st = states[on_plain]
            self._run_room()
            for s in np.unique(st[self._run_of[st] < 0]).tolist():
                self._plain_run(s)
            out[on_plain] = self._run_of[st] >= split.height[nodes[on_plain]]
        on_text = np.nonzero(split.text_node[nodes])[0]
        if len(on_text):
            room = [self._text_run(s) for s in states[on_text].tolist()]
            out[on_text] = np.array(room, dtype=np.int64) >= split.text_need[nodes[on_text]]
        return out

    def _intern(self, row: np.ndarray) -> int:
        key = row.tobytes()
        rid = self._row_ids.get(key)
        if rid is None:
            rid = self._row_ids[key] = len(self._rows)
            self._rows.append(np.ascontiguousarray(row))
        return rid

    # -- stepping ----------------------------------------------------------------

    def next_state(self, state: int, token_id: int) -> int:
        """DFA state after ``token_id`` (a text token), or -1 if it is not allowed."""
        if not 0 <= token_id < self.vocab_size:
            return -1
        data = self._token_bytes[token_id]
        if not data:
            return -1
        return self.dfa.step(state, data)

    def memory_bytes(self) -> int:
        """Bytes held by the rows (the vocabulary's trie is shared)."""
        return sum(r.nbytes for r in self._rows) + self._row_of_state.nbytes
