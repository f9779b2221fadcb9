"""``guided.generate``: constrained decoding with a KV cache, and its statistics.

One step::

    logits = model(last token, cache)          # [1, V_model]
    scores = next_token_scores(...)            # mask -> processors -> mask -> warpers -> watermark
    token = argmax or sample
    matcher.accept_token(token)                # stop on EOS or when nothing can follow
    matcher.fill_next_token_bitmask(...)       # next step's mask, before the next forward
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from guided.bitmask import allocate_token_bitmask
from guided.budget import check_budget
from guided.compiler import as_vocabulary, compile
from guided.matcher import Guide
from guided.specs import JsonSchema
from guided.thinking import AfterThinking
from guided.tool_calls import ToolCalls

from .beam_search import beam_search
from .speculative import default_drafters, speculative_loop
from .step import next_token_scores


@dataclass
class GenerationStats:
    """Counts and timings of one ``generate`` call (seconds, ``time.perf_counter``).

    Attributes:
        prompt_tokens: tokens in the prompt (after the chat template).
        new_tokens: tokens generated (EOS not counted).
        compile_s: spec -> guide (0 when a compiled guide was given, or a cached one).
        prefill_s: the prompt's forward pass (inside ``decode_s`` for beam search and
            speculative decoding).
        decode_s: every later step, forward passes included.
        mask_s: filling masks and advancing matchers (applying them is part of the step).
        total_s: the whole call.
        target_forward_passes: speculative decoding: the model's forward passes.
        draft_tokens: speculative decoding: tokens proposed by the drafters.
        accepted_draft_tokens: speculative decoding: drafted tokens kept after
            verification.

    Example::

        >>> s = guided.generate(model, tokenizer, "Hi", guided.Regex("Hello[.!]")).stats
        >>> s.tokens_per_s, s.mask_us_per_token, s["new_tokens"]
        >>> s.as_dict()
    """

    prompt_tokens: int = 0
    new_tokens: int = 0
    compile_s: float = 0.0      # spec -> guide (0 when a compiled guide was given or cached)
    prefill_s: float = 0.0      # the prompt's forward pass (in decode_s for beam / speculative)
    decode_s: float = 0.0       # all later steps, forward passes included
    mask_s: float = 0.0         # filling masks and advancing matchers (applying is in the step)
    total_s: float = 0.0
    target_forward_passes: int = 0   # speculative decoding: the model's forward passes
    draft_tokens: int = 0            # ... tokens proposed by the drafters
    accepted_draft_tokens: int = 0   # ... and kept after verification

    def __getitem__(self, name: str):
        """``stats["target_forward_passes"]`` reads the field of that name."""
        return getattr(self, name)

    @property
    def tokens_per_s(self) -> float:
        """New tokens per second of model time (the first token comes from the prefill)."""
        t = self.prefill_s + self.decode_s
        return self.new_tokens / t if t > 0 else 0.0

    @property
    def mask_us_per_token(self) -> float:
        """Microseconds of mask work (``mask_s``) per new token."""
        return 1e6 * self.mask_s / self.new_tokens if self.new_tokens else 0.0

    def as_dict(self) -> dict:
        """Every field, plus ``tokens_per_s`` and ``mask_us_per_token`` (rounded)."""
        d = asdict(self)
        d["tokens_per_s"] = round(self.tokens_per_s, 2)
        d["mask_us_per_token"] = round(self.mask_us_per_token, 1)
        return d


@dataclass
class GenerationResult:
    """What ``generate`` returns: the text, its value, the tokens and timing.

    Attributes:
        text: the generated text (EOS not included), decoded from the token bytes.
        value: for a JSON Schema, the parsed JSON (a validated model instance for a
            pydantic class; ``None`` when generation stopped at the length limit);
            for ``ToolCalls``, the text outside the calls; for other specs and for
            unconstrained text, the text.
        token_ids: the generated tokens, EOS not included.
        finish_reason: ``"eos"`` (the model ended, where the spec allows),
            ``"complete"`` (the spec admits nothing more), ``"length"``
            (``max_new_tokens`` ran out; the text may then be an unfinished match), or
            ``"no_match"`` (the text reached a point where no token of the
            vocabulary continues it, so it does not match the spec).
        stats: the ``GenerationStats``.
        tool_calls: for ``ToolCalls``, the calls made, OpenAI-shaped (``{"id", "type":
            "function", "function": {"name", "arguments"}}``); None for other specs.
        reasoning: for ``AfterThinking``, the thinking text (``value`` and
            ``tool_calls`` are then the answer's); None for other specs.

    Example::

        >>> r = guided.generate(model, tokenizer, "Age of Ada Lovelace?", {"type": "integer"})
        >>> r.value, r.finish_reason, len(r.token_ids)
        >>> json.dumps(r.as_dict())
    """

    text: str
    value: Any
    token_ids: list[int]
    finish_reason: str
    stats: GenerationStats = field(default_factory=GenerationStats)
    tool_calls: list[dict] | None = None
    reasoning: str | None = None

    def as_dict(self) -> dict:
        """The result as plain data (``stats`` through ``GenerationStats.as_dict``);
        ``value`` is left as it is (a pydantic instance stays one)."""
        return {
            "text": self.text,
            "value": self.value,
            "token_ids": self.token_ids,
            "finish_reason": self.finish_reason,
            "stats": self.stats.as_dict(),
            "tool_calls": self.tool_calls,
            "reasoning": self.reasoning,
        }


def prompt_ids(tokenizer, prompt, chat: bool = True, system: str | None = None) -> list[int]:
    """Token ids for a prompt, as ``generate`` reads it.

    Args:
        tokenizer: a Hugging Face tokenizer.
        prompt: a string, or token ids (any iterable of ints, used as they are).
        chat: put a string through the tokenizer's chat template (as the user's
            message, with the generation prompt after it) when it has one; False
            tokenizes it plainly, with the tokenizer's special tokens.
        system: a system message for the chat template.

    Returns:
        The token ids.

    Example::

        >>> opening = tokenizer("The film", add_special_tokens=False)["input_ids"]
        >>> ids = prompt_ids(tokenizer, "Continue this review.") + opening
        >>> guided.generate(model, tokenizer, ids, max_new_tokens=20).text
    """
    if not isinstance(prompt, str):
        return [int(t) for t in prompt]
    if chat and getattr(tokenizer, "chat_template", None):
        messages = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": prompt}
        ]
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if hasattr(ids, "keys"):  # BatchEncoding in newer transformers
            ids = ids["input_ids"]
        return list(ids)
    return tokenizer(prompt, add_special_tokens=True)["input_ids"]


@torch.inference_mode()
def generate(
    model,
    tokenizer,
    prompt,
    spec=None,
    *,
    max_new_tokens: int = 256,
    budget_aware: bool | None = None,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    min_p: float | None = None,
    seed: int | None = None,
    chat: bool = True,
    system: str | None = None,
    processors=(),
    watermark=None,
    num_beams: int = 1,
    speculative=None,
    num_draft_tokens: int = 8,
) -> GenerationResult:
    """Generate from ``model`` so that the output satisfies ``spec``.

    One sequence, with the model's KV cache. Each token is drawn from the scores of
    ``next_token_scores``, in this order: grammar mask, ``processors``, mask again,
    temperature / top-k / top-p / min-p, ``watermark``. Generation stops at EOS, when
    the spec admits nothing more, or after ``max_new_tokens``.

    Args:
        model: a Hugging Face causal LM (``model(input_ids=..., past_key_values=...,
            use_cache=True)``), on any device.
        tokenizer: its tokenizer (or a ``guided.Vocabulary``, with token-id prompts).
        prompt: a string (through the chat template, see ``chat``) or token ids.
        spec: a ``guided.Regex`` / ``guided.JsonSchema`` / ``guided.Grammar``, a JSON
            Schema as a dict or pydantic class, an already compiled ``Guide``, or
            ``None`` for unconstrained text.
        max_new_tokens: the most tokens to generate.
        budget_aware: keep the output finishable within ``max_new_tokens``: each
            mask allows only tokens after which the spec can still be completed,
            EOS included, in the tokens left, so the output is never cut short
            (``docs/budget.md``); in every loop (beams, speculative decoding).
            None (default): where the guide supports it (regex and JSON Schema
            automata); True: required; False: off.
        temperature: 0 is greedy; above 0, sampling.
        top_k: sampling: keep the ``top_k`` best tokens.
        top_p: sampling: keep the smallest set of tokens with probability ``top_p``.
        min_p: sampling: keep tokens at least ``min_p`` times as likely as the best.
        seed: seeds a ``torch.Generator`` for sampling (reproducible output).
        chat: put a string prompt through the tokenizer's chat template, if any.
        system: a system message for the chat template.
        processors: Hugging Face style ``(input_ids, scores) -> scores`` callables
            (``guided.steering``, your own), run in order between the two masks;
            each one's ``reset()``, where it has one, is called first.
        watermark: a ``guided.watermark.WatermarkLogitsProcessor``, applied last
            (never put it in ``processors``); its ``reset()`` is called first, so one
            processor serves call after call.
        num_beams: above 1, constrained beam search (``guided.decoding.beam_search``),
            one matcher per beam; greedy, so ``temperature=0`` and no watermark.
        speculative: ``"auto"`` (``default_drafters``: forced tokens, then prompt
            lookup) or a list of drafters from ``guided.decoding.speculative``:
            drafted tokens are verified in one forward pass; the output distribution
            is unchanged (greedy output identical).
        num_draft_tokens: speculative decoding: the most tokens drafted per pass.

    Returns:
        A ``GenerationResult`` (text, value, token ids, finish reason, stats).

    Raises:
        SpecError: ``spec`` cannot be compiled.
        TokenBudgetError: budget-aware, and the shortest output of the spec does not
            fit in ``max_new_tokens``.
        ValueError: a negative ``temperature``, or ``num_beams > 1`` with sampling or
            a watermark.
        RuntimeError: the token chosen is one the spec forbids (a processor left
            every score at ``-inf``, say).

    Example::

        >>> model, tok = guided.models.load_default_model()
        >>> r = guided.generate(model, tok, "A US phone number:", guided.Regex(r"\\(\\d{3}\\) \\d{3}-\\d{4}"))
        >>> r.text, r.finish_reason, r.stats.tokens_per_s
        >>> guided.generate(model, tok, "Describe a cat as JSON.", {"type": "object"}, speculative="auto").value
    """
    t_start = time.perf_counter()
    stats = GenerationStats()
    vocab = as_vocabulary(tokenizer)
    guide = None
    if spec is not None:
        t = time.perf_counter()
        guide = spec if isinstance(spec, Guide) else compile(spec, vocab)
        stats.compile_s = time.perf_counter() - t
    matcher = guide.matcher() if guide is not None else None
    budget = check_budget(guide, max_new_tokens, budget_aware)
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 is greedy), not {temperature}")
    processors = list(processors)
    for proc in (*processors, watermark):
        if hasattr(proc, "reset"):
            proc.reset()  # a new prompt: penalties, helper models and the watermark's matcher start over
    eos = set(vocab.eos_token_ids)
    generator = None
    if seed is not None:
        generator = torch.Generator(device=model.device).manual_seed(seed)

    ids = prompt_ids(tokenizer, prompt, chat=chat, system=system)
    stats.prompt_tokens = len(ids)
    if num_beams > 1:
        if temperature != 0 or watermark is not None:
            raise ValueError("beam search keeps the most likely hypotheses: use temperature=0 and no watermark")
        t = time.perf_counter()
        tokens, finish = beam_search(model, ids, guide, eos, num_beams, max_new_tokens, processors, budget_aware=budget)
        stats.decode_s = time.perf_counter() - t
        return _result(vocab, guide, tokens, finish, stats, t_start)
    if speculative is not None:
        drafters = default_drafters(tokenizer) if speculative == "auto" else list(speculative)
        t = time.perf_counter()
        tokens, finish = speculative_loop(
            model, vocab, ids, guide, drafters, max_new_tokens=max_new_tokens, num_draft_tokens=num_draft_tokens,
            temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p, processors=processors,
            watermark=watermark, generator=generator, stats=stats, budget_aware=budget,
        )
        stats.decode_s = time.perf_counter() - t
        return _result(vocab, guide, tokens, finish, stats, t_start)
    device = model.device
    seq = torch.tensor([ids], dtype=torch.long, device=device)
    tokens: list[int] = []
    finish = "length"

    t = time.perf_counter()
    out = model(input_ids=seq, use_cache=True)
    stats.prefill_s = time.perf_counter() - t
    t_decode = time.perf_counter()
    if matcher is not None:
        t = time.perf_counter()
        bitmask = allocate_token_bitmask(1, out.logits.shape[-1])
        matcher.fill_next_token_bitmask(bitmask, 0, max_new_tokens if budget else None)
        stats.mask_s += time.perf_counter() - t
    for step in range(max_new_tokens):
        logits = out.logits[:, -1, :].float()
        scores = next_token_scores(
            logits, seq, bitmask if matcher is not None else None, processors,
            temperature, top_k, top_p, min_p, watermark,
        )
        if temperature == 0:
            token = scores.argmax(dim=-1)
        else:
            token = torch.multinomial(scores.softmax(dim=-1), 1, generator=generator).squeeze(-1)
        tok = int(token[0])
        if tok in eos:
            # EOS the spec refuses was forced: the text reached a dead end, where no
            # token of the vocabulary continues it.
            finish = "eos" if matcher is None or matcher.accept_token(tok) else "no_match"
            break
        tokens.append(tok)
        if matcher is not None:
            t = time.perf_counter()
            if not matcher.accept_token(tok):
                raise RuntimeError(f"token {tok} was chosen although the spec forbids it")
            done = matcher.is_terminated()
            if not done and step + 1 < max_new_tokens:
                # The next mask depends only on this token: fill it now, before the
                # forward pass evicts the matcher's data from the CPU caches.
                matcher.fill_next_token_bitmask(bitmask, 0, max_new_tokens - step - 1 if budget else None)
            stats.mask_s += time.perf_counter() - t
            if done:
                finish = "complete"
                break
        if step + 1 == max_new_tokens:
            break
        seq = torch.cat([seq, token.view(1, 1)], dim=1)
        out = model(input_ids=token.view(1, 1), past_key_values=out.past_key_values, use_cache=True)
    stats.decode_s = time.perf_counter() - t_decode
    return _result(vocab, guide, tokens, finish, stats, t_start)


def _result(vocab, guide, tokens, finish, stats, t_start) -> GenerationResult:
    """The ``GenerationResult`` of a finished loop (fills the counts and total time)."""
    stats.new_tokens = len(tokens)
    stats.total_s = time.perf_counter() - t_start
    text = vocab.decode(tokens).decode("utf-8", errors="replace")
    spec = getattr(guide, "spec", None)
    reasoning, answer = None, text
    if isinstance(spec, AfterThinking):
        reasoning, answer = spec.split(text)
        spec = spec.spec
    value, calls = _value(spec, answer, finish)
    return GenerationResult(text=text, value=value, token_ids=tokens, finish_reason=finish, stats=stats,
                            tool_calls=calls, reasoning=reasoning)


def _value(spec, text: str, finish: str):
    """``(value, tool_calls)`` of an answer's text: parsed JSON (a validated pydantic
    instance for a model class) for JSON Schema specs, ``None`` if generation stopped
    early; the free text and the calls for ``ToolCalls``; the text itself otherwise."""
    if isinstance(spec, ToolCalls):
        return spec.parse(text)
    if not isinstance(spec, JsonSchema):
        return text, None
    if finish in ("length", "no_match"):
        return None, None
    return spec.parse(text), None
