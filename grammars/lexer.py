"""The grammar's lexer: one lazily built DFA over all terminals at once.

::

    terminal DFAs  T0: "{"   T1: /[0-9]+/   T2: /"(...)*"/ ...
    lexer state    = the set of (terminal, terminal-DFA state) pairs still alive
    start(allowed) = {(t, start of t) for t in allowed}   (the parser says which t may come)
    step(state, b) = the pairs that survive byte b; -1 when none does

A terminal is a ``fsm.DFA`` (anything with ``transitions``, ``byte_to_class``,
``accepting`` and optionally ``live``) or a ``TerminalView``: one bit of a shared
``TerminalTable``, which may build its rows only when asked (the terminals of a
recursive JSON Schema). A terminal whose start state accepts matches the empty
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

Most states (98% on recursive JSON Schemas) are *one-group*: every member sits in the
same state ``s`` of one shared table ``k``, so the state is ``(k, s, bits)`` (the
terminals still alive as that table's bits) and its successors are too: a row costs
one table row, read as an array, and one interning per distinct move (~5), not a
tuple of members per move. Other states keep their member tuples.
"""

from __future__ import annotations

import numpy as np

UNKNOWN = -2  # a row not built yet


class TerminalTable:
    """A table that several terminals share (the same text region, different end
    points), each terminal one bit: ``byte_to_class``, ``row(state)`` (successor per
    own byte class, -1 none), ``start`` (the state a lexeme begins in), and per state
    ``accept_bits`` (the terminals that end there) and ``live_bits`` (the terminals
    still reachable from there; None: every state is live). The lists may grow as
    rows are built."""

    byte_to_class: np.ndarray
    accept_bits: list[int]
    live_bits: list[int] | None
    start: int = 0

    def row(self, state: int) -> list[int]:
        raise NotImplementedError

    def row_array(self, state: int) -> np.ndarray:
        """``row(state)`` as an integer array."""
        return np.asarray(self.row(state), dtype=np.int64)

    def walk_builder(self):
        """For a compiled walk over the table itself (``grammars.unit_walk``):
        ``(transitions, bits, known, nfa_bits, builder)``, valid until Python builds
        rows again: ``transitions`` (rows not built yet start with ``UNKNOWN``),
        ``bits[0]``/``bits[1]`` the accept and live bits of each state (int64) for
        the first ``known[0]`` states, ``nfa_bits`` and ``builder`` what the kernel
        needs to build rows and their bits itself (``fsm.subset_arrays.Buffers.
        builder_args``); None where the table cannot give them."""
        return None

    @property
    def rows_owner(self):
        """What owns ``walk_builder``'s rows (tables sharing one construction share it)."""
        return self

    def build_rows(self, states) -> None:
        """Build the rows of ``states`` (and, for ``walk_builder``, their bits)."""
        for s in states:
            self.row(int(s))

    def built_bytes(self) -> int:
        """What the table's construction holds, counted without a walk, where it grows
        as lexing reaches new states (0 for a table made whole)."""
        return 0


class DfaTable(TerminalTable):
    """A plain DFA as a one-bit table.

    Args:
        dfa: a ``DFA`` or ``LazyDFA`` (one terminal).
    """

    def __init__(self, dfa):
        self.byte_to_class = dfa.byte_to_class
        self._transitions = dfa.transitions
        self.accept_bits = [int(a) for a in dfa.accepting.tolist()]
        live = getattr(dfa, "live", None)
        self.live_bits = None if live is None else [int(x) for x in live.tolist()]

    def row(self, state: int) -> list[int]:
        return self._transitions[state].tolist()

    def row_array(self, state: int) -> np.ndarray:
        return self._transitions[state]


class TerminalView:
    """Terminal ``bit`` (a power of two) of a shared ``TerminalTable``.

    Args:
        table: the ``TerminalTable``.
        bit: the terminal's bit in it.
    """

    __slots__ = ("table", "bit")

    def __init__(self, table, bit: int):
        self.table = table
        self.bit = bit


class Lexer:
    """Lazy product DFA of the terminal DFAs; see the module docstring.

    Args:
        terminal_dfas: per terminal id, its ``DFA`` / ``LazyDFA``, or a
            ``TerminalView`` of a table several terminals share.

    Example::

        >>> lx = Lexer([compile_regex("if"), compile_regex("[a-z]+")])
        >>> s = lx.start(frozenset({0, 1}))
        >>> lx.accepting_terminals(lx.step(s, b"if"))
        frozenset({0, 1})
    """

    def __init__(self, terminal_dfas):
        self.dfas = list(terminal_dfas)
        # Per terminal: its table (an index into self._tables) and its bit there.
        self._tables: list = []
        self._growing: list | None = None  # built_bytes' tables
        self._table_of: list[int] = []
        self._bit: list[int] = []
        index: dict[int, int] = {}
        for d in self.dfas:
            table, bit = (d.table, d.bit) if isinstance(d, TerminalView) else (DfaTable(d), 1)
            k = index.get(id(table))
            if k is None:
                k = index[id(table)] = len(self._tables)
                self._tables.append(table)
            self._table_of.append(k)
            self._bit.append(bit)
        # Global byte classes: bytes that no terminal table tells apart (the tables of
        # one grammar rule's points share their classes: each array is read once).
        local = {id(t.byte_to_class): t.byte_to_class for t in self._tables}
        keys = list(zip(*(a.tolist() for a in local.values()))) if local else [()] * 256
        ids: dict[tuple, int] = {}
        self.byte_to_class = np.array([ids.setdefault(k, len(ids)) for k in keys], dtype=np.int32)
        self.num_classes = len(ids)
        self._rep = [0] * self.num_classes  # a byte of each global class
        for b in range(255, -1, -1):
            self._rep[self.byte_to_class[b]] = b
        # Per table: its local class of each global class.
        rep = np.array(self._rep, dtype=np.intp)
        local = {k: np.asarray(a)[rep].astype(np.intp) for k, a in local.items()}
        self._to_global = [local[id(t.byte_to_class)] for t in self._tables]
        # Per table: the terminal of each bit, or None where two terminals share a bit
        # (its states then keep their member tuples).
        self._term_of_bit: list[dict[int, int] | None] = [{} for _ in self._tables]
        for t, (k, b) in enumerate(zip(self._table_of, self._bit)):
            terms = self._term_of_bit[k]
            if terms is not None and terms.setdefault(b, t) != t:
                self._term_of_bit[k] = None
        # Per table: rows over the global classes as lists, for states of several groups.
        self._moves: list[dict[int, list[int]]] = [{} for _ in self._tables]
        self._classes = self.byte_to_class.tolist()
        # Per state: its members, or None for a one-group state, which is its group
        # (table, table state, bits) instead.
        self._members: list[tuple[tuple[int, int], ...] | None] = []
        self._group: list[tuple[int, int, int] | None] = []
        self._ids: dict[tuple[tuple[int, int], ...], int] = {}
        self._group_ids: dict[tuple[int, int, int], int] = {}
        self._rows: list[list[int] | None] = []  # row() as lists, made when asked
        self._accept_ids: list[int] = []
        self._accept_array = np.zeros(64, dtype=np.int64)  # _accept_ids, for accept_id_array
        self._live_classes: list[tuple[int, ...] | None] = []
        #: Interned accepting-terminal sets; id 0 is the empty set.
        self.accept_sets: list[frozenset[int]] = [frozenset()]
        self._accept_set_ids: dict[frozenset[int], int] = {frozenset(): 0}
        self._accept_of_bits: dict[tuple[int, int], int] = {}  # (table, bits) -> accept id
        self._starts: dict[frozenset[int], int] = {}
        self._walkable: dict[int, bool] = {}  # per table: whether table_group may name it
        self.transitions = np.full((64, self.num_classes), UNKNOWN, dtype=np.int32)
        # Scratch: a one-group row's successor per table move (index -1 stays -1).
        self._slot = np.full(64, -1, dtype=np.int32)

    # -- states ----------------------------------------------------------------------

    def _intern(self, members: tuple[tuple[int, int], ...]) -> int:
        sid = self._ids.get(members)
        if sid is None:
            group = self._one_group(members)
            if group is not None:
                sid = self._ids[members] = self._intern_group(*group)
            else:
                tables, table_of, bit = self._tables, self._table_of, self._bit
                acc = frozenset(t for t, s in members if tables[table_of[t]].accept_bits[s] & bit[t])
                sid = self._ids[members] = self._new_state(members, None, self._accept_set_id(acc))
        return sid

    def _one_group(self, members) -> tuple[int, int, int] | None:
        """``(table, table state, bits)`` when all ``members`` are in one state of one
        table whose terminals each have a bit of their own; else None."""
        if not members:
            return None
        table_of, bit = self._table_of, self._bit
        t0, s0 = members[0]
        k = table_of[t0]
        if self._term_of_bit[k] is None:
            return None
        bits = 0
        for t, s in members:
            if s != s0 or table_of[t] != k:
                return None
            bits |= bit[t]
        return k, s0, bits

    def _intern_group(self, k: int, s: int, bits: int) -> int:
        """The one-group state of table ``k``'s terminals ``bits`` in table state ``s``."""
        key = (k, s, bits)
        sid = self._group_ids.get(key)
        if sid is None:
            aid = self.accept_id_of_bits(k, self._tables[k].accept_bits[s] & bits)
            sid = self._group_ids[key] = self._new_state(None, key, aid)
        return sid

    def accept_id_of_bits(self, k: int, acc_bits: int) -> int:
        """Id (in ``accept_sets``) of table ``k``'s terminals ``acc_bits``."""
        aid = self._accept_of_bits.get((k, acc_bits))
        if aid is None:
            terms, acc, rest = self._term_of_bit[k], [], acc_bits
            while rest:
                low = rest & -rest
                acc.append(terms[low])
                rest ^= low
            aid = self._accept_of_bits[(k, acc_bits)] = self._accept_set_id(frozenset(acc))
        return aid

    def table_group(self, state: int) -> tuple[int, int, int] | None:
        """``(table, table state, bits)`` of a one-group state whose table a compiled
        walk can follow itself (``TerminalTable.walk_builder``, bits within int64:
        ``grammars.unit_walk``); None for any other state."""
        group = self._group[state]
        if group is None or group[2] >> 62:
            return None
        walkable = self._walkable.get(group[0])
        if walkable is None:
            walkable = self._walkable[group[0]] = self._tables[group[0]].walk_builder() is not None
        return group if walkable else None

    def table(self, k: int) -> TerminalTable:
        return self._tables[k]

    def built_bytes(self) -> int:
        """What the terminals' tables hold where they grow with the text (a recursive
        JSON Schema's lazy rules), counted without a walk; each construction once."""
        growing = self._growing
        if growing is None:  # the tables that count something, one per construction
            owners = {id(t.rows_owner): t for t in self._tables}
            growing = self._growing = [t for t in owners.values() if type(t).built_bytes is not TerminalTable.built_bytes]
        return sum(t.built_bytes() for t in growing)

    def table_classes(self, k: int) -> np.ndarray:
        """Table ``k``'s byte class of each of the lexer's classes."""
        return self._to_global[k]

    def _accept_set_id(self, acc: frozenset[int]) -> int:
        aid = self._accept_set_ids.get(acc)
        if aid is None:
            aid = self._accept_set_ids[acc] = len(self.accept_sets)
            self.accept_sets.append(acc)
        return aid

    def _new_state(self, members, group, aid: int) -> int:
        sid = len(self._group)
        self._members.append(members)
        self._group.append(group)
        self._rows.append(None)
        self._accept_ids.append(aid)
        self._live_classes.append(None)
        if sid >= len(self._accept_array):
            self._accept_array = np.concatenate([self._accept_array, np.zeros_like(self._accept_array)])
        self._accept_array[sid] = aid
        if sid >= len(self.transitions):
            grown = np.full((2 * len(self.transitions), self.num_classes), UNKNOWN, dtype=np.int32)
            grown[: len(self.transitions)] = self.transitions
            self.transitions = grown
        return sid

    def start(self, allowed: frozenset[int]) -> int:
        """The state that begins a lexeme of one of the ``allowed`` terminals."""
        sid = self._starts.get(allowed)
        if sid is None:
            tables, table_of = self._tables, self._table_of
            sid = self._starts[allowed] = self._intern(tuple((t, tables[table_of[t]].start) for t in sorted(allowed)))
        return sid

    @property
    def num_states(self) -> int:
        return len(self._group)

    def accept_id(self, state: int) -> int:
        """Id (in ``accept_sets``) of the terminals that accept the lexeme read so far."""
        return self._accept_ids[state]

    def accept_id_array(self) -> np.ndarray:
        """``accept_id`` of every state built so far, as an array."""
        return self._accept_array[: len(self._accept_ids)]

    def accepting_terminals(self, state: int) -> frozenset[int]:
        return self.accept_sets[self._accept_ids[state]]

    def row(self, state: int) -> list[int]:
        """Successor on each byte class (-1 = no allowed terminal takes the byte)."""
        row = self._rows[state]
        if row is None:
            if self.transitions[state, 0] == UNKNOWN:
                self._expand(state)
            row = self._rows[state] = self.transitions[state].tolist()
        return row

    def live_classes(self, state: int) -> tuple[int, ...]:
        """The byte classes on which ``state`` has a successor."""
        got = self._live_classes[state]
        if got is None:
            got = self._live_classes[state] = tuple(c for c, t in enumerate(self.row(state)) if t >= 0)
        return got

    def _expand(self, state: int) -> None:
        group = self._group[state]
        if group is not None:
            self._expand_group(state, *group)
            return
        # Members in several groups (or a table whose terminals share bits): the
        # members sharing a (table, table state) are one group, its moves read once;
        # each class is keyed by its moves, one per group; each distinct key is
        # interned once, in class order.
        members = self._members[state]
        group_at: dict[tuple[int, int], int] = {}
        group_of, moves_of, live_of, bits_of = [], [], [], []
        for t, s in members:
            k = self._table_of[t]
            g = group_at.get((k, s))
            if g is None:
                g = group_at[(k, s)] = len(moves_of)
                moves = self._moves[k].get(s)
                if moves is None:
                    moves = self._moves[k][s] = self._tables[k].row_array(s)[self._to_global[k]].tolist()
                moves_of.append(moves)
                live_of.append(self._tables[k].live_bits)
                bits_of.append(0)
            bits_of[g] |= self._bit[t]
            group_of.append(g)
        # What stays alive is a function of the moves (the groups' live bits are fixed
        # here), so a class whose moves were met is a lookup.
        memo: dict = {}
        row = []
        for ms in zip(*moves_of) if moves_of else [()] * self.num_classes:
            r = memo.get(ms)
            if r is None:
                alive = tuple(0 if m < 0 else bits if live is None else live[m] & bits
                              for m, live, bits in zip(ms, live_of, bits_of))
                r = memo[ms] = self._intern_live(members, group_of, ms, alive)
            row.append(r)
        self.transitions[state] = row

    def _expand_group(self, state: int, k: int, s: int, bits: int) -> None:
        """The row of one-group state ``(k, s, bits)``: per distinct move ``m`` of
        table state ``s``, the state ``(k, m, bits still live at m)``."""
        table = self._tables[k]
        moves = table.row_array(s)[self._to_global[k]]
        live = table.live_bits
        succ: dict[int, int] = {}
        for m in dict.fromkeys(moves.tolist()):  # in class order
            if m >= 0:
                alive = bits if live is None else live[m] & bits
                succ[m] = self._intern_group(k, m, alive) if alive else -1
        slot = self._slot
        if succ:
            top = max(succ) + 2
            if top > len(slot):
                slot = self._slot = np.full(max(top, 2 * len(slot)), -1, dtype=np.int32)
            slot[list(succ)] = list(succ.values())
        self.transitions[state] = slot[moves]

    def _intern_live(self, members, group_of: list[int], moves: tuple, alive: tuple) -> int:
        """The state of the members whose group moves (``moves[g]``) with their bit
        still in ``alive[g]``; -1 when none does."""
        bit = self._bit
        nxt = tuple((t, moves[g]) for (t, _), g in zip(members, group_of) if moves[g] >= 0 and alive[g] & bit[t])
        return self._intern(nxt) if nxt else -1

    def ensure_rows(self, states) -> None:
        """Build the rows of ``states`` (an int array) that do not exist yet."""
        for s in np.unique(states).tolist():
            if self.transitions[s, 0] == UNKNOWN:
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
