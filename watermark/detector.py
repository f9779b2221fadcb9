"""``WatermarkDetector``: the z-test, naive or grammar-aware, with a windowed search.

::

    text --tokenizer--> ids --PRF(key, context, token)--> green flags
         naive:          every position with a full context, null p = gamma
         grammar-aware:  replay the spec's matcher; skip forced positions (one allowed
                         token; for text input also allowed tokens that all spell the
                         same forced text, whose canonical re-tokenisation is no choice);
                         green = among the allowed tokens (as generation drew it);
                         null p_i = green allowed / allowed
    --> z, exact one-sided p-value (binomial / Poisson-binomial), per-token flags

Repeated (context, token) n-grams are scored once by default: a text that repeats a
phrase would otherwise count the same coin flip many times (Kirchenbauer et al.'s
"ignore repeated n-grams").
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from .config import WatermarkConfig, as_key, fingerprint, hf_key
from .prf import green_count_among, keyed_tables, rank_keys, threshold, values
from .spelling import SpellingCheck
from .stats import best_window, binomial_sf, normal_sf, poisson_binomial_sf, z_score


@dataclass
class DetectionResult:
    """What ``WatermarkDetector.detect`` found.

    ``green_flags[i]`` is True / False for each scored token and None for tokens not
    scored (no full context yet, forced by the grammar, or a repeated n-gram).
    ``num_forced`` counts the positions the grammar left no real choice at: one allowed
    token and, when the input was text, allowed tokens that all spell the same text
    (``watermark.spelling``).
    ``p_value`` is exact and one-sided; in windowed mode it is the best span's p-value
    times the number of spans tried (Bonferroni), and ``span`` gives the span in
    token indices. ``is_watermarked``: ``z_score >= threshold``, or in windowed mode
    the corrected p-value at most the normal tail at ``threshold``.

    Attributes:
        z_score: the z-statistic of the green count against its null mean.
        p_value: the exact one-sided p-value (Bonferroni-corrected in windowed mode).
        num_tokens_scored: the positions scored (in the span, in windowed mode).
        num_green: the green ones among them.
        green_fraction: ``num_green / num_tokens_scored`` (0 when none scored).
        is_watermarked: the verdict at ``threshold``.
        threshold: the z threshold.
        green_flags: per token, True / False / None (not scored).
        config: the detector's public fingerprint (settings, tokenizer hash, key id).
        mode: ``"naive"`` or ``"grammar"``.
        num_tokens: the tokens read.
        num_forced: positions the grammar left no real choice at.
        span: windowed mode: ``(start, end)`` token indices of the best span.
        windows_searched: windowed mode: the spans tried.
        grammar_mismatch_at: the first token the grammar refused (the rest was
            scored naively), or None.
        extra: free for callers.

    Example::

        >>> r = detector.detect(text)
        >>> r.is_watermarked, r.z_score, r.p_value
        >>> json.dumps(r.as_dict())
    """

    z_score: float
    p_value: float
    num_tokens_scored: int
    num_green: int
    green_fraction: float
    is_watermarked: bool
    threshold: float
    green_flags: list
    config: dict
    mode: str = "naive"
    num_tokens: int = 0
    num_forced: int = 0
    span: tuple | None = None
    windows_searched: int = 0
    grammar_mismatch_at: int | None = None
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        """Every field as plain data (``span`` a list), for JSON."""
        d = asdict(self)
        d["span"] = list(self.span) if self.span is not None else None
        return d


class WatermarkDetector:
    """Detect this key's red-green watermark in a text or a list of token ids.

    The settings must be those generation used (``WatermarkLogitsProcessor``);
    ``delta`` and ``hard`` do not change the test, but go into the fingerprint.
    ``prf="hf"`` scores with Hugging Face's green lists instead (an integer key, as
    transformers' ``WatermarkingConfig.hashing_key``; lefthash only), for text
    watermarked by ``model.generate(watermarking_config=...)``. Read-only once built:
    one detector may serve several threads.

    Args:
        tokenizer: the generating model's tokenizer (None: token ids only).
        key: the secret key (bytes or str, ``load_key``), or an int with ``prf="hf"``.
        gamma: as in ``WatermarkConfig``.
        delta: as in ``WatermarkConfig``.
        seeding: as in ``WatermarkConfig``.
        context_width: as in ``WatermarkConfig``.
        hard: as in ``WatermarkConfig``.
        prf: ``"blake2"`` or ``"hf"``.
        z_threshold: the z-score from which a text is called watermarked.
        ignore_repeated_ngrams: score each (context, token) n-gram once.
        vocab_size: the processor's ``vocab_size``; None: ``len(tokenizer)``.

    Raises:
        ValueError: a setting out of range, or a key shorter than 16 bytes.

    Example::

        >>> det = WatermarkDetector(tokenizer, load_key("wm.key"))
        >>> r = det.detect("some text")
        >>> r.z_score, r.p_value, r.is_watermarked
        >>> det.detect(result.token_ids, guide=guide).is_watermarked     # grammar-aware
    """

    def __init__(
        self,
        tokenizer,
        key,
        gamma: float = 0.25,
        delta: float = 2.0,
        seeding: str = "lefthash",
        context_width: int = 1,
        hard: bool = False,
        *,
        prf: str = "blake2",
        z_threshold: float = 4.0,
        ignore_repeated_ngrams: bool = True,
        vocab_size: int | None = None,
    ):
        self.config = WatermarkConfig(gamma, delta, seeding, context_width, hard, prf)
        self.tokenizer = tokenizer
        self.vocab_size = int(vocab_size if vocab_size is not None else len(tokenizer))
        self.z_threshold = float(z_threshold)
        self.ignore_repeated_ngrams = ignore_repeated_ngrams
        if prf == "hf":
            self._hf_key = hf_key(key)
            self._hf_cache: dict[int, np.ndarray] = {}
        else:
            self._tables = keyed_tables(as_key(key), self.vocab_size)
        self._threshold = threshold(gamma)
        self._spelling: tuple | None = None  # (vocabulary fingerprint, SpellingCheck)
        self.fingerprint = fingerprint(self.config, key, _tokenizer_hash(tokenizer, self.vocab_size))

    # -- public API --------------------------------------------------------------------

    def tokenize(self, text: str) -> list[int]:
        """The ids detection scores for ``text`` (no special tokens added).

        Raises:
            ValueError: the detector has no tokenizer, or ``text`` holds a lone
                surrogate (it is not Unicode text).
        """
        if self.tokenizer is None:
            raise ValueError("this detector has no tokenizer: pass token ids")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(f"the text holds a lone surrogate at character {e.start}: not Unicode text") from None
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def detect(self, text_or_ids, guide=None, *, window: bool = False, min_window: int = 32,
               from_text: bool | None = None, time_limit: float | None = None) -> DetectionResult:
        """Test one text, or one sequence of token ids, for the watermark.

        Token ids (``GenerationResult.token_ids``) are best: the model's own split
        carries signal that re-tokenised text loses. Grammar-aware detection replays
        the spec's matcher: forced positions are not scored, and each scored one has
        its true null probability; where the text leaves the grammar, the rest is
        scored naively (``grammar_mismatch_at``).

        Args:
            text_or_ids: a str (tokenized with ``tokenize``), or token ids (a list or
                a tensor).
            guide: None (naive), or the guide or spec generation used: a compiled
                guide, a ``guided.JsonSchema`` / ``Regex`` / ``Grammar``, a schema
                dict or a pydantic class (with the same whitespace and key order).
            window: find the most watermarked span instead of testing the whole.
            min_window: the shortest span tried, in scored tokens.
            from_text: whether the ids are ``tokenize(text)`` rather than the
                model's own (then positions where only the split was open are not
                scored); None: True for a str, False for ids.
            time_limit: seconds the grammar-aware replay may take, checked between
                tokens (None: no limit); a lazy guide may build masks as it goes.

        Returns:
            A ``DetectionResult``.

        Raises:
            ValueError: negative or nested ids, a str or spec without a tokenizer,
                or a guide with ``prf="hf"``.
            SpecError: ``guide`` is a spec that cannot be compiled;
                ``BudgetExceededError`` when the replay passes ``time_limit``.

        Example::

            >>> detector.detect(r.token_ids).z_score
            >>> detector.detect(r.text, guide=guided.JsonSchema(schema, whitespace="compact"))
            >>> detector.detect(mixed_text, window=True).span
        """
        ids = self._ids(text_or_ids)
        if guide is not None:
            # Text is re-tokenised canonically: where only the split was open, the
            # tokens seen are the tokenizer's, not the model's, so they are not scored.
            skip_spellings = isinstance(text_or_ids, str) if from_text is None else from_text
            green, scored, probs, forced, mismatch = self._score_with_guide(ids, self._guide(guide), skip_spellings,
                                                                            time_limit)
            mode = "grammar"
        else:
            green, scored, probs = self._score(ids)
            forced, mismatch, mode = 0, None, "naive"
        return self._result(ids, green, scored, probs, mode, forced, mismatch, window, min_window)

    def detect_batch(self, texts_or_ids) -> list[DetectionResult]:
        """Naive detection of many texts (or id lists), vectorised across all of them.

        Returns:
            One ``DetectionResult`` per input, as ``detect`` (naive, no window) gives.
        """
        all_ids = [self._ids(t) for t in texts_or_ids]
        if not all_ids:
            return []
        lengths = np.array([len(a) for a in all_ids])
        if lengths.sum():
            flat = np.concatenate([np.asarray(a, dtype=np.int64) for a in all_ids])
        else:
            flat = np.zeros(0, np.int64)
        doc = np.repeat(np.arange(len(all_ids)), lengths)
        green, scored, probs = self._score(flat, doc)
        out, start = [], 0
        for ids, n in zip(all_ids, lengths):
            sl = slice(start, start + n)
            out.append(self._result(ids, green[sl], scored[sl], probs[sl], "naive", 0, None, False, 0))
            start += n
        return out

    # -- scoring -----------------------------------------------------------------------

    def _ids(self, text_or_ids) -> np.ndarray:
        if isinstance(text_or_ids, str):
            return np.asarray(self.tokenize(text_or_ids), dtype=np.int64)
        if isinstance(text_or_ids, torch.Tensor):
            text_or_ids = text_or_ids.reshape(-1).tolist()
        try:
            ids = np.asarray(list(text_or_ids), dtype=np.int64)
        except OverflowError:
            raise ValueError("token ids must be below 2**63") from None
        if ids.ndim != 1:
            raise ValueError("token ids must be a flat list of integers")
        if len(ids) and (ids.min() < 0):
            raise ValueError("token ids must be non-negative")
        return ids

    def _guide(self, guide):
        from guided.compiler import compile as compile_spec
        from guided.matcher import Guide

        if isinstance(guide, Guide):
            return guide
        if self.tokenizer is None:
            raise ValueError("grammar-aware detection of a spec needs the tokenizer")
        return compile_spec(guide, self.tokenizer)

    def _contexts(self, ids: np.ndarray, doc: np.ndarray | None):
        """Positions with a full context window (inside one document) and those windows."""
        w = self.config.context_width
        n = len(ids)
        ok = np.zeros(n, dtype=bool)
        if n > w:
            ok[w:] = True
            if doc is not None:
                ok[w:] &= doc[w:] == doc[:-w]
        ok &= ids < self.vocab_size
        pos = np.nonzero(ok)[0]
        contexts = ids[pos[:, None] - w + np.arange(w)] if len(pos) else np.zeros((0, w), np.int64)
        # Context ids past the tokenizer (a padded embedding) wrap around, as in the processor.
        return pos, contexts % self.vocab_size

    def _green_of(self, contexts: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        if self.config.prf == "hf":
            return np.array([self._hf_green(int(c[-1]), int(t)) for c, t in zip(contexts, tokens)], dtype=bool)
        ctx_table, cand_table = self._tables
        vals = values(ctx_table, cand_table, contexts, tokens[:, None], self.config.seeding)[:, 0]
        return vals < self._threshold

    def _score(self, ids: np.ndarray, doc: np.ndarray | None = None):
        n = len(ids)
        green = np.zeros(n, dtype=bool)
        scored = np.zeros(n, dtype=bool)
        pos, contexts = self._contexts(ids, doc)
        if len(pos):
            if self.ignore_repeated_ngrams:
                keep = _first_occurrences(contexts, ids[pos], doc[pos] if doc is not None else None)
                pos, contexts = pos[keep], contexts[keep]
            green[pos] = self._green_of(contexts, ids[pos])
            scored[pos] = True
        probs = np.full(n, self.config.gamma)
        return green, scored, probs

    def _score_with_guide(self, ids: np.ndarray, guide, skip_spellings: bool = False,
                          time_limit: float | None = None):
        from guided.bitmask import allocate_token_bitmask, unpack_token_bitmask
        from guided.errors import BudgetExceededError

        if self.config.prf == "hf":
            raise ValueError("grammar-aware detection uses our keyed PRF (prf='blake2')")
        n, w = len(ids), self.config.context_width
        green = np.zeros(n, dtype=bool)
        scored = np.zeros(n, dtype=bool)
        probs = np.full(n, self.config.gamma)
        ctx_table, cand_table = self._tables
        matcher = guide.matcher()
        spelling = self._spelling_check(guide.vocab) if skip_spellings else (lambda allowed: False)
        bitmask = allocate_token_bitmask(1, guide.vocab_size)
        seen: set = set()
        forced, mismatch = 0, None
        deadline = None if time_limit is None else time.monotonic() + time_limit
        for i in range(n):
            if deadline is not None and time.monotonic() > deadline:
                raise BudgetExceededError(f"grammar-aware detection passed its time limit of {time_limit:g} s "
                                          f"after {i} of {n} tokens")
            tok = int(ids[i])
            matcher.fill_next_token_bitmask(bitmask, 0)
            allowed = np.nonzero(unpack_token_bitmask(bitmask, guide.vocab_size)[0].numpy())[0]
            allowed = allowed[allowed < self.vocab_size]
            j = int(np.searchsorted(allowed, tok))  # allowed is sorted: tok's place in it
            if len(allowed) == 1 or spelling(allowed):
                forced += 1
            elif i >= w and len(allowed) > 1 and j < len(allowed) and allowed[j] == tok:
                ngram = tuple(ids[i - w : i + 1].tolist())
                if not (self.ignore_repeated_ngrams and ngram in seen):
                    seen.add(ngram)
                    ctx = ids[i - w : i][None, :] % self.vocab_size
                    k = green_count_among(len(allowed), self.config.gamma)
                    vals = values(ctx_table, cand_table, ctx, allowed[None, :], self.config.seeding)[0]
                    keys = rank_keys(vals, allowed)
                    green[i] = int((keys < keys[j]).sum()) < k
                    scored[i] = True
                    probs[i] = k / len(allowed)
            if not matcher.accept_token(tok):
                mismatch = i  # the text left the grammar: score the rest naively
                naive_green, naive_scored, _ = self._score(ids)
                green[i + 1 :] = naive_green[i + 1 :]
                scored[i + 1 :] = naive_scored[i + 1 :]
                break
        return green, scored, probs, forced, mismatch

    def _spelling_check(self, vocab) -> SpellingCheck:
        if self._spelling is None or self._spelling[0] != vocab.fingerprint:
            self._spelling = (vocab.fingerprint, SpellingCheck(vocab))
        return self._spelling[1]

    def _hf_green(self, prev: int, token: int) -> bool:
        greens = self._hf_cache.get(prev)
        if greens is None:
            rng = torch.Generator(device="cpu")
            rng.manual_seed((self._hf_key * prev) % (2**64 - 1))
            perm = torch.randperm(self.vocab_size, generator=rng)
            greens = np.zeros(self.vocab_size, dtype=bool)
            greens[perm[: int(self.vocab_size * self.config.gamma)].numpy()] = True
            if len(self._hf_cache) > 4096:
                self._hf_cache.clear()
            self._hf_cache[prev] = greens
        return bool(greens[token])

    # -- the test --------------------------------------------------------------------------

    def _result(self, ids, green, scored, probs, mode, forced, mismatch, window, min_window) -> DetectionResult:
        g_s, p_s = green[scored], probs[scored]
        idx = np.nonzero(scored)[0]
        t, g = int(scored.sum()), int(g_s.sum())
        span, searched = None, 0
        if window and t:
            s, e, z, p_raw, searched = best_window(g_s.astype(np.float64), p_s, min_window)
            p = min(1.0, p_raw * searched)
            t, g = e - s, int(g_s[s:e].sum())
            span = (int(idx[s]), int(idx[e - 1]) + 1)
            flagged = p <= normal_sf(self.z_threshold)
        else:
            z = z_score(g, p_s, p_s * (1 - p_s)) if t else 0.0
            if mode == "naive" or len(np.unique(p_s)) <= 1:
                p = binomial_sf(g, t, float(p_s[0])) if t else 1.0
            else:
                p = poisson_binomial_sf(g, p_s)
            flagged = bool(t) and z >= self.z_threshold
        flags = np.where(scored, green, None).tolist()
        return DetectionResult(
            z_score=float(z), p_value=float(p), num_tokens_scored=t, num_green=g,
            green_fraction=(g / t) if t else 0.0, is_watermarked=bool(flagged),
            threshold=self.z_threshold, green_flags=flags, config=dict(self.fingerprint),
            mode=mode, num_tokens=len(ids), num_forced=forced, span=span,
            windows_searched=searched, grammar_mismatch_at=mismatch,
        )


def _first_occurrences(contexts: np.ndarray, tokens: np.ndarray, doc: np.ndarray | None) -> np.ndarray:
    """Indices of the first occurrence of each (document, context, token) n-gram, in order."""
    cols = [contexts, tokens[:, None]]
    if doc is not None:
        cols.insert(0, doc[:, None])
    table = np.concatenate(cols, axis=1)
    bases = table.max(axis=0) + 1 if len(table) else np.ones(table.shape[1], np.int64)
    if float(np.prod(bases.astype(np.float64))) < 2.0**62:  # mixed radix: one int64 per n-gram
        flat = np.zeros(len(table), dtype=np.int64)
        for j in range(table.shape[1]):
            flat = flat * int(bases[j]) + table[:, j]
        _, first = np.unique(flat, return_index=True)
    else:
        _, first = np.unique(table, axis=0, return_index=True)
    return np.sort(first)


def _tokenizer_hash(tokenizer, vocab_size: int) -> str:
    if tokenizer is None:
        return f"none-{vocab_size}"
    try:
        from guided.fsm.vocabulary import Vocabulary

        return Vocabulary.from_tokenizer(tokenizer).fingerprint[:16]
    except (ValueError, TypeError, AttributeError):  # a tokenizer guided cannot read still has a size
        return f"{type(tokenizer).__name__}-{vocab_size}"
