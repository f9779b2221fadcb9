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
            subset construction from p (``TerminalView``), each with its own end

Everything between calls stays exactly what the regular compiler makes (key order,
formats, bounds, whitespace); only the nesting is the parser's. Where recursion
passes through DFA algebra (``oneOf`` overlaps, ``not``, ``if``), the compiler still
refuses it with a ``RecursiveSchemaError`` naming the ``$ref``.

Lexing caveat: terminals are read by longest match (``grammars.lexer``). A value
that could be either a recursive call or an inline alternative starting with the
same byte (an ``anyOf`` of ``{"$ref": "#"}`` and another object) is read as the
inline one; such a document may be refused (never a wrong one accepted).

Cost notes: every plain ``$ref`` is a rule of its own (written once, however often
used), so the text between two calls stays small; one subset construction per
point, no minimisation.
"""

from __future__ import annotations

import numpy as np

from fsm.dfa import live_states, nfa_byte_classes, subset_table
from fsm.nfa import NFA

from .earley import CFG, productive_symbols, trim
from .json_schema import RecursiveSchemaError, SchemaCompiler, UnsatisfiableSchemaError
from .lark_frontend import CompiledGrammar
from .lexer import TerminalView

_START = "#"
_ANY = "(any JSON value)"


class CallNFA(NFA):
    """An NFA with call edges ``(a, rule, b)``: from state a, a whole ``rule`` leads to b."""

    def __init__(self):
        super().__init__(lazy=False)
        self.calls: list[tuple[int, str, int]] = []


class _Calls:
    """The compiler's hook (``SchemaCompiler.grammar``): makes call edges in ``CallNFA``s
    and remembers which rules still need a body."""

    def __init__(self):
        self.todo: list[str] = []
        self.known: set[str] = set()

    @staticmethod
    def owns(nfa) -> bool:
        return isinstance(nfa, CallNFA)

    def call(self, nfa: CallNFA, rule: str) -> tuple[int, int]:
        if rule not in self.known:
            self.known.add(rule)
            self.todo.append(rule)
        a, b = nfa.state(), nfa.state()
        nfa.calls.append((a, rule, b))
        return a, b

    def call_any(self, nfa: CallNFA) -> tuple[int, int]:
        return self.call(nfa, _ANY)


def compile_recursive_schema(schema, whitespace="flexible", strict: bool = True) -> CompiledGrammar:
    """The grammar of JSON documents valid against a schema with recursive ``$ref``.

    Example::

        >>> tree = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}
        >>> g = compile_recursive_schema(tree, "compact")
        >>> len(g.terminal_names) > 0
        True
    """
    compiler = SchemaCompiler(schema, whitespace, strict)
    if compiler.ws.depth_matters():
        raise RecursiveSchemaError(
            'recursive schemas need whitespace "flexible" or "compact": an indented layout '
            "depends on the depth, which recursion leaves unbounded", "#", "$ref",
        )
    calls = _Calls()
    compiler.grammar = calls
    try:
        bodies = {_START: _body(compiler, calls, _START)}
        while calls.todo:
            rule = calls.todo.pop()
            bodies[rule] = _body(compiler, calls, rule)
    except RecursionError:
        raise RecursiveSchemaError("the schema nests too deeply for this compiler", "#") from None
    return _grammar(bodies)


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


def _reachable(nfa: NFA, start: int) -> set[int]:
    """States reached from ``start`` by bytes and epsilons (not through calls)."""
    seen, stack = {start}, [start]
    while stack:
        s = stack.pop()
        for t in nfa.eps[s]:
            if t not in seen:
                seen.add(t)
                stack.append(t)
        for _, _, t in nfa.edges[s]:
            if t not in seen:
                seen.add(t)
                stack.append(t)
    return seen


def _grammar(bodies: dict) -> CompiledGrammar:
    terminals: list[TerminalView] = []
    # Rules over symbolic names first; nonterminal ids follow the terminals.
    rules: list[tuple[tuple, tuple]] = []
    for rule, (nfa, s, e) in bodies.items():
        classes = nfa_byte_classes(nfa)
        points = list(dict.fromkeys([s] + [b for _, _, b in nfa.calls]))
        for p in points:
            reach = _reachable(nfa, p)
            targets = [(a, callee, b) for a, callee, b in nfa.calls if a in reach]
            ends = [a for a, _, _ in targets] + ([e] if e in reach else [])
            if not ends:
                continue
            # One subset construction per point; each end state is a terminal over it.
            trans, _, sets = subset_table(nfa, p, set(ends), classes)
            for i, end in enumerate(ends):
                accepting = np.array([end in x for x in sets], dtype=bool)
                live = live_states(trans, accepting)
                if not live[0]:
                    continue
                alts = [()] if accepting[0] else []  # the empty path: no terminal at all
                if (trans[0] >= 0).any() and live[trans[0][trans[0] >= 0]].any():
                    alts.append((("t", len(terminals)),))
                    terminals.append(TerminalView(trans, classes, accepting, live))
                tail = ((("n", targets[i][1], None), ("n", rule, targets[i][2])) if i < len(targets) else ())
                for alt in alts:
                    rules.append((("n", rule, p), alt + tail))
    entry = {rule: s for rule, (nfa, s, e) in bodies.items()}
    nt_ids: dict[tuple, int] = {}

    def symbol(sym) -> int:
        if sym[0] == "t":
            return sym[1]
        rule, p = sym[1], sym[2] if sym[2] is not None else entry[sym[1]]
        return nt_ids.setdefault((rule, p), len(terminals) + len(nt_ids))

    start = symbol(("n", _START, None))
    cfg = CFG(len(terminals), tuple((symbol(lhs), tuple(symbol(x) for x in rhs)) for lhs, rhs in rules), start)
    if start not in productive_symbols(cfg):
        raise UnsatisfiableSchemaError("no finite JSON document satisfies the schema (the recursion never ends)", "#")
    names = [f"T{i}" for i in range(len(terminals))]
    rule_names = {i: f"{r}@{p}" for (r, p), i in nt_ids.items()}
    return CompiledGrammar(names, terminals, trim(cfg), frozenset(), rule_names)
