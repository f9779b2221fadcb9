"""One decoding step's scores: the order every decoding loop applies.

``generate``, beam search, speculative decoding and draft models all draw each token
from ``next_token_scores``::

    logits ─> grammar mask ─> processors ─> grammar mask again
           ─> temperature / top-k / top-p / min-p ─> watermark ─> sample (or argmax)
"""

from __future__ import annotations

import torch

from guided.bitmask import apply_token_bitmask_

from .sampling import warp


def next_token_scores(
    logits: torch.Tensor,
    input_ids: torch.Tensor,
    bitmask=None,
    processors=(),
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
    watermark=None,
) -> torch.Tensor:
    """The scores the next token is drawn from, in the documented order::

        mask -> processors -> mask again -> temperature / top-k / top-p / min-p -> watermark

    The mask comes first so that top-k and the like only ever choose among allowed
    tokens; it is applied again after the processors so that none can bring a
    forbidden token back. ``logits`` is modified in place where possible.
    """
    if bitmask is not None:
        apply_token_bitmask_(logits, bitmask)
    if processors:
        for proc in processors:
            logits = proc(input_ids, logits)
        if bitmask is not None:
            apply_token_bitmask_(logits, bitmask)
    if temperature > 0:
        logits = warp(logits, temperature, top_k, top_p, min_p)
    if watermark is not None:
        logits = watermark(input_ids, logits)
    return logits
