"""Assertions an automaton takes: lookaheads right after a pattern's leading ``^``,
and ``$`` / ``\\Z`` away from its end. ``compile_regex`` agrees with ``re.fullmatch``
and a JSON Schema ``pattern`` with ``re.search`` (as ``jsonschema`` runs it),
whichever escapes spell the strings; lookaheads elsewhere stay refused."""

from __future__ import annotations

import json
import random
import re

import pytest

from guided.fsm import UnsupportedRegexFeature, compile_regex
from guided.fsm.regex import leading_lookaheads
from guided.grammars.json_schema.compiler import compile_json_schema

# Shapes from MaskBench's JSON Schema Store schemas (reserved names, prefixes, paths).
PATTERNS = [
    r"^(?!@@)[@a-zA-Z0-9_-]+$",
    r"^(?!org\.bukkit\.)([a-zA-Z_$][a-zA-Z\d_$]*\.)*[a-zA-Z_$][a-zA-Z\d_$]*$",
    r"^(?=[^=]+$)(?!\s+$)(.|\n)+$",
    r"^(?!tag|category)$",
    r"^(?![i|I][o|O][b|B])",
    r"^(?!^lucene\.|builtin\.).*",
    r"^(?!.*(\{Trig\}|[\"<>*?:/\\])).*\.[bB][lL][fF]$",
    r"^(?!pattern$).*$",
    r"^(?!.*\/)^(.*[^.]+.*)$",
    r"^(?![)\]])[)(\]]+",
    r"^(?=.{2,4}$)(?!a)[a-z]+",
]
ALPHABET = list("abgtcmoe@./= \n\"é)](Ii") + ["tag", "category", "iob", "IoB", "lucene.", "builtin.", "pattern",
                                             "@@", "org.bukkit.", ".blf", "x.BLF", "{Trig}"]


def _strings(seed: str, n: int = 1500, alphabet=ALPHABET, longest: int = 6) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, longest))) for _ in range(n)]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_leading_lookaheads_agree_with_re_fullmatch(pattern):
    dfa = compile_regex(pattern)
    strings = _strings(pattern)
    verdicts = [bool(re.fullmatch(pattern, s)) for s in strings]
    assert any(verdicts) and not all(verdicts)
    for s, expected in zip(strings, verdicts):
        assert dfa.matches(s.encode()) == expected, repr(s)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_leading_lookaheads_in_json_schema_patterns_agree_with_re_search(pattern):
    dfa = compile_json_schema({"type": "string", "pattern": pattern}, "compact")
    for s in _strings(pattern, 600):
        expected = bool(re.search(pattern, s))
        text = json.dumps(s, ensure_ascii=False)
        for spelling in (text, text.replace("/", "\\/")):  # "/" and "\/" alike
            assert dfa.matches(spelling.encode()) == expected, spelling


def test_lookaheads_are_split_where_the_parser_splits_them():
    assert leading_lookaheads(r"^(?![\])])[a)]+$") == (r"^[a)]+$", [(False, r"[\])]")])
    assert leading_lookaheads(r"^(?=a)b|c") is None  # the lookahead belongs to one alternative only
    assert leading_lookaheads(r"^(?=a)b", re.MULTILINE) is None  # ^ also after newlines
    assert leading_lookaheads(r"a(?=b)") is None


@pytest.mark.parametrize("pattern", [r"a(?!b)", r"^((?!mode).)*$", r"^a(?=b)", r"^(?=a)b|c(?!d)"])
def test_lookaheads_elsewhere_are_refused_with_where_they_are_taken(pattern):
    with pytest.raises(UnsupportedRegexFeature, match=r"only right after the pattern's leading \^"):
        compile_regex(pattern)


def test_a_lookahead_that_leaves_nothing_is_an_empty_language():
    with pytest.raises(Exception, match="matches no string"):
        compile_regex(r"^(?!a)a$")


# "$" holds at the text's end and just before a final newline; "\Z" only at the end.
END_ANCHORS = [
    r"^(\/?((\.{2})|([a-z0-9\-]*))($|\/))*$",  # MaskBench: path segments, each ending in "/" or the end
    r"^tape\d+(\.side[A-Z](\.part\d+){0,1}){0,1}$(\.alt\d+){0,1}",
    r"^([^,]+(,|$)){3,}$",
    r"(a$|b)c?",
    r"a$\n",
    r"a(\Z|b)",
    r"(a$|\n)+",
    r"x(a$|b)y?",
]
END_ALPHABET = ["a", "b", "c", "x", "y", "/", ".", "..", "-", "z", ",", "\n", "tape1", ".sideA", ".part2", ".alt3",
                "$", "é"]


@pytest.mark.parametrize("pattern", END_ANCHORS)
def test_end_anchors_inside_a_pattern_agree_with_re(pattern):
    dfa = compile_regex(pattern)
    schema_dfa = compile_json_schema({"type": "string", "pattern": pattern}, "compact")
    strings = _strings(pattern, 3000, END_ALPHABET, 5)
    found = [bool(re.search(pattern, s)) for s in strings]
    assert any(found) and not all(found)
    for s, searched in zip(strings, found):
        assert dfa.matches(s.encode()) == bool(re.fullmatch(pattern, s)), repr(s)
        assert schema_dfa.matches(json.dumps(s, ensure_ascii=False).encode()) == searched, repr(s)
    # the final newline case, for each pattern: "$" before it, and the text read on or left
    for s in ("a\n", "ba\n", "xa\n", "a/\n", "tape1\n", "a,b,c\n"):
        assert dfa.matches(s.encode()) == bool(re.fullmatch(pattern, s)), repr(s)
        assert schema_dfa.matches(json.dumps(s).encode()) == bool(re.search(pattern, s)), repr(s)


def test_an_end_anchor_before_text_leaves_nothing():
    with pytest.raises(Exception, match="matches no string"):
        compile_regex(r"a$b")
