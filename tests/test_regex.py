"""Regex -> byte-level DFA agrees with ``re.fullmatch`` (the reference)."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guided.fsm import EmptyLanguageError, RegexSyntaxError, UnsupportedRegexFeature, compile_regex
from guided.fsm.nfa import NFA
from guided.fsm.regex import regex_to_nfa
from guided.fsm.utf8 import _all_scalars, normalize

PATTERNS = [
    r"[0-9]+",
    r"\d{3}-\d{4}",
    r"\(\d{3}\) \d{3}-\d{4}",
    r"(?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3}",
    r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])",
    r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}",
    r"(yes|no|maybe)",
    r"[a-z]{1,8}",
    r".{0,12}",
    r"(?s:.{0,5})",
    r"\w+",
    r"\s*\S+\s*",
    r"[^a-z\n]{2,6}",
    r"\W\D?",
    r"(?a:\w+)",
    r"héllo|wörld|日本語+",
    r"[\u0400-\u04FF]{1,6}",
    r"[🎉-🎯]+ ?[👍👎]",
    r"[^\x00-\x7f]{1,4}",
    r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?",
    r'\{"name": "[^"]{0,10}", "age": \d{1,3}\}',
    r"(ab|a)(bc|c)*?d??",
    r"^abc$",
    r"\Aab+\Z",
    r"(?x) a b # verbose mode\n c",
    r"[\]\-^]+",
    r"\t\n\r\x0b\x0c\\",
]

MUTATION_CHARS = "a0Z_ -.\n\t\"{}()é日🎉\x00\x7f"


def _mutate(s: str, rng: random.Random) -> str:
    kind = rng.randrange(3)
    i = rng.randrange(len(s) + 1)
    c = rng.choice(MUTATION_CHARS)
    if kind == 0 or not s:
        return s[:i] + c + s[i:]
    i = min(i, len(s) - 1)
    if kind == 1:
        return s[:i] + s[i + 1 :]
    return s[:i] + c + s[i + 1 :]


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_agrees_with_re_fullmatch(pattern, data):
    dfa = compile_regex(pattern)
    s = data.draw(st.from_regex(pattern, fullmatch=True))
    assert dfa.matches(s.encode("utf-8")) == bool(re.fullmatch(pattern, s)), repr(s)
    rng = random.Random(s)
    for _ in range(5):
        t = _mutate(s, rng)
        assert dfa.matches(t.encode("utf-8")) == bool(re.fullmatch(pattern, t)), repr(t)


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(text=st.text(alphabet=st.characters(codec="utf-8"), max_size=12))
def test_random_text_agrees(pattern, text):
    dfa = compile_regex(pattern)
    assert dfa.matches(text.encode("utf-8")) == bool(re.fullmatch(pattern, text))


def test_dfa_is_minimal_and_live():
    # (a|b)*abb has the textbook 4-state minimal DFA.
    dfa = compile_regex(r"(a|b)*abb")
    assert dfa.num_states == 4
    # Every state can still reach acceptance: no dead states are kept.
    for pattern in PATTERNS:
        d = compile_regex(pattern)
        assert d.num_states >= 1
        assert all((row >= 0).any() or acc for row, acc in zip(d.transitions, d.accepting))


def test_invalid_utf8_never_matches():
    dfa = compile_regex(r".+")
    assert dfa.matches("é".encode())
    assert not dfa.matches(b"\xc3")          # truncated sequence
    assert not dfa.matches(b"\xed\xa0\x80")  # an encoded surrogate
    assert not dfa.matches(b"\xff")


# -- bad input ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern, pos",
    [("[a-", 0), ("a{2,1}", 2), ("(ab", 0), ("ab)", 2), ("\\p{L}", 0), ("*a", 0)],
)
def test_syntax_error_reports_position(pattern, pos):
    with pytest.raises(RegexSyntaxError) as e:
        compile_regex(pattern)
    assert e.value.pos == pos
    assert f"position {pos}" in str(e.value)


@pytest.mark.parametrize(
    "pattern, feature",
    [
        (r"a(?=b)", "lookaround"),
        (r"(?<=a)b", "lookbehind"),
        (r"a(?!b)", "negative lookaround"),
        (r"(a)\1", "backreference"),
        (r"(?P<x>a)(?P=x)", "backreference"),
        (r"(a)?(?(1)b|c)", "conditional"),
        (r"(?>ab)", "atomic group"),
        (r"a*+", "possessive"),
        (r"a\bb", "word boundary"),
        (r"a^b", "anchor ^"),
        (r"(?m)a$b", "anchor $"),
    ],
)
def test_non_regular_features_are_named(pattern, feature):
    with pytest.raises(UnsupportedRegexFeature, match=re.escape(feature)):
        compile_regex(pattern)


@pytest.mark.parametrize("pattern", [r"[^\s\S]", r"a[^\x00-\U0010ffff]b", r"(?!)"])
def test_empty_language_is_an_error(pattern):
    with pytest.raises((EmptyLanguageError, UnsupportedRegexFeature)):
        compile_regex(pattern)


@pytest.mark.parametrize("pattern, position", [("\ud800", 0), ("ab\\uDC00", 2), ("x(\\U0000dfff)+", 2),
                                               ("[\ud800-\udbff]", 1)])
def test_a_lone_surrogate_is_named_with_its_position(pattern, position):
    """re matches a lone surrogate in a str, but no UTF-8 text holds one: the empty
    language says so, and where."""
    with pytest.raises(EmptyLanguageError) as info:
        compile_regex(pattern)
    message = str(info.value)
    assert "lone surrogate" in message and "UTF-8" in message and f"at position {position}" in message
    message.encode("utf-8")  # printable: the pattern is quoted with its surrogates escaped


def test_non_string_pattern():
    with pytest.raises(TypeError):
        compile_regex(b"abc")


# -- re.IGNORECASE -------------------------------------------------------------------
#
# Case-insensitive matching must be re's own, which is not str.lower(): 'ſ' ~ 's',
# the Kelvin sign ~ 'k', 'ß' ~ 'ẞ' (but not "ss"), the three sigmas, 'İ' ~ 'i', and
# under re.ASCII only ASCII letters fold.

ICASE_PATTERNS = [
    (r"(?i)select|from|where", 0),
    (r"(?i)[a-z_][a-z0-9_]*", 0),
    (r"hello world", re.IGNORECASE),
    (r"(?i:abc)d", 0),
    (r"a(?i:b(?-i:c)d)e", 0),
    (r"(?i)[^a]", 0),
    (r"(?i)[^a-z]+", 0),
    (r"(?i)[^\W\d_]+", 0),
    (r"(?i)\w+", 0),
    (r"(?i)\w+", re.ASCII),
    (r"(?i)[^\w]+", re.ASCII),
    (r"(?ai)[a-z]+k?", 0),
    (r"(?i)s+k+", re.ASCII),
    (r"(?i)stra(ß|ss)e", 0),
    (r"(?i)[σ]+|ς", 0),
    (r"(?i)Σ[^σ]", 0),
    (r"(?i)kelvin|ſ", 0),
    (r"(?i)é[é-ü]É", 0),
    (r"(?i)[^é]{1,2}", 0),
    (r"(?i)[À-ÿ]+", 0),
    (r"(?i)[Ѐ-ӿ]{1,3}", 0),
    (r"(?i)[ж-я]", 0),
    (r"(?i)i|\u0130", 0),
    (r"(?i)[\d\s]+x", 0),
    (r"(?i)[a\W]+", 0),
    (r"(?i)[^a\d]+", 0),
    (r"(?i).b.", 0),
    (r"(?is).b.", 0),
    (r"(?i)[.k]+", 0),
    (r"(?i)\U00010400|[\U00010428-\U0001044f]+", 0),
    (r"(?i)[a-c\U00010400]", 0),  # gh-126505: re's answer differs across versions
    (r"(?i)[\ua7aa-\U00010000]", re.ASCII),  # gh-126505 again
    (r"(?i)[\u0100-\U0010ffff]+", 0),
    (r"(?-i:a)(?i:a)", 0),
    (r"(?i)(?a:k)(?u:k)", 0),
]

ICASE_PROBE_CHARS = (
    "aAbBcCdDeEiIkKsSxXzZ_09 -.!\n"
    "éÉèüÜÿŸßẞſKΣσςİıΩωΩµΜжЖǅǄǆ\u0345\u0399\u03b9\u1fbe\u0266\ua7aa"
    "\U00010400\U00010428\U00010401日🎉"
)

ICASE_PROBE_WORDS = [
    "", "select", "SELECT", "SeLeCt", "ſelect", "ſeleſt", "from", "FROM", "fRoM", "where", "WHERE",
    "hello world", "HELLO WORLD", "HeLLo WoRLD", "abcd", "ABCd", "abcD", "aBcDe", "abcDe", "aBCDe",
    "straße", "STRASSE", "strasse", "STRAẞE", "Straße", "σςΣ", "Σσ", "ΣΣ", "σ", "ς", "Σς",
    "kelvin", "KELVIN", "Kelvin", "ſ", "S", "s", "éüÉ", "ÉÜé", "éẞÉ", "ÀÿŸ", "àÿŸ", "ЖжЯ",
    "x_1", "X_1", "_", "9", "12 x", "\t x", "aa", "aA", "Aa", "AA", "kk", "kK", "KK", "sk", "ſK",
    "ab", "AB", "Kb!", "kbK", "\U00010400", "\U00010428\U00010400", "\u0130", "\u0131", "i", "I",
]


def _icase_probes() -> list[str]:
    chars = ICASE_PROBE_CHARS
    probes = set(ICASE_PROBE_WORDS)
    probes.update(w.swapcase() for w in ICASE_PROBE_WORDS)
    probes.update(chars)
    probes.update(a + b for a in chars for b in chars)
    rng = random.Random(1234)
    probes.update("".join(rng.choice(chars) for _ in range(rng.randint(3, 6))) for _ in range(500))
    return sorted(probes)


ICASE_PROBES = _icase_probes()


@pytest.mark.parametrize("pattern, flags", ICASE_PATTERNS)
def test_ignorecase_agrees_with_re_on_probes(pattern, flags):
    dfa = compile_regex(pattern, flags)
    rx = re.compile(pattern, flags)
    bad = [s for s in ICASE_PROBES if dfa.matches(s.encode("utf-8")) != bool(rx.fullmatch(s))]
    assert not bad, [(s, bool(rx.fullmatch(s))) for s in bad[:10]]


@pytest.mark.parametrize(
    # hypothesis's own from_regex trips over case-folded ranges past the BMP
    "pattern, flags", [(p, f) for p, f in ICASE_PATTERNS if "\\U00" not in p]
)
@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_ignorecase_agrees_with_re_on_samples(pattern, flags, data):
    dfa = compile_regex(pattern, flags)
    rx = re.compile(pattern, flags)
    s = data.draw(st.from_regex(rx, fullmatch=True))
    rng = random.Random(s)
    for t in [s, s.swapcase(), s.upper(), s.lower()] + [_mutate(s, rng) for _ in range(5)]:
        assert dfa.matches(t.encode("utf-8")) == bool(rx.fullmatch(t)), repr(t)


def _one_char_set(pattern: str, flags: int = 0):
    """The code points our compiler gives a one-character pattern."""
    got = []
    nfa = NFA()

    def fragment(ranges):
        got.append(normalize(ranges))
        return nfa.code_points(ranges)

    regex_to_nfa(pattern, nfa, flags, char_fragment=fragment)
    assert len(got) == 1
    return got[0]


def _re_char_set(pattern: str, flags: int = 0):
    """The code points ``re`` matches with a one-character pattern: every scalar tried."""
    text = _all_scalars()
    runs = [(ord(text[m.start()]), ord(text[m.end() - 1])) for m in re.finditer(f"(?:{pattern})+", text, flags)]
    return normalize(runs)


ONE_CHAR_PATTERNS = [
    "a", "A", "s", "S", "k", "K", "i", "I", "\u0130", "\u0131", "\u017f", "\u212a", "ß", "ẞ",
    "σ", "ς", "Σ", "ι", "\u0345", "\u1fbe", "µ", "Ω", "\u2126", "\u1fd3", "\ufb05", "ǅ", "\U00010400",
    "[^a]", "[^s]", "[^σ]", "[^\u0345]", "[a-z]", "[A-Z]", "[^a-z]", "[a-z_]", "[k-s]", "[\\w]", "\\w",
    "[^\\W]", "[a\\W]", "[^a\\W]", "[a\\d]", "[\\s\\d]", "[\\S\\d]", "[À-ɏ]", "[Ͱ-Ͽ]", "[Ѐ-ӿ]",
    "[ᾀ-\u1fff]", "[Ⓐ-ⓩ]", "[\u10a0-\u10ff]", "[\u13a0-\u13ff]", "[\uab70-\uabbf]", "[\u1c80-\u1c88]",
    "[\x00-\U0010ffff]", "[^\x00-\uffff]", "[\u0100-\U0010ffff]", "[\ua7aa-\U00010000]",
    "[\U00010400-\U0001044f]", "[\U0001e900-\U0001e95f]", "[a\U00010400]", "[a\U00010428]",
    "[\U00010400\U00010401]", "[^a\U00010400]", ".",
]


@pytest.mark.parametrize("ascii_only", [False, True], ids=["unicode", "ascii"])
@pytest.mark.parametrize("pattern", ONE_CHAR_PATTERNS)
def test_ignorecase_one_character_sets_are_exact(pattern, ascii_only):
    """Every code point, not a sample: the folded set is exactly re's."""
    flags = re.IGNORECASE | (re.ASCII if ascii_only else 0)
    assert _one_char_set(pattern, flags) == _re_char_set(pattern, flags)


def test_ignorecase_examples():
    assert compile_regex("(?i)[^a]").matches(b"b")
    assert not compile_regex("(?i)[^a]").matches(b"A")  # negation folds first
    ks = compile_regex("(?i)ks")
    assert all(ks.matches(s.encode()) for s in ["ks", "KS", "\u212aſ", "kS"])
    assert not compile_regex("(?i)ß").matches(b"ss")
    assert compile_regex("(?i)ß").matches("ẞ".encode())
    assert not compile_regex("(?ai)k").matches("\u212a".encode())
    assert compile_regex("(?ai)k").matches(b"K")
    assert not compile_regex("(?ai)é").matches("É".encode())
    sigma = compile_regex("(?i)σ")
    assert all(sigma.matches(c.encode()) for c in "σςΣ")
    d = compile_regex(r"(?i:abc)d")
    assert d.matches(b"ABCd") and not d.matches(b"ABCD")


# A small grammar of random IGNORECASE patterns: literals and classes drawn from the
# interesting characters, scoped flags, alternation and repetition.
_RANDOM_ATOMS = [
    "a", "B", "k", "K", "s", "S", "ſ", "\u212a", "é", "É", "ß", "ẞ", "σ", "Σ", "ς", "i", "\u0130",
    "ж", "7", "_", " ", "\\.", ".", "\\w", "\\W", "\\d", "\\s", "[a-f]", "[^a-f]", "[A-Z_]",
    "[^k]", "[sk]", "[^\\W\\d]", "[é-ü]", "[Σσ]", "[^σ]", "[\\dk]", "[^\\sS]",
]


def _random_pattern(rng: random.Random, depth: int = 0) -> str:
    parts = []
    for _ in range(rng.randint(1, 4)):
        r = rng.random()
        if r < 0.15 and depth < 2:
            inner = "|".join(_random_pattern(rng, depth + 1) for _ in range(rng.randint(1, 3)))
            prefix = rng.choice(["?:", "?i:", "?-i:", "?a:", "?ai:", ""])
            parts.append(f"({prefix}{inner})")
        else:
            parts.append(rng.choice(_RANDOM_ATOMS))
        if rng.random() < 0.25:
            parts[-1] += rng.choice(["*", "+", "?", "{1,2}"])
    return "".join(parts)


def _random_text(rng: random.Random, pattern: str) -> str:
    alphabet = ICASE_PROBE_CHARS + "".join(c for c in pattern if c not in "\\[]()?:|*+{},^-")
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 5)))


def test_ignorecase_random_patterns_agree_with_re():
    rng = random.Random(20240611)
    checked = 0
    for _ in range(80):
        pattern = _random_pattern(rng)
        flags = rng.choice([re.IGNORECASE, re.IGNORECASE | re.ASCII, 0])
        rx = re.compile(pattern, flags)
        try:
            dfa = compile_regex(pattern, flags)
        except EmptyLanguageError:
            continue
        texts = [_random_text(rng, pattern) for _ in range(60)]
        # Strings re accepts, and their case variants, so that matches are exercised.
        for _ in range(40):
            t = _random_text(rng, pattern)
            m = rx.search(t)
            if m:
                texts += [m.group(), m.group().swapcase(), m.group().upper(), m.group().lower()]
        for t in texts:
            assert dfa.matches(t.encode("utf-8")) == bool(rx.fullmatch(t)), (pattern, flags, t)
            checked += 1
    assert checked > 3000


@pytest.mark.parametrize("a, b", [
    (r"[a-z]{0,12}", r"(ab|b)*c?"),          # a length counter against a loop
    (r"\w{2,9}", r"[^q]*(x|yy)[^q]*"),       # Unicode classes on both sides
    (r"[0-9]+(\.[0-9]+)?", r".{0,4}"),
])
def test_unminimised_intersection_has_the_same_language_and_embeds_without_dead_states(a, b):
    """``intersect(minimal=False)`` (products embedded as they are: a pattern times a
    length counter) accepts what the minimal intersection accepts; the dead pairs it
    keeps are gone once it is embedded in an NFA and determinised lazily."""
    from guided.fsm.lazy import LazyDFA
    from guided.fsm.ops import embed, intersect

    da, db = compile_regex(a), compile_regex(b)
    small, big = intersect(da, db), intersect(da, db, minimal=False)
    assert big.num_states >= small.num_states
    nfa = NFA(lazy=True)
    lazy = LazyDFA(nfa, *embed(nfa, big))
    rng = random.Random(7)
    alphabet = "abcqxy09.é_"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        data = text.encode()
        expected = bool(re.fullmatch(a, text) and re.fullmatch(b, text))
        assert big.matches(data) == small.matches(data) == lazy.matches(data) == expected, text
        # Every state the lazy automaton reaches can still accept: a prefix it keeps
        # alive extends to a match.
        state = lazy.step(lazy.start, data)
        assert state < 0 or _can_accept(lazy, state), text


def _can_accept(dfa, state: int) -> bool:
    seen, todo = {state}, [state]
    while todo:
        s = todo.pop()
        if dfa.is_accepting(s):
            return True
        for t in dfa.next_states(s):
            if t >= 0 and t not in seen:
                seen.add(t)
                todo.append(t)
    return False


def test_unminimised_intersection_of_disjoint_languages_is_an_error():
    from guided.fsm.ops import intersect

    with pytest.raises(EmptyLanguageError):
        intersect(compile_regex("a+"), compile_regex("b+"), minimal=False)


@pytest.mark.parametrize("by", ["pair", "level", "compiled"])
def test_products_agree_with_both_patterns_on_random_pairs(by, monkeypatch):
    """``intersect`` / ``union`` / ``difference`` accept exactly the strings the two
    patterns' ``re.fullmatch`` say they should, whether the product is built pair by
    pair (small operands), a level at a time in numpy (large ones), or compiled (with
    numba)."""
    import guided.fsm.ops
    from guided.fsm.kernels import AVAILABLE
    from guided.fsm.ops import difference, intersect, union

    if by == "compiled" and not AVAILABLE:
        pytest.skip("numba is not installed")
    monkeypatch.setattr(guided.fsm.ops, "COMPILED_AVAILABLE", by == "compiled")
    monkeypatch.setattr(guided.fsm.ops, "SMALL_PRODUCT", 10**9 if by == "pair" else 0)

    rng = random.Random(11)
    checked = 0
    for _ in range(120):
        a, b = _random_pattern(rng), _random_pattern(rng)
        try:
            da, db = compile_regex(a), compile_regex(b)
        except EmptyLanguageError:
            continue
        ra, rb = re.compile(a), re.compile(b)
        results = {"and": None, "or": union(da, db), "minus": None, "and_unmin": None}
        for key, op in (("and", lambda: intersect(da, db)), ("minus", lambda: difference(da, db)),
                        ("and_unmin", lambda: intersect(da, db, minimal=False))):
            try:
                results[key] = op()
            except EmptyLanguageError:
                pass  # checked below: then no text may be in the language
        texts = [_random_text(rng, a + b) for _ in range(80)]
        for m in (ra.search(t) for t in texts + [_random_text(rng, b) for _ in range(40)]):
            if m:
                texts.append(m.group())
        for t in texts:
            in_a, in_b, data = bool(ra.fullmatch(t)), bool(rb.fullmatch(t)), t.encode("utf-8")
            expected = {"and": in_a and in_b, "or": in_a or in_b, "minus": in_a and not in_b, "and_unmin": in_a and in_b}
            for key, want in expected.items():
                got = results[key].matches(data) if results[key] is not None else False
                assert got == want, (key, a, b, t)
            checked += 1
    assert checked > 5000


@pytest.mark.parametrize("by", ["stack", "level", "compiled"])
def test_live_states_is_reverse_reachability(by, monkeypatch):
    """``live_states`` and ``co_reachable`` against a fixpoint, searching with a
    Python stack (small automata), a level at a time in numpy (large ones), or
    compiled (``fsm.kernels.reach``, where numba is installed)."""
    import numpy as np

    import guided.fsm.dfa
    from guided.fsm.dfa import co_reachable, live_states
    from guided.fsm.kernels import AVAILABLE

    if by == "compiled" and not AVAILABLE:
        pytest.skip("numba is not installed")
    monkeypatch.setattr(guided.fsm.dfa, "COMPILED_AVAILABLE", by == "compiled")
    monkeypatch.setattr(guided.fsm.dfa, "SMALL_SEARCH_EDGES", 10**9 if by == "stack" else -1)

    rng = np.random.default_rng(3)
    for _ in range(300):
        n, c = int(rng.integers(1, 30)), int(rng.integers(1, 5))
        trans = rng.integers(-1, n, size=(n, c))
        accepting = rng.random(n) < 0.15
        want, changed = accepting.copy(), True
        while changed:
            changed = False
            for s in range(n):
                if not want[s] and any(t >= 0 and want[t] for t in trans[s]):
                    want[s] = changed = True
        assert (live_states(trans, accepting) == want).all()
        src, cls = np.nonzero(trans >= 0)
        assert (co_reachable(src, trans[src, cls], accepting) == want).all()


def test_minimize_cache_returns_the_same_automaton_for_the_same_table():
    """``guided.fsm.dfa.minimize`` caches by content: an equal table gives the cached DFA,
    a table differing in one move or in acceptance gives its own, and both agree
    with ``re.fullmatch``."""
    import numpy as np

    from guided.fsm import dfa as dfa_module
    from guided.fsm import memo
    from guided.fsm.dfa import subset_table

    nfa = NFA()
    start, end = regex_to_nfa(r"(ab|cd)*e", nfa)
    trans, classes, sets = subset_table(nfa, start, {end})
    accepting = np.array([end in s for s in sets], dtype=bool)
    memo.clear()
    first = dfa_module.minimize(trans, classes, accepting)
    assert dfa_module.minimize(trans.copy(), classes.copy(), accepting.copy()) is first
    other_accepting = accepting.copy()
    other_accepting[0] = True  # the empty string too
    other = dfa_module.minimize(trans, classes, other_accepting)
    assert other is not first
    def table_matches(acc, data: bytes) -> bool:  # the unminimised table, stepped
        state = 0
        for b in data:
            state = int(trans[state, classes[b]])
            if state < 0:
                return False
        return bool(acc[state])

    for text in ["e", "abe", "cdabe", "", "ab", "abce", "cdcd"]:
        want = re.fullmatch(r"(ab|cd)*e", text) is not None
        assert first.matches(text.encode()) == want == table_matches(accepting, text.encode()), text
        assert other.matches(text.encode()) == table_matches(other_accepting, text.encode()), text
    assert other.matches(b"") and not first.matches(b"")
    assert memo.info()["entries"] == 2
    assert np.array_equal(first.accepting, dfa_module.minimize(trans, classes, accepting).accepting)


def _random_table(rng: random.Random, n: int, k: int, dead: float):
    """A complete table over ``n`` states and ``k`` classes with a sink row last,
    built from a few "layers" so that many states are equivalent."""
    import numpy as np

    kinds = max(2, n // 6)
    kind = [s if s < kinds else rng.randrange(kinds) for s in range(n)]  # every kind has a state
    by_kind = {}
    for s, c in enumerate(kind):
        by_kind.setdefault(c, []).append(s)
    moves = [[rng.randrange(kinds) if rng.random() > dead else -1 for _ in range(k)] for _ in range(kinds)]
    sink = n
    t = np.full((n + 1, k), sink, dtype=np.int64)
    for s in range(n):
        for c, target_kind in enumerate(moves[kind[s]]):
            if target_kind >= 0:
                t[s, c] = rng.choice(by_kind[target_kind])
    accepting = np.array([kind[s] % 3 == 0 for s in range(n)] + [False])
    return t, accepting, sink


def _same_partition(a, b) -> bool:
    pairs = np.unique(a * (int(b.max()) + 1) + b)
    return len(np.unique(a)) == len(np.unique(b)) == len(pairs)


@pytest.mark.parametrize("seed", range(12))
def test_numpy_refinement_finds_hopcroft_partition(seed):
    """``_moore`` (tables of 8k cells and more) and ``_hopcroft`` (smaller ones) give
    the same partition: random tables with many equivalent states, and long chains
    (a counter: as many rounds as states)."""
    from guided.fsm.dfa import _hopcroft, _moore

    rng = random.Random(seed)
    t, accepting, sink = _random_table(rng, rng.choice([5, 40, 300, 2000]), rng.choice([1, 3, 17]), rng.random() / 2)
    block = _moore(t, accepting, sink)
    assert block is not None and _same_partition(block, _hopcroft(t, accepting, sink))
    counter = compile_regex(r"[a-c]{0,%d}x" % (50 + 30 * seed))
    t = np.vstack([np.where(counter.transitions < 0, counter.num_states, counter.transitions),
                   np.full((1, counter.num_classes), counter.num_states)])
    accepting = np.append(counter.accepting, False)
    assert _same_partition(_moore(t, accepting, counter.num_states), _hopcroft(t, accepting, counter.num_states))


def test_numpy_refinement_hands_over_on_a_hash_collision(monkeypatch):
    """Rows that hash alike but differ are caught: the partition then comes from
    Hopcroft's algorithm, never from merging states that differ."""
    import guided.fsm.dfa
    from guided.fsm.dfa import _hopcroft, _moore, coarsest_partition

    monkeypatch.setattr(guided.fsm.dfa, "_row_weights", lambda k: np.zeros(k, dtype=np.int64))
    monkeypatch.setattr(guided.fsm.dfa, "MOORE_MIN_CELLS", 0)
    t, accepting, sink = _random_table(random.Random(3), 300, 3, 0.2)
    assert _moore(t, accepting, sink) is None
    assert _same_partition(coarsest_partition(t, accepting, sink), _hopcroft(t, accepting, sink))


@pytest.mark.parametrize("pattern", [r"\w{1,40}@[a-z]+\.(com|org)", r"(ab|cd){2,30}", r"[0-9]{3}-[0-9]{4}|x*y"])
def test_minimisation_in_numpy_matches_python(pattern, monkeypatch):
    """Whole regex compiles give the same minimal automaton either way."""
    import guided.fsm.dfa
    import guided.fsm.memo

    guided.fsm.memo.clear()
    monkeypatch.setattr(guided.fsm.dfa, "MOORE_MIN_CELLS", 0)
    by_numpy = compile_regex.__wrapped__(pattern)  # not the cached automaton
    guided.fsm.memo.clear()
    monkeypatch.setattr(guided.fsm.dfa, "MOORE_MIN_CELLS", 10**12)
    by_python = compile_regex.__wrapped__(pattern)
    assert by_numpy.num_states == by_python.num_states
    assert (by_numpy.transitions == by_python.transitions).all()
    assert (by_numpy.byte_to_class == by_python.byte_to_class).all()


@pytest.mark.parametrize("unit", [r"[a-z]", r".", r"(é|\d\d|x)", r"\w"])
@pytest.mark.parametrize("lo, hi", [(0, 0), (0, 1), (2, 2), (1, 6), (0, None), (1, None), (3, None), (4, 40)])
def test_repeat_unit_is_the_minimal_counted_repetition(unit, lo, hi):
    """``repeat_unit`` lays out ``unit{lo,hi}`` directly: the same language and the
    same state count as the subset construction and minimisation of the pattern."""
    from guided.fsm.ops import repeat_unit

    got = repeat_unit(compile_regex(unit), lo, hi)
    want = compile_regex(f"(?:{unit}){{{lo},{'' if hi is None else hi}}}") if hi != 0 else None
    if want is None:
        assert got.num_states == 1 and got.accepting.tolist() == [True]
        return
    assert got.num_states == want.num_states
    rng = random.Random(f"{unit}{lo}{hi}")
    pieces = ["a", "q", "é", "7", "77", "x", "", "\n", "é1"]
    for _ in range(300):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 12)))
        assert got.matches(text.encode()) == want.matches(text.encode()), text


def test_repeat_unit_declines_automata_that_read_on_after_accepting():
    from guided.fsm.ops import repeat_unit

    assert repeat_unit(compile_regex(r"a+"), 1, 3) is None  # accepts, then reads more
    assert repeat_unit(compile_regex(r"a?"), 1, 3) is None  # the start accepts
    assert repeat_unit(compile_regex(r"a"), 3, 2) is None


@pytest.mark.parametrize("pattern", [r"[a-f0-9]{8,12}", r"x(?i:[a-c]){8}y", r"\w{0,10}", r".{9}", r"[^a]{8,}",
                                     r"(ab|[0-9]{10})+", r"é{8,9}?z", r"(?s:.){8}"])
def test_long_counted_runs_of_one_class_agree_with_re(pattern):
    """Runs of one class counted 8 times or more are one DFA laid out directly
    (``repeat_unit``) inside the NFA; the language is the same as ``re``'s."""
    dfa = compile_regex(pattern)
    rng = random.Random(pattern)
    pieces = ["a", "B", "c", "0", "9", "x", "y", "z", "é", "ab", "\n", "_", "-"]
    texts = ["a" * n for n in range(14)] + ["0123456789", "é" * 8 + "z", "xAbCaBcAby", "x" + "a" * 8 + "y"]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randrange(0, 16))) for _ in range(400)]
    for text in texts:
        assert dfa.matches(text.encode()) == bool(re.fullmatch(pattern, text)), text


def test_flags_re_refuses_are_a_regex_error():
    with pytest.raises(UnsupportedRegexFeature, match="LOCALE"):
        compile_regex("a", re.LOCALE)
