"""Recursive JSON Schemas as grammars: the schema compiler's automata, cut where a
``$ref`` recurses, become the terminals and rules of the Earley matcher.

::

    schema ──SchemaCompiler, grammar mode──> one NFA per rule, with *call edges*
             (a recursive $ref, or an open value: any JSON value, any depth)

    rule X's NFA, its points p = start and the return state of every call:
        X@p -> T(p→a) Y X@b        for each call a ──Y──> b that p reaches by bytes
        X@p -> T(p→end)            if p reaches the end
    T(p→q): the byte strings leading from p to q, one terminal (left out where it
            is only the empty string); the terminals of one point share the
            subset construction from p (``PointTable``), each with its own end

Everything between calls stays exactly what the regular compiler makes (key order,
formats, bounds, whitespace); only the nesting is the parser's. Where recursion
passes through DFA algebra (``oneOf`` overlaps, ``not``, ``if``), the compiler still
refuses it with a ``RecursiveSchemaError`` naming the ``$ref``. With
``key_order="any"`` an object is the exception: its key/value pairs are rules of
their own and each set of written keys a nonterminal made when the parser first
reaches it (``recursive_objects``).

Lexing: a value that could be either a call or an inline alternative starting with
the same byte (an ``anyOf`` of ``{"$ref": "#"}`` and another object) ends one
terminal where the other reads on. Longest match would keep only the longer
reading and refuse documents valid by the other, so these grammars are read with
every lexeme end kept
(``CompiledGrammar.every_end``, ``grammars.grammar_index``).

Cost notes: every plain ``$ref`` is a rule of its own (written once, however often
used), so the text between two calls stays small. Compiling costs one pass per rule
(``RuleEnds``: which ends each NFA state leads to) and one closure per point (is its
terminal nonempty?); the subset construction from the points is built a row at a
time as the lexer reaches it, never minimised: compiled, one per rule shared by its
points (``SharedPointTable``), else one per point in Python (``PointTable``). (Built
whole, those tables would be about three quarters of the compile time of recursive
schemas.)
"""

from __future__ import annotations

import numpy as np

from guided.fsm import footprint
from guided.fsm.dfa import class_starts, sweep_row
from guided.fsm.kernels import AVAILABLE as COMPILED_AVAILABLE
from guided.fsm.kernels import load as load_kernels
from guided.fsm.lazy import MAX_LAZY_DFA_STATES
from guided.fsm.nfa import NFA, nfa_byte_classes
from guided.grammars.earley import CFG, productive_symbols, trim
from guided.grammars.json_schema.containers.key_order import any_order_object
from guided.grammars.lark_frontend import CompiledGrammar
from guided.grammars.lexer import TerminalTable, TerminalView

from .compiler import RecursiveSchemaError, SchemaCompiler, UnsatisfiableSchemaError
from .recursive_objects import ObjectFamily, ObjectNodes

_START = "#"
UNBUILT = -2  # a row of the compiled construction not built yet
_ANY = "(any JSON value)"


@footprint.self_measured
class CallNFA(NFA):
    """An NFA with call edges ``(a, rule, b)``: from state a, a whole ``rule`` leads to b.

    It is lazy (``NFA.deferred``): large counted repetitions and string bodies are
    built when the lexer first reaches them, but only fragments without calls, whose
    states lead to no end but the fragment's own (so ``RuleEnds.reach`` extends to
    them from the end's bits alone)."""

    def __init__(self):
        super().__init__(lazy=True)
        self.calls: list[tuple[int, str, int]] = []

    def deferrable(self, first_state: int) -> bool:
        # Calls are appended as they are made, with fresh states: the last is newest.
        return not self.calls or self.calls[-1][0] < first_state


class _Calls:
    """The compiler's hook (``SchemaCompiler.grammar``): makes call edges in ``CallNFA``s,
    remembers which rules still need a body, and holds the rules compiled on the spot
    (``built``) for objects with keys in any order (``families``, by first node)."""

    def __init__(self):
        self.todo: list[str] = []
        self.known: set[str] = set()
        self.built: dict[str, tuple[CallNFA, int, int]] = {}
        self.families: dict[str, ObjectFamily] = {}
        self._pairs: dict[tuple, tuple[str, object]] = {}  # pair_rule

    @staticmethod
    def owns(nfa) -> bool:
        return isinstance(nfa, CallNFA)

    def call(self, nfa: CallNFA, rule: str) -> tuple[int, int]:
        if rule not in self.known:
            self.known.add(rule)
            self.todo.append(rule)
        return self._edge(nfa, rule)

    def call_any(self, nfa: CallNFA) -> tuple[int, int]:
        return self.call(nfa, _ANY)

    @staticmethod
    def _edge(nfa: CallNFA, rule: str) -> tuple[int, int]:
        a, b = nfa.state(), nfa.state()
        nfa.calls.append((a, rule, b))
        return a, b

    def new_rule(self, label: str, build) -> str:
        """A rule compiled now: ``build(nfa) -> (start, end)`` in a fresh ``CallNFA``."""
        nfa = CallNFA()
        s, e = build(nfa)
        name = f"{label} #{len(self.built)}"
        self.built[name] = (nfa, s, e)
        return name

    def pair_rule(self, compiler, key: bytes, sub, ptr: str, depth: int) -> str:
        """The rule of one key and its value, compiled once per compile for each key,
        value schema, depth and ``$ref`` stack: generated schemas repeat one object
        under many names (JSONSchemaStore's renovate: 660 any-order objects, 40k pairs,
        736 of them distinct). Errors and ``strict=False`` warnings name the first
        place a pair is compiled."""
        memo = (key, id(sub), depth, tuple(compiler._ref_stack))
        got = self._pairs.get(memo)
        if got is None:
            name = self.new_rule(f"{ptr} (key and value)",
                                 lambda n: compiler.entry(n, n.byte_string(key), sub, ptr, depth))
            got = self._pairs[memo] = (name, sub)  # holds sub, so that its id stays its own
        return got[0]

    def any_order_object(self, compiler, nfa: CallNFA, shape, path: str, depth: int) -> tuple[int, int]:
        """``{`` and a call of the object's first node (``recursive_objects``)."""
        if not shape.entries and shape.extras is None:
            return any_order_object(compiler, nfa, shape, path, depth)  # only {}: no nodes
        family = ObjectFamily(compiler, shape, path, depth, self)
        first = f"{path} (keys in any order #{len(self.families)})"
        self.families[first] = family
        open_ = nfa.byte_string(b"{")
        a, b = self._edge(nfa, first)
        nfa.epsilon(open_[1], a)
        return open_[0], b


def compile_recursive_schema(schema, whitespace="flexible", strict: bool = True,
                             key_order: str = "schema", *, with_unique_sites: bool = False):
    """The grammar of JSON documents valid against a schema with recursive ``$ref``
    (``key_order="any"``: objects' keys in any order, ``recursive_objects``).
    ``with_unique_sites``: ``(grammar, containers.unique.SiteMap or None)``, as
    ``json_schema.compile_json_schema`` gives.

    Example::

        >>> tree = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}
        >>> g = compile_recursive_schema(tree, "compact")
        >>> len(g.terminal_names) > 0
        True
    """
    if COMPILED_AVAILABLE:  # the grammar engine's walks are compiled (loaded here, not deep in the recursion)
        load_kernels()
    compiler = SchemaCompiler(schema, whitespace, strict, key_order=key_order, unique_beside=with_unique_sites)
    if compiler.ws.depth_matters():
        raise RecursiveSchemaError(
            'recursive schemas need whitespace "flexible" or "compact": an indented layout '
            "depends on the depth, which recursion leaves unbounded", "#", "$ref",
        )
    calls = _Calls()
    calls.known.add(_START)  # a "$ref": "#" inside calls the start rule, not a second copy of it
    compiler.grammar = calls
    try:
        bodies = {_START: _body(compiler, calls, _START)}
        while calls.todo:
            rule = calls.todo.pop()
            bodies[rule] = _body(compiler, calls, rule)
    except RecursionError:
        raise compiler.too_deep(RecursiveSchemaError) from None
    bodies.update(calls.built)
    grammar = _grammar(bodies, calls.families)
    return (grammar, compiler.unique_site_map()) if with_unique_sites else grammar


def _body(compiler: SchemaCompiler, calls: _Calls, rule: str):
    nfa = CallNFA()
    if rule == _ANY:
        s, e = compiler._any(nfa, 0, 1, lambda n, i=0: calls.call_any(n))
    elif rule == _START:
        s, e = compiler.value(nfa, compiler.root, "#", 0)
    else:
        # Compile the target with its own $ref on the stack, so that the inner
        # occurrences become calls of this rule.
        target = compiler.deref({"$ref": rule}, rule)
        compiler._ref_stack = [rule]
        try:
            s, e = compiler.value(nfa, target, rule, 0)
        finally:
            compiler._ref_stack = []
    return nfa, s, e


class RuleEnds:
    """What the terminals of one rule share: its NFA's byte classes, the ends a
    terminal may stop at (each call's start, then the rule's end), and per NFA state
    ``reach``, the ends it leads to by bytes (a bit each, through no call). With
    ``compiled`` (numba installed, by default), also one compiled subset
    construction from all its points (``SharedPointTable``), made when decoding
    first needs a row of it (~0.3 ms a rule: made up front, they make a schema of
    77 rules ~15% slower to compile).

    Args:
        nfa: the rule's ``CallNFA``.
        end: its end state.
        compiled: share one compiled construction (default: where numba is installed).
    """

    def __init__(self, nfa: CallNFA, end: int, compiled: bool | None = None):
        self.nfa = nfa
        flat = nfa.flat()  # one pass over the NFA's lists, for its byte classes and reach
        self.byte_to_class = nfa_byte_classes(nfa, flat[2])
        self.n_classes = int(self.byte_to_class[-1]) + 1
        self.ends = [a for a, _, _ in nfa.calls] + [end]
        self.end_bit = {}
        for i, e in enumerate(self.ends):
            self.end_bit[e] = self.end_bit.get(e, 0) | 1 << i
        self.reach = nfa.reach_bits(self.end_bit, flat=flat)
        self._calls = len(nfa.calls)
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
        if len(nfa.calls) != self._calls:
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
    """

    def __init__(self, rule: RuleEnds, point: int):
        self.rule, self.point = rule, point
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

    def build_rows(self, states) -> None:
        self._asked.update(states)
        self.rule.build_rows(states)

    def walk_builder(self):
        return self.rule.walk_builder()

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
    def rows_built(self) -> int:
        return sum(r is not None for r in self._rows)

    def ends_nonempty(self) -> int:
        """The terminals that match some nonempty string (the bits live after a byte)."""
        out = 0
        for t in self.row(0):
            if t >= 0:
                out |= self.live_bits[t]
        return out


def _grammar(bodies: dict, families: dict[str, ObjectFamily]) -> CompiledGrammar:
    """The CFG of the rules' bodies: per point of a rule (its start, each call's
    return) and end it reaches (each call's start, the rule's end), a terminal, the
    lexeme from the point to the end, then the call and the rest of the rule from
    its return: ``(rule, point) -> T (callee, its start) (rule, return)``.

    Cost notes: a rule with k optional properties that call rules has ~k * k / 2
    (point, end) pairs (WashingtonPost's schemas: ~10k terminals each), so rules
    are numbered as they are made (symbolic names, mapped to ids afterwards, cost
    ~7 µs a rule)."""
    terminals: list[TerminalView] = []
    entry = {rule: s for rule, (nfa, s, e) in bodies.items()}
    # Nonterminals are (rule, point) pairs, numbered as met; ids follow the terminals
    # once all are made, points with one closure sharing theirs (``same``).
    met: dict[tuple, int] = {}
    rows: list[tuple[int, int, int, int]] = []  # (left side, terminal, call, return); -1: none
    # Per rule, each point's representative: points with one closure have one table
    # and one nonterminal (the returns of alternative calls, as an array of anyOf
    # references has, each meet every call again: k returns made k * k terminals).
    same: dict[str, dict[int, int]] = {}
    for rule, (nfa, s, e) in bodies.items():
        ends = RuleEnds(nfa, e)
        first_of: dict[frozenset, int] = {}
        same[rule] = {}
        tails = [(met.setdefault((callee, entry.get(callee)), len(met)), met.setdefault((rule, b), len(met)))
                 for _, callee, b in nfa.calls] + [(-1, -1)]
        for p in dict.fromkeys([s] + [b for _, _, b in nfa.calls]):
            if not ends.reach[p]:
                continue
            q = same[rule][p] = first_of.setdefault(ends.closure(p), p)
            if q != p:
                continue
            table = SharedPointTable(ends, p) if ends.compiled else PointTable(ends, p)
            nonempty, live, accept = table.ends_nonempty(), table.start_live, table.start_accept
            lhs = met.setdefault((rule, p), len(met))
            for i, (call, back) in enumerate(tails):
                bit = 1 << i
                if not live & bit:
                    continue
                if accept & bit:  # the empty path: no terminal at all
                    rows.append((lhs, -1, call, back))
                if nonempty & bit:
                    rows.append((lhs, len(terminals), call, back))
                    terminals.append(TerminalView(table, bit))
    ids: dict[tuple, int] = {}

    def symbol(key: tuple) -> int:
        rule, p = key
        return ids.setdefault((rule, same.get(rule, {}).get(p, p)), len(terminals) + len(ids))

    start = symbol((_START, entry[_START]))
    final = [symbol(key) for key in met]
    static = []
    for lhs, t, call, back in rows:
        tail = (final[call], final[back]) if call >= 0 else ()
        static.append((final[lhs], (t, *tail) if t >= 0 else tail))
    lazy = None
    if families:
        for family in families.values():
            family.resolve(lambda name: symbol((name, entry.get(name))))  # (None: an object's first node)
        firsts = {symbol((name, None)): family for name, family in families.items()}
        lazy = ObjectNodes(firsts, len(terminals) + len(ids))
    cfg = CFG(len(terminals), tuple(static), start, lazy)
    good = productive_symbols(cfg)
    if start not in good:
        raise UnsatisfiableSchemaError("no finite JSON document satisfies the schema (the recursion never ends)", "#")
    names = [f"T{i}" for i in range(len(terminals))]
    rule_names = {i: f"{r}@{p}" for (r, p), i in ids.items()}
    return CompiledGrammar(names, terminals, trim(cfg, good), frozenset(), rule_names, every_end=True)
