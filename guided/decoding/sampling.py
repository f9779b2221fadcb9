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
    """Temperature, then top-k, then top-p (nucleus), then min-p (keep tokens whose
    probability is at least ``min_p`` times the top one's), as in Hugging Face."""
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
