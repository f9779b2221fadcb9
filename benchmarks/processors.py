"""Guidance processors on the default model (SmolLM2-135M-Instruct), CPU, one thread:
what each costs per step, and what sentiment steering buys and costs in perplexity.

**1. Per-step cost** (``--skip-cost`` to leave out). Greedy, ``--cost-tokens`` (48)
new tokens, unconstrained, one chat prompt asking for a long restaurant review. Arms:
no processor (the bare loop: one forward pass per token), ``LogitBias`` (20 tokens),
``PresencePenalty(0.5)``, ``FrequencyPenalty(0.5)``, ``RepetitionPenalty(1.2)``,
``DExperts`` (expert and anti-expert: two ``ContextModel``s on the same model with a
positive / negative review prompt), ``ClassifierGuidance`` (VADER, ``top_k=10``,
``weight=3``) and all of them at once. One untimed warm-up round, then ``--rounds``
(3) rounds, each running every arm once, in a rotated order (interleaved, so a noisy
shared machine hits every arm alike). Reported per arm, medians over rounds:

- ms / token: ``decode_s / new_tokens`` from ``guided.generate`` (each step's
  processors + sampling + forward pass; the prefill is left out);
- ratio: that over the bare loop's ms / token *in the same round*, median of rounds;
- processor ms / step: the processors' own time per call, timed around them with
  ``perf_counter``, first call left out (it is reported apart: the DExperts helpers
  read their whole prompt there), and that time over the bare loop's ms / token;
- helper forward passes per step (``ContextModel.forward_passes`` / processor calls)
  and classifier calls per step.

The arms write different text (greedy with different scores), so token counts may
differ; they are printed.

**2. Steering** (``--skip-steering``). ``--prompts`` (50) neutral review openings
(movies, products, restaurants, listed below). For each: the base prompt is the chat
template of "Continue this <kind> review." with the assistant's answer starting with
the opening; the expert reads "Write a very positive <kind> review." + the opening,
the anti-expert "Write a very negative <kind> review." + the opening (the setup of
``examples/dexperts_steering.py``). ``--tokens`` (40) new tokens are sampled,
temperature 1, top-p 0.9, seed fixed per prompt and shared by all arms (paired):

- unsteered;
- ``DExperts(alpha=2)`` in guided's order (ensemble, then top-p 0.9 over it);
- ``DExperts(alpha=2)`` in the DExperts paper's order (``--skip-paper-order``): the
  authors' code (github.com/alisawuffles/DExperts, ``generation/dexperts_generation.py``)
  nucleus-filters the *base* logits at 0.9 first and samples the ensemble with no
  further truncation. Here: a top-p filter processor before ``DExperts``, ``top_p=None``;
- ``ClassifierGuidance`` (VADER, ``top_k=15``, ``weight=4``, the setup of
  ``examples/classifier_guidance.py``; ``--skip-classifier``).

Each continuation (its text only, not the opening) is scored by VADER: positive when
compound >= 0.05, negative when <= -0.05. Reported: positive fraction with a Wilson
95% interval, negative fraction, mean compound, paired wins over the unsteered
sample of the same prompt; the perplexity of the continuations under the plain base
model (base prompt + continuation, only continuation tokens scored, EOS not scored),
pooled over all tokens and the median per sample; distinct bigrams over all
continuations; ms per token, prefill and the helpers' first reading of their prompts
included.

VADER is a sentiment word list, not a trained classifier: it is also the guidance
classifier of one arm, so that arm is judged by the same instrument it optimised
(an optimistic number for it). Perplexity under the base model is the usual fluency
proxy (DExperts, Liu et al. 2021); the unsteered samples come from that very model
(with top-p), so theirs is low by construction.

Usage (from the repository root)::

    python benchmarks/processors.py                       # full: ~15-25 min on one thread
    python benchmarks/processors.py --quick               # smoke run, ~2 min
    python benchmarks/processors.py [--prompts N] [--tokens T] [--cost-tokens N] [--rounds R]
        [--skip-cost] [--skip-steering] [--skip-classifier] [--skip-paper-order]

Progress goes to stderr, markdown tables to stdout.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

torch.set_num_threads(1)

import guided  # noqa: E402
from guided.decoding.generation import prompt_ids  # noqa: E402
from guided.decoding.sampling import warp  # noqa: E402
from guided.steering import (
    ClassifierGuidance,
    ContextModel,
    DExperts,
    FrequencyPenalty,
    LogitBias,
    PresencePenalty,
    RepetitionPenalty,
)

try:
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
except ImportError:  # pragma: no cover
    sys.exit("benchmarks/processors.py needs VADER: pip install vadersentiment")

# 50 neutral openings: (kind, text). Facts, no judgement; the continuation decides.
OPENINGS = [
    ("movie", "The film follows a retired teacher who moves to a small coastal town. The acting"),
    ("movie", "Released last spring, the movie runs just under two hours. The story"),
    ("movie", "The director's third feature is set in a Chicago office building. Overall, the film"),
    ("movie", "This science fiction film takes place on a mining station orbiting Jupiter. The plot"),
    ("movie", "I watched this documentary about beekeepers on a Sunday afternoon. The filmmakers"),
    ("movie", "The movie is an adaptation of a novel from the 1950s. The screenplay"),
    ("movie", "Most of the film was shot in black and white in Lisbon. The cinematography"),
    ("movie", "The sequel picks up three years after the events of the first film. This time"),
    ("movie", "It is an animated film about a family of foxes living near a highway. The animation"),
    ("movie", "The courtroom drama stars two actors best known for television. Their performances"),
    ("movie", "The film's soundtrack was composed by a jazz pianist. The music"),
    ("movie", "I saw this horror movie at a late screening with a few friends. The scares"),
    ("movie", "The movie tells the story of a chess tournament in 1970s Moscow. The pacing"),
    ("movie", "This romantic comedy is set during a wedding weekend in Vermont. The humor"),
    ("movie", "The war film is told from the point of view of a radio operator. The battle scenes"),
    ("movie", "The heist movie has a cast of eight characters and several timelines. The ending"),
    ("movie", "This is the first film by a director who previously made music videos. The visuals"),
    ("product", "I bought this blender in March to make smoothies in the morning. The motor"),
    ("product", "The headphones arrived in a cardboard box with a charging cable. The sound quality"),
    ("product", "I have used this laptop for work for about six weeks. The battery"),
    ("product", "This backpack has two main compartments and a padded laptop sleeve. The zippers"),
    ("product", "The coffee maker brews up to twelve cups and has a timer. The coffee"),
    ("product", "I ordered these running shoes in my usual size. The fit"),
    ("product", "The vacuum cleaner is cordless and comes with three attachments. The suction"),
    ("product", "This phone case is made of silicone and covers the camera. The grip"),
    ("product", "The desk lamp has a flexible arm and a USB port in the base. The light"),
    ("product", "I set up this wireless router in a two-story house. The connection"),
    ("product", "The kitchen scale measures in grams and ounces and runs on two batteries. The display"),
    ("product", "This electric toothbrush has four modes and a travel case. The brushing"),
    ("product", "The office chair took about twenty minutes to assemble. The seat"),
    ("product", "I bought this tent for a weekend camping trip in the mountains. The setup"),
    ("product", "The smartwatch tracks steps, heart rate and sleep. The app"),
    ("product", "This cast iron skillet is ten inches wide and came pre-seasoned. The cooking"),
    ("product", "The air fryer has a digital panel and a four-quart basket. The results"),
    ("restaurant", "We had dinner at this Italian place on a Friday evening. The food"),
    ("restaurant", "The restaurant is on the second floor of an old warehouse downtown. The service"),
    ("restaurant", "I stopped by this taco stand during my lunch break. The tacos"),
    ("restaurant", "This sushi bar seats about twenty people at the counter. The fish"),
    ("restaurant", "We booked a table for four at the new Thai restaurant. The curry"),
    ("restaurant", "The diner is open twenty-four hours and serves breakfast all day. The pancakes"),
    ("restaurant", "I ordered delivery from this pizza place on a rainy night. The pizza"),
    ("restaurant", "The cafe sits across the street from the public library. The coffee"),
    ("restaurant", "This steakhouse has been in the same family for three generations. The steak"),
    ("restaurant", "We went to the Indian buffet on a Sunday around noon. The selection"),
    ("restaurant", "The bakery opens at six in the morning and sells bread and pastries. The croissants"),
    ("restaurant", "I had lunch at the vegetarian restaurant near my office. The menu"),
    ("restaurant", "The ramen shop has a short menu written on a chalkboard. The broth"),
    ("restaurant", "We celebrated a birthday at this seafood restaurant by the harbor. The atmosphere"),
    ("restaurant", "The food truck parks outside the train station on weekdays. The wait"),
    ("restaurant", "This French bistro changes its menu every season. The dessert"),
]
assert len(OPENINGS) == 50

COST_PROMPT = "Write a long, detailed review of a restaurant you visited last month."
BIAS_WORDS = [" delicious", " friendly", " great", " wonderful", " fresh", " cozy", " tasty", " amazing", " lovely",
              " perfect", " bad", " terrible", " rude", " cold", " bland", " slow", " dirty", " awful", " boring",
              " noisy"]

_vader = SentimentIntensityAnalyzer()


def compound(text: str) -> float:
    return _vader.polarity_scores(text)["compound"]


def _p_positive(text: str) -> float:
    return min(1 - 1e-4, max(1e-4, (compound(text) + 1) / 2))


def vader_log_p_positive(texts: list[str]) -> list[float]:
    """The scorer for ClassifierGuidance: log p(positive | text), p = (compound + 1) / 2."""
    return [math.log(_p_positive(t)) for t in texts]


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Timed:
    """Runs ``processors`` in order and times each call (``perf_counter``)."""

    def __init__(self, processors):
        self.processors = list(processors)
        self.times: list[float] = []

    def reset(self) -> None:
        for p in self.processors:
            if hasattr(p, "reset"):
                p.reset()

    def __call__(self, input_ids, scores):
        t = time.perf_counter()
        for p in self.processors:
            scores = p(input_ids, scores)
        self.times.append(time.perf_counter() - t)
        return scores


class NucleusFilter:
    """Top-p filtering of the scores as a processor (``-inf`` outside the nucleus), to
    put the DExperts paper's base-model truncation *before* the ensemble."""

    def __init__(self, top_p: float):
        self.top_p = float(top_p)

    def __call__(self, input_ids, scores):
        return warp(scores, 1.0, top_p=self.top_p)  # guided's own top-p, at temperature 1


def with_opening(tokenizer, instruction: str, opening: str) -> list[int]:
    return prompt_ids(tokenizer, instruction, chat=True) + tokenizer(opening, add_special_tokens=False)["input_ids"]


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return float("nan"), float("nan")
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return c - h, c + h


# ---------------------------------------------------------------- 1. per-step cost


def cost_arms(model, tokenizer):
    """name -> (list of processors, ContextModels to count, ClassifierGuidance or None)."""
    bias = {}
    for w in BIAS_WORDS:
        ids = tokenizer(w, add_special_tokens=False)["input_ids"]
        bias[ids[0]] = 2.0 if BIAS_WORDS.index(w) < 10 else -2.0
    positive = ContextModel(model, prompt_ids(tokenizer, "Write a very positive restaurant review."))
    negative = ContextModel(model, prompt_ids(tokenizer, "Write a very negative restaurant review."))
    positive2 = ContextModel(model, prompt_ids(tokenizer, "Write a very positive restaurant review."))
    negative2 = ContextModel(model, prompt_ids(tokenizer, "Write a very negative restaurant review."))
    cg = ClassifierGuidance(vader_log_p_positive, tokenizer, top_k=10, weight=3.0)
    cg2 = ClassifierGuidance(vader_log_p_positive, tokenizer, top_k=10, weight=3.0)
    return {
        "none (bare loop)": ([], [], None),
        f"LogitBias ({len(bias)} tokens)": ([LogitBias(bias)], [], None),
        "PresencePenalty(0.5)": ([PresencePenalty(0.5)], [], None),
        "FrequencyPenalty(0.5)": ([FrequencyPenalty(0.5)], [], None),
        "RepetitionPenalty(1.2)": ([RepetitionPenalty(1.2)], [], None),
        "DExperts(alpha=2), 2 ContextModels": ([DExperts(positive, negative, alpha=2.0)], [positive, negative], None),
        "ClassifierGuidance(VADER, top_k=10)": ([cg], [], cg),
        "all of the above": (
            [LogitBias(bias), PresencePenalty(0.5), FrequencyPenalty(0.5), RepetitionPenalty(1.2),
             DExperts(positive2, negative2, alpha=2.0), cg2],
            [positive2, negative2], cg2,
        ),
    }


def run_cost(model, tokenizer, args) -> None:
    arms = cost_arms(model, tokenizer)
    names = list(arms)
    ids = prompt_ids(tokenizer, COST_PROMPT)
    rec = {n: {"ms": [], "ratio": [], "proc_steady": [], "proc_first": [], "tokens": [], "fwd": [], "calls": []}
           for n in names}
    t0 = time.perf_counter()
    for rnd in range(args.rounds + 1):  # round 0: warm-up, untimed
        order = names[rnd % len(names):] + names[: rnd % len(names)]
        per_round = {}
        for name in order:
            procs, helpers, cg = arms[name]
            timed = Timed(procs)
            fwd0 = [h.forward_passes for h in helpers]
            calls0 = cg.calls if cg else 0
            n_tokens = 8 if rnd == 0 else args.cost_tokens
            r = guided.generate(model, tokenizer, ids, None, max_new_tokens=n_tokens, processors=[timed] if procs else [])
            steps = len(r.token_ids) + (r.finish_reason == "eos")
            per_round[name] = 1e3 * r.stats.decode_s / max(1, len(r.token_ids))
            if rnd == 0:
                continue
            d = rec[name]
            d["ms"].append(per_round[name])
            d["tokens"].append(len(r.token_ids))
            if timed.times:
                d["proc_first"].append(1e3 * timed.times[0])
                d["proc_steady"].append(1e3 * median(timed.times[1:]))
            if helpers:
                d["fwd"].append(sum(h.forward_passes - f for h, f in zip(helpers, fwd0)) / len(helpers) / steps)
            if cg:
                d["calls"].append((cg.calls - calls0) / steps)
        progress(f"[{time.perf_counter() - t0:5.0f}s] cost: round {rnd}/{args.rounds}"
                 + (" (warm-up)" if rnd == 0 else f", bare {per_round[names[0]]:.1f} ms/token"))
        if rnd:
            for name in names:
                rec[name]["ratio"].append(per_round[name] / per_round[names[0]])

    bare = median(rec[names[0]]["ms"])
    print(f"\n## 1. Per-step cost (greedy, {args.cost_tokens} new tokens, {args.rounds} interleaved rounds, medians)\n")
    print(f"Prompt: {COST_PROMPT!r} (chat template, {len(ids)} tokens). Bare loop: {bare:.1f} ms/token, "
          "i.e. one forward pass + sampling.\n")
    print("| processors | new tokens | ms / token | ratio to bare | processor ms / step (steady) | "
          "processor / bare step | first call ms | helper forwards / step | classifier calls / step |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in names:
        d = rec[name]
        steady = median(d["proc_steady"])
        cells = [
            name,
            "/".join(str(t) for t in sorted(set(d["tokens"]))),
            f"{median(d['ms']):.1f}",
            f"{median(d['ratio']):.3f}",
            f"{steady:.3f}" if d["proc_steady"] else "-",
            f"{steady / bare:.3f}" if d["proc_steady"] else "-",
            f"{median(d['proc_first']):.1f}" if d["proc_first"] else "-",
            f"{median(d['fwd']):.2f} each" if d["fwd"] else "-",
            f"{median(d['calls']):.2f}" if d["calls"] else "-",
        ]
        print("| " + " | ".join(cells) + " |")
    print("\n'processor ms / step' is the processors' own time per call (steady state, first call left out);"
          " 'first call' includes the DExperts helpers reading their prompts. 'helper forwards / step': per"
          " ContextModel, over processor calls (one per sampled token, EOS included).")


# ---------------------------------------------------------------- 2. steering


@torch.inference_mode()
def continuation_nll(model, prefix: list[int], continuation: list[int]) -> tuple[float, int]:
    """Summed negative log-likelihood of ``continuation`` after ``prefix`` under ``model``."""
    if not continuation:
        return 0.0, 0
    ids = torch.tensor([prefix + continuation])
    logp = torch.log_softmax(model(input_ids=ids).logits[0, len(prefix) - 1 : -1].float(), dim=-1)
    nll = -logp.gather(1, torch.tensor(continuation)[:, None]).sum()
    return float(nll), len(continuation)


def distinct_2(token_lists) -> float:
    bigrams = [tuple(t[i : i + 2]) for t in token_lists for i in range(len(t) - 1)]
    return len(set(bigrams)) / len(bigrams) if bigrams else float("nan")


def run_steering(model, tokenizer, args) -> None:
    openings = OPENINGS[: args.prompts]
    arm_names = ["unsteered", "DExperts(alpha=2), top-p after (guided order)"]
    if not args.skip_paper_order:
        arm_names.append("DExperts(alpha=2), base top-p first (paper order)")
    if not args.skip_classifier:
        arm_names.append("ClassifierGuidance(VADER, top_k=15, w=4)")
    res = {n: {"c": [], "nll": 0.0, "n": 0, "ppl": [], "tokens": [], "ms": [], "eos": 0} for n in arm_names}
    t0 = time.perf_counter()
    for i, (kind, opening) in enumerate(openings):
        base = with_opening(tokenizer, f"Continue this {kind} review.", opening)
        pos = ContextModel(model, with_opening(tokenizer, f"Write a very positive {kind} review.", opening))
        neg = ContextModel(model, with_opening(tokenizer, f"Write a very negative {kind} review.", opening))
        setups = {
            arm_names[1]: ([DExperts(pos, neg, alpha=2.0)], 0.9),
            "unsteered": ([], 0.9),
            "DExperts(alpha=2), base top-p first (paper order)": ([NucleusFilter(0.9), DExperts(pos, neg, alpha=2.0)], None),
            "ClassifierGuidance(VADER, top_k=15, w=4)": (
                [ClassifierGuidance(vader_log_p_positive, tokenizer, top_k=15, weight=4.0)], 0.9),
        }
        line = []
        for name in arm_names:
            procs, top_p = setups[name]
            r = guided.generate(model, tokenizer, base, None, max_new_tokens=args.tokens, temperature=1.0,
                                top_p=top_p, seed=1000 + i, processors=procs)
            nll, n = continuation_nll(model, base, r.token_ids)
            d = res[name]
            d["c"].append(compound(r.text))
            d["nll"] += nll
            d["n"] += n
            if n:
                d["ppl"].append(math.exp(nll / n))
            d["tokens"].append(r.token_ids)
            d["eos"] += r.finish_reason == "eos"
            if r.token_ids:
                d["ms"].append(1e3 * (r.stats.prefill_s + r.stats.decode_s) / len(r.token_ids))
            line.append(f"{d['c'][-1]:+.2f}")
        progress(f"[{time.perf_counter() - t0:5.0f}s] steering: prompt {i + 1}/{len(openings)} ({kind}); "
                 f"VADER {' / '.join(line)}")

    n = len(openings)
    unsteered = res["unsteered"]["c"]
    print(f"\n## 2. Sentiment steering ({n} neutral openings, {args.tokens} new tokens, temperature 1, "
          "seed per prompt shared by all arms)\n")
    print("| arm | positive (>= 0.05) | 95% CI | negative (<= -0.05) | mean compound | more positive than "
          "unsteered (paired) | perplexity (pooled) | perplexity (median) | distinct-2 | tokens (mean) | "
          "ended at EOS | ms / token (prefill incl.) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in arm_names:
        d = res[name]
        k = sum(c >= 0.05 for c in d["c"])
        lo, hi = wilson(k, n)
        neg = sum(c <= -0.05 for c in d["c"])
        if name == "unsteered":
            wins = "-"
        else:
            w = sum(a > b for a, b in zip(d["c"], unsteered))
            ties = sum(a == b for a, b in zip(d["c"], unsteered))
            wins = f"{w}/{n} ({ties} ties)"
        cells = [
            name, f"{k}/{n} = {k / n:.0%}", f"{lo:.0%}-{hi:.0%}", f"{neg}/{n} = {neg / n:.0%}",
            f"{statistics.mean(d['c']):+.3f}", wins,
            f"{math.exp(d['nll'] / d['n']):.2f}" if d["n"] else "-", f"{median(d['ppl']):.2f}",
            f"{distinct_2(d['tokens']):.3f}", f"{statistics.mean(len(t) for t in d['tokens']):.1f}",
            f"{d['eos']}/{n}", f"{median(d['ms']):.1f}",
        ]
        print("| " + " | ".join(cells) + " |")
    print("\nVADER on the continuation text only. Perplexity: of the continuation tokens under the plain model"
          " after the neutral base prompt (chat template + opening); 'pooled' = exp(total NLL / total tokens)."
          " 'paper order': the base logits are nucleus-filtered (0.9) before the ensemble and the ensemble is"
          " sampled untruncated, as in the DExperts authors' code; 'guided order': the ensemble is formed over"
          " the full vocabulary and top-p 0.9 is applied to it. The ClassifierGuidance arm is judged by the"
          " classifier it was guided by.")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=50, help="neutral openings for the steering part (max 50)")
    ap.add_argument("--tokens", type=int, default=40, help="new tokens per steering continuation")
    ap.add_argument("--cost-tokens", type=int, default=48, help="new tokens per cost run")
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds of the cost part")
    ap.add_argument("--quick", action="store_true", help="smoke run: 4 prompts, 20 tokens, 1 round of 16 tokens")
    ap.add_argument("--skip-cost", action="store_true")
    ap.add_argument("--skip-steering", action="store_true")
    ap.add_argument("--skip-classifier", action="store_true", help="no ClassifierGuidance arm in the steering part")
    ap.add_argument("--skip-paper-order", action="store_true", help="no paper-order DExperts arm in the steering part")
    args = ap.parse_args()
    if args.quick:
        args.prompts, args.tokens, args.cost_tokens, args.rounds = min(args.prompts, 4), 20, 16, 1
    args.prompts = max(1, min(args.prompts, len(OPENINGS)))

    print("```\n$ python " + " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]) + "\n```\n")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs; model SmolLM2-135M-Instruct (fp32); {time.strftime('%Y-%m-%d %H:%M')}")
    t_start = time.perf_counter()
    progress("loading the default model ...")
    model, tokenizer = guided.models.load_default_model()
    if not args.skip_cost:
        run_cost(model, tokenizer, args)
        sys.stdout.flush()
    if not args.skip_steering:
        run_steering(model, tokenizer, args)
    print(f"\nWall time: {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
