"""An incremental Earley parser over terminal ids, with persistent parse states.

::

    root = parser.root()                      # Earley set 0: the start symbol predicted
    s1 = parser.advance(root, ts)             # scan a *set* of terminals (lexing ties)
    s1.expected                               # the terminals that may come next
    s1.accepts                                # may the input end here?

An Earley set keeps its items only as ``after``: for each symbol, the items whose
dot stands before it, held as scanning or completing that symbol makes them (the dot
past it), each with its origin *set object* (not an index). Predicted items (origin =
the set itself) depend only on which nonterminals are predicted, so they live in a
table shared by every set predicting the same ones. Sets are immutable once built
and point back only to older sets, so a parse state is just a reference to its
newest set: forking a sequence copies a pointer and rolling back pops one, with no
chart to copy or truncate. ``advance`` results are memoised on the set, so the mask
computation's trial scans are reused when the token is accepted. A scan whose set has
the items of one made before returns that one (``_intern``): a set's future depends
only on its items, so ``1+2+`` is the set of ``1+`` with all that is memoised on it.
Items hold one rule-dot for all dots with the same symbol before them, the same
symbols after them and the same left-hand side (``_canonical_dot``): a list's first
and later items (``T -> "," x`` and ``T -> T "," x``) leave equal items.
``cut`` copies a set with the origins a few links down left out, for work that needs
only the innermost open constructs (``grammars.grammar_index._viable``).

Nullable rules follow Aycock and Horspool ("Practical Earley Parsing", 2002): when
an item predicts a nullable symbol, its dot also moves past that symbol at once, so
completions never need to look for items in the set under construction.

Right recursion follows Leo (1991, "A general context-free parsing algorithm running
in linear time on every LR(k) grammar"): where a completion can only complete the
one item waiting on its symbol, which completes another in turn, the chain's
topmost item is memoised on the origin set (``EarleyParser._leo``) and only it is
added, so ``S -> a S | a`` costs the same per set at any depth instead of one item
per level. The items skipped are complete ones, which add nothing but the next
link and acceptance, so the sets' ``after``, ``expected`` and ``accepts`` are those
of plain Earley.

Lazy nonterminals (``CFG.lazy``, a ``LazyRules``): a family of nonterminals too large
to list, such as one per set of keys an object has written, gets its rules when an
item first predicts one of them.

Threads: one parser and its sets serve any number of threads. Everything made
lazily (lazy rules, prediction tables, the root, the memos on sets) is built in
full, then published by one dict or attribute store; rules are made under a lock.
Two threads may both build one memo entry: the first stored wins and both use it.

Cost notes: a scan costs the explicit items it touches: the scanned ones and the
completions they cause (tens of tuples for JSON or SQL, 5-50 us in Python);
predictions cost one dict lookup per set, whatever the grammar's size. Left
recursion, and right recursion whose reduction path is deterministic (Leo), cost
O(1) per set at any depth. Ambiguous grammars cost what Earley costs:
``S -> S S | a`` holds O(k) items in set k and its completions look at O(k^2) of
them, by set differences over shared tuples (``BULK``) at some 20-30 ns an item,
tens of ms for set 2,000.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from itertools import chain

import numpy as np


@dataclass(frozen=True)
class CFG:
    """A context-free grammar over integer symbols.

    Terminals are ``0 .. num_terminals - 1``; nonterminals are the other symbols.
    ``rules`` are ``(lhs, rhs)`` pairs with ``rhs`` a tuple of symbols.

    ``lazy``: nonterminals whose rules are made on demand (``LazyRules``), or None.

    Example::

        >>> g = CFG(num_terminals=2, rules=((2, (0, 2, 1)), (2, ())), start=2)   # S -> a S b | ε
    """

    num_terminals: int
    rules: tuple[tuple[int, tuple[int, ...]], ...]
    start: int
    lazy: LazyRules | None = None


class LazyRules:
    """Nonterminals whose rules are made when the parser first predicts them.

    ``owns(sym)`` says whether a symbol is one of them; ``rules(sym)`` gives a lazy
    symbol's right-hand sides (they may name new lazy symbols; none may be nullable:
    a lazy symbol never derives the empty string). ``roots()`` lists the lazy symbols
    that the static rules name; ``productive(sym, good)`` says whether a lazy symbol
    derives a terminal string given the productive static symbols ``good``;
    ``uses(sym)`` lists the static symbols its rules (and its successors' rules) may
    name, so that trimming keeps them. ``keep(good)`` is told the productive symbols
    once trimming is done: rules made later name only those.

    Example (``S -> a N4``, and for each k >= 4, ``Nk -> b N(k+1) | c``)::

        >>> class Chain(LazyRules):
        ...     def owns(self, sym): return sym >= 4
        ...     def roots(self): return [4]
        ...     def rules(self, sym): return [(1, sym + 1), (2,)]
        ...     def productive(self, sym, good): return True
        ...     def uses(self, sym): return [1, 2]
        >>> g = CFG(num_terminals=3, rules=((3, (0, 4)),), start=3, lazy=Chain())
    """

    def owns(self, sym: int) -> bool:
        raise NotImplementedError

    def roots(self):
        raise NotImplementedError

    def rules(self, sym: int) -> list[tuple[int, ...]]:
        raise NotImplementedError

    def productive(self, sym: int, good) -> bool:
        raise NotImplementedError

    def uses(self, sym: int):
        raise NotImplementedError

    def keep(self, good) -> None:
        pass


_UNSET = object()  # "not memoised yet" (None is a memoised answer: no parse, no Leo item)

#: Lists in ``EarleySet.after`` longer than this are stored as frozensets, and a
#: completion that adds one takes only its items not yet in the set by one set
#: difference: C speed per item, with the items' hashes stored (ambiguous grammars
#: complete O(k) symbols in set k, each adding up to O(k) items, nearly all there already).
BULK = 8


class EarleySet:
    """One Earley set: the items waiting on each symbol, and what may come next.

    Items come in two kinds. *Explicit* ones (scanned or completed, with an older
    origin) are listed in ``after``. *Predicted* ones (origin = this set) are not
    stored per set: they are the same for every set that predicts the same
    nonterminals, so ``predicted`` points to a table shared by all such sets.

    Both hold each item as the scan or completion of the symbol it waits on makes
    it, its dot already past that symbol: ``after[sym]`` holds ``(rule-dot, origin)``
    pairs (a list, or a frozenset past ``BULK`` items), ``predicted[sym]`` rule-dots.
    ``leo`` memoises Leo's transitive items (``EarleyParser._leo``). Everything but
    the memo dicts is fixed once the set is built; the memo dicts only gain entries,
    each fully built before it is stored.
    """

    __slots__ = ("accepts", "after", "cache", "canon", "expected", "leo", "memo", "predicted")

    def __init__(self):
        self.after: dict[int, list | frozenset] = {}  # symbol -> (rule-dot, origin) pairs
        self.predicted: dict[int, tuple[int, ...]] = {}  # symbol -> predicted rule-dots, past the symbol
        self.expected: frozenset[int] = frozenset()
        self.accepts = False
        self.memo: dict = {}   # advance() and merge() results, keyed by what was scanned / merged
        self.cache: dict = {}  # per-set values computed by users of the parser
        self.leo: dict = {}    # symbol -> Leo's (topmost item, accepts on the way) or None
        self.canon: dict | None = None  # rule-dot -> the one (rule-dot, self) tuple that large buckets share

    def items_waiting(self, sym: int) -> list[tuple[int, EarleySet]]:
        """Every item whose dot stands before ``sym``, as ``(rule-dot, origin)``."""
        return [(rd - 1, o) for rd, o in self.after.get(sym, ())] + [(rd - 1, self)
                                                                     for rd in self.predicted.get(sym, ())]


class OpaqueOrigin(Exception):
    """A parse step needed the items of a set that ``EarleyParser.cut`` left out."""


class _Unreadable(dict):
    """The items of ``_CUT``: empty, and reading one raises ``OpaqueOrigin``."""

    def get(self, key, default=None):
        raise OpaqueOrigin

    def __getitem__(self, key):
        raise OpaqueOrigin

    def setdefault(self, key, default=None):
        raise OpaqueOrigin


#: What ``EarleyParser.cut`` puts in place of the sets it leaves out: completing an
#: item whose origin it is reads its items, and raises ``OpaqueOrigin``.
_CUT = EarleySet()
_CUT.after, _CUT.predicted, _CUT.leo = _Unreadable(), _Unreadable(), _Unreadable()
_CUT.canon = {}


def _canonical(items):
    """``items`` with each ``(rule-dot, origin)`` replaced by the one equal tuple its
    origin keeps (``EarleySet.canon``): an item sits in the buckets of every later set
    that waits on it, and set differences between buckets then match by identity,
    without comparing tuples, and hold one tuple where they would hold one per set."""
    out = []
    for item in items:
        origin = item[1]
        canon = origin.canon
        if canon is None:  # two threads racing here may each make one: only sharing is lost
            canon = origin.canon = {}
        out.append(canon.setdefault(item[0], item))
    return out


class EarleyParser:
    """Earley recognition over a ``CFG``; see the module docstring.

    One parser may be shared by any number of threads, each advancing its own states:
    what it builds lazily (lazy rules, prediction tables, the root, the memos on
    sets) is built in full before it is published by one dict or attribute store,
    and rule creation holds a lock.

    Args:
        cfg: the grammar (trimmed: every symbol productive and reachable).

    Example::

        >>> p = EarleyParser(g)
        >>> s = p.advance(p.root(), frozenset([0]))     # after "a"
        >>> sorted(s.expected), s.accepts
        ([0, 1], False)
    """

    def __init__(self, cfg: CFG):
        self.cfg = cfg
        nt = cfg.num_terminals
        # Rule-dot ids: a rule's dots are consecutive ids, from before its first
        # symbol to after its last.
        lhs, flat, owner, _ = _rule_arrays(cfg)
        # Rule r's dots start at id r plus the symbols of the rules before it.
        sizes = np.bincount(owner, minlength=len(lhs))
        first = np.arange(len(lhs), dtype=np.int64)
        first[1:] += np.cumsum(sizes)[:-1]
        rd_next = np.full(len(flat) + len(lhs), -1, dtype=np.int64)
        rd_next[np.arange(len(flat)) + owner] = flat
        self.rd_next: list[int] = rd_next.tolist()  # symbol after the dot, -1 when complete
        self.rd_lhs: list[int] = np.repeat(lhs, sizes + 1).tolist()
        order = np.argsort(lhs, kind="stable")
        lefts, at = np.unique(lhs[order], return_index=True)
        self._starts: dict[int, list[int]] = dict(
            zip(lefts.tolist(), (part.tolist() for part in np.split(first[order], at[1:]))))
        self.nullable = _nullable(cfg)
        # Per nonterminal, made on first use: the rule-dots predicting it adds (its
        # rules' first dots and, past nullable symbols, the later ones), and the
        # nonterminals predicted with it.
        self._own: dict[int, list[int]] = {}
        self._closure: dict[int, frozenset[int]] = {}
        self._tables: dict[frozenset[int], tuple[dict, frozenset[int]]] = {}
        self._num_terminals = nt
        self._root: EarleySet | None = None
        # Sets made by scans and merges, by their items and acceptance (``_intern``).
        self._interned: dict[tuple[frozenset, bool], EarleySet] = {}
        # Per rule-dot past a rule's first symbol, the one rule-dot items hold for it
        # (-1: not looked up yet; ``_canonical_dot``), and those dots by their key.
        self._canon: list[int] = [-1] * len(self.rd_next)
        self._dot_keys: dict[tuple[int, int, int], int] = {}
        # Held while rules are added (rd_next / rd_lhs / _starts grow) and the root is
        # made; readers of published values never take it.
        self._lock = threading.RLock()

    def _add_rule(self, lhs: int, rhs: tuple[int, ...]) -> None:
        """Append a lazy rule's dots (under ``_lock``)."""
        self._starts.setdefault(lhs, []).append(len(self.rd_next))
        self.rd_next.extend(rhs)
        self.rd_next.append(-1)
        self._canon.extend([-1] * (len(rhs) + 1))
        self.rd_lhs.extend([lhs] * (len(rhs) + 1))

    def _own_dots(self, sym: int) -> list[int]:
        """The rule-dots predicting ``sym`` adds (its lazy rules made first, if it has any)."""
        own = self._own.get(sym)
        if own is None:
            with self._lock:
                own = self._own.get(sym)
                if own is None:
                    lazy = self.cfg.lazy
                    if sym not in self._starts and lazy is not None and lazy.owns(sym):
                        made = [tuple(rhs) for rhs in lazy.rules(sym)]
                        for rhs in made:
                            if all(x in self.nullable for x in rhs):
                                raise ValueError(f"lazy nonterminal {sym} has a nullable rule {rhs}")
                        for rhs in made:
                            self._add_rule(sym, rhs)
                    own, todo = [], list(self._starts.get(sym, ()))
                    while todo:
                        rd = todo.pop()
                        own.append(rd)
                        if self.rd_next[rd] in self.nullable:
                            todo.append(rd + 1)
                    self._own[sym] = own
        return own

    def _predicts(self, sym: int) -> frozenset[int]:
        """The nonterminals predicting ``sym`` predicts, itself included."""
        got = self._closure.get(sym)
        if got is None:
            nt = self.cfg.num_terminals
            seen, todo = {sym}, [sym]
            while todo:
                for rd in self._own_dots(todo.pop()):
                    nxt = self.rd_next[rd]
                    if nxt >= nt and nxt not in seen:
                        seen.add(nxt)
                        todo.append(nxt)
            got = self._closure.setdefault(sym, frozenset(seen))
        return got

    def _prediction_table(self, roots: frozenset[int]):
        """(symbol -> predicted rule-dots past it, expected terminals) for predicting ``roots``."""
        got = self._tables.get(roots)
        if got is None:
            nts: set[int] = set()
            for r in roots:
                nts |= self._predicts(r)
            table: dict[int, list[int]] = {}
            for n in nts:
                for rd in self._own_dots(n):
                    sym = self.rd_next[rd]
                    if sym >= 0:
                        table.setdefault(sym, []).append(self._canonical_dot(rd + 1))
            frozen = {k: tuple(v) for k, v in table.items()}
            got = self._tables.setdefault(roots, (frozen, frozenset(k for k in frozen if k < self._num_terminals)))
        return got

    def _canonical_dot(self, rd: int) -> int:
        """The rule-dot that items hold for ``rd`` (a dot past its rule's first symbol):
        the first one made with the same symbol before it, the same symbols after it
        and the same left-hand side. Recognition reads only those (the next symbol,
        and the left-hand side at the end), so items that differ only in which such
        dot they hold are one: ``L -> "," x`` and ``L -> L "," x`` (a list's first
        and later items) leave the same item past ``","``, and sets that differ only
        there are one set (``_intern``)."""
        canon = self._canon
        got = canon[rd]
        if got >= 0:
            return got
        rd_next, keys = self.rd_next, self._dot_keys
        end = rd
        while rd_next[end] >= 0:
            end += 1
        nxt = canon[end]
        if nxt < 0:
            nxt = canon[end] = keys.setdefault((rd_next[end - 1], -1, self.rd_lhs[end]), end)
        for r in range(end - 1, rd - 1, -1):
            got = canon[r]
            if got < 0:
                got = canon[r] = keys.setdefault((rd_next[r - 1], rd_next[r], nxt), r)
            nxt = got
        return nxt

    def root(self) -> EarleySet:
        """The set before any input (shared by every parse of this grammar)."""
        root = self._root
        if root is None:
            with self._lock:
                root = self._root
                if root is None:
                    root = EarleySet()
                    root.predicted, root.expected = self._prediction_table(frozenset([self.cfg.start]))
                    root.accepts = self.cfg.start in self.nullable
                    self._root = root
        return root

    def advance(self, state: EarleySet, terminals: frozenset[int]) -> EarleySet | None:
        """The set after scanning any one of ``terminals``; None if none is expected."""
        memo = state.memo
        got = memo.get(terminals, _UNSET)
        if got is not _UNSET:
            return got
        kernel: list[tuple[int, EarleySet]] = []
        after, predicted = state.after, state.predicted
        for t in terminals:
            kernel += after.get(t, ())
            pred = predicted.get(t)
            if pred:
                kernel += [(rd, state) for rd in pred]
        result = None
        if kernel:
            result = EarleySet()
            self._close(result, kernel)
            result = self._intern(result)
        return memo.setdefault(terminals, result)  # a thread that lost the race gets the winner's

    def _intern(self, s: EarleySet) -> EarleySet:
        """The set already made with ``s``'s items, else ``s`` (now the one made).

        A set's future (what it expects, accepts and becomes) is a function of its
        explicit items, origins by identity, and of whether it accepts, so two sets
        with equal items are one: ``1+2+`` reaches the set of ``1+`` and everything
        memoised on it (scans, masks), and a grammar whose inputs nest to bounded
        depths makes a bounded number of sets, however long the input."""
        key = (frozenset(chain.from_iterable(s.after.values())), s.accepts)
        return self._interned.setdefault(key, s)

    def cut(self, s: EarleySet, depth: int) -> EarleySet:
        """``s`` with the origins ``depth`` links down from it left out: its items,
        their origins' items and so on to ``depth`` sets deep, the origins below
        replaced by a stand-in whose items cannot be read. A step from the cut set
        that completes no item down there goes exactly as from ``s`` (and
        ``OpaqueOrigin`` is raised where one would), and sets whose stacks agree
        ``depth`` deep cut to one set (``_intern``), so work done on one serves the
        others. Memoised on ``s``; ``s`` itself where nothing is that deep."""
        if not s.after:  # predictions alone (the root, or the stand-in): nothing to cut
            return s
        key = ("cut", depth)
        got = s.memo.get(key)
        if got is None:
            cut = EarleySet()
            changed = False
            for sym, items in s.after.items():
                mapped = [(rd, self.cut(o, depth - 1) if depth > 1 or not o.after else _CUT) for rd, o in items]
                changed = changed or any(m[1] is not o[1] for m, o in zip(mapped, items))
                cut.after[sym] = frozenset(_canonical(mapped)) if isinstance(items, frozenset) else mapped
            if changed:
                cut.predicted, cut.expected, cut.accepts = s.predicted, s.expected, s.accepts
                got = self._intern(cut)
            else:
                got = s
            got = s.memo.setdefault(key, got)
        return got

    def forget(self) -> None:
        """Drop the table of sets made (``_intern``): sets in use stay valid, and sets
        made later no longer meet the older ones (only sharing is lost)."""
        self._interned = {}

    def merge(self, a: EarleySet, b: EarleySet) -> EarleySet:
        """One set holding the items of both ``a`` and ``b``: the parses of two
        readings of the same input that go on alike (two lexings that reach one lexer
        state). Items name their origin sets, not positions, and every step is item by
        item, so what follows the merged set is what follows either. Memoised on ``a``."""
        if a is b:
            return a
        key = ("merge", b)
        got = a.memo.get(key)
        if got is None:
            kernel = [(rd - 1, o) for s in (a, b) for items in s.after.values() for rd, o in items]
            got = EarleySet()
            self._close(got, kernel)  # explicit items only wait: nothing completes again
            got.accepts = a.accepts or b.accepts
            got = a.memo.setdefault(key, self._intern(got))
        return got

    def _leo(self, s: EarleySet, sym: int):
        """Leo's transitive item for completing ``sym`` at ``s``: None, or the topmost
        item of its deterministic reduction path and whether the path passes an
        accepting item (``s.leo[sym]``, memoised).

        Completing ``sym`` at ``s`` is deterministic where exactly one item of ``s``
        waits on ``sym`` and ``sym`` is its last symbol: the completion adds that
        item, complete, whose own completion at its origin may be deterministic in
        turn. Those items are complete, so they add nothing but each other (and
        acceptance); only the last one of the chain is put in the new set. A right
        recursion then costs O(1) a set instead of its depth (Leo, 1991). A chain
        that comes back to a pair it passed (unit-rule cycles) stops there; stopping
        anywhere on a chain is sound, as the item stopped at is completed as usual.
        """
        got = s.leo.get(sym, _UNSET)
        if got is not _UNSET:
            return got
        rd_next, rd_lhs, start, root = self.rd_next, self.rd_lhs, self.cfg.start, self._root
        path: list[tuple[EarleySet, int, tuple[int, EarleySet]]] = []
        passed: set[int] = set()  # the symbols the chain completed at ``cur`` so far
        cur, x, tail = s, sym, None
        while True:
            if path:
                if x in passed:
                    break
                tail = cur.leo.get(x, _UNSET)
                if tail is not _UNSET:
                    break
                tail = None
            explicit = cur.after.get(x, ())
            pred = cur.predicted.get(x, ())
            if len(explicit) + len(pred) != 1:
                cur.leo.setdefault(x, None)
                break
            item = next(iter(explicit)) if explicit else (pred[0], cur)
            if rd_next[item[0]] >= 0:
                cur.leo.setdefault(x, None)
                break
            path.append((cur, x, item))
            if item[1] is cur:
                passed.add(x)
            else:  # origins are never newer: a chain that leaves a set never comes back
                passed.clear()
            cur, x = item[1], rd_lhs[item[0]]
        for cur, x, item in reversed(path):
            here = rd_lhs[item[0]] == start and item[1] is root
            val = (item, here) if tail is None else (tail[0], tail[1] or here)
            tail = cur.leo.setdefault(x, val)
        return tail

    def _close(self, s: EarleySet, kernel) -> None:
        """Explicit items: the kernel and what it completes (origins are always older
        sets); nonterminals they stand before are predicted through a shared table."""
        rd_next, rd_lhs, nt, canon = self.rd_next, self.rd_lhs, self._num_terminals, self._canon
        nullable, start, root = self.nullable, self.cfg.start, self._root
        after = s.after
        seen = set(kernel)
        agenda = list(seen)
        completed: set[tuple[int, EarleySet]] = set()  # (symbol, origin) pairs completed
        roots: set[int] = set()
        accepts = False
        i = 0
        while i < len(agenda):
            item = agenda[i]
            i += 1
            rd, origin = item
            sym = rd_next[rd]
            if sym < 0:
                lhs = rd_lhs[rd]
                if lhs == start and origin is root:
                    accepts = True
                done = (lhs, origin)
                if done in completed:
                    continue
                completed.add(done)
                leo = origin.leo.get(lhs, _UNSET)
                if leo is _UNSET:
                    leo = self._leo(origin, lhs)
                if leo is not None:
                    top, passes = leo
                    accepts = accepts or passes
                    if top not in seen:
                        seen.add(top)
                        agenda.append(top)
                    continue
                explicit = origin.after.get(lhs)
                if explicit:
                    if len(explicit) > BULK:  # a frozenset: its items' hashes are stored
                        fresh = explicit - seen
                        if fresh:
                            seen |= fresh
                            agenda += fresh
                    else:
                        for new in explicit:
                            if new not in seen:
                                seen.add(new)
                                agenda.append(new)
                pred = origin.predicted.get(lhs)
                if pred:
                    for rd2 in pred:
                        new = (rd2, origin)
                        if new not in seen:
                            seen.add(new)
                            agenda.append(new)
                continue
            nxt = canon[rd + 1]
            new = (nxt if nxt >= 0 else self._canonical_dot(rd + 1), origin)
            bucket = after.get(sym)
            if bucket is None:
                after[sym] = [new]
            else:
                bucket.append(new)
            if sym >= nt:
                roots.add(sym)
                if sym in nullable and new not in seen:
                    seen.add(new)
                    agenda.append(new)
        if len(seen) > BULK:
            for sym, bucket in after.items():
                if len(bucket) > BULK:
                    after[sym] = frozenset(_canonical(bucket))
        s.accepts = accepts
        if roots:
            s.predicted, pred_expected = self._prediction_table(frozenset(roots))
            s.expected = frozenset(k for k in after if k < nt) | pred_expected
        else:
            s.expected = frozenset(k for k in after if k < nt)


#: Sweeps ``_fixpoint`` makes over the rules as arrays before it finishes with a
#: worklist (a chain of rules, each waiting on the next, takes one sweep a link).
SWEEPS = 64


def _fixpoint(cfg: CFG, base, lazy=None) -> frozenset[int]:
    """``base`` plus every nonterminal with a rule whose symbols are all in the set
    (and, given ``lazy``, its root symbols that it calls productive).

    Sweeps over the rules as arrays (``_rule_arrays``: each sweep adds the left
    sides of the rules with no symbol missing), then, where ``SWEEPS`` did not
    reach the fixpoint, a worklist from what they found (``_worklist``). Lazy roots
    are asked again each time the static rules add nothing, until none joins. On
    JSON Schema grammars (up to 10k rules) the sweeps cost about a quarter of the
    worklist's time; a few need hundreds of sweeps, nearly all fewer than 64."""
    lhs, flat, owner, n = _rule_arrays(cfg)
    got = np.zeros(max(n, cfg.num_terminals, cfg.start + 1), dtype=bool)
    got[np.fromiter(base, dtype=np.int64)] = True
    for _ in range(SWEEPS):
        missing = np.bincount(owner[~got[flat]], minlength=len(lhs))
        new = lhs[(missing == 0) & ~got[lhs]]
        if not len(new):
            found = frozenset(np.flatnonzero(got).tolist())
            if lazy is not None:
                new = [sym for sym in lazy.roots() if sym not in found and lazy.productive(sym, found)]
            if not len(new):
                return found
            got = np.pad(got, (0, max(0, max(new) + 1 - len(got))))
        got[new] = True
    return _worklist(cfg, set(np.flatnonzero(got).tolist()), lazy)


_ARRAYS: tuple = (None, None)  # the last grammar's (``cfg``, its ``_rule_arrays``), swapped whole


def _rule_arrays(cfg: CFG) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The rules as arrays: each one's left side, all right sides' symbols in a row,
    each such symbol's rule, and one past the largest symbol named. Kept for the
    last grammar asked (productive symbols, then trimming, read the same one)."""
    global _ARRAYS
    last_cfg, last = _ARRAYS  # one read: another thread may swap it meanwhile
    if last_cfg is cfg:
        return last
    rules = cfg.rules
    lhs = np.fromiter((left for left, _ in rules), dtype=np.int64, count=len(rules))
    sizes = np.fromiter((len(rhs) for _, rhs in rules), dtype=np.int64, count=len(rules))
    flat = np.fromiter(chain.from_iterable(rhs for _, rhs in rules), dtype=np.int64, count=int(sizes.sum()))
    owner = np.repeat(np.arange(len(rules), dtype=np.int64), sizes)
    n = 1 + max(int(lhs.max(initial=-1)), int(flat.max(initial=-1)))
    arrays = lhs, flat, owner, n
    _ARRAYS = cfg, arrays
    return arrays


def _worklist(cfg: CFG, got: set[int], lazy) -> frozenset[int]:
    """``_fixpoint`` from ``got``, a worklist linear in the rules' length: each rule
    counts its symbols not yet in the set and is indexed under each of them; a
    symbol joining the set counts down the rules that use it, and a rule at zero
    adds its left side. (Sweeping every rule until nothing changes takes one sweep
    per level of the grammar.)"""
    missing: list[int] = []
    users: dict[int, list[int]] = {}
    ready: list[int] = []
    for i, (lhs, rhs) in enumerate(cfg.rules):
        left = 0
        for x in rhs:
            if x not in got:
                left += 1
                users.setdefault(x, []).append(i)
        missing.append(left)
        if not left:
            ready.append(lhs)
    rules = cfg.rules
    while True:
        while ready:
            sym = ready.pop()
            if sym in got:
                continue
            got.add(sym)
            for i in users.get(sym, ()):
                missing[i] -= 1
                if not missing[i]:
                    ready.append(rules[i][0])
        if lazy is not None:
            ready = [sym for sym in lazy.roots() if sym not in got and lazy.productive(sym, got)]
        if not ready:
            return frozenset(got)


def _nullable(cfg: CFG) -> frozenset[int]:
    return _fixpoint(cfg, ())  # lazy nonterminals are never nullable


def productive_symbols(cfg: CFG) -> frozenset[int]:
    """Symbols that derive at least one terminal string (every terminal does)."""
    return _fixpoint(cfg, range(cfg.num_terminals), cfg.lazy)


def trim(cfg: CFG, good: frozenset[int] | None = None) -> CFG:
    """Drop rules that use an unproductive symbol or cannot be reached from the start
    (``good``: ``productive_symbols(cfg)``, where the caller has it).

    After trimming, every item an Earley set holds can still be completed, so the
    set's ``expected`` terminals are exactly the ones a valid input may continue with.
    A lazy symbol reached keeps what its rules may name (``LazyRules.uses``), and the
    lazy rules are told which symbols stay (``LazyRules.keep``).
    """
    lazy = cfg.lazy
    if good is None:
        good = productive_symbols(cfg)
    lhs, flat, owner, n = _rule_arrays(cfg)
    is_good = np.zeros(max(n, max(good, default=0) + 1), dtype=bool)
    is_good[np.fromiter(good, dtype=np.int64, count=len(good))] = True
    kept = is_good[lhs] & (np.bincount(owner[~is_good[flat]], minlength=len(lhs)) == 0)
    # The nonterminals each kept rule names, grouped by its left side.
    named = kept[owner] & (flat >= cfg.num_terminals)
    src, dst = lhs[owner[named]], flat[named]
    order = np.argsort(src, kind="stable")
    src, dst = src[order], dst[order].tolist()
    bounds = np.searchsorted(src, np.arange(len(is_good) + 1)).tolist()
    reach, todo = {cfg.start}, [cfg.start]
    while todo:
        sym = todo.pop()
        more = dst[bounds[sym] : bounds[sym + 1]] if sym < len(is_good) else []
        if lazy is not None and lazy.owns(sym):
            more = more + [x for x in lazy.uses(sym) if x in good]
        for x in more:
            if x >= cfg.num_terminals and x not in reach:
                reach.add(x)
                todo.append(x)
    if lazy is not None:
        lazy.keep(good)
    rules = cfg.rules
    return CFG(cfg.num_terminals, tuple(rules[i] for i in np.flatnonzero(kept).tolist() if rules[i][0] in reach),
               cfg.start, lazy)
