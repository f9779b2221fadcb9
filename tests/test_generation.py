"""Generation with a tiny random model: every output matches its regex."""

from __future__ import annotations

import re

import pytest
import torch

import guided

PATTERNS = [
    r"\(\d{3}\) \d{3}-\d{4}",
    r"\d{4}-\d{2}-\d{2}",
    r"(yes|no|maybe)",
    r"[a-z]{1,10}@[a-z]{1,8}\.(com|org)",
    r"(🎉|👍|日本){1,3}[!?]",
    r"-?\d{1,4}(\.\d{1,3})?",
]

SAMPLING = [
    dict(temperature=1.0),
    dict(temperature=0.7, top_k=20),
    dict(temperature=1.3, top_p=0.9),
    dict(temperature=1.0, top_k=50, top_p=0.8),
]


def _matches(pattern, text):
    return re.fullmatch(pattern, text) is not None


def test_100_seeds_all_match(tiny_model, smollm2_tokenizer):
    failures = []
    for seed in range(100):
        pattern = PATTERNS[seed % len(PATTERNS)]
        sampling = SAMPLING[seed % len(SAMPLING)]
        r = guided.generate(
            tiny_model, smollm2_tokenizer, "Answer:", guided.Regex(pattern),
            max_new_tokens=64, seed=seed, **sampling,
        )
        if not _matches(pattern, r.text) or r.finish_reason == "length":
            failures.append((seed, pattern, r.text, r.finish_reason))
        assert all(t < smollm2_tokenizer.__len__() for t in r.token_ids)
    assert not failures, failures


def test_seed_makes_sampling_reproducible(tiny_model, smollm2_tokenizer):
    runs = [
        guided.generate(tiny_model, smollm2_tokenizer, "x", guided.Regex(r"[a-z]{3,12}"), temperature=1.0, seed=7).text
        for _ in range(2)
    ]
    assert runs[0] == runs[1]


def test_greedy_result_and_stats(tiny_model, smollm2_tokenizer):
    r = guided.generate(tiny_model, smollm2_tokenizer, "Date:", guided.Regex(r"\d{4}-\d{2}-\d{2}"))
    assert _matches(r"\d{4}-\d{2}-\d{2}", r.text)
    assert r.value == r.text
    assert r.finish_reason == "complete"  # nothing can follow a full date
    s = r.stats
    assert s.new_tokens == len(r.token_ids) > 0
    assert s.prompt_tokens > 0 and s.mask_s > 0 and s.decode_s >= s.mask_s
    d = r.as_dict()
    assert d["stats"]["new_tokens"] == s.new_tokens


def test_eos_ends_an_open_ended_pattern(tiny_model, smollm2_tokenizer):
    # [a-z]+ can always continue, so it ends by EOS (allowed once it has matched)
    # or by length: never in a non-matching state.
    for seed in range(10):
        r = guided.generate(
            tiny_model, smollm2_tokenizer, "w:", guided.Regex(r"[a-z]+"),
            max_new_tokens=12, temperature=1.0, seed=seed,
        )
        assert r.finish_reason in ("eos", "length")
        if r.finish_reason == "eos":
            assert _matches(r"[a-z]+", r.text)


def test_unconstrained_generation(tiny_model, smollm2_tokenizer):
    r = guided.generate(tiny_model, smollm2_tokenizer, "hi", None, max_new_tokens=5, chat=False)
    assert r.stats.mask_s == 0 and r.stats.new_tokens <= 5


def test_chat_template_is_used(smollm2_tokenizer):
    from guided.decoding.generation import prompt_ids

    chat = prompt_ids(smollm2_tokenizer, "hello")
    raw = prompt_ids(smollm2_tokenizer, "hello", chat=False)
    assert len(chat) > len(raw)
    assert smollm2_tokenizer.convert_tokens_to_ids("<|im_start|>") in chat
    assert prompt_ids(smollm2_tokenizer, [5, 6, 7]) == [5, 6, 7]


# -- the Hugging Face plug-in ------------------------------------------------------


def _decode_rows(tokenizer, vocab, rows):
    out = []
    for row in rows:
        ids = []
        for t in row:
            if t in vocab.eos_token_ids:
                break
            ids.append(t)
        out.append(vocab.decode(ids).decode())
    return out


def test_hf_generate_batch_sampling(tiny_model, smollm2_tokenizer, smollm2_vocab):
    pattern = r"\d{3}-[a-z]{2,5}"
    guide = guided.compile(guided.Regex(pattern), smollm2_tokenizer)
    smollm2_tokenizer.padding_side = "left"
    enc = smollm2_tokenizer(["first prompt here", "second"], return_tensors="pt", padding=True)
    torch.manual_seed(0)
    out = tiny_model.generate(
        **enc, logits_processor=[guided.LogitsProcessor(guide)], do_sample=True, top_k=30,
        top_p=0.9, temperature=1.2, num_return_sequences=3, max_new_tokens=20,
        pad_token_id=smollm2_tokenizer.eos_token_id,
    )
    texts = _decode_rows(smollm2_tokenizer, smollm2_vocab, out[:, enc["input_ids"].shape[1] :].tolist())
    assert len(texts) == 6
    for t in texts:
        assert _matches(pattern, t), texts


def test_hf_generate_beam_search(tiny_model, smollm2_tokenizer, smollm2_vocab):
    pattern = r"(alpha|beta|gamma)-\d{2}"
    guide = guided.compile(guided.Regex(pattern), smollm2_tokenizer)
    enc = smollm2_tokenizer(["pick one"], return_tensors="pt")
    out = tiny_model.generate(
        **enc, logits_processor=[guided.LogitsProcessor(guide)], num_beams=4,
        num_return_sequences=2, do_sample=False, max_new_tokens=12,
        pad_token_id=smollm2_tokenizer.eos_token_id,
    )
    texts = _decode_rows(smollm2_tokenizer, smollm2_vocab, out[:, enc["input_ids"].shape[1] :].tolist())
    for t in texts:
        assert _matches(pattern, t), texts


def test_processor_forces_eos_at_dead_end(smollm2_vocab):
    # \x14 has no token in SmolLM2's vocabulary: after "a" nothing can follow.
    guide = guided.compile(guided.Regex("a\x14"), smollm2_vocab)
    proc = guided.LogitsProcessor(guide)
    a = smollm2_vocab.token_bytes.index(b"a")
    proc(torch.tensor([[5]]), torch.zeros(1, smollm2_vocab.size))
    scores = proc(torch.tensor([[5, a]]), torch.zeros(1, smollm2_vocab.size))
    finite = torch.isfinite(scores[0]).nonzero().flatten().tolist()
    assert finite == list(smollm2_vocab.eos_token_ids)


def test_processor_rejects_uncompiled_spec():
    with pytest.raises(TypeError, match="compile"):
        guided.LogitsProcessor(guided.Regex("a"))


def test_a_negative_temperature_is_refused(tiny_model, smollm2_tokenizer):
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        guided.generate(tiny_model, smollm2_tokenizer, "x", guided.Regex("(yes|no)"), temperature=-0.5, chat=False)


def test_one_watermark_processor_serves_call_after_call(tiny_model, smollm2_tokenizer):
    """``generate`` resets the watermark (its guide's matchers) as it resets the processors."""
    from guided.watermark import WatermarkLogitsProcessor

    guide = guided.compile(guided.Regex(r"(yes|no|maybe)( (yes|no|maybe)){0,3}"), smollm2_tokenizer)
    wm = WatermarkLogitsProcessor(len(smollm2_tokenizer), b"a key of sixteen bytes or more", guide=guide)
    for seed in (0, 1, 2):
        r = guided.generate(tiny_model, smollm2_tokenizer, "Answer:", guide, temperature=1.0, seed=seed, chat=False,
                            max_new_tokens=12, watermark=wm)
        assert re.fullmatch(r"(yes|no|maybe)( (yes|no|maybe)){0,3}", r.text) or r.finish_reason == "length"
