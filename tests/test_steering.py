"""Steering processors (``guided.steering``) that compose with the grammar mask: exact
formulas, the order contract, the allowed-token invariant, one forward pass per helper
model per step, beam search over the processed scores, and the same objects in Hugging
Face's ``generate``."""

from __future__ import annotations

import re

import pytest
import torch

import guided
from guided.decoding.step import next_token_scores
from guided.steering import FrequencyPenalty, LogitBias, PresencePenalty, RepetitionPenalty
from guided.steering.ensemble import ContextModel, DExperts, ProxyTuning

V = 10


def scores_of(*rows):
    return torch.tensor(rows, dtype=torch.float32)


def test_logit_bias_adds_and_keeps_masked_tokens_masked():
    s = scores_of([0.0, 1.0, float("-inf"), 2.0] + [0.0] * (V - 4))
    out = LogitBias({1: 5.0, 2: 100.0, 3: -1.5})(torch.zeros(1, 3, dtype=torch.long), s)
    assert out[0, 1] == 6.0 and out[0, 3] == 0.5 and out[0, 0] == 0.0
    assert out[0, 2] == float("-inf")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        LogitBias({V: 1.0})(torch.zeros(1, 1, dtype=torch.long), s)


def test_presence_and_frequency_count_generated_tokens_only():
    prompt = torch.tensor([[4, 4, 4]])
    presence, frequency = PresencePenalty(0.5), FrequencyPenalty(0.25)
    s = torch.zeros(1, V)
    assert torch.equal(presence(prompt, s), s) and torch.equal(frequency(prompt, s), s)  # first call: the prompt
    ids = torch.tensor([[4, 4, 4, 7, 7, 2]])
    p, f = presence(ids, s), frequency(ids, s)
    assert p[0, 7] == -0.5 and p[0, 2] == -0.5 and p[0, 4] == 0.0
    assert f[0, 7] == -0.5 and f[0, 2] == -0.25 and f[0, 4] == 0.0
    presence.reset()
    assert torch.equal(presence(ids, s), s)  # after reset, the new prompt counts as prompt


def test_repetition_penalty_equals_hugging_face():
    from transformers import RepetitionPenaltyLogitsProcessor

    torch.manual_seed(0)
    ids = torch.randint(0, V, (3, 6))
    s = torch.randn(3, V)
    assert torch.allclose(RepetitionPenalty(1.3)(ids, s.clone()), RepetitionPenaltyLogitsProcessor(1.3)(ids, s.clone()))


def _tiny(seed: int, vocab: int = 50):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128)
    return LlamaForCausalLM(cfg).eval()


def _full_logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits[:, -1, :].float()


def test_dexperts_formula_with_cached_helpers():
    base_vocab = 50
    expert, anti = _tiny(1), _tiny(2)
    pos, neg = [5, 6, 7], [8, 9]
    proc = DExperts(ContextModel(expert, pos), ContextModel(anti, neg), alpha=1.7)
    prompt = torch.tensor([[1, 2, 3, 4]])
    ids = prompt
    for step, new in enumerate([11, 12, 13]):
        s = torch.randn(1, base_vocab)
        out = proc(ids, s)
        generated = ids[:, prompt.shape[1]:].tolist()[0]
        want = s + 1.7 * (_full_logits(expert, torch.tensor([pos + generated]))
                          - _full_logits(anti, torch.tensor([neg + generated])))
        assert torch.allclose(out, want, atol=1e-5), step
        ids = torch.cat([ids, torch.tensor([[new]])], dim=1)
    assert proc.expert.forward_passes == 3 and proc.anti_expert.forward_passes == 3


def test_context_model_follows_rollback_and_batch_rows():
    model = _tiny(3)
    ctx = ContextModel(model)
    a = torch.tensor([[1, 2, 3, 4, 5], [1, 2, 9, 9, 9]])
    assert torch.allclose(ctx.logits(a), _full_logits(model, a), atol=1e-5)
    b = torch.tensor([[1, 2, 3, 7], [1, 2, 9, 8]])  # rolled back two, then a new token
    assert torch.allclose(ctx.logits(b), _full_logits(model, b), atol=1e-5)
    assert torch.allclose(ctx.logits(b), _full_logits(model, b), atol=1e-5)  # same ids: no new pass
    assert ctx.forward_passes == 2


def test_proxy_tuning_is_the_unit_alpha_difference():
    tuned, untuned = _tiny(4), _tiny(5)
    ids = torch.tensor([[3, 1, 4, 1, 5]])
    s = torch.randn(1, 50)
    out = ProxyTuning(tuned, untuned)(ids, s)
    assert torch.allclose(out, s + _full_logits(tuned, ids) - _full_logits(untuned, ids), atol=1e-5)


def test_vocabulary_mismatch_is_a_clear_error():
    proc = DExperts(_tiny(6, vocab=40), _tiny(7, vocab=40))
    with pytest.raises(ValueError, match="share the base model's vocabulary"):
        proc(torch.tensor([[1, 2]]), torch.zeros(1, 50))


# -- the order contract and the allowed-token invariant ------------------------------------


def _bitmask_allowing(allowed, vocab=V):
    bm = torch.zeros_like(guided.allocate_token_bitmask(1, vocab))
    for t in allowed:
        bm[0, t // 32] |= 1 << (t % 32)
    return bm


def test_mask_comes_before_top_k():
    """The best tokens are forbidden: with top-k=1 applied first nothing would be left;
    mask first, the best *allowed* token survives."""
    logits = scores_of([9.0, 8.0, 1.0, 0.5] + [0.0] * (V - 4))
    out = next_token_scores(logits, torch.zeros(1, 1, dtype=torch.long), _bitmask_allowing([2, 3]),
                            temperature=1.0, top_k=1)
    assert torch.isfinite(out[0]).nonzero().flatten().tolist() == [2]


def test_no_processor_can_bring_back_a_forbidden_token():
    def rogue(input_ids, scores):  # ignores the mask and favours token 0
        out = torch.zeros_like(scores)
        out[:, 0] = 100.0
        return out

    logits = torch.zeros(1, V)
    out = next_token_scores(logits, torch.zeros(1, 1, dtype=torch.long), _bitmask_allowing([5, 6]), [rogue])
    assert out[0].argmax().item() in (5, 6)
    assert torch.isinf(out[0, 0])


def test_watermark_comes_after_the_warpers():
    calls = []

    def fake_watermark(input_ids, scores):
        calls.append(torch.isinf(scores).sum().item())
        return scores

    logits = torch.arange(V, dtype=torch.float32)[None, :]
    next_token_scores(logits, torch.zeros(1, 1, dtype=torch.long), temperature=1.0, top_k=3, watermark=fake_watermark)
    assert calls == [V - 3]  # it saw the top-k cut


def test_min_p_keeps_tokens_near_the_top():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    out = next_token_scores(logits, torch.zeros(1, 1, dtype=torch.long), temperature=1.0, min_p=0.2)
    assert torch.isfinite(out[0]).tolist() == [True, True, True, False]


# -- through generate ---------------------------------------------------------------------


def test_generate_with_processors_stays_valid_and_counts_passes(tiny_model, smollm2_tokenizer):
    pattern = r"[a-z]{3,8}( [a-z]{3,8}){1,3}\."
    helper = ContextModel(tiny_model, smollm2_tokenizer("Happy words:")["input_ids"])
    anti = ContextModel(tiny_model, smollm2_tokenizer("Sad words:")["input_ids"])
    processors = [RepetitionPenalty(1.3), PresencePenalty(0.4), DExperts(helper, anti, alpha=2.0)]
    for seed in range(5):
        r = guided.generate(tiny_model, smollm2_tokenizer, "Say something:", guided.Regex(pattern),
                            max_new_tokens=30, temperature=1.0, top_k=20, seed=seed, processors=processors)
        if r.finish_reason != "length":
            assert re.fullmatch(pattern, r.text), r.text
        steps = len(r.token_ids) + (r.finish_reason == "eos")
        assert helper.forward_passes == steps and anti.forward_passes == steps  # reset per call
        helper.forward_passes = anti.forward_passes = 0


# -- classifier guidance ------------------------------------------------------------------


class _CharTokenizer:
    """Token t is the character chr(ord('a') + t)."""

    def decode(self, ids):
        return "".join(chr(ord("a") + int(t)) for t in ids)


def test_classifier_guidance_rescores_top_k_allowed_candidates():
    from guided.steering.classifier import ClassifierGuidance

    seen = []

    def scorer(texts):  # likes texts ending in "d"
        seen.append(list(texts))
        return [0.0 if t.endswith("d") else -2.0 for t in texts]

    proc = ClassifierGuidance(scorer, _CharTokenizer(), top_k=3, weight=1.5)
    prompt = torch.tensor([[0, 1]])
    proc(prompt, torch.zeros(1, V))  # the first call fixes the prompt length
    ids = torch.tensor([[0, 1, 2]])  # generated so far: "c"
    logits = scores_of([5.0, float("-inf"), 4.0, 3.9, 3.8, 1.0] + [0.0] * (V - 6))
    out = proc(ids, logits)
    # Candidates: the 3 best allowed tokens 0, 2, 3 (token 1 is masked).
    assert seen[-1] == ["ca", "cc", "cd"]
    assert out[0, [0, 2, 3]].tolist() == pytest.approx([5.0 - 3.0, 4.0 - 3.0, 3.9])  # "cd" now wins
    assert torch.isinf(out[0, [1, 4, 5]]).all()
    assert proc.calls == 2


# -- constrained beam search ----------------------------------------------------------------


class _BigramCache:
    def reorder_cache(self, beam_idx):
        pass


class _BigramModel:
    """Next-token log-probabilities that depend on the last token only."""

    device = torch.device("cpu")

    def __init__(self, table, vocab_size):
        self.table = table  # last token -> {next token: probability}
        self.vocab_size = vocab_size

    def __call__(self, input_ids, past_key_values=None, use_cache=True):
        rows = []
        for last in input_ids[:, -1].tolist():
            row = torch.full((self.vocab_size,), -30.0)
            for tok, p in self.table.get(last, {}).items():
                row[tok] = float(torch.log(torch.tensor(p)))
            rows.append(row)
        logits = torch.stack(rows)[:, None, :].expand(-1, input_ids.shape[1], -1)
        return type("Out", (), {"logits": logits, "past_key_values": _BigramCache()})()


def test_beam_search_finds_what_greedy_misses():
    # Tokens: 0 = <s>, 1 = EOS, 2.. = "a" "b" "x" "y" "z"
    vocab = guided.Vocabulary([None, None, b"a", b"b", b"x", b"y", b"z"], eos_token_ids=[1])
    a, b, x, y, z = 2, 3, 4, 5, 6
    model = _BigramModel({0: {a: 0.6, b: 0.4}, a: {x: 0.5, y: 0.5}, b: {z: 0.99}, x: {1: 1.0}, y: {1: 1.0}, z: {1: 1.0}}, 7)
    spec = guided.Regex(r"ax|ay|bz")
    greedy = guided.generate(model, vocab, [0], spec, max_new_tokens=5)
    beams = guided.generate(model, vocab, [0], spec, max_new_tokens=5, num_beams=2)
    assert greedy.text == "ax"       # 0.6 * 0.5 = 0.30
    assert beams.text == "bz"        # 0.4 * 0.99 = 0.396
    assert beams.finish_reason == "complete"
    # Scores are those of the constrained distribution (renormalised over allowed
    # tokens): with "bz" forbidden, "y" after "b" has probability 1, so "by" (0.4) wins.
    assert guided.generate(model, vocab, [0], guided.Regex("ax|ay|by"), num_beams=2, max_new_tokens=5).text == "by"


def test_beam_search_outputs_match_the_spec(tiny_model, smollm2_tokenizer):
    pattern = r"(yes|no|maybe)( [a-z]{2,6}){0,3}"
    for prompt in ["Answer:", "Is it so?", "Well"]:
        r = guided.generate(tiny_model, smollm2_tokenizer, prompt, guided.Regex(pattern), num_beams=3,
                            max_new_tokens=12, chat=False)
        if r.finish_reason != "length":
            assert re.fullmatch(pattern, r.text), r.text
    with pytest.raises(ValueError, match="temperature=0"):
        guided.generate(tiny_model, smollm2_tokenizer, "x", guided.Regex(pattern), num_beams=2, temperature=1.0)


def test_context_model_follows_beam_reordering():
    model = _tiny(8)
    ctx = ContextModel(model)
    a = torch.tensor([[1, 2, 3], [1, 2, 4]])
    ctx.logits(a)
    b = torch.tensor([[1, 2, 4, 7], [1, 2, 4, 8], [1, 2, 3, 9]])  # row 1 twice, row 0 once, one new token each
    assert torch.allclose(ctx.logits(b), _full_logits(model, b), atol=1e-5)
    assert ctx.forward_passes == 2


def test_the_same_objects_work_in_hf_generate(tiny_model, smollm2_tokenizer, smollm2_vocab):
    from transformers import LogitsProcessorList

    guide = guided.compile(guided.Regex(r"(yes|no)( [a-z]{2,5}){1,3}"), smollm2_vocab)
    helper = ContextModel(tiny_model, smollm2_tokenizer("Agree:")["input_ids"])
    anti = ContextModel(tiny_model, smollm2_tokenizer("Disagree:")["input_ids"])
    processors = LogitsProcessorList([guided.LogitsProcessor(guide), FrequencyPenalty(0.5), DExperts(helper, anti)])
    ids = torch.tensor([smollm2_tokenizer("Well?")["input_ids"]])
    out = tiny_model.generate(ids, logits_processor=processors, max_new_tokens=12, do_sample=False, pad_token_id=2)
    text = smollm2_tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
    assert re.match(r"(yes|no)( [a-z]{2,5}){0,3}", text), text
    steps = out.shape[1] - ids.shape[1]  # one processor call per generated token, EOS included
    assert helper.forward_passes == steps and anti.forward_passes == steps
