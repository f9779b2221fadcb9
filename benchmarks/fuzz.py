"""The spec fuzzer, run long: random and mutated regexes, JSON Schemas, MaskBench schemas
mutated keyword by keyword, and lark grammars, each compiled and judged against its
reference (``re``, ``jsonschema``, lark's reading of the grammar).

The fuzzer is ``tests/fuzz_specs.py`` (``tests/test_fuzz.py`` runs a few of each with
fixed seeds); see its docstring for what counts as expected. Every spec ends as one
outcome: ``guide`` (compiled, and agreed with the reference on every sampled string),
a documented error (a ``guided.SpecError`` subclass, by name), or *unexpected*: another
exception, a disagreement, or a compile past the time budget (``--budget``, passed to
``guided.compile(timeout=)``). Refusals of valid texts that the docs allow (keys in
another order, a superset subtracted, forms the compiler does not write) are counted
as notes.

Specs are drawn in turn from each language (``--languages``); spec ``i`` of a language
uses ``random.Random(f"{seed}-{language}-{i}")``, so a reported spec is fuzzed again by
``--seed S --languages L --start i --count 1``. MaskBench mutants need
``../shared/bench/maskbench.jsonl.gz`` (``--data``); without it that language is
skipped.

Usage::

    python benchmarks/fuzz.py [--seed 0] (--count N | --seconds S)
        [--languages regex,json,maskbench,grammar] [--budget 10] [--start 0]
        [--data PATH] [--json-out FILE] [--quiet]

Output: a progress line every ``--progress`` seconds, each unexpected outcome as it
happens (the spec and what went wrong), and a summary: specs tried per language,
outcomes by error type, strings judged, notes, and the count of unexpected outcomes
(the exit status is 1 when it is not 0).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (ROOT, os.path.join(ROOT, "tests")):
    if path not in sys.path:
        sys.path.insert(0, path)

LANGUAGES = ("regex", "json", "maskbench", "grammar")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seed", type=int, default=0, help="seed of every spec's random source (default 0)")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--count", type=int, help="specs per language")
    group.add_argument("--seconds", type=float, help="run until this many seconds have passed")
    p.add_argument("--languages", default=",".join(LANGUAGES),
                   help=f"comma-separated, of {', '.join(LANGUAGES)} (default: all)")
    p.add_argument("--budget", type=float, default=10.0, help="seconds a compile may take (default 10)")
    p.add_argument("--start", type=int, default=0, help="index of the first spec of each language (default 0)")
    p.add_argument("--data", default=None, help="MaskBench JSON lines (default ../shared/bench/maskbench.jsonl.gz)")
    p.add_argument("--maskbench-pool", type=int, default=2000,
                   help="MaskBench schemas to draw mutants from (default 2000)")
    p.add_argument("--progress", type=float, default=30.0, help="seconds between progress lines (default 30)")
    p.add_argument("--json-out", default=None, help="write the summary and every unexpected outcome here")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    args = p.parse_args(argv)
    args.languages = [x.strip() for x in args.languages.split(",") if x.strip()]
    unknown = [x for x in args.languages if x not in LANGUAGES]
    if unknown:
        p.error(f"unknown language(s): {', '.join(unknown)}")
    if args.count is not None and args.count < 1:
        p.error("--count must be at least 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    warnings.simplefilter("ignore")  # re's FutureWarnings on fuzzed patterns, lenient-mode warnings
    import fuzz_specs as fz

    vocab = fz.fuzz_vocab()
    languages = list(args.languages)
    maskbench = patterns = None
    data = fz.Path(args.data) if args.data else fz.MASKBENCH
    if "maskbench" in languages or "regex" in languages:
        if data.exists():
            t = time.perf_counter()
            if "maskbench" in languages:
                maskbench = fz.maskbench_rows(random.Random(args.seed), args.maskbench_pool, data)
            if "regex" in languages:
                patterns = fz.SEED_PATTERNS + fz.maskbench_patterns(data)
            print(f"MaskBench: {len(maskbench or [])} schemas to mutate, {len(patterns or [])} patterns to mutate "
                  f"({time.perf_counter() - t:.1f} s)", flush=True)
        elif "maskbench" in languages:
            print(f"MaskBench data not found at {data}: maskbench skipped", flush=True)
            languages.remove("maskbench")
    if not languages:
        print("nothing to fuzz", file=sys.stderr)
        return 2

    tried = collections.Counter()
    kinds: dict[str, collections.Counter] = {lang: collections.Counter() for lang in languages}
    checked = collections.Counter()
    notes: dict[str, collections.Counter] = {lang: collections.Counter() for lang in languages}
    compile_s: dict[str, list[float]] = {lang: [] for lang in languages}
    unexpected = []
    start = time.perf_counter()
    last_progress = start

    def progress(final: bool = False) -> None:
        elapsed = time.perf_counter() - start
        parts = " ".join(f"{lang} {tried[lang]}" for lang in languages)
        print(f"[{elapsed:7.1f} s] {parts} | unexpected {len(unexpected)}" + (" (done)" if final else ""), flush=True)

    i = args.start
    while True:
        if args.count is not None and i >= args.start + args.count:
            break
        if args.seconds is not None and time.perf_counter() - start >= args.seconds:
            break
        for lang in languages:
            if args.seconds is not None and time.perf_counter() - start >= args.seconds:
                break
            rng = random.Random(f"{args.seed}-{lang}-{i}")
            outcome = fz.fuzz_one(lang, rng, vocab, maskbench=maskbench, patterns=patterns, budget=args.budget)
            tried[lang] += 1
            kinds[lang][outcome.kind] += 1
            checked[lang] += outcome.checked
            notes[lang].update(outcome.notes)
            compile_s[lang].append(outcome.seconds)
            if outcome.unexpected:
                unexpected.append((lang, i, outcome))
                print(f"UNEXPECTED ({lang} #{i}, --seed {args.seed} --languages {lang} --start {i} --count 1)\n"
                      f"{outcome.report()}", flush=True)
            now = time.perf_counter()
            if not args.quiet and now - last_progress >= args.progress:
                progress()
                last_progress = now
        i += 1
    elapsed = time.perf_counter() - start
    progress(final=True)

    print(f"\nsummary: seed {args.seed}, {elapsed:.0f} s, compile budget {args.budget:g} s")
    for lang in languages:
        times = sorted(compile_s[lang])
        p50 = times[len(times) // 2] if times else 0.0
        worst = times[-1] if times else 0.0
        outcomes = ", ".join(f"{k} {n}" for k, n in kinds[lang].most_common())
        print(f"  {lang:9} {tried[lang]:6} specs, {checked[lang]:7} strings judged, compile p50 {p50 * 1e3:.1f} ms, "
              f"max {worst:.2f} s")
        print(f"            outcomes: {outcomes}")
        for note, n in notes[lang].most_common():
            print(f"            note: {note}: {n}")
    new = [(lang, i, o) for lang, i, o in unexpected if not fz.known(o)]
    print(f"  unexpected: {len(new)} (and {len(unexpected) - len(new)} known: fuzz_specs.KNOWN)")
    for lang, i, outcome in unexpected:
        print(f"    {lang} #{i}{' (known)' if fz.known(outcome) else ''}: {outcome.unexpected[:200]}")
    if args.json_out:
        summary = {
            "seed": args.seed, "seconds": elapsed, "budget": args.budget,
            "languages": {lang: {"specs": tried[lang], "outcomes": dict(kinds[lang]), "checked": checked[lang],
                                 "notes": dict(notes[lang])} for lang in languages},
            "unexpected": [{"language": lang, "index": i, "kind": o.kind, "what": o.unexpected,
                            "spec": list(o.spec) if isinstance(o.spec, tuple) else o.spec}
                           for lang, i, o in unexpected],
        }
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1, ensure_ascii=True, default=repr)
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main())
