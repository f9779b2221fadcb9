"""The Earley parser's lazy nonterminals (``LazyRules``): rules made on first prediction."""

from __future__ import annotations

from guided.grammars.earley import CFG, EarleyParser, LazyRules, productive_symbols, trim

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
