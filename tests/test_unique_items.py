"""``uniqueItems`` over open kinds of items, checked beside the automaton
(``guided.unique_items``): judged as ``jsonschema`` judges them, token by token with a
real tokenizer, and each mask equal to the tokens the matcher accepts."""

from __future__ import annotations

import itertools
import json
import random

import pytest
from json_helpers import reference_validator

import guided
from guided.grammar_matcher import GrammarGuide
from guided.grammars.json_schema.compiler import compile_json_schema
from guided.unique_items import UniqueItemsGuide

STRINGS = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}

CASES = {
    "strings": (STRINGS, [[], ["a"], ["a", "b"], ["a", "a"], ["ab", "a"], ["a", "ab"], ["x", "y", "x"],
                          ["héllo", "hé", "héllo"], ["a\"b", "a\"b"], ["\n", "\t"], [""], ["", ""]]),
    "numbers": ({"type": "array", "items": {"type": "number"}, "uniqueItems": True},
                [[1, 2], [1, 1.0], [1, 10], [10, 1], [-0.5, 0.5], [1e3, 1000], [3, 2, 3]]),
    "mixed": ({"type": "array", "uniqueItems": True},
              [[1, True], [True, True], [None, None], [0, False], ["1", 1], [[1, 2], [1, 2]], [[1, 2], [2, 1]],
               [{"a": 1, "b": 2}, {"b": 2, "a": 1}], [{"a": 1}, {"a": [1]}], [{"a": {"b": [1]}}, {"a": {"b": [1]}}]]),
    "nested": ({"type": "array", "uniqueItems": True, "items": STRINGS},
               [[["a"], ["b"]], [["a", "b"], ["a", "b"]], [["a", "a"]], [["a"], ["a", "b"]], [[], []]]),
    "object_members": ({"type": "object", "properties": {"tags": STRINGS, "free": {"type": "array"}},
                        "additionalProperties": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}},
                       [{"tags": ["a", "b"], "free": [1, 1]}, {"tags": ["a", "a"]}, {"free": ["x", "x"], "n": [1, 2]},
                        {"n": [1, 1]}, {"n": [2], "m": [3, 3]}]),
    "ref_and_allOf": ({"$defs": {"tags": STRINGS},
                       "allOf": [{"type": "object", "properties": {"a": {"$ref": "#/$defs/tags"}}},
                                 {"properties": {"b": {"type": "array", "items": {"$ref": "#/$defs/tags"}}}}]},
                      [{"a": ["x", "y"], "b": [["x"], ["x"]]}, {"a": ["x", "x"]}, {"b": [["x", "y", "x"]]}]),
    "prefix_items": ({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}],
                      "items": {"type": "string"}, "uniqueItems": True},
                     [["a", 1], ["a", 1, "b"], ["a", 1, "a"], ["1", 1]]),
    "large_enum": ({"type": "array", "items": {"enum": [f"v{i}" for i in range(30)]}, "uniqueItems": True},
                   [["v1", "v2"], ["v1", "v1"], ["v29", "v3", "v29"], []]),  # too many used-value sets to track
    "sole_anyOf_branch": ({"type": "object", "properties": {"ids": {"anyOf": [{"type": "string"}, STRINGS]}}},
                          [{"ids": "a"}, {"ids": ["a", "b"]}, {"ids": ["a", "a"]}]),
}


def _tokens(tokenizer, doc) -> list[int]:
    return tokenizer.encode(json.dumps(doc, separators=(",", ":"), ensure_ascii=False), add_special_tokens=False)


def _accepts(guide, tokenizer, doc) -> bool:
    m = guide.matcher()
    return all(m.accept_token(t) for t in _tokens(tokenizer, doc)) and m.accept_token(guide.vocab.eos_token_ids[0])


@pytest.mark.parametrize("name", sorted(CASES))
def test_unique_items_agree_with_jsonschema(name, smollm2_tokenizer, smollm2_vocab):
    schema, docs = CASES[name]
    guide = guided.compile(guided.JsonSchema(schema, whitespace="compact"), smollm2_vocab)
    assert isinstance(guide, UniqueItemsGuide)
    validator = reference_validator(schema)
    verdicts = [validator.is_valid(d) for d in docs]
    assert True in verdicts and False in verdicts  # both kinds are tried
    for doc, valid in zip(docs, verdicts):
        assert _accepts(guide, smollm2_tokenizer, doc) == valid, doc


def test_random_string_arrays_agree_with_jsonschema(smollm2_tokenizer, smollm2_vocab):
    guide = guided.compile(guided.JsonSchema(STRINGS, whitespace="compact"), smollm2_vocab)
    words = ["a", "ab", "b", "a b", "é", "\\", "\"", "the", " the", "x1"]
    rnd = random.Random(7)
    docs = [[rnd.choice(words) for _ in range(rnd.randrange(1, 5))] for _ in range(60)]
    validator = reference_validator(STRINGS)
    assert any(validator.is_valid(d) for d in docs) and not all(validator.is_valid(d) for d in docs)
    for doc in docs:
        assert _accepts(guide, smollm2_tokenizer, doc) == validator.is_valid(doc), doc


@pytest.mark.parametrize("name", ["strings", "mixed", "nested", "object_members"])
def test_masks_hold_exactly_the_tokens_accepted(name, smollm2_tokenizer, smollm2_vocab):
    """At every step of the documents, the allowed tokens are those the base automaton
    allows that the matcher then accepts (a sample of them), and a refused repeat
    is not in the mask."""
    schema, docs = CASES[name]
    guide = guided.compile(guided.JsonSchema(schema, whitespace="compact"), smollm2_vocab)
    rnd = random.Random(3)
    refused_seen = 0
    for doc in docs:
        m = guide.matcher()
        for t in _tokens(smollm2_tokenizer, doc):
            allowed = set(m.allowed_token_ids())
            base = m.base.allowed_token_ids()
            for c in rnd.sample(base, min(150, len(base))) + [t]:
                accepted = m.fork().accept_token(c)
                assert accepted == (c in allowed), (doc, smollm2_tokenizer.decode([c]))
                refused_seen += not accepted
            if not m.accept_token(t):
                break
    assert refused_seen  # some token was refused as a repeat


D4 = "http://json-schema.org/draft-04/schema#"

#: Items whose values are few and known: the automaton tracks the values used.
FINITE = {
    "booleans": ({"type": "boolean"}, [True, False, None]),
    "booleans_or_null": ({"type": ["boolean", "null"]}, [True, False, None, 0]),
    "integer_range": ({"type": "integer", "minimum": 1, "exclusiveMaximum": 4}, [0, 1, 2, 3, 4, 2.0]),
    "draft4_range": ({"$schema": D4, "type": "integer", "minimum": 1, "maximum": 3, "exclusiveMaximum": True},
                     [1, 2, 3, 2.0]),
    "odd_in_range": ({"type": "integer", "minimum": 0, "maximum": 6, "not": {"multipleOf": 2}}, [1, 2, 3, 5]),
    "anyOf_consts": ({"anyOf": [{"const": "a"}, {"enum": ["b", 1]}]}, ["a", "b", 1, "c"]),
    "oneOf_overlap": ({"oneOf": [{"enum": ["a", "b"]}, {"enum": ["b", "c"]}]}, ["a", "b", "c"]),  # "b": both
}


def _walk_never_stuck(guide, rnd, steps=40) -> list[int]:
    """Random allowed tokens from the start: the mask is never empty."""
    m = guide.matcher()
    eos = set(guide.vocab.eos_token_ids)
    out = []
    for _ in range(steps):
        allowed = m.allowed_token_ids()
        assert allowed, guide.vocab.decode(out) if hasattr(guide.vocab, "decode") else out
        t = rnd.choice(allowed)
        if t in eos:
            break
        assert m.accept_token(t)
        out.append(t)
    return out


@pytest.mark.parametrize("name", sorted(FINITE))
def test_few_known_items_are_tracked_by_the_automaton(name, smollm2_tokenizer, smollm2_vocab):
    """Booleans, null, small integer ranges and anyOf / oneOf of constants are
    enumerated: the automaton itself tracks the values used, so a matcher never
    reaches an array whose remaining items are all used up (it refuses the comma)."""
    items, values = FINITE[name]
    schema = {"type": "array", "items": items, "uniqueItems": True}
    if "$schema" in items:
        schema = {"$schema": items["$schema"], **schema, "items": {k: v for k, v in items.items() if k != "$schema"}}
    guide = guided.compile(guided.JsonSchema(schema, whitespace="compact"), smollm2_vocab)
    assert not isinstance(guide, UniqueItemsGuide)
    validator = reference_validator(schema)
    docs = [list(d) for n in range(4) for d in itertools.product(values, repeat=n)]
    assert any(validator.is_valid(d) for d in docs) and not all(validator.is_valid(d) for d in docs)
    for doc in docs:
        assert _accepts(guide, smollm2_tokenizer, doc) == validator.is_valid(doc), doc
    rnd = random.Random(11)
    for _ in range(20):
        _walk_never_stuck(guide, rnd)


def test_enum_spellings_follow_the_draft(smollm2_tokenizer, smollm2_vocab):
    """``1.0`` equals ``1`` for ``enum``, but draft 4's ``integer`` refuses it."""
    for schema, doc, valid in [({"$schema": D4, "type": "integer", "enum": [1, 2]}, 1.0, False),
                               ({"$schema": D4, "type": "integer", "enum": [1.0]}, 1, True),
                               ({"type": "integer", "enum": [1, 2]}, 1.0, True),
                               ({"$schema": D4, "properties": {"a": {"type": "integer", "const": 2}}}, {"a": 2.0}, False)]:
        assert reference_validator(schema).is_valid(doc) == valid
        guide = guided.compile(guided.JsonSchema(schema, whitespace="compact"), smollm2_vocab)
        assert _accepts(guide, smollm2_tokenizer, doc) == valid, (schema, doc)


def test_rollback_and_fork_restore_the_items_seen(smollm2_tokenizer, smollm2_vocab):
    guide = guided.compile(guided.JsonSchema(STRINGS, whitespace="compact"), smollm2_vocab)
    first = smollm2_tokenizer.encode('["abc"', add_special_tokens=False)
    m = guide.matcher()
    assert m.accept_tokens(first)
    branch = m.fork()
    again = smollm2_tokenizer.encode(',"abc"]', add_special_tokens=False)
    assert not m.accept_tokens(again) and m.num_tokens == len(first)  # undone as a whole
    other = smollm2_tokenizer.encode(',"abd"]', add_special_tokens=False)
    assert m.accept_tokens(other) and m.is_accepting()
    m.rollback(len(other))
    assert not m.accept_tokens(again)
    assert not branch.accept_tokens(again) and branch.accept_tokens(other)


def test_unique_items_inside_a_recursive_schema(smollm2_tokenizer, smollm2_vocab):
    tree = {"type": "object", "properties": {"tags": STRINGS, "kids": {"type": "array", "items": {"$ref": "#"}}}}
    guide = guided.compile(guided.JsonSchema(tree, whitespace="compact"), smollm2_vocab)
    assert isinstance(guide, UniqueItemsGuide) and isinstance(guide.base, GrammarGuide)
    validator = reference_validator(tree)
    for doc in [{"tags": ["a"], "kids": [{"tags": ["a", "b"]}]}, {"kids": [{"kids": [{"tags": ["b", "b"]}]}]},
                {"tags": ["x", "x"]}, {"kids": [{"tags": ["a"]}, {"tags": ["a"]}]}]:
        assert _accepts(guide, smollm2_tokenizer, doc) == validator.is_valid(doc), doc


def test_generation_never_repeats_an_item(tiny_model, smollm2_tokenizer):
    """A random model writes items of few letters: repeats would be likely."""
    schema = {"type": "array", "items": {"type": "string", "maxLength": 3}, "minItems": 3, "maxItems": 6,
              "uniqueItems": True}
    finished = 0
    for seed in range(4):
        out = guided.generate(tiny_model, smollm2_tokenizer, "tags:", guided.JsonSchema(schema, whitespace="compact"),
                              max_new_tokens=80, temperature=1.0, seed=seed)
        if out.finish_reason != "length":
            finished += 1
            assert reference_validator(schema).is_valid(out.value), out.text
    assert finished


@pytest.mark.parametrize("schema, pointer", [
    ({"anyOf": [STRINGS, {"type": "array", "maxItems": 2}]}, "#/anyOf/0/uniqueItems"),
    ({"type": "object", "properties": {"a": {"not": {"type": "null"}, "oneOf": [STRINGS, {"type": "array"}]}}},
     "#/properties/a/oneOf/0/uniqueItems"),
    ({"type": "array", "items": {"type": "string"}, "uniqueItems": True, "contains": {"const": "a"}}, "#/uniqueItems"),
])
def test_arrays_that_may_not_apply_stay_refused(schema, pointer, smollm2_vocab):
    with pytest.raises(guided.UnsupportedSchemaError, match="beside the automaton") as e:
        guided.compile(guided.JsonSchema(schema, whitespace="compact"), smollm2_vocab)
    assert pointer in str(e.value)


def test_the_automaton_alone_refuses_what_it_cannot_check():
    """``compile_json_schema`` without the sites would accept repeats: it refuses."""
    with pytest.raises(guided.UnsupportedSchemaError, match="guided.compile checks"):
        compile_json_schema(STRINGS, "compact")
    dfa, sites = compile_json_schema(STRINGS, "compact", with_unique_sites=True)
    assert dfa.matches(b'["a","a"]') and sites.unique(sites.open(sites.start(), "array"))


def test_every_pair_order_of_three_values(smollm2_tokenizer, smollm2_vocab):
    schema = {"type": "array", "items": {"type": ["string", "integer", "object"]}, "uniqueItems": True}
    guide = guided.compile(guided.JsonSchema(schema, whitespace="flexible"), smollm2_vocab)
    values = ["1", 1, {"k": "1"}]
    validator = reference_validator(schema)
    for doc in itertools.product(values, repeat=2):
        text = json.dumps(list(doc))  # ", " between items: flexible whitespace
        m = guide.matcher()
        ok = all(m.accept_token(t) for t in smollm2_tokenizer.encode(text, add_special_tokens=False))
        assert ok == validator.is_valid(list(doc)), text


def test_key_patterns_python_cannot_read_are_a_clear_error(smollm2_vocab):
    schema = {"type": "object", "patternProperties": {"^(?<x>a)$": STRINGS}}  # an ECMA named group
    with pytest.raises(guided.UnsupportedSchemaError, match="invalid regex|re reads"):
        guided.compile(guided.JsonSchema(schema, whitespace="compact"), smollm2_vocab)


def test_a_dead_end_of_repeats_allows_eos_alone():
    """After ``[9,9`` every way on repeats ``9`` (the tracker sees an item only once it
    is complete): the mask allows EOS alone, as at any dead end, and EOS is refused."""
    vocab = guided.Vocabulary([bytes([b]) for b in range(256)] + [None], [256])
    schema = {"type": "array", "items": {"type": "integer", "maximum": 9}, "uniqueItems": True}
    m = guided.compile(guided.JsonSchema(schema, whitespace="compact"), vocab).matcher()
    assert m.accept_tokens(list(b"[9,9"))
    assert m.allowed_token_ids() == [256]
    assert not m.accept_token(256)


def test_a_string_item_after_a_null_item_gets_its_mask():
    """The repeats a string item could close are looked up among earlier items, which
    may be null (a one-element key)."""
    vocab = guided.Vocabulary([bytes([b]) for b in range(256)] + [None], [256])
    schema = {"type": "array", "items": {"type": ["string", "null"]}, "uniqueItems": True}
    m = guided.compile(guided.JsonSchema(schema, whitespace="compact"), vocab).matcher()
    assert not m.accept_tokens(list(b'[null,"a",null'))
    assert m.accept_tokens(list(b'[null,"a","'))
    allowed = m.allowed_token_ids()
    assert ord("b") in allowed and ord('"') in allowed  # "" is new; "a" only if not closed
    assert m.accept_tokens(list(b'a')) and ord('"') not in m.allowed_token_ids()
