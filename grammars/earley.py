"""An incremental Earley parser over terminal ids, with persistent parse states.

::

    root = parser.root()                      # Earley set 0: the start symbol predicted
    s1 = parser.advance(root, ts)             # scan a *set* of terminals (lexing ties)
    s1.expected                               # the terminals that may come next
    s1.accepts                                # may the input end here?

An Earley set keeps its items only as ``waiting``: for each symbol, the items whose
dot stands before it, each with its origin *set object* (not an index). Sets are
immutable once built and point back only to older sets, so a parse state is just a
reference to its newest set: forking a sequence copies a pointer and rolling back
pops one, with no chart to copy or truncate. ``advance`` results are memoised on the
set, so the mask computation's trial scans are reused when the token is accepted.

Nullable rules follow Aycock and Horspool ("Practical Earley Parsing", 2002): when
an item predicts a nullable symbol, its dot also moves past that symbol at once, so
completions never need to look for items in the set under construction.

Cost notes: a scan costs the items it touches (tens to hundreds of tuples for JSON
or SQL, 10-100 us in Python); predictions come from a per-symbol closure computed at
construction.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CFG:
    """A context-free grammar over integer symbols.

    Terminals are ``0 .. num_terminals - 1``; nonterminals are the other symbols.
    ``rules`` are ``(lhs, rhs)`` pairs with ``rhs`` a tuple of symbols.

    Example::

        >>> g = CFG(num_terminals=2, rules=((2, (0, 2, 1)), (2, ())), start=2)   # S -> a S b | ε
    """

    num_terminals: int
    rules: tuple[tuple[int, tuple[int, ...]], ...]
    start: int


class EarleySet:
    """One Earley set: the items waiting on each symbol, and what may come next."""

    __slots__ = ("waiting", "expected", "accepts", "memo", "cache")

    def __init__(self):
        self.waiting: dict[int, list[tuple[int, "EarleySet"]]] = {}
        self.expected: frozenset[int] = frozenset()
        self.accepts = False
        self.memo: dict = {}   # advance() results, keyed by the scanned terminal set
        self.cache: dict = {}  # per-set values computed by users of the parser


class EarleyParser:
    """Earley recognition over a ``CFG``; see the module docstring.

    Example::

        >>> p = EarleyParser(g)
        >>> s = p.advance(p.root(), frozenset([0]))     # after "a"
        >>> sorted(s.expected), s.accepts
        ([0, 1], False)
    """

    def __init__(self, cfg: CFG):
        self.cfg = cfg
        nt = cfg.num_terminals
        # Rule-dot ids: rule r's dots are rd_base[r] .. rd_base[r] + len(rhs).
        self.rd_next: list[int] = []  # symbol after the dot, -1 when complete
        self.rd_lhs: list[int] = []
        starts: dict[int, list[int]] = {}
        for lhs, rhs in cfg.rules:
            starts.setdefault(lhs, []).append(len(self.rd_next))
            for i in range(len(rhs) + 1):
                self.rd_next.append(rhs[i] if i < len(rhs) else -1)
                self.rd_lhs.append(lhs)
        self.nullable = _nullable(cfg)
        # What predicting a nonterminal adds to the set (origin = that set): its rules'
        # first dots, recursively, and the dots moved past nullable symbols.
        self._predict: dict[int, tuple[int, ...]] = {}
        for sym in starts:
            seen: list[int] = []
            mark: set[int] = set()
            todo = list(starts[sym])
            predicted = {sym}
            while todo:
                rd = todo.pop()
                if rd in mark:
                    continue
                mark.add(rd)
                seen.append(rd)
                nxt = self.rd_next[rd]
                if nxt >= nt:
                    if nxt not in predicted:
                        predicted.add(nxt)
                        todo.extend(starts.get(nxt, ()))
                    if nxt in self.nullable:
                        todo.append(rd + 1)
            self._predict[sym] = tuple(seen)
        self._num_terminals = nt
        self._root: EarleySet | None = None

    def root(self) -> EarleySet:
        """The set before any input (shared by every parse of this grammar)."""
        if self._root is None:
            root = EarleySet()
            self._root = root
            self._close(root, [(rd, root) for rd in self._predict.get(self.cfg.start, ())], root)
        return self._root

    def advance(self, state: EarleySet, terminals: frozenset[int]) -> EarleySet | None:
        """The set after scanning any one of ``terminals``; None if none is expected."""
        memo = state.memo
        if terminals in memo:
            return memo[terminals]
        kernel: list[tuple[int, EarleySet]] = []
        for t in terminals:
            for rd, origin in state.waiting.get(t, ()):
                kernel.append((rd + 1, origin))
        result = None
        if kernel:
            result = EarleySet()
            self._close(result, kernel, self._root)
        memo[terminals] = result
        return result

    def _close(self, s: EarleySet, kernel, root: EarleySet) -> None:
        rd_next, rd_lhs, nt = self.rd_next, self.rd_lhs, self._num_terminals
        nullable, predict, start = self.nullable, self._predict, self.cfg.start
        waiting = s.waiting
        seen = set(kernel)
        agenda = list(dict.fromkeys(kernel))
        predicted: set[int] = set()
        accepts = False
        i = 0
        while i < len(agenda):
            item = agenda[i]
            i += 1
            rd, origin = item
            sym = rd_next[rd]
            if sym < 0:
                if origin is s:
                    continue  # an empty derivation: the nullable rule already moved its dot
                lhs = rd_lhs[rd]
                if lhs == start and origin is root:
                    accepts = True
                for rd2, origin2 in origin.waiting.get(lhs, ()):
                    new = (rd2 + 1, origin2)
                    if new not in seen:
                        seen.add(new)
                        agenda.append(new)
                continue
            bucket = waiting.get(sym)
            if bucket is None:
                bucket = waiting[sym] = []
            bucket.append(item)
            if sym >= nt:
                if sym not in predicted:
                    predicted.add(sym)
                    for rd0 in predict.get(sym, ()):
                        new = (rd0, s)
                        if new not in seen:
                            seen.add(new)
                            agenda.append(new)
                if sym in nullable:
                    new = (rd + 1, origin)
                    if new not in seen:
                        seen.add(new)
                        agenda.append(new)
        if s is root and start in nullable:
            accepts = True
        s.accepts = accepts
        s.expected = frozenset(k for k in waiting if k < nt)


def _nullable(cfg: CFG) -> frozenset[int]:
    nullable: set[int] = set()
    changed = True
    while changed:
        changed = False
        for lhs, rhs in cfg.rules:
            if lhs not in nullable and all(x in nullable for x in rhs):
                nullable.add(lhs)
                changed = True
    return frozenset(nullable)


def productive_symbols(cfg: CFG) -> frozenset[int]:
    """Symbols that derive at least one terminal string (every terminal does)."""
    good: set[int] = set(range(cfg.num_terminals))
    changed = True
    while changed:
        changed = False
        for lhs, rhs in cfg.rules:
            if lhs not in good and all(x in good for x in rhs):
                good.add(lhs)
                changed = True
    return frozenset(good)


def trim(cfg: CFG) -> CFG:
    """Drop rules that use an unproductive symbol or cannot be reached from the start.

    After trimming, every item an Earley set holds can still be completed, so the
    set's ``expected`` terminals are exactly the ones a valid input may continue with.
    """
    good = productive_symbols(cfg)
    rules = [(lhs, rhs) for lhs, rhs in cfg.rules if lhs in good and all(x in good for x in rhs)]
    by_lhs: dict[int, list[tuple[int, tuple[int, ...]]]] = {}
    for lhs, rhs in rules:
        by_lhs.setdefault(lhs, []).append((lhs, rhs))
    reach, todo = {cfg.start}, [cfg.start]
    while todo:
        for _, rhs in by_lhs.get(todo.pop(), ()):
            for x in rhs:
                if x >= cfg.num_terminals and x not in reach:
                    reach.add(x)
                    todo.append(x)
    return CFG(cfg.num_terminals, tuple(r for r in rules if r[0] in reach), cfg.start)
