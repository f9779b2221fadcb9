"""Sentiment steering with DExperts: one small model, three prompts.

DExperts (Liu et al. 2021) adds a scaled difference of two models' next-token logits
to the base model's::

    z = z_base + alpha * (z_expert - z_anti_expert)

A real setup fine-tunes an expert on positive text and an anti-expert on negative
text. Here all three are the default model (SmolLM2-135M-Instruct) under different
prompts, each a ``ContextModel`` with its own KV cache:

- base:        "Continue this movie review."          + a neutral opening
- expert:      "Write a very positive movie review."  + the same opening
- anti-expert: "Write a very negative movie review."  + the same opening

The helpers read their own prompt and then the tokens the base model generates, so
each step costs one incremental forward per helper (three forwards per token in all).
Swapping expert and anti-expert steers the other way.

For a few neutral openings and seeds the script samples (temperature 1, top-p 0.9)
an unsteered continuation, one steered toward positive and one toward negative, with
the same seed, and prints each with its VADER compound sentiment score (-1 .. 1,
rule-based, offline). A few samples prove nothing: ``benchmarks/processors.py``
measures the effect on 50 prompts, with the perplexity cost.

    pip install vadersentiment
    python examples/dexperts_steering.py          # ~1-3 minutes on one CPU thread
"""

import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer  # noqa: E402

import guided  # noqa: E402
from guided.decoding.generation import prompt_ids  # noqa: E402
from guided.steering import ContextModel, DExperts  # noqa: E402

torch.set_num_threads(1)
ALPHA = 2.0
OPENINGS = [
    "The film follows a retired teacher who moves to a small coastal town. The acting",
    "Released last spring, the movie runs just under two hours. The story",
    "The director's third feature is set in a Chicago office building. Overall, the film",
]
SEEDS = [0, 1]


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def with_opening(tokenizer, instruction: str, opening: str) -> list[int]:
    """Chat-templated instruction, then the assistant's answer begins with ``opening``."""
    return prompt_ids(tokenizer, instruction, chat=True) + tokenizer(opening, add_special_tokens=False)["input_ids"]


def main() -> None:
    progress("loading the default model ...")
    model, tokenizer = guided.models.load_default_model()
    vader = SentimentIntensityAnalyzer()
    compound = lambda text: vader.polarity_scores(text)["compound"]  # noqa: E731

    scores = {"unsteered": [], "-> positive": [], "-> negative": []}
    t0 = time.perf_counter()
    for i, opening in enumerate(OPENINGS):
        base = with_opening(tokenizer, "Continue this movie review.", opening)
        positive = ContextModel(model, with_opening(tokenizer, "Write a very positive movie review.", opening))
        negative = ContextModel(model, with_opening(tokenizer, "Write a very negative movie review.", opening))
        arms = {
            "unsteered": [],
            "-> positive": [DExperts(positive, negative, alpha=ALPHA)],
            "-> negative": [DExperts(negative, positive, alpha=ALPHA)],  # swapped: steer the other way
        }
        print(f"\n=== opening {i + 1}: {opening!r}")
        steered_steps = 0
        for seed in SEEDS:
            for name, processors in arms.items():
                progress(f"[{time.perf_counter() - t0:5.0f}s] opening {i + 1}/{len(OPENINGS)}, seed {seed}, {name}")
                r = guided.generate(
                    model, tokenizer, base, None, max_new_tokens=40,
                    temperature=1.0, top_p=0.9, seed=seed, processors=processors,
                )
                c = compound(r.text)
                scores[name].append(c)
                if processors:  # one processor call per sampled token, EOS included
                    steered_steps += len(r.token_ids) + (r.finish_reason == "eos")
                print(f"  seed {seed} {name:12s} VADER {c:+.3f}  {r.stats.tokens_per_s:4.1f} tok/s"
                      f" | ...{r.text.strip()!r}")
        fp = (positive.forward_passes, negative.forward_passes)
        print(f"  (helper forward passes, positive / negative prompt: {fp[0]} / {fp[1]} "
              f"for {steered_steps} steered steps: one per step each)")

    print(f"\nMean VADER compound over {len(OPENINGS) * len(SEEDS)} samples each (alpha = {ALPHA}):")
    for name, values in scores.items():
        n_pos = sum(v >= 0.05 for v in values)
        print(f"  {name:12s} {statistics.mean(values):+.3f}   positive (>= 0.05): {n_pos}/{len(values)}")
    print("A handful of samples is anecdote (and VADER is a word list: it misreads some")
    print("sentences); benchmarks/processors.py measures 50 prompts.")


if __name__ == "__main__":
    main()
