"""``guided.LogitsProcessor``: the mask as a Hugging Face logits processor.

``model.generate(logits_processor=[guided.LogitsProcessor(guide)])``: transformers
runs user processors before its temperature / top-k / top-p warpers, so the mask is
applied first, as exact constrained sampling needs.
"""

from __future__ import annotations

import torch

from .batch import fill_next_token_bitmasks
from .bitmask import allocate_token_bitmask, apply_token_bitmask_
from .budget import check_budget
from .matcher import Guide, Matcher


class LogitsProcessor:
    """Constrain ``model.generate`` to a compiled guide; one matcher per batch row.

    Contract: called with ``input_ids [batch, seq]`` and ``scores [batch, V]`` once per
    step; the first call fixes the prompt length; each later call first feeds every
    row's newest token to that row's matcher. Rows whose tokens do not extend their
    matcher's history (beam search reorders rows) are re-derived from the matcher
    that has their prefix. Scores of disallowed tokens become ``-inf``; a row with
    nothing allowed gets EOS forced. Build a fresh processor (or call ``reset()``)
    for each ``generate`` call. Works with greedy search, sampling,
    ``num_return_sequences`` and beam search; with padded batches, pad on the left.

    Args:
        guide: a compiled guide (``guided.compile(spec, tokenizer)``).
        max_new_tokens: the ``max_new_tokens`` given to ``generate``: masks are then
            budget-aware (``docs/budget.md``), so each row ends with a complete
            match and EOS by that many tokens. None: no budget.
        budget_aware: as for ``guided.generate`` (None: where the guide supports it,
            when ``max_new_tokens`` is given).

    Raises:
        TypeError: ``guide`` is not a ``Guide`` (a spec must be compiled first).
        TokenBudgetError: the shortest output of the spec does not fit in
            ``max_new_tokens``.

    Example::

        >>> guide = guided.compile(guided.Regex(r"[0-9]{3}"), tokenizer)
        >>> inputs = tokenizer("Three digits:", return_tensors="pt")
        >>> out = model.generate(**inputs, logits_processor=[guided.LogitsProcessor(guide)], max_new_tokens=8)
    """

    def __init__(self, guide: Guide, max_new_tokens: int | None = None, budget_aware: bool | None = None):
        if not isinstance(guide, Guide):
            raise TypeError("LogitsProcessor takes a compiled guide: guided.compile(spec, tokenizer)")
        self.guide = guide
        self.max_new_tokens = max_new_tokens
        self._budget = max_new_tokens is not None and check_budget(guide, max_new_tokens, budget_aware)
        self.reset()

    def reset(self) -> None:
        """Forget the last ``generate`` call: the next call starts new matchers."""
        self.matchers: list[Matcher | None] | None = None
        self._histories: list[tuple[int, ...]] = []
        self._prompt_len = 0
        self._bitmask: torch.Tensor | None = None

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """Mask ``scores`` in place for each row's next token; returns them.

        Raises:
            RuntimeError: ``input_ids`` holds a sequence this processor did not
                constrain (a processor reused across ``generate`` calls without
                ``reset()``).
        """
        batch = input_ids.shape[0]
        if self.matchers is None:
            self.matchers = [self.guide.matcher() for _ in range(batch)]
            self._histories = [()] * batch
            self._prompt_len = input_ids.shape[1]
        else:
            self._advance(input_ids)
        if self._bitmask is None or self._bitmask.shape[0] != batch:
            # Filled on the host (pinned when an accelerator is there), then copied.
            pin = scores.device.type == "cuda"
            self._bitmask = allocate_token_bitmask(batch, scores.shape[-1])
            if pin:
                self._bitmask = self._bitmask.pin_memory()
        for i, m in enumerate(self.matchers):
            if m is None:
                self._bitmask[i] = 0  # a dead beam: nothing is allowed
        remaining = None
        if self._budget:
            remaining = max(1, self.max_new_tokens - (input_ids.shape[1] - self._prompt_len))
        fill_next_token_bitmasks(self.matchers, self._bitmask, remaining=remaining)
        return apply_token_bitmask_(scores, self._bitmask)

    @property
    def bitmask(self) -> torch.Tensor | None:
        """The int32 bitmask ``[batch, words]`` the last call applied (host memory)."""
        return self._bitmask

    def _advance(self, input_ids: torch.Tensor) -> None:
        generated = input_ids[:, self._prompt_len :].tolist()
        new_matchers, new_histories = [], []
        by_history = {h: m for h, m in zip(self._histories, self.matchers)}
        taken = set()
        for i, row in enumerate(generated):
            prefix, last = tuple(row[:-1]), row[-1]
            if i < len(self._histories) and prefix == self._histories[i] and i not in taken:
                m = self.matchers[i]  # the row kept its place: no copy needed
                taken.add(i)
            elif prefix in by_history:
                m = by_history[prefix]  # beam search moved or duplicated a row
                m = m.fork() if m is not None else None
            else:
                raise RuntimeError(
                    "LogitsProcessor saw a sequence it did not constrain; "
                    "use a fresh processor (or reset()) for each generate call"
                )
            if m is not None and not m.is_terminated() and not m.accept_token(last):
                # Beam search keeps 2 * num_beams candidates even when fewer have a
                # finite score, so a forbidden token can reach a beam whose score is
                # already -inf. That beam is dead: keep every logit at -inf.
                m = None
            # (After EOS, generate pads finished rows: those tokens are not the model's.)
            new_matchers.append(m)
            new_histories.append(prefix + (last,))
        self.matchers, self._histories = new_matchers, new_histories
