"""The grammar's lexer: one lazily built DFA over all terminals at once.

::

    terminal DFAs  T0: "{"   T1: /[0-9]+/   T2: /"(...)*"/ ...
    lexer state    = the set of (terminal, terminal-DFA state) pairs still alive
    start(allowed) = {(t, 0) for t in allowed}   (the parser says which t may come)
    step(state, b) = the pairs that survive byte b; -1 when none does

A terminal is anything with a ``transitions`` table, ``byte_to_class`` and
``accepting`` (a ``fsm.DFA``, or a ``TerminalView``: one shared table, its own
accepting and live states). A terminal whose start state accepts matches the empty
string too, but a lexeme is never empty, so only its nonempty strings are read.

A lexeme is read with *longest match among the allowed terminals*: bytes extend the
current lexeme while any allowed terminal can take them, and the lexeme ends (with
every terminal that accepts it) at the first byte none can take. That is lark's
contextual lexer. The lexer reports every terminal that accepts the lexeme; which
one it is read as (a keyword that is also a NAME) is the grammar index's choice:
lark's priorities and keywords first for lark grammars, all of them (the parser
sorts it out) for grammars compiled from JSON Schema.

States are interned on first sight; a state's row (its successor on each byte class)
is built the first time it is needed, so a grammar with many terminals pays only for
the lexer states decoding visits.
"""

from __future__ import annotations

import numpy as np

UNKNOWN = -2  # a row not built yet


class TerminalView:
    """A terminal over a table shared with other terminals (the same text region,
    different end points): its own accepting states and the states that can still
    reach one."""

    __slots__ = ("transitions", "byte_to_class", "accepting", "live")

    def __init__(self, transitions, byte_to_class, accepting, live):
        self.transitions = transitions
        self.byte_to_class = byte_to_class
        self.accepting = accepting
        self.live = live


class Lexer:
    """Lazy product DFA of the terminal DFAs; see the module docstring.

    Example::

        >>> lx = Lexer([compile_regex("if"), compile_regex("[a-z]+")])
        >>> s = lx.start(frozenset({0, 1}))
        >>> lx.accepting_terminals(lx.step(s, b"if"))
        frozenset({0, 1})
    """

    def __init__(self, terminal_dfas):
        self.dfas = list(terminal_dfas)
        # Global byte classes: bytes that no terminal DFA tells apart.
        keys = list(zip(*(d.byte_to_class.tolist() for d in self.dfas))) if self.dfas else [()] * 256
        ids: dict[tuple, int] = {}
        self.byte_to_class = np.array([ids.setdefault(k, len(ids)) for k in keys], dtype=np.int32)
        self.num_classes = len(ids)
        rep = [0] * self.num_classes
        for b in range(255, -1, -1):
            rep[self.byte_to_class[b]] = b
        # Per terminal: state x global class -> terminal state (-1 dead), as lists.
        # Terminals may share one table (``TerminalView``): it is converted once.
        self._moves = []
        self._live = []  # per terminal: which of its table's states can still finish it (None: all)
        self._accepting = []
        shared: dict[int, list[list[int]]] = {}
        for d in self.dfas:
            moves = shared.get(id(d.transitions))
            if moves is None:
                cls = d.byte_to_class.tolist()
                moves = shared[id(d.transitions)] = [[row[cls[b]] for b in rep] for row in d.transitions.tolist()]
            live = getattr(d, "live", None)
            self._live.append(live.tolist() if live is not None else None)
            self._moves.append(moves)
            self._accepting.append(d.accepting.tolist())
        self._classes = self.byte_to_class.tolist()
        self._members: list[tuple[tuple[int, int], ...]] = []
        self._ids: dict[tuple[tuple[int, int], ...], int] = {}
        self._rows: list[list[int] | None] = []
        self._accept_ids: list[int] = []
        #: Interned accepting-terminal sets; id 0 is the empty set.
        self.accept_sets: list[frozenset[int]] = [frozenset()]
        self._accept_set_ids: dict[frozenset[int], int] = {frozenset(): 0}
        self._starts: dict[frozenset[int], int] = {}
        self.transitions = np.full((64, self.num_classes), UNKNOWN, dtype=np.int32)

    # -- states ----------------------------------------------------------------------

    def _intern(self, members: tuple[tuple[int, int], ...]) -> int:
        sid = self._ids.get(members)
        if sid is None:
            sid = self._ids[members] = len(self._members)
            self._members.append(members)
            self._rows.append(None)
            acc = frozenset(t for t, s in members if self._accepting[t][s])
            aid = self._accept_set_ids.get(acc)
            if aid is None:
                aid = self._accept_set_ids[acc] = len(self.accept_sets)
                self.accept_sets.append(acc)
            self._accept_ids.append(aid)
            if sid >= len(self.transitions):
                grown = np.full((2 * len(self.transitions), self.num_classes), UNKNOWN, dtype=np.int32)
                grown[: len(self.transitions)] = self.transitions
                self.transitions = grown
        return sid

    def start(self, allowed: frozenset[int]) -> int:
        """The state that begins a lexeme of one of the ``allowed`` terminals."""
        sid = self._starts.get(allowed)
        if sid is None:
            sid = self._starts[allowed] = self._intern(tuple((t, 0) for t in sorted(allowed)))
        return sid

    @property
    def num_states(self) -> int:
        return len(self._members)

    def accept_id(self, state: int) -> int:
        """Id (in ``accept_sets``) of the terminals that accept the lexeme read so far."""
        return self._accept_ids[state]

    def accept_id_array(self) -> np.ndarray:
        """``accept_id`` of every state built so far, as an array."""
        return np.asarray(self._accept_ids, dtype=np.int64)

    def accepting_terminals(self, state: int) -> frozenset[int]:
        return self.accept_sets[self._accept_ids[state]]

    def row(self, state: int) -> list[int]:
        """Successor on each byte class (-1 = no allowed terminal takes the byte)."""
        row = self._rows[state]
        if row is None:
            row = self._expand(state)
        return row

    def _expand(self, state: int) -> list[int]:
        members = self._members[state]
        moves, lives = self._moves, self._live
        row = []
        for c in range(self.num_classes):
            nxt = tuple(
                (t, m) for t, s in members if (m := moves[t][s][c]) >= 0 and (lives[t] is None or lives[t][m])
            )
            row.append(self._intern(nxt) if nxt else -1)
        self._rows[state] = row
        self.transitions[state] = row
        return row

    def ensure_rows(self, states) -> None:
        """Build the rows of ``states`` (an int array) that do not exist yet."""
        for s in np.unique(states).tolist():
            if self._rows[s] is None:
                self._expand(s)

    def step_byte(self, state: int, byte: int) -> int:
        return self.row(state)[self._classes[byte]]

    def step(self, state: int, data: bytes) -> int:
        """The state after ``data`` inside one lexeme; -1 if it cannot be one."""
        for b in data:
            state = self.row(state)[self._classes[b]]
            if state < 0:
                return -1
        return state

    def has_successors(self, state: int) -> bool:
        return any(t >= 0 for t in self.row(state))
