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

from guided.fsm import footprint
from guided.fsm.kernels import AVAILABLE as COMPILED_AVAILABLE
from guided.fsm.kernels import load as load_kernels
from guided.fsm.nfa import NFA
from guided.grammars.earley import CFG, productive_symbols, trim
from guided.grammars.json_schema.containers.key_order import any_order_object
from guided.grammars.lark_frontend import CompiledGrammar
from guided.grammars.lexer import TerminalView
from guided.grammars.terminal_tables import PointTable, RuleEnds, SharedPointTable

from .compiler import RecursiveSchemaError, SchemaCompiler, UnsatisfiableSchemaError
from .recursive_objects import ObjectFamily, ObjectNodes

_START = "#"
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
        ends = RuleEnds(nfa, [a for a, _, _ in nfa.calls] + [e])
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
