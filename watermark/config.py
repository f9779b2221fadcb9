"""Watermark settings shared by the processor and the detector, and key loading."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

from .prf import key_id

SEEDINGS = ("lefthash", "selfhash")
#: ``blake2``: our keyed PRF (``watermark.prf``). ``hf``: Hugging Face's
#: ``WatermarkLogitsProcessor`` green lists (torch ``randperm`` seeded with an integer
#: key times the previous token), to detect text that transformers watermarked.
PRFS = ("blake2", "hf")


@dataclass(frozen=True)
class WatermarkConfig:
    """What generation and detection must agree on (the key aside).

    Attributes:
        gamma: the green fraction of the vocabulary, strictly between 0 and 1.
        delta: the bias added to green logits, at least 0.
        seeding: ``"lefthash"`` (the green list depends on the previous
            ``context_width`` tokens) or ``"selfhash"`` (on the candidate too: one
            edited context token changes it less).
        context_width: how many previous tokens seed the green list, at least 1.
        hard: green tokens only (red ones get ``-inf``) instead of a ``delta`` bias.
        prf: ``"blake2"`` (our keyed PRF) or ``"hf"`` (Hugging Face's green lists,
            lefthash only, to detect text transformers watermarked).

    Raises:
        ValueError: a value out of range, or ``prf="hf"`` with ``"selfhash"``.

    Example::

        >>> WatermarkConfig(gamma=0.25, delta=2.0).seeding
        'lefthash'
    """

    gamma: float = 0.25
    delta: float = 2.0
    seeding: str = "lefthash"
    context_width: int = 1
    hard: bool = False
    prf: str = "blake2"

    def __post_init__(self):
        if not 0.0 < self.gamma < 1.0:
            raise ValueError(f"gamma must be strictly between 0 and 1, got {self.gamma}")
        if self.delta < 0:
            raise ValueError(f"delta must be non-negative, got {self.delta}")
        if self.seeding not in SEEDINGS:
            raise ValueError(f"seeding must be one of {SEEDINGS}, got {self.seeding!r}")
        if not isinstance(self.context_width, int) or self.context_width < 1:
            raise ValueError(f"context_width must be a positive integer, got {self.context_width!r}")
        if self.prf not in PRFS:
            raise ValueError(f"prf must be one of {PRFS}, got {self.prf!r}")
        if self.prf == "hf" and self.seeding != "lefthash":
            raise ValueError("prf='hf' reproduces Hugging Face's lefthash scheme only")


def as_key(key) -> bytes:
    """A key given as bytes or text (a str is its UTF-8); at least 16 bytes."""
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not isinstance(key, (bytes, bytearray)):
        raise TypeError(f"a watermark key is bytes or str, not {type(key).__name__}")
    key = bytes(key)
    if len(key) < 16:
        raise ValueError(f"a watermark key needs at least 16 bytes, got {len(key)}")
    if len(key) > 64:  # BLAKE2b takes at most 64 key bytes: longer keys are hashed down
        import hashlib

        key = hashlib.blake2b(key, digest_size=64, person=b"guided-wm-long").digest()
    return key


class KeyFileWarning(UserWarning):
    """A watermark key file that users other than its owner may read or write."""


def load_key(path: str | None = None, env: str | None = None) -> bytes:
    """Read a watermark key from a file or an environment variable.

    Keys are secret bytes, at least 16 of them; surrounding whitespace (a trailing
    newline) is stripped, so generate and detect with keys read the same way.

    Args:
        path: a file holding the key (tried first).
        env: the name of an environment variable holding it.

    Returns:
        The key bytes (keys over 64 bytes are hashed down to 64).

    Warns:
        KeyFileWarning: the key file's permissions let other users read or write it.

    Raises:
        ValueError: neither given, the file unreadable, the variable unset, or the
            key shorter than 16 bytes.

    Example::

        >>> key = load_key("wm.key")                 # (umask 077; head -c 32 /dev/urandom | base64 > wm.key)
        >>> key = load_key(env="GUIDED_WATERMARK_KEY")
    """
    if path:
        try:
            with open(path, "rb") as f:
                if os.name == "posix" and os.fstat(f.fileno()).st_mode & 0o077:
                    # Anyone who reads the key can scrub or forge the watermark.
                    warnings.warn(f"the watermark key file {path!r} is readable or writable by other users: "
                                  f"chmod 600 {path}", KeyFileWarning, stacklevel=2)
                return as_key(f.read().strip())
        except OSError as e:
            raise ValueError(f"cannot read the watermark key file {path!r}: {e.strerror}") from None
    if env:
        value = os.environ.get(env)
        if not value:
            raise ValueError(f"the environment variable {env} holding the watermark key is not set")
        return as_key(value.strip())
    raise ValueError("no watermark key given: pass a key file (or name an environment variable)")


def hf_key(key) -> int:
    """The integer ``hashing_key`` of Hugging Face's scheme, from an int or our key bytes."""
    if isinstance(key, int):
        return key
    return int.from_bytes(as_key(key)[:8], "little") % (2**61)


def fingerprint(config: WatermarkConfig, key, tokenizer_hash: str) -> dict:
    """Public description of a detector: everything but the key itself."""
    kid = key_id(str(key).encode() if isinstance(key, int) else as_key(key))
    return {
        "gamma": config.gamma,
        "delta": config.delta,
        "seeding": config.seeding,
        "context_width": config.context_width,
        "hard": config.hard,
        "prf": config.prf,
        "tokenizer_hash": tokenizer_hash,
        "key_id": kid,
    }
