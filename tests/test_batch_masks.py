"""``guided.fill_next_token_bitmasks``: a batch's masks equal each matcher's own,
for every spec kind, on one thread or several, from several callers at once."""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest
import torch

import guided
from guided.compiler import _compile_uncached

SPECS = {
    "regex": guided.Regex(r"[a-z]{1,10}@[a-z]{2,8}\.(com|org)"),
    "schema": guided.JsonSchema({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 12}, "n": {"type": "integer"}}}),
    "recursive schema": guided.JsonSchema({"type": "object", "properties": {
        "kids": {"type": "array", "items": {"$ref": "#"}}}}),
    "lark grammar": guided.Grammar.from_name("arithmetic"),
    "unique items": guided.JsonSchema({"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
}


def _batch(vocab, seed: int) -> list:
    """Matchers of every kind, each a few random allowed tokens in (fresh guides, so
    filling builds rows lazily)."""
    rng = random.Random(seed)
    matchers = []
    for spec in SPECS.values():
        guide = _compile_uncached(guided.specs.as_spec(spec), vocab, False)
        for _ in range(3):
            m = guide.matcher()
            for _ in range(rng.randrange(6)):
                allowed = [t for t in m.allowed_token_ids() if t not in guide.eos_token_ids]
                if not allowed:
                    break
                m.accept_token(rng.choice(allowed))
            matchers.append(m)
    return matchers


def _one_by_one(matchers, vocab_size: int) -> np.ndarray:
    bitmask = guided.allocate_token_bitmask(len(matchers), vocab_size)
    for i, m in enumerate(matchers):
        m.fill_next_token_bitmask(bitmask, i)
    return bitmask.numpy()


@pytest.mark.parametrize("threads", [1, 3])
def test_a_batch_fill_equals_the_per_matcher_loop(smollm2_vocab, threads):
    matchers = _batch(smollm2_vocab, 0)
    want = _one_by_one(matchers, smollm2_vocab.size)
    fresh = _batch(smollm2_vocab, 0)  # the same states, rows not built yet
    got = guided.fill_next_token_bitmasks(fresh, guided.allocate_token_bitmask(len(fresh), smollm2_vocab.size),
                                          threads=threads)
    assert np.array_equal(got.numpy(), want)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_cached_rows_equal_the_per_matcher_loop(smollm2_vocab, threads):
    """The second fill of the same states copies rows already built (the cached path)
    and the third refills a dirty bitmask: every row equals the matcher's own, every
    spec kind, several guides per share of threads."""
    matchers = _batch(smollm2_vocab, 3)
    want = _one_by_one(matchers, smollm2_vocab.size)
    fresh = _batch(smollm2_vocab, 3)
    bitmask = guided.allocate_token_bitmask(len(fresh), smollm2_vocab.size)
    for _ in range(2):
        guided.fill_next_token_bitmasks(fresh, bitmask, threads=threads)
        assert np.array_equal(bitmask.numpy(), want)
        bitmask.fill_(0x5A5A5A5A)
    guided.fill_next_token_bitmasks(fresh, bitmask, threads=threads)
    assert np.array_equal(bitmask.numpy(), want)


def test_eos_padding_and_numpy_bitmasks(smollm2_vocab):
    """After EOS a row allows EOS alone; words past the vocabulary (a model's padded
    logits) are cleared; a numpy bitmask is filled like a tensor."""
    eos = smollm2_vocab.eos_token_ids[0]
    guide = guided.compile(guided.Regex(r"ab|abc"), smollm2_vocab)
    done, part, start = guide.matcher(), guide.matcher(), guide.matcher()
    assert done.accept_tokens(_tokens(smollm2_vocab, b"ab") + [eos])
    assert part.accept_tokens(_tokens(smollm2_vocab, b"a"))
    matchers = [done, part, start, done]
    words = guided.bitmask.bitmask_words(smollm2_vocab.size) + 3
    for bitmask in (torch.full((4, words), -1, dtype=torch.int32), np.full((4, words), -1, dtype=np.int32)):
        for _ in range(2):  # rows built, then copied
            guided.fill_next_token_bitmasks(matchers, bitmask)
            got = bitmask.numpy() if isinstance(bitmask, torch.Tensor) else bitmask
            for k, m in enumerate(matchers):
                assert got[k].tolist() == _one_by_one([m], words * 32)[0].tolist()
            assert not got[:, -3:].any()
    assert done.allowed_token_ids() == [eos]


def _tokens(vocab, text: bytes) -> list[int]:
    """The single-byte tokens spelling ``text``."""
    return [vocab.token_bytes.index(bytes([b])) for b in text]


def test_a_failing_row_raises_and_the_other_threads_finish(smollm2_vocab):
    class Broken(guided.Matcher):
        guide = None

        def fill_next_token_bitmask(self, bitmask, index=0):
            raise RuntimeError("broken matcher")

    matchers = _batch(smollm2_vocab, 4)
    bitmask = guided.allocate_token_bitmask(len(matchers) + 1, smollm2_vocab.size)
    with pytest.raises(RuntimeError, match="broken matcher"):
        guided.fill_next_token_bitmasks(matchers + [Broken()], bitmask, threads=2)
    guided.fill_next_token_bitmasks(matchers, bitmask, threads=2)
    assert np.array_equal(bitmask.numpy()[: len(matchers)], _one_by_one(matchers, smollm2_vocab.size))


def test_rows_follow_indices_and_rows_without_a_matcher_stay(smollm2_vocab):
    matchers = _batch(smollm2_vocab, 1)[:6]
    want = _one_by_one(matchers, smollm2_vocab.size)
    bitmask = guided.allocate_token_bitmask(8, smollm2_vocab.size)
    bitmask[7] = 5  # left as it is: no matcher there
    order = [6, 0, 1, 4, 3, 2]
    guided.fill_next_token_bitmasks(matchers + [None], bitmask, indices=order + [7], threads=2)
    assert np.array_equal(bitmask.numpy()[order], want)
    assert (bitmask[5] == -1).all() and (bitmask[7] == 5).all()
    with pytest.raises(ValueError, match="indices"):
        guided.fill_next_token_bitmasks(matchers, bitmask, indices=[0])


def test_callers_filling_batches_at_once_over_shared_guides(smollm2_vocab):
    """Four callers each fill a batch of matchers over the same guides, two threads
    each: every row equals the one-by-one fill."""
    guides = [_compile_uncached(guided.specs.as_spec(s), smollm2_vocab, False) for s in SPECS.values()]
    rng = random.Random(2)
    sequences = []
    for g in guides:
        for _ in range(4):
            m, seq = g.matcher(), []
            for _ in range(rng.randrange(8)):
                allowed = [t for t in m.allowed_token_ids() if t not in g.eos_token_ids]
                if not allowed:
                    break
                seq.append(rng.choice(allowed))
                m.accept_token(seq[-1])
            sequences.append((g, seq))
    reference = [_compile_uncached(guided.specs.as_spec(s), smollm2_vocab, False) for s in SPECS.values()]

    def matchers_on(gs):
        out = []
        for g, seq in sequences:
            m = gs[guides.index(g)].matcher()
            assert m.accept_tokens(seq)
            out.append(m)
        return out

    want = _one_by_one(matchers_on(reference), smollm2_vocab.size)
    results, errors = [], []

    def work():
        try:
            bitmask = guided.allocate_token_bitmask(len(sequences), smollm2_vocab.size)
            results.append(guided.fill_next_token_bitmasks(matchers_on(guides), bitmask, threads=2).numpy())
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    callers = [threading.Thread(target=work) for _ in range(4)]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert not errors and len(results) == 4
    assert all(np.array_equal(r, want) for r in results)


def test_the_logits_processor_masks_through_the_batch_fill(smollm2_vocab):
    guide = guided.compile(SPECS["regex"], smollm2_vocab)
    processor = guided.LogitsProcessor(guide)
    scores = torch.zeros(2, smollm2_vocab.size)
    processor(torch.zeros(2, 3, dtype=torch.long), scores)
    allowed = torch.isfinite(scores[0])
    assert allowed.sum() > 0 and torch.equal(allowed, torch.isfinite(scores[1]))
    assert all(chr(c) in "abcdefghijklmnopqrstuvwxyz" for t in allowed.nonzero().flatten().tolist()
               for c in smollm2_vocab.token_bytes[t][:1])
