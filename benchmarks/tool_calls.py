"""Tool calls: BFCL v4 accuracy of the default model under ``guided.ToolCalls``, and mask time against XGrammar.

Two parts, in one run (issue 64):

**BFCL.** The Berkeley Function Calling Leaderboard's single-turn Python categories
``simple_python``, ``multiple``, ``parallel``, ``parallel_multiple`` and ``irrelevance``,
from the PyPI package ``bfcl-eval`` (benchmark-only, never a project dependency)::

    pip install --no-deps bfcl-eval==2026.3.23
    pip install --no-deps tenacity tree_sitter==0.21.3 tree-sitter-java==0.21.0 tree-sitter-javascript==0.21.4

The second line is what ``bfcl_eval.model_handler.utils`` needs to import. The AST
checker imports ``bfcl_eval.constants.model_config``, which pulls in every vendor SDK
(openai, anthropic, mistralai, cohere, google-genai, boto3, ...); where that import
fails, the script puts a one-entry stand-in for that module in ``sys.modules`` before it
imports the checker. The checker reads only ``underscore_to_dot`` from it.

What comes from bfcl-eval: the entries (``bfcl_eval.utils.load_dataset_entry``, with the
language hint for the prompt and without it for the checker, as bfcl-eval does), the
possible answers (``load_ground_truth_entry``), the function docs turned into
OpenAI-style tools (``model_handler.utils.convert_to_tool(functions, GORILLA_TO_OPENAPI,
ModelStyle.OPENAI_COMPLETIONS)``: BFCL's ``dict`` / ``float`` / ``tuple`` / ``any`` types
mapped to JSON Schema, ``.`` in names replaced by ``_``), and the verdict:
``ast_checker(function_docs, decoded, ground_truth, Language.PYTHON, category, model)``
with the calls decoded as bfcl-eval's OpenAI function-calling handler decodes them
(``[{name: json.loads(arguments)}]``, then ``is_function_calling_format_output``) and
``model`` an OpenAI function-calling entry (``underscore_to_dot``: names compared with
``.`` read as ``_``). ``irrelevance`` has no possible answers: a response is correct
when it makes no call, as in bfcl-eval's relevance runner.

The model: ``guided.models.load_default_model()`` (SmolLM2-135M-Instruct, CPU, float32),
greedy, ``--max-new-tokens`` (160). Its chat template has no tool support, so every arm
gets the same system prompt: ``ToolCalls(tools, tool_choice="auto", parallel=True,
format="hermes").system_prompt()``; the user message is the entry's question. Arms:

* ``unconstrained``: no spec; the calls are what ``ToolCalls(tools,
  format="hermes").parse(text)`` finds in the text;
* ``required``: ``ToolCalls(tools, tool_choice="required", parallel=True, format="hermes")``;
* ``auto``: ``ToolCalls(tools, tool_choice="auto", parallel=True, format="hermes")``;
* ``required-one`` (not run unless named in ``--arms``): ``ToolCalls(tools,
  tool_choice="required", parallel=False, format="hermes")``, what a user who wants one
  call asks for (OpenAI's ``parallel_tool_calls: false``); run on the one-call categories.

``irrelevance`` runs ``unconstrained`` and ``auto`` only. Each item runs its arms in a
fresh random order (seeded). A call is **well-formed** when its name is one of the
tools and its arguments validate against that tool's ``parameters`` (``jsonschema``).
Reported per category and arm: the share of responses with at least one well-formed
call (``irrelevance``: the share with no call), the AST accuracy by bfcl-eval's checker
(with a Wilson 95% interval), the share cut by ``--max-new-tokens``, for ``simple_python``
and ``multiple`` (one call expected) the AST accuracy of the first call alone (for the
constrained arms, the call ``parallel=False`` gives under greedy decoding), mean output tokens,
tokens/s (output tokens over the model's prefill + decode time), guided's compile time
and mask time per token; calls whose arguments fail their schema (none expected under a
spec). Targets stated against the figures: 100% well-formed with ``required``; AST
accuracy above ``unconstrained`` in every category; ``irrelevance`` under ``auto`` no
worse than ``unconstrained``.

Sampling: ``--per-category`` entries per category (15), drawn with ``--seed`` (0) and
kept in file order. Progress goes to stderr, one line per generation; every record
(question, text, calls, verdict, stats) goes to ``--out`` (rewritten after each category).

**Masks.** One 10-tool spec: ``guided.ToolCalls(tools, format="hermes")`` (``auto``:
text with calls triggered by ``<tool_call>``) against XGrammar's structural tag for the
same tools with the same syntax (``triggered_tags``, trigger ``<tool_call>``, per tool a
tag with begin ``<tool_call>\\n{"name": "NAME", "arguments": ``, content ``json_schema``
= the tool's parameters, end ``}\\n</tool_call>``), compiled by
``GrammarCompiler(TokenizerInfo.from_huggingface(tokenizer), max_threads=1,
cache_enabled=False).compile_structural_tag``. The tools: ``--mask-tools`` (10) drawn
with ``--seed`` among the distinct functions named in the possible answers of BFCL's
``multiple`` and ``parallel_multiple`` entries, each with the arguments of its first
answer (each parameter's first non-empty value) that validates against the converted
schema. The token sequences (SmolLM2 tokenizer, no special tokens, then EOS): per
tool, a line of free text, the tool's call (arguments written with ``json.dumps``'
default separators), a closing line; and one sequence with every call in a row,
separated by ``\\n``. Both matchers walk every sequence; a **step** fills each engine's
one-row bitmask (one timed sample per engine, the engines in a fresh random order
each step), checks that the next token is allowed in both and compares the two masks
(untimed), then both accept the token. **first** is the walk right after compile (masks
built on first visit where an engine builds them lazily), **repeat** the same walk with
fresh matchers on the same compiled grammars. Compile time is the median of
``--compile-repeats`` (3) cold compiles (guided's caches cleared before each); a small
one-tool spec is compiled and walked first in both engines, so per-process set-up is
left out. Reported: compile ms, p50 / p99 / mean µs per mask per engine and pass, the
ratio guided / XGrammar, the steps whose masks differ (on ordinary tokens, and on the
tokenizer's added tokens apart) with an example of each kind of difference.
``--mask-only`` runs just this part (seconds); ``--skip-mask`` skips it.

Usage::

    python benchmarks/tool_calls.py [--per-category 15] [--seed 0] [--max-new-tokens 160]
        [--categories simple_python,multiple,parallel,parallel_multiple,irrelevance]
        [--arms unconstrained,required,auto[,required-one]] [--mask-only | --skip-mask] [--mask-tools 10]
        [--compile-repeats 3] [--out RESULT.json]

The defaults take about 35 minutes on a 2-core machine (the mask part a few seconds).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import copy
import importlib.metadata
import json
import math
import platform
import random
import subprocess
import sys
import time
import types

CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")
#: Categories whose answer is one call: there the verdict on the first call alone is also
#: reported; under a spec it is the call ``parallel=False`` gives under greedy decoding
#: (the masks, and so the tokens, are the same up to the end of the first call).
ONE_CALL = ("simple_python", "multiple")
ARMS = ("unconstrained", "required", "auto", "required-one")
DEFAULT_ARMS = ARMS[:3]
#: Each arm's ``ToolCalls`` settings (``tool_choice``, ``parallel``); ``unconstrained`` has none.
ARM_SPECS = {"required": ("required", True), "auto": ("auto", True), "required-one": ("required", False)}
#: A bfcl-eval model entry for OpenAI-style function calling: its ``underscore_to_dot``
#: makes the checker compare ``math.factorial`` with the tool name ``math_factorial``.
CHECKER_MODEL = "gpt-4.1-nano-2025-04-14-FC"
CALL_HEAD = '<tool_call>\n{{"name": {name}, "arguments": '
CALL_END = "}\n</tool_call>"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an already sorted, non-empty list."""
    n = len(sorted_values)
    k = max(0, min(n - 1, math.ceil(p / 100.0 * n) - 1))
    return sorted_values[k]


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a proportion k / n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


# --------------------------------------------------------------------------- bfcl-eval


def load_bfcl() -> types.SimpleNamespace:
    """bfcl-eval's loaders, converter and AST checker (the checker's vendor imports stood in for)."""
    import bfcl_eval.constants.model_config  # noqa: F401  (probe: real where the vendor SDKs import)

    return _bfcl_pieces()


def _bfcl_pieces() -> types.SimpleNamespace:
    """Import the pieces of bfcl-eval the script uses."""
    from bfcl_eval.constants.enums import Language, ModelStyle
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    from bfcl_eval.model_handler.utils import convert_to_tool
    from bfcl_eval.utils import is_function_calling_format_output, load_dataset_entry, load_ground_truth_entry

    return types.SimpleNamespace(
        Language=Language, ModelStyle=ModelStyle, GORILLA_TO_OPENAPI=GORILLA_TO_OPENAPI, ast_checker=ast_checker,
        convert_to_tool=convert_to_tool, is_function_calling_format_output=is_function_calling_format_output,
        load_dataset_entry=load_dataset_entry, load_ground_truth_entry=load_ground_truth_entry)


def bfcl() -> types.SimpleNamespace:
    """bfcl-eval's pieces; ``stand_in`` says whether ``model_config`` is the stand-in."""
    name = "bfcl_eval.constants.model_config"
    try:
        pieces = load_bfcl()
        pieces.stand_in = False
    except ImportError:
        stub = types.ModuleType(name)
        stub.MODEL_CONFIG_MAPPING = {CHECKER_MODEL.replace("_", "/"): types.SimpleNamespace(underscore_to_dot=True)}
        sys.modules[name] = stub
        pieces = _bfcl_pieces()
        pieces.stand_in = True
    return pieces


def to_tools(b, functions: list[dict]) -> list[dict]:
    """BFCL function docs as OpenAI-style tools, by bfcl-eval's own converter."""
    return b.convert_to_tool(functions, b.GORILLA_TO_OPENAPI, b.ModelStyle.OPENAI_COMPLETIONS)


def validators(tools: list[dict]) -> dict:
    """A jsonschema validator per tool name, for its ``parameters``."""
    import jsonschema

    out = {}
    for tool in tools:
        fn = tool.get("function", tool)
        schema = fn.get("parameters", {"type": "object"})
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        out[fn["name"]] = cls(schema)
    return out


def well_formed(call: dict, checks: dict) -> bool:
    """The call names a tool and its arguments validate against that tool's parameters."""
    fn = call["function"]
    check = checks.get(fn["name"])
    if check is None:
        return False
    try:
        args = json.loads(fn["arguments"])
    except (TypeError, ValueError):
        return False
    return check.is_valid(args)


def ast_verdict(b, category: str, calls: list[dict], functions: list[dict], ground_truth) -> dict:
    """bfcl-eval's verdict on the calls (OpenAI-shaped), as its FC handler and runner reach it."""
    if category == "irrelevance":
        if calls:
            return {"valid": False, "error_type": "irrelevance_error:decoder_success"}
        return {"valid": True}
    try:
        decoded = [{c["function"]["name"]: json.loads(c["function"]["arguments"])} for c in calls]
    except (TypeError, ValueError) as exc:
        return {"valid": False, "error_type": "ast_decoder:decoder_failed", "error": [str(exc)]}
    if not calls:
        return {"valid": False, "error_type": "ast_decoder:decoder_failed", "error": ["no call"]}
    if not b.is_function_calling_format_output(decoded):
        return {"valid": False, "error_type": "ast_decoder:decoder_wrong_output_format"}
    result = b.ast_checker(copy.deepcopy(functions), decoded, copy.deepcopy(ground_truth), b.Language.PYTHON,
                           category, CHECKER_MODEL)
    return {"valid": bool(result["valid"]), "error_type": result.get("error_type"), "error": result.get("error")}


def sample_entries(b, category: str, n: int, seed: int) -> list[dict]:
    """``n`` entries of a category (file order), each with its tools, checker docs and answer."""
    prompted = b.load_dataset_entry(category)
    plain = {e["id"]: e for e in b.load_dataset_entry(category, include_prereq=False,
                                                      include_language_specific_hint=False)}
    answers = {} if category == "irrelevance" else {a["id"]: a["ground_truth"]
                                                     for a in b.load_ground_truth_entry(category)}
    rng = random.Random(f"{seed}:{category}")
    picked = sorted(rng.sample(range(len(prompted)), min(n, len(prompted))))
    out = []
    for i in picked:
        e = prompted[i]
        turn = e["question"][0]
        out.append({"id": e["id"], "question": turn[-1]["content"], "tools": to_tools(b, e["function"]),
                    "functions": plain[e["id"]]["function"], "ground_truth": answers.get(e["id"])})
    return out


def run_item(b, guided, model, tokenizer, category: str, entry: dict, arm: str, max_new_tokens: int) -> dict:
    """One generation and its verdicts."""
    tools = entry["tools"]
    system = guided.ToolCalls(tools, tool_choice="auto", parallel=True, format="hermes").system_prompt()
    spec = None
    if arm in ARM_SPECS:
        choice, parallel = ARM_SPECS[arm]
        spec = guided.ToolCalls(tools, tool_choice=choice, parallel=parallel, format="hermes")
    rec = {"category": category, "id": entry["id"], "arm": arm}
    t0 = time.perf_counter()
    try:
        r = guided.generate(model, tokenizer, entry["question"], spec, system=system, max_new_tokens=max_new_tokens)
    except Exception as exc:  # noqa: BLE001  (a crash is a finding: record it, go on)
        rec.update(error=f"{type(exc).__name__}: {exc}", wall_s=time.perf_counter() - t0, calls=[],
                   well_formed=False, n_calls=0, n_invalid_calls=0, ast={"valid": False, "error_type": "crash"},
                   finish_reason="crash", new_tokens=0, stats={})
        if category in ONE_CALL:
            rec["ast_first"] = rec["ast"]
        return rec
    if spec is None:
        _, calls = guided.ToolCalls(tools, format="hermes").parse(r.text)
    else:
        calls = r.tool_calls or []
    checks = validators(tools)
    good = [well_formed(c, checks) for c in calls]
    rec.update(text=r.text, calls=[c["function"] for c in calls], finish_reason=r.finish_reason,
               new_tokens=len(r.token_ids), stats=r.stats.as_dict(), wall_s=time.perf_counter() - t0,
               n_calls=len(calls), n_invalid_calls=good.count(False), well_formed=any(good))
    rec["ast"] = ast_verdict(b, category, calls, entry["functions"], entry["ground_truth"])
    if category in ONE_CALL:
        rec["ast_first"] = ast_verdict(b, category, calls[:1], entry["functions"], entry["ground_truth"])
    return rec


def summarise(records: list[dict]) -> dict:
    """Per-arm figures of one category's records."""
    n = len(records)
    if n == 0:
        return {}
    category = records[0]["category"]
    ok = sum(r["ast"]["valid"] for r in records)
    lo, hi = wilson(ok, n)
    fine = [r for r in records if "error" not in r]
    model_s = sum(r["stats"]["prefill_s"] + r["stats"]["decode_s"] for r in fine)
    tokens = sum(r["new_tokens"] for r in fine)
    mask_tokens = sum(r["new_tokens"] for r in fine if r["arm"] != "unconstrained")
    mask_s = sum(r["stats"]["mask_s"] for r in fine if r["arm"] != "unconstrained")
    return {
        "n": n,
        "well_formed": sum((r["n_calls"] == 0) if category == "irrelevance" else r["well_formed"]
                           for r in records) / n,
        "ast": ok / n, "ast_ci": [lo, hi],
        "ast_first": (sum(r["ast_first"]["valid"] for r in records) / n
                      if all("ast_first" in r for r in records) else None),
        "cut": sum(r["finish_reason"] == "length" for r in records) / n,
        "mean_tokens": tokens / max(1, len(fine)),
        "tokens_per_s": tokens / model_s if model_s else 0.0,
        "compile_s_mean": sum(r["stats"].get("compile_s", 0.0) for r in fine) / max(1, len(fine)),
        "mask_us_per_token": 1e6 * mask_s / mask_tokens if mask_tokens else None,
        "invalid_calls": sum(r["n_calls"] and r["n_invalid_calls"] for r in records),
        "calls": sum(r["n_calls"] for r in records),
        "crashes": sum("error" in r for r in records),
        "error_types": _count(r["ast"].get("error_type") for r in records if not r["ast"]["valid"]),
    }


def _count(items) -> dict:
    out: dict = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def run_bfcl(args, b, out: dict) -> dict:
    import guided
    import guided.models

    model, tokenizer = guided.models.load_default_model(verbose=False)
    arms = [a for a in args.arms.split(",") if a]
    results: dict = {}
    out["records"] = records = []
    started = time.perf_counter()
    for category in [c for c in args.categories.split(",") if c]:
        entries = sample_entries(b, category, args.per_category, args.seed)
        cat_arms = [a for a in arms if not (category == "irrelevance" and a.startswith("required"))
                    and not (a == "required-one" and category not in ONE_CALL)]
        rng = random.Random(f"{args.seed}:{category}:order")
        by_arm: dict = {a: [] for a in cat_arms}
        for i, entry in enumerate(entries, 1):
            order = list(cat_arms)
            rng.shuffle(order)
            for arm in order:
                rec = run_item(b, guided, model, tokenizer, category, entry, arm, args.max_new_tokens)
                by_arm[arm].append(rec)
                records.append(rec)
                got = by_arm[arm]
                acc = sum(r["ast"]["valid"] for r in got) / len(got)
                note = f" ERROR {rec['error']}" if "error" in rec else ""
                log(f"[{category}] {arm:<13} {i}/{len(entries)} acc {acc:.2f} calls {rec['n_calls']} "
                    f"{rec['new_tokens']} tok {rec['finish_reason']} {rec['wall_s']:.1f} s "
                    f"({(time.perf_counter() - started) / 60:.1f} min){note}")
        results[category] = {a: summarise(by_arm[a]) for a in cat_arms}
        out["bfcl"] = results
        if args.out:
            _write(args.out, out)
    return results


def bfcl_tables(results: dict, arms: list[str]) -> str:
    lines = ["### BFCL v4, per category and arm", "",
             ("| category | arm | n | well-formed (irrelevance: no call) | AST accuracy (95% CI) | cut | "
              "AST, first call only | mean out tokens | tokens/s | mask µs / token | schema-invalid calls |"),
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for category, by_arm in results.items():
        for arm in arms:
            s = by_arm.get(arm)
            if not s:
                continue
            mask = "-" if s["mask_us_per_token"] is None else f"{s['mask_us_per_token']:.0f}"
            lo, hi = s["ast_ci"]
            first = "-" if s.get("ast_first") is None else f"{s['ast_first']:.0%}"
            lines.append(f"| {category} | {arm} | {s['n']} | {s['well_formed']:.0%} | {s['ast']:.0%} "
                         f"({lo:.0%}-{hi:.0%}) | {s['cut']:.0%} | {first} | {s['mean_tokens']:.1f} | "
                         f"{s['tokens_per_s']:.1f} | {mask} | {s['invalid_calls']} of {s['calls']} |")
    lines += ["", "### targets", "", "| category | target | figures | met |", "|---|---|---|---|"]
    for category, by_arm in results.items():
        base = by_arm.get("unconstrained")
        if category == "irrelevance":
            if base and "auto" in by_arm:
                a, u = by_arm["auto"]["ast"], base["ast"]
                lines.append(f"| {category} | auto no worse than unconstrained | {a:.0%} vs {u:.0%} | "
                             f"{'yes' if a >= u else 'no'} |")
            continue
        if "required" in by_arm:
            w = by_arm["required"]["well_formed"]
            lines.append(f"| {category} | required: 100% well-formed | {w:.0%} | {'yes' if w == 1 else 'no'} |")
        for arm in ("required", "auto", "required-one"):
            if base and arm in by_arm:
                a, u = by_arm[arm]["ast"], base["ast"]
                lines.append(f"| {category} | {arm}: AST above unconstrained | {a:.0%} vs {u:.0%} | "
                             f"{'yes' if a > u else 'no'} |")
    crashes = {f"{c} {a}": s["crashes"] for c, by_arm in results.items() for a, s in by_arm.items() if s["crashes"]}
    lines += ["", "AST errors by type: " + "; ".join(
        f"{c} {a}: {s['error_types']}" for c, by_arm in results.items() for a, s in by_arm.items())]
    if crashes:
        lines.append(f"\ncrashes: {crashes}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- masks


def mask_tools(b, count: int, seed: int) -> list[tuple[dict, dict]]:
    """``count`` (tool, arguments) pairs from BFCL's multiple / parallel_multiple answers."""
    found: dict = {}
    for category in ("multiple", "parallel_multiple"):
        answers = {a["id"]: a["ground_truth"] for a in b.load_ground_truth_entry(category)}
        for e in b.load_dataset_entry(category):
            tools = {t["function"]["name"]: t for t in to_tools(b, e["function"])}
            checks = validators(list(tools.values()))
            for call in answers[e["id"]]:
                (name, params), = call.items()
                name = name.replace(".", "_")
                if name in found or name not in tools:
                    continue
                args = {}
                for key, options in params.items():
                    value = next((v for v in options if v != ""), None)
                    if value is not None:
                        args[key] = value
                if checks[name].is_valid(args):
                    found[name] = (tools[name], args)
    names = sorted(found)
    return [found[n] for n in random.Random(seed).sample(names, min(count, len(names)))]


def xgrammar_tag(tools: list[dict]) -> dict:
    """XGrammar's structural tag for hermes-style calls of ``tools``, text around them."""
    tags = [{"type": "tag", "begin": CALL_HEAD.format(name=json.dumps(t["function"]["name"])),
             "content": {"type": "json_schema", "json_schema": t["function"]["parameters"]}, "end": CALL_END}
            for t in tools]
    return {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<tool_call>"],
                                                 "tags": tags, "stop_after_first": False}}


def call_text(tool: dict, args: dict) -> str:
    return CALL_HEAD.format(name=json.dumps(tool["function"]["name"])) + json.dumps(args) + CALL_END


class _Guided:
    name = "guided"

    def __init__(self, hf):
        import guided

        self.g = guided
        self.vocab = guided.Vocabulary.from_tokenizer(hf)
        self.bitmask = guided.allocate_token_bitmask(1, self.vocab.size)

    def compile(self, tools):
        import guided.fsm.memo
        import guided.fsm.regex

        self.g.clear_cache()
        fn = getattr(guided.fsm.regex, "compile_regex", None)
        if hasattr(fn, "cache_clear"):
            fn.cache_clear()
        guided.fsm.memo.clear()
        return self.g.compile(self.g.ToolCalls(tools, format="hermes"), self.vocab, timeout=None)

    def matcher(self, compiled):
        return compiled.matcher()

    def fill(self, m):
        m.fill_next_token_bitmask(self.bitmask, 0)

    def accept(self, m, token: int) -> bool:
        return m.accept_token(token)


class _XGrammar:
    name = "xgrammar"

    def __init__(self, hf, eos: int):
        import xgrammar

        self.x = xgrammar
        info = xgrammar.TokenizerInfo.from_huggingface(hf, stop_token_ids=[eos])
        self.compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.bitmask = xgrammar.allocate_token_bitmask(1, info.vocab_size)

    def compile(self, tools):
        return self.compiler.compile_structural_tag(json.dumps(xgrammar_tag(tools)))

    def matcher(self, compiled):
        return self.x.GrammarMatcher(compiled)

    def fill(self, m):
        m.fill_next_token_bitmask(self.bitmask, 0)

    def accept(self, m, token: int) -> bool:
        return m.accept_token(token)


def _allowed(bitmask, token: int) -> bool:
    word = int(bitmask[0, token // 32])
    return bool((word >> (token % 32)) & 1)


def _walk(engines, compiled, sequences, rng, vocab_size: int, tokenizer, special: list[int]) -> dict:
    """One pass: fresh matchers, every sequence, one timed fill per engine per step."""
    import numpy as np

    samples = {e.name: [] for e in engines}
    differ = {"ordinary": 0, "special": 0}
    examples, refused, kinds = [], [], set()
    words = (vocab_size + 31) // 32
    is_special = np.zeros(vocab_size, dtype=bool)
    is_special[special] = True
    for seq in sequences:
        matchers = {e.name: e.matcher(compiled[e.name]) for e in engines}
        for step, token in enumerate(seq):
            order = list(engines)
            rng.shuffle(order)
            for e in order:
                m = matchers[e.name]
                t0 = time.perf_counter_ns()
                e.fill(m)
                samples[e.name].append((time.perf_counter_ns() - t0) / 1000.0)
            bits = []
            for e in engines:
                row = np.asarray(e.bitmask[0, :words]).astype(np.int32).view(np.uint8)
                bits.append(np.unpackbits(row, bitorder="little")[:vocab_size].astype(bool))
                if not _allowed(e.bitmask, token):
                    refused.append((e.name, step, token))
            if len(bits) == 2:
                diff = bits[0] ^ bits[1]
                if (diff & ~is_special).any():
                    differ["ordinary"] += 1
                    only = [np.flatnonzero(bits[0] & ~bits[1] & ~is_special),
                            np.flatnonzero(bits[1] & ~bits[0] & ~is_special)]
                    kind = (len(only[0]), len(only[1]))
                    if kind not in kinds and len(kinds) < 8:  # one example per kind of difference
                        kinds.add(kind)
                        examples.append({"after": tokenizer.decode(seq[:step])[-40:],
                                         f"only_{engines[0].name}": [len(only[0])] + tokenizer.convert_ids_to_tokens(
                                             [int(t) for t in only[0][:6]]),
                                         f"only_{engines[1].name}": [len(only[1])] + tokenizer.convert_ids_to_tokens(
                                             [int(t) for t in only[1][:6]])})
                if (diff & is_special).any():
                    differ["special"] += 1
            for e in engines:
                if not e.accept(matchers[e.name], token):
                    refused.append((e.name, step, token, "accept"))
    return {"samples": samples, "steps": sum(len(s) for s in sequences), "masks_differ": differ,
            "examples": examples, "refused": refused[:20]}


def run_masks(args, b, hf) -> dict:
    import guided

    eos = guided.Vocabulary.from_tokenizer(hf).eos_token_ids[0]
    engines = [_Guided(hf), _XGrammar(hf, eos)]
    vocab_size = engines[0].vocab.size

    def tokens(text: str) -> list[int]:
        return hf.encode(text, add_special_tokens=False) + [eos]

    # Per-process set-up (numba, tables, the peer's tokenizer info) left out of the figures.
    warm_tool = [{"type": "function", "function": {"name": "warm", "parameters": {
        "type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}]
    warm = {e.name: e.compile(warm_tool) for e in engines}
    # The tokenizer's added tokens (EOS, chat markers, ...): XGrammar lets them through as text.
    special = sorted(set(hf.all_special_ids) | set(hf.get_added_vocab().values()))
    _walk(engines, warm, [tokens("Hi.\n" + call_text(warm_tool[0], {"x": 1}))], random.Random(0), vocab_size, hf,
          special)

    picked = mask_tools(b, args.mask_tools, args.seed)
    tools = [t for t, _ in picked]
    sequences = [tokens(f"Let me look that up for you.\n{call_text(t, a)}\nThat is the call.") for t, a in picked]
    sequences.append(tokens("\n".join(call_text(t, a) for t, a in picked)))
    compile_ms: dict = {e.name: [] for e in engines}
    compiled: dict = {}
    for _ in range(args.compile_repeats):
        for e in engines:
            t0 = time.perf_counter()
            compiled[e.name] = e.compile(tools)
            compile_ms[e.name].append(1000 * (time.perf_counter() - t0))
    rng = random.Random(args.seed)
    passes = {p: _walk(engines, compiled, sequences, rng, vocab_size, hf, special) for p in ("first", "repeat")}
    out = {"tools": [t["function"]["name"] for t in tools], "steps": passes["first"]["steps"],
           "special_tokens": [hf.decode([t]) for t in special],
           "compile_ms": compile_ms, "same_language_spec": guided.ToolCalls(tools, format="hermes").structural_tag
           == xgrammar_tag(tools), "passes": {}}
    for p, got in passes.items():
        stats = {}
        for name, xs in got["samples"].items():
            xs = sorted(xs)
            stats[name] = {"p50": percentile(xs, 50), "p99": percentile(xs, 99), "mean": sum(xs) / len(xs),
                           "max": xs[-1]}
        out["passes"][p] = {"stats": stats, "masks_differ": got["masks_differ"], "examples": got["examples"],
                            "refused": got["refused"], "samples": got["samples"]}
    return out


def mask_table(m: dict) -> str:
    med = {k: sorted(v)[len(v) // 2] for k, v in m["compile_ms"].items()}
    title = (f"### masks: one {len(m['tools'])}-tool ToolCalls spec (hermes, auto) against XGrammar's structural "
             f"tag, {m['steps']} steps per pass")
    lines = [title, "", f"tools: {', '.join(m['tools'])}", "",
             "| pass | engine | compile ms (median) | p50 µs | p99 µs | mean µs | max µs |",
             "|---|---|---|---|---|---|---|"]
    for p, got in m["passes"].items():
        for name, s in got["stats"].items():
            lines.append(f"| {p} | {name} | {med[name]:.1f} | {s['p50']:.1f} | {s['p99']:.1f} | {s['mean']:.1f} | "
                         f"{s['max']:.0f} |")
        g, x = got["stats"]["guided"], got["stats"]["xgrammar"]
        lines.append(f"| {p} | guided / xgrammar | {med['guided'] / med['xgrammar']:.2f} | "
                     f"{g['p50'] / x['p50']:.2f} | {g['p99'] / x['p99']:.2f} | {g['mean'] / x['mean']:.2f} | |")
    lines.append("")
    for p, got in m["passes"].items():
        d = got["masks_differ"]
        lines.append(f"{p}: masks differ on ordinary tokens at {d['ordinary']} of {m['steps']} steps, on the "
                     f"{len(m['special_tokens'])} added tokens at {d['special']}; "
                     f"refused tokens: {got['refused'] or 'none'}")
    if m["passes"]["first"]["examples"]:
        lines.append(f"examples of differing masks: {json.dumps(m['passes']['first']['examples'], ensure_ascii=False)}")
    lines.append(f"guided's structural tag equals the XGrammar one: {m['same_language_spec']}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def versions() -> dict:
    import torch

    out = {"python": platform.python_version(), "torch": torch.__version__, "cpus": os.cpu_count()}
    for dist in ("bfcl-eval", "xgrammar", "numba", "transformers", "jsonschema"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    try:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        out["commit"] = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True,
                                       text=True, timeout=10, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def _write(path: str, out: dict) -> None:
    with open(path, "w") as f:
        json.dump(out, f, default=str)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-category", type=int, default=15)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-new-tokens", type=int, default=160)
    ap.add_argument("--categories", default=",".join(CATEGORIES))
    ap.add_argument("--arms", default=",".join(DEFAULT_ARMS))
    ap.add_argument("--mask-only", action="store_true", help="run only the mask comparison")
    ap.add_argument("--skip-mask", action="store_true", help="skip the mask comparison")
    ap.add_argument("--mask-tools", type=int, default=10)
    ap.add_argument("--compile-repeats", type=int, default=3)
    ap.add_argument("--out", default=None, help="write every record and figure here (JSON)")
    args = ap.parse_args(argv)
    unknown = set(args.categories.split(",")) - set(CATEGORIES) | set(args.arms.split(",")) - set(ARMS)
    if unknown - {""}:
        ap.error(f"unknown categories or arms: {sorted(unknown)}")

    import torch

    torch.set_num_threads(1)
    wall = time.perf_counter()
    b = bfcl()
    if b.stand_in:
        log("bfcl_eval.constants.model_config does not import here (vendor SDKs); using a one-entry stand-in")
    out: dict = {"args": vars(args), "versions": versions(), "model_config_stand_in": b.stand_in}
    print(f"## tool_calls.py: seed {args.seed}, {versions()}\n")
    if not args.skip_mask:
        from guided.models import load_tokenizer

        masks = run_masks(args, b, load_tokenizer())
        out["masks"] = masks
        print(mask_table(masks))
        print(flush=True)
        if args.out:
            _write(args.out, out)
    if not args.mask_only:
        results = run_bfcl(args, b, out)
        print(f"SmolLM2-135M-Instruct, greedy, max_new_tokens {args.max_new_tokens}, "
              f"{args.per_category} entries per category\n")
        print(bfcl_tables(results, [a for a in ARMS if a in args.arms.split(",")]))
    out["wall_s"] = time.perf_counter() - wall
    print(f"\nwall {out['wall_s'] / 60:.1f} min")
    if args.out:
        _write(args.out, out)
        log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
