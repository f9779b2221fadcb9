"""A helper model that reads along with the base model and keeps its own KV cache.

DExperts, proxy-tuning (``guided.steering.ensemble``) and draft models for
speculative decoding (``guided.decoding.speculative``) each run a second causal LM
beside the base model. A ``ContextModel`` keeps its own KV cache, so every step costs
one incremental forward over the new token(s), never the prefix again.

When beam search reorders, duplicates or drops rows that each extend a cached row,
the cache rows follow them; when the sequence changes otherwise (a rollback in
speculative decoding), the cache is cut back to the longest prefix still shared and
only the rest is fed. So ``fork`` / ``rollback`` are supported, at the cost of
re-reading what changed.
"""

from __future__ import annotations

import torch


class ContextModel:
    """A causal LM that reads along with the base model, one incremental forward per step.

    ``prompt_ids=None``: it reads the same ids as the base model (proxy-tuning: same
    prompt, same output). Otherwise it reads its own prompt, then the tokens the base
    model generated after its prompt (contrastive prompts for DExperts). The base
    prompt's length is taken at the first call; ``reset()`` starts over.

    Args:
        model: a causal LM over the base model's vocabulary, on any device.
        prompt_ids: its own prompt's token ids, or None to read the base model's ids.

    Attributes:
        forward_passes: the model's forward passes so far (one per step).

    Example::

        >>> positive = ContextModel(model, tokenizer("Write a happy review:")["input_ids"])
        >>> positive.logits(input_ids)     # [batch, vocab], float32
        >>> positive.forward_passes        # one per call
    """

    def __init__(self, model, prompt_ids=None):
        self.model = model
        self.prompt_ids = None if prompt_ids is None else [int(t) for t in prompt_ids]
        self.forward_passes = 0
        self.reset()

    def reset(self) -> None:
        """Forget the sequence read so far (cache, base prompt length)."""
        self._base_start: int | None = None
        self._cache = None
        self._ids: torch.Tensor | None = None  # what the cache holds, [batch, n]
        self._last: torch.Tensor | None = None

    def _own_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        """What this model reads: its own prompt (if any), then the base model's output."""
        if self._base_start is None:
            self._base_start = input_ids.shape[-1]
        if self.prompt_ids is None:
            return input_ids
        prompt = torch.tensor(self.prompt_ids, dtype=input_ids.dtype, device=input_ids.device)
        return torch.cat([prompt.expand(input_ids.shape[0], -1), input_ids[:, self._base_start :]], dim=1)

    @torch.inference_mode()
    def logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Next-token logits after ``input_ids`` (the base model's ids).

        Args:
            input_ids: ``[batch, T]``, the base model's prompt and output so far.

        Returns:
            float32 ``[batch, vocab]`` on the model's device; the same tensor again
            when asked twice for the same ids.
        """
        own = self._own_ids(input_ids).to(self.model.device)
        shared = self._shared_prefix(own)
        if shared == own.shape[1] and self._last is not None:
            return self._last  # asked again for the same ids
        shared = min(shared, own.shape[1] - 1)  # at least one position to read
        cache = self._cache
        if shared == 0:
            cache = None
        elif shared < self._ids.shape[1]:
            cache.crop(shared - self._ids.shape[1])  # a negative count: remove that many
        out = self.model(input_ids=own[:, shared:], past_key_values=cache, use_cache=True)
        self.forward_passes += 1
        self._cache, self._ids = out.past_key_values, own
        self._last = out.logits[:, -1, :].float()
        return self._last

    def _shared_prefix(self, own: torch.Tensor) -> int:
        """How many leading positions the cache holds for every row of ``own``.

        Rows that each extend *some* cached row (beam search: beams reordered,
        duplicated or dropped) first get the cache rows reordered to follow them."""
        if self._ids is None:
            return 0
        n = self._ids.shape[1]
        if own.shape[1] >= n:
            same = (own[:, None, :n] == self._ids[None, :, :]).all(dim=-1)  # [new rows, cached rows]
            if same.any(dim=1).all():
                parents = same.float().argmax(dim=1)
                if not torch.equal(parents, torch.arange(len(self._ids), device=parents.device)):
                    self._cache.reorder_cache(parents.to(self.model.device))
                    self._ids = self._ids[parents]
                    self._last = self._last[parents.to(self._last.device)]
                return n
        if self._ids.shape[0] != own.shape[0]:
            return 0
        n = min(n, own.shape[1])
        differs = (self._ids[:, :n] != own[:, :n]).any(dim=0).nonzero()
        return int(differs[0]) if len(differs) else n
