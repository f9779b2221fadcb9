"""Deferred NFA fragments: built only when the lazy subset construction reaches them."""

import json
import re

import jsonschema
import pytest

from fsm.lazy import LazyDFA
from fsm.nfa import NFA
from fsm.regex import regex_to_nfa
from grammars.json_schema import OPEN_DEPTH, compile_json_schema


def lazy_dfa(pattern: str) -> LazyDFA:
    nfa = NFA(lazy=True)
    s, e = regex_to_nfa(pattern, nfa)
    return LazyDFA(nfa, s, e)


@pytest.mark.parametrize("pattern", ["a{0,1000}", "(ab|c){70,90}", "x[0-9]{100,}y", "[a-c]{65}"])
def test_large_counted_repetition_agrees_with_re(pattern):
    dfa = lazy_dfa(pattern)
    built_before = len(dfa._nfa)
    for text in ["", "a" * 1000, "a" * 1001, "ab" * 70, "ab" * 69 + "c" * 21, "c" * 91,
                 "x" + "5" * 99 + "y", "x" + "5" * 100 + "y", "x" + "7" * 400 + "y", "abc" * 21 + "ab", "abc" * 22]:
        assert dfa.matches(text.encode()) == bool(re.fullmatch(pattern, text)), (pattern, text)
    assert len(dfa._nfa) > built_before  # the copies were built as the texts reached them


def test_lazy_repetition_builds_only_what_is_visited():
    nfa = NFA(lazy=True)
    s, e = regex_to_nfa("[a-z]{0,65535}", nfa)
    assert len(nfa) < 200  # one copy and a deferred rest, not 65,535 copies
    dfa = LazyDFA(nfa, s, e)
    assert dfa.matches(b"hello")
    assert len(nfa) < 2000


def test_deferred_needs_a_lazy_nfa():
    with pytest.raises(ValueError, match="lazy"):
        NFA().deferred(lambda: None, ())


def test_truncate_drops_an_abandoned_fragment():
    """A fragment given up half-built (conditionals by value, too many copies) leaves
    no states and no deferred builders behind; what was built before still works."""
    nfa = NFA(lazy=True)
    s, e = regex_to_nfa("ab|cd", nfa)
    mark = len(nfa)
    regex_to_nfa("[a-z]{0,65535}", nfa)  # holds a deferred rest
    assert nfa.pending
    nfa.truncate(mark)
    assert len(nfa) == mark and not nfa.pending
    dfa = LazyDFA(nfa, s, e)
    assert dfa.matches(b"cd") and not dfa.matches(b"abc")


def nested(levels: int):
    value = {"leaf": [1, "two", None]}
    for i in range(levels):
        value = {"k%d" % i: [value, {"x": True}]} if i % 2 else {"k%d" % i: value}
    return value


@pytest.mark.parametrize("schema", [{}, True, {"type": "object"}, {"properties": {"a": {"type": "integer"}}}])
def test_open_values_nest_deeply(schema):
    dfa = compile_json_schema(schema, "compact")
    deep = nested(30)
    text = json.dumps(deep, separators=(",", ":")).encode()
    assert jsonschema.validators.validator_for(schema)(schema).is_valid(deep)
    assert dfa.matches(text)
    assert not dfa.matches(text[:-1])
    assert not dfa.matches(text + b"}")


def test_open_depth_is_bounded():
    dfa = compile_json_schema(True, "compact")
    assert dfa.matches(b"[" * OPEN_DEPTH + b"]" * OPEN_DEPTH)
    assert not dfa.matches(b"[" * (OPEN_DEPTH + 1) + b"]" * (OPEN_DEPTH + 1))


def test_huge_max_length_string():
    # Compiles at once: the 65,535 copies are built only as far as a text goes.
    dfa = compile_json_schema({"type": "string", "maxLength": 65535}, "compact")
    assert dfa.matches(b'"' + b"a" * 3000 + b'"')
    assert dfa.matches('"é€😀"'.encode())
    dfa = compile_json_schema({"type": "string", "minLength": 10, "maxLength": 2000}, "compact")
    assert dfa.matches(b'"' + b"a" * 2000 + b'"')
    assert not dfa.matches(b'"' + b"a" * 2001 + b'"')
    assert not dfa.matches(b'"' + b"a" * 9 + b'"')
