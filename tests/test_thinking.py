"""Think, then answer (``guided.AfterThinking``): the thinking budget, every spec kind
after it, rollback and fork, speculative decoding and the watermark."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

import guided
from guided.decoding.speculative import DraftModel
from guided.watermark import WatermarkDetector, WatermarkLogitsProcessor

INTEGER = {"type": "integer", "minimum": 0, "maximum": 999}
SPECS = {
    "regex": (guided.Regex(r"(yes|no)\."), lambda a: re.fullmatch(r"(yes|no)\.", a)),
    "json": (guided.JsonSchema(INTEGER), lambda a: jsonschema.validate(json.loads(a), INTEGER) is None),
    "grammar": (guided.Grammar.from_name("arithmetic"),
                lambda a: guided.Grammar.from_name("arithmetic").parse(a) is not None),
}


@pytest.mark.parametrize("kind", sorted(SPECS))
@pytest.mark.parametrize("budget", [0, 6, 20])
def test_the_end_comes_by_the_budget_and_the_answer_satisfies_the_spec(kind, budget, tiny_model,
                                                                        smollm2_tokenizer):
    inner, valid = SPECS[kind]
    spec = guided.AfterThinking(inner, max_thinking_tokens=budget)
    for seed in range(3):
        r = guided.generate(tiny_model, smollm2_tokenizer, "Think, then answer.", spec, max_new_tokens=60,
                            temperature=1.0, seed=seed)
        assert r.text.startswith("<think>")
        # Past the budget every token spells at least a byte of what is left of
        # "<think></think>" (a forced end may also finish a character first: one more).
        closed = smollm2_tokenizer.decode(r.token_ids[: budget + len("<think></think>") + 1])
        assert "</think>" in closed, r.text
        assert r.reasoning is not None and "</think>" not in r.reasoning
        if r.finish_reason != "length":
            assert valid(r.text.split("</think>", 1)[1]), r.text


def test_value_and_reasoning_are_split(tiny_model, smollm2_tokenizer):
    spec = guided.AfterThinking(guided.JsonSchema(INTEGER), max_thinking_tokens=4)
    r = guided.generate(tiny_model, smollm2_tokenizer, "A number.", spec, max_new_tokens=40)
    assert r.finish_reason in ("eos", "complete")
    answer = r.text.split("</think>", 1)[1]
    assert r.value == json.loads(answer) and r.text == f"<think>{r.reasoning}</think>{answer}"


def test_without_a_start_the_block_is_already_open(smollm2_vocab, smollm2_tokenizer):
    guide = guided.compile(guided.AfterThinking(guided.Regex("ok"), start=""), smollm2_vocab)
    m = guide.matcher()
    assert m.accept_tokens(smollm2_tokenizer.encode("plan</think>ok", add_special_tokens=False))
    assert m.is_accepting()
    m = guide.matcher()
    assert not m.accept_tokens(smollm2_tokenizer.encode("plan</think>no", add_special_tokens=False))


def test_rollback_and_fork_give_the_masks_of_a_fresh_matcher(smollm2_vocab, smollm2_tokenizer):
    guide = guided.compile(guided.AfterThinking(guided.JsonSchema(INTEGER), max_thinking_tokens=5), smollm2_vocab)
    ids = smollm2_tokenizer.encode("<think>a b c</think>123", add_special_tokens=False)
    m = guide.matcher()
    assert m.accept_tokens(ids)
    for cut in range(len(ids), -1, -1):
        fresh = guide.matcher()
        assert fresh.accept_tokens(ids[:cut])
        twin = m.fork()
        assert m.allowed_token_ids() == fresh.allowed_token_ids() == twin.allowed_token_ids(), cut
        assert m.is_accepting() == fresh.is_accepting()
        if cut:
            m.rollback(1)
    assert m.num_tokens == 0


def test_speculative_decoding_keeps_the_structure(tiny_model, smollm2_tokenizer):
    spec = guided.AfterThinking(guided.Regex(r"(yes|no)\."), max_thinking_tokens=8)
    plain = guided.generate(tiny_model, smollm2_tokenizer, "Yes or no?", spec, max_new_tokens=40)
    fast = guided.generate(tiny_model, smollm2_tokenizer, "Yes or no?", spec, max_new_tokens=40,
                           speculative=[DraftModel(tiny_model)], num_draft_tokens=4)
    assert fast.token_ids == plain.token_ids  # greedy: speculation changes nothing
    assert re.fullmatch(r"(yes|no)\.", plain.text.split("</think>", 1)[1])


def test_the_watermark_marks_the_thinking_and_the_answer(tiny_model, smollm2_tokenizer):
    key = b"thinking-key-0123456789"
    spec = guided.AfterThinking(guided.Regex(r"(yes|no)\."), max_thinking_tokens=120)
    guide = guided.compile(spec, smollm2_tokenizer)
    wm = WatermarkLogitsProcessor(49152, key, delta=4.0, guide=guide)
    r = guided.generate(tiny_model, smollm2_tokenizer, "Yes or no?", spec, max_new_tokens=140, temperature=1.0,
                        seed=1, watermark=wm)
    assert re.fullmatch(r"(yes|no)\.", r.text.split("</think>", 1)[1])
    z = WatermarkDetector(smollm2_tokenizer, key).detect(r.token_ids, guide=guide).z_score
    assert z >= 4, z
