"""Classifier guidance (FUDGE-style) with an offline sentiment classifier, alone and
composed with a regex.

``ClassifierGuidance(scorer, tokenizer, top_k, weight)`` takes, at every step, the
``top_k`` best tokens *the grammar allows*, decodes "text so far + candidate" for each,
asks ``scorer`` for log p(attribute | text) and re-scores::

    score = logit + weight * log p(attribute | text + candidate)    (top_k candidates)
    score = -inf                                                    (every other token)

The classifier here is VADER (``pip install vadersentiment``), a rule-based sentiment
lexicon that works offline; its compound score c in [-1, 1] becomes
p(positive) = (c + 1) / 2, clipped to [1e-4, 1 - 1e-4]. Steering toward negative
uses log(1 - p). One scorer call per step scores all ``top_k`` candidate texts.

Part 1 continues neutral movie-review openings, unguided and guided each way (same
seed). Part 2 composes guidance with a grammar: a one-sentence review that must match
``[A-Z][a-z ,']{20,120}\\.``. The mask comes first, so the classifier only ever
re-ranks tokens the regex allows, and it is applied again after guidance, so every
output still matches.

    pip install vadersentiment
    python examples/classifier_guidance.py        # ~1-2 minutes on one CPU thread
"""

import math
import os
import re
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer  # noqa: E402

import guided  # noqa: E402
from guided.decoding.generation import prompt_ids  # noqa: E402
from guided.steering import ClassifierGuidance  # noqa: E402

torch.set_num_threads(1)
TOP_K, WEIGHT = 15, 4.0
OPENINGS = [
    "The film follows a retired teacher who moves to a small coastal town. The acting",
    "Released last spring, the movie runs just under two hours. The story",
]
SEEDS = [0, 1]
SENTENCE = r"[A-Z][a-z ,']{20,120}\."

vader = SentimentIntensityAnalyzer()


def compound(text: str) -> float:
    return vader.polarity_scores(text)["compound"]


def p_positive(text: str) -> float:
    return min(1 - 1e-4, max(1e-4, (compound(text) + 1) / 2))


def log_p_positive(texts: list[str]) -> list[float]:
    return [math.log(p_positive(t)) for t in texts]


def log_p_negative(texts: list[str]) -> list[float]:
    return [math.log(1 - p_positive(t)) for t in texts]


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main() -> None:
    progress("loading the default model ...")
    model, tokenizer = guided.models.load_default_model()
    arms = {
        "unguided": None,
        "-> positive": ClassifierGuidance(log_p_positive, tokenizer, top_k=TOP_K, weight=WEIGHT),
        "-> negative": ClassifierGuidance(log_p_negative, tokenizer, top_k=TOP_K, weight=WEIGHT),
    }
    t0 = time.perf_counter()

    print(f"Part 1: continuing neutral openings (temperature 1, top-p 0.9; top_k {TOP_K}, weight {WEIGHT})")
    for i, opening in enumerate(OPENINGS):
        base = (prompt_ids(tokenizer, "Continue this movie review.")
                + tokenizer(opening, add_special_tokens=False)["input_ids"])
        print(f"\n=== opening {i + 1}: {opening!r}")
        for seed in SEEDS:
            for name, proc in arms.items():
                progress(f"[{time.perf_counter() - t0:5.0f}s] opening {i + 1}/{len(OPENINGS)}, seed {seed}, {name}")
                r = guided.generate(
                    model, tokenizer, base, None, max_new_tokens=40, temperature=1.0, top_p=0.9,
                    seed=seed, processors=[proc] if proc else [],
                )
                print(f"  seed {seed} {name:12s} VADER {compound(r.text):+.3f}  {r.stats.tokens_per_s:4.1f} tok/s"
                      f" | ...{r.text.strip()!r}")

    print(f"\nPart 2: composed with the regex {SENTENCE} (greedy)")
    spec = guided.Regex(SENTENCE)
    question = "Write a one-sentence review of a movie you watched recently."
    for name, proc in arms.items():
        progress(f"[{time.perf_counter() - t0:5.0f}s] one sentence, {name}")
        calls_before = proc.calls if proc else 0
        r = guided.generate(model, tokenizer, question, spec, max_new_tokens=60, processors=[proc] if proc else [])
        assert re.fullmatch(SENTENCE, r.text), r.text  # guidance never breaks the grammar
        calls = (proc.calls - calls_before) if proc else 0
        print(f"  {name:12s} VADER {compound(r.text):+.3f}  matches: yes  {len(r.token_ids)} tokens,"
              f" {calls} classifier calls ({calls * TOP_K} candidate texts at most) | {r.text!r}")


if __name__ == "__main__":
    main()
