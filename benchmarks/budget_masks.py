"""Budget-aware mask time without a model: MaskBench valid instances replayed token by token.

For ``--schemas`` MaskBench schemas (seeded shuffle; those that compile to an automaton
guide and have a valid instance the guide accepts, pretty-printed with indent 2 and
tokenized with SmolLM2's tokenizer), each instance's tokens are fed to a matcher of a
freshly compiled guide and every step's ``fill_next_token_bitmask`` is timed:

- ``plain``: no budget (``remaining=None``);
- ``generous``: ``remaining`` = twice the tokens left (the budget never binds: what
  budget-aware masks cost a loop whose limit is well above the output);
- ``tight``: ``remaining`` = exactly the tokens left, EOS included (the budget binds
  at most steps: the worst case);

each arm cold (a new guide: rows, distances and levels built on first visit; the
``min_tokens()`` a loop asks for first is timed apart as set-up) and then warm (the
same guide again). Per-step p50 / p90 / p99 and mean, and their ratios to plain.

Usage::

    python benchmarks/budget_masks.py [--schemas 100] [--seed 0]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import guided  # noqa: E402
from guided.compiler import clear_cache  # noqa: E402
from guided.models import load_tokenizer  # noqa: E402

DEFAULT_DATA = os.path.join(ROOT, "..", "shared", "bench", "maskbench.jsonl.gz")
ARMS = ("plain", "generous", "tight")


def cases(args, vocab, tok):
    """(schema, token ids of a valid instance) in seeded-shuffle order."""
    with gzip.open(args.data, "rt") as f:
        rows = [json.loads(line) for line in f]
    order = list(range(len(rows)))
    random.Random(args.seed).shuffle(order)
    out = []
    for i in order:
        if len(out) >= args.schemas:
            break
        schema = rows[i]["schema"]
        valid = [t["data"] for t in rows[i]["tests"] if t["valid"]]
        if not isinstance(schema, dict) or not valid:
            continue
        try:
            guide = guided.compile(guided.JsonSchema(schema), vocab)
        except Exception:  # noqa: BLE001 - a schema guided refuses is not this benchmark's subject
            continue
        ids = tok(json.dumps(valid[0], indent=2), add_special_tokens=False).input_ids
        if guide.supports_budget and guide.matcher().accept_tokens(ids):
            out.append((schema, ids))
    return out


def replay(schema, ids, vocab, arm, guide=None):
    """Per-step fill times (ns) along ``ids``; the guide (new unless given) and the set-up time."""
    guide = guide or guided.compile(guided.JsonSchema(schema), vocab)
    t = time.perf_counter()
    if arm != "plain":
        guide.min_tokens()
    setup = time.perf_counter() - t
    m = guide.matcher()
    bitmask = guided.allocate_token_bitmask(1, guide.vocab_size)
    n = len(ids) + 1  # the tokens and EOS
    times = []
    for step, token in enumerate([None, *ids]):
        if token is not None:
            m.accept_token(token)
        remaining = None if arm == "plain" else (n - step) * (2 if arm == "generous" else 1)
        t0 = time.perf_counter_ns()
        m.fill_next_token_bitmask(bitmask, 0, remaining)
        times.append(time.perf_counter_ns() - t0)
    return times, setup, guide


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--schemas", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default=DEFAULT_DATA)
    args = ap.parse_args()
    guided.load_kernels()  # numba loaded before anything is timed, as a server loads it at start-up
    tok = load_tokenizer()
    vocab = guided.Vocabulary.from_tokenizer(tok)
    picked = cases(args, vocab, tok)
    times = {(arm, when): [] for arm in ARMS for when in ("cold", "warm")}
    setups = []
    for k, (schema, ids) in enumerate(picked, 1):
        for arm in ARMS:
            clear_cache()
            cold, setup, guide = replay(schema, ids, vocab, arm)
            warm, _, _ = replay(schema, ids, vocab, arm, guide)
            times[arm, "cold"] += cold
            times[arm, "warm"] += warm
            if arm == "tight":
                setups.append(setup * 1e3)
        if k % 10 == 0:
            print(f"[{k}/{len(picked)}]", file=sys.stderr, flush=True)
    steps = len(times["plain", "cold"])
    print(f"{len(picked)} schemas, {steps} steps (seed {args.seed}); set-up (first min_tokens()) p50 "
          f"{pct(setups, .5):.1f} ms, p90 {pct(setups, .9):.1f} ms, max {max(setups):.0f} ms\n")
    print("| pass | arm | p50 us | p90 us | p99 us | mean us | p50 / plain | mean / plain |")
    print("|---|---|---|---|---|---|---|---|")
    for when in ("cold", "warm"):
        base = times["plain", when]
        for arm in ARMS:
            t = times[arm, when]
            print(f"| {when} | {arm} | {pct(t, .5) / 1e3:.1f} | {pct(t, .9) / 1e3:.1f} | {pct(t, .99) / 1e3:.1f} | "
                  f"{sum(t) / len(t) / 1e3:.1f} | {pct(t, .5) / pct(base, .5):.2f}x | {sum(t) / sum(base):.2f}x |")


if __name__ == "__main__":
    main()
