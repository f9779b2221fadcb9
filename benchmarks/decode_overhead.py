"""Constrained vs unconstrained decoding on the default model (SmolLM2-135M), CPU.

Greedy, ``--new-tokens`` (64) new tokens, one torch thread. Everything is measured
in one process, interleaved (A, B, A, B ... for ``--rounds`` rounds) so that a noisy
shared machine hits both arms alike; after one untimed warm-up round (which also
computes the lazily built masks of the states the constrained run visits).

1. ``guided.generate``: (a) ``spec=None`` vs (b) a regex that lets the model write
   ~64 tokens; per-token decode time ``decode_s / new_tokens`` and its ratio
   (target: constrained / unconstrained <= 1.05).
2. A decode loop written here that mirrors ``guided/decoding/generation.py`` (forward with KV
   cache, ``fill_next_token_bitmask``, ``apply_token_bitmask_``, argmax,
   ``accept_token``), timing each step's mask + advance with ``perf_counter_ns``;
   the same loop with the mask skipped is the baseline. Per-step p50 / p99 of
   mask + advance (target: p99 <= 100 us).
3. HF ``model.generate`` with ``logits_processor=[guided.LogitsProcessor(guide)]``
   vs plain ``model.generate`` (greedy, ``min_new_tokens = max_new_tokens``).

Usage::

    python benchmarks/decode_overhead.py [--rounds 5] [--new-tokens 64] [--regex PATTERN]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

import guided  # noqa: E402
from guided.decoding.generation import prompt_ids  # noqa: E402

DEFAULT_REGEX = r"[A-Za-z ,.]{60,400}"
PROMPT = "Write a long paragraph about the history of the bicycle."
TARGET_RATIO = 1.05
TARGET_P99_US = 100.0


@torch.inference_mode()
def own_loop(model, ids: list[int], guide, new_tokens: int, eos: set[int]) -> dict:
    """One greedy decode; per-step ns of forward, mask (apply) and advance (accept + next fill)."""
    matcher = guide.matcher() if guide is not None else None
    seq = torch.tensor([ids], dtype=torch.long)
    bitmask = None
    fwd, mask, adv, probe = [], [], [], []
    tokens = []
    scratch = np.zeros(16)
    pc = time.perf_counter_ns
    t_start = pc()
    out = model(input_ids=seq, use_cache=True)
    t_decode = pc()
    if matcher is not None:
        bitmask = guided.allocate_token_bitmask(1, out.logits.shape[-1])
        matcher.fill_next_token_bitmask(bitmask, 0)
    for step in range(new_tokens):
        logits = out.logits[:, -1, :].float()
        a = pc()
        if matcher is not None:
            guided.apply_token_bitmask_(logits, bitmask)
        else:  # probe: a trivial numpy call at the same point, to show the cold-cache cost
            scratch.sum()
        b = pc()
        token = torch.argmax(logits, dim=-1)
        tok = int(token[0])
        c = pc()
        if matcher is not None:
            if not matcher.accept_token(tok):
                raise RuntimeError(f"token {tok} refused")
            done = matcher.is_terminated()
            if not done:  # as guided.generate does: the next mask before the next forward
                matcher.fill_next_token_bitmask(bitmask, 0)
        else:
            done = tok in eos
        d = pc()
        (mask if matcher is not None else probe).append(b - a)
        adv.append(d - c)
        tokens.append(tok)
        if done or tok in eos or step + 1 == new_tokens:
            break
        e = pc()
        out = model(input_ids=token.view(1, 1), past_key_values=out.past_key_values, use_cache=True)
        fwd.append(pc() - e)
    t_end = pc()
    return {
        "tokens": tokens,
        "prefill_ns": t_decode - t_start,
        "decode_ns": t_end - t_decode,
        "fwd": fwd,
        "mask": mask,
        "adv": adv,
        "probe": probe,
    }


def replay(guide, tokens: list[int], vocab_size: int, repeats: int = 20) -> tuple[list[int], list[int]]:
    """The same mask + advance steps back to back, with no forward pass in between
    (caches warm): per-step ns of apply, and of accept + is_terminated + next fill."""
    logits0 = torch.randn(1, vocab_size)
    bitmask = guided.allocate_token_bitmask(1, vocab_size)
    pc = time.perf_counter_ns
    mask, adv = [], []
    for _ in range(repeats):
        m = guide.matcher()
        m.fill_next_token_bitmask(bitmask, 0)
        for tok in tokens:
            logits = logits0.clone()
            a = pc()
            guided.apply_token_bitmask_(logits, bitmask)
            b = pc()
            m.accept_token(tok)
            if not m.is_terminated():
                m.fill_next_token_bitmask(bitmask, 0)
            c = pc()
            mask.append(b - a)
            adv.append(c - b)
    return mask, adv


def pct(values, q):
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--regex", default=DEFAULT_REGEX)
    ap.add_argument("--prompt", default=PROMPT)
    ap.add_argument("--skip-hf", action="store_true", help="skip the HF model.generate comparison")
    args = ap.parse_args()
    guided.load_kernels()  # numba loaded before anything is timed, as a server loads it at start-up
    n = args.new_tokens

    model, tok = guided.models.load_default_model()
    model.eval()
    vocab = guided.Vocabulary.from_tokenizer(tok)
    t = time.perf_counter()
    guide = guided.compile(guided.Regex(args.regex), vocab)
    compile_s = time.perf_counter() - t
    eos = set(vocab.eos_token_ids)
    ids = prompt_ids(tok, args.prompt)
    print(f"model {guided.models.DEFAULT_MODEL_NAME}, {model.dtype}, torch threads {torch.get_num_threads()}, "
          f"prompt {len(ids)} tokens, greedy, {n} new tokens, {args.rounds} rounds (+1 warm-up)")
    print(f"regex {args.regex!r}: {guide.dfa.num_states} DFA states, compile + first mask {compile_s * 1e3:.1f} ms")

    # ---- warm-up (untimed): also fills the lazily computed mask rows --------------
    t = time.perf_counter()
    w = guided.generate(model, tok, args.prompt, guide, max_new_tokens=n)
    cold_mask_us = 1e6 * w.stats.mask_s / max(w.stats.new_tokens, 1)
    guided.generate(model, tok, args.prompt, None, max_new_tokens=n)
    own_loop(model, ids, guide, n, eos)
    own_loop(model, ids, None, n, eos)
    print(f"warm-up round {time.perf_counter() - t:.1f} s; cold constrained run (rows computed on first "
          f"visit): mask {cold_mask_us:.1f} us/token, index rows now {guide.index.num_rows}")

    # ---- 1 + 2: guided.generate and the own loop, interleaved -------------------
    gen = {"unconstrained": [], "constrained": []}
    gen_mask = []
    loop = {"unconstrained": [], "constrained": []}
    steps_mask, steps_adv, fwd_c, fwd_u, probes = [], [], [], [], []
    constrained_tokens = []
    finish = {}
    for r in range(args.rounds):
        for arm, spec in (("unconstrained", None), ("constrained", guide)):
            res = guided.generate(model, tok, args.prompt, spec, max_new_tokens=n)
            gen[arm].append(res.stats.decode_s / res.stats.new_tokens)
            finish[arm] = (res.finish_reason, res.stats.new_tokens, res.text)
            if spec is not None:
                gen_mask.append(1e6 * res.stats.mask_s / res.stats.new_tokens)
        for arm, g in (("unconstrained", None), ("constrained", guide)):
            o = own_loop(model, ids, g, n, eos)
            loop[arm].append(o["decode_ns"] / len(o["tokens"]))
            if g is not None:
                steps_mask += o["mask"]
                steps_adv += o["adv"]
                fwd_c += o["fwd"]
                constrained_tokens = o["tokens"]
            else:
                fwd_u += o["fwd"]
                probes += o["probe"]

    print()
    for arm in ("unconstrained", "constrained"):
        reason, count, text = finish[arm]
        print(f"{arm:>13}: finish_reason={reason!r}, new_tokens={count}, text={text[:70]!r}...")
    print()
    print("1. guided.generate, per-token decode time (decode_s / new_tokens), median of rounds")
    u, c = statistics.median(gen["unconstrained"]), statistics.median(gen["constrained"])
    ratios = [b / a for a, b in zip(gen["unconstrained"], gen["constrained"])]
    print(f"   {'unconstrained':<28} {u * 1e3:8.2f} ms/token")
    print(f"   {'constrained':<28} {c * 1e3:8.2f} ms/token   (stats.mask_us_per_token p50 "
          f"{statistics.median(gen_mask):.1f} us)")
    print(f"   {'ratio constrained/uncon.':<28} {c / u:8.3f}   (per-round ratios "
          f"{', '.join(f'{x:.3f}' for x in ratios)}; target <= {TARGET_RATIO}: "
          f"{'MET' if c / u <= TARGET_RATIO else 'MISSED'})")

    print()
    print("2. own decode loop (mirrors guided/generation.py), per step")
    lu, lc = statistics.median(loop["unconstrained"]), statistics.median(loop["constrained"])
    total = [a + b for a, b in zip(steps_mask, steps_adv)]
    print(f"   {'loop, mask skipped':<28} {lu / 1e6:8.2f} ms/token")
    print(f"   {'loop, constrained':<28} {lc / 1e6:8.2f} ms/token")
    print(f"   {'ratio':<28} {lc / lu:8.3f}")
    print(f"   {'forward p50 (skipped/constr.)':<28} {pct(fwd_u, 50) / 1e6:8.2f} / {pct(fwd_c, 50) / 1e6:.2f} ms")
    print(f"   {'':<28} {'p50 us':>8} {'p90 us':>8} {'p99 us':>8} {'max us':>8}   ({len(total)} steps)")
    for name, vals in (("apply mask", steps_mask), ("accept + next fill", steps_adv),
                       ("mask + advance", total)):
        print(f"   {name:<28} {pct(vals, 50) / 1e3:8.1f} {pct(vals, 90) / 1e3:8.1f} "
              f"{pct(vals, 99) / 1e3:8.1f} {max(vals) / 1e3:8.1f}")
    print(f"   {'probe: np.zeros(16).sum()':<28} {pct(probes, 50) / 1e3:8.1f} {pct(probes, 90) / 1e3:8.1f} "
          f"{pct(probes, 99) / 1e3:8.1f} {max(probes) / 1e3:8.1f}   (same point, mask-skipped loop)")
    r_mask, r_adv = replay(guide, constrained_tokens, model.config.vocab_size)
    r_total = [a + b for a, b in zip(r_mask, r_adv)]
    print(f"   replayed back to back, no forward in between (warm caches), {len(r_total)} steps:")
    for name, vals in (("apply mask", r_mask), ("accept + next fill", r_adv),
                       ("mask + advance", r_total)):
        print(f"   {name:<28} {pct(vals, 50) / 1e3:8.1f} {pct(vals, 90) / 1e3:8.1f} "
              f"{pct(vals, 99) / 1e3:8.1f} {max(vals) / 1e3:8.1f}")
    p99 = pct(total, 99) / 1e3
    print(f"   mask + advance (in the loop) p99 target <= {TARGET_P99_US:g} us: {'MET' if p99 <= TARGET_P99_US else 'MISSED'}; "
          f"p50 is {100 * pct(total, 50) / pct(fwd_c, 50):.2f}% of a forward pass")

    if args.skip_hf:
        return
    # ---- 3: HF generate with / without guided.LogitsProcessor --------------------
    inputs = torch.tensor([ids], dtype=torch.long)
    attn = torch.ones_like(inputs)
    kw = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False, temperature=None, top_p=None,
              top_k=None, pad_token_id=vocab.eos_token_ids[0])

    def hf(constrained: bool):
        procs = [guided.LogitsProcessor(guide)] if constrained else None
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(input_ids=inputs, attention_mask=attn, logits_processor=procs, **kw)
        return time.perf_counter() - t0, out.shape[1] - inputs.shape[1], out[0, inputs.shape[1]:]

    hf(False), hf(True)  # warm-up
    hf_t = {False: [], True: []}
    hf_out = {}
    for _ in range(args.rounds):
        for cons in (False, True):
            s, k, out = hf(cons)
            hf_t[cons].append(s / k)
            hf_out[cons] = (k, out)
    hu, hc = statistics.median(hf_t[False]), statistics.median(hf_t[True])
    print()
    print("3. HF model.generate (greedy, min_new_tokens = max_new_tokens), total time / new token")
    print(f"   {'plain':<28} {hu * 1e3:8.2f} ms/token   ({hf_out[False][0]} tokens)")
    text = vocab.decode(hf_out[True][1].tolist()).decode("utf-8", "replace")
    ok = guide.dfa.step(0, text.encode()) >= 0
    print(f"   {'guided.LogitsProcessor':<28} {hc * 1e3:8.2f} ms/token   ({hf_out[True][0]} tokens, "
          f"output a valid prefix of the regex: {ok})")
    hr = [b / a for a, b in zip(hf_t[False], hf_t[True])]
    print(f"   {'ratio':<28} {hc / hu:8.3f}   (per-round {', '.join(f'{x:.3f}' for x in hr)})")

    print()
    print("Summary (ratios measured in this run)")
    print(f"   guided.generate constrained/unconstrained  {c / u:6.3f}   target <= {TARGET_RATIO}")
    print(f"   own loop constrained/mask-skipped          {lc / lu:6.3f}")
    print(f"   HF generate + LogitsProcessor / plain      {hc / hu:6.3f}")
    print(f"   mask + advance per token p50 / p99      {pct(total, 50) / 1e3:5.1f} / {p99:.1f} us   "
          f"target p99 <= {TARGET_P99_US:g} us (in the decode loop)")
    print(f"   same, replayed with warm caches         {pct(r_total, 50) / 1e3:5.1f} / {pct(r_total, 99) / 1e3:.1f} us")


if __name__ == "__main__":
    main()
