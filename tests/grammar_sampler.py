"""Random strings from a lark grammar, near-miss mutations, and three recognisers.

A test helper for the shipped grammars (``grammars/lark/*.lark``) and for anything that
compiles them::

    import random
    from tests.grammar_sampler import (
        earley_parser, lalr_parser, lark_accepts, longest_match_accepts, mutate, sample)

    rng = random.Random(0)
    text = open("grammars/lark/sql.lark").read()
    s = sample(text, rng, max_depth=6)     # a random SELECT query the grammar accepts
    bad = mutate(s, rng)                   # one random edit: mostly invalid, near a valid one
    lalr, earley = lalr_parser(text), earley_parser(text)
    lark_accepts(lalr, bad) == lark_accepts(earley, bad) == longest_match_accepts(lalr, bad)

``sample`` derives a string top-down from lark's *compiled* rules (``Lark.rules``, after
EBNF expansion) and samples each terminal's string from its regex with a small sampler
over Python's own regex parse tree. Ignored terminals (``%ignore``) are inserted at random
between tokens; every result is checked with lark's LALR parser and resampled if it is
rejected, so a sample never depends on a lucky tokenization.

The three recognisers read the same grammar with three lexers:

* ``lark_accepts(Lark(..., parser="lalr"), s)``: lark's contextual lexer (for each parser
  state, the first terminal in lark's priority order that matches, keywords retyped by
  exact match);
* ``lark_accepts(Lark(..., parser="earley", lexer="dynamic"), s)``: every expected
  terminal's own (greedy) regex match at every position;
* ``longest_match_accepts(lalr, s)``: the lexer of ``grammars/lexer.py``: the longest
  lexeme among the terminals the parser allows (byte DFAs from ``fsm``), ending at the
  first byte no allowed terminal can take, ties handed to the parser as a set.

A grammar that all three agree on tokenizes unambiguously, which is what an engine that
compiles it into a token matcher needs. ``same_state_prefix_pairs(lalr)`` lists the
terminal pairs where they could disagree at all (one terminal's string a prefix of
another's, both possible in one parser state), for review.
"""

from __future__ import annotations

import functools
import random
import re

import lark

try:  # Python >= 3.11
    import re._constants as _C
    import re._parser as _sre
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _C
    import sre_parse as _sre

__all__ = [
    "sample",
    "mutate",
    "lark_accepts",
    "longest_match_accepts",
    "lalr_parser",
    "earley_parser",
    "sample_regex",
    "name_regex_excluding_prefixes",
    "same_state_prefix_pairs",
]


# -- parsers --------------------------------------------------------------------------


@functools.lru_cache(maxsize=32)
def lalr_parser(lark_text: str, start: str = "start") -> lark.Lark:
    """``Lark(text, parser="lalr")`` (contextual lexer), cached by text."""
    return lark.Lark(lark_text, parser="lalr", start=start)


@functools.lru_cache(maxsize=32)
def earley_parser(lark_text: str, start: str = "start") -> lark.Lark:
    """``Lark(text, parser="earley", lexer="dynamic")``, cached by text.

    ``ambiguity="forest"`` skips building a tree from the parse forest: these parsers are
    used as recognisers only, and it is several times faster.
    """
    return lark.Lark(lark_text, parser="earley", lexer="dynamic", start=start, ambiguity="forest")


def lark_accepts(lark_obj: lark.Lark, s: str) -> bool:
    """Does ``lark_obj`` parse ``s``? (Any lark parse error means no.)"""
    try:
        lark_obj.parse(s)
    except lark.exceptions.LarkError:
        return False
    return True


# -- regex sampling -------------------------------------------------------------------

#: Characters a sampled string is mostly made of, and the occasional non-ASCII ones.
_ASCII = [chr(c) for c in range(32, 127)]
_NON_ASCII = ["é", "ß", "Ω", "ж", "日", "本", "€", "😀", "\u00a0"]
_CATEGORY_TEST = {
    _C.CATEGORY_DIGIT: lambda c: c.isdecimal(),
    _C.CATEGORY_NOT_DIGIT: lambda c: not c.isdecimal(),
    _C.CATEGORY_SPACE: lambda c: c.isspace(),
    _C.CATEGORY_NOT_SPACE: lambda c: not c.isspace(),
    _C.CATEGORY_WORD: lambda c: c.isalnum() or c == "_",
    _C.CATEGORY_NOT_WORD: lambda c: not (c.isalnum() or c == "_"),
}
_REPEATS = (_C.MAX_REPEAT, _C.MIN_REPEAT) + ((_C.POSSESSIVE_REPEAT,) if hasattr(_C, "POSSESSIVE_REPEAT") else ())


def _pool_char(rng: random.Random, ok) -> str:
    """A character satisfying ``ok``: printable ASCII mostly, sometimes non-ASCII, rarely
    a tab or newline."""
    r = rng.random()
    pools = [_NON_ASCII, _ASCII] if r < 0.06 else [["\t", "\n", "\r"], _ASCII] if r < 0.08 else [_ASCII, _NON_ASCII]
    for pool in pools + [[chr(c) for c in range(0, 32)]]:
        cands = [c for c in pool if ok(c)]
        if cands:
            return rng.choice(cands)
    raise ValueError("regex sampler: no candidate character for a character class")


def _in_class(items, c: str, ignorecase: bool) -> bool:
    forms = {f for f in (c, c.lower(), c.upper()) if len(f) == 1} if ignorecase else {c}
    neg = False
    hit = False
    for op, av in items:
        if op is _C.NEGATE:
            neg = True
        elif op is _C.LITERAL:
            hit = hit or any(ord(f) == av for f in forms)
        elif op is _C.RANGE:
            hit = hit or any(av[0] <= ord(f) <= av[1] for f in forms)
        elif op is _C.CATEGORY:
            hit = hit or _CATEGORY_TEST[av](c)
        else:  # pragma: no cover
            raise ValueError(f"regex sampler: unsupported class item {op}")
    return hit != neg


def _sample_class(rng: random.Random, items, ignorecase: bool) -> str:
    if items and items[0][0] is _C.NEGATE:
        return _pool_char(rng, lambda c: _in_class(items, c, ignorecase))
    weights = []
    for op, av in items:
        if op is _C.RANGE:
            weights.append(min(av[1] - av[0] + 1, 30))
        elif op is _C.CATEGORY:
            weights.append(10)
        else:
            weights.append(1)
    op, av = rng.choices(items, weights)[0]
    if op is _C.LITERAL:
        c = chr(av)
    elif op is _C.RANGE:
        lo, hi = av
        # Prefer the printable-ASCII part of a range that reaches outside it.
        plo, phi = max(lo, 32), min(hi, 126)
        c = chr(rng.randint(plo, phi) if plo <= phi and rng.random() < 0.9 else rng.randint(lo, hi))
    else:
        c = _pool_char(rng, _CATEGORY_TEST[av])
    if ignorecase and rng.random() < 0.5:
        c = c.swapcase() if len(c.swapcase()) == 1 else c
    return c


def _sample_tree(rng: random.Random, tree, flags: int, out: list, rep_cap: int) -> None:
    for op, av in tree:
        ic = bool(flags & re.IGNORECASE)
        if op is _C.LITERAL:
            c = chr(av)
            if ic and rng.random() < 0.5 and len(c.swapcase()) == 1:
                c = c.swapcase()
            out.append(c)
        elif op is _C.NOT_LITERAL:
            out.append(_pool_char(rng, lambda c, av=av: ord(c) != av and (not ic or c.lower() != chr(av).lower())))
        elif op is _C.ANY:
            dotall = bool(flags & re.DOTALL)
            out.append(_pool_char(rng, lambda c: dotall or c != "\n"))
        elif op is _C.IN:
            out.append(_sample_class(rng, av, ic))
        elif op is _C.BRANCH:
            _sample_tree(rng, rng.choice(av[1]), flags, out, rep_cap)
        elif op is _C.SUBPATTERN:
            _group, add, delete, sub = av
            _sample_tree(rng, sub, (flags | add) & ~delete, out, rep_cap)
        elif op in _REPEATS:
            lo, hi, sub = av
            hi = lo + rep_cap if hi == _C.MAXREPEAT else min(hi, lo + rep_cap)
            # Small counts are likelier: a uniform pick between lo and a uniform bound.
            n = rng.randint(lo, rng.randint(lo, hi))
            for _ in range(n):
                _sample_tree(rng, sub, flags, out, rep_cap)
        else:
            raise ValueError(f"regex sampler: {op} is not supported (terminals must be regular)")


@functools.lru_cache(maxsize=512)
def _parse_regex(pattern: str):
    tree = _sre.parse(pattern)
    return tree, tree.state.flags


def sample_regex(pattern: str, rng: random.Random, rep_cap: int = 4, tries: int = 50) -> str:
    """A random string that ``re.fullmatch(pattern, s)`` accepts.

    Literals, classes (negated ones sample printable ASCII mostly, sometimes a non-ASCII
    character such as "é" or "日"), bounded repeats (unbounded ones at most ``rep_cap``
    beyond their minimum), alternation, groups, and the ``i`` flag (random case).
    Lookarounds, backreferences and anchors raise ``ValueError``.
    """
    tree, flags = _parse_regex(pattern)
    compiled = re.compile(pattern)
    for _ in range(tries):
        out: list[str] = []
        _sample_tree(rng, tree, flags, out, rep_cap)
        s = "".join(out)
        if compiled.fullmatch(s):
            return s
    raise ValueError(f"regex sampler: no match for {pattern!r} after {tries} tries")


# -- grammar sampling -----------------------------------------------------------------

#: How much likelier a pass-through expansion (sum -> product) is than each other one.
CHAIN_WEIGHT = 6


INF = (float("inf"), float("inf"))


def cheapest_derivations(rules: dict[str, list[tuple]]):
    """Per nonterminal, the (terminals, height) of its cheapest derivation (``INF``
    where it derives no finite string; names without rules too), and the cost of an
    expansion under them; ``rules`` maps a nonterminal to its expansions, each a
    tuple of ``(name, is_terminal)``."""
    key = {nt: INF for nt in rules}

    def cost(exp):
        size, height = 0, 0
        for name, term in exp:
            k = (1, 0) if term else key.get(name, INF)
            size += k[0]
            height = max(height, k[1])
        return size, height + 1

    changed = True
    while changed:
        changed = False
        for nt, exps in rules.items():
            best = min(cost(e) for e in exps)
            if best < key[nt]:
                key[nt], changed = best, True
    return key, cost


class _Grammar:
    """Lark's compiled rules and terminals, with each nonterminal's cheapest
    expansions (for steering a deep derivation to an end)."""

    def __init__(self, lark_text: str, start: str):
        ear = lark.Lark(lark_text, parser="earley", lexer="dynamic", start=start)
        self.start = start
        self.lalr = lalr_parser(lark_text, start)
        self.terminals = {t.name: t for t in ear.terminals}
        self.ignore = [self.terminals[n] for n in ear.ignore_tokens]
        self.space_ignored = any(re.fullmatch(t.pattern.to_regexp(), " ") for t in self.ignore)
        self.rules: dict[str, list[tuple]] = {}
        for r in ear.rules:
            self.rules.setdefault(r.origin.name, []).append(tuple((s.name, s.is_term) for s in r.expansion))
        # Each nonterminal's cheapest derivation: fewest terminals, then least height.
        # Following the expansions that achieve it strictly lowers the height, so a
        # derivation steered this way always ends, and ends short.
        key, cost = cheapest_derivations(self.rules)
        if key.get(start, INF) == INF:
            raise ValueError(f"start symbol {start!r} derives no finite string")
        self.shortest = {nt: [e for e in exps if cost(e) == key[nt]] for nt, exps in self.rules.items()}
        self.deepest = {nt: [e for e in exps if cost(e)[1] == max(cost(x)[1] for x in exps)] for nt, exps in self.rules.items()}

    def derive(self, rng: random.Random, max_depth: int, nest: float) -> list[str]:
        """Terminal names of a random derivation. Only expansions of two or more symbols
        count as depth (lark's rule chains such as sum -> product -> unary are free).
        In the upper half (depth < max(1, max_depth // 2)), a fraction ``nest`` of the
        choices go to the expansions that nest deepest (so that a JSON document is not
        mostly a scalar); past ``max_depth``, each nonterminal takes its cheapest
        expansion."""
        upper = max(1, max_depth // 2)
        out: list[str] = []
        stack = [(self.start, False, 0)]
        while stack:
            name, term, depth = stack.pop()
            if term:
                out.append(name)
                continue
            if depth > max_depth:
                exps = self.shortest[name]
            else:
                exps = self.deepest[name] if depth < upper and rng.random() < nest else self.rules[name]
            if len(exps) > 1:
                # A pass-through rule (sum -> product) is CHAIN_WEIGHT times as likely
                # as each other expansion: otherwise a grammar with many precedence
                # levels spends its depth on operators and never reaches calls,
                # subscripts or brackets. So is an empty one, so that [x] stays 50:50.
                exp = rng.choices(exps, [CHAIN_WEIGHT if len(e) == 0 or (len(e) == 1 and not e[0][1]) else 1 for e in exps])[0]
            else:
                exp = exps[0]
            d = depth + (len(exp) > 1)
            stack.extend((n, t, d) for n, t in reversed(exp))
        return out

    def terminal_string(self, name: str, rng: random.Random) -> str:
        return sample_regex(self.terminals[name].pattern.to_regexp(), rng)


@functools.lru_cache(maxsize=32)
def _grammar(lark_text: str, start: str) -> _Grammar:
    return _Grammar(lark_text, start)


def sample(
    lark_text: str, rng: random.Random, max_depth: int = 6, start: str = "start", nest: float = 0.3, tries: int = 200
) -> str:
    """A random string of the grammar, accepted by lark's LALR parser.

    Derives top-down from lark's compiled rules (``nest``: how often the upper levels
    pick the expansions that nest deepest; past ``max_depth`` levels, only the cheapest
    expansions), samples each terminal from its regex, and puts a random
    ignored string (from the ``%ignore`` terminals) or nothing between tokens. A result
    that LALR rejects (two tokens that lex differently without a separator) is retried
    with a separator between every two tokens, then resampled.
    """
    g = _grammar(lark_text, start)
    for _ in range(tries):
        names = g.derive(rng, max_depth, nest)
        toks = [g.terminal_string(n, rng) for n in names]
        candidates = [_join(toks, g, rng, rng.choice((0.2, 0.5, 0.8)))]
        if g.ignore:
            candidates.append(_join(toks, g, rng, 1.0))
        for s in candidates:
            if lark_accepts(g.lalr, s):
                return s
    raise RuntimeError(f"no sample accepted by LALR in {tries} tries")


def _join(toks: list[str], g: _Grammar, rng: random.Random, p_sep: float) -> str:
    if not g.ignore:
        return "".join(toks)

    def sep() -> str:
        if g.space_ignored and rng.random() < 0.7:
            return " "
        return g.terminal_string(rng.choice(g.ignore).name, rng)

    parts = [sep() if rng.random() < 0.1 else ""]
    for i, t in enumerate(toks):
        if i:
            parts.append(sep() if rng.random() < p_sep else "")
        parts.append(t)
    parts.append(sep() if rng.random() < 0.1 else "")
    return "".join(parts)


# -- mutation -------------------------------------------------------------------------

_CHUNK = re.compile(r"\w+|\s+|[^\w\s]")
_INSERT_EXTRA = list("\"'\\,.:;()[]{}<>=!+-*/%^|&~_0123456789 \n\t") + ["é", "日", "\x00", "\r"]


def mutate(s: str, rng: random.Random) -> str:
    """One random edit of ``s``: delete, insert or replace a character, swap two
    adjacent characters, or duplicate or drop a token-sized chunk (a word, a run of
    whitespace or one punctuation character). Mostly invalid, always near ``s``."""
    ops = ["insert"] if not s else ["delete", "insert", "replace", "swap", "dup", "drop"]
    op = rng.choice(ops)

    def char() -> str:
        r = rng.random()
        if s and r < 0.4:
            return rng.choice(s)
        if r < 0.8:
            return rng.choice(_INSERT_EXTRA)
        return rng.choice(_ASCII + _NON_ASCII)

    i = rng.randrange(len(s) + (op == "insert")) if s or op == "insert" else 0
    if op == "delete":
        return s[:i] + s[i + 1 :]
    if op == "insert":
        return s[:i] + char() + s[i:]
    if op == "replace":
        return s[:i] + char() + s[i + 1 :]
    if op == "swap":
        if len(s) < 2:
            return s + char()
        i = min(i, len(s) - 2)
        return s[:i] + s[i + 1] + s[i] + s[i + 2 :]
    chunks = [m.span() for m in _CHUNK.finditer(s)]
    a, b = rng.choice(chunks)
    if op == "dup":
        return s[:b] + s[a:b] + s[b:]
    return s[:a] + s[b:]


# -- the engine's lexer, emulated -----------------------------------------------------


class _LR:
    """Lark's LALR table as a recogniser over terminal names (no trees, no callbacks)."""

    def __init__(self, lalr: lark.Lark):
        from guided.fsm import compile_regex

        table = lalr.parser.parser.parser.parse_table
        self.states = table.states
        self.start = table.start_states[lalr.options.start[0]]
        self.end = table.end_states[lalr.options.start[0]]
        self.ignore = frozenset(lalr.ignore_tokens)
        self.dfas = {}
        for t in lalr.terminals:
            d = compile_regex(t.pattern.to_regexp())
            self.dfas[t.name] = (d.transitions.tolist(), d.byte_to_class.tolist(), d.accepting.tolist())
        self._allowed: dict[tuple, frozenset] = {}

    def feed(self, stack: tuple, term: str) -> tuple | None:
        """The stack after shifting ``term`` (reductions first); None when not allowed."""
        st = list(stack)
        states = self.states
        while True:
            action = states[st[-1]].get(term)
            if action is None:
                return None
            kind, arg = action
            if kind.name == "Shift":
                st.append(arg)
                return tuple(st)
            n = len(arg.expansion)
            if n:
                del st[-n:]
            goto = states[st[-1]].get(arg.origin.name)
            if goto is None:
                return None
            st.append(goto[1])

    def allowed(self, stack: tuple) -> frozenset:
        a = self._allowed.get(stack)
        if a is None:
            row = self.states[stack[-1]]
            a = self._allowed[stack] = frozenset(t for t in row if t in self.dfas and self.feed(stack, t) is not None)
        return a

    def accepts_end(self, stack: tuple) -> bool:
        """May the input end here? (Reductions on ``$END`` reach the end state.)"""
        st = list(stack)
        states = self.states
        while True:
            action = states[st[-1]].get("$END")
            if action is None or action[0].name == "Shift":
                return False
            n = len(action[1].expansion)
            if n:
                del st[-n:]
            goto = states[st[-1]].get(action[1].origin.name)
            if goto is None:
                return False
            st.append(goto[1])
            if st[-1] == self.end:
                return True


@functools.lru_cache(maxsize=32)
def _lr(lalr: lark.Lark) -> _LR:
    return _LR(lalr)


def longest_match_accepts(lalr: lark.Lark, s: str) -> bool:
    """Accept ``s`` as the engine's lexer would (``grammars/lexer.py``).

    At each point the allowed terminals are those the LALR parser can shift next (plus
    the ``%ignore`` ones); bytes extend the lexeme while any allowed terminal's DFA can
    take them, and the lexeme ends, with every terminal that accepts it, at the first
    byte none can take (no backing up to a shorter accepted prefix). Each tied terminal
    is tried (a keyword that is also a name goes to the parser both ways).
    """
    lr = _lr(lalr)
    data = s.encode("utf-8")
    n = len(data)
    todo = [(0, (lr.start,))]
    seen = set()
    while todo:
        item = todo.pop()
        if item in seen:
            continue
        seen.add(item)
        pos, stack = item
        if pos == n:
            if lr.accepts_end(stack):
                return True
            continue
        live = dict.fromkeys(lr.allowed(stack), 0)
        live.update((t, 0) for t in lr.ignore)
        i = pos
        while i < n and live:
            b = data[i]
            nxt = {}
            for t, q in live.items():
                rows, cls, _acc = lr.dfas[t]
                q2 = rows[q][cls[b]]
                if q2 >= 0:
                    nxt[t] = q2
            if not nxt:
                break
            live = nxt
            i += 1
        if i == pos:
            continue
        for t, q in live.items():
            if not lr.dfas[t][2][q]:
                continue
            if t in lr.ignore:
                todo.append((i, stack))
            else:
                st = lr.feed(stack, t)
                if st is not None:
                    todo.append((i, st))
    return False


def same_state_prefix_pairs(lalr: lark.Lark) -> set[tuple[str, str]]:
    """Pairs (A, B) of terminals that lark's contextual lexer may see in the same LALR
    state (ignored terminals are in every state) where a nonempty string of A is also
    a string of B or a proper prefix of one.

    These are the only places where lexers can disagree: lark tries terminals in
    priority order, lark's Earley parser tries each, a longest-match lexer takes the
    longest and never backs up; and lark's per-state sets are LALR lookahead sets, a
    superset of what the parser can really take next. A grammar should keep this set
    small and each pair harmless (see the comments in grammars/lark/*.lark).
    """
    from guided.fsm import compile_regex

    lr = _lr(lalr)
    dfas = {t.name: compile_regex(t.pattern.to_regexp()) for t in lalr.terminals}
    cache: dict[tuple[str, str], bool] = {}

    def conflict(a: str, b: str) -> bool:
        A, B = dfas[a], dfas[b]
        # Representative bytes of the joint byte classes of A and B.
        reps = {}
        for byte in range(256):
            reps.setdefault((int(A.byte_to_class[byte]), int(B.byte_to_class[byte])), byte)
        ta, tb = A.transitions.tolist(), B.transitions.tolist()
        seen = set()
        todo = [(0, 0)]
        while todo:
            qa, qb = todo.pop()
            for ca, cb in reps:
                ra, rb = ta[qa][ca], tb[qb][cb]
                if ra < 0 or rb < 0 or (ra, rb) in seen:
                    continue
                if A.accepting[ra]:
                    return True
                seen.add((ra, rb))
                todo.append((ra, rb))
        return False

    pairs = set()
    for row in lr.states.values():
        names = [t for t in row if t in dfas] + sorted(lr.ignore)
        for a in names:
            for b in names:
                if a != b:
                    key = (a, b)
                    if key not in cache:
                        cache[key] = conflict(a, b)
                    if cache[key]:
                        pairs.add(key)
    return pairs


# -- names that exclude keyword prefixes ----------------------------------------------


def _class(chars: set[str]) -> str:
    """A regex character class for ``chars`` (ranges where contiguous)."""
    cs = sorted(chars, key=ord)
    parts, i = [], 0
    while i < len(cs):
        j = i
        while j + 1 < len(cs) and ord(cs[j + 1]) == ord(cs[j]) + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"{re.escape(cs[i])}-{re.escape(cs[j])}")
        else:
            parts.extend(re.escape(c) for c in cs[i : j + 1])
        i = j + 1
    return "[" + "".join(parts) + "]"


def name_regex_excluding_prefixes(words, first: str, rest: str, ignorecase: bool = False) -> str:
    """A regex for the identifiers ``[first][rest]*`` that do not begin with any of
    ``words`` (in any letter case when ``ignorecase``; the regex itself needs no flag).

    Used by sql.lark and python_expr.lark so that a keyword which may stand where a name
    may (``NOT``, ``DISTINCT``, ``lambda``) never ties with a name and never loses to a
    longer one, whichever lexer reads it; see those files. Python's backtracking ``re``
    returns the longest such name at a position (alternatives start with distinct
    characters and every repeat is greedy).

    Example::

        >>> name_regex_excluding_prefixes(["not"], "a-z", "a-z0-9")
        '(?:[a-mo-z][0-9a-z]*|n(?:[0-9a-np-z][0-9a-z]*|o(?:[0-9a-su-z][0-9a-z]*)?)?)'
    """
    first_set = _expand(first)
    rest_set = _expand(rest)
    trie: dict = {}
    for w in words:
        node = trie
        for c in w.lower() if ignorecase else w:
            node = node.setdefault(c, {})
        node[""] = True
    rest_re = _class(rest_set) + "*"

    def forms(c: str) -> set[str]:
        return {c, c.upper()} if ignorecase else {c}

    def build(node, allowed: set[str], root: bool) -> str | None:
        if "" in node:
            return None  # the word itself and everything after it is excluded
        alts = []
        others = allowed.difference(*(forms(c) for c in node))
        if others:
            alts.append(_class(others) + rest_re)
        for c in sorted(node):
            sub = build(node[c], rest_set, False)
            if sub is not None:
                f = forms(c) & allowed
                alts.append((_class(f) if len(f) > 1 else re.escape(c)) + sub)
        if not alts:
            return None if root else ""
        # Below the root the name may also stop here: the group is optional.
        return "(?:" + "|".join(alts) + (")" if root else ")?")

    body = build(trie, first_set, True)
    if body is None:
        raise ValueError("every name is excluded")
    return body


def _expand(spec: str) -> set[str]:
    """Characters of a class body such as "a-z0-9_"."""
    out: set[str] = set()
    i = 0
    while i < len(spec):
        if i + 2 < len(spec) and spec[i + 1] == "-":
            out.update(chr(c) for c in range(ord(spec[i]), ord(spec[i + 2]) + 1))
            i += 3
        else:
            out.add(spec[i])
            i += 1
    return out
