"""Speculative decoding with drafts the automaton has already checked.

::

    pending token t (not yet in the KV cache), matcher after t
      -> drafters propose d1..dn on a *fork* of the matcher: every draft is allowed
      -> ONE target forward over [t, d1..dn]: the scores after t, d1, ..., dn
      -> verify in order, each position with its own mask and the same processors:
           greedy:   keep d_i while it is the argmax
           sampling: keep d_i with probability min(1, p~/q~) (q~ = 1 for a certain
                     token); on rejection draw from max(0, p~ - q~), renormalised
      -> the first non-draft token (correction, or the bonus after all n) is the new
         pending token; the cache is cut back to what was kept
    (The first round reads the prompt's own pass instead of a pending token, so the
    pass count starts as plain decoding's does. EOS is never drafted.)

``p~`` is the distribution generation would use at that position (mask, processors,
mask, warpers, watermark: ``step.next_token_scores``), so the output follows
exactly the plain constrained distribution, and greedy output is the plain greedy
output. A deterministic draft has q = 1; a draft model's token is kept with
probability min(1, p~/q~), and on rejection the token comes from max(0, p~ - q~).

Drafters (``propose(context, matcher, k) -> tokens``, advancing the forked matcher):

* ``ForcedTokens``: tokens the automaton allows alone; for regex / JSON Schema guides
  also tokens spelling a forced byte string (``{"name":`` after ``{``), split as the
  target split it before where that differed from the tokenizer; where the spec
  leaves a choice, the layout token (whitespace, punctuation) the target wrote there
  before.
* ``PromptLookup``: the tokens that followed the latest earlier occurrence of the last
  n-gram (n = 3, 2, 1) in the prompt and output, cut at the first the matcher refuses.
* ``DraftModel``: a small model sharing the vocabulary, sampling its own masked
  distribution (KV-cached, rolled back with the target).
* ``EarlyExit``: the target's own first layers and LM head as that small model
  (self-speculation): no second model, no copied weights.

The draft length adapts: it grows by 2 after a fully accepted draft and halves after
an early rejection, within 1 .. ``num_draft_tokens``. Where passes are timed (CPU,
``feed_costs.FeedCosts``), a draft is also cut to the prefix that yields the most
expected tokens per measured second, each token's chance being its drafter's
acceptance so far in this call; and a feed is padded where a longer one measured
cheaper.
"""

from __future__ import annotations

import copy
import time

import numpy as np
import torch
from torch import nn

from guided.bitmask import allocate_token_bitmask

from .context_model import ContextModel
from .feed_costs import FeedCosts
from .step import next_token_scores


class ForcedTokens:
    """Propose what the automaton forces: a token allowed alone, or (regex / JSON
    Schema guides, with a ``tokenizer``) tokens that spell a forced byte string; and
    where the spec leaves a choice, what the target wrote there before.

    A forced string is drafted one token at a time: the tokenizer's canonical first
    token, or the token the target wrote instead the last time that canonical token
    was drafted. Models often split differently from their tokenizer (SmolLM2 writes
    ``{`` ``"`` and ``":`` ``"`` where the tokenizer says ``{"`` and ``":"``), and one
    wrong split costs the rest of the draft, so the drafter remembers what was kept.

    Where the spec allows several tokens (the whitespace after ``{`` or ``,`` in
    flexible JSON), the drafter proposes the target's habit: a layout token
    (whitespace and JSON punctuation) it wrote before at the same place, the
    latest one the matcher takes. A place is, from the most particular: the
    automaton state and the token before; the two tokens before; the bytes the
    automaton forces next; the layout token before. Models lay out JSON the same
    way every time (a newline and two spaces after ``{``, ``":`` after a key), so
    drafting goes on through the layout into the next forced key instead of
    stopping at each choice. Content (a string's words, a number) is left to the
    other drafters.

    Both memories are shared by the drafters of one vocabulary (pass ``splits={}``
    and ``habits={}`` for private ones); they only change what is drafted, never
    what is generated.

    Args:
        tokenizer: the tokenizer, to spell forced byte strings; without it only
            tokens allowed alone (and habits) are drafted.
        splits: the memory of splits (canonical first token -> the token the target
            wrote instead); None shares one per vocabulary.
        habits: the memory of layout choices (a place -> the layout tokens the
            target wrote there, the latest first); None shares one per vocabulary.

    Example::

        >>> spec = guided.JsonSchema({"type": "object", "properties": {"name": {"type": "string"}},
        ...                           "required": ["name"]}, whitespace="compact")
        >>> matcher = guided.compile(spec, tokenizer).matcher()
        >>> [tokenizer.decode([t]) for t in ForcedTokens(tokenizer).propose(context, matcher.fork(), 8)]
        ['{"', 'name', '":"']
        >>> guided.generate(model, tokenizer, prompt, spec, speculative=[ForcedTokens(tokenizer)])
    """

    def __init__(self, tokenizer=None, splits: dict | None = None, habits: dict | None = None):
        self.tokenizer = tokenizer
        self.splits = splits  # canonical first token -> the token the target wrote instead
        self.habits = habits  # a place (``_habit_keys``) -> the layout tokens written there, the latest first
        # The last proposal: (context, [((forced string, canonical token) or (None, None), drafted token)],
        # a fork of the matcher before it)
        self._last: tuple | None = None

    def propose(self, context: list[int], matcher, k: int) -> list[int]:
        """Up to ``k`` tokens from ``matcher``'s state, each accepted by it.

        Args:
            context: every token so far (prompt and output): the drafter learns from
                what the target kept after its last proposal.
            matcher: a fork of the sequence's matcher; it is advanced.
            k: the most tokens to propose.

        Returns:
            The drafted tokens (EOS never among them), possibly none.
        """
        vocab = matcher.guide.vocab
        if self.splits is None:
            self.splits = _SHARED_SPLITS.setdefault(vocab.fingerprint, {})
        if self.habits is None:
            self.habits = _SHARED_HABITS.setdefault(vocab.fingerprint, {})
        self._learn(context, vocab.token_bytes)
        before = matcher.fork()
        eos = set(matcher.guide.eos_token_ids)
        out: list[int] = []
        why: list = []
        while len(out) < k and not matcher.is_terminated():
            text = self._forced_text(matcher)
            if text is not None:
                canonical = int(self.tokenizer.encode(text, add_special_tokens=False)[0])
                tok = self.splits.get(canonical, canonical)
            else:
                allowed = matcher.allowed_token_ids()
                canonical = None
                if len(allowed) == 1:
                    tok = allowed[0]
                else:
                    tok = self._habit(matcher, context + out)
                if tok is None or tok in eos:
                    break
            if not matcher.accept_token(tok):
                break
            out.append(tok)
            why.append((text, canonical))
        self._last = (list(context), list(zip(why, out)), before)
        return out

    def _habit(self, matcher, context: list[int]) -> int | None:
        """A layout token the target wrote before where ``matcher`` stands, one the
        matcher takes: by the automaton state and the token before, the two tokens
        before, the bytes the automaton forces next (``":`` where a key's closing
        quote is forced), then the layout token before; the latest first."""
        if len(context) < 2:
            return None
        for key in self._habit_keys(matcher, context[-2], context[-1]):
            for tok in self.habits.get(key, ()):
                if matcher.fork().accept_token(tok):
                    return tok
        return None

    def _habit_keys(self, matcher, before: int, last: int) -> list[tuple]:
        """Where the target stands, from the most to the least particular."""
        keys = []
        state = getattr(matcher, "state", None)
        if state is not None:
            keys.append(("state", id(matcher.guide), state, last))
        keys.append(("after", before, last))
        dfa = getattr(matcher.guide, "dfa", None)
        if dfa is not None and state is not None:
            forced = forced_bytes(dfa, state, 8)
            if forced:
                keys.append(("forced", forced))
        if _is_layout(matcher.guide.vocab.token_bytes[last]):
            keys.append(("after layout", last))
        return keys

    def _learn(self, context: list[int], token_bytes) -> None:
        """Compare the last proposal with what the target kept after it: where the
        target began a forced string with another token than the one drafted,
        remember that token for the forced string's canonical first token; and
        remember each layout token it wrote, by where it wrote it (``_habit``)."""
        if self._last is None:
            return
        before, drafted, matcher = self._last
        self._last = None
        n = len(before)
        if len(context) <= n or context[:n] != before:
            return
        for ((text, canonical), tok), actual in zip(drafted, context[n:]):
            if actual == tok:
                continue
            spelled = token_bytes[actual]
            if text is not None and spelled and text.encode("utf-8").startswith(spelled):
                if len(self.splits) >= 4096:
                    self.splits.clear()
                self.splits[canonical] = actual
            break
        if len(self.habits) >= _MAX_HABITS:
            self.habits.clear()
        for i in range(max(n, 2), len(context)):
            tok = context[i]
            if _is_layout(token_bytes[tok]):
                for key in self._habit_keys(matcher, context[i - 2], context[i - 1]):
                    seen = self.habits.get(key, ())
                    if not seen or seen[0] != tok:  # the latest first, a few kept
                        self.habits[key] = (tok,) + tuple(t for t in seen if t != tok)[: _HABITS_PER_PLACE - 1]
            if not matcher.accept_token(tok):
                break

    def _forced_text(self, matcher) -> str | None:
        """The text (2+ bytes of UTF-8) the DFA forces from here, if any."""
        dfa = getattr(matcher.guide, "dfa", None)
        if self.tokenizer is None or dfa is None:
            return None
        data = forced_bytes(dfa, matcher.state)
        if len(data) < 2:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None


_SHARED_SPLITS: dict[str, dict[int, int]] = {}  # vocabulary fingerprint -> ForcedTokens.splits
_SHARED_HABITS: dict[str, dict[tuple, int]] = {}  # vocabulary fingerprint -> ForcedTokens.habits
_MAX_HABITS = 65_536  # past this many entries the habits start over
_HABITS_PER_PLACE = 4  # layout tokens kept per place, the latest first
_LAYOUT = frozenset(b' \t\r\n{}[],:"')


def _is_layout(data: bytes) -> bool:
    """Whether a token is layout (whitespace and JSON punctuation only): what a model
    writes alike every time, where its content words depend on the text."""
    return bool(data) and _LAYOUT.issuperset(data)


def forced_bytes(dfa, state: int, limit: int = 64) -> bytes:
    """The bytes a DFA forces from ``state``: while the state does not accept and has
    exactly one way out, on exactly one byte."""
    from guided.fsm.dfa import class_byte_ranges

    ranges = class_byte_ranges(dfa)
    out = bytearray()
    while len(out) < limit and state >= 0 and not dfa.is_accepting(state):
        moves = [(c, t) for c, t in enumerate(dfa.next_states(state)) if t >= 0]
        if len(moves) != 1:
            break
        c, nxt = moves[0]
        if len(ranges[c]) != 1 or ranges[c][0][0] != ranges[c][0][1]:
            break
        out.append(ranges[c][0][0])
        state = nxt
    return bytes(out)


class PromptLookup:
    """Propose the tokens that followed the latest earlier occurrence of the context's
    last n-gram (prompt-lookup decoding), cut at the first the matcher refuses.

    Copying pays where the output repeats the prompt (extraction, JSON records of
    a given text). Needs no model and no automaton (works unconstrained too).

    Args:
        max_ngram: the longest n-gram looked up (tried first).
        min_ngram: the shortest.

    Example::

        >>> PromptLookup(max_ngram=3).propose(prompt_and_output_ids, matcher.fork(), 8)
        >>> guided.generate(model, tokenizer, prompt, spec, speculative=[ForcedTokens(tokenizer), PromptLookup()])
    """

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1):
        self.max_ngram, self.min_ngram = max_ngram, min_ngram

    def propose(self, context: list[int], matcher, k: int) -> list[int]:
        """Up to ``k`` tokens copied from ``context``; ``matcher`` (a fork, advanced;
        None when unconstrained) cuts them at the first it refuses, and at EOS."""
        eos = set(matcher.guide.eos_token_ids) if matcher is not None else set()
        arr = np.asarray(context)
        for n in range(self.max_ngram, self.min_ngram - 1, -1):
            if len(arr) <= n:
                continue
            tail = arr[-n:]
            windows = np.lib.stride_tricks.sliding_window_view(arr[:-1], n)  # starts 0 .. len-1-n
            hits = np.flatnonzero((windows == tail).all(axis=1))
            for start in hits[::-1].tolist():
                follow = context[start + n : start + n + k]
                out = []
                for t in follow:
                    if t in eos or (matcher is not None and not matcher.accept_token(t)):
                        break
                    out.append(t)
                if out:
                    return out
        return []


class DraftModel:
    """A small model over the same vocabulary drafts by sampling its own masked
    distribution q~ (greedy when generation is greedy), through the same processors,
    warpers and watermark as generation; verification then keeps a draft with
    probability min(1, p~/q~). Runs in a ``ContextModel`` (KV-cached, cut back after
    rejections): one forward per drafted token.

    Args:
        model: a small causal LM with the target's vocabulary (the same logits width;
            another width is a ``ValueError`` when sampling).

    Example::

        >>> guided.generate(model, tok, prompt, spec, speculative=[ForcedTokens(tok), DraftModel(small)])
    """

    def __init__(self, model):
        self.context = ContextModel(model)
        self.sampling: dict = {"temperature": 0.0}
        self.processors: tuple = ()  # generation's processors and watermark, set by the loop
        self.watermark = None
        self.generator = None
        self.last_q: list = []  # q~ of each token of the last proposal (None: greedy)

    def reset(self) -> None:
        """Forget the last sequence (the loop calls it at the start of each)."""
        self.context.reset()

    def propose(self, context: list[int], matcher, k: int) -> list[int]:
        """Up to ``k`` tokens from the model's own masked distribution; ``last_q``
        then holds each one's q~ (None when greedy). ``matcher``: a fork, advanced,
        or None when unconstrained."""
        self.last_q = []
        out: list[int] = []
        eos = set(matcher.guide.eos_token_ids) if matcher is not None else set()
        temperature = self.sampling.get("temperature", 0.0)
        while len(out) < k and not (matcher is not None and matcher.is_terminated()):
            ids = torch.tensor([context + out])
            logits = self.context.logits(ids).clone()
            bitmask = _bitmask(matcher, logits.shape[-1])
            scores = next_token_scores(logits, ids, bitmask, self.processors,
                                       **{**self.sampling, "temperature": temperature})
            if self.watermark is not None:  # its green list, without its own (stateful) mask
                scores = self.watermark.bias(ids, scores, bitmask)
            if temperature == 0:
                q, tok = None, int(scores.argmax(dim=-1)[0])
            else:
                q = scores.softmax(dim=-1)[0]
                tok = int(torch.multinomial(q, 1, generator=self.generator)[0])
            if tok in eos or (matcher is not None and not matcher.accept_token(tok)):
                break
            out.append(tok)
            self.last_q.append(q)
        return out


class EarlyExit(DraftModel):
    """Self-speculation: the target's own first ``num_layers`` decoder layers, then its
    final norm and LM head, draft for it (the draft of LayerSkip, Elhoushi et al. 2024,
    without its early-exit training). No second model and no copied weights: the
    draft is a view of the target sharing its modules, with its own KV cache.

    Without training for it, an early exit predicts the full model's token less often
    than a separate small model would (measured in ``benchmarks/speculative.py``).

    Args:
        model: the target model (a Llama-, GPT-2- or GPT-NeoX-style causal LM, whose
            decoder layers are ``model.layers``, ``transformer.h`` or ``gpt_neox.layers``).
        num_layers: the layers the draft runs, ``1 <= num_layers < total``; None: a
            quarter of them (at least one).

    Raises:
        ValueError: ``num_layers`` out of range, or no decoder layers found.

    Example::

        >>> guided.generate(model, tok, prompt, spec, speculative=[ForcedTokens(tok), EarlyExit(model, 12)])
    """

    def __init__(self, model, num_layers: int | None = None):
        layers = _decoder_layers(model)[1]
        total = len(layers)
        if num_layers is None:
            num_layers = max(1, total // 4)
        if not 1 <= num_layers < total:
            raise ValueError(f"EarlyExit needs 1 <= num_layers < {total} (the target's decoder layers), "
                             f"got {num_layers}")
        self.num_layers = num_layers
        super().__init__(truncated_model(model, num_layers))


def _decoder_layers(model):
    """(the module holding the decoder layers, the layers, attribute name)."""
    for outer in ("model", "transformer", "gpt_neox"):
        inner = getattr(model, outer, None)
        for name in ("layers", "h"):
            layers = getattr(inner, name, None) if inner is not None else None
            if isinstance(layers, nn.ModuleList) and len(layers):
                return inner, layers, (outer, name)
    raise ValueError(f"EarlyExit: cannot find the decoder layers of {type(model).__name__} "
                     "(looked for model.layers, transformer.h, gpt_neox.layers)")


def truncated_model(model, num_layers: int):
    """A view of a causal LM that runs only its first ``num_layers`` decoder layers
    (then its final norm and LM head). Modules are shared, never copied; only the
    containers and the config are new, so the original model is untouched."""
    inner, layers, (outer_name, layers_name) = _decoder_layers(model)
    config = copy.deepcopy(model.config)
    for attr in ("num_hidden_layers", "n_layer"):
        if hasattr(config, attr):
            setattr(config, attr, num_layers)
    if isinstance(getattr(config, "layer_types", None), list):
        config.layer_types = config.layer_types[:num_layers]
    view_inner = copy.copy(inner)
    view_inner.__dict__["_modules"] = dict(inner._modules)  # a new container: the original keeps its layers
    setattr(view_inner, layers_name, nn.ModuleList(list(layers)[:num_layers]))
    view_inner.__dict__["config"] = config
    view = copy.copy(model)
    view.__dict__["_modules"] = dict(model._modules)
    setattr(view, outer_name, view_inner)
    view.__dict__["config"] = config
    return view


def default_drafters(tokenizer) -> list:
    """The drafters of ``speculative="auto"``: forced tokens first, then prompt lookup.

    Args:
        tokenizer: the tokenizer (``ForcedTokens`` spells forced text with it).

    Returns:
        ``[ForcedTokens(tokenizer), PromptLookup()]``, new ones at each call.

    Example::

        >>> drafters = default_drafters(tokenizer) + [EarlyExit(model, 7)]
        >>> guided.generate(model, tokenizer, prompt, spec, speculative=drafters)
    """
    return [ForcedTokens(tokenizer), PromptLookup()]


def propose(drafters, context: list[int], matcher, k: int):
    """Chain the drafters, each continuing where the previous one stopped; returns
    the tokens and, per token, the drafter's distribution q~ (None: a certain token)."""
    draft, qs, _ = _propose(drafters, context, matcher, k)
    return draft, qs


def _propose(drafters, context: list[int], matcher, k: int):
    """``propose``, plus each token's drafter (its index in ``drafters``)."""
    draft: list[int] = []
    qs: list = []
    owners: list[int] = []
    for j, d in enumerate(drafters):
        if len(draft) >= k:
            break
        got = d.propose(context + draft, matcher, k - len(draft))
        draft += got
        qs += list(getattr(d, "last_q", None) or [None] * len(got))
        owners += [j] * len(got)
    return draft, qs, owners


def speculative_loop(model, vocab, prompt: list[int], guide, drafters, *, max_new_tokens: int, num_draft_tokens: int,
                     temperature: float, top_k, top_p, min_p, processors, watermark, generator, stats,
                     budget_aware: bool = False):
    """The decoding loop of the module docstring; returns ``(tokens, finish reason)``.
    ``budget_aware``: each position's mask is budget-aware (the tokens left there), so
    the output is the one plain budget-aware decoding gives."""
    device = model.device
    eos = set(vocab.eos_token_ids)
    if max_new_tokens <= 0:
        return [], "length"
    matcher = guide.matcher() if guide is not None else None
    costs = FeedCosts.for_model(model)
    for d in drafters:
        if hasattr(d, "reset"):
            d.reset()
        if hasattr(d, "sampling"):  # a model drafts from the chain generation uses
            d.sampling = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "min_p": min_p}
            d.processors, d.watermark, d.generator = tuple(processors or ()), watermark, generator
    # The prompt's pass gives the first position's logits; after that, the token chosen
    # last ("pending") is not in the cache yet and is fed with the next draft.
    out = model(input_ids=torch.tensor([prompt], device=device), use_cache=True)
    cache = out.past_key_values
    known = out.logits[:, -1:, :]  # logits not yet used, or None when a token is pending
    stats.target_forward_passes += 1
    seq = list(prompt)  # everything decided
    tokens: list[int] = []
    k = max(1, num_draft_tokens)
    # Per drafter: its tokens the verification reached, and those kept (a prior of 2 in 3).
    reached, kept_by = [3] * len(drafters), [2] * len(drafters)
    while True:
        budget = max_new_tokens - len(tokens)
        draft, qs, owners = [], [], []
        if budget > 1:  # leave room for the token verification always adds
            usable = drafters if matcher is not None else [d for d in drafters if not isinstance(d, ForcedTokens)]
            draft, qs, owners = _propose(usable, seq, matcher.fork() if matcher is not None else None,
                                         min(k, budget - 1))
            owners = [drafters.index(usable[j]) for j in owners]
            cut = next((i for i, t in enumerate(draft) if t in eos), len(draft))  # EOS is never drafted
            if known is None and cut:  # as many as pay for their place in the pass
                cut = costs.best_length([kept_by[j] / reached[j] for j in owners[:cut]])
            draft, qs, owners = draft[:cut], qs[:cut], owners[:cut]
        if known is not None and not draft:
            logits = known
        else:
            feed = ([] if known is not None else [seq[-1]]) + draft
            pad = costs.padding(len(feed))
            started = time.perf_counter()
            out = model(input_ids=torch.tensor([feed + feed[-1:] * pad], device=device), past_key_values=cache,
                        use_cache=True)
            costs.record(len(feed) + pad, time.perf_counter() - started)
            cache = out.past_key_values
            if pad:
                cache.crop(-pad)
            stats.target_forward_passes += 1
            fed = out.logits[:, : len(feed)]
            logits = fed if known is None else torch.cat([known, fed], dim=1)
        known = None
        stats.draft_tokens += len(draft)
        kept, chosen = 0, None
        for i in range(len(draft) + 1):
            scores = _scores(next_token_scores, logits[:, i, :].float(), seq, matcher, processors,
                             temperature, top_k, top_p, min_p, watermark,
                             max_new_tokens - len(tokens) if budget_aware else None)
            d = draft[i] if i < len(draft) else None
            tok = _verify(scores, d, qs[i] if d is not None else None, temperature, generator)
            if d is not None and tok == d:
                kept += 1
                seq.append(d)
                tokens.append(d)
                if matcher is not None:
                    matcher.accept_token(d)
                    if matcher.is_terminated():  # as plain decoding: stop, EOS is implied
                        stats.accepted_draft_tokens += kept
                        return tokens, "complete"
                continue
            chosen = tok
            break
        for j in owners[: kept + 1]:  # the drafts verification reached: up to the first refused
            reached[j] += 1
        for j in owners[:kept]:
            kept_by[j] += 1
        stats.accepted_draft_tokens += kept
        if draft:
            k = min(num_draft_tokens, k + 2) if kept == len(draft) else max(1, k // 2)
        # The cache holds every draft (and the old pending token): keep what was kept.
        drop = len(draft) - kept
        if drop:
            cache.crop(-drop)
        if chosen in eos:  # (a refused EOS was forced at a dead end: see generate)
            return tokens, "eos" if matcher is None or matcher.accept_token(chosen) else "no_match"
        seq.append(chosen)
        tokens.append(chosen)
        if matcher is not None:
            if not matcher.accept_token(chosen):
                raise RuntimeError(f"token {chosen} was chosen although the spec forbids it")
            if matcher.is_terminated():
                return tokens, "complete"
        if len(tokens) >= max_new_tokens:
            return tokens, "length"


def _bitmask(matcher, width: int, remaining: int | None = None):
    """The matcher's mask for the next token (None without a matcher)."""
    if matcher is None:
        return None
    bitmask = allocate_token_bitmask(1, width)
    matcher.fill_next_token_bitmask(bitmask, 0, remaining)
    return bitmask


def _scores(next_token_scores, logits, seq, matcher, processors, temperature, top_k, top_p, min_p, watermark,
            remaining=None):
    ids = torch.tensor([seq], device=logits.device)
    return next_token_scores(logits, ids, _bitmask(matcher, logits.shape[-1], remaining), processors, temperature,
                             top_k, top_p, min_p, watermark)


def _verify(scores: torch.Tensor, draft: int | None, q, temperature: float, generator) -> int:
    """The token generation takes here, given a ``draft`` drawn from ``q`` (None: a
    certain token, or no draft): keep it with probability min(1, p/q), else draw from
    the residual max(0, p - q), renormalised; greedy: the argmax."""
    if temperature == 0:
        return int(scores.argmax(dim=-1)[0])
    p = scores.softmax(dim=-1)[0]
    if draft is not None:
        if q is not None and q.shape != p.shape:
            raise ValueError(f"the draft model has {q.shape[-1]} logits, the target {p.shape[-1]}: "
                             "they must share a vocabulary")
        q_draft = 1.0 if q is None else float(q[draft])
        if float(torch.rand((), generator=generator, device=p.device)) * q_draft < float(p[draft]):
            return draft
        if q is None:
            residual = p.clone()
            residual[draft] = 0.0
        else:
            residual = (p - q.to(p.device)).clamp(min=0.0)
        if residual.sum() <= 0:
            return draft
        p = residual
    return int(torch.multinomial(p, 1, generator=generator)[0])
