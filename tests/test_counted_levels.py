"""Counted levels (``fsm.levels``): a pattern under a length bound built a few
characters at a time, for string bodies past the product limit."""

import itertools
import json
import random
import re

import jsonschema
import numpy as np
import pytest

import guided
from guided.errors import EmptyLanguageError
from guided.fsm import compile_regex
from guided.fsm.index import TokenIndex
from guided.fsm.lazy import LazyDFA
from guided.fsm.levels import CountedLevels
from guided.fsm.nfa import NFA
from guided.grammars.json_schema.compiler import compile_json_schema

BOUNDS = [(0, 0), (0, 3), (2, 5), (3, None), (0, None), (5, 7), (1, 40)]


def levels_dfa(pattern: str, lo: int, hi, chunk: int) -> LazyDFA:
    q = compile_regex(pattern)
    nfa = NFA(lazy=True)
    s, e = CountedLevels(q, np.ones(q.num_states, dtype=bool), lo, hi, chunk).fragment(nfa)
    return LazyDFA(nfa, s, e)


def in_bounds(text: str, lo: int, hi) -> bool:
    return lo <= len(text) and (hi is None or len(text) <= hi)


@pytest.mark.parametrize("pattern", [r"[ab]*", r"(ab|ba)*c?", r"a*b+a*", r"(a|bc)+"])
@pytest.mark.parametrize("chunk", [1, 2, 16])
def test_levels_accept_what_re_accepts_within_the_bounds(pattern, chunk):
    rng = random.Random(7)
    for lo, hi in BOUNDS:
        try:
            dfa = levels_dfa(pattern, lo, hi, chunk)
        except EmptyLanguageError:
            # Only where no matching string has a length in the bounds.
            assert not any(re.fullmatch(pattern, "".join(t)) for n in range(lo, (hi or lo) + 1)
                           for t in itertools.product("abc", repeat=n))
            continue
        for _ in range(300):
            text = "".join(rng.choice("abc") for _ in range(rng.randint(0, 45)))
            want = re.fullmatch(pattern, text) is not None and in_bounds(text, lo, hi)
            assert dfa.matches(text.encode()) == want, (pattern, lo, hi, text)


@pytest.mark.parametrize("pattern", [r"(ab|ba)*c?", r"a*b+a*", r"(aa|b)*"])
def test_a_prefix_stays_alive_exactly_when_it_can_still_be_finished(pattern):
    # The matcher contract: a live state is a prefix of some accepted text.
    for lo, hi in [(0, 4), (3, 6), (5, 7), (2, None)]:
        dfa = levels_dfa(pattern, lo, hi, 2)
        top = hi if hi is not None else lo + 4
        for n in range(top + 1):
            for prefix in map("".join, itertools.product("abc", repeat=n)):
                finishable = any(re.fullmatch(pattern, prefix + "".join(w)) and in_bounds(prefix + "".join(w), lo, hi)
                                 for k in range((top - n if hi is not None else 4) + 1) for w in itertools.product("abc", repeat=k))
                alive = dfa.step(0, prefix.encode()) >= 0
                assert alive == finishable, (pattern, lo, hi, prefix)


def test_bounds_no_string_meets_are_refused():
    q = compile_regex(r"(abc)+")
    with pytest.raises(EmptyLanguageError):
        CountedLevels(q, np.ones(q.num_states, dtype=bool), 4, 5)


# The schema that needed them (MaskBench Github_medium o63935): a Unicode word class
# under maxLength 1024 is a product past 200,000 states built whole.
FILE_NAME = {"type": "string", "pattern": r"^[\w /-]+\.[0-9a-zA-Z]+$", "minLength": 1, "maxLength": 1024}


def test_a_pattern_under_a_long_max_length_compiles_and_agrees_with_jsonschema():
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": FILE_NAME, "maxItems": 4},
                                                "b": {"type": "integer"}},
              "required": ["a", "b"], "additionalProperties": False}
    dfa = compile_json_schema(schema, "compact")
    names = ["x.y", "a b/c-d.mp4", "é" * 1020 + ".mp4", "é" * 1021 + ".mp4", "a" * 1022 + ".b", "a" * 1023 + ".b",
             "no dot", ".x", "a.", "日本語 ファイル.txt", "a.b.c", "tab\t.x"]
    for items in [[n] for n in names] + [names[:2], [names[0], names[2], names[1]], [names[1], names[6]]]:
        for b in (1, "1"):
            doc = {"a": items, "b": b}
            text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
            want = jsonschema.Draft202012Validator(schema).is_valid(doc)
            assert dfa.matches(text.encode()) == want, text[:80]


def test_masks_in_a_long_counted_string_are_those_computed_afresh(monkeypatch, smollm2_tokenizer, smollm2_vocab):
    # Levels far from the bounds share rows (TokenIndex._row_from_twin): every mask
    # along a long string must be the one a walk from that very state gives.
    schema = {"type": "array", "items": FILE_NAME}
    text = json.dumps([" ".join(["word"] * 150) + ".txt", "a" * 1000 + "é" * 20 + ".x"], ensure_ascii=False,
                      separators=(",", ":"))
    tokens = smollm2_tokenizer.encode(text, add_special_tokens=False)

    def masks() -> list:
        guided.compiler._cache.clear()
        m = guided.compile(guided.JsonSchema(schema, whitespace="compact"), smollm2_vocab).matcher()
        got = []
        for t in tokens + [smollm2_vocab.eos_token_ids[0]]:
            bits = guided.allocate_token_bitmask(1, smollm2_vocab.size)
            m.fill_next_token_bitmask(bits, 0)
            got.append(bits.clone())
            assert m.accept_token(t)
        return got

    aliased = []
    alias = TokenIndex._row_from_twin
    monkeypatch.setattr(TokenIndex, "_row_from_twin", lambda self, state: aliased.append(alias(self, state)) or aliased[-1])
    shared = masks()
    assert sum(aliased) > 100  # most masks inside the strings took an earlier row
    monkeypatch.setattr(TokenIndex, "_row_from_twin", lambda self, state: False)
    fresh = masks()
    assert all(bool((a == b).all()) for a, b in zip(shared, fresh))


def test_the_twin_lookahead_is_the_longest_token(smollm2_vocab):
    # A twin must take the same tokens as far as the longest one reaches: the
    # index reads that length off the vocabulary's trie.
    index = TokenIndex(compile_regex(r"[a-z]{0,300}"), smollm2_vocab)
    assert index._longest_token == max(len(b) for b in smollm2_vocab.token_bytes if b)


@pytest.mark.parametrize("compiled", [False, True])
def test_a_level_far_from_the_bounds_has_a_twin_that_takes_the_same_texts(compiled):
    # LazyDFA.mask_twin: the state of the same pattern state in the level-free
    # shadow, which the token index walks instead of each level's new state.
    q = compile_regex(r"(ab|b)*")
    nfa = NFA(lazy=True)
    s, e = CountedLevels(q, np.ones(q.num_states, dtype=bool), 2, 60).fragment(nfa)
    close = nfa.byte_string(b"!")
    nfa.epsilon(e, close[0])
    dfa = LazyDFA(nfa, s, close[1], compiled=compiled)
    texts = ["".join(w) for k in range(5) for w in itertools.product("ab!", repeat=k)]
    for prefix, has_twin in [("ab" * 10, True), ("b" * 41, True), ("b" * 57, False), ("b", False)]:
        state = dfa.step(0, prefix.encode())
        twin = dfa.mask_twin(state, 4)
        assert (twin is not None) == has_twin, prefix
        if twin is not None:
            assert twin != state
            for w in texts:
                assert (dfa.step(state, w.encode()) >= 0) == (dfa.step(twin, w.encode()) >= 0), (prefix, w)


def test_levelled_strings_in_a_recursive_schema_agree_with_jsonschema(smollm2_tokenizer, smollm2_vocab):
    # Recursive schemas compile through the grammar engine, whose terminals hold
    # the levels too.
    schema = {"$defs": {"node": {"type": "object", "properties": {
        "name": FILE_NAME, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["name"]}},
        "$ref": "#/$defs/node"}
    compiled = guided.compile(guided.JsonSchema(schema, whitespace="compact"), smollm2_vocab)
    bits = guided.allocate_token_bitmask(1, smollm2_vocab.size)
    docs = [{"name": "a.b"}, {"name": "a b.txt", "kids": [{"name": "x" * 1000 + ".y"}, {"name": "c.d", "kids": []}]},
            {"name": "nodot"}, {"name": "x" * 1030 + ".y"}, {"name": "a.b", "kids": [{"name": "é" * 1022 + ".y"}]}]
    for doc in docs:
        text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
        m = compiled.matcher()
        accepted = True
        for t in smollm2_tokenizer.encode(text, add_special_tokens=False) + [smollm2_vocab.eos_token_ids[0]]:
            m.fill_next_token_bitmask(bits, 0)
            if not (int(bits[0, t >> 5]) >> (t & 31)) & 1 or not m.accept_token(t):
                accepted = False
                break
        assert accepted == jsonschema.Draft202012Validator(schema).is_valid(doc), text[:60]
