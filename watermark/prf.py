"""The keyed pseudo-random function behind the green lists.

::

    key --BLAKE2b(key, token id)--> ctx_table[V], cand_table[V]       (once per key and V)
    seed(context)   = fold(mix32(s ^ ctx_table[c]) for c in the last w tokens)   "lefthash"
    value(ctx, t)   = mix32(seed ^ cand_table[t])                     a uniform 32-bit number
    green(ctx, t)   = value < gamma * 2**32                            (whole vocabulary)

``selfhash`` anchors the seed on the candidate too (Kirchenbauer et al. 2023, "minhash
with self-salt"): ``seed(ctx, t) = min_c mix32(ctx_table[c] ^ cand_table[t])``, so one
edited context token changes the green list less.

The keyed part is BLAKE2b with the secret key (a real keyed hash: without the key the
tables are unpredictable); ``mix32`` (the "lowbias32" integer finaliser) only combines
two already-random 32-bit numbers. Everything is integer arithmetic that gives the same
bits in Python, numpy (int64) and torch (int64, any device): products are split so no
intermediate exceeds 2**49.

Cost notes: the tables cost ~0.1 s per 50k-token vocabulary, once. Generation computes
``value`` for the whole vocabulary per row (a few vectorised int64 ops on the logits'
device); detection computes it for the observed tokens only, vectorised over positions.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

import numpy as np

MASK32 = 0xFFFFFFFF
#: Rank keys are ``value << RANK_SHIFT | token``: unique, so ties cannot happen.
RANK_SHIFT = 21


def _mul32(x, c: int):
    """``x * c mod 2**32`` without int64 overflow (x < 2**32)."""
    return (x * (c & 0xFFFF) + (((x * (c >> 16)) & 0xFFFF) << 16)) & MASK32


def mix32(x):
    """A bijective 32-bit finaliser (lowbias32); works on ints, numpy and torch int64."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


@lru_cache(maxsize=16)
def keyed_tables(key: bytes, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """``(ctx_table, cand_table)``: BLAKE2b(key) of each token id, as int64 in [0, 2**32)."""
    tables = []
    for person in (b"guided-wm-ctx", b"guided-wm-cand"):
        base = hashlib.blake2b(key=key, digest_size=4, person=person)
        out = np.empty(vocab_size, dtype=np.int64)
        for t in range(vocab_size):
            h = base.copy()
            h.update(t.to_bytes(4, "little"))
            out[t] = int.from_bytes(h.digest(), "little")
        out.setflags(write=False)
        tables.append(out)
    return tables[0], tables[1]


def key_id(key: bytes) -> str:
    """A public name for a key (a hash of it), for fingerprints and logs."""
    return hashlib.blake2b(key, digest_size=8, person=b"guided-wm-keyid").hexdigest()


def lefthash_seed(ctx_table, contexts):
    """Seeds for context windows ``contexts[..., w]`` (oldest token first)."""
    seed = contexts[..., 0] * 0
    for j in range(contexts.shape[-1]):
        seed = mix32(seed ^ ctx_table[contexts[..., j]])
    return seed


def values(ctx_table, cand_table, contexts, candidates, seeding: str):
    """The 32-bit PRF value of each candidate token given its context.

    ``contexts [..., w]`` and ``candidates [..., K]`` (int64, numpy or torch) broadcast
    over the leading dimensions; the result has the shape of ``candidates``.
    """
    cand = cand_table[candidates]
    if seeding == "lefthash":
        seed = lefthash_seed(ctx_table, contexts)[..., None]
    else:  # selfhash: the smallest of the context tokens' values, salted by the candidate
        seed = None
        for j in range(contexts.shape[-1]):
            v = mix32(ctx_table[contexts[..., j]][..., None] ^ cand)
            seed = v if seed is None else _minimum(seed, v)
        seed = seed ^ 0x9E3779B9
    return mix32(seed ^ cand)


def _minimum(a, b):
    if isinstance(a, np.ndarray):
        return np.minimum(a, b)
    return a.minimum(b)


def threshold(gamma: float) -> int:
    """Values below this are green: a gamma fraction of [0, 2**32)."""
    return int(round(gamma * 2**32))


def green_count_among(n_allowed: int, gamma: float) -> int:
    """How many of ``n_allowed`` tokens are green when the green list is drawn among the
    allowed ones: about gamma of them, but at least one and at most all but one, so
    every real choice (two or more allowed tokens) carries signal."""
    if n_allowed < 2:
        return 0
    return min(max(int(gamma * n_allowed + 0.5), 1), n_allowed - 1)


def rank_keys(vals, tokens):
    """Unique sort keys: by PRF value, then token id."""
    return (vals << RANK_SHIFT) | tokens
