"""Terminal tables that several terminals share: one subset construction from a
point of an NFA whose terminals end at different states, each terminal one bit.

::

    NFA  point ──T0──> end0        (a terminal: the byte strings from the point
         point ──T1──> end1         to its end, through no other end)
         ...
    RuleEnds          per NFA state, the ends it reaches (``reach``, a bit each)
    SharedPointTable  the subset construction from the point, compiled, a row at a
                      time as the lexer reaches it (``fsm.subset_arrays.LazySubsets``)
    PointTable        the same in Python, where numba is not installed

A state of the construction is one table state for every terminal at once; its
``accept_bits`` and ``live_bits`` say which terminals end there and which can still
end, so the lexer (``grammars.lexer``) reads any set of allowed terminals as one
state ``(table, state, allowed bits)``, with one row per table state, however many
terminals it holds.

Two users: a recursive JSON Schema's rules (``json_schema.recursive``: the points
are a rule's start and each call's return, the ends each call's start and the
rule's end) and a lark grammar's terminals (``lark_frontend``: one point, every
terminal an alternative from it). Built whole and minimised per terminal, a lark
grammar's terminals took about a third of its compile time; here nothing is
determinised before the lexer asks for it.
"""

from __future__ import annotations

import numpy as np

from guided.fsm.dfa import class_starts, sweep_row
from guided.fsm.kernels import AVAILABLE as COMPILED_AVAILABLE
from guided.fsm.lazy import MAX_LAZY_DFA_STATES
from guided.fsm.nfa import nfa_byte_classes
from guided.grammars.lexer import TerminalTable

UNBUILT = -2  # a row of the compiled construction not built yet


#: What an NFA state of a rule holds with its share of the rule's per-state lists
#: (``RuleEnds.built_bytes``): 270-900 bytes measured on MaskBench's recursive schemas.
RULE_STATE_BYTES = 1 << 10


class RuleEnds:
    """What the terminals of one NFA share: its byte classes, the ends a terminal
    may stop at (a recursive schema's rule: each call's start, then the rule's end;
    a lark grammar: each terminal's end), and per NFA state ``reach``, the ends it
    leads to by bytes (a bit each, through no call). With
    ``compiled`` (numba installed, by default), also one compiled subset
    construction from all its points (``SharedPointTable``), made when decoding
    first needs a row of it (~0.3 ms a rule: made up front, they make a schema of
    77 rules ~15% slower to compile).

    Args:
        nfa: the ``NFA`` (a rule's ``CallNFA``: deferred fragments are built as
            the construction reaches them).
        ends: the end states, bit i for ``ends[i]``.
        compiled: share one compiled construction (default: where numba is installed).

    Example::

        >>> nfa = NFA()
        >>> point = nfa.state()
        >>> ends = [nfa.byte_string(word)[1] for word in (b"if", b"in")]
        >>> for s in (1, 4):
        ...     nfa.epsilon(point, s)
        >>> table = SharedPointTable(RuleEnds(nfa, ends), point)
        >>> table.start_live, table.ends_nonempty()
        (3, 3)
    """

    def __init__(self, nfa, ends: list[int], compiled: bool | None = None):
        self.nfa = nfa
        flat = nfa.flat()  # one pass over the NFA's lists, for its byte classes and reach
        self.byte_to_class = nfa_byte_classes(nfa, flat[2])
        self.n_classes = int(self.byte_to_class[-1]) + 1
        self.ends = list(ends)
        self.end_bit = {}
        for i, e in enumerate(self.ends):
            self.end_bit[e] = self.end_bit.get(e, 0) | 1 << i
        self.reach = nfa.reach_bits(self.end_bit, flat=flat)
        self._calls = len(getattr(nfa, "calls", ()))
        self._classes = self.byte_to_class.tolist()
        self._closures: dict[int, frozenset[int]] = {}
        self._intervals: dict[int, list[tuple[int, int, int]]] = {}
        self.compiled = COMPILED_AVAILABLE if compiled is None else compiled
        self._fast = None
        # Per state of the shared construction: the ends it accepts, and reaches
        # (``accept_bits``, ``live_bits``: lists, extended from the arrays below
        # when read, so that walks building rows do not pay for them).
        self._accept_list: list[int] = []
        self._live_list: list[int] = []
        # The same as int64 arrays, for compiled walks, where the ends fit in them;
        # and per NFA state its end bit and reach, to compute them.
        self._bit_arrays = self._nfa_bits = None
        if len(self.ends) <= 62:
            self._bit_arrays = np.zeros((2, 64), dtype=np.int64)
            self._bits_known = np.zeros(1, dtype=np.int64)
            self._nfa_bits = np.zeros((2, 0), dtype=np.int64)

    def built_bytes(self) -> int:
        """What the rule holds, counted without a walk: its NFA's states (with their
        reach and closures, ``RULE_STATE_BYTES`` each: a recursive schema's calls paste
        states in as the text reaches them) and the compiled construction's buffers."""
        return len(self.nfa.eps) * RULE_STATE_BYTES + (0 if self._fast is None else self._fast.b.nbytes())

    def bits_of(self, states) -> tuple[int, int]:
        """The ends a subset of NFA ``states`` accepts, and the ends it reaches."""
        end_bit, reach = self.end_bit, self.reach
        acc = live = 0
        for x in states:
            acc |= end_bit.get(x, 0)
            live |= reach[x]
        return acc, live

    def point_bits(self, point: int) -> tuple[int, int, int]:
        """The ends ``point`` accepts (the empty string leads there), reaches, and
        reaches by a nonempty string, from its closure and its moves."""
        closure, reach, edges = self.closure(point), self.reach, self.nfa.edges
        nonempty = 0
        for x in closure:
            for _, _, t in edges[x]:
                nonempty |= reach[t]
        return (*self.bits_of(closure), nonempty)

    def closure(self, s: int) -> frozenset[int]:
        """The live states ``s`` reaches by epsilons that have byte moves or are ends."""
        got = self._closures.get(s)
        if got is None:
            eps, reach, edges, pending = self.nfa.eps, self.reach, self.nfa.edges, self.nfa.pending
            seen, stack = {s}, [s]
            while stack:
                x = stack.pop()
                if x in pending:
                    self._build(x)
                for t in eps[x]:
                    if t not in seen and reach[t]:
                        seen.add(t)
                        stack.append(t)
            got = self._closures[s] = frozenset(x for x in seen if edges[x] or x in self.end_bit)
        return got

    def _build(self, s: int) -> None:
        """Build the deferred fragment at ``s``; its new states reach what its end does."""
        nfa = self.nfa
        n0 = len(nfa)
        nfa.materialize(s)
        if len(getattr(nfa, "calls", ())) != self._calls:
            raise AssertionError("a deferred fragment of a grammar rule made a call")
        nfa.reach_bits({}, self.reach)
        if self._fast is not None:
            self._fast.add_states(nfa, n0, s)

    # -- the compiled construction --------------------------------------------------

    @property
    def fast(self):
        """The compiled construction (``LazySubsets``) over the NFA as it is now."""
        if self._fast is None:
            from guided.fsm.subset_arrays import LazySubsets  # imports numba

            nfa, end = self.nfa, self.ends[-1]
            self._fast = LazySubsets(nfa, end, end, [r != 0 for r in self.reach], self.byte_to_class,
                                     class_starts(self._classes), nfa.flat(), MAX_LAZY_DFA_STATES)
            self._fast.keep_in_closures(self.ends)
        return self._fast

    def start_state(self, point: int) -> int:
        """The shared construction's state of ``point``'s closure."""
        while True:
            d, pending = self.fast.closure_state(point)
            if pending < 0:
                self._take_new_states()
                return d
            self._build(pending)

    def row(self, d: int) -> list[int]:
        """State ``d``'s row in the shared construction, built if need be."""
        return self.row_array(d).tolist()

    def row_array(self, d: int) -> np.ndarray:
        """``row(d)`` as a view of the construction's table (read it before the
        next row is built: the table may move as it grows)."""
        fast = self.fast
        trans = fast.b.trans
        if trans[d, 0] == UNBUILT:
            while (pending := fast.row(d)) >= 0:
                self._build(pending)
            self._take_new_states()
            trans = fast.b.trans
        return trans[d]

    def _take_new_states(self) -> None:
        """The accept and live bits of the states the construction made since."""
        fast = self.fast
        n = fast.b.num_states
        if self._bit_arrays is None:
            for d in range(len(self._accept_list), n):
                acc, live = self.bits_of(fast.members(d).tolist())
                self._accept_list.append(acc)
                self._live_list.append(live)
            return
        known = int(self._bits_known[0])
        if n > known:  # (a compiled walk sets those of the rows it builds)
            arrays = self._bit_arrays_now()  # (first: it brings _nfa_bits up to the NFA)
            fast.members_or(self._nfa_bits, arrays, known)
            self._bits_known[0] = n

    @property
    def accept_bits(self) -> list[int]:
        self._lists_now()
        return self._accept_list

    @property
    def live_bits(self) -> list[int]:
        self._lists_now()
        return self._live_list

    def _lists_now(self) -> None:
        """The lists with every state whose bits the arrays hold."""
        n0 = len(self._accept_list)
        if self._bit_arrays is not None and n0 < self._bits_known[0]:
            n = int(self._bits_known[0])
            self._accept_list.extend(self._bit_arrays[0, n0:n].tolist())
            self._live_list.extend(self._bit_arrays[1, n0:n].tolist())

    def _bit_arrays_now(self) -> np.ndarray:
        """``_bit_arrays`` with room for every state the construction's table has,
        ``_nfa_bits`` for every NFA state."""
        per_nfa = self._nfa_bits
        if per_nfa.shape[1] < len(self.reach):  # the NFA grew (a deferred fragment built)
            m0 = per_nfa.shape[1]
            grown = np.zeros((2, len(self.reach)), dtype=np.int64)
            grown[:, :m0] = per_nfa
            for e, bit in self.end_bit.items():
                if e >= m0:
                    grown[0, e] = bit
            grown[1, m0:] = self.reach[m0:]
            self._nfa_bits = grown
        arrays, size = self._bit_arrays, len(self.fast.b.trans)
        if arrays.shape[1] < size:
            grown = np.zeros((2, size), dtype=np.int64)
            grown[:, : arrays.shape[1]] = arrays
            arrays = self._bit_arrays = grown
        return arrays

    def build_rows(self, states) -> None:
        """Build the rows of the construction's ``states`` not built yet."""
        fast = self.fast
        for d in states:
            if fast.b.trans[d, 0] == UNBUILT:
                while (pending := fast.row(d)) >= 0:
                    self._build(pending)
        self._take_new_states()

    def walk_builder(self):
        """``TerminalTable.walk_builder`` of the shared construction (None past 62 ends)."""
        if self._bit_arrays is None:
            return None
        arrays = self._bit_arrays_now()
        return self.fast.b.trans, arrays, self._bits_known, self._nfa_bits, self.fast.b.builder_args()

    def intervals(self, s: int) -> list[tuple[int, int, int]]:
        got = self._intervals.get(s)
        if got is None:
            classes, reach = self._classes, self.reach
            got = self._intervals[s] = [(classes[lo], classes[hi], t) for lo, hi, t in self.nfa.edges[s] if reach[t]]
        return got


class SharedPointTable(TerminalTable):
    """``PointTable`` over its rule's one compiled construction (``RuleEnds.fast``):
    every point of a rule starts in that construction, whose states (and rows) the
    points share. A row costs a kernel call (~15 µs with its Python around it),
    where ``sweep_row`` in Python costs ~30 µs, a third of grammar mask time on the
    slowest recursive schemas. Compiling reads only the point's closure
    (``start_accept``, ``start_live``, ``ends_nonempty``); its start state is made
    when a lexeme first starts here.

    Args:
        rule: the rule's ``RuleEnds``; ``point``: the NFA state the terminals start at.
        walks: offer the construction to compiled walks (``walk_builder``), which
            then read lexemes over the table itself instead of the lexer's states.
            That pays where lexer states are many and each is read once (a
            recursive schema's); a lark grammar's few lexer states are read again
            and again, and their rows, kept by the lexer, serve it better.
    """

    def __init__(self, rule: RuleEnds, point: int, walks: bool = True):
        self.rule, self.point, self.walks = rule, point, walks
        self.byte_to_class = rule.byte_to_class
        self.start_accept, self.start_live, self._nonempty = rule.point_bits(point)
        self._start: int | None = None
        self._asked: set[int] = set()

    @property
    def start(self) -> int:
        if self._start is None:
            self._start = self.rule.start_state(self.point)
        return self._start

    @property
    def accept_bits(self) -> list[int]:
        return self.rule.accept_bits

    @property
    def live_bits(self) -> list[int]:
        return self.rule.live_bits

    def row(self, state: int) -> list[int]:
        self._asked.add(state)
        return self.rule.row(state)

    def row_array(self, state: int) -> np.ndarray:
        self._asked.add(state)
        return self.rule.row_array(state)


    @property
    def rows_owner(self):
        return self.rule

    def built_bytes(self) -> int:
        return self.rule.built_bytes()

    def build_rows(self, states) -> None:
        self._asked.update(states)
        self.rule.build_rows(states)

    def walk_builder(self):
        return self.rule.walk_builder() if self.walks else None

    @property
    def rows_built(self) -> int:
        """The rows this point asked for (the construction's rows are shared)."""
        return len(self._asked)

    def ends_nonempty(self) -> int:
        """The terminals that match some nonempty string."""
        return self._nonempty


class PointTable(TerminalTable):
    """The terminals that start at one point of a rule: the subset construction from
    the point, built a row at a time when the lexer first needs it (most rows of a
    large schema are never visited). Bit i is the terminal ending at ``ends[i]``.

    Args:
        rule: the rule's ``RuleEnds``; ``point``: the NFA state the terminals start at.
    """

    def __init__(self, rule: RuleEnds, point: int):
        self.rule = rule
        self.byte_to_class = rule.byte_to_class
        self._ids: dict[frozenset[int], int] = {}
        self._sets: list[frozenset[int]] = []
        self._rows: list[list[int] | None] = []
        self._by_targets: dict[frozenset[int], int] = {}  # sweep_row's memo
        self.accept_bits: list[int] = []
        self.live_bits: list[int] = []
        self._add(rule.closure(point))
        self.start_accept, self.start_live = self.accept_bits[0], self.live_bits[0]

    def _add(self, subset: frozenset[int]) -> int:
        j = self._ids.get(subset)
        if j is None:
            j = self._ids[subset] = len(self._sets)
            self._sets.append(subset)
            self._rows.append(None)
            acc, live = self.rule.bits_of(subset)
            self.accept_bits.append(acc)
            self.live_bits.append(live)
        return j

    def row(self, state: int) -> list[int]:
        row = self._rows[state]
        if row is None:
            rule = self.rule
            row = self._rows[state] = sweep_row(
                [rule.intervals(s) for s in self._sets[state]], rule.n_classes, self._target, self._by_targets)
        return row

    def _target(self, targets: frozenset[int]) -> int:
        j = self._by_targets[targets] = self._add(frozenset().union(*(self.rule.closure(t) for t in targets)))
        return j

    @property
    def built_bytes(self) -> int:
        return self.rule.built_bytes()

    def rows_built(self) -> int:
        return sum(r is not None for r in self._rows)

    def ends_nonempty(self) -> int:
        """The terminals that match some nonempty string (the bits live after a byte)."""
        out = 0
        for t in self.row(0):
            if t >= 0:
                out |= self.live_bits[t]
        return out
