"""Watermarking: the keyed PRF, the processor, the detector's statistics, grammar-aware
detection, and agreement with Hugging Face's WatermarkDetector."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

import guided
from guided.watermark import WatermarkDetector, WatermarkLogitsProcessor
from guided.watermark.prf import green_count_among, keyed_tables, mix32, values
from guided.watermark.spelling import SpellingCheck
from guided.watermark.stats import binomial_sf, normal_sf, poisson_binomial_sf

KEY = b"test-key-0123456789abcdef"
OTHER_KEY = b"another-key-9876543210fedcba"
V = 49152


def sample_loop(step_logits, processor, n_tokens, prompt, seed=0, temperature=1.0):
    """Sample ``n_tokens`` ids with ``processor`` applied to ``step_logits(ids)``."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.tensor([prompt])
    for _ in range(n_tokens):
        scores = processor(ids, step_logits(ids))
        probs = torch.softmax(scores[0] / temperature, dim=-1)
        nxt = torch.multinomial(probs, 1, generator=gen)
        ids = torch.cat([ids, nxt[None]], dim=1)
    return ids[0, len(prompt):].tolist()


def random_logits(seed=0, width=V, scale=3.0):
    gen = torch.Generator().manual_seed(seed)
    return lambda ids: torch.randn(1, width, generator=gen) * scale


# -- the PRF ---------------------------------------------------------------------------


def test_mix32_is_a_bijection_on_a_sample_and_agrees_across_backends():
    xs = np.arange(0, 1 << 20, dtype=np.int64) * 4093 % (1 << 32)
    ys = mix32(xs)
    assert len(np.unique(ys)) == len(xs) and ys.max() < 2**32 and ys.min() >= 0
    assert np.array_equal(mix32(torch.from_numpy(xs)).numpy(), ys)
    assert mix32(int(xs[123])) == ys[123]


@pytest.mark.parametrize("seeding", ["lefthash", "selfhash"])
def test_green_fraction_is_gamma_and_depends_on_key_and_context(seeding):
    ctx, cand = keyed_tables(KEY, V)
    all_tokens = np.arange(V, dtype=np.int64)[None, :]
    fractions, greens = [], []
    for prev in (5, 77, 40000):
        vals = values(ctx, cand, np.array([[prev]]), all_tokens, seeding)[0]
        green = vals < 0.25 * 2**32
        fractions.append(green.mean())
        greens.append(green)
    assert all(abs(f - 0.25) < 0.01 for f in fractions)
    overlap = (greens[0] & greens[1]).mean()
    assert abs(overlap - 0.25 * 0.25) < 0.01  # different contexts: independent lists
    ctx2, cand2 = keyed_tables(OTHER_KEY, V)
    vals2 = values(ctx2, cand2, np.array([[5]]), all_tokens, seeding)[0]
    assert abs(((vals2 < 0.25 * 2**32) & greens[0]).mean() - 0.0625) < 0.01


# -- statistics ------------------------------------------------------------------------


@pytest.mark.parametrize("g,t,p", [(5, 10, 0.25), (60, 200, 0.25), (120, 200, 0.25), (0, 5, 0.3), (3, 3, 0.5)])
def test_binomial_tail_is_exact(g, t, p):
    ref = sum(math.comb(t, k) * p**k * (1 - p) ** (t - k) for k in range(g, t + 1))
    assert binomial_sf(g, t, p) == pytest.approx(ref, rel=1e-9, abs=1e-300)


def test_poisson_binomial_tail_is_exact():
    probs = [0.5, 0.25, 0.5, 0.9, 0.1, 0.75]
    for g in range(len(probs) + 2):
        ref = 0.0
        for bits in itertools.product([0, 1], repeat=len(probs)):
            if sum(bits) >= g:
                ref += math.prod(p if b else 1 - p for b, p in zip(bits, probs))
        assert poisson_binomial_sf(g, probs) == pytest.approx(ref, rel=1e-9, abs=1e-15)


# -- processor -------------------------------------------------------------------------


def test_processor_is_vectorised_over_the_batch_and_never_greens_padding():
    wm = WatermarkLogitsProcessor(V, KEY)
    ids = torch.tensor([[1, 2, 3], [9, 8, 7], [4, 4, 4]])
    scores = torch.zeros(3, V + 64)
    out = wm(ids, scores)
    for row in range(3):
        single = wm(ids[row : row + 1], scores[row : row + 1])
        assert torch.equal(out[row], single[0])
    assert (out[:, V:] == 0).all()
    assert set(out.unique().tolist()) == {0.0, 2.0}
    frac = (out[:, :V] == 2.0).float().mean().item()
    assert abs(frac - 0.25) < 0.01


def test_hard_mode_leaves_only_green_tokens():
    wm = WatermarkLogitsProcessor(V, KEY, hard=True)
    out = wm(torch.tensor([[11]]), torch.zeros(1, V))
    assert abs(torch.isfinite(out).float().mean().item() - 0.25) < 0.01


def test_guided_processor_draws_green_among_allowed(smollm2_tokenizer):
    guide = guided.compile(guided.Regex(r"(yes|no|maybe)"), smollm2_tokenizer)
    wm = WatermarkLogitsProcessor(len(smollm2_tokenizer), KEY, guide=guide)
    out = wm(torch.tensor([[5]]), torch.zeros(1, V + 64))
    allowed = torch.isfinite(out[0])
    n = int(allowed.sum())
    assert n >= 2
    green = out[0] == 2.0
    assert bool((green <= allowed).all())
    assert int(green.sum()) == green_count_among(n, 0.25)


def test_spelling_check_finds_positions_that_only_choose_a_tokenization(smollm2_tokenizer):
    guide = guided.compile(guided.JsonSchema(LONG_KEYS, whitespace="compact"), smollm2_tokenizer)
    check = SpellingCheck(guide.vocab)
    ids = {smollm2_tokenizer.decode([i]): i for i in range(len(smollm2_tokenizer))}
    assert check([ids["o"], ids["om"], ids["omer"]])
    assert not check([ids["o"], ids["om"], ids["a"]])  # two different texts
    assert not check([ids["o"], smollm2_tokenizer.eos_token_id])  # stopping is a real choice
    assert not check([ids["o"]])  # one token: forced, not a tokenization choice
    # Inside a fixed key every allowed token spells a prefix of the rest of the key.
    m = guide.matcher()
    assert m.accept_tokens(smollm2_tokenizer.encode('{"the_first_ra', add_special_tokens=False))
    allowed = m.allowed_token_ids()
    assert len(allowed) > 1 and check(allowed)


def _scores_after(wm, prompt: list[int], prefix: list[int]) -> torch.Tensor:
    """The processor's scores for the position after ``prefix``, fed as generation would."""
    wm.reset()
    for n in range(len(prefix) + 1):
        out = wm(torch.tensor([prompt + prefix[:n]]), torch.zeros(1, V + 64))
    return out[0]


def test_hard_spelling_keeps_only_green_splits_of_a_fixed_key(smollm2_tokenizer):
    """spelling="hard", the default with a guide: where the allowed tokens all spell the
    same fixed text, only the green ones stay; at real choices the soft bias is unchanged."""
    guide = guided.compile(guided.JsonSchema(LONG_KEYS, whitespace="compact"), smollm2_tokenizer)
    soft = WatermarkLogitsProcessor(len(smollm2_tokenizer), KEY, guide=guide, spelling="soft")
    hard = WatermarkLogitsProcessor(len(smollm2_tokenizer), KEY, guide=guide)
    prompt = smollm2_tokenizer.encode("JSON:", add_special_tokens=False)
    inside_key = smollm2_tokenizer.encode('{"the_first_ra', add_special_tokens=False)
    inside_value = smollm2_tokenizer.encode('{"the_first_rather_long_property_name":"bl', add_special_tokens=False)
    for prefix, only_split in ((inside_key, True), (inside_value, False)):
        s_soft, s_hard = _scores_after(soft, prompt, prefix), _scores_after(hard, prompt, prefix)
        allowed, green = torch.isfinite(s_soft), s_soft == 2.0
        assert int(green.sum()) >= 1 and int(allowed.sum()) > int(green.sum())
        kept = torch.isfinite(s_hard)
        assert bool((kept == (green if only_split else allowed)).all())
        assert bool((s_hard[kept] == s_soft[kept]).all())
    with pytest.raises(ValueError, match="spelling"):
        WatermarkLogitsProcessor(V, KEY, spelling="always")
    with pytest.raises(ValueError, match="needs a guide"):
        WatermarkLogitsProcessor(V, KEY, spelling="hard")


def test_text_detection_skips_positions_where_only_the_split_is_open(smollm2_tokenizer, detector):
    """Text is re-tokenised canonically, so where the grammar fixed the text its tokens
    are the tokenizer's choice: detection from text does not score them; detection from
    token ids (the model's own split) does."""
    guide = guided.compile(guided.JsonSchema(LONG_KEYS, whitespace="compact"), smollm2_tokenizer)
    text = ('{"the_first_rather_long_property_name":"blue sky","another_extremely_long_property_name_here":7,'
            '"yet_one_more_long_descriptive_field_name":"fine"}')
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    check = SpellingCheck(guide.vocab)
    m, single, spelled = guide.matcher(), 0, 0
    for t in ids:
        allowed = m.allowed_token_ids()
        single += len(allowed) == 1
        spelled += check(allowed)
        assert m.accept_token(t)
    assert spelled >= 10
    from_ids, from_text = detector.detect(ids, guide=guide), detector.detect(text, guide=guide)
    assert from_ids.num_forced == single and from_text.num_forced == single + spelled
    assert detector.detect(ids, guide=guide, from_text=True).z_score == from_text.z_score
    assert from_text.num_tokens_scored < from_ids.num_tokens_scored


def test_processor_rejects_bad_settings():
    with pytest.raises(ValueError, match="gamma"):
        WatermarkLogitsProcessor(V, KEY, gamma=1.5)
    with pytest.raises(ValueError, match="seeding"):
        WatermarkLogitsProcessor(V, KEY, seeding="middlehash")
    with pytest.raises(ValueError, match="16 bytes"):
        WatermarkLogitsProcessor(V, b"short")


# -- detector --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def detector(smollm2_tokenizer):
    return WatermarkDetector(smollm2_tokenizer, KEY)


@pytest.mark.parametrize("seeding,width", [("lefthash", 1), ("selfhash", 1), ("lefthash", 3), ("selfhash", 2)])
def test_watermarked_sampling_is_detected_and_wrong_key_is_not(smollm2_tokenizer, seeding, width):
    wm = WatermarkLogitsProcessor(V, KEY, seeding=seeding, context_width=width)
    ids = sample_loop(random_logits(1), wm, 200, prompt=[1, 2, 3])
    right = WatermarkDetector(smollm2_tokenizer, KEY, seeding=seeding, context_width=width).detect(ids)
    wrong = WatermarkDetector(smollm2_tokenizer, OTHER_KEY, seeding=seeding, context_width=width).detect(ids)
    assert right.is_watermarked and right.z_score > 6 and right.p_value < 1e-9
    assert not wrong.is_watermarked and abs(wrong.z_score) < 4
    assert right.num_tokens_scored == 200 - width
    assert right.config["key_id"] and KEY.hex() not in repr(right.as_dict()) and str(KEY) not in repr(right.as_dict())


def test_unwatermarked_text_calibration(detector):
    """z on 3,000 random 200-token sequences: the normal tail at 2 and 3, none above 4."""
    rng = np.random.default_rng(0)
    texts = [rng.integers(0, V, size=200).tolist() for _ in range(3000)]
    z = np.array([r.z_score for r in detector.detect_batch(texts)])
    assert abs(z.mean()) < 0.1 and abs(z.std() - 1) < 0.1
    for cut in (2.0, 3.0):
        expected = normal_sf(cut)
        sd = math.sqrt(expected * (1 - expected) / len(z))
        assert abs((z > cut).mean() - expected) < 4 * sd + 0.003
    assert (z > 4).sum() <= 2  # expected 0.1


def test_detect_batch_equals_detect(detector):
    rng = np.random.default_rng(1)
    texts = [rng.integers(0, V, size=n).tolist() for n in (0, 1, 5, 50, 300)]
    texts.append([7, 8] * 40)  # repeated bigrams
    for one, many in zip([detector.detect(t) for t in texts], detector.detect_batch(texts)):
        assert (one.z_score, one.num_green, one.num_tokens_scored, one.green_flags) == (
            many.z_score, many.num_green, many.num_tokens_scored, many.green_flags)


def test_repeated_ngrams_are_scored_once(smollm2_tokenizer, detector):
    ids = [7, 8] * 40
    r = detector.detect(ids)
    assert r.num_tokens_scored == 2  # (7, 8) and (8, 7)
    every = WatermarkDetector(smollm2_tokenizer, KEY, ignore_repeated_ngrams=False).detect(ids)
    assert every.num_tokens_scored == 79


def test_text_input_and_flags(smollm2_tokenizer, detector):
    wm = WatermarkLogitsProcessor(V, KEY)
    ids = sample_loop(random_logits(2), wm, 120, prompt=[1])
    text = smollm2_tokenizer.decode(ids)
    retok = smollm2_tokenizer.encode(text, add_special_tokens=False)
    r = detector.detect(text)
    assert r.num_tokens == len(retok)
    assert r.green_flags[0] is None  # no context for the first token
    assert sum(f is True for f in r.green_flags) == r.num_green


def test_window_finds_the_watermarked_span(detector):
    wm = WatermarkLogitsProcessor(V, KEY)
    marked = sample_loop(random_logits(3), wm, 150, prompt=[1])
    rng = np.random.default_rng(3)
    ids = rng.integers(0, V, 400).tolist() + marked + rng.integers(0, V, 400).tolist()
    whole = detector.detect(ids)
    r = detector.detect(ids, window=True, min_window=32)
    lo, hi = r.span
    overlap = max(0, min(hi, 550) - max(lo, 400))
    assert overlap >= 0.8 * (hi - lo)
    assert r.windows_searched > 1 and r.is_watermarked
    assert r.z_score > whole.z_score


# -- grammar-aware detection -------------------------------------------------------------


LONG_KEYS = {
    "type": "object",
    "properties": {
        "the_first_rather_long_property_name": {"type": "string", "maxLength": 40},
        "another_extremely_long_property_name_here": {"type": "integer"},
        "yet_one_more_long_descriptive_field_name": {"type": "string", "maxLength": 40},
    },
    "required": ["the_first_rather_long_property_name", "another_extremely_long_property_name_here",
                 "yet_one_more_long_descriptive_field_name"],
    "additionalProperties": False,
}


def test_grammar_aware_detection_skips_forced_tokens(smollm2_tokenizer, detector, tiny_model):
    guide = guided.compile(guided.JsonSchema(LONG_KEYS, whitespace="compact"), smollm2_tokenizer)
    wm = WatermarkLogitsProcessor(V, KEY, guide=guide)
    prompt = smollm2_tokenizer.encode("JSON:", add_special_tokens=False)

    def step(ids):
        with torch.no_grad():
            return tiny_model(ids).logits[:, -1, :] / 40.0 * 3.0

    ids = sample_loop(step, wm, 60, prompt=prompt, seed=5)
    # Which positions were forced (exactly one allowed token)? Replay independently.
    matcher = guide.matcher()
    forced = []
    for i, t in enumerate(ids):
        allowed = matcher.allowed_token_ids()
        if len(allowed) == 1:
            forced.append(i)
        if not matcher.accept_token(t):
            ids = ids[:i]
            break
    assert len(forced) >= 10  # the long keys are forced
    aware = detector.detect(ids, guide=guide)
    naive = detector.detect(ids)
    assert aware.mode == "grammar" and aware.num_forced == len(forced)
    assert all(aware.green_flags[i] is None for i in forced)
    assert aware.num_tokens_scored < naive.num_tokens_scored
    assert aware.z_score > naive.z_score
    assert aware.grammar_mismatch_at is None


# -- Hugging Face agreement -------------------------------------------------------------


@pytest.mark.parametrize("ignore_repeated", [False, True])
def test_z_equals_hugging_face_detector(tiny_model, ignore_repeated):
    from transformers.generation import WatermarkDetector as HFDetector
    from transformers.generation import WatermarkLogitsProcessor as HFProcessor

    cfg = {"greenlist_ratio": 0.25, "bias": 2.0, "hashing_key": 15485863, "seeding_scheme": "lefthash", "context_width": 1}
    vocab = tiny_model.config.vocab_size
    hf_proc = HFProcessor(vocab_size=vocab, device="cpu", **cfg)
    ids = sample_loop(random_logits(4, width=vocab), hf_proc, 120, prompt=[5])
    ids = ids[:60] + ids[:30] + ids[60:]  # some repeated n-grams
    hf = HFDetector(tiny_model.config, "cpu", cfg, ignore_repeated_ngrams=ignore_repeated)
    out = hf(torch.tensor([ids]), return_dict=True)
    ours = WatermarkDetector(None, 15485863, prf="hf", vocab_size=vocab,
                             ignore_repeated_ngrams=ignore_repeated).detect(ids)
    assert ours.num_tokens_scored == int(out.num_tokens_scored[0])
    assert ours.num_green == int(out.num_green_tokens[0])
    assert ours.z_score == pytest.approx(float(out.z_score[0]), abs=1e-9)
    assert ours.z_score > 4  # HF's watermark, found by our detector


def test_tiny_model_generate_with_processor_is_flagged(tiny_model, detector):
    """Our processor inside transformers' own generate loop, batch of 3, sampling."""
    from transformers import LogitsProcessorList

    wm = WatermarkLogitsProcessor(V, KEY)
    torch.manual_seed(0)
    prompt = torch.tensor([[1, 500, 600], [1, 700, 800], [1, 900, 1000]])
    out = tiny_model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=True, top_k=0,
                              temperature=2.0, max_new_tokens=200, min_new_tokens=200,
                              logits_processor=LogitsProcessorList([wm]), pad_token_id=2)
    for row in out[:, 3:].tolist():
        r = detector.detect(row)
        assert r.is_watermarked, r.z_score
    plain = tiny_model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=True, top_k=0,
                                temperature=2.0, max_new_tokens=200, min_new_tokens=200, pad_token_id=2)
    assert not any(detector.detect(row).is_watermarked for row in plain[:, 3:].tolist())



def test_a_key_file_others_may_read_is_warned_about(tmp_path):
    import os
    import warnings

    from guided.watermark import KeyFileWarning, load_key

    path = tmp_path / "wm.key"
    path.write_text("a watermark key of more than sixteen bytes\n")
    os.chmod(path, 0o600)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        private = load_key(str(path))
    os.chmod(path, 0o644)
    with pytest.warns(KeyFileWarning, match="chmod 600"):
        assert load_key(str(path)) == private
