"""The token-level matcher agrees with ``re.fullmatch`` for every tokenizer family.

Strings come from hypothesis (matching) and from mutations (mostly non-matching);
each is fed as the tokenizer's own encoding and as random segmentations into any
vocabulary tokens, and every step checks that the mask and ``accept_token`` agree.
"""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guided
from guided.matcher import FSMGuide, FSMMatcher

try:
    from tests import tokenizer_zoo
except ImportError:
    import tokenizer_zoo

PATTERNS = [
    r"\(\d{3}\) \d{3}-\d{4}",
    r"\d{4}-\d{2}-\d{2}",
    r"[a-z]+@[a-z]+\.(com|org)",
    r"(true|false|null)",
    r' ?"[^"\\]{0,12}"',
    r"-?\d+(\.\d+)?",
    r"(café|naïve|日本語|Ünïcödé) ?[0-9]",
    r"[🎉👍🏽]{1,3}!",
    r"[\u4e00-\u9fff]{1,4}",
    r"\w{1,6}( \w{1,6}){0,2}",
    r"(?s:.{0,10})",
]

FAMILIES = [name for name, _ in tokenizer_zoo.ALL_FAMILIES]


def _load(name):
    loader = dict(tokenizer_zoo.ALL_FAMILIES)[name]
    tok = loader()
    return tok, guided.Vocabulary.from_tokenizer(tok)


class Segmenter:
    """Random segmentations of a byte string into vocabulary tokens."""

    def __init__(self, vocab):
        self.by_bytes: dict[bytes, list[int]] = {}
        for i, b in enumerate(vocab.token_bytes):
            if b:
                self.by_bytes.setdefault(b, []).append(i)
        self.max_len = max(map(len, self.by_bytes))

    def segment(self, data: bytes, rng: random.Random) -> list[int] | None:
        # Walk back from the end so that every prefix chosen can be completed.
        n = len(data)
        reachable = [False] * (n + 1)
        reachable[n] = True
        for i in range(n - 1, -1, -1):
            reachable[i] = any(
                reachable[i + k] and data[i : i + k] in self.by_bytes
                for k in range(1, min(self.max_len, n - i) + 1)
            )
        if not reachable[0]:
            return None  # a byte no token has (SmolLM2 lacks 21 of them)
        ids, i = [], 0
        while i < n:
            options = [
                k for k in range(1, min(self.max_len, n - i) + 1)
                if reachable[i + k] and data[i : i + k] in self.by_bytes
            ]
            k = rng.choice(options)
            ids.append(rng.choice(self.by_bytes[data[i : i + k]]))
            i += k
        return ids


_segmenters: dict[str, Segmenter] = {}


def segmenter(name, vocab):
    if name not in _segmenters:
        _segmenters[name] = Segmenter(vocab)
    return _segmenters[name]


def canonical_ids(tok, vocab, text):
    """The tokenizer's own encoding, when its bytes are exactly ``text``."""
    if hasattr(tok, "encode_ordinary"):  # tiktoken
        ids = tok.encode_ordinary(text)
    else:
        ids = tok.encode(text, add_special_tokens=False)
    return ids if vocab.decode(ids) == text.encode() else None


def run_matcher(guide, ids):
    """Feed ``ids``; check mask/accept agreement at each step. Returns is_accepting."""
    m = guide.matcher()
    bitmask = guided.allocate_token_bitmask(1, guide.vocab_size)
    for t in ids:
        m.fill_next_token_bitmask(bitmask)
        allowed = bool((int(bitmask[0, t >> 5]) >> (t & 31)) & 1)
        accepted = m.accept_token(t)
        assert allowed == accepted, f"mask says {allowed} but accept_token says {accepted} for {t}"
        if not accepted:
            return False
    m.fill_next_token_bitmask(bitmask)
    eos = guide.eos_token_ids[0]
    eos_allowed = bool((int(bitmask[0, eos >> 5]) >> (eos & 31)) & 1)
    assert eos_allowed == m.is_accepting()
    return m.is_accepting()


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_token_level_agreement(family, pattern, data):
    tok, vocab = _load(family)
    guide = guided.compile(guided.Regex(pattern), vocab)
    seg = segmenter(family, vocab)
    rng = random.Random(f"{family}{pattern}")
    s = data.draw(st.from_regex(pattern, fullmatch=True))
    candidates = [s] + [_mutate(s, rng) for _ in range(3)]
    for text in candidates:
        expected = re.fullmatch(pattern, text) is not None
        canon = canonical_ids(tok, vocab, text)
        if canon is not None:
            assert run_matcher(guide, canon) == expected, (text, canon)
        for _ in range(3):
            ids = seg.segment(text.encode(), rng)
            if ids is None:
                continue
            assert run_matcher(guide, ids) == expected, (text, ids)


def _mutate(s: str, rng: random.Random) -> str:
    chars = "a0 -.\"é日🎉\n"
    i = rng.randrange(len(s) + 1)
    kind = rng.randrange(3)
    if kind == 0 or not s:
        return s[:i] + rng.choice(chars) + s[i:]
    i = min(i, len(s) - 1)
    return s[:i] + (rng.choice(chars) if kind == 1 else "") + s[i + 1 :]


@pytest.mark.parametrize("family", FAMILIES)
def test_mask_matches_brute_force(family):
    """Every allowed/forbidden bit equals stepping that token's bytes through the DFA."""
    _, vocab = _load(family)
    guide = guided.compile(guided.Regex(r"(\d+|[a-zé]{2,5}) ?"), vocab)
    dfa = guide.dfa
    for state in range(dfa.num_states):
        m = FSMMatcher(guide, [state])
        allowed = np.zeros(vocab.size, dtype=bool)
        allowed[m.allowed_token_ids()] = True
        for t, b in enumerate(vocab.token_bytes):
            if b is None:
                want = t in vocab.eos_token_ids and bool(dfa.accepting[state])
            else:
                want = dfa.step(state, b) >= 0
            assert allowed[t] == want, (state, t, b)


@pytest.mark.parametrize("pattern", [
    r'"([^"\\]|\\.)*"( [a-z ]{0,50})?',   # a free string: its subtree is taken whole
    r'\{"(a[bc]|[^"\\a]+)":[ -~]{3,70}\}',  # a key that is any string but a few; counted text
])
def test_plain_subtree_shortcut_matches_brute_force(smollm2_vocab, pattern):
    """Rows computed by stopping the walk where every plain token is allowed (a free
    string, a counted one with room left) equal stepping every token's bytes."""
    vocab = smollm2_vocab
    guide = FSMGuide(guided.compile(guided.Regex(pattern), vocab).dfa, vocab, eager=False)
    dfa = guide.dfa
    rng = random.Random(0)
    states = sorted(set(range(min(dfa.num_states, 6))) | set(rng.sample(range(dfa.num_states), min(dfa.num_states, 10))))
    for state in states:
        row = guide.row(state)
        allowed = (row[np.arange(vocab.size) >> 5] >> (np.arange(vocab.size) & 31)) & 1
        for t, b in enumerate(vocab.token_bytes):
            want = dfa.step(state, b) >= 0 if b else (t in vocab.eos_token_ids and bool(dfa.accepting[state]))
            assert allowed[t] == want, (pattern, state, t, b)


def test_special_tokens_never_allowed(smollm2_vocab):
    guide = guided.compile(guided.Regex(r"(?s:.*)"), smollm2_vocab)
    allowed = set(guide.matcher().allowed_token_ids())
    specials = smollm2_vocab.special_token_ids - set(smollm2_vocab.eos_token_ids)
    assert specials and not (allowed & specials)
    assert set(smollm2_vocab.eos_token_ids) <= allowed  # the empty string matches


def test_padded_vocabulary_ids_never_allowed(smollm2_vocab):
    guide = guided.compile(guided.Regex(r"(?s:.*)"), smollm2_vocab)
    padded = smollm2_vocab.size + 100
    bitmask = guided.allocate_token_bitmask(2, padded)
    guide.matcher().fill_next_token_bitmask(bitmask, 1)
    logits = torch.zeros(2, padded)
    guided.apply_token_bitmask_(logits, bitmask)
    assert torch.isinf(logits[1, smollm2_vocab.size :]).all()
    assert torch.isfinite(logits[0]).all()  # row 0 was not filled: all allowed


def test_eos_only_where_accepting(smollm2_vocab, smollm2_tokenizer):
    guide = guided.compile(guided.Regex(r"ab(c)?"), smollm2_vocab)
    m = guide.matcher()
    eos = smollm2_vocab.eos_token_ids[0]
    assert not m.accept_token(eos)
    for t in smollm2_tokenizer.encode("ab", add_special_tokens=False):
        assert m.accept_token(t)
    assert m.is_accepting() and not m.is_terminated()
    assert eos in m.allowed_token_ids()
    assert m.accept_token(eos)
    assert m.is_terminated()
    assert m.allowed_token_ids() == list(smollm2_vocab.eos_token_ids)
    assert not m.accept_token(smollm2_tokenizer.encode("c", add_special_tokens=False)[0])


def test_refused_token_leaves_state_unchanged(smollm2_vocab, smollm2_tokenizer):
    guide = guided.compile(guided.Regex(r"\d{3}"), smollm2_vocab)
    m = guide.matcher()
    before = m.allowed_token_ids()
    assert not m.accept_token(smollm2_tokenizer.encode("x", add_special_tokens=False)[0])
    assert not m.accept_token(smollm2_vocab.size + 5)  # padding id
    assert not m.accept_token(1)  # a special token
    assert m.num_tokens == 0 and m.allowed_token_ids() == before


def test_rollback_and_fork_restore_masks(smollm2_vocab, smollm2_tokenizer):
    guide = guided.compile(guided.Regex(r"[a-z]{1,6}( [a-z]{1,6}){0,3}"), smollm2_vocab, eager=False)
    ids = smollm2_tokenizer.encode("hello big world", add_special_tokens=False)
    m = guide.matcher()
    masks = [m.allowed_token_ids()]
    for t in ids:
        assert m.accept_token(t)
        masks.append(m.allowed_token_ids())
    f = m.fork()
    for k in range(len(ids), 0, -1):
        m.rollback(1)
        assert m.allowed_token_ids() == masks[k - 1]
    assert f.allowed_token_ids() == masks[-1]  # the fork did not move
    assert f.accept_tokens(smollm2_tokenizer.encode(" ab", add_special_tokens=False))
    with pytest.raises(ValueError):
        m.rollback(1)


def test_accept_tokens_is_all_or_nothing(smollm2_vocab, smollm2_tokenizer):
    guide = guided.compile(guided.Regex(r"abc"), smollm2_vocab)
    m = guide.matcher()
    ids = smollm2_tokenizer.encode("abx", add_special_tokens=False)
    assert not m.accept_tokens(ids)
    assert m.num_tokens == 0


def test_lazy_and_eager_index_agree(smollm2_vocab):
    pattern = r"[a-z]{2,4}-\d{1,3}"
    lazy = FSMGuide(guided.compile(guided.Regex(pattern), smollm2_vocab).dfa, smollm2_vocab, eager=False)
    eager = FSMGuide(lazy.dfa, smollm2_vocab, eager=True)
    assert eager.index.complete
    for s in range(lazy.dfa.num_states):
        assert (lazy.row(s) == eager.row(s)).all()
    assert lazy.index.complete
    assert lazy.index.num_rows == eager.index.num_rows  # identical rows are shared


def test_string_spec_needs_regex_wrapper(smollm2_vocab):
    with pytest.raises(TypeError, match="guided.Regex"):
        guided.compile(r"\d+", smollm2_vocab)
