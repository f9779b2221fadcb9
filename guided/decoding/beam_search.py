"""Constrained beam search: one matcher per beam, forked when a beam is extended.

::

    beams (score = sum of log-probabilities; one KV-cache row and one matcher each)
      -> every beam's next-token scores, in generate's order (mask, processors, mask)
      -> log-softmax, plus the beam's score; the best 2k (beam, token) pairs
      -> EOS (where allowed) or a matcher that can take nothing more: a finished
         hypothesis, ranked by score / length ** length_penalty
      -> otherwise the first k pairs are the new beams: matcher forked and advanced,
         cache rows reordered to follow their parents

It stops when k hypotheses are finished and none of the live beams can beat the best
of them, or at ``max_new_tokens``. Forbidden tokens score -inf, so no beam, live or
finished, ever leaves the spec; with budget-aware masks (``budget_aware``) every beam
can still finish in the tokens left, so the hypotheses are complete by the limit.
"""

from __future__ import annotations

import torch

from guided.bitmask import allocate_token_bitmask

from .step import next_token_scores


def beam_search(model, prompt_ids, guide, eos_ids, num_beams: int, max_new_tokens: int,
                processors=(), length_penalty: float = 1.0, budget_aware: bool = False):
    """Constrained beam search (see the module docstring); ``generate(...,
    num_beams=k)`` calls it.

    Args:
        model: a Hugging Face causal LM whose cache has ``reorder_cache``.
        prompt_ids: the prompt's token ids.
        guide: a compiled ``Guide``, or None (unconstrained beam search).
        eos_ids: the ids that end a hypothesis.
        num_beams: k, the live beams kept.
        max_new_tokens: the most tokens a hypothesis may have.
        processors: as for ``generate``, run between the two masks on every beam.
        length_penalty: finished hypotheses rank by ``score / length ** length_penalty``.
        budget_aware: pass each matcher the tokens left (``docs/budget.md``; the guide
            must support it, ``guided.budget.check_budget``).

    Returns:
        ``(token ids, finish reason)`` of the best hypothesis; the reason is
        ``"eos"``, ``"complete"``, ``"length"`` or ``"no_match"``, as in ``GenerationResult``.

    Example::

        >>> r = guided.generate(model, tokenizer, "Capital of France?", guided.Regex(r"[A-Z][a-z]+"), num_beams=4)
        >>> r.text, r.finish_reason
    """

    device = model.device
    prompt = torch.tensor([prompt_ids], dtype=torch.long, device=device)
    out = model(input_ids=prompt, use_cache=True)
    beams = [([], 0.0, guide.matcher() if guide is not None else None)]
    finished: list[tuple[float, list[int], str]] = []

    def rank(score: float, length: int) -> float:
        return score / max(length, 1) ** length_penalty

    live: list = []
    for step in range(max_new_tokens):
        logits = out.logits[:, -1, :].float()
        n, vocab = logits.shape
        generated = torch.tensor([b[0] for b in beams], dtype=torch.long, device=device).view(n, -1)
        seq = torch.cat([prompt.expand(n, -1), generated], dim=1)
        bitmask = None
        if guide is not None:
            bitmask = allocate_token_bitmask(n, vocab)
            for i, (_, _, m) in enumerate(beams):
                m.fill_next_token_bitmask(bitmask, i, max_new_tokens - step if budget_aware else None)
        scores = next_token_scores(logits, seq, bitmask, processors)
        total = torch.log_softmax(scores, dim=-1) + torch.tensor([b[1] for b in beams], device=device)[:, None]
        values, flat = torch.topk(total.view(-1), min(2 * num_beams, total.numel()))
        live, parents = [], []
        for value, index in zip(values.tolist(), flat.tolist()):
            if value == float("-inf") or len(live) == num_beams:
                break
            parent, tok = divmod(index, vocab)
            tokens, _, matcher = beams[parent]
            if tok in eos_ids:  # (a refused EOS was forced at a dead end: see generate)
                ended = matcher is None or matcher.fork().accept_token(tok)
                finished.append((rank(value, len(tokens) + 1), tokens, "eos" if ended else "no_match"))
                continue
            child = None
            if matcher is not None:
                child = matcher.fork()
                child.accept_token(tok)
                if child.is_terminated():
                    finished.append((rank(value, len(tokens) + 1), tokens + [tok], "complete"))
                    continue
            live.append((tokens + [tok], value, child))
            parents.append(parent)
        if not live:
            break
        done = len(finished) >= num_beams and max(f[0] for f in finished) >= max(rank(s, len(t)) for t, s, _ in live)
        if done or step + 1 == max_new_tokens:
            break
        out.past_key_values.reorder_cache(torch.tensor(parents, device=device))
        last = torch.tensor([[t[-1]] for t, _, _ in live], dtype=torch.long, device=device)
        out = model(input_ids=last, past_key_values=out.past_key_values, use_cache=True)
        beams = live
    pool = finished + [(rank(s, len(t)), t, "length") for t, s, _ in live]
    if not pool:  # max_new_tokens == 0
        return [], "length"
    _, tokens, reason = max(pool, key=lambda f: f[0])
    return tokens, reason
