"""Token index: for each DFA state, the bitmask of tokens that keep the DFA alive.

::

    DFA state s ──walk the token trie from s──> alive trie nodes ──token_node──> tokens
                   (all states of a batch at once;                  row bitmask int32[ceil(V/32)]
                    a branch is dropped as soon as it dies)         + EOS bits if s accepts

Rows are deduplicated (many states allow the same tokens: all string-interior
states of a JSON schema, every counting state of ``.{0,200}`` but the last few).

Two modes, chosen by the size of the automaton:

* **eager** (``num_states <= eager_limit``): every row at construction, one batched
  walk over the *class trie* (the vocabulary trie with bytes replaced by the DFA's
  byte classes, typically 10-100x smaller than the byte trie);
* **lazy**: a state's row the first time it is asked for. The very first row walks
  the byte trie directly (no per-DFA set-up: that is what makes the first mask fast);
  a later miss builds the class trie once and computes the missing state together
  with its nearest uncomputed neighbours in one batched walk.

Where a token leads is not stored (it would be ``states x V`` integers); it is
``dfa.step(state, token_bytes)``, a few list lookups per byte.

Cost notes: the walk costs O(alive (state, node) pairs) array work; a fully
permissive state over the 49k SmolLM2 vocabulary visits ~100k byte-trie nodes
(about 2 ms); a digit state a few dozen.
"""

from __future__ import annotations

import numpy as np

from .dfa import DFA
from .trie import Trie, class_trie, vocabulary_bytes

#: Automata with at most this many states get every row at compile time.
EAGER_LIMIT = 256

#: A lazy miss computes up to this many (state x class-trie node) pairs at once.
LAZY_BATCH_WORK = 2_000_000
#: ... and, over a lazily determinised DFA, at most this many states.
LAZY_DFA_NEIGHBOURS = 32

# Bound on the (states x trie nodes) boolean scratch matrix of a batched walk.
_MAX_SCRATCH = 32_000_000


def bitmask_words(vocab_size: int) -> int:
    return (vocab_size + 31) // 32


def pack_bits(allowed: np.ndarray) -> np.ndarray:
    """bool [B, V] -> int32 [B, ceil(V/32)], token t at word t // 32, bit t % 32."""
    b, v = allowed.shape
    words = bitmask_words(v)
    padded = np.zeros((b, words * 32), dtype=bool)
    padded[:, :v] = allowed
    return np.packbits(padded, axis=1, bitorder="little").view("<i4").reshape(b, words)


def walk(trie: Trie, symbol_class: np.ndarray, dfa: DFA, starts: np.ndarray) -> np.ndarray:
    """bool [len(starts), trie.num_nodes]: node n alive when walked from starts[i].

    Works on a ``DFA`` or a ``LazyDFA``: before each level, the rows the frontier
    needs are made to exist (a no-op for an eager DFA).
    """
    alive = np.zeros((len(starts), trie.num_nodes), dtype=bool)
    f_start = np.arange(len(starts))
    f_node = np.zeros(len(starts), dtype=np.int64)
    f_state = np.asarray(starts, dtype=np.int64)
    sym_cls = symbol_class[np.maximum(trie.symbol, 0)]
    while len(f_node):
        first = trie.child_start[f_node]
        count = trie.child_end[f_node] - first
        total = int(count.sum())
        if total == 0:
            break
        dfa.ensure_rows(f_state)
        rep = np.repeat(np.arange(len(f_node)), count)
        offset = np.arange(total) - np.repeat(np.cumsum(count) - count, count)
        child = first[rep] + offset
        state = dfa.transitions[f_state[rep], sym_cls[child]]
        keep = state >= 0
        f_start, f_node, f_state = f_start[rep][keep], child[keep], state[keep].astype(np.int64)
        alive[f_start, f_node] = True
    return alive


def _unique_rows(matrix: np.ndarray):
    """Distinct rows of a bool matrix and each row's index among them (hash-based:
    ``np.unique(axis=0)`` sorts wide rows as opaque records and is far slower)."""
    packed = np.packbits(matrix, axis=1)
    first: dict[bytes, int] = {}
    which = np.empty(len(matrix), dtype=np.int64)
    for i, key in enumerate(map(bytes, packed)):
        which[i] = first.setdefault(key, len(first))
    rows = np.zeros(len(first), dtype=np.int64)
    rows[which] = np.arange(len(matrix))  # any member of each group represents it
    return matrix[rows], which


class TokenIndex:
    """Allowed-token bitmasks of every DFA state over one vocabulary.

    Example::

        >>> index = TokenIndex(compile_regex(r"[0-9]+"), vocab)
        >>> row = index.mask(0)        # int32[ceil(V/32)]: digits-only tokens
        >>> index.next_state(0, tok)   # -1 if tok is not allowed
    """

    def __init__(self, dfa: DFA, vocab, eager: bool | None = None):
        self.dfa = dfa
        self.vocab = vocab
        self.vocab_size = vocab.size
        self.words = bitmask_words(vocab.size)
        self._bytes = vocabulary_bytes(vocab)
        self._class_trie: Trie | None = None
        self._row_of_state = np.full(max(dfa.num_states, 64), -1, dtype=np.int64)
        self._rows: list[np.ndarray] = []
        self._row_ids: dict[bytes, int] = {}
        #: The bits of the EOS tokens alone.
        self.eos_row = np.zeros(self.words, dtype=np.int32)
        for e in vocab.eos_token_ids:
            self.eos_row[e >> 5] |= np.uint32(1 << (e & 31)).view(np.int32)
        self._token_bytes = vocab.token_bytes
        if eager if eager is not None else (not dfa.lazy and dfa.num_states <= EAGER_LIMIT):
            self.build_all()

    # -- rows --------------------------------------------------------------------

    @property
    def complete(self) -> bool:
        return bool((self._row_of_state[: self.dfa.num_states] >= 0).all())

    @property
    def num_rows(self) -> int:
        return len(self._rows)

    def row_id(self, state: int) -> int:
        """The deduplicated row of ``state``, computing it on first use."""
        if state >= len(self._row_of_state):
            self._grow()
        r = self._row_of_state[state]
        if r < 0:
            if self.num_rows == 0:
                self._compute([state])
            else:
                self._compute(self._neighbourhood(state), use_class_trie=True)
            r = self._row_of_state[state]
        return int(r)

    def _grow(self) -> None:
        """A lazy DFA found new states: make room for their rows."""
        n = max(2 * len(self._row_of_state), self.dfa.num_states)
        grown = np.full(n, -1, dtype=np.int64)
        grown[: len(self._row_of_state)] = self._row_of_state
        self._row_of_state = grown

    def _neighbourhood(self, state: int) -> list[int]:
        """``state`` and the not yet computed states nearest to it (BFS over the DFA).

        One batched walk costs little more than a single-state walk (the per-level
        numpy overhead dominates a lone state), so a miss computes the states
        decoding is likely to visit next, as many as keep the walk's work bounded.
        """
        if self._class_trie is None:
            self._class_trie = class_trie(self._bytes, self.dfa.byte_to_class)
        budget = max(1, min(4096, LAZY_BATCH_WORK // max(self._class_trie.num_nodes, 1)))
        if self.dfa.lazy:
            budget = min(budget, LAZY_DFA_NEIGHBOURS)  # each neighbour costs a subset construction
        todo, seen = [state], {state}
        i = 0
        while i < len(todo) and len(todo) < budget:
            for nxt in self.dfa.next_states(todo[i]):
                if nxt >= 0 and nxt not in seen:
                    seen.add(nxt)
                    if nxt >= len(self._row_of_state):
                        self._grow()
                    if self._row_of_state[nxt] < 0:
                        todo.append(nxt)
                        if len(todo) >= budget:
                            break
            i += 1
        return todo

    def mask(self, state: int) -> np.ndarray:
        return self._rows[self.row_id(state)]

    def rows(self) -> list[np.ndarray]:
        return self._rows

    def build_all(self) -> "TokenIndex":
        """Compute every remaining row (one batched walk over the class trie).

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
        todo = np.nonzero(self._row_of_state[: self.dfa.num_states] < 0)[0]
        if len(todo):
            self._compute(todo.tolist(), use_class_trie=True)
        return self

    def _compute(self, states: list[int], use_class_trie: bool | None = None) -> None:
        if use_class_trie is None:
            use_class_trie = self.num_rows > 0  # first row: skip the per-DFA set-up
        if use_class_trie:
            if self._class_trie is None:
                self._class_trie = class_trie(self._bytes, self.dfa.byte_to_class)
            trie, symbol_class = self._class_trie, np.arange(self.dfa.num_classes)
        else:
            trie, symbol_class = self._bytes.trie, self.dfa.byte_to_class
        # Tokens only care about the trie nodes where some token ends: dedupe states on
        # their alive pattern over those few columns before expanding to V tokens.
        end_nodes, token_col = trie.end_nodes, trie.token_column
        has_text = end_nodes[0] < 0  # column 0 is "no node" (special tokens) if present
        chunk = max(1, _MAX_SCRATCH // max(trie.num_nodes, 1))
        for i in range(0, len(states), chunk):
            batch = np.asarray(states[i : i + chunk], dtype=np.int64)
            alive = walk(trie, symbol_class, self.dfa, batch)
            pattern = alive[:, np.maximum(end_nodes, 0)]
            if has_text:
                pattern[:, 0] = False
            state_accepts = np.array([self.dfa.is_accepting(s) for s in batch.tolist()], dtype=bool)
            pattern = np.column_stack([pattern, state_accepts])
            uniq, which = _unique_rows(pattern)
            packed = pack_bits(uniq[:, token_col])
            ids = []
            for row, acc in zip(packed, uniq[:, -1]):
                if acc:
                    row = row | self.eos_row
                key = row.tobytes()
                rid = self._row_ids.get(key)
                if rid is None:
                    rid = self._row_ids[key] = len(self._rows)
                    self._rows.append(np.ascontiguousarray(row))
                ids.append(rid)
            self._row_of_state[batch] = np.asarray(ids, dtype=np.int64)[which.reshape(-1)]

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
        """Bytes held by the rows and the per-DFA class trie (the byte trie is shared)."""
        n = sum(r.nbytes for r in self._rows) + self._row_of_state.nbytes
        if self._class_trie is not None:
            n += self._class_trie.nbytes()
        return n
