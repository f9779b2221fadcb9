"""Batch masks: per-step time to fill a whole batch's bitmasks, guided against XGrammar and llguidance.

A serving engine fills one bitmask row per constrained sequence every step, for the
whole batch at once. This measures that step on MaskBench JSON schemas, in one
process, every engine on the same walk:

* guided: ``guided.fill_next_token_bitmasks(matchers, bitmask, threads=T)``, then
  ``matcher.accept_token(t)`` per row; ``JsonSchema(schema, whitespace="compact")``
  compiled by ``guided.compile(..., timeout=None)`` with its caches cleared before
  each schema (every guide compiles cold, nothing is shared between schemas).
* XGrammar (``pip install --no-deps xgrammar apache-tvm-ffi``, benchmark-only):
  ``BatchGrammarMatcher(max_threads=T).batch_fill_next_token_bitmask(matchers,
  bitmask)``, then ``BatchGrammarMatcher.batch_accept_token``; compiled as in
  ``maskbench.py`` (``compile_json_schema(text, any_whitespace=False, separators=(",",
  ":"))``, one compiler thread, no compile cache).
* llguidance (``pip install llguidance``, benchmark-only):
  ``llguidance.torch.fill_next_token_bitmask_par(LLExecutor(num_threads=T), [(m, row),
  ...], bitmask)``, then ``executor.consume_token_par``; compiled as in
  ``maskbench.py`` (``grammar_from_json_schema(schema, defaults={"whitespace_flexible":
  False})``, one ``LLMatcher`` per schema, ``deep_copy()`` per sequence).

Schemas: ``--schemas`` (40) drawn with ``--seed`` among those every engine passes in
the MaskBench statuses file (``results/maskbench_statuses_*.tsv.gz``; every schema
where it is absent), kept only if each engine compiles them within
``--max-compile-s`` and accepts their first valid instance token by token. Instances
are serialised compactly and tokenised with SmolLM2's tokenizer (loaded through
``guided.models.load_tokenizer``), no special tokens, as in ``maskbench.py``.

The walk, for each batch size B (``--batch-sizes``, default 1, 8, 32, 128): the rows
``0 .. n - 1`` (n = the schemas rounded up to a multiple of B) are cut into batches
of B; row g follows schema ``g % schemas``, its valid instances in turn from the
``g // schemas``-th on, each instance's tokens then EOS, then a fresh matcher on the
next instance (so the batch stays full, as under continuous batching). A **step** =
fill the B rows' masks (timed: one sample), check each row's next token is allowed
(untimed), then every row accepts its token (timed apart). Each batch runs
``--steps`` steps. So at every B every schema is walked, B = 1 one schema at a time.

Two passes over the same walk, for each B:

* **first**: right after the compile (untimed; every engine compiles every schema
  afresh for each B), so masks are computed on first visit where an engine builds
  them lazily;
* **repeat**: the same walk again with fresh matchers on the same compiled guides.

Engines are interleaved step by step: each step of a batch runs every engine, in a
fresh random order (seeded), each after a ``--pause-ms`` sleep (1 ms), so machine
noise lands on all of them alike and one engine's worker threads, still spinning
after its step, do not eat into the next engine's time. Reported: the median (p50)
per-step fill time per engine, B and pass, and guided / the faster peer (the fastest
XGrammar or llguidance configuration at that B and pass); the mean; each engine's
compile time per schema (XGrammar builds its token-mask cache there, guided and
llguidance build masks on first visit, in the first pass). The JSON result
(``--out``) has p50 / p90 / mean of fill and of fill + accept, compile times, and
every sample. torch runs on one thread (``torch.set_num_threads(1)``); the engines'
own thread counts are ``--guided-threads`` (1, 2) and ``--peer-threads`` (1, 2).

Usage::

    python benchmarks/batch_masks.py [--batch-sizes 1,8,32,128] [--schemas 40] [--seed 0] [--steps 100]
        [--guided-threads 1,2] [--peer-threads 1,2] [--engines guided,xgrammar,llguidance]
        [--pause-ms 1] [--data PATH] [--out RESULT.json]

The defaults take about 5 minutes on a 2-core machine.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import gc
import glob
import gzip
import importlib.metadata
import json
import math
import platform
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks.maskbench import (
    DEFAULT_DATA,
    WARMUP_RECURSIVE_SCHEMA,
    WARMUP_SCHEMA,
    load_records,
    percentile,
    serialise,
)

PASSES = ("first", "repeat")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- engines


class GuidedBatch:
    """guided through ``fill_next_token_bitmasks``."""

    family = "guided"

    def __init__(self, hf, threads: int):
        import guided

        self._guided = guided
        self.threads = threads
        self.name = f"guided t{threads}"
        self.vocab = guided.Vocabulary.from_tokenizer(hf)
        self.eos = self.vocab.eos_token_ids[0]

    def compile(self, schema):
        import guided.fsm.memo
        import guided.fsm.regex

        # Cold, as in maskbench.py: no guide, automaton or regex shared with an
        # earlier compile (another configuration's guides included).
        self._guided.clear_cache()
        fn = getattr(guided.fsm.regex, "compile_regex", None)
        if hasattr(fn, "cache_clear"):
            fn.cache_clear()
        guided.fsm.memo.clear()
        spec = self._guided.JsonSchema(schema, whitespace="compact")
        return self._guided.compile(spec, self.vocab, timeout=None)

    def allocate(self, batch: int):
        return self._guided.allocate_token_bitmask(batch, self.vocab.size)

    def new_matcher(self, compiled):
        return compiled.matcher()

    def fill(self, matchers, bitmask) -> None:
        self._guided.fill_next_token_bitmasks(matchers, bitmask, threads=self.threads)

    def accept(self, matchers, tokens) -> list:
        return [m.accept_token(t) for m, t in zip(matchers, tokens)]

    def error(self, matchers) -> str:
        return ""


class XGrammarBatch:
    """XGrammar's ``BatchGrammarMatcher``."""

    family = "xgrammar"

    def __init__(self, hf, threads: int):
        import xgrammar

        self._xgr = xgrammar
        self.threads = threads
        self.name = f"xgrammar t{threads}"
        self.eos = hf.eos_token_id
        info = xgrammar.TokenizerInfo.from_huggingface(hf, stop_token_ids=[self.eos])
        self.vocab_size = info.vocab_size
        self._compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self._batch = xgrammar.BatchGrammarMatcher(max_threads=threads)

    def compile(self, schema):
        return self._compiler.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(",", ":"))

    def allocate(self, batch: int):
        return self._xgr.allocate_token_bitmask(batch, self.vocab_size)

    def new_matcher(self, compiled):
        return self._xgr.GrammarMatcher(compiled)

    def fill(self, matchers, bitmask) -> None:
        self._batch.batch_fill_next_token_bitmask(matchers, bitmask)

    def accept(self, matchers, tokens) -> list:
        return self._xgr.BatchGrammarMatcher.batch_accept_token(matchers, tokens)

    def error(self, matchers) -> str:
        return ""


class LLGuidanceBatch:
    """llguidance's parallel fill (``fill_next_token_bitmask_par`` on an ``LLExecutor``)."""

    family = "llguidance"

    def __init__(self, hf, threads: int):
        import llguidance
        import llguidance.hf
        import llguidance.torch

        self._ll = llguidance
        self.threads = threads
        self.name = f"llguidance t{threads}"
        self.tok = llguidance.hf.from_tokenizer(hf, eos_token=hf.eos_token_id)
        self.vocab_size = self.tok.vocab_size
        self.eos = self.tok.eos_token
        self._executor = llguidance.LLExecutor(num_threads=threads)

    def compile(self, schema):
        grammar = self._ll.LLMatcher.grammar_from_json_schema(schema, defaults={"whitespace_flexible": False})
        m = self._ll.LLMatcher(self.tok, grammar, log_level=0)
        if m.is_error():
            raise ValueError(m.get_error())
        return m

    def allocate(self, batch: int):
        return self._ll.torch.allocate_token_bitmask(batch, self.vocab_size)

    def new_matcher(self, compiled):
        return compiled.deep_copy()

    def fill(self, matchers, bitmask) -> None:
        self._ll.torch.fill_next_token_bitmask_par(self._executor, list(zip(matchers, range(len(matchers)))), bitmask)

    def accept(self, matchers, tokens) -> list:
        self._executor.consume_token_par(list(zip(matchers, tokens)))
        return [not m.is_error() for m in matchers]

    def error(self, matchers) -> str:
        bad = [m.get_error() for m in matchers if m.is_error()]
        return bad[0] if bad else ""


FAMILIES = {"guided": GuidedBatch, "xgrammar": XGrammarBatch, "llguidance": LLGuidanceBatch}


# --------------------------------------------------------------------------- schemas


def statuses_file() -> str | None:
    found = sorted(glob.glob(os.path.join(ROOT, "benchmarks", "results", "maskbench_statuses_*.tsv.gz")))
    return found[-1] if found else None


def all_passing(path: str | None) -> set[str] | None:
    """Ids every engine passes in a MaskBench statuses file (None: no file)."""
    if path is None:
        return None
    with gzip.open(path, "rt", encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        return {cells[0] for cells in (line.rstrip("\n").split("\t") for line in f)
                if len(cells) == len(header) and all(c == "passing" for c in cells[1:])}


def walks_through(engine, compiled, tokens: list[int]) -> bool:
    """Whether ``engine`` allows and accepts ``tokens`` then EOS from a fresh matcher."""
    m = engine.new_matcher(compiled)
    bitmask = engine.allocate(1)
    words = bitmask.numpy()[0]
    for t in tokens + [engine.eos]:
        engine.fill([m], bitmask)
        if not (int(words[t >> 5]) >> (t & 31)) & 1 or not all(engine.accept([m], [t])):
            return False
    return not engine.error([m])


def select_schemas(records, engines, tokenize, n: int, seed: int, max_compile_s: float) -> list[dict]:
    """``n`` schemas (id, schema, token lists of its valid instances) that every engine
    compiles within ``max_compile_s`` and walks the first valid instance of."""
    passing = all_passing(statuses_file())
    candidates = [r for r in records if (passing is None or r["id"] in passing)
                  and any(t.get("valid") for t in r.get("tests") or [])]
    random.Random(f"batch_masks:{seed}").shuffle(candidates)
    chosen = []
    for rec in candidates:
        if len(chosen) == n:
            break
        instances = [tokenize(serialise(t["data"])) for t in rec["tests"] if t.get("valid")]
        ok = True
        for e in engines:
            t0 = time.perf_counter()
            try:
                compiled = e.compile(rec["schema"])
            except Exception as exc:  # noqa: BLE001 - any refusal drops the schema
                log(f"  skip {rec['id']}: {e.name} refused it ({type(exc).__name__})")
                ok = False
                break
            if time.perf_counter() - t0 > max_compile_s:
                log(f"  skip {rec['id']}: {e.name} compiled it in {time.perf_counter() - t0:.1f} s")
                ok = False
                break
            if not walks_through(e, compiled, instances[0]):
                log(f"  skip {rec['id']}: {e.name} refused its first valid instance")
                ok = False
                break
        if ok:
            chosen.append({"id": rec["id"], "schema": rec["schema"], "instances": instances})
    if len(chosen) < n:
        log(f"only {len(chosen)} schemas qualified (asked for {n})")
    return chosen


def warm_up(engines, tokenize) -> None:
    """Untimed: one-time per-process costs (numba kernels loaded from their cache,
    per-vocabulary tables, the peers' tokenizer set-up) land here."""
    for schema, data in ((WARMUP_SCHEMA, {"a": "x1", "b": 2, "c": [1.5], "e": [{"f": [1, "g"]}]}),
                         (WARMUP_RECURSIVE_SCHEMA, {"kids": [{"kids": []}]})):
        tokens = tokenize(serialise(data))
        for e in engines:
            try:
                walks_through(e, e.compile(schema), tokens)
            except Exception:  # noqa: BLE001 - warm-up is best effort
                pass


# --------------------------------------------------------------------------- the walk


class Row:
    """One sequence of a batch: a schema's valid instances in turn, EOS after each."""

    __slots__ = ("compiled", "instances", "k", "pos", "matcher")

    def __init__(self, compiled, instances: list[list[int]], first: int):
        self.compiled, self.instances = compiled, instances
        self.k, self.pos, self.matcher = first % len(instances), 0, None

    def next_token(self, eos: int) -> int:
        tokens = self.instances[self.k]
        return tokens[self.pos] if self.pos < len(tokens) else eos

    def advance(self) -> None:
        self.pos += 1
        if self.pos > len(self.instances[self.k]):  # EOS accepted: next instance, fresh matcher
            self.k, self.pos, self.matcher = (self.k + 1) % len(self.instances), 0, None


class BatchWalk:
    """One engine's batch: B rows stepped together."""

    def __init__(self, engine, rows: list[Row]):
        self.engine, self.rows = engine, rows
        self.bitmask = engine.allocate(len(rows))
        self.words = self.bitmask.numpy()
        self.fill_ns: list[int] = []
        self.accept_ns: list[int] = []
        self.refused = 0

    def step(self) -> None:
        e, rows = self.engine, self.rows
        for r in rows:
            if r.matcher is None:
                r.matcher = e.new_matcher(r.compiled)
        matchers = [r.matcher for r in rows]
        tokens = [r.next_token(e.eos) for r in rows]
        t0 = time.perf_counter_ns()
        e.fill(matchers, self.bitmask)
        t1 = time.perf_counter_ns()
        words = self.words
        for i, t in enumerate(tokens):
            if not (int(words[i, t >> 5]) >> (t & 31)) & 1:
                self.refused += 1
        t2 = time.perf_counter_ns()
        ok = e.accept(matchers, tokens)
        t3 = time.perf_counter_ns()
        self.fill_ns.append(t1 - t0)
        self.accept_ns.append(t3 - t2)
        for r, a in zip(rows, ok):
            if a:
                r.advance()
            else:  # refused (never for the schemas chosen): start the row over
                self.refused += 1
                r.pos, r.matcher = 0, None


def rows_of(batch: int, j: int, schemas: list[dict], compiled: list) -> list[Row]:
    n = len(schemas)
    return [Row(compiled[g % n], schemas[g % n]["instances"], g // n) for g in range(j * batch, (j + 1) * batch)]


def run_batch_size(batch: int, engines, schemas: list[dict], steps: int, pause: float, seed: int) -> dict:
    """Both passes at one batch size; {pass: {engine name: summary}}."""
    rng = random.Random(f"batch_masks:{seed}:{batch}")
    t0 = time.perf_counter()
    compiled, compile_ms = {}, {}
    for e in engines:
        compiled[e.name], compile_ms[e.name] = [], []
        for s in schemas:
            t = time.perf_counter()
            compiled[e.name].append(e.compile(s["schema"]))
            compile_ms[e.name].append((time.perf_counter() - t) * 1000.0)
    log(f"B={batch}: compiled {len(schemas)} schemas x {len(engines)} engines in {time.perf_counter() - t0:.1f} s")
    batches = math.ceil(len(schemas) / batch)
    out = {"compile_ms": compile_ms}
    for pass_name in PASSES:
        t0 = time.perf_counter()
        fill = {e.name: [] for e in engines}
        accept = {e.name: [] for e in engines}
        refused = {e.name: 0 for e in engines}
        for j in range(batches):
            walks = [BatchWalk(e, rows_of(batch, j, schemas, compiled[e.name])) for e in engines]
            gc.collect()
            for _ in range(steps):
                rng.shuffle(walks)
                for w in walks:
                    if pause:
                        time.sleep(pause)
                    w.step()
            walks.sort(key=lambda w: engines.index(w.engine))
            for e, w in zip(engines, walks):
                fill[e.name] += w.fill_ns
                accept[e.name] += w.accept_ns
                refused[e.name] += w.refused
        out[pass_name] = {name: summary(fill[name], accept[name], refused[name]) for name in fill}
        log(f"B={batch} {pass_name}: {batches} batches x {steps} steps in {time.perf_counter() - t0:.1f} s; p50 us "
            + ", ".join(f"{n} {out[pass_name][n]['fill_p50_us']:.0f}" for n in fill))
    return out


def summary(fill_ns: list[int], accept_ns: list[int], refused: int) -> dict:
    fill = sorted(x / 1000.0 for x in fill_ns)
    both = sorted((a + b) / 1000.0 for a, b in zip(fill_ns, accept_ns))
    return {
        "steps": len(fill),
        "fill_p50_us": percentile(fill, 50), "fill_p90_us": percentile(fill, 90),
        "fill_mean_us": sum(fill) / len(fill),
        "step_p50_us": percentile(both, 50), "step_p90_us": percentile(both, 90),
        "step_mean_us": sum(both) / len(both),
        "refused": refused,
        "fill_us": [round(x / 1000.0, 1) for x in fill_ns],
        "accept_us": [round(x / 1000.0, 1) for x in accept_ns],
    }


# --------------------------------------------------------------------------- report


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def table(results: dict, engines, key: str, title: str) -> str:
    guided_names = [e.name for e in engines if e.family == "guided"]
    peer_names = [e.name for e in engines if e.family != "guided"]
    head = ["B", "pass"] + [e.name for e in engines]
    if guided_names and peer_names:
        head += ["faster peer"] + [f"{g} / peer" for g in guided_names]
    lines = [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for batch, by_pass in results.items():
        for pass_name in PASSES:
            got = by_pass[pass_name]
            cells = [str(batch), pass_name] + [_fmt(got[e.name][key]) for e in engines]
            if guided_names and peer_names:
                best = min(peer_names, key=lambda n: got[n][key])
                cells.append(best)
                cells += [f"{got[g][key] / got[best][key]:.2f}" for g in guided_names]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def compile_table(results: dict, engines) -> str:
    lines = ["### compile (untimed in the steps), ms per schema over every batch size", "",
             "| engine | p50 | p90 | max | total per batch size |", "|---|---|---|---|---|"]
    for e in engines:
        ms = sorted(x for r in results.values() for x in r["compile_ms"][e.name])
        total = sum(ms) / len(results)
        lines.append(f"| {e.name} | {_fmt(percentile(ms, 50))} | {_fmt(percentile(ms, 90))} | {_fmt(ms[-1])} | "
                     f"{_fmt(total)} |")
    return "\n".join(lines)


def versions() -> dict:
    import numpy
    import torch

    out = {"python": platform.python_version(), "torch": torch.__version__, "numpy": numpy.__version__,
           "cpus": os.cpu_count()}
    for dist in ("numba", "xgrammar", "llguidance"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--batch-sizes", default="1,8,32,128")
    ap.add_argument("--schemas", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=100, help="steps per batch")
    ap.add_argument("--engines", default="guided,xgrammar,llguidance")
    ap.add_argument("--guided-threads", default="1,2")
    ap.add_argument("--peer-threads", default="1,2")
    ap.add_argument("--max-compile-s", type=float, default=5.0,
                    help="drop a schema an engine takes longer than this to compile")
    ap.add_argument("--pause-ms", type=float, default=0.0,
                    help="sleep before each engine's step: every fill starts cold, as after a forward pass")
    ap.add_argument("--out", default=None, help="write the JSON result here")
    args = ap.parse_args(argv)
    import guided

    guided.load_kernels()  # numba loaded before anything is timed, as a server loads it at start-up

    import torch

    torch.set_num_threads(1)
    from guided.models import load_tokenizer

    wall = time.perf_counter()
    hf = load_tokenizer()

    def tokenize(text: str) -> list[int]:
        return hf.encode(text, add_special_tokens=False)

    engines = []
    for family in [f.strip() for f in args.engines.split(",") if f.strip()]:
        threads = args.guided_threads if family == "guided" else args.peer_threads
        for t in [int(x) for x in threads.split(",")]:
            engines.append(FAMILIES[family](hf, t))
    warm_up(engines, tokenize)
    log(f"set-up {time.perf_counter() - wall:.1f} s; selecting schemas")
    records = load_records(args.data)
    # One configuration per family checks a schema (the others compile it alike).
    checkers = list({e.family: e for e in engines}.values())
    schemas = select_schemas(records, checkers, tokenize, args.schemas, args.seed, args.max_compile_s)
    del records
    log(f"{len(schemas)} schemas after {time.perf_counter() - wall:.1f} s")

    results = {}
    for batch in [int(x) for x in args.batch_sizes.split(",")]:
        results[batch] = run_batch_size(batch, engines, schemas, args.steps, args.pause_ms / 1000.0, args.seed)

    print(f"## batch_masks.py: {len(schemas)} MaskBench schemas, {args.steps} steps per batch, seed {args.seed}\n")
    print(table(results, engines, "fill_p50_us", "fill, p50 us per step"))
    print()
    print(table(results, engines, "step_p50_us", "fill + accept, p50 us per step"))
    print()
    print(table(results, engines, "fill_mean_us", "fill, mean us per step"))
    print()
    print(compile_table(results, engines))
    refused = {f"B={b} {p} {n}": s["refused"] for b, r in results.items() for p in PASSES
               for n, s in r[p].items() if s["refused"]}
    if refused:
        print(f"\nrefused tokens (should be none): {refused}")
    print(f"\nwall {time.perf_counter() - wall:.0f} s; {versions()}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "versions": versions(), "schemas": [s["id"] for s in schemas],
                       "results": {str(b): r for b, r in results.items()}}, f)
        log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
