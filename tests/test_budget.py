"""Budget-aware masks: distances in tokens against a breadth-first search over the
whole vocabulary, outputs that always finish within their budget, the error below
the shortest output, and the same masks through every way a loop asks for them."""

from __future__ import annotations

import json
import re
from collections import deque

import jsonschema
import numpy as np
import pytest
import torch

import guided
from guided.fsm.distance import INFINITE, fewest_tokens

try:
    from tests import tokenizer_zoo
except ImportError:  # tests/ itself on sys.path
    import tokenizer_zoo

SMALL_SPECS = [
    guided.Regex(r"(yes|no)"),
    guided.Regex(r"[0-9]{3}-[a-z]{2,5}"),
    guided.Regex(r"a{5,9}b?"),
    guided.Regex(r"(ab|cde)+x"),
    guided.JsonSchema({"type": "object", "properties": {"name": {"type": "string", "maxLength": 4},
                                                        "n": {"type": "integer"}},
                       "required": ["name", "n"], "additionalProperties": False}, whitespace="compact"),
    guided.JsonSchema({"type": "array", "items": {"enum": ["red", "green", 3]}, "minItems": 2, "maxItems": 3},
                      whitespace="compact"),
]

OPEN_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"},
                                                "tags": {"type": "array", "items": {"type": "string"}}},
               "required": ["name"]}


def token_graph_distances(guide) -> dict[int, int]:
    """Fewest tokens to acceptance from every state the start reaches, by stepping
    every token of the vocabulary from every state (the reference)."""
    tokens = [b for b in guide.vocab.token_bytes if b]
    dfa = guide.dfa
    succ, seen, queue = {}, {dfa.start}, deque([dfa.start])
    while queue:
        s = queue.popleft()
        succ[s] = {t for t in (dfa.step(s, b) for b in tokens) if t >= 0}
        for t in succ[s] - seen:
            seen.add(t)
            queue.append(t)
    dist = {s: 0 if dfa.is_accepting(s) else INFINITE for s in seen}
    changed = True
    while changed:
        changed = False
        for s in seen:
            best = min((dist[t] + 1 for t in succ[s]), default=INFINITE)
            if best < dist[s]:
                dist[s], changed = best, True
    return dist


@pytest.fixture(scope="module", params=["smollm2", "mistral"])
def family_vocab(request):
    """The vocabularies of two tokenizer families: byte-level BPE and SentencePiece."""
    return guided.Vocabulary.from_tokenizer(getattr(tokenizer_zoo, request.param)())


@pytest.mark.parametrize("spec", SMALL_SPECS, ids=lambda s: str(s)[:40])
def test_distances_equal_a_search_over_the_whole_vocabulary(spec, family_vocab):
    guide = guided.compile(spec, family_vocab)
    distances = guide.distances()
    assert distances.exact
    expected = token_graph_distances(guide)
    assert {s: distances.distance(s) for s in expected} == expected
    assert guide.min_tokens() == expected[guide.dfa.start] + 1


def test_a_bound_is_a_real_token_path(smollm2_vocab):
    """An open schema (deferred parts) gets bounds; each is the length of a path
    whose every step the masks allow and which ends in an accepting state."""
    guide = guided.compile(guided.JsonSchema(OPEN_SCHEMA), smollm2_vocab)
    d = guide.distances()
    assert not d.exact
    m = guide.matcher()
    # Greedy descent: at each step some allowed token leads one closer.
    for _ in range(d.distance(guide.dfa.start)):
        here = d.distance(m.state)
        ids = np.array(m.allowed_token_ids())
        ids = ids[ids != 2]
        nxt = [(d.distance(guide.index.next_state(m.state, int(t))), int(t)) for t in ids]
        best, token = min(nxt)
        assert best <= here - 1
        assert m.accept_token(token)
    assert m.is_accepting()


def test_fewest_tokens_splits_into_the_fewest_pieces():
    strings = frozenset({b"a", b"b", b"c", b"ab", b"bc", b"abc"})
    assert fewest_tokens(b"abcabc", strings, 3) == [0, 3, 6]
    assert fewest_tokens(b"abd", strings, 3) is None


@pytest.mark.parametrize("kind", ["regex", "closed_schema", "open_schema"])
def test_every_output_is_complete_and_valid_within_its_budget(kind, tiny_model, smollm2_tokenizer):
    spec, check = {
        "regex": (guided.Regex(r"[a-z]+(,[a-z]+)*"), lambda text: re.fullmatch(r"[a-z]+(,[a-z]+)*", text)),
        "closed_schema": (SMALL_SPECS[4], lambda text: jsonschema.validate(json.loads(text), SMALL_SPECS[4].schema)
                          or True),
        "open_schema": (guided.JsonSchema(OPEN_SCHEMA),
                        lambda text: jsonschema.validate(json.loads(text), OPEN_SCHEMA) or True),
    }[kind]
    guide = guided.compile(spec, smollm2_tokenizer)
    shortest = guide.min_tokens()
    for budget in (shortest, shortest + 2, shortest + 7):
        for seed in range(100):
            r = guided.generate(tiny_model, smollm2_tokenizer, [1, 2, 3], guide, max_new_tokens=budget,
                                temperature=1.0, seed=seed)
            assert r.finish_reason in ("eos", "complete"), (budget, seed, r.text)
            assert len(r.token_ids) + (r.finish_reason == "eos") <= budget
            assert check(r.text), (budget, seed, r.text)


def test_without_a_budget_outputs_are_cut(tiny_model, smollm2_tokenizer):
    """The same loop with budget_aware=False: the tiny model runs out of tokens."""
    guide = guided.compile(guided.JsonSchema(OPEN_SCHEMA), smollm2_tokenizer)
    cut = sum(guided.generate(tiny_model, smollm2_tokenizer, [1, 2, 3], guide, max_new_tokens=guide.min_tokens() + 2,
                              temperature=1.0, seed=seed, budget_aware=False).finish_reason == "length"
              for seed in range(20))
    assert cut > 10


def test_below_the_shortest_output_is_a_clear_error(tiny_model, smollm2_tokenizer):
    guide = guided.compile(guided.Regex(r"[0-9]{3}-[a-z]{2,5}"), smollm2_tokenizer)
    shortest = guide.min_tokens()
    with pytest.raises(guided.TokenBudgetError, match=f"takes {shortest} tokens, EOS included") as err:
        guided.generate(tiny_model, smollm2_tokenizer, [1, 2, 3], guide, max_new_tokens=shortest - 1)
    assert (err.value.needed, err.value.budget) == (shortest, shortest - 1)
    with pytest.raises(guided.TokenBudgetError):
        guided.LogitsProcessor(guide, max_new_tokens=shortest - 1)
    # Off: the old behaviour, an unfinished output.
    r = guided.generate(tiny_model, smollm2_tokenizer, [1, 2, 3], guide, max_new_tokens=shortest - 1,
                        budget_aware=False)
    assert r.finish_reason == "length"


def test_hugging_face_generate_finishes_within_max_new_tokens(tiny_model, smollm2_tokenizer):
    guide = guided.compile(guided.JsonSchema(OPEN_SCHEMA), smollm2_tokenizer)
    budget = guide.min_tokens() + 3
    processor = guided.LogitsProcessor(guide, max_new_tokens=budget)
    torch.manual_seed(0)
    prompt = torch.tensor([[1, 2, 3]] * 4)
    out = tiny_model.generate(prompt, attention_mask=torch.ones_like(prompt), logits_processor=[processor],
                              max_new_tokens=budget, do_sample=True, pad_token_id=2, eos_token_id=2)
    for row in out[:, 3:].tolist():
        assert 2 in row, row  # EOS came by the budget
        text = smollm2_tokenizer.decode(row[: row.index(2)])
        jsonschema.validate(json.loads(text), OPEN_SCHEMA)


def test_the_batch_fill_gives_each_matchers_budget_mask(smollm2_vocab, smollm2_tokenizer):
    guide = guided.compile(SMALL_SPECS[1], smollm2_vocab)
    matchers = [guide.matcher() for _ in range(4)]
    for m, text in zip(matchers, ["", "12", "123-", "123-ab"]):
        assert m.accept_tokens(smollm2_tokenizer.encode(text, add_special_tokens=False))
    remaining = [6, 3, 2, None]
    expected = guided.allocate_token_bitmask(4, guide.vocab_size)
    for i, (m, n) in enumerate(zip(matchers, remaining)):
        m.fill_next_token_bitmask(expected, i, n)
    for _ in range(2):  # the second time from the kept rows
        got = guided.allocate_token_bitmask(4, guide.vocab_size)
        guided.fill_next_token_bitmasks(matchers, got, remaining=remaining)
        assert torch.equal(got, expected)
    # A budget that binds takes tokens away: at remaining 2 after "123-", one token
    # of 2-5 letters and EOS; a single letter (which needs another) is gone.
    plain = guided.allocate_token_bitmask(1, guide.vocab_size)
    matchers[2].fill_next_token_bitmask(plain, 0)
    one_letter = smollm2_tokenizer.convert_tokens_to_ids("a")
    assert allows(plain[0], one_letter) and not allows(expected[2], one_letter)


def allows(row: torch.Tensor, token: int) -> bool:
    return bool((int(row[token // 32]) >> (token % 32)) & 1)


def test_guides_without_budget_masks_refuse_remaining(smollm2_vocab, tiny_model, smollm2_tokenizer):
    guide = guided.compile(guided.Grammar('start: "a" "b"'), smollm2_vocab)
    with pytest.raises(ValueError, match="not for GrammarGuide"):
        guide.matcher().fill_next_token_bitmask(guided.allocate_token_bitmask(1, guide.vocab_size), 0, 5)
    with pytest.raises(ValueError, match="not for GrammarGuide"):
        guided.generate(tiny_model, smollm2_tokenizer, [1, 2, 3], guide, max_new_tokens=5, budget_aware=True)
    # The default leaves them as they were.
    r = guided.generate(tiny_model, smollm2_tokenizer, [1, 2, 3], guide, max_new_tokens=5)
    assert r.text == "ab"
