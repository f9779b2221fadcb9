"""Token id -> exact bytes, for every tokenizer family.

Everything downstream of this module (regex DFAs, token indexes, bitmasks) works on
*bytes*: a token is the byte string it appends to the output.  This module is the one
place that knows how each tokenizer family spells its tokens, and turns every
vocabulary into ``Vocabulary.token_bytes``: a list indexed by token id whose entries are
the token's exact bytes, or ``None`` for ids that never produce text.

Families
--------
Byte-level BPE (GPT-2, SmolLM2, Llama-3, Qwen, DeepSeek, cl100k / o200k converted to
HF)
    The backend tokenizer's decoder (or, without a decoder, its pre-tokenizer) is
    ``ByteLevel``.  Every token string is written in GPT-2's byte-to-unicode alphabet
    (``"Ġ"`` is a space, ``"Ċ"`` a newline, ...); we map each character back to its byte.
    A token string with characters outside that alphabet is taken as its UTF-8 (this is
    what the ``tokenizers`` ByteLevel decoder itself does).

SentencePiece style (Llama-2, Mistral, Gemma; fast tokenizers converted from a
``tokenizer.model``, and slow ``sp_model`` based tokenizers)
    The decoder is ``Metaspace`` or ``Replace("▁" -> " ")`` (possibly inside a
    ``Sequence`` with ``ByteFallback`` / ``Fuse`` / ``Strip``).  ``"▁"`` is a space, so
    ``"▁Hello"`` is ``b" Hello"``; with byte fallback, ``<0xNN>`` is the single byte
    ``NN``.  The decoder's "strip one leading space" rule is *not* applied: the bytes are
    literal per token, so a generated text may start with a space that
    ``tokenizer.decode`` would hide.

Plain (BPE / Unigram / WordLevel without any decoder)
    Token strings are their own UTF-8.

``tiktoken.Encoding``
    ``decode_single_token_bytes``; its special tokens are never text, and ids in gaps of
    the rank table are ``None``.

Rules shared by all families
----------------------------
* Added tokens marked ``special``, and added non-special tokens that look like control
  markers (``<|...|>``, ``<｜...｜>``, ``<unk>``, ``<s>``, ``</s>``, ``<pad>``, ...),
  are ``None``.  Other added tokens are text: their content's UTF-8 (added-token content
  is raw text, never byte-level encoded).
* The unknown token, SentencePiece control / unknown / unused pieces, and the
  tokenizer's own special tokens (``all_special_ids``) are ``None``.
* EOS tokens are always ``None`` (ending the sequence is not text).
* ``size`` is ``len(tokenizer)``: the number of ids the *tokenizer* knows.  A model's
  embedding matrix may be larger (padded); ids ``>= size`` are never allowed.
* EOS ids: ``eos_token_ids`` if given; otherwise the tokenizer's ``eos_token_id`` plus
  the end-of-turn token of its chat template (``<|im_end|>``, ``<|eot_id|>``,
  ``<end_of_turn>``, ...) when the template uses one; for a ``tiktoken.Encoding`` or a
  bare ``tokenizers.Tokenizer``, the first of a few well-known end-of-text tokens
  (``<|endoftext|>``, ``</s>``, ...).  No EOS at all is a ``ValueError``.
* Unsupported tokenizers (WordPiece, CTC, ...) are a ``ValueError`` naming the type.

``Vocabulary.from_tokenizer`` caches: the same tokenizer object (unchanged in length
and EOS) returns the same ``Vocabulary`` object without rebuilding, and two tokenizers
with the same content share one ``Vocabulary`` object.
"""

from __future__ import annotations

import hashlib
import json
import operator
import re
import sys
import threading
import weakref
from array import array
from collections import OrderedDict
from typing import Any, Iterable, Optional, Sequence

__all__ = ["Vocabulary"]


# --------------------------------------------------------------------------- helpers

def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable unicode character map."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1)
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


_BYTE_ENCODER = _bytes_to_unicode()
# A str.translate table that maps each GPT-2 alphabet character to the latin-1 character
# of its byte, and characters below 256 that are *not* in the alphabet to U+FFFF so that
# the following .encode("latin-1") fails for them (instead of silently passing them).
_BYTE_LEVEL_TABLE: dict[int, Any] = {}
for _b, _c in _BYTE_ENCODER.items():
    _BYTE_LEVEL_TABLE[ord(_c)] = chr(_b)
for _o in range(256):
    if _o not in _BYTE_LEVEL_TABLE:
        _BYTE_LEVEL_TABLE[_o] = "\uffff"
del _b, _c, _o

_BYTE_FALLBACK_RE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")
_CONTROL_RE = re.compile(
    r"^(?:<\|.*\|>"  # <|im_end|>, <|endoftext|>, <|eot_id|>
    r"|<｜.*｜>"  # DeepSeek: <｜end▁of▁sentence｜>
    r"|</?(?:s|unk|pad|mask|bos|eos|cls|sep|sos|eot)>"
    r"|<(?:unused|extra_id_|reserved_special_token_)\d+>"
    r"|\[control_\d+\]"
    r"|\[/?[A-Z][A-Z0-9_]*\])$",  # Mistral: [INST], [/INST], [TOOL_CALLS], [REFERENCE_DOC_1]
    re.S,
)

# End-of-turn markers a chat template may use instead of (or besides) the EOS token.
_END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<end_of_turn>", "<|end|>", "<|EOT|>")
# EOS candidates for tokenizers that carry no eos_token (tiktoken, bare tokenizers.Tokenizer).
_EOS_GUESSES = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<｜end▁of▁sentence｜>")


def _looks_like_control(content: str) -> bool:
    return bool(_CONTROL_RE.match(content))


def _byte_level(token: str) -> bytes:
    try:
        return token.translate(_BYTE_LEVEL_TABLE).encode("latin-1")
    except UnicodeEncodeError:
        # Not in GPT-2's alphabet: the ByteLevel decoder falls back to the UTF-8.
        return token.encode("utf-8")


def _json_state(component: Any) -> Optional[dict]:
    if component is None:
        return None
    try:
        state = component.__getstate__()
        if isinstance(state, (bytes, bytearray)):
            state = state.decode("utf-8")
        return json.loads(state) if isinstance(state, str) else None
    except Exception:  # pragma: no cover - defensive
        return None


def _flatten(node: Optional[dict], key: str) -> list[dict]:
    if not node:
        return []
    if node.get("type") == "Sequence":
        out: list[dict] = []
        for sub in node.get(key) or []:
            out.extend(_flatten(sub, key))
        return out
    return [node]


def _fingerprint(size: int, token_bytes: Sequence[Optional[bytes]], eos: Iterable[int]) -> str:
    lengths = array("q", (-1 if b is None else len(b) for b in token_bytes))
    if sys.byteorder != "little":  # pragma: no cover
        lengths.byteswap()
    h = hashlib.sha256()
    h.update(b"guided.Vocabulary.v1\0")
    h.update(str(size).encode() + b"\0")
    h.update(lengths.tobytes())
    h.update(b"".join(b for b in token_bytes if b))
    h.update(b"\0eos:" + ",".join(str(i) for i in eos).encode())
    return h.hexdigest()


# --------------------------------------------------------------------------- class

class Vocabulary:
    """Token id -> exact bytes, for any tokenizer.

    ``token_bytes[i]`` is what token ``i`` appends to the output, or ``None`` when token
    ``i`` is never text (special / control / unknown / unused ids, EOS).

    Args:
        token_bytes: per token id, its bytes or None.
        eos_token_ids: the ids that end generation (None: none).
        name: a label for the vocabulary (the tokenizer's name, for caches and errors).

    Example::

        >>> v = Vocabulary([b"a", b"b", b" ab", None], eos_token_ids=[3])
        >>> v.size, v.eos_token_ids, sorted(v.special_token_ids)
        (4, (3,), [3])
        >>> v.decode([2, 0, 3])
        b' aba'

        # or, from any supported tokenizer (cached):
        # v = Vocabulary.from_tokenizer(AutoTokenizer.from_pretrained(...))
    """

    token_bytes: list
    size: int
    eos_token_ids: tuple
    special_token_ids: frozenset
    fingerprint: str
    name: str

    def __init__(
        self,
        token_bytes: Sequence[Optional[bytes]],
        eos_token_ids: Optional[Iterable[int]],
        name: str = "custom",
    ) -> None:
        tb: list[Optional[bytes]] = list(token_bytes)
        for i, b in enumerate(tb):
            if b is None or type(b) is bytes:
                continue
            if isinstance(b, (bytearray, memoryview)):
                tb[i] = bytes(b)
            else:
                raise ValueError(
                    f"token_bytes[{i}] must be bytes or None, got {type(b).__name__}"
                )
        size = len(tb)
        if size == 0:
            raise ValueError("vocabulary is empty")
        if eos_token_ids is None:
            eos: list[int] = []
        elif isinstance(eos_token_ids, int):
            eos = [eos_token_ids]
        else:
            eos = list(eos_token_ids)
        if not eos:
            raise ValueError("tokenizer has no EOS token; pass eos_token_ids=...")
        for k, e in enumerate(eos):
            try:
                if isinstance(e, bool):
                    raise TypeError
                eos[k] = e = operator.index(e)  # accepts numpy / torch integer scalars
            except TypeError:
                raise ValueError(f"EOS token id {e!r} is not an int") from None
            if not 0 <= e < size:
                raise ValueError(f"EOS token id {e} is out of range for a vocabulary of size {size}")
        eos_t = tuple(sorted(set(eos)))
        for e in eos_t:  # ending a sequence is never text
            tb[e] = None
        self.token_bytes = tb
        self.size = size
        self.eos_token_ids = eos_t
        self.special_token_ids = frozenset(i for i, b in enumerate(tb) if b is None)
        self.name = str(name)
        self.fingerprint = _fingerprint(size, tb, eos_t)

    # ---------------------------------------------------------------- basic API
    def __len__(self) -> int:
        return self.size

    def decode(self, ids: Iterable[int]) -> bytes:
        """Concatenated bytes of the text tokens in ``ids``; special tokens are skipped."""
        tb = self.token_bytes
        out = []
        for i in ids:
            i = int(i)
            if not 0 <= i < self.size:
                raise ValueError(f"token id {i} is out of range for a vocabulary of size {self.size}")
            b = tb[i]
            if b:
                out.append(b)
        return b"".join(out)

    def __repr__(self) -> str:
        return (
            f"Vocabulary(name={self.name!r}, size={self.size}, eos_token_ids={self.eos_token_ids}, "
            f"special={len(self.special_token_ids)}, fingerprint={self.fingerprint[:12]})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocabulary):
            return NotImplemented
        return self.fingerprint == other.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_tokenizer(cls, tokenizer: Any, eos_token_ids: Optional[Iterable[int]] = None) -> "Vocabulary":
        """Build (or fetch from the cache) the Vocabulary of ``tokenizer``.

        Accepts a Hugging Face tokenizer (``TokenizersBackend`` / ``PreTrainedTokenizerFast``,
        or a slow SentencePiece tokenizer with ``sp_model``), a ``tokenizers.Tokenizer``, a
        ``tiktoken.Encoding``, or a ``Vocabulary`` (returned unchanged).
        """
        if isinstance(tokenizer, Vocabulary):
            if eos_token_ids is not None and tuple(sorted(set(eos_token_ids))) != tokenizer.eos_token_ids:
                return cls(tokenizer.token_bytes, eos_token_ids, tokenizer.name)
            return tokenizer
        try:
            eos_key = None if eos_token_ids is None else tuple(sorted(set(operator.index(e) for e in (
                [eos_token_ids] if isinstance(eos_token_ids, int) else eos_token_ids))))
        except TypeError:
            raise ValueError(f"eos_token_ids must be token ids (ints), got {eos_token_ids!r}") from None
        key = (_cheap_state(tokenizer), eos_key)
        hit = _cache_get(tokenizer, key)
        if hit is not None:
            return hit
        token_bytes, eos, name = _build(tokenizer, eos_key)
        vocab = cls(token_bytes, eos, name)
        with _LOCK:
            existing = _BY_FINGERPRINT.get(vocab.fingerprint)
            if existing is not None:
                vocab = existing
            else:
                _BY_FINGERPRINT[vocab.fingerprint] = vocab
        _cache_put(tokenizer, key, vocab)
        return vocab


# --------------------------------------------------------------------------- cache

_LOCK = threading.Lock()
# id(tokenizer) -> (weakref or strong ref, key, Vocabulary)
_BY_OBJECT: "OrderedDict[int, tuple[Any, Any, Vocabulary]]" = OrderedDict()
_BY_FINGERPRINT: "weakref.WeakValueDictionary[str, Vocabulary]" = weakref.WeakValueDictionary()
_MAX_STRONG = 16


def _cheap_state(tok: Any) -> tuple:
    """What may change on a live tokenizer object and must invalidate its cache entry."""
    try:
        n = len(tok)
    except Exception:
        n = getattr(tok, "n_vocab", None)
        if n is None and hasattr(tok, "get_vocab_size"):
            n = tok.get_vocab_size(with_added_tokens=True)
    return (type(tok).__name__, n, getattr(tok, "eos_token_id", None))


def _cache_get(tok: Any, key: tuple) -> Optional[Vocabulary]:
    with _LOCK:
        entry = _BY_OBJECT.get(id(tok))
        if entry is None:
            return None
        ref, k, vocab = entry
        obj = ref() if isinstance(ref, weakref.ref) else ref
        if obj is tok and k == key:
            _BY_OBJECT.move_to_end(id(tok))
            return vocab
        return None


def _cache_put(tok: Any, key: tuple, vocab: Vocabulary) -> None:
    # No weakref callbacks (a callback run by the garbage collector while this thread
    # holds _LOCK would deadlock); dead entries are purged here instead.
    try:
        ref: Any = weakref.ref(tok)
    except TypeError:
        ref = tok  # not weak-referenceable: keep it alive, bounded below
    with _LOCK:
        _BY_OBJECT[id(tok)] = (ref, key, vocab)
        _BY_OBJECT.move_to_end(id(tok))
        dead = [k for k, (r, _, _) in _BY_OBJECT.items() if isinstance(r, weakref.ref) and r() is None]
        strong = [k for k, (r, _, _) in _BY_OBJECT.items() if not isinstance(r, weakref.ref)]
        for k in dead + strong[: max(0, len(strong) - _MAX_STRONG)]:
            del _BY_OBJECT[k]


# --------------------------------------------------------------------------- builders

def _build(tok: Any, eos_arg: Optional[tuple]) -> tuple[list, list[int], str]:
    try:
        import tiktoken
    except ImportError:  # pragma: no cover
        tiktoken = None
    if tiktoken is not None and isinstance(tok, tiktoken.Encoding):
        return _from_tiktoken(tok, eos_arg)
    try:
        import tokenizers
    except ImportError:  # pragma: no cover
        tokenizers = None
    if tokenizers is not None and isinstance(tok, tokenizers.Tokenizer):
        tb, vocab = _from_backend(tok, tok.get_vocab_size(with_added_tokens=True))
        eos = list(eos_arg) if eos_arg is not None else _guess_eos(vocab, tb)
        return tb, eos, "tokenizers.Tokenizer"
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None:
        backend = getattr(tok, "_tokenizer", None)
    name = getattr(tok, "name_or_path", None) or type(tok).__name__
    if tokenizers is not None and isinstance(backend, tokenizers.Tokenizer):
        size = len(tok)
        tb, vocab = _from_backend(backend, size)
    elif getattr(tok, "sp_model", None) is not None:
        tb, vocab = _from_sentencepiece(tok)
    else:
        raise ValueError(
            f"unsupported tokenizer type {type(tok).__module__}.{type(tok).__name__}: expected a "
            "Hugging Face tokenizer with a `tokenizers` backend or a SentencePiece model, a "
            "tokenizers.Tokenizer, a tiktoken.Encoding, or a Vocabulary"
        )
    _mark_hf_specials(tok, tb)
    eos = list(eos_arg) if eos_arg is not None else _hf_eos(tok, vocab)
    return tb, eos, name


def _mark_hf_specials(tok: Any, tb: list) -> None:
    try:
        ids = list(getattr(tok, "all_special_ids", []) or [])
    except Exception:  # pragma: no cover
        ids = []
    for i in ids:
        if isinstance(i, int) and 0 <= i < len(tb):
            tb[i] = None


def _hf_eos(tok: Any, vocab: dict) -> list[int]:
    eos: list[int] = []
    e = getattr(tok, "eos_token_id", None)
    if isinstance(e, int):
        eos.append(e)
    elif isinstance(e, (list, tuple)):
        eos.extend(int(x) for x in e)
    template = getattr(tok, "chat_template", None)
    texts: list[str] = []
    if isinstance(template, str):
        texts = [template]
    elif isinstance(template, dict):
        texts = [t for t in template.values() if isinstance(t, str)]
    elif isinstance(template, (list, tuple)):
        texts = [t.get("template", "") for t in template if isinstance(t, dict)]
    for marker in _END_OF_TURN:
        if marker in vocab and any(marker in t for t in texts):
            eos.append(vocab[marker])
    if not eos:
        raise ValueError(
            f"tokenizer has no EOS token; pass eos_token_ids=... "
            f"(tokenizer {getattr(tok, 'name_or_path', '') or type(tok).__name__} has eos_token=None "
            "and no end-of-turn token in its chat template)"
        )
    return eos


def _guess_eos(vocab: dict, tb: list) -> list[int]:
    for marker in _EOS_GUESSES:
        i = vocab.get(marker)
        if i is not None and i < len(tb):
            return [i]
    raise ValueError(
        "tokenizer has no EOS token; pass eos_token_ids=... (none of "
        + ", ".join(_EOS_GUESSES)
        + " is in its vocabulary)"
    )


def _from_tiktoken(enc: Any, eos_arg: Optional[tuple]) -> tuple[list, list[int], str]:
    size = int(enc.n_vocab)
    special = dict(getattr(enc, "_special_tokens", None) or {})
    if not special:
        for s in getattr(enc, "special_tokens_set", ()) or ():
            try:
                special[s] = enc.encode_single_token(s)
            except Exception:  # pragma: no cover
                pass
    special_ids = set(special.values())
    dec = enc.decode_single_token_bytes
    tb: list[Optional[bytes]] = [None] * size
    for i in range(size):
        if i in special_ids:
            continue
        try:
            tb[i] = dec(i)
        except Exception:  # a gap in the rank table
            pass
    if eos_arg is not None:
        eos = list(eos_arg)
    else:
        eos = []
        for marker in _EOS_GUESSES:
            if marker in special:
                eos = [special[marker]]
                break
        if not eos:
            raise ValueError(
                f"tokenizer has no EOS token; pass eos_token_ids=... (tiktoken encoding "
                f"{enc.name!r} has no <|endoftext|> special token)"
            )
    return tb, eos, f"tiktoken:{enc.name}"


def _from_backend(bt: Any, size: int) -> tuple[list, dict]:
    """token_bytes from a `tokenizers.Tokenizer`; returns (token_bytes, str->id vocab)."""
    model = bt.model
    model_type = type(model).__name__
    decoder = _json_state(bt.decoder)
    pre = _json_state(bt.pre_tokenizer)
    decoders = _flatten(decoder, "decoders")
    pres = _flatten(pre, "pretokenizers")
    dtypes = [d.get("type") for d in decoders]
    ptypes = [p.get("type") for p in pres]

    bad = [t for t in dtypes if t in ("WordPiece", "CTC", "BPEDecoder")]
    if model_type == "WordPiece" or bad:
        raise ValueError(
            f"unsupported tokenizer type: model {model_type} with decoder "
            f"{'+'.join(str(t) for t in dtypes) or 'none'} (WordPiece / CTC / BPE-suffix "
            "tokenizers do not map tokens to exact bytes; use a byte-level BPE or SentencePiece tokenizer)"
        )
    if model_type not in ("BPE", "Unigram", "WordLevel"):
        raise ValueError(f"unsupported tokenizer type: model {model_type}")
    unknown = [t for t in dtypes if t not in ("ByteLevel", "Metaspace", "Replace", "ByteFallback", "Fuse", "Strip")]
    if unknown:
        raise ValueError(f"unsupported tokenizer decoder {'+'.join(str(t) for t in unknown)}")

    byte_fallback = bool(getattr(model, "byte_fallback", False)) or "ByteFallback" in dtypes
    if "ByteLevel" in dtypes or (not decoders and "ByteLevel" in ptypes):
        family = "byte_level"
    else:
        family = "text"
    # String replacements the decoder applies per token (Metaspace / Replace).
    replacements: list[tuple[str, str]] = []
    for d in decoders or [p for p in pres if p.get("type") == "Metaspace"]:
        if d.get("type") == "Metaspace":
            replacements.append((d.get("replacement", "▁"), " "))
        elif d.get("type") == "Replace":
            pat = d.get("pattern") or {}
            if "String" in pat:
                replacements.append((pat["String"], d.get("content", "")))
            else:
                raise ValueError(f"unsupported tokenizer decoder: Replace with regex pattern {pat!r}")

    vocab: dict[str, int] = bt.get_vocab(with_added_tokens=True)
    n = max(size, (max(vocab.values()) + 1) if vocab else 0)
    tb: list[Optional[bytes]] = [None] * n

    if family == "byte_level":
        table = _BYTE_LEVEL_TABLE
        for s, i in vocab.items():
            try:
                tb[i] = s.translate(table).encode("latin-1")
            except UnicodeEncodeError:
                tb[i] = s.encode("utf-8")
    else:
        for s, i in vocab.items():
            t = s
            for a, b in replacements:
                if a in t:
                    t = t.replace(a, b)
            tb[i] = t.encode("utf-8")
    if byte_fallback:
        for s, i in vocab.items():
            if len(s) == 6 and s.startswith("<0x"):
                m = _BYTE_FALLBACK_RE.match(s)
                if m:
                    tb[i] = bytes((int(m.group(1), 16),))

    unk = getattr(model, "unk_token", None)
    if isinstance(unk, str) and unk in vocab:
        tb[vocab[unk]] = None
    # Added tokens: raw content, never byte-level / metaspace encoded.
    try:
        added = bt.get_added_tokens_decoder()
    except Exception:  # pragma: no cover
        added = {}
    for i, at in added.items():
        if not 0 <= i < n:
            continue
        content = at.content
        if at.special or _looks_like_control(content):
            tb[i] = None
        else:
            tb[i] = content.encode("utf-8")
    # Control-looking strings in the model vocabulary itself (e.g. "<unk>", "</s>" in a
    # SentencePiece vocab without added-token entries) are never text.
    for marker in ("<unk>", "<s>", "</s>", "<pad>"):
        i = vocab.get(marker)
        if i is not None and i not in added and tb[i] == marker.encode():
            tb[i] = None
    return tb, vocab


def _from_sentencepiece(tok: Any) -> tuple[list, dict]:
    """A slow (``sp_model``) SentencePiece tokenizer."""
    sp = tok.sp_model
    n_sp = sp.get_piece_size()
    size = max(len(tok), n_sp)
    tb: list[Optional[bytes]] = [None] * size
    vocab: dict[str, int] = {}
    user_defined = _sp_user_defined(sp)
    for i in range(n_sp):
        piece = sp.id_to_piece(i)
        vocab.setdefault(piece, i)
        if sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i):
            continue
        # User-defined pieces are atomic; the ones that look like control markers
        # ([INST], <|im_end|>, ...) are never text (HF marks them special too).
        if (user_defined is None or i in user_defined) and _looks_like_control(piece):
            continue
        if sp.is_byte(i):
            m = _BYTE_FALLBACK_RE.match(piece)
            tb[i] = bytes((int(m.group(1), 16),)) if m else None
            continue
        tb[i] = piece.replace("▁", " ").encode("utf-8")
    added = getattr(tok, "added_tokens_decoder", {}) or {}
    for i, at in added.items():
        if not 0 <= i < size:
            continue
        content = getattr(at, "content", str(at))
        vocab[content] = i
        if getattr(at, "special", False) or _looks_like_control(content):
            tb[i] = None
        else:
            tb[i] = content.encode("utf-8")
    return tb, vocab


def _sp_user_defined(sp: Any) -> Optional[set]:
    """Ids of USER_DEFINED pieces of a SentencePiece model (None if the proto is unreadable)."""
    try:
        from sentencepiece import sentencepiece_model_pb2 as pb

        m = pb.ModelProto()
        m.ParseFromString(sp.serialized_model_proto())
        user = pb.ModelProto.SentencePiece.USER_DEFINED
        return {i for i, p in enumerate(m.pieces) if p.type == user}
    except Exception:
        return None
