"""Logits processors that compose with the grammar mask: bias and penalties.

Each is a Hugging Face style callable, ``(input_ids [B, T], scores [B, V]) -> scores``,
batch-aware, usable in ``guided.generate(..., processors=[...])`` and in
``model.generate(logits_processor=[...])``. The order ``guided.generate`` applies
(the contract every processor here assumes)::

    logits ─> grammar mask ─> processors, in the order given (bias, penalties,
              DExperts / proxy-tuning, classifier guidance) ─> grammar mask again
           ─> temperature ─> top-k ─> top-p ─> min-p ─> watermark ─> sample

The mask comes first so that no processor spends work on, or renormalises over,
tokens the spec forbids; it is applied again after the processors, so that none can
bring a forbidden token back. A processor here never raises a ``-inf`` score.

``fork`` / ``rollback`` (speculative decoding, beam search): the processors in this
module keep no state between calls beyond what they read from ``input_ids``, so a
rolled-back or reordered batch is handled as it comes.

Model-based processors live in ``guided.steering.ensemble`` (DExperts, proxy-tuning) and
``guided.steering.classifier``.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch


class LogitBias:
    """Add a fixed bias to chosen tokens' logits (OpenAI ``logit_bias``).

    ``bias`` maps token ids to additive values; OpenAI's range is -100 .. 100, where
    -100 in practice bans the token and +100 forces it among those allowed. A masked
    token stays masked (-inf plus a bias is still -inf). Stateless.

    Args:
        bias: ``{token_id: value}``, added to those tokens' logits in every row.

    Raises:
        TypeError: ``bias`` is not a mapping.
        ValueError: a negative token id; when called, an id outside the scores' width.

    Example::

        >>> proc = LogitBias({tokenizer.convert_tokens_to_ids("Paris"): 5.0})
        >>> guided.generate(model, tokenizer, prompt, spec, processors=[proc])
    """

    def __init__(self, bias: Mapping[int, float]):
        if not isinstance(bias, Mapping):
            raise TypeError("LogitBias takes a mapping {token_id: bias}")
        self.token_ids = torch.tensor([int(t) for t in bias], dtype=torch.long)
        self.values = torch.tensor([float(v) for v in bias.values()], dtype=torch.float32)
        if len(self.token_ids) and int(self.token_ids.min()) < 0:
            raise ValueError("LogitBias: token ids must be >= 0")

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """The biased scores (a new tensor)."""
        if not len(self.token_ids):
            return scores
        if int(self.token_ids.max()) >= scores.shape[-1]:
            raise ValueError(f"LogitBias: token id {int(self.token_ids.max())} is outside the vocabulary "
                             f"({scores.shape[-1]})")
        ids = self.token_ids.to(scores.device)
        scores = scores.clone()
        scores[:, ids] += self.values.to(scores.device, scores.dtype)
        return scores


class _GeneratedCounts:
    """Counts of each token among the *generated* ids (after the prompt).

    The prompt's length is ``prompt_length`` when given, else the length of
    ``input_ids`` at the first call (the prompt, in ``guided.generate`` and in
    ``model.generate``); ``reset()`` forgets it, for reuse on a new prompt.
    """

    def __init__(self, prompt_length: int | None = None):
        self.prompt_length = prompt_length
        self._start = prompt_length

    def reset(self) -> None:
        """Forget the prompt length taken at the first call (a new prompt)."""
        self._start = self.prompt_length

    def counts(self, input_ids: torch.Tensor, vocab_size: int, dtype) -> torch.Tensor:
        if self._start is None:
            self._start = input_ids.shape[-1]
        generated = input_ids[:, self._start :]
        counts = torch.zeros(input_ids.shape[0], vocab_size, dtype=dtype, device=input_ids.device)
        if generated.shape[-1]:
            counts.scatter_add_(1, generated.clamp(max=vocab_size - 1), torch.ones_like(generated, dtype=dtype))
        return counts


class PresencePenalty(_GeneratedCounts):
    """Subtract ``penalty`` once from every token already generated (OpenAI
    ``presence_penalty``: ``logit[j] -= penalty * (count[j] > 0)``). Prompt tokens do
    not count. Typical values 0.1 .. 1; negative values encourage repeats.

    Args:
        penalty: subtracted once per token already generated.
        prompt_length: the prompt's length in ``input_ids``; None takes the length
            at the first call (``guided.generate`` resets it for each prompt).

    Example::

        >>> guided.generate(model, tokenizer, prompt, processors=[PresencePenalty(0.6)])
    """

    def __init__(self, penalty: float, prompt_length: int | None = None):
        super().__init__(prompt_length)
        self.penalty = float(penalty)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        counts = self.counts(input_ids, scores.shape[-1], scores.dtype)
        return scores - self.penalty * (counts > 0).to(scores.dtype)


class FrequencyPenalty(_GeneratedCounts):
    """Subtract ``penalty`` per earlier occurrence of each generated token (OpenAI
    ``frequency_penalty``: ``logit[j] -= penalty * count[j]``). Prompt tokens do not
    count.

    Args:
        penalty: subtracted once per earlier occurrence.
        prompt_length: as for ``PresencePenalty``.

    Example::

        >>> guided.generate(model, tokenizer, prompt, processors=[FrequencyPenalty(0.5)])
    """

    def __init__(self, penalty: float, prompt_length: int | None = None):
        super().__init__(prompt_length)
        self.penalty = float(penalty)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        return scores - self.penalty * self.counts(input_ids, scores.shape[-1], scores.dtype)


class RepetitionPenalty:
    """The CTRL / Hugging Face repetition penalty over every token in ``input_ids``
    (prompt included): a positive logit is divided by ``penalty``, a negative one
    multiplied by it, once per distinct token. ``penalty > 1`` discourages repeats.
    Stateless.

    Args:
        penalty: the divisor / factor, above 0 (1 changes nothing).

    Raises:
        ValueError: ``penalty <= 0``.

    Example::

        >>> guided.generate(model, tokenizer, prompt, processors=[RepetitionPenalty(1.2)])
    """

    def __init__(self, penalty: float):
        if penalty <= 0:
            raise ValueError(f"RepetitionPenalty: penalty must be > 0, not {penalty}")
        self.penalty = float(penalty)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        ids = input_ids.clamp(max=scores.shape[-1] - 1)
        seen = torch.gather(scores, 1, ids)
        seen = torch.where(seen > 0, seen / self.penalty, seen * self.penalty)
        return scores.scatter(1, ids, seen)

