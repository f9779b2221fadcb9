"""Fresh-process start-up: import, tokenizer tables, compile a small schema, first mask.

What a user meets when a new process serves its first constrained request. Each
sample is a new Python process (``sys.executable``), run ``--runs`` times per engine,
engines interleaved run by run, that does, timed with ``time.perf_counter`` inside
the process:

* **import**: ``import guided`` / ``import xgrammar`` / ``import llguidance`` (+ its
  ``hf`` and ``torch`` helpers); torch and transformers are imported before the
  clock starts, since every engine needs them and the model would load them anyway;
* **tokenizer**: the engine's per-tokenizer tables from the already loaded SmolLM2
  tokenizer (``guided.Vocabulary.from_tokenizer``, ``xgrammar.TokenizerInfo
  .from_huggingface``, ``llguidance.hf.from_tokenizer``);
* **compile**: a small object schema (three typed properties, compact separators;
  XGrammar without its compile cache, as in ``maskbench.py``);
* **first mask**: a matcher and its first bitmask fill.

A small first compile in a fresh process runs without numba (its Python twins) and
leaves numba to load in a background thread (``guided.fsm.kernels.use``); the script
also reports when that load ends, after the first mask.

The tokenizer itself (SmolLM2's, from the folder ``guided.models.load_tokenizer``
converts it into, by ``transformers.AutoTokenizer``) loads before the clock too.
guided's numba kernels are compiled on the first run after an install and cached on
disk (``NUMBA_CACHE_DIR``, default ``__pycache__``), and Python's bytecode is cached
as an installed package has it (``pip install`` writes the ``.pyc`` files): the
children run with bytecode writes on, into a private ``PYTHONPYCACHEPREFIX``, whatever
``PYTHONDONTWRITEBYTECODE`` says here. The script runs one untimed process per engine
first, so the timed runs find both caches warm. Reported: the median
of each phase and of the total (import to first mask), and guided's total over each
peer's.

Usage::

    python benchmarks/cold_start.py [--runs 7] [--engines guided,xgrammar,llguidance]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 40},
                                           "age": {"type": "integer", "minimum": 0},
                                           "tags": {"type": "array", "items": {"type": "string"}}},
          "required": ["name", "age"], "additionalProperties": False}

CHILD = r'''
import json, sys, time
import torch, transformers  # noqa: F401  (loaded by any serving process before a grammar engine)
sys.path.insert(0, ROOT)
engine, schema, tokenizer_dir = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
hf = transformers.AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)
t0 = time.perf_counter()
if engine == "guided":
    import guided
    t1 = time.perf_counter()
    vocab = guided.Vocabulary.from_tokenizer(hf)
    t2 = time.perf_counter()
    guide = guided.compile(guided.JsonSchema(schema, whitespace="compact"), vocab)
    t3 = time.perf_counter()
    bitmask = guided.allocate_token_bitmask(1, vocab.size)
    guide.matcher().fill_next_token_bitmask(bitmask, 0)
elif engine == "xgrammar":
    import xgrammar
    t1 = time.perf_counter()
    info = xgrammar.TokenizerInfo.from_huggingface(hf, stop_token_ids=[hf.eos_token_id])
    t2 = time.perf_counter()
    compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    compiled = compiler.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(",", ":"))
    t3 = time.perf_counter()
    bitmask = xgrammar.allocate_token_bitmask(1, info.vocab_size)
    xgrammar.GrammarMatcher(compiled).fill_next_token_bitmask(bitmask, 0)
else:
    import llguidance, llguidance.hf, llguidance.torch
    t1 = time.perf_counter()
    tok = llguidance.hf.from_tokenizer(hf, eos_token=hf.eos_token_id)
    t2 = time.perf_counter()
    grammar = llguidance.LLMatcher.grammar_from_json_schema(schema, defaults={"whitespace_flexible": False})
    m = llguidance.LLMatcher(tok, grammar, log_level=0)
    t3 = time.perf_counter()
    bitmask = llguidance.torch.allocate_token_bitmask(1, tok.vocab_size)
    llguidance.torch.fill_next_token_bitmask(m, bitmask, 0)
t4 = time.perf_counter()
if engine == "guided":  # a small first compile leaves numba to a background thread: when it is done
    from guided.fsm import kernels
    kernels.load()
t5 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "tokenizer": t2 - t1, "compile": t3 - t2, "first mask": t4 - t3,
                  "total": t4 - t0, "after": t5 - t4}))
'''.replace("ROOT", repr(ROOT))

PHASES = ("import", "tokenizer", "compile", "first mask", "total")


def run_one(engine: str, tokenizer_dir: str, pycache: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONPYCACHEPREFIX=pycache)
    out = subprocess.run([sys.executable, "-c", CHILD, engine, json.dumps(SCHEMA), tokenizer_dir], capture_output=True,
                         text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--engines", default="guided,xgrammar,llguidance")
    args = ap.parse_args(argv)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    sys.path.insert(0, ROOT)
    from guided.models import default_cache_dir, load_tokenizer

    load_tokenizer()  # (converts the default model's tokenizer once, into its cache folder)
    tokenizer_dir = str(default_cache_dir())
    samples: dict[str, list[dict]] = {e: [] for e in engines}
    with tempfile.TemporaryDirectory(prefix="cold_start_pyc_") as pycache:
        for e in engines:  # untimed: kernels compiled and cached, bytecode written, files in the page cache
            print(f"warm-up {e}", file=sys.stderr)
            run_one(e, tokenizer_dir, pycache)
        for k in range(args.runs):
            for e in engines:
                samples[e].append(run_one(e, tokenizer_dir, pycache))
            print(f"run {k + 1}/{args.runs}", file=sys.stderr)
    med = {e: {p: statistics.median(s[p] for s in samples[e]) * 1e3 for p in PHASES} for e in engines}
    print(f"## cold_start.py: fresh process, median of {args.runs} runs, ms\n")
    print("| engine | " + " | ".join(PHASES) + " |")
    print("|---" * (len(PHASES) + 1) + "|")
    for e in engines:
        print(f"| {e} | " + " | ".join(f"{med[e][p]:.1f}" for p in PHASES) + " |")
    if "guided" in med:
        after = statistics.median(s["after"] for s in samples["guided"]) * 1e3
        print(f"\nguided: numba (its kernels for later masks) finished loading {after:.0f} ms after the first mask, "
              "in a background thread")
        for e in engines:
            if e != "guided":
                print(f"\nguided total / {e} total: {med['guided']['total'] / med[e]['total']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
