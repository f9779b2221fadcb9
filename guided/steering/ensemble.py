"""Steering with other models' logits: DExperts and proxy-tuning.

Both add a scaled difference of two models' next-token logits to the base model's::

    z = z_base + alpha * (z_expert - z_anti_expert)

DExperts (Liu et al. 2021) steers toward an attribute with an expert and away with an
anti-expert (alpha ~ 2); proxy-tuning (Liu et al. 2024) steers a large base model with
a small tuned model minus its untuned twin (alpha = 1). The two models can be one
model under two prompts (``ContextModel(model, prompt_ids)``), as in the examples.

Each helper model runs in a ``ContextModel`` (``guided.decoding.context_model``): it
keeps its own KV cache, so every step costs one incremental forward per model over
the new token(s), never the prefix again.
"""

from __future__ import annotations

import torch

from guided.decoding.context_model import ContextModel


def _as_context(m) -> ContextModel:
    return m if isinstance(m, ContextModel) else ContextModel(m)


class DExperts:
    """``scores + alpha * (expert - anti_expert)`` on next-token logits (Liu et al. 2021).

    ``expert`` and ``anti_expert`` are causal LMs over the base model's vocabulary (a
    different logits width is a ``ValueError``), or ``ContextModel``s giving them
    their own prompts. Assumes the grammar mask came first: a masked token stays
    masked (-inf plus a finite number). Supports ``fork`` / ``rollback`` (see the
    module docstring). One forward per helper model per step.

    Args:
        expert: the model (or ``ContextModel``) to steer toward.
        anti_expert: the model (or ``ContextModel``) to steer away from.
        alpha: the scale; None: ``default_alpha`` (2.0; 1.0 for ``ProxyTuning``).

    Raises:
        ValueError: when called, a helper's logits width differs from the base model's.

    Example::

        >>> happy = ContextModel(model, tok("A glowing review:")["input_ids"])
        >>> angry = ContextModel(model, tok("A scathing review:")["input_ids"])
        >>> guided.generate(model, tok, "The film was", processors=[DExperts(happy, angry, alpha=2.0)])
    """

    default_alpha = 2.0

    def __init__(self, expert, anti_expert, alpha: float | None = None):
        self.expert = _as_context(expert)
        self.anti_expert = _as_context(anti_expert)
        self.alpha = float(self.default_alpha if alpha is None else alpha)

    def reset(self) -> None:
        """Start both helpers over (``guided.generate`` calls it for each prompt)."""
        self.expert.reset()
        self.anti_expert.reset()

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        plus = self.expert.logits(input_ids)
        minus = self.anti_expert.logits(input_ids)
        for name, z in (("expert", plus), ("anti-expert", minus)):
            if z.shape[-1] != scores.shape[-1]:
                raise ValueError(
                    f"{type(self).__name__}: the {name} model has {z.shape[-1]} logits, the base model "
                    f"{scores.shape[-1]}: the models must share the base model's vocabulary"
                )
        return scores + self.alpha * (plus - minus).to(scores.device, scores.dtype)


class ProxyTuning(DExperts):
    """Proxy-tuning (Liu et al. 2024): steer a large base model with a small tuned
    ``expert`` minus its untuned twin ``anti_expert``, ``alpha = 1`` by default.

    The same arithmetic as ``DExperts``; the models read the base model's own ids
    (same prompt) unless wrapped in ``ContextModel`` with a prompt of their own.

    Args:
        expert: the small tuned model (or ``ContextModel``).
        anti_expert: the same small model before tuning (or ``ContextModel``).
        alpha: the scale; None: 1.0.

    Example::

        >>> guided.generate(big, tok, prompt, processors=[ProxyTuning(small_tuned, small_base)])
    """

    default_alpha = 1.0
