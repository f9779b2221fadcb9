"""Budget-aware masks on the default model: complete and valid output within a token budget.

Default model (SmolLM2-135M-Instruct, CPU, greedy, one torch thread), ``--schemas``
MaskBench schemas (``../shared/bench/maskbench.jsonl.gz``) in the order of a shuffle
with ``--seed``, whose prompt fits ``--max-prompt-tokens``: with ``--kind automata``
(the default) those that compile to an automaton guide, with ``--kind grammars``
those that compile to a grammar guide (recursive schemas), after the five shipped
lark grammars. The prompt is the chat template around an instruction to answer with
one JSON instance of the schema, its compact text included (for a lark grammar: to
write one sentence of it, its text included).

1. Each schema is generated without a budget (``--max-new-tokens`` at most): its
   length ``L`` counts the tokens written, EOS included.
2. For each budget ``B = round(f * L)``, ``f`` in ``--fractions`` (0.5, 0.75, 1): the
   same prompt with ``max_new_tokens=B``, once with ``budget_aware=False`` and once
   with ``budget_aware=True``. An output counts as complete and valid when the loop
   ended by the spec (EOS or a terminated match) and the text is a JSON instance the
   schema accepts (``jsonschema``), or a sentence lark's own parser accepts. Where
   the spec's shortest output
   (``Guide.min_tokens()``) exceeds ``B``, the budget-aware call must raise
   ``TokenBudgetError``; those cases are counted apart and left out of the shares.
3. Mask time, two ways:
   - in generation: each fill of the guide's matcher timed (rows and distances
     built on first visit included: the budget runs are the first to need a
     state's distances, the plain runs meet rows the unbudgeted run built); p50 /
     p99 per step and their ratio, with / without;
   - replayed: each budget-aware output's tokens are fed to a fresh matcher of the
     same (warm) guide, and each step's fill is timed with and without ``remaining``,
     interleaved; p50 / p99 per step and their ratio.
   Also the time of the first ``min_tokens()`` of each guide (its distances built
   from nothing), and how many guides have exact distances.

Usage::

    python benchmarks/budget.py [--kind automata|grammars] [--schemas 100] [--seed 0]
        [--max-new-tokens 256] [--fractions 0.5,0.75,1] [--json benchmarks/results/budget.json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import sys
import time
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import jsonschema  # noqa: E402
import lark  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

import guided  # noqa: E402
from guided.bitmask import allocate_token_bitmask  # noqa: E402
from guided.decoding.generation import prompt_ids  # noqa: E402
from guided.fsm.distance import TokenDistances  # noqa: E402
from guided.grammar_matcher import GrammarGuide, GrammarMatcher  # noqa: E402
from guided.matcher import FSMGuide, FSMMatcher  # noqa: E402

DEFAULT_DATA = os.path.join(ROOT, "..", "shared", "bench", "maskbench.jsonl.gz")
INSTRUCTION = ("Write one JSON instance that is valid against the JSON Schema below. "
               "Answer with the JSON only, no explanation.\n\nJSON Schema:\n")
GRAMMAR_INSTRUCTION = ("Write one sentence of the lark grammar below (start rule: start). "
                       "Answer with the sentence only, no explanation.\n\nGrammar:\n")
GRAMMARS = ("arithmetic", "json", "csv", "sql", "python_expr")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def pick(args, vocab, tok):
    """``(id, check, guide, prompt ids)`` per spec (``check(text)``: whether a text is a
    valid output), and the counts of schemas left out."""
    counts, picked = Counter(), []
    if args.kind == "grammars":
        for name in GRAMMARS:
            spec = guided.Grammar.from_name(name)
            parser = lark.Lark(spec.lark_text, parser="earley", start="start")
            picked.append((name, lambda text, p=parser: accepts(p, text), guided.compile(spec, vocab),
                           prompt_ids(tok, GRAMMAR_INSTRUCTION + spec.lark_text)))
    wanted = GrammarGuide if args.kind == "grammars" else FSMGuide
    with gzip.open(args.data, "rt") as f:
        rows = [json.loads(line) for line in f]
    order = list(range(len(rows)))
    random.Random(args.seed).shuffle(order)
    schemas = 0
    for i in order:
        if schemas >= args.schemas:
            break
        schema = rows[i]["schema"]
        if not isinstance(schema, dict):
            counts["not an object"] += 1
            continue
        text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
        if wanted is GrammarGuide and "$ref" not in text:
            continue  # only a schema that refers to itself compiles to a grammar
        ids = prompt_ids(tok, INSTRUCTION + text)
        if len(ids) > args.max_prompt_tokens:
            counts["prompt too long"] += 1
            continue
        try:
            guide = guided.compile(guided.JsonSchema(schema), vocab)
        except Exception:  # noqa: BLE001 - a schema guided refuses is not this benchmark's subject
            counts["does not compile"] += 1
            continue
        if not isinstance(guide, wanted):
            counts[f"other guide ({type(guide).__name__})"] += 1
            continue
        picked.append((rows[i]["id"], lambda t, s=schema: valid(s, t), guide, ids))
        schemas += 1
    return picked, counts


def accepts(parser, text: str) -> bool:
    try:
        parser.parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


def valid(schema, text: str) -> bool:
    try:
        value = json.loads(text)
    except ValueError:
        return False
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema).is_valid(value)


def written(result) -> int:
    """Tokens the loop generated, EOS included (what ``max_new_tokens`` counts)."""
    return result.stats.new_tokens + (result.finish_reason == "eos")


def replay(guide, tokens, budget, width):
    """Per-step fill times (ns) along ``tokens``, without and with ``remaining``, interleaved."""
    plain, aware = guide.matcher(), guide.matcher()
    bitmask = allocate_token_bitmask(1, width)
    out_plain, out_aware = [], []
    for step, token in enumerate([None, *tokens]):
        if token is not None:
            plain.accept_token(token)
            aware.accept_token(token)
        if aware.is_terminated():
            break
        t0 = time.perf_counter_ns()
        plain.fill_next_token_bitmask(bitmask, 0)
        t1 = time.perf_counter_ns()
        aware.fill_next_token_bitmask(bitmask, 0, budget - step)
        t2 = time.perf_counter_ns()
        out_plain.append(t1 - t0)
        out_aware.append(t2 - t1)
    return out_plain, out_aware


class FillTimer:
    """Times every ``fill_next_token_bitmask`` call of ``matcher_class`` into ``self.into``."""

    def __init__(self, matcher_class):
        self.into = None
        fill = matcher_class.fill_next_token_bitmask
        timer = self

        def timed(matcher, bitmask, index=0, remaining=None):
            t = time.perf_counter_ns()
            out = fill(matcher, bitmask, index, remaining)
            if timer.into is not None:
                timer.into.append(time.perf_counter_ns() - t)
            return out

        matcher_class.fill_next_token_bitmask = timed


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kind", choices=("automata", "grammars"), default="automata")
    ap.add_argument("--schemas", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--max-prompt-tokens", type=int, default=512)
    ap.add_argument("--fractions", default="0.5,0.75,1")
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--json", default=None, help="write the per-output records here")
    args = ap.parse_args()
    fractions = [float(f) for f in args.fractions.split(",")]

    model, tok = guided.models.load_default_model()
    vocab = guided.Vocabulary.from_tokenizer(tok)
    width = model.get_output_embeddings().weight.shape[0]
    t = time.perf_counter()
    picked, left_out = pick(args, vocab, tok)
    log(f"{len(picked)} specs picked in {time.perf_counter() - t:.0f} s; left out: {dict(left_out)}")

    setup_ms, exact = [], 0
    for _, _, guide, _ in picked:
        t = time.perf_counter()
        if isinstance(guide, FSMGuide):
            fresh = TokenDistances(guide.index)
            fresh.distance(guide.dfa.start)
            exact += bool(fresh.exact)
        else:  # before any generation: the grammar guide's first bounds
            guide.min_tokens()
        setup_ms.append((time.perf_counter() - t) * 1e3)

    records = []
    timer = FillTimer(GrammarMatcher if args.kind == "grammars" else FSMMatcher)
    in_gen = {"plain": [], "aware": []}
    steps = {"plain": [], "aware": []}
    started = time.perf_counter()
    for n, (sid, check, guide, ids) in enumerate(picked, 1):
        try:
            base = guided.generate(model, tok, ids, guide, max_new_tokens=args.max_new_tokens, budget_aware=False)
        except Exception as e:  # noqa: BLE001 - not this benchmark's subject: left out, named
            left_out[f"unbudgeted run failed ({type(e).__name__})"] += 1
            log(f"[{n}/{len(picked)}] {sid}: the unbudgeted run failed: {e}")
            continue
        length = written(base)
        shortest = guide.min_tokens()
        rec = {"id": sid, "L": length, "shortest": shortest, "exact": bool(guide.budget_exact),
               "base_complete": base.finish_reason in ("eos", "complete") and check(base.text),
               "runs": []}
        for f in fractions:
            budget = max(1, round(f * length))
            for aware in (False, True):
                run = {"f": f, "budget": budget, "aware": aware}
                key = "aware" if aware else "plain"
                timer.into = in_gen[key]
                try:
                    r = guided.generate(model, tok, ids, guide, max_new_tokens=budget, budget_aware=aware)
                except guided.TokenBudgetError:
                    run["error"] = "TokenBudgetError"
                    rec["runs"].append(run)
                    continue
                except Exception as e:  # noqa: BLE001 - counted as a failed output, the run goes on
                    run.update(failed=f"{type(e).__name__}: {e}"[:300], ok=False)
                    rec["runs"].append(run)
                    continue
                finally:
                    timer.into = None
                run.update(tokens=written(r), finish=r.finish_reason,
                           ok=r.finish_reason in ("eos", "complete") and check(r.text),
                           within=written(r) <= budget, text=r.text)
                if aware:
                    p, a = replay(guide, r.token_ids, budget, width)
                    steps["plain"] += p
                    steps["aware"] += a
                rec["runs"].append(run)
        records.append(rec)
        elapsed = time.perf_counter() - started
        log(f"[{n}/{len(picked)}] {sid}: L={length} shortest={shortest} "
            f"{' '.join(('E' if 'error' in x else ('!' if 'failed' in x else '+' if x['ok'] else '-')) for x in rec['runs'])} "
            f"({elapsed / 60:.1f} min, ~{elapsed / n * (len(picked) - n) / 60:.0f} min left)")

    print(f"\n{len(picked)} specs ({args.kind}, seed {args.seed}); left out: {dict(left_out)}")
    print(f"baseline (no budget, max_new_tokens={args.max_new_tokens}): complete and valid "
          f"{sum(r['base_complete'] for r in records)}/{len(records)}; L p50 {pct([r['L'] for r in records], .5)}, "
          f"max {max(r['L'] for r in records)}")
    print(f"distances: exact for {exact}/{len(picked)} guides; first min_tokens() p50 {pct(setup_ms, .5):.1f} ms, "
          f"p90 {pct(setup_ms, .9):.1f} ms, max {max(setup_ms):.0f} ms\n")
    print("| budget | budget-aware | complete + valid | outputs > budget | shortest > budget (error) | exceptions |")
    print("|---|---|---|---|---|---|")
    for f in fractions:
        for aware in (False, True):
            runs = [x for r in records for x in r["runs"] if x["f"] == f and x["aware"] == aware]
            over = [x for r in records for x in r["runs"]
                    if x["f"] == f and x["aware"] == aware and r["shortest"] > x["budget"]]
            fits = [x for r in records for x in r["runs"]
                    if x["f"] == f and x["aware"] == aware and r["shortest"] <= x["budget"]]
            ok = sum(x.get("ok", False) for x in fits)
            errors = sum("error" in x for x in over)
            failed = sum("failed" in x for x in runs)
            print(f"| {f:g} L | {'yes' if aware else 'no'} | {ok}/{len(fits)} ({100 * ok / max(1, len(fits)):.0f}%) "
                  f"| {sum(not x.get('within', True) for x in runs)} | {len(over)} ({errors} raised) | {failed} |")
    print()
    for label, times in (("in generation", in_gen), ("replayed, warm", steps)):
        p50 = [pct(times[k], .5) / 1e3 for k in ("plain", "aware")]
        p99 = [pct(times[k], .99) / 1e3 for k in ("plain", "aware")]
        mean = [sum(times[k]) / max(1, len(times[k])) / 1e3 for k in ("plain", "aware")]
        print(f"fill per step, {label} ({len(times['plain'])} / {len(times['aware'])} steps), without / with: "
              f"p50 {p50[0]:.1f} / {p50[1]:.1f} us ({p50[1] / p50[0]:.2f}x), p99 {p99[0]:.1f} / {p99[1]:.1f} us "
              f"({p99[1] / p99[0]:.2f}x), mean {mean[0]:.1f} / {mean[1]:.1f} us ({mean[1] / mean[0]:.2f}x)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "left_out": dict(left_out), "setup_ms": setup_ms,
                       "records": records}, f, indent=1)


if __name__ == "__main__":
    main()
