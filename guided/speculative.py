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
mask, warpers, watermark: ``generation.next_token_scores``), so the output follows
exactly the plain constrained distribution, and greedy output is the plain greedy
output. A deterministic draft has q = 1; a draft model's token is kept with
probability min(1, p~/q~), and on rejection the token comes from max(0, p~ - q~).

Drafters (``propose(context, matcher, k) -> tokens``, advancing the forked matcher):

* ``ForcedTokens``: tokens the automaton allows alone; for regex / JSON Schema guides
  also the canonical tokenization of a forced byte string (``{"name":`` after ``{``).
* ``PromptLookup``: the tokens that followed the latest earlier occurrence of the last
  n-gram (n = 3, 2, 1) in the prompt and output, cut at the first the matcher refuses.
* ``DraftModel``: a small model sharing the vocabulary, sampling its own masked
  distribution (KV-cached, rolled back with the target).

The draft length adapts: it grows by 2 after a fully accepted draft and halves after
an early rejection, within 1 .. ``num_draft_tokens``.
"""

from __future__ import annotations

import numpy as np
import torch

from .bitmask import allocate_token_bitmask


class ForcedTokens:
    """Propose what the automaton forces: a token allowed alone, or (regex / JSON
    Schema guides, with a ``tokenizer``) the canonical tokens of a forced byte string.

    Example::

        >>> ForcedTokens(tokenizer).propose(context, matcher.fork(), 8)
        [90, 1, 1463, 2352]          # '{"', 'name', '":' ...
    """

    def __init__(self, tokenizer=None):
        self.tokenizer = tokenizer

    def propose(self, context: list[int], matcher, k: int) -> list[int]:
        out: list[int] = []
        eos = set(matcher.guide.eos_token_ids)
        while len(out) < k and not matcher.is_terminated():
            forced = self._forced_text_tokens(matcher, k - len(out))
            if forced:
                out += forced
                continue
            allowed = matcher.allowed_token_ids()
            if len(allowed) != 1 or allowed[0] in eos or not matcher.accept_token(allowed[0]):
                break
            out.append(allowed[0])
        return out

    def _forced_text_tokens(self, matcher, k: int) -> list[int]:
        """Tokens of the byte string the DFA forces from here (accepted into ``matcher``)."""
        dfa = getattr(matcher.guide, "dfa", None)
        if self.tokenizer is None or dfa is None:
            return []
        data = forced_bytes(dfa, matcher.state)
        if len(data) < 2:
            return []
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return []
        out = []
        for t in self.tokenizer.encode(text, add_special_tokens=False)[:k]:
            if not matcher.accept_token(int(t)):
                break
            out.append(int(t))
        return out


def forced_bytes(dfa, state: int, limit: int = 64) -> bytes:
    """The bytes a DFA forces from ``state``: while the state does not accept and has
    exactly one way out, on exactly one byte."""
    from fsm.dfa import class_byte_ranges

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

    Example::

        >>> PromptLookup(max_ngram=3).propose(prompt_and_output_ids, matcher.fork(), 8)
    """

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1):
        self.max_ngram, self.min_ngram = max_ngram, min_ngram

    def propose(self, context: list[int], matcher, k: int) -> list[int]:
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
    distribution q~ (greedy when generation is greedy); verification then keeps a
    draft with probability min(1, p~/q~). Runs in a ``ContextModel`` (KV-cached, cut
    back after rejections): one forward per drafted token.

    Example::

        >>> guided.generate(model, tok, prompt, spec, speculative=[ForcedTokens(tok), DraftModel(small)])
    """

    def __init__(self, model):
        from .ensemble import ContextModel

        self.context = ContextModel(model)
        self.sampling: dict = {"temperature": 0.0}
        self.generator = None
        self.last_q: list = []  # q~ of each token of the last proposal (None: greedy)

    def reset(self) -> None:
        self.context.reset()

    def propose(self, context: list[int], matcher, k: int) -> list[int]:
        from .generation import next_token_scores

        self.last_q = []
        out: list[int] = []
        eos = set(matcher.guide.eos_token_ids) if matcher is not None else set()
        temperature = self.sampling.get("temperature", 0.0)
        while len(out) < k and not (matcher is not None and matcher.is_terminated()):
            ids = torch.tensor([context + out])
            logits = self.context.logits(ids).clone()
            bitmask = None
            if matcher is not None:
                bitmask = allocate_token_bitmask(1, logits.shape[-1])
                matcher.fill_next_token_bitmask(bitmask, 0)
            scores = next_token_scores(logits, ids, bitmask, **{**self.sampling, "temperature": temperature})
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


def default_drafters(tokenizer) -> list:
    """``speculative="auto"``: forced tokens first, then prompt lookup."""
    return [ForcedTokens(tokenizer), PromptLookup()]


def propose(drafters, context: list[int], matcher, k: int):
    """Chain the drafters, each continuing where the previous one stopped; returns
    the tokens and, per token, the drafter's distribution q~ (None: a certain token)."""
    draft: list[int] = []
    qs: list = []
    for d in drafters:
        if len(draft) >= k:
            break
        got = d.propose(context + draft, matcher, k - len(draft))
        draft += got
        qs += list(getattr(d, "last_q", None) or [None] * len(got))
    return draft, qs


def speculative_loop(model, vocab, prompt: list[int], guide, drafters, *, max_new_tokens: int, num_draft_tokens: int,
                     temperature: float, top_k, top_p, min_p, processors, watermark, generator, stats):
    """The decoding loop of the module docstring; returns ``(tokens, finish reason)``."""
    from .generation import next_token_scores

    device = model.device
    eos = set(vocab.eos_token_ids)
    if max_new_tokens <= 0:
        return [], "length"
    matcher = guide.matcher() if guide is not None else None
    for d in drafters:
        if hasattr(d, "reset"):
            d.reset()
        if hasattr(d, "sampling"):
            d.sampling = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "min_p": min_p}
            d.generator = generator
    # The prompt's pass gives the first position's logits; after that, the token chosen
    # last ("pending") is not in the cache yet and is fed with the next draft.
    out = model(input_ids=torch.tensor([prompt], device=device), use_cache=True)
    cache = out.past_key_values
    known = out.logits[:, -1:, :]  # logits not yet used, or None when a token is pending
    stats.target_forward_passes += 1
    seq = list(prompt)  # everything decided
    tokens: list[int] = []
    k = max(1, num_draft_tokens)
    while True:
        budget = max_new_tokens - len(tokens)
        draft, qs = [], []
        if budget > 1:  # leave room for the token verification always adds
            if matcher is not None:
                draft, qs = propose(drafters, seq, matcher.fork(), min(k, budget - 1))
            else:  # unconstrained: only drafters that need no automaton
                usable = [d for d in drafters if not isinstance(d, ForcedTokens)]
                draft, qs = propose(usable, seq, None, min(k, budget - 1))
            cut = next((i for i, t in enumerate(draft) if t in eos), len(draft))
            draft, qs = draft[:cut], qs[:cut]  # EOS is never drafted: it ends the text
        if known is not None and not draft:
            logits = known
        else:
            feed = ([] if known is not None else [seq[-1]]) + draft
            out = model(input_ids=torch.tensor([feed], device=device), past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            stats.target_forward_passes += 1
            logits = out.logits if known is None else torch.cat([known, out.logits], dim=1)
        known = None
        stats.draft_tokens += len(draft)
        kept, chosen = 0, None
        for i in range(len(draft) + 1):
            scores = _scores(next_token_scores, logits[:, i, :].float(), seq, matcher, processors,
                             temperature, top_k, top_p, min_p, watermark)
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
        stats.accepted_draft_tokens += kept
        if draft:
            k = min(num_draft_tokens, k + 2) if kept == len(draft) else max(1, k // 2)
        # The cache holds every draft (and the old pending token): keep what was kept.
        drop = len(draft) - kept
        if drop:
            cache.crop(-drop)
        if chosen in eos:
            if matcher is not None:
                matcher.accept_token(chosen)
            return tokens, "eos"
        seq.append(chosen)
        tokens.append(chosen)
        if matcher is not None:
            if not matcher.accept_token(chosen):
                raise RuntimeError(f"token {chosen} was chosen although the spec forbids it")
            if matcher.is_terminated():
                return tokens, "complete"
        if len(tokens) >= max_new_tokens:
            return tokens, "length"


def _scores(next_token_scores, logits, seq, matcher, processors, temperature, top_k, top_p, min_p, watermark):
    bitmask = None
    if matcher is not None:
        bitmask = allocate_token_bitmask(1, logits.shape[-1])
        matcher.fill_next_token_bitmask(bitmask, 0)
    ids = torch.tensor([seq], device=logits.device)
    return next_token_scores(logits, ids, bitmask, processors, temperature, top_k, top_p, min_p, watermark)


def _verify(scores: torch.Tensor, draft: int | None, q, temperature: float, generator) -> int:
    """The token generation takes here, given a ``draft`` drawn from ``q`` (None: a
    certain token, or no draft): keep it with probability min(1, p/q), else draw from
    the residual max(0, p - q), renormalised; greedy: the argmax."""
    if temperature == 0:
        return int(scores.argmax(dim=-1)[0])
    p = scores.softmax(dim=-1)[0]
    if draft is not None:
        if q is not None and q.shape != p.shape:
            raise ValueError(f"the draft model has {q.shape[-1]} logits, the target {p.shape[-1]}: they must share a vocabulary")
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
