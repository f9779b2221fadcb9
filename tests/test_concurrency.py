"""One guide shared by many threads: masks equal a single-threaded replay.

``guided.compile`` hands every caller the same cached guide, and servers call it
from thread pools, so a guide of every kind must serve any number of threads, each
with its own matchers, while it builds its masks lazily.
"""

from __future__ import annotations

import random
import sys
import threading

import numpy as np
import pytest

import guided
from guided.bitmask import allocate_token_bitmask
from guided.compiler import _compile_uncached

_LARGE = {"type": "object", "required": ["k1", "k2"], "properties": {
    f"k{i}": ({"type": "string", "pattern": f"^[a-{chr(98 + i % 20)}]{{{i % 3 + 1},{i % 7 + 3}}}$"} if i % 3
              else {"type": "integer", "minimum": i, "maximum": 1000 * i + 7}) for i in range(30)}}

SPECS = {
    "lark grammar": guided.Grammar.from_name("json"),
    "recursive schema": guided.JsonSchema({
        "type": "object", "required": ["name"],
        "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}}}),
    "large lazy schema": guided.JsonSchema(_LARGE),
    "regex": guided.Regex(r"[a-z]{1,10}@[a-z]{2,8}\.(com|org|net)( [0-9]{3,5})*"),
    "unique items": guided.JsonSchema({"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
}


def _mask(matcher, vocab_size: int) -> np.ndarray:
    bitmask = allocate_token_bitmask(1, vocab_size)
    matcher.fill_next_token_bitmask(bitmask, 0)
    return bitmask[0].numpy().copy()


def _walks(guide, count: int, length: int, seed: int) -> list[tuple[list[int], list[np.ndarray]]]:
    """Random walks over allowed tokens (EOS left out), with the mask at each step."""
    rng = random.Random(seed)
    eos = set(guide.eos_token_ids)
    walks = []
    for _ in range(count):
        m, seq, masks = guide.matcher(), [], []
        for _ in range(length):
            mask = _mask(m, guide.vocab_size)
            masks.append(mask)
            bits = np.unpackbits(mask.view(np.uint8), bitorder="little")[: guide.vocab_size]
            allowed = [t for t in np.flatnonzero(bits).tolist() if t not in eos]
            if not allowed:
                break
            seq.append(rng.choice(allowed))
            assert m.accept_token(seq[-1])
        walks.append((seq, masks))
    return walks


def _replay_differs(guide, seq: list[int], want: list[np.ndarray]) -> bool:
    m = guide.matcher()
    for token, mask in zip(seq, want):
        if not (_mask(m, guide.vocab_size) == mask).all() or not m.accept_token(token):
            return True
    return False


@pytest.fixture
def frequent_switches():
    """Threads switch every microsecond rather than every 5 ms: races show."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


@pytest.mark.parametrize("name", list(SPECS))
def test_threads_sharing_a_guide_see_single_threaded_masks(smollm2_vocab, name, frequent_switches):
    """8 threads replay the same walks in different orders through one fresh guide
    (lazy, so they race to build it); every mask equals the single-threaded one,
    during and after, and nothing raises."""
    spec = guided.specs.as_spec(SPECS[name])
    walks = _walks(_compile_uncached(spec, smollm2_vocab, False), count=16, length=16, seed=1)
    for rounds in range(5):
        shared = _compile_uncached(spec, smollm2_vocab, False)
        wrong, errors = [], []

        def work(k: int) -> None:
            order = list(range(len(walks)))
            random.Random(k + 10 * rounds).shuffle(order)
            try:
                wrong.extend(i for i in order if _replay_differs(shared, *walks[i]))
            except Exception as e:  # noqa: BLE001 - reported by the assertion
                errors.append(repr(e))

        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors and not wrong, (name, errors[:2], wrong[:5])
        assert not any(_replay_differs(shared, seq, want) for seq, want in walks), name


def test_callers_of_one_spec_share_one_compile(smollm2_vocab):
    """Threads compiling the same (uncached) spec at once get one guide."""
    guided.clear_cache()
    spec = guided.Regex(r"[a-z]{2,9}-[0-9]{4}")
    got = []
    threads = [threading.Thread(target=lambda: got.append(guided.compile(spec, smollm2_vocab))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and all(g is got[0] for g in got)
    assert guided.cache_info()["misses"] == 1


def test_a_failed_compile_is_not_cached_and_waiters_get_its_error(smollm2_vocab):
    """A spec that fails (here by its time limit) leaves nothing in the cache; a
    later compile with room succeeds."""
    guided.clear_cache()
    spec = guided.Regex(r"\w{300}x|\w{200}(ab|c)+")
    with pytest.raises(guided.CompileTimeoutError):
        guided.compile(spec, smollm2_vocab, timeout=0.05)
    assert guided.cache_info()["entries"] == 0
    guide = guided.compile(spec, smollm2_vocab, timeout=None)
    assert guided.compile(spec, smollm2_vocab) is guide
