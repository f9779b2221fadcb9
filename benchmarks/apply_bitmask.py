"""``guided.apply_token_bitmask_`` vs a plain ``masked_fill_`` with a ready bool mask.

Batch 1 / 64 / 512 over 49,152 (SmolLM2) and 128,256 (Llama-3) logits, float32,
random bitmasks with ~10% of the tokens allowed. p50 per call in microseconds.

Columns:

* ``masked_fill``   ``logits.masked_fill_(~allowed, -inf)`` with ``allowed`` a bool
  ``[batch, V]`` tensor computed beforehand: the floor (no unpacking at all);
* ``guided same``   ``apply_token_bitmask_`` with the same bitmask every call (on CPU
  the additive-row cache hits: the common decoding case, few distinct masks);
* ``unpack+fill``   ``guided.unpack_token_bitmask`` + ``masked_fill_``, batched: the
  tensor path ``apply_token_bitmask_`` takes off the CPU fast path (GPU, non-float32);
* ``guided fresh``  ``apply_token_bitmask_`` cycling through enough different
  bitmasks that no row repeats within the CPU cache's capacity (256 rows): every
  row is unpacked (the worst case: many sequences, each with a new mask).

Baseline and guided calls are interleaved, on the same logits (masking is
idempotent, so repeated calls do the same work).

Usage::

    python benchmarks/apply_bitmask.py [--device cpu|cuda] [--min-time 0.3]

On CUDA, times come from ``torch.cuda.Event`` pairs (synchronised per call), with
the bitmask already on the device.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

import guided  # noqa: E402
from guided.bitmask import bitmask_words  # noqa: E402

BATCHES = (1, 64, 512)
VOCABS = (49_152, 128_256)
CACHE_ROWS = 256  # guided.bitmask._AdditiveMasks capacity


def random_masks(gen: torch.Generator, batch: int, vocab: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(bool allowed [batch, V], int32 bitmask [batch, W]) with ~10% allowed."""
    allowed = torch.rand(batch, vocab, generator=gen) < 0.10
    words = bitmask_words(vocab)
    padded = torch.zeros(batch, words * 32, dtype=torch.bool)
    padded[:, :vocab] = allowed
    packed = np.packbits(padded.numpy(), axis=1, bitorder="little").view("<i4").reshape(batch, words)
    return allowed.to(device), torch.from_numpy(packed.copy()).to(device)


class Timer:
    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def __call__(self, fn) -> float:
        """Seconds for one call of fn."""
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) / 1e3
        t = time.perf_counter_ns()
        fn()
        return (time.perf_counter_ns() - t) / 1e9


def bench(batch: int, vocab: int, device: torch.device, min_time: float, min_iters: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    pool = max(2, math.ceil(2 * CACHE_ROWS / batch) + 1)  # rows cycled > cache capacity
    masks = [random_masks(gen, batch, vocab, device) for _ in range(pool)]
    logits = torch.randn(batch, vocab, generator=gen).to(device)
    check = logits.clone()
    # Correctness: guided and baseline agree.
    a = guided.apply_token_bitmask_(check.clone(), masks[0][1])
    b = check.clone().masked_fill_(~masks[0][0], float("-inf"))
    assert torch.equal(torch.isinf(a), torch.isinf(b)), "guided and masked_fill disagree"
    not_allowed = [(~m[0]).contiguous() for m in masks]
    del masks[1:]  # the bool masks of the rest are no longer needed
    bitmasks = [masks[0][1]] + [random_masks(torch.Generator().manual_seed(seed + 1 + i), batch, vocab, device)[1]
                                for i in range(pool - 1)]
    timer = Timer(device)
    t_base, t_same, t_fresh, t_unpack = [], [], [], []

    def unpack_fill(bm):
        logits.masked_fill_(~guided.unpack_token_bitmask(bm, vocab), float("-inf"))

    spent, i = 0.0, 0
    # warm-up
    for k in range(3):
        logits.masked_fill_(not_allowed[0], float("-inf"))
        guided.apply_token_bitmask_(logits, bitmasks[0])
    while spent < min_time or i < min_iters:
        k = i % pool
        t_base.append(timer(lambda: logits.masked_fill_(not_allowed[k], float("-inf"))))
        t_same.append(timer(lambda: guided.apply_token_bitmask_(logits, bitmasks[0])))
        t_fresh.append(timer(lambda: guided.apply_token_bitmask_(logits, bitmasks[k])))
        t_unpack.append(timer(lambda: unpack_fill(bitmasks[k])))
        spent += t_base[-1] + t_same[-1] + t_fresh[-1] + t_unpack[-1]
        i += 1
    us = lambda v: float(np.median(v)) * 1e6  # noqa: E731
    return us(t_base), us(t_same), us(t_unpack), us(t_fresh), i


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--min-time", type=float, default=0.3, help="seconds of timed calls per cell")
    ap.add_argument("--min-iters", type=int, default=10)
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)))
    ap.add_argument("--vocabs", default=",".join(map(str, VOCABS)))
    args = ap.parse_args()
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {torch.get_num_threads()} thread"
    print(f"apply_token_bitmask_ on {device} ({name}); float32 logits; ~10% allowed; p50 per call")
    hdr = (f"{'batch':>5} {'vocab':>7} {'masked_fill':>12} {'guided same':>12} {'unpack+fill':>12} "
           f"{'guided fresh':>13} {'same/base':>10} {'fresh/base':>11} {'iters':>6}")
    print(hdr)
    print(f"{'':>5} {'':>7} {'us':>12} {'us':>12} {'us':>12} {'us':>13}")
    print("-" * len(hdr))
    for vocab in map(int, args.vocabs.split(",")):
        for batch in map(int, args.batches.split(",")):
            base, same, unpack, fresh, iters = bench(batch, vocab, device, args.min_time, args.min_iters, seed=batch + vocab)
            print(f"{batch:>5} {vocab:>7} {base:>12.1f} {same:>12.1f} {unpack:>12.1f} {fresh:>13.1f} "
                  f"{same / base:>10.2f} {fresh / base:>11.2f} {iters:>6}")


if __name__ == "__main__":
    main()
