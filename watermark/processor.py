"""``WatermarkLogitsProcessor``: red-green watermarking as a logits processor."""

from __future__ import annotations

import torch

from guided.bitmask import unpack_token_bitmask
from guided.processor import LogitsProcessor

from .config import WatermarkConfig, as_key
from .prf import green_count_among, keyed_tables, rank_keys, threshold, values
from .spelling import SpellingCheck


class WatermarkLogitsProcessor:
    """Add ``delta`` to the logits of a keyed pseudo-random "green" gamma fraction of
    the vocabulary, chosen afresh at every step from the previous ``context_width``
    token ids (Kirchenbauer et al. 2023).

    Contract: called with ``input_ids [batch, seq]`` and ``scores [batch, V]`` (V may
    exceed ``vocab_size``: padded ids are never green); returns the new scores,
    computed on the scores' device for the whole batch at once. With ``hard=True``
    tokens outside the green list get ``-inf`` instead. While a row has fewer than
    ``context_width`` tokens its scores pass unchanged.

    With ``guide`` (a compiled ``guided`` spec) the processor first applies the
    grammar mask (it runs a ``guided.LogitsProcessor`` inside), then draws the green
    list *among the allowed tokens*: the allowed tokens with the smallest PRF values,
    about gamma of them but at least one and never all. A position where the grammar
    allows a single token is left alone. Where the grammar fixes the text but several
    tokens spell it (``o``, ``om``, ``omer`` inside a fixed key), the bias moves only
    the tokenisation, never the text: signal that token ids keep and re-tokenised text
    loses (see ``watermark.spelling``). ``WatermarkDetector.detect(..., guide=...)``
    replays the same rule, so every real choice carries signal and forced tokens are
    not scored. Use it instead of (not after) ``guided.LogitsProcessor`` in
    ``model.generate``; in ``guided.generate``, pass it as ``watermark=`` (it then runs
    last, after the mask, the processors and the sampling warpers), with the same
    guide as the spec.

    With a guide, ``spelling="hard"`` (the default there) goes further at those
    positions: only green tokens may be chosen. The text is the same whatever the split,
    so this costs no content, and detection from token ids gains a green token at every
    such position; detection from text sees none of it (it re-tokenises). The model then
    reads some non-canonical splits of fixed keys and uses a few more tokens.
    ``spelling="soft"`` only biases the split, like any other position. Without a guide
    there are no such positions and the spelling is "soft".

    A processor with a guide follows one generation at a time (the guide's matchers):
    ``guided.generate`` calls ``reset()`` at the start of each call; with
    ``model.generate``, call ``reset()`` (or make a new one) before each call.

    Args:
        vocab_size: the tokenizer's size (``len(tokenizer)``); the detector must use
            the same.
        key: the secret key, bytes or str, at least 16 bytes (``load_key``).
        gamma: the green fraction, strictly between 0 and 1.
        delta: the bias added to green logits.
        seeding: ``"lefthash"`` or ``"selfhash"`` (``WatermarkConfig``).
        context_width: previous tokens that seed the green list.
        hard: red tokens get ``-inf`` instead of green ones ``+delta``.
        guide: a compiled guide: grammar-aware green lists (see above).
        spelling: ``"hard"`` or ``"soft"``, with a guide or ``vocab`` only; None:
            ``"hard"`` with either, ``"soft"`` without.
        vocab: instead of ``guide``, for callers that fill the grammar masks
            themselves and call ``bias`` with them (a serving engine: one processor
            for the requests of every spec): the guides' ``Vocabulary``.

    Raises:
        ValueError: a setting out of range, an unknown ``spelling``, or
            ``spelling="hard"`` without a guide.

    Example::

        >>> key = load_key("wm.key")
        >>> wm = WatermarkLogitsProcessor(len(tokenizer), key)
        >>> out = model.generate(**inputs, do_sample=True, logits_processor=[wm])
        >>> guide = guided.compile(spec, tokenizer)
        >>> r = guided.generate(model, tokenizer, prompt, guide, temperature=1.0,
        ...                     watermark=WatermarkLogitsProcessor(len(tokenizer), key, guide=guide))
    """

    def __init__(
        self,
        vocab_size: int,
        key,
        gamma: float = 0.25,
        delta: float = 2.0,
        seeding: str = "lefthash",
        context_width: int = 1,
        hard: bool = False,
        guide=None,
        spelling: str | None = None,
        vocab=None,
    ):
        if guide is not None and vocab is not None:
            raise ValueError("pass a guide or a vocab, not both")
        aware_vocab = guide.vocab if guide is not None else vocab
        if spelling is None:
            # Structure-heavy schemas leave few real choices: their splits carry most of
            # the signal (benchmarks/README.md, watermark_eval.py), so take it by default.
            spelling = "soft" if aware_vocab is None else "hard"
        if spelling not in ("soft", "hard"):
            raise ValueError(f'spelling must be "soft" or "hard", not {spelling!r}')
        if spelling == "hard" and aware_vocab is None:
            raise ValueError('spelling="hard" needs a guide: it acts where the grammar fixes the text')
        self.config = WatermarkConfig(gamma, delta, seeding, context_width, hard)
        self.vocab_size = int(vocab_size)
        ctx, cand = keyed_tables(as_key(key), self.vocab_size)
        self._tables_cpu = (torch.from_numpy(ctx.copy()), torch.from_numpy(cand.copy()))
        self._tables: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}
        self._threshold = threshold(gamma)
        self._mask = LogitsProcessor(guide) if guide is not None else None
        self._aware = aware_vocab is not None  # green lists drawn among a bitmask's tokens
        self._spelling = SpellingCheck(aware_vocab) if aware_vocab is not None and spelling == "hard" else None

    def reset(self) -> None:
        """Forget the previous ``generate`` call (only matters with a guide)."""
        if self._mask is not None:
            self._mask.reset()

    def _device_tables(self, device: torch.device):
        got = self._tables.get(device)
        if got is None:
            got = self._tables[device] = tuple(t.to(device) for t in self._tables_cpu)
        return got

    def green_mask(self, input_ids: torch.Tensor, width: int, allowed: torch.Tensor | None = None) -> torch.Tensor:
        """The green tokens for each row's next position.

        Args:
            input_ids: ``[batch, T]``; the last ``context_width`` ids seed the list.
            width: the scores' width (ids past ``vocab_size`` are never green).
            allowed: bool ``[batch, >= vocab_size]``, the grammar's allowed tokens:
                the green list is drawn among them; None: over the whole vocabulary.

        Returns:
            bool ``[batch, width]`` on ``input_ids``' device.
        """
        device = input_ids.device
        ctx_table, cand_table = self._device_tables(device)
        w = self.config.context_width
        # Ids past the tokenizer (a padded embedding) wrap around, as in the detector.
        contexts = torch.remainder(input_ids[:, -w:].to(torch.int64), self.vocab_size)
        v = min(width, self.vocab_size)
        candidates = torch.arange(v, device=device, dtype=torch.int64).expand(input_ids.shape[0], v)
        vals = values(ctx_table, cand_table, contexts, candidates, self.config.seeding)
        green = torch.zeros(input_ids.shape[0], width, dtype=torch.bool, device=device)
        if allowed is None:
            green[:, :v] = vals < self._threshold
            return green
        keys = rank_keys(vals, candidates)
        allowed = allowed[:, :v]
        big = torch.iinfo(torch.int64).max
        for i in range(input_ids.shape[0]):
            n = int(allowed[i].sum())
            k = green_count_among(n, self.config.gamma)
            if k == 0:
                continue
            row = keys[i].masked_fill(~allowed[i], big)
            kth = torch.kthvalue(row, k).values
            green[i, :v] = allowed[i] & (row <= kth)
        return green

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """The watermarked scores: with a guide, masked first, then ``bias``."""
        bitmask = None
        if self._mask is not None:
            scores = self._mask(input_ids, scores)
            bitmask = self._mask.bitmask
        return self.bias(input_ids, scores, bitmask)

    def bias(self, input_ids: torch.Tensor, scores: torch.Tensor, bitmask=None) -> torch.Tensor:
        """The green-list step alone, stateless: with a guide (or ``vocab``), the green
        list is drawn among the tokens ``bitmask`` allows (the caller's grammar mask,
        ``[batch, words]``); without one ``bitmask`` is ignored. Speculative drafters use it
        on draft positions, which the guide's own stateful mask cannot roll back."""
        allowed = None
        if self._aware and bitmask is not None:
            allowed = unpack_token_bitmask(bitmask, scores.shape[-1]).to(scores.device)
        if input_ids.shape[-1] < self.config.context_width:
            return scores
        green = self.green_mask(input_ids, scores.shape[-1], allowed)
        if self._spelling is not None and allowed is not None:
            # Where only the split of a fixed text is open, keep the green splits alone.
            counts = allowed.sum(dim=-1).tolist()
            only_split = torch.tensor(
                [2 <= n <= self._spelling.max_chain and self._spelling(allowed[i].nonzero().flatten().tolist())
                 for i, n in enumerate(counts)], dtype=torch.bool, device=scores.device)
            scores = scores.masked_fill(only_split[:, None] & ~green, float("-inf"))
        if self.config.hard:
            if allowed is not None:  # rows without a green token (forced steps) stay as they are
                green = green | ~green.any(dim=-1, keepdim=True)
            return scores.masked_fill(~green, float("-inf"))
        return scores + green.to(scores.dtype) * self.config.delta
