"""Next-token choice from (already masked) logits: greedy, or temperature / top-k /
top-p / min-p.

The grammar mask must come first: top-k or top-p applied to unmasked logits could
keep only tokens the spec forbids. ``guided.generate`` masks, runs the processors,
masks again, warps (here), adds the watermark, then samples.
"""

from __future__ import annotations

import torch


def warp(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
) -> torch.Tensor:
    """The sampling warpers: temperature, then top-k, then top-p (nucleus), then
    min-p, as in Hugging Face. Tokens cut are set to ``-inf``.

    Args:
        logits: ``[batch, V]`` scores, already masked.
        temperature: the divisor, above 0.
        top_k: keep the ``top_k`` best tokens (ties with the k-th kept); None or 0: all.
        top_p: keep the smallest set of best tokens whose probability reaches
            ``top_p`` (the best token always stays); None or 1: all.
        min_p: keep tokens whose probability is at least ``min_p`` times the best
            one's; None or 0: all.

    Returns:
        New warped scores (``logits`` is not modified).

    Raises:
        ValueError: ``temperature <= 0`` (greedy decoding does not warp).

    Example::

        >>> warp(torch.tensor([[2.0, 1.0, 0.0, -1.0]]), temperature=1.0, top_k=2)
        tensor([[2., 1., -inf, -inf]])
    """
    if temperature <= 0:
        raise ValueError("temperature must be > 0 for sampling (use temperature=0 for greedy)")
    logits = logits / temperature
    if top_k is not None and top_k > 0 and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=False)
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        drop_sorted = cumulative <= 1 - top_p
        drop_sorted[..., -1] = False  # always keep the most likely token
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    if min_p is not None and min_p > 0:
        # p >= min_p * p_max  <=>  logit >= logit_max + log(min_p)
        floor = logits.max(dim=-1, keepdim=True).values + torch.log(torch.tensor(min_p))
        logits = logits.masked_fill(logits < floor, float("-inf"))
    return logits
