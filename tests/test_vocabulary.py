"""Vocabulary: exact bytes per token for every tokenizer family."""

from __future__ import annotations

import numpy as np
import pytest

from guided.fsm.vocabulary import Vocabulary

try:
    from tests import tokenizer_zoo as zoo
except ImportError:  # tests/ itself on sys.path
    import tokenizer_zoo as zoo


TRICKY = [
    "Hello, world!",
    "  leading and trailing spaces  ",
    " x",
    "line1\nline2\r\n\ttabbed\t\n\n",
    "naïve café",
    "日本語のテキスト 中文 한국어",
    "🎉👍🏽",
    "\x01\x07\x1b[31m red \x7f\x0c\x0b",
    "mixed: a=1; b='x' # ü ∑ 𝔘 \u00a0nbsp\u200b",
    '{"key": [1, 2.5, null], "s": "\\n"}',
    "don't   I'll 12345678 0xDEADBEEF",
]

SENTENCEPIECE = {"mistral"}


def is_tiktoken(tok) -> bool:
    try:
        import tiktoken
    except ImportError:
        return False
    return isinstance(tok, tiktoken.Encoding)


def encode(tok, text: str) -> list[int]:
    if is_tiktoken(tok):
        return tok.encode(text)
    return tok.encode(text, add_special_tokens=False)


def tok_len(tok) -> int:
    return tok.n_vocab if is_tiktoken(tok) else len(tok)


@pytest.fixture(scope="module", params=zoo.ALL_FAMILIES, ids=[n for n, _ in zoo.ALL_FAMILIES])
def family(request):
    name, loader = request.param
    tok = loader()
    return name, tok, Vocabulary.from_tokenizer(tok)


# ------------------------------------------------------------------ every family

@pytest.mark.parametrize("text", TRICKY)
def test_token_bytes_concatenate_to_utf8(family, text):
    name, tok, vocab = family
    ids = encode(tok, text)
    assert ids, text
    for i in ids:
        assert vocab.token_bytes[i] is not None, (name, i, text)
    expected = text.encode("utf-8")
    got = vocab.decode(ids)
    assert got == b"".join(vocab.token_bytes[i] for i in ids)
    if name in SENTENCEPIECE:  # the Metaspace pre-tokenizer prepends "▁"
        assert got in (expected, b" " + expected), (got, expected)
    else:
        assert got == expected


def test_size_is_tokenizer_length(family):
    _, tok, vocab = family
    assert vocab.size == tok_len(tok) == len(vocab) == len(vocab.token_bytes)


def test_eos_ids(family):
    _, tok, vocab = family
    assert vocab.eos_token_ids
    assert list(vocab.eos_token_ids) == sorted(set(vocab.eos_token_ids))
    for e in vocab.eos_token_ids:
        assert 0 <= e < vocab.size
        assert vocab.token_bytes[e] is None
        assert e in vocab.special_token_ids
    if not is_tiktoken(tok):
        assert tok.eos_token_id in vocab.eos_token_ids


def test_special_tokens_are_none(family):
    _, tok, vocab = family
    if is_tiktoken(tok):
        specials = [tok.encode_single_token(s) for s in tok.special_tokens_set]
    else:
        specials = list(tok.all_special_ids)
        specials += [i for i, at in tok.added_tokens_decoder.items() if at.special]
    assert specials
    for i in specials:
        assert vocab.token_bytes[i] is None, i
    assert vocab.special_token_ids == frozenset(i for i, b in enumerate(vocab.token_bytes) if b is None)
    # Nearly everything is text.
    assert len(vocab.special_token_ids) < 0.05 * vocab.size


# Bytes that no token of the tokenizer spells (its vocabulary lacks them; the HF
# tokenizer silently drops such characters).  SmolLM2's BPE alphabet has no token for a
# few rare control bytes and for bytes that never / rarely occur in UTF-8.
KNOWN_BYTE_GAPS = {
    "smollm2": {0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1, 0xF1, 0xF2} | set(range(0xF5, 0x100)),
}


def test_every_byte_is_a_token(family):
    name, tok, vocab = family
    singles = {b[0] for b in vocab.token_bytes if b is not None and len(b) == 1}
    assert singles == set(range(256)) - KNOWN_BYTE_GAPS.get(name, set())
    if name in KNOWN_BYTE_GAPS and not is_tiktoken(tok):
        # the gaps are the tokenizer's, not a mapping loss: their GPT-2 characters are absent
        from guided.fsm.vocabulary import _BYTE_ENCODER

        vmap = tok.get_vocab()
        assert not any(_BYTE_ENCODER[b] in vmap for b in KNOWN_BYTE_GAPS[name])


def test_no_empty_text_tokens(family):
    _, _, vocab = family
    assert all(b != b"" for b in vocab.token_bytes)


def test_cache_returns_same_object(family):
    _, tok, vocab = family
    again = Vocabulary.from_tokenizer(tok)
    assert again is vocab
    assert Vocabulary.from_tokenizer(vocab) is vocab


def test_fingerprint_is_content_hash(family):
    _, _, vocab = family
    rebuilt = Vocabulary(vocab.token_bytes, vocab.eos_token_ids, name="copy")
    assert rebuilt.fingerprint == vocab.fingerprint
    assert len(vocab.fingerprint) == 64 and int(vocab.fingerprint, 16) >= 0
    other = Vocabulary(vocab.token_bytes, [e for e in range(vocab.size) if vocab.token_bytes[e] is None][:1])
    if other.eos_token_ids != vocab.eos_token_ids:
        assert other.fingerprint != vocab.fingerprint


# ------------------------------------------------------------------ family specifics

def test_byte_level_space_and_newline():
    tok = zoo.smollm2()
    vocab = Vocabulary.from_tokenizer(tok)
    vmap = tok.get_vocab()
    assert vocab.token_bytes[vmap["Ġ"]] == b" "
    assert vocab.token_bytes[vmap["Ċ"]] == b"\n"
    assert vocab.token_bytes[vmap["Ġthe"]] == b" the"
    assert vocab.eos_token_ids == (vmap["<|im_end|>"],)
    for s in ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>"):
        assert vocab.token_bytes[vmap[s]] is None


def test_sentencepiece_byte_fallback_and_metaspace():
    tok = zoo.mistral()
    vocab = Vocabulary.from_tokenizer(tok)
    vmap = tok.get_vocab()
    assert vocab.token_bytes[vmap["<0x0A>"]] == b"\n"
    assert vocab.token_bytes[vmap["<0x00>"]] == b"\x00"
    assert vocab.token_bytes[vmap["<0xFF>"]] == b"\xff"
    assert vocab.token_bytes[vmap["▁"]] == b" "
    assert vocab.token_bytes[vmap["▁Hello"]] == b" Hello"  # no leading-space stripping
    for s in ("<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]"):
        assert vocab.token_bytes[vmap[s]] is None, s
    assert vocab.eos_token_ids == (vmap["</s>"],)
    ids = tok.encode("Hello", add_special_tokens=False)
    assert vocab.decode(ids) == b" Hello"


def test_sentencepiece_slow_tokenizer_matches_fast():
    pytest.importorskip("sentencepiece")
    try:
        from transformers.tokenization_utils_sentencepiece import SentencePieceBackend
    except ImportError:
        pytest.skip("transformers has no SentencePieceBackend")
    fast = Vocabulary.from_tokenizer(zoo.mistral())
    slow_tok = SentencePieceBackend(
        vocab_file=str(zoo.mistral_model_file()), bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    slow = Vocabulary.from_tokenizer(slow_tok)
    assert slow.fingerprint == fast.fingerprint
    assert slow is fast  # same content -> same object


def test_llama3_eos_includes_end_of_turn():
    tok = zoo.llama3()
    vocab = Vocabulary.from_tokenizer(tok)
    vmap = tok.get_vocab()
    assert set(vocab.eos_token_ids) == {vmap["<|end_of_text|>"], vmap["<|eot_id|>"]}
    assert vocab.token_bytes[vmap["<|begin_of_text|>"]] is None
    assert vocab.token_bytes[vmap["<|reserved_special_token_0|>"]] is None
    assert vocab.size == 128256


def test_deepseek_added_tokens():
    tok = zoo.deepseek()
    vocab = Vocabulary.from_tokenizer(tok)
    added = tok.backend_tokenizer.get_added_tokens_decoder()
    by_content = {at.content: i for i, at in added.items()}
    # non-special control-looking markers are never text
    for s in ("<｜User｜>", "<｜Assistant｜>", "<|EOT|>", "<｜fim▁begin｜>", "<｜place▁holder▁no▁0｜>"):
        assert vocab.token_bytes[by_content[s]] is None, s
    # non-special normal-text added tokens are their raw UTF-8 (not byte-level decoded)
    assert vocab.token_bytes[by_content["<think>"]] == b"<think>"
    assert vocab.token_bytes[by_content["｜DSML｜"]] == "｜DSML｜".encode()
    assert vocab.eos_token_ids == (by_content["<｜end▁of▁sentence｜>"],)


def test_same_content_same_object():
    tok = zoo.deepseek()
    bare = tok.backend_tokenizer  # a tokenizers.Tokenizer with the same content
    assert Vocabulary.from_tokenizer(bare) is Vocabulary.from_tokenizer(tok)


def test_tiktoken_specials_and_gaps():
    tiktoken = pytest.importorskip("tiktoken")
    ranks = {bytes([i]): i for i in range(256)}
    ranks[b"ab"] = 300
    enc = tiktoken.Encoding(
        name="gappy", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={"<|endoftext|>": 301}
    )
    vocab = Vocabulary.from_tokenizer(enc)
    assert vocab.size == 302 and vocab.name == "tiktoken:gappy"
    assert vocab.token_bytes[300] == b"ab"
    assert all(vocab.token_bytes[i] is None for i in range(256, 300))
    assert vocab.eos_token_ids == (301,) and vocab.token_bytes[301] is None
    assert vocab.decode(enc.encode("abc") + [301]) == b"abc"


def test_qwen_tiktoken():
    enc = zoo.qwen_tiktoken()
    vocab = Vocabulary.from_tokenizer(enc)
    assert vocab.eos_token_ids == (enc.encode_single_token("<|endoftext|>"),)
    assert vocab.name == "tiktoken:qwen"
    assert vocab.token_bytes[enc.encode_single_token("<|im_end|>")] is None


def _tiny_byte_level_tokenizer():
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import AddedToken, decoders, models, pre_tokenizers

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {c: i for i, c in enumerate(sorted(alphabet))}
    vocab["Ġh"] = len(vocab)
    tok = tokenizers.Tokenizer(models.BPE(vocab, [("Ġ", "h")]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_tokens(["hello world", "<|marker|>", AddedToken("<unk>", special=False)])
    tok.add_special_tokens(["<|stop|>"])
    return tok


def test_added_tokens_raw_tokenizer():
    tok = _tiny_byte_level_tokenizer()
    v = tok.get_vocab(with_added_tokens=True)
    with pytest.raises(ValueError, match="EOS"):
        Vocabulary.from_tokenizer(tok)
    vocab = Vocabulary.from_tokenizer(tok, eos_token_ids=[v["<|stop|>"]])
    assert vocab.name == "tokenizers.Tokenizer"
    assert vocab.size == tok.get_vocab_size(with_added_tokens=True)
    assert vocab.token_bytes[v["Ġh"]] == b" h"
    assert vocab.token_bytes[v["hello world"]] == b"hello world"  # raw content, not byte-level
    assert vocab.token_bytes[v["<|marker|>"]] is None
    assert vocab.token_bytes[v["<unk>"]] is None
    assert vocab.token_bytes[v["<|stop|>"]] is None
    assert vocab.decode(tok.encode(" hhello world").ids) == b" hhello world"
    # explicit EOS ids are part of the cache key
    other = Vocabulary.from_tokenizer(tok, eos_token_ids=[v["<|marker|>"]])
    assert other is not vocab and other.eos_token_ids == (v["<|marker|>"],)


def test_cache_sees_added_tokens():
    tok = _tiny_byte_level_tokenizer()
    eos = [tok.token_to_id("<|stop|>")]
    first = Vocabulary.from_tokenizer(tok, eos_token_ids=eos)
    assert Vocabulary.from_tokenizer(tok, eos_token_ids=eos) is first
    tok.add_tokens(["brand new"])
    second = Vocabulary.from_tokenizer(tok, eos_token_ids=eos)
    assert second is not first and second.size == first.size + 1
    assert second.token_bytes[tok.token_to_id("brand new")] == b"brand new"


def test_explicit_eos_wins():
    tok = zoo.smollm2()
    vmap = tok.get_vocab()
    vocab = Vocabulary.from_tokenizer(tok, eos_token_ids=[vmap["<|endoftext|>"], vmap["<|im_end|>"]])
    assert vocab.eos_token_ids == tuple(sorted((vmap["<|endoftext|>"], vmap["<|im_end|>"])))
    assert vocab is not Vocabulary.from_tokenizer(tok)


# ------------------------------------------------------------------ errors

def test_hf_tokenizer_without_eos_raises():
    tok = zoo.deepseek_without_eos()
    with pytest.raises(ValueError, match="no EOS token; pass eos_token_ids"):
        Vocabulary.from_tokenizer(tok)
    vocab = Vocabulary.from_tokenizer(tok, eos_token_ids=[1])
    assert vocab.eos_token_ids == (1,)


def test_tiktoken_without_eos_raises():
    tiktoken = pytest.importorskip("tiktoken")
    enc = tiktoken.Encoding(
        name="noeos", pat_str=r"\S+|\s+", mergeable_ranks={bytes([i]): i for i in range(256)}, special_tokens={}
    )
    with pytest.raises(ValueError, match="EOS"):
        Vocabulary.from_tokenizer(enc)


def test_custom_vocabulary_validation():
    with pytest.raises(ValueError, match="no EOS token; pass eos_token_ids"):
        Vocabulary([b"a", b"b"], [])
    with pytest.raises(ValueError, match="EOS"):
        Vocabulary([b"a", b"b"], None)
    with pytest.raises(ValueError, match="out of range"):
        Vocabulary([b"a", b"b"], [2])
    with pytest.raises(ValueError, match="out of range"):
        Vocabulary([b"a", b"b"], [-1])
    with pytest.raises(ValueError, match=r"token_bytes\[1\]"):
        Vocabulary([b"a", "b", None], [2])


def test_custom_vocabulary_basics():
    v = Vocabulary([b"a", b"b", b" ab", None, bytearray(b"\xff")], eos_token_ids=[3])
    assert v.size == len(v) == 5
    assert v.token_bytes[4] == b"\xff" and type(v.token_bytes[4]) is bytes
    assert v.special_token_ids == frozenset({3})
    assert v.decode([2, 0, 3, 4]) == b" aba\xff"
    with pytest.raises(ValueError):
        v.decode([5])
    # the EOS token is never text, even if bytes were given for it
    w = Vocabulary([b"a", b"b"], eos_token_ids=[1])
    assert w.token_bytes[1] is None and w.special_token_ids == frozenset({1})
    # fingerprint is stable across runs (a pure function of the content)
    assert Vocabulary([b"a", None], [1]).fingerprint == Vocabulary([b"a", b"z"], [1]).fingerprint
    assert Vocabulary([b"a", None], [1]).fingerprint == (
        "c9ef23df60ead390f9958fc2d1f849e0da21823af4e807ef10a9670c71c700bd"
    )


def test_wordpiece_is_rejected():
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models

    tok = tokenizers.Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1, "##b": 2}, unk_token="[UNK]"))
    with pytest.raises(ValueError, match="WordPiece"):
        Vocabulary.from_tokenizer(tok)
    tok2 = tokenizers.Tokenizer(models.BPE({"a": 0, "b": 1}, []))
    tok2.decoder = decoders.WordPiece()
    with pytest.raises(ValueError, match="WordPiece"):
        Vocabulary.from_tokenizer(tok2)


def test_unsupported_object_is_rejected():
    with pytest.raises(ValueError, match="unsupported tokenizer type"):
        Vocabulary.from_tokenizer(object())


# ------------------------------------------------------------------ bare tokenizers

def test_bare_tokenizers_object():
    """A bare ``tokenizers.Tokenizer`` (no HF wrapper) gives the same bytes."""
    tokenizers = pytest.importorskip("tokenizers")
    wrapped = zoo.deepseek()
    bare = tokenizers.Tokenizer.from_str(wrapped.backend_tokenizer.to_str())
    vocab = Vocabulary.from_tokenizer(bare)
    ref = Vocabulary.from_tokenizer(wrapped)
    assert vocab.size == ref.size
    assert vocab.token_bytes[1000:5000] == ref.token_bytes[1000:5000]


@pytest.mark.parametrize("count", [0, 1, 37, 499, 501, 5_000, 49_152])
def test_set_bits_sets_exactly_the_given_tokens(count):
    """Rows are built by scattering bits for few tokens and by packing a bool row for
    many: both give bit t % 32 of word t // 32 for each token t, and keep bits
    already set."""
    from guided.fsm.trie import set_bits

    rng = np.random.default_rng(count)
    vocab, words = 49_152, 1_536
    tokens = rng.choice(vocab, count, replace=False).astype(np.int64)
    row = np.zeros(words, dtype=np.uint32)
    row[0] = 1 << 3  # a bit set before
    set_bits(row, tokens)
    got = np.unpackbits(row.view(np.uint8), bitorder="little").astype(bool)
    want = np.zeros(vocab, dtype=bool)
    want[tokens] = True
    want[3] = True
    assert (got == want).all()
