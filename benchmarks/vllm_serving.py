"""vLLM serving on CPU: guided's logits processor against vLLM's xgrammar and guidance backends.

Runs in the vLLM environment (``.venv-vllm``; vLLM's CPU build, xgrammar, llguidance and
guided installed there). The model is SmolLM2-135M-Instruct, the folder ``guided.models``
caches (``~/.cache/guided/models/smollm2-135m-instruct``), float32, greedy.

Requests: ``--schemas`` MaskBench schemas (``../shared/bench/maskbench.jsonl.gz``), drawn in
the order of a shuffle with ``--seed`` among those that guided, vLLM's xgrammar backend and
vLLM's guidance backend all compile (the script counts how many each rejected on the way),
and whose prompt has at most ``--max-prompt-tokens`` tokens. Each prompt is SmolLM2's chat
template around an instruction to answer with one JSON instance of the schema, the schema's
compact JSON text included.

Every arm gets the same schema text. By default (``--additional-properties closed``) it is
the schema with ``additionalProperties: false`` added to every object schema that lists
``properties`` and says nothing about others (vLLM's own
``process_for_additional_properties``): xgrammar's JSON Schema compiler closes such objects
(and arrays past their listed items) itself, in its strict mode, which vLLM leaves on;
guided and llguidance follow the standard (open), so closing them in the text is what makes
the three decode the same language.
``as-given`` sends the schemas unchanged.

Arms (``--arms``):

- ``unconstrained``: plain greedy decoding;
- ``xgrammar``: ``SamplingParams(structured_outputs=StructuredOutputsParams(json=schema))`` in an
  engine started with ``structured_outputs_config={"backend": "xgrammar"}``;
- ``guidance``: the same in an engine whose backend is ``"guidance"`` (llguidance);
- ``guided``: ``SamplingParams(extra_args={"guided_json": schema})`` through guided's
  ``GuidedLogitsProcessor``, which every engine of the environment loads (entry point).

vLLM fixes the built-in backend per engine, so there are two engines, each in a process of
its own and run one after the other: the xgrammar engine runs ``unconstrained``,
``xgrammar`` and ``guided``; the guidance engine runs ``guidance`` and its own
``unconstrained`` baseline (compare across engines through the baselines). Whitespace is
the same for every arm (``--whitespace``: ``compact`` sets ``disable_any_whitespace`` on the
engines and ``guided_whitespace=compact``; ``flexible`` leaves both at their defaults).
Object keys come in schema order in every backend.

Batch sizes (``--batch-sizes``): at most B requests in flight, the way a serving client
with concurrency B drives a server. Each engine is started once with ``max_num_seqs`` set
to the largest B; the script adds a request whenever one finishes, so the running batch
holds B requests until the queue runs dry, as the scheduler would with ``max_num_seqs=B``.
At B=1 only the first ``--requests-at-1`` requests run (decoding is sequential there, so
more requests add time, not information). Within an engine the arms run back to back at
each batch size, their order rotated from one batch size (and repetition) to the next.

Before the timed runs each engine prefills every prompt once (max_tokens=1, unconstrained):
vLLM's prefix cache then holds the prompts, so every timed arm finds the same cache. Then
comes the **cold pass**: every arm runs every request once at the largest B, the first time
the engine sees each schema (compile, first visits of automaton states); it is reported in
rows of its own and not judged against the targets. The timed runs after it (passes 0, 1,
...) serve schemas the engine has seen: xgrammar's compiler cache and guided's compile
cache hold them (llguidance builds its matcher per request, lazily, in every pass).

Measured per arm and batch size, from the engine's own step loop (``LLMEngine.step``;
``VLLM_ENABLE_V1_MULTIPROCESSING=0`` keeps the engine core and the worker in this process):

- **output tokens/s**: output tokens of all requests / wall time from the first request
  added to the last one finished;
- **TPOT** (time per output token) of a request: (time its last token arrived - time its
  first arrived) / (tokens - 1); p50 and p99 over the requests with at least two tokens
  (nearest rank);
- **finished**: the share of requests that ended on EOS (``finish_reason == "stop"``);
  **cut**: the share that hit ``--max-tokens``; **valid / finished**: the share of finished
  outputs that parse as JSON and validate against their schema (``jsonschema``, the
  schema's own draft, format assertions on); ``valid_of_all`` in the JSON counts cut outputs
  as invalid;
- **step ms**: mean wall time of an engine step (schedule, model, sample, detokenize); steps
  spent waiting for an asynchronous grammar compile run no model and pull it down;
- **constraint share of step**: time spent in the arm's constraint code / the engine
  steps' time. guided: ``GuidedLogitsProcessor.apply`` + ``update_state`` (the matchers'
  advance, mask fill and the bitmask applied to the logits). xgrammar and guidance:
  ``StructuredOutputManager.grammar_bitmask`` + ``accept_tokens`` (scheduler side) + the
  model runner's ``apply_grammar_bitmask``. Async grammar compilation threads are not in it.

The issue's targets (printed at the end): guided's tokens/s >= xgrammar's at every batch
size, every finished guided output valid, guided's share <= 5% of step time at B=32.

Machine notes: a served vLLM CPU worker here pins itself to one core and runs torch on
one thread; the in-process engine does neither (vLLM's own attempt to drop to one thread
is skipped there), so the engine process runs with ``OMP_NUM_THREADS=--torch-threads``
(default 1). With two threads on a busy 2-core machine every torch operation of the step
can wait for the other core: guided's CPU bitmask application, made of torch operations,
then costs tens of ms a step while xgrammar's single-threaded kernel does not. SmolLM2
float32 decodes ~17 tokens/s at B=1 here. The load average is recorded beside every run;
the default run (64 schemas, B = 1, 8, 32, 16 requests at B=1, 128 tokens) takes about 25
minutes on a 2-core machine.

Usage::

    NUMBA_CACHE_DIR=/tmp/numba-vllm .venv-vllm/bin/python benchmarks/vllm_serving.py
        [--schemas 64] [--seed 0] [--batch-sizes 1,8,32] [--requests-at-1 16] [--max-tokens 128]
        [--arms unconstrained,xgrammar,guidance,guided] [--whitespace compact|flexible]
        [--repeats 1] [--max-prompt-tokens 640] [--additional-properties closed|as-given]
        [--torch-threads 1] [--profile ARM:B|ARM:cold [--profile-out FILE.prof]] [--out FILE.json]

``--profile guided:32`` (or ``guided:cold``) runs that arm under cProfile in the engine's
process and prints the functions with the most cumulative and own time; its figures are
then slower and it is left out of the targets.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(ROOT, "..", "shared", "bench", "maskbench.jsonl.gz")
DEFAULT_MODEL = os.path.expanduser("~/.cache/guided/models/smollm2-135m-instruct")
ARMS = ("unconstrained", "xgrammar", "guidance", "guided")
CONSTRAINED = ("xgrammar", "guidance", "guided")
COLD = -1  # the repeat number of the cold pass
INSTRUCTION = ("Write one JSON instance that is valid against the JSON Schema below. "
               "Answer with the JSON only, no explanation.\n\nJSON Schema:\n")

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # engine core and worker in this process
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "3")          # GiB: every prompt stays in the prefix cache
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("NUMBA_CACHE_DIR", "/tmp/numba-vllm")   # this environment's numba has its own cache
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def log(*parts) -> None:
    """Progress on stderr."""
    print(*parts, file=sys.stderr, flush=True)


def percentile(values, p):
    """Nearest-rank percentile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


# -- picking the schemas (parent process) --------------------------------------------------------


class _Checks:
    """Compile a schema the way each arm's engine will: guided, vLLM's xgrammar and guidance backends."""

    def __init__(self, tokenizer, compact: bool):
        import llguidance
        import llguidance.hf
        import xgrammar as xgr

        import guided

        self.compact = compact
        self.guided = guided
        self.vocab = guided.Vocabulary.from_tokenizer(tokenizer)
        self.llguidance = llguidance
        self.ll_tokenizer = llguidance.hf.from_tokenizer(tokenizer, len(tokenizer))
        info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=len(tokenizer))
        # As vLLM's backend builds it: with its cache, xgrammar 0.2.8 refuses some schemas it compiles without
        self.xgr_compiler = xgr.GrammarCompiler(info, max_threads=8, cache_enabled=True)
        self.guided_seconds = []

    def guided_ok(self, text: str) -> bool:
        spec = self.guided.JsonSchema(text, whitespace="compact" if self.compact else "flexible")
        t0 = time.perf_counter()
        try:
            self.guided.compile(spec, self.vocab, timeout=10).matcher()
        except Exception:  # noqa: BLE001 - any refusal or failure excludes the schema
            return False
        finally:
            self.guided_seconds.append(time.perf_counter() - t0)
        return True

    def xgrammar_ok(self, text: str) -> bool:
        from vllm.sampling_params import SamplingParams, StructuredOutputsParams
        from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar

        try:
            validate_xgrammar_grammar(SamplingParams(structured_outputs=StructuredOutputsParams(json=text)))
            self.xgr_compiler.compile_json_schema(text, any_whitespace=not self.compact,
                                                  separators=(",", ":") if self.compact else None)
        except Exception:  # noqa: BLE001
            return False
        return True

    def guidance_ok(self, text: str) -> bool:
        from vllm.sampling_params import SamplingParams, StructuredOutputsParams
        from vllm.v1.structured_output.backend_guidance import serialize_guidance_grammar, validate_guidance_grammar
        from vllm.v1.structured_output.backend_types import StructuredOutputOptions

        try:
            validate_guidance_grammar(SamplingParams(structured_outputs=StructuredOutputsParams(json=text)),
                                      tokenizer=self.ll_tokenizer)
            grammar = serialize_guidance_grammar(StructuredOutputOptions.JSON, text, self.compact, False)
            matcher = self.llguidance.LLMatcher(self.ll_tokenizer, grammar, log_level=0)
            if matcher.is_error():
                return False
        except Exception:  # noqa: BLE001
            return False
        return True


def pick_requests(args, tokenizer):
    """The benchmark's requests: schemas in seeded-shuffle order that fit and compile everywhere."""
    rows = []
    with gzip.open(args.data, "rt") as f:
        for line in f:
            row = json.loads(line)
            rows.append((row["id"], row["schema"]))
    order = list(range(len(rows)))
    random.Random(args.seed).shuffle(order)
    checks = _Checks(tokenizer, args.whitespace == "compact")
    counts = defaultdict(int)
    picked = []
    for i in order:
        if len(picked) >= args.schemas:
            break
        schema_id, schema = rows[i]
        if not isinstance(schema, dict):
            counts["not an object"] += 1
            continue
        if args.additional_properties == "closed":
            from vllm.v1.structured_output.backend_guidance import process_for_additional_properties

            schema = process_for_additional_properties(schema)
        text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
        if len(text) > 6 * args.max_prompt_tokens:
            counts["prompt too long"] += 1
            continue
        prompt = tokenizer.apply_chat_template([{"role": "user", "content": INSTRUCTION + text}],
                                               add_generation_prompt=True, tokenize=False)
        ids = tokenizer(prompt, add_special_tokens=False).input_ids
        if len(ids) > args.max_prompt_tokens:
            counts["prompt too long"] += 1
            continue
        counts["examined"] += 1
        ok = True
        for name, check in (("guided", checks.guided_ok), ("xgrammar", checks.xgrammar_ok),
                            ("guidance", checks.guidance_ok)):
            if not check(text):
                counts[f"rejected by {name}"] += 1
                ok = False
        if not ok:
            continue
        picked.append({"id": schema_id, "schema": text, "prompt_ids": ids})
    counts["guided compile s (total)"] = round(sum(checks.guided_seconds), 2)
    return picked, dict(counts)


# -- one engine (child process) -------------------------------------------------------------------


class _Timers:
    """perf_counter accumulators around methods, keyed by a label."""

    def __init__(self):
        self.durations = defaultdict(list)

    def reset(self):
        self.durations.clear()

    def seconds(self):
        return {k: sum(v) for k, v in self.durations.items()}

    def wrap(self, owner, name, label):
        inner = getattr(owner, name)
        durations = self.durations
        clock = time.perf_counter

        def timed(*a, **k):
            t0 = clock()
            try:
                return inner(*a, **k)
            finally:
                durations[label].append(clock() - t0)

        setattr(owner, name, timed)


def _install_timers(timers: _Timers) -> None:
    import vllm.v1.worker.gpu_model_runner as runner_module
    from vllm.v1.structured_output import StructuredOutputManager

    from guided.integrations.vllm import GuidedLogitsProcessor

    timers.wrap(GuidedLogitsProcessor, "apply", "guided apply")
    timers.wrap(GuidedLogitsProcessor, "update_state", "guided update_state")
    timers.wrap(StructuredOutputManager, "grammar_bitmask", "builtin grammar_bitmask")
    timers.wrap(StructuredOutputManager, "accept_tokens", "builtin accept_tokens")
    timers.wrap(runner_module, "apply_grammar_bitmask", "builtin apply_grammar_bitmask")
    timers.wrap(runner_module.GPUModelRunner, "execute_model", "runner execute_model")
    timers.wrap(runner_module.GPUModelRunner, "sample_tokens", "runner sample_tokens")


def _params(arm, request, max_tokens, compact):
    from vllm.sampling_params import RequestOutputKind, SamplingParams, StructuredOutputsParams

    kw = dict(max_tokens=max_tokens, temperature=0.0, output_kind=RequestOutputKind.DELTA)
    if arm in ("xgrammar", "guidance"):
        kw["structured_outputs"] = StructuredOutputsParams(json=request["schema"])
    elif arm == "guided":
        kw["extra_args"] = {"guided_json": request["schema"],
                            "guided_whitespace": "compact" if compact else "flexible"}
    return SamplingParams(**kw)


def _run(engine, arm, requests, concurrency, max_tokens, compact, tag):
    """Run ``requests`` with at most ``concurrency`` in flight; per-request token times and texts."""
    records = {}
    queue = list(enumerate(requests))
    queue.reverse()
    inflight = 0
    steps, step_seconds = 0, 0.0
    clock = time.perf_counter
    start = clock()
    while queue or inflight:
        while queue and inflight < concurrency:
            i, request = queue.pop()
            rid = f"{tag}-{i}"
            records[rid] = {"index": i, "times": [], "text": [], "tokens": 0, "finish": None}
            engine.add_request(rid, {"prompt_token_ids": request["prompt_ids"]},
                               _params(arm, request, max_tokens, compact))
            inflight += 1
        t0 = clock()
        outputs = engine.step()
        t1 = clock()
        steps += 1
        step_seconds += t1 - t0
        for out in outputs:
            rec = records[out.request_id]
            completion = out.outputs[0]
            new = len(completion.token_ids)
            if new:
                rec["times"].extend([t1] * new)
                rec["tokens"] += new
            rec["text"].append(completion.text)
            if out.finished:
                rec["finish"] = completion.finish_reason
                inflight -= 1
    wall = clock() - start
    results = []
    for rec in sorted(records.values(), key=lambda r: r["index"]):
        times = rec["times"]
        tpot = (times[-1] - times[0]) / (len(times) - 1) if len(times) >= 2 else None
        results.append({"index": rec["index"], "tokens": rec["tokens"], "finish": rec["finish"],
                        "text": "".join(rec["text"]), "tpot": tpot})
    return {"wall": wall, "steps": steps, "step_seconds": step_seconds, "requests": results}


def child(job_path: str, out_path: str) -> None:
    """Start one engine, warm it, run its arms at every batch size, write the raw results."""
    with open(job_path) as f:
        job = json.load(f)
    timers = _Timers()
    _install_timers(timers)
    from vllm import LLM

    compact = job["whitespace"] == "compact"
    t0 = time.perf_counter()
    llm = LLM(model=job["model"], dtype="float32", enforce_eager=True, max_model_len=job["max_model_len"],
              max_num_seqs=max(job["batch_sizes"]), seed=0,
              structured_outputs_config={"backend": job["backend"], "disable_any_whitespace": compact})
    engine = llm.llm_engine
    started = time.perf_counter() - t0
    requests = job["requests"]
    top = max(job["batch_sizes"])
    log(f"[{job['backend']} engine] ready in {started:.0f} s; prefilling {len(requests)} prompts")
    t0 = time.perf_counter()
    _run(engine, "unconstrained", requests, top, 1, compact, "prefill")
    prefill = time.perf_counter() - t0
    profile = job.get("profile")
    arms_all = job["arms"]
    runs = []

    def timed_run(arm, b, subset, repeat):
        timers.reset()
        profiler = None
        if profile == f"{arm}:{'cold' if repeat == COLD else b}":
            import cProfile
            profiler = cProfile.Profile()
            profiler.enable()
        load = os.getloadavg()[0]
        result = _run(engine, arm, subset, b, job["max_tokens"], compact, f"{arm}-{b}-{repeat}")
        if profiler is not None:
            profiler.disable()
            _print_profile(profiler, job.get("profile_out"))
        apply = timers.durations.get("guided apply", [])
        result.update(arm=arm, batch=b, repeat=repeat, timers=timers.seconds(), profiled=profiler is not None,
                      load=[load, os.getloadavg()[0]],
                      guided_apply_ms={"p50": 1000 * percentile(apply, 50), "p99": 1000 * percentile(apply, 99),
                                       "max": 1000 * max(apply)} if apply else None)
        tokens = sum(r["tokens"] for r in result["requests"])
        log(f"[{job['backend']} engine] {'cold' if repeat == COLD else 'B=' + str(b):<5} {arm:<13} "
            f"{tokens / result['wall']:7.1f} tok/s, {result['steps']} steps, {result['wall']:.1f} s, "
            f"load {load:.1f}")
        runs.append(result)

    # The cold pass: every schema served for the first time (compile, first visits of states) at the largest B
    for arm in arms_all:
        timed_run(arm, top, requests, COLD)
    turn = 0
    for rep in range(job["repeats"]):
        for b in job["batch_sizes"]:
            subset = requests[: job["requests_at_1"]] if b == 1 else requests
            k = turn % len(arms_all)
            turn += 1
            for arm in arms_all[k:] + arms_all[:k]:
                timed_run(arm, b, subset, rep)
    with open(out_path, "w") as f:
        json.dump({"backend": job["backend"], "engine_start_s": started, "prefill_s": prefill, "runs": runs}, f)


def _print_profile(profiler, path):
    import io
    import pstats

    if path:
        profiler.dump_stats(path)
    for key in ("cumulative", "tottime"):
        buf = io.StringIO()
        pstats.Stats(profiler, stream=buf).sort_stats(key).print_stats(30)
        log(f"--- cProfile, sorted by {key} ---")
        log(buf.getvalue())


# -- aggregation and the table (parent) ------------------------------------------------------------


def _validator(schema_text):
    import jsonschema

    schema = json.loads(schema_text)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _valid(validator, text):
    try:
        instance = json.loads(text)
    except ValueError:
        return False
    try:
        return validator.is_valid(instance)
    except Exception:  # noqa: BLE001 - an unresolvable $ref and the like: counted as invalid
        return False


def summarize(run, requests, validators):
    """One row of the table from one arm's run."""
    reqs = run["requests"]
    n = len(reqs)
    tokens = sum(r["tokens"] for r in reqs)
    finished = [r for r in reqs if r["finish"] == "stop"]
    cut = sum(1 for r in reqs if r["finish"] == "length")
    valid_finished = sum(1 for r in finished if _valid(validators[r["index"]], r["text"]))
    valid_all = valid_finished
    tpots = [r["tpot"] for r in reqs if r["tpot"] is not None]
    t = run["timers"]
    if run["arm"] == "guided":
        constraint = t.get("guided apply", 0.0) + t.get("guided update_state", 0.0)
    elif run["arm"] in ("xgrammar", "guidance"):
        constraint = (t.get("builtin grammar_bitmask", 0.0) + t.get("builtin accept_tokens", 0.0)
                      + t.get("builtin apply_grammar_bitmask", 0.0))
    else:
        constraint = t.get("guided apply", 0.0) + t.get("guided update_state", 0.0) + \
            t.get("builtin grammar_bitmask", 0.0) + t.get("builtin accept_tokens", 0.0)
    runner = t.get("runner execute_model", 0.0) + t.get("runner sample_tokens", 0.0)
    return {
        "engine": run["engine"], "arm": run["arm"], "batch": run["batch"], "repeat": run["repeat"],
        "requests": n, "output_tokens": tokens, "wall_s": run["wall"],
        "tokens_per_s": tokens / run["wall"],
        "tpot_p50_ms": 1000 * percentile(tpots, 50) if tpots else None,
        "tpot_p99_ms": 1000 * percentile(tpots, 99) if tpots else None,
        "finished": len(finished) / n, "cut": cut / n,
        "valid_of_finished": valid_finished / len(finished) if finished else None,
        "valid_of_all": valid_all / n,
        "invalid_finished_ids": [requests[r["index"]]["id"] for r in finished
                                 if not _valid(validators[r["index"]], r["text"])],
        "steps": run["steps"], "step_ms": 1000 * run["step_seconds"] / run["steps"],
        "constraint_s": constraint, "constraint_share": constraint / run["step_seconds"],
        "runner_share": runner / run["step_seconds"],
        "constraint_ms_per_step": 1000 * constraint / run["steps"],
        "guided_apply_ms": run["guided_apply_ms"], "load": run["load"],
        "timers": t, "profiled": run["profiled"],
    }


def _fmt(x, spec):
    return "-" if x is None else format(x, spec)


def print_table(rows, baselines):
    print("| pass | B | engine | arm | req | out tokens | tok/s | vs unconstr. | TPOT p50 / p99 ms | finished | cut | "
          "valid / finished | step ms | constraint ms / step | constraint share | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: (r["repeat"] != COLD, r["batch"], r["repeat"], r["engine"] != "xgrammar",
                                         ARMS.index(r["arm"]))):
        base = baselines.get((r["engine"], r["batch"], r["repeat"]))
        ratio = r["tokens_per_s"] / base if base else None
        constraint = r["arm"] != "unconstrained"
        print(f"| {'cold' if r['repeat'] == COLD else r['repeat']} | {r['batch']} | {r['engine']} | {r['arm']} | "
              f"{r['requests']} | {r['output_tokens']} | {r['tokens_per_s']:.1f} | {_fmt(ratio, '.2f')} | "
              f"{_fmt(r['tpot_p50_ms'], '.1f')} / {_fmt(r['tpot_p99_ms'], '.1f')} | {r['finished']:.0%} | "
              f"{r['cut']:.0%} | {_fmt(r['valid_of_finished'], '.0%')} | {r['step_ms']:.1f} | "
              f"{_fmt(r['constraint_ms_per_step'] if constraint else None, '.2f')} | "
              f"{_fmt(r['constraint_share'] if constraint else None, '.2%')} | {r['load'][0]:.1f} |")


def check_targets(rows):
    """The issue's targets, as (description, met) pairs (the cold pass is reported, not judged)."""
    out = []
    by = {(r["arm"], r["batch"], r["repeat"]): r for r in rows if r["engine"] == "xgrammar"}
    batches = sorted({r["batch"] for r in rows if r["repeat"] != COLD})
    for rep in sorted({r["repeat"] for r in rows}):
        for b in batches:
            g, x = by.get(("guided", b, rep)), by.get(("xgrammar", b, rep))
            if g and x:
                label = "cold pass" if rep == COLD else f"repeat {rep}"
                out.append((f"B={b} ({label}): guided {g['tokens_per_s']:.1f} tok/s >= xgrammar "
                            f"{x['tokens_per_s']:.1f} ({g['tokens_per_s'] / x['tokens_per_s']:.2f}x)"
                            + (" [informational]" if rep == COLD else ""),
                            g["tokens_per_s"] >= x["tokens_per_s"]))
    guided = [r for r in rows if r["arm"] == "guided"]
    if guided:
        bad = sorted({i for r in guided for i in r["invalid_finished_ids"]})
        out.append((f"every finished guided output valid (invalid: {bad or 'none'})", not bad))
        top = max(batches)
        for r in guided:
            if r["batch"] == top and r["repeat"] != COLD and not r["profiled"]:
                out.append((f"guided's share of step time at B={top} (repeat {r['repeat']}): "
                            f"{r['constraint_share']:.2%} <= 5%", r["constraint_share"] <= 0.05))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--schemas", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-sizes", default="1,8,32")
    ap.add_argument("--requests-at-1", type=int, default=16, help="requests run at B=1 (the first N)")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--max-prompt-tokens", type=int, default=640)
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--whitespace", choices=("compact", "flexible"), default="compact")
    ap.add_argument("--additional-properties", choices=("closed", "as-given"), default="closed",
                    help="closed: every arm gets the schemas with additionalProperties false where absent")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--torch-threads", type=int, default=1,
                    help="OMP_NUM_THREADS of the engine process (a served vLLM CPU worker here runs torch on 1)")
    ap.add_argument("--profile", default=None, help="ARM:B to run under cProfile, e.g. guided:32")
    ap.add_argument("--profile-out", default=None, help="where to dump the cProfile stats")
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--out", default=None, help="write every number (and the outputs) as JSON here")
    ap.add_argument("--child", nargs=2, metavar=("JOB", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return

    arms = [a for a in args.arms.split(",") if a]
    unknown = sorted(set(arms) - set(ARMS))
    if unknown:
        ap.error(f"unknown arms {unknown}; choose from {', '.join(ARMS)}")
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    began = time.time()

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    t0 = time.perf_counter()
    requests, selection = pick_requests(args, tokenizer)
    log(f"picked {len(requests)} schemas in {time.perf_counter() - t0:.0f} s: {selection}")
    if not requests:
        sys.exit("no schema fits")

    engines = []
    first = [a for a in ("unconstrained", "xgrammar", "guided") if a in arms]
    if first:
        engines.append(("xgrammar", first))
    if "guidance" in arms:
        engines.append(("guidance", [a for a in ("guidance", "unconstrained") if a in arms]))
    max_prompt = max(len(r["prompt_ids"]) for r in requests)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend, engine_arms in engines:
            job = {"model": args.model, "backend": backend, "arms": engine_arms, "requests": requests,
                   "batch_sizes": batch_sizes, "requests_at_1": args.requests_at_1,
                   "max_tokens": args.max_tokens, "max_model_len": max_prompt + args.max_tokens + 16,
                   "whitespace": args.whitespace, "repeats": args.repeats, "profile": args.profile,
                   "profile_out": args.profile_out}
            job_path, out_path = os.path.join(tmp, f"{backend}.job.json"), os.path.join(tmp, f"{backend}.out.json")
            with open(job_path, "w") as f:
                json.dump(job, f)
            log(f"starting the {backend} engine for {', '.join(engine_arms)}")
            env = dict(os.environ, OMP_NUM_THREADS=str(args.torch_threads))
            subprocess.run([sys.executable, os.path.abspath(__file__), "--child", job_path, out_path],
                           check=True, cwd=ROOT, env=env)
            with open(out_path) as f:
                results.append(json.load(f))

    validators = [_validator(r["schema"]) for r in requests]
    rows = []
    for res in results:
        for run in res["runs"]:
            run["engine"] = res["backend"]
            rows.append(summarize(run, requests, validators))
    baselines = {(r["engine"], r["batch"], r["repeat"]): r["tokens_per_s"] for r in rows if r["arm"] == "unconstrained"}
    print(f"\nvLLM CPU, SmolLM2-135M-Instruct float32, greedy, {len(requests)} MaskBench schemas "
          f"(seed {args.seed}), max_tokens {args.max_tokens}, whitespace {args.whitespace}, additional properties "
          f"{args.additional_properties}, {args.requests_at_1} requests at B=1\n")
    print_table(rows, baselines)
    print()
    for res in results:
        print(f"- {res['backend']} engine: start {res['engine_start_s']:.0f} s, prefill of all prompts "
              f"{res['prefill_s']:.1f} s")
    for r in rows:
        if r["arm"] == "guided" and r["guided_apply_ms"]:
            a = r["guided_apply_ms"]
            print(f"- guided apply per step, {'cold' if r['repeat'] == COLD else 'B=' + str(r['batch'])}: "
                  f"p50 {a['p50']:.2f} ms, p99 {a['p99']:.2f} ms, max {a['max']:.1f} ms")
    print(f"- schemas: {selection}")
    print("\nTargets:")
    targets = check_targets(rows)
    for text, met in targets:
        print(f"- [{'x' if met else ' '}] {text}")
    elapsed = time.time() - began
    print(f"\ntotal {elapsed / 60:.1f} min")
    if args.out:
        outputs = {f"{run['engine']}/{run['arm']}/{run['batch']}/{run['repeat']}": [x["text"] for x in run["requests"]]
                   for res in results for run in res["runs"]}
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "date": time.strftime("%Y-%m-%d %H:%M"), "selection": selection,
                       "schema_ids": [r["id"] for r in requests],
                       "engines": [{k: v for k, v in res.items() if k != "runs"} for res in results],
                       "rows": rows, "targets": [{"target": t, "met": m} for t, m in targets],
                       "outputs": outputs, "elapsed_s": elapsed}, f, indent=1)


if __name__ == "__main__":
    main()
