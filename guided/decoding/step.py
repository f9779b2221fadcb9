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
    forbidden token back. The watermark comes last, on the distribution sampling
    would use. ``logits`` is modified in place where possible.

    Args:
        logits: the model's next-token logits, ``[batch, V]`` (float).
        input_ids: the ids so far, ``[batch, T]`` (what processors and the watermark read).
        bitmask: the matchers' int32 bitmask ``[batch, words]``, or None (unconstrained).
        processors: Hugging Face style ``(input_ids, scores) -> scores`` callables.
        temperature: 0 leaves the warpers out (greedy); above 0, ``warp`` runs.
        top_k: see ``warp``.
        top_p: see ``warp``.
        min_p: see ``warp``.
        watermark: a ``WatermarkLogitsProcessor`` (or any such callable), or None.

    Returns:
        The scores ``[batch, V]``: argmax them, or sample from their softmax.

    Example::

        >>> scores = next_token_scores(out.logits[:, -1, :].float(), ids, bitmask, [RepetitionPenalty(1.2)],
        ...                            temperature=0.7, top_p=0.9)
        >>> token = torch.multinomial(scores.softmax(dim=-1), 1)
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
