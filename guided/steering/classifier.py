"""Classifier guidance (FUDGE / CAIF): re-rank the best allowed candidates by how well
a classifier likes the text they would make.

::

    for each sequence: the top_k candidates among the *allowed* tokens
        new score = logit + weight * log p(attribute | text so far + candidate)
    every other token: -inf (as in FUDGE, only the re-ranked candidates may be chosen)

One classifier call per step scores all ``batch x top_k`` candidate texts at once.
Tokens the grammar mask forbids are never candidates (the mask comes first), so the
classifier cannot make a forbidden token win.
"""

from __future__ import annotations

import torch


class ClassifierGuidance:
    """Re-score the ``top_k`` allowed candidates with ``weight * log p(attribute)``.

    ``scorer(texts) -> log-probabilities`` (a sequence of floats, one per text) is any
    callable; ``ClassifierGuidance.from_model`` wraps a Hugging Face sequence-
    classification model. ``tokenizer`` decodes the generated ids (those after the
    prompt, whose length is taken at the first call; ``reset()`` forgets it) plus each
    candidate. Keeps no other state: ``fork`` / ``rollback`` are supported.

    Args:
        scorer: ``texts -> log p(attribute | text)``, one float per text.
        tokenizer: decodes the generated ids and each candidate.
        top_k: the candidates re-scored per row, at least 1.
        weight: the classifier's log-probability scale.
        prompt_length: the prompt's length in ``input_ids``; None takes it at the
            first call.

    Attributes:
        calls: scorer calls so far (one per step).

    Raises:
        ValueError: ``top_k < 1``.

    Example::

        >>> import math
        >>> positive = lambda texts: [math.log(max(1e-6, score(t))) for t in texts]
        >>> proc = ClassifierGuidance(positive, tokenizer, top_k=10, weight=3.0)
        >>> guided.generate(model, tokenizer, "The movie was", processors=[proc])
    """

    def __init__(self, scorer, tokenizer, top_k: int = 20, weight: float = 1.0, prompt_length: int | None = None):
        if top_k < 1:
            raise ValueError(f"ClassifierGuidance: top_k must be >= 1, not {top_k}")
        self.scorer = scorer
        self.tokenizer = tokenizer
        self.top_k = int(top_k)
        self.weight = float(weight)
        self.prompt_length = prompt_length
        self._start = prompt_length
        self.calls = 0  # classifier calls, one per step

    def reset(self) -> None:
        """Forget the prompt length taken at the first call (a new prompt)."""
        self._start = self.prompt_length

    @classmethod
    def from_model(cls, model, model_tokenizer, label: int, tokenizer, **kw) -> "ClassifierGuidance":
        """Guidance by a Hugging Face sequence-classification model's ``label``.

        Args:
            model: the classifier (``AutoModelForSequenceClassification``).
            model_tokenizer: the classifier's tokenizer.
            label: the index of the attribute's class; its log-softmax is the score.
            tokenizer: the generating model's tokenizer.
            **kw: ``top_k``, ``weight``, ``prompt_length``.

        Returns:
            A ``ClassifierGuidance`` whose scorer runs the classifier on a batch of texts.

        Example::

            >>> proc = ClassifierGuidance.from_model(clf, clf_tok, label=1, tokenizer=tokenizer, top_k=10)
        """

        @torch.inference_mode()
        def scorer(texts):
            batch = model_tokenizer(texts, return_tensors="pt", padding=True, truncation=True).to(model.device)
            return torch.log_softmax(model(**batch).logits.float(), dim=-1)[:, label].tolist()

        return cls(scorer, tokenizer, **kw)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """The re-scored candidates; every other token ``-inf`` (a new tensor)."""
        if self._start is None:
            self._start = input_ids.shape[-1]
        k = min(self.top_k, scores.shape[-1])
        top = torch.topk(scores, k, dim=-1)
        texts, where = [], []
        for row in range(scores.shape[0]):
            prefix = input_ids[row, self._start :].tolist()
            for j in range(k):
                if torch.isfinite(top.values[row, j]):  # never a forbidden token
                    texts.append(self.tokenizer.decode(prefix + [int(top.indices[row, j])]))
                    where.append((row, j))
        out = torch.full_like(scores, float("-inf"))
        if not texts:
            return out
        log_p = torch.as_tensor(self.scorer(texts), dtype=scores.dtype, device=scores.device)
        self.calls += 1
        rows = torch.tensor([r for r, _ in where], device=scores.device)
        cols = top.indices[rows, torch.tensor([j for _, j in where], device=scores.device)]
        out[rows, cols] = scores[rows, cols] + self.weight * log_p
        return out
