"""Every mask's time over a MaskBench sample, for comparing two versions of guided.

Whole-set runs move by 1.2-1.7x with the machine's speed, more than most changes;
this compares two checkouts mask by mask instead. Each run walks the same schemas
and instances as ``maskbench.py`` (compact whitespace, every schema compiled cold)
and saves each mask's time in order; ``--compare`` takes the minimum of each
mask's times over a side's runs (what is left is the code's cost, not the
machine's hiccups) and prints both sides.

    # (--ids A,B,... times only those schemas)
    # in each checkout (a git worktree each), alternating, twice:
    python benchmarks/mask_times.py --sample 400 --seed 1 --out /tmp/old_1.npy
    python benchmarks/mask_times.py --sample 400 --seed 1 --out /tmp/new_1.npy
    ...
    python benchmarks/mask_times.py --compare /tmp/old_1.npy,/tmp/old_2.npy /tmp/new_1.npy,/tmp/new_2.npy
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import maskbench as mb  # noqa: E402

BANDS = ((0, 100), (100, 200), (200, 500), (500, float("inf")))  # µs


def mask_times(records: list[dict], progress=sys.stderr) -> np.ndarray:
    """Each mask's time (ns), in order, as ``maskbench.run_schema`` takes them (the
    first mask after compiling is TTFM's and left out; a schema that does not compile
    adds none)."""
    tokenizer = mb.smollm2_tokenizer()
    engine = mb.GuidedEngine(tokenizer, whitespace="compact")

    def tokenize(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    mb.warm_up(engine, tokenize)  # as maskbench.py's workers do
    out: list[int] = []
    for n, record in enumerate(records):
        out.extend(mb.run_schema(engine, record["schema"], record["tests"], tokenize)["tbm_ns"])
        if progress is not None and (n + 1) % 100 == 0:
            print(f"{n + 1}/{len(records)} schemas, {len(out)} masks", file=progress)
    return np.array(out, dtype=np.int64)


def select(records: list[dict], ids: str | None, sample: int, seed: int) -> list[int]:
    """Indices of the records to time: those named in ``ids`` (comma-separated, in
    the data's order), else ``maskbench``'s stratified sample."""
    if not ids:
        return mb.stratified_sample([r["id"] for r in records], sample, seed)
    wanted = set(ids.split(","))
    picked = [i for i, r in enumerate(records) if r["id"] in wanted]
    missing = wanted - {records[i]["id"] for i in picked}
    if missing:
        raise SystemExit(f"no such schema in the data: {', '.join(sorted(missing))}")
    return picked


def compare(sides: list[list[np.ndarray]]) -> str:
    """The table of two sides (each a list of runs of the same masks)."""
    mins = [np.minimum.reduce(runs) / 1000 for runs in sides]
    if len({len(m) for m in mins}) != 1:
        raise SystemExit("the runs hold different numbers of masks: not the same sample, or a schema changed status")
    lines = [f"{'':8} {'p50':>7} {'p75':>7} {'p90':>7} {'p95':>7} {'p99':>7} {'all (s)':>8} {'>200us':>7}"]
    for name, m in zip(("old", "new"), mins):
        p = np.percentile(m, [50, 75, 90, 95, 99])
        lines.append(f"{name:8} " + " ".join(f"{x:7.1f}" for x in p) + f" {m.sum() / 1e6:8.2f} {(m >= 200).sum():7d}")
    lines.append("by the old time of each mask (µs band: old s -> new s)")
    for lo, hi in BANDS:
        sel = (mins[0] >= lo) & (mins[0] < hi)
        lines.append(f"  {lo:>4}-{hi:<4}  {sel.sum():7d} masks  {mins[0][sel].sum() / 1e6:6.2f} -> "
                     f"{mins[1][sel].sum() / 1e6:6.2f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=mb.DEFAULT_DATA)
    parser.add_argument("--sample", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ids", help="time only these schemas (comma-separated ids), instead of a sample")
    parser.add_argument("--out", help="save this checkout's mask times here (.npy)")
    parser.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"),
                        help="comma-separated .npy runs of each side")
    args = parser.parse_args(argv)
    import guided

    guided.load_kernels()  # numba loaded before anything is timed, as a server loads it at start-up
    if args.compare:
        print(compare([[np.load(p) for p in side.split(",")] for side in args.compare]))
        return 0
    if not args.out:
        parser.error("give --out (to time) or --compare")
    records = mb.load_records(args.data)
    picked = select(records, args.ids, args.sample, args.seed)
    t0 = time.perf_counter()
    times = mask_times([records[i] for i in picked])
    np.save(args.out, times)
    print(f"{len(times)} masks in {time.perf_counter() - t0:.0f} s; p50 / p99 "
          f"{np.percentile(times, 50) / 1000:.1f} / {np.percentile(times, 99) / 1000:.1f} µs -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
