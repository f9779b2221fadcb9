"""The Earley parser's lazy nonterminals (``LazyRules``): rules made on first prediction."""

from __future__ import annotations

import pytest

from guided.grammars.earley import CFG, EarleyParser, LazyRules, OpaqueOrigin, productive_symbols, trim

A, B, C = 0, 1, 2  # terminals
S = 3              # the static start symbol
FIRST = 4          # N4, N5, ...: lazy


class Chain(LazyRules):
    """``N(k) -> b N(k+1) | c`` while fewer than ``most`` b's were read, then ``N -> c``;
    with ``ends=False`` no N can end (no ``c``)."""

    def __init__(self, most: int, ends: bool = True):
        self.most, self.ends, self.asked = most, ends, []

    def owns(self, sym):
        return sym >= FIRST

    def roots(self):
        return [FIRST]

    def rules(self, sym):
        self.asked.append(sym)
        out = [(C,)] if self.ends else []
        if sym - FIRST < self.most:
            out.append((B, sym + 1))
        return out

    def productive(self, sym, good):
        return self.ends

    def uses(self, sym):
        return [B, C]


def _accepts(parser: EarleyParser, terminals) -> bool:
    state = parser.root()
    for t in terminals:
        state = parser.advance(state, frozenset([t]))
        if state is None:
            return False
    return state.accepts


def test_lazy_rules_are_made_when_first_predicted_and_parse_exactly():
    chain = Chain(most=6)
    parser = EarleyParser(trim(CFG(3, ((S, (A, FIRST)),), S, chain)))
    assert chain.asked == []  # nothing made before parsing
    assert _accepts(parser, [A, B, B, C])
    assert chain.asked == [FIRST, FIRST + 1, FIRST + 2]  # one node per b read, in order
    assert all(_accepts(parser, [A] + [B] * n + [C]) for n in range(7))
    assert not _accepts(parser, [A] + [B] * 7 + [C])
    assert not _accepts(parser, [A, B])  # N still open: the input may not end
    assert parser.advance(parser.advance(parser.root(), frozenset([A])), frozenset([A])) is None
    assert sorted(set(chain.asked)) == list(range(FIRST, FIRST + 7))  # each node made once


def test_an_unproductive_lazy_root_is_trimmed_with_the_rules_that_use_it():
    chain = Chain(most=3, ends=False)
    cfg = CFG(3, ((S, (A, FIRST)), (S, (C,))), S, chain)
    assert FIRST not in productive_symbols(cfg)
    trimmed = trim(cfg)
    assert trimmed.rules == ((S, (C,)),)
    parser = EarleyParser(trimmed)
    assert sorted(parser.root().expected) == [C]
    assert chain.asked == []


def test_long_chains_are_found_productive_past_the_array_sweeps():
    """``productive_symbols`` sweeps the rules as arrays, a link of a chain per
    sweep, then finishes with a worklist (``SWEEPS``): a chain ten times longer
    than the sweeps is productive exactly when its last link ends, and trimming
    keeps it whole or drops it whole."""
    from guided.grammars.earley import SWEEPS

    n = 10 * SWEEPS
    first = 3  # N(k) -> a N(k+1), for k < n; N(n) -> b (or nothing: unproductive)
    links = tuple((first + k, (A, first + k + 1)) for k in range(n))
    for ends in (True, False):
        rules = links + (((first + n, (B,)),) if ends else ()) + ((first + n + 1, (C,)),)
        cfg = CFG(3, rules + ((first + n + 2, (first, C)), (first + n + 2, (first + n + 1,))), first + n + 2)
        good = productive_symbols(cfg)
        assert all((first + k in good) == ends for k in range(n + 1))
        assert first + n + 1 in good and first + n + 2 in good
        trimmed = trim(cfg, good)
        assert len(trimmed.rules) == (n + 4 if ends else 2)
        parser = EarleyParser(trimmed)
        assert _accepts(parser, [A] * n + [B, C]) == ends
        assert _accepts(parser, [C])
        assert not _accepts(parser, [A] * (n - 1) + [B, C])


def test_merged_sets_parse_what_either_set_parses():
    """Two readings of the same text (``a b`` as two lexemes, or as one ``a`` that a
    longer terminal would cover) merged into one set: every continuation is
    accepted from the merged set exactly when it is from one of the two, and the
    merged set expects what either expects."""
    from itertools import product

    a, b, c, d, e = range(5)
    S, X, Y = 5, 6, 7
    rules = ((S, (X, c)), (S, (Y, d, d)), (X, (a, b)), (Y, (a,)), (Y, (a, e)), (S, (S, c)))
    parser = EarleyParser(CFG(5, rules, S))
    one = parser.advance(parser.advance(parser.root(), frozenset([a])), frozenset([b]))
    other = parser.advance(parser.root(), frozenset([a]))
    merged = parser.merge(one, other)
    assert merged.expected == one.expected | other.expected
    assert parser.merge(one, other) is merged and parser.merge(one, one) is one

    def accepts(state, seq):
        for t in seq:
            state = parser.advance(state, frozenset([t]))
            if state is None:
                return False
        return state.accepts

    seen = 0
    for n in range(4):
        for seq in product(range(5), repeat=n):
            want = accepts(one, seq) or accepts(other, seq)
            assert accepts(merged, seq) == want, seq
            seen += want
    assert seen >= 4


def _reference_sets(cfg: CFG, depth: int) -> dict:
    """A textbook Earley recogniser over positions (no Leo, no shared tables): (expected
    terminals, accepts) after every input of at most ``depth`` terminals that some
    sentence starts with."""
    rules, nt = cfg.rules, cfg.num_terminals
    out = {}
    by_lhs: dict[int, list[int]] = {}
    for r, (lhs, _) in enumerate(rules):
        by_lhs.setdefault(lhs, []).append(r)

    def close(chart):  # a worklist; symbols completed here with origin here (empty) also complete later items
        k, items = len(chart) - 1, chart[-1]
        todo, empty = list(items), set()
        while todo:
            r, dot, o = todo.pop()
            lhs, rhs = rules[r]
            if dot < len(rhs):
                if rhs[dot] < nt:
                    continue
                new = [(r2, 0, k) for r2 in by_lhs.get(rhs[dot], ())]
                if rhs[dot] in empty:
                    new.append((r, dot + 1, o))
            else:
                if o == k:
                    empty.add(lhs)
                new = [(r2, d2 + 1, o2) for r2, d2, o2 in (list(items) if o == k else chart[o])
                       if d2 < len(rules[r2][1]) and rules[r2][1][d2] == lhs]
            for item in new:
                if item not in items:
                    items.add(item)
                    todo.append(item)

    def walk(prefix, chart):
        close(chart)
        items = chart[-1]
        expected = frozenset(rules[r][1][d] for r, d, _ in items if d < len(rules[r][1]) and rules[r][1][d] < nt)
        accepts = any(rules[r][0] == cfg.start and d == len(rules[r][1]) and o == 0 for r, d, o in items)
        out[prefix] = expected, accepts
        if len(prefix) < depth:
            for t in sorted(expected):
                walk(prefix + (t,), chart + [{(r, d + 1, o) for r, d, o in items
                                              if d < len(rules[r][1]) and rules[r][1][d] == t}])

    walk((), [{(r, 0, 0) for r, (lhs, _) in enumerate(rules) if lhs == cfg.start}])
    return out


def _parser_walk(parser: EarleyParser, depth: int) -> dict:
    """``_reference_sets`` from ``parser``: advance over every expected terminal."""
    out = {}

    def walk(prefix, state):
        out[prefix] = state.expected, state.accepts
        if len(prefix) < depth:
            for t in sorted(state.expected):
                walk(prefix + (t,), parser.advance(state, frozenset([t])))

    walk((), parser.root())
    return out


def _parser_sets(parser: EarleyParser, seq):
    state, out = parser.root(), []
    for k in range(len(seq) + 1):
        out.append((state.expected, state.accepts))
        if k == len(seq):
            break
        state = parser.advance(state, frozenset([seq[k]]))
        if state is None:
            break
    return out


@pytest.mark.parametrize("bulk", [None, 0])
def test_the_parser_agrees_with_a_textbook_earley_on_random_grammars(bulk, monkeypatch):
    """Leo's shortcut, nullable rules, unit cycles and ambiguity: random small grammars
    give the same expected terminals and acceptance as a textbook Earley after every
    input of up to 7 terminals that a sentence starts with (with ``BULK = 0`` too, so
    that every bucket is a frozenset of shared tuples)."""
    from guided.grammars import earley

    if bulk is not None:
        monkeypatch.setattr(earley, "BULK", bulk)
    for cfg in _random_grammars(62, 60):
        got, want = _parser_walk(EarleyParser(cfg), 7), _reference_sets(cfg, 7)
        assert got == want, cfg.rules


def _random_grammars(seed: int, count: int):
    """``count`` random small trimmed CFGs with right and left recursion and a unit cycle."""
    import random

    rng = random.Random(seed)
    out = []
    while len(out) < count:
        nt, n = rng.randint(1, 3), rng.randint(2, 5)
        syms = list(range(nt + n))
        rules = set()
        for lhs in range(nt, nt + n):
            for _ in range(rng.randint(1, 3)):
                rules.add((lhs, tuple(rng.choice(syms) for _ in range(rng.choice((0, 1, 1, 2, 2, 3))))))
        rules |= {(nt, (0, nt)), (nt + n - 1, (nt,)), (nt, (nt + n - 1,)), (nt, (nt, 0))}
        cfg = CFG(nt, tuple(sorted(rules)), nt)
        if nt in productive_symbols(cfg):
            out.append(trim(cfg))
    return out


def test_sets_with_equal_items_are_one_set():
    """A scan whose set has the items of a set made before gets that set, with all
    that is memoised on it: ``a+a`` is the set of ``a`` again, so a left-recursive
    list makes the same few sets however long it grows."""
    a, plus, S = 0, 1, 2
    parser = EarleyParser(CFG(2, ((S, (S, plus, a)), (S, (a,))), S))
    s1 = parser.advance(parser.root(), frozenset([a]))
    s2 = parser.advance(s1, frozenset([plus]))
    assert parser.advance(s2, frozenset([a])) is s1
    state, made = s1, set()
    for _ in range(200):
        state = parser.advance(parser.advance(state, frozenset([plus])), frozenset([a]))
        made.add(id(state))
    assert made == {id(s1)} and state.accepts
    parser.forget()  # sets made later are new objects, and parse the same
    s3 = parser.advance(parser.advance(s1, frozenset([plus])), frozenset([a]))
    assert s3 is s1  # (memoised on s1 before forget)
    fresh = parser.advance(parser.advance(parser.advance(parser.root(), frozenset([a])), frozenset([plus])),
                           frozenset([a]))
    assert fresh.expected == s1.expected and fresh.accepts


def test_items_that_differ_only_in_an_equivalent_rule_dot_are_one_set():
    """``x ("," x)*`` as lark expands it: ``T -> "," x | T "," x``. Past the first
    comma the item is ``T -> ",". x``, past later ones ``T -> T ",". x``: the same
    symbols ahead and the same left-hand side, so the sets are one and a list of any
    length makes the same few sets (and masks)."""
    lb, x, comma, rb = 0, 1, 2, 3
    S, T = 4, 5
    cfg = CFG(4, ((S, (lb, x, T, rb)), (S, (lb, x, rb)), (T, (comma, x)), (T, (T, comma, x))), S)
    parser = EarleyParser(cfg)

    def after(seq):
        state = parser.root()
        for t in seq:
            state = parser.advance(state, frozenset([t]))
        return state

    first, later = after([lb, x, comma]), after([lb, x, comma, x, comma])
    assert first is later
    assert after([lb, x, comma, x]) is after([lb, x, comma, x, comma, x, comma, x])
    assert first.expected == frozenset([x]) and not first.accepts
    done = after([lb, x, comma, x, comma, x, rb])
    assert done.accepts and done.expected == frozenset()


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_cut_sets_step_as_their_sets_do_or_raise(depth):
    """``EarleyParser.cut(s, depth)`` leaves out the origins ``depth`` links down: from
    it, every terminal sequence either goes exactly as from ``s`` (the same expected
    terminals and acceptance at every step) or raises ``OpaqueOrigin`` at the step
    that would complete an item below the cut. Random grammars, every state within
    4 terminals of the root, every continuation of up to 4 terminals."""
    from itertools import product

    same = raised = 0
    for cfg in _random_grammars(66, 25):
        parser = EarleyParser(cfg)
        states = [parser.root()]
        for _ in range(4):
            states += [parser.advance(s, frozenset([t])) for s in states for t in sorted(s.expected)]
        for s in {id(s): s for s in states if s is not None}.values():
            cut = parser.cut(s, depth)
            for n in range(1, 5):
                for seq in product(range(cfg.num_terminals), repeat=n):
                    real, short = s, cut
                    try:
                        for t in seq:
                            real = parser.advance(real, frozenset([t]))
                            short = parser.advance(short, frozenset([t]))
                            assert (real is None) == (short is None), seq
                            if real is None:
                                break
                            assert (short.expected, short.accepts) == (real.expected, real.accepts), seq
                    except OpaqueOrigin:
                        raised += 1
                        continue
                    same += 1
    assert same > 1000 and raised > 100


def test_right_recursion_completes_through_leo_items():
    """``S -> a S | a``, and ``S -> X; X -> a S | b`` (a's, then a b completes every
    level at once): completing the innermost ``S`` (or ``X``) goes straight to the
    item that began at the root (Leo's transitive item, memoised on the set it
    completes at), instead of walking one item per level; every prefix still ends a
    sentence exactly where it should."""
    a, b = 0, 1
    S, X = 2, 3

    def tops(s):
        return [top[1] for top, _ in filter(None, s.leo.values())]

    parser = EarleyParser(CFG(2, ((S, (a, S)), (S, (a,))), S))
    root = state = parser.root()
    for depth in range(3000):
        prev, state = state, parser.advance(state, frozenset([a]))
        assert state.accepts
        assert sum(map(len, state.after.values())) == 1
        if depth:
            assert tops(prev) == [root]
    parser = EarleyParser(CFG(2, ((S, (X,)), (X, (a, S)), (X, (b,))), S))
    root = state = parser.root()
    for _ in range(3000):
        state = parser.advance(state, frozenset([a]))
        assert not state.accepts
    end = parser.advance(state, frozenset([b]))
    assert end.accepts and not end.expected
    assert set(tops(state)) == {root}  # a chain of 6,000 complete items, walked once, not recursively


class SlowChain(Chain):
    """``Chain`` whose rules take a while (the thread yields inside rule creation)."""

    def rules(self, sym):
        import time

        time.sleep(0.0002)
        return super().rules(sym)


def test_one_parser_shared_by_threads_parses_as_one_thread_does():
    """Eight threads advance different inputs through one parser (lazy rules made on
    the way, one of them predicted by the root; Leo items and advance results
    memoised on shared sets; the root made by whichever thread comes first) while a
    ninth keeps clearing the root's memo, as ``GrammarIndex.drop_caches`` does: each
    sees the sets a single thread sees, and each lazy rule is made once. Repeated,
    with a small switch interval and lazy rules that yield, so that threads
    interleave inside the parser."""
    import random
    import sys

    def grammar(slow=False):
        # S -> a N4 | N4 a | S S | c S | c, with N(k) -> b N(k+1) | c lazy (up to 40 b's).
        chain = (SlowChain if slow else Chain)(most=40)
        rules = ((S, (A, FIRST)), (S, (FIRST, A)), (S, (S, S)), (S, (C, S)), (S, (C,)))
        return chain, trim(CFG(3, rules, S, chain))

    rng = random.Random(8)
    _, cfg = grammar()
    guide = EarleyParser(cfg)
    inputs = []
    for _ in range(8):  # random walks over the expected terminals: long, valid inputs
        state, seq = guide.root(), []
        while len(seq) < 40:
            t = rng.choice(sorted(state.expected))
            seq.append(t)
            state = guide.advance(state, frozenset([t]))
        inputs.append(seq)
    _, cfg = grammar()
    want = [_parser_sets(EarleyParser(cfg), seq) for seq in inputs]

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(4):
            chain, cfg = grammar(slow=True)
            assert _in_threads(EarleyParser(cfg), inputs) == want
            assert len(chain.asked) == len(set(chain.asked))  # each lazy node made once
    finally:
        sys.setswitchinterval(old)


def _in_threads(shared: EarleyParser, inputs) -> list:
    """``_parser_sets`` of each input, each in its own thread, all started at once, with
    one more thread clearing the root's memo until they are done."""
    import threading

    got: list = [None] * len(inputs)
    errors: list = []
    start = threading.Barrier(len(inputs) + 1)
    running = [len(inputs)]

    def run(i):
        try:
            start.wait()
            got[i] = _parser_sets(shared, inputs[i])
        except BaseException as e:  # noqa: BLE001 (reported below, in the main thread)
            errors.append(e)
        finally:
            running[0] -= 1

    def drop():
        start.wait()
        while running[0] > 0:
            root = shared._root
            if root is not None:
                root.memo.clear()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(inputs))]
    threads.append(threading.Thread(target=drop))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return got
