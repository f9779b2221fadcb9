"""Regex -> byte-level DFA agrees with ``re.fullmatch`` (the reference)."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fsm import (
    EmptyLanguageError,
    RegexSyntaxError,
    UnsupportedRegexFeature,
    compile_regex,
)

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
        (r"a$b", "anchor $"),
        (r"(?i)abc", "IGNORECASE"),
    ],
)
def test_non_regular_features_are_named(pattern, feature):
    with pytest.raises(UnsupportedRegexFeature, match=re.escape(feature)):
        compile_regex(pattern)


@pytest.mark.parametrize("pattern", [r"[^\s\S]", r"a[^\x00-\U0010ffff]b", r"(?!)"])
def test_empty_language_is_an_error(pattern):
    with pytest.raises((EmptyLanguageError, UnsupportedRegexFeature)):
        compile_regex(pattern)


def test_non_string_pattern():
    with pytest.raises(TypeError):
        compile_regex(b"abc")
