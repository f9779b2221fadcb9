"""Watermark quality and detection speed on the default model (SmolLM2-135M), CPU.

Everything uses one key (``KEY``), gamma 0.25, delta 2.0, lefthash seeding with a
context of one token, and a detection threshold of z >= 4. Generation uses HF
``model.generate``, batched (``--batch`` prompts per call, left padding). Sampling is
plain multinomial sampling at temperature 1.0 with top-k and top-p off (``top_k=0``,
``top_p=1.0``), as in Kirchenbauer et al. 2023, so the watermark sees the model's
whole distribution. ``torch.manual_seed(seed + call)`` runs before every call, so the
watermarked and the plain arm of a batch start from the same seed.

1. Free text: ``--prompts`` (50) short instructions from the list below, wrapped in
   the chat template; exactly ``--new-tokens`` (200) new tokens each
   (``min_new_tokens = max_new_tokens``, so EOS is suppressed).

   * TPR at z >= 4 of the watermarked generations (detected on the new token ids);
   * FPR of the same prompts generated without the processor, and of human-written
     English: the license texts in ``/usr/share/common-licenses`` (when present) and
     the docstrings of the standard library and numpy (about 4,000 chunks), cut into
     ``--new-tokens``-token chunks;
   * perplexity: the same model, with no processor, scores the new tokens given
     the prompt (one forward pass); PPL = exp(mean NLL over all new tokens), for the
     watermarked and the plain arm, and their ratio;
   * robustness: 10% and 25% of each watermarked text's tokens replaced by uniform
     random vocabulary ids (positions and ids from ``numpy.random.default_rng(seed)``),
     then detected on the ids.

   An empirical FPR of 1e-3 cannot be measured with a few hundred negatives; the
   table gives the count and the rule-of-three 95% upper bound (the tests check the
   z-test's calibration on random token sequences).

2. Schema-constrained JSON: ``--json-outputs`` (60) outputs over six schemas, four
   with free-text string fields and two structure-heavy ones (enums, booleans, numbers,
   dates, patterned short strings), compact whitespace, at most ``--json-tokens`` (120) new
   tokens, generated with ``WatermarkLogitsProcessor(..., guide=guide)`` (a fresh one
   per call; it applies the grammar itself). Naive detection (``detect(ids)``) vs
   grammar-aware detection (``detect(ids, guide=guide)``), and the same from the
   decoded text (re-tokenised: positions where only the split of a forced string was
   open are not scored): TPR, z, tokens scored and forced.
   The same prompts generated with ``guided.LogitsProcessor`` alone (no watermark)
   give the FPR of every detector. A second table splits the results by schema.

3. Detection throughput on CPU: ``--throughput-texts`` (1,000) texts of
   ``--throughput-len`` (1,000) token ids, windows of the human-text token stream:
   ``detect_batch`` and ``detect`` one at a time on ids, then both on the decoded
   strings (tokenisation included, one ``encode`` per string), the tokeniser alone,
   and one batched tokeniser call followed by ``detect_batch``. Best of ``--repeats``.

Progress goes to stderr, the tables (markdown) to stdout.

Usage::

    python benchmarks/watermark_eval.py [--prompts 50] [--new-tokens 200] [--json-outputs 60]
        [--batch 25] [--threads 1] [--seed 0] [--quick] [--skip-free-text] [--skip-json] [--skip-throughput]
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.util
import json
import math
import os
import re
import shlex
import statistics
import sys
import sysconfig
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers import LogitsProcessorList  # noqa: E402

import guided  # noqa: E402
from guided.watermark import WatermarkDetector, WatermarkLogitsProcessor  # noqa: E402

KEY = b"watermark-eval-key-0001"
GAMMA, DELTA, Z_THRESHOLD = 0.25, 2.0, 4.0
TARGET_TPR, TARGET_FPR, TARGET_JSON_TPR, TARGET_TOKENS_PER_S = 0.98, 1e-3, 0.9, 1e6
REPLACE_FRACTIONS = (0.10, 0.25)

PROMPTS = [
    "Write a short story about a lighthouse keeper.",
    "Explain how a rainbow forms.",
    "Describe your ideal weekend.",
    "Write a letter to a friend who moved to another country.",
    "Give some advice to a student starting university.",
    "Explain why the sky is blue.",
    "Write a short story about a dragon who is afraid of fire.",
    "Describe a busy market in the morning.",
    "Explain how bread is made.",
    "Write a poem about the sea.",
    "What are the benefits of regular exercise?",
    "Describe the life cycle of a butterfly.",
    "Write a short story about a robot learning to paint.",
    "Explain how a bicycle works.",
    "Describe a thunderstorm from the point of view of a cat.",
    "Write a product description for a new kind of umbrella.",
    "Explain what photosynthesis is.",
    "Write a diary entry of an astronaut on the Moon.",
    "Give tips for growing tomatoes at home.",
    "Explain the rules of chess to a beginner.",
    "Write a short story about a lost dog finding its way home.",
    "Describe the city of Paris.",
    "Explain how vaccines work.",
    "Write a speech for a school graduation.",
    "Describe how to make a cup of tea.",
    "Write a short mystery story set on a train.",
    "Explain the water cycle.",
    "What makes a good friend?",
    "Write a short fairy tale about a clever fox.",
    "Explain how the internet works.",
    "Describe a walk through an autumn forest.",
    "Write a review of an imaginary restaurant.",
    "Explain why we need sleep.",
    "Write a short story about a time traveler who visits ancient Rome.",
    "Give advice for a job interview.",
    "Explain how airplanes fly.",
    "Describe your favorite season and why you like it.",
    "Write a news report about a town festival.",
    "Explain the history of the printing press.",
    "Write a short story about two friends building a treehouse.",
    "Explain how to save money on groceries.",
    "Describe the planet Mars.",
    "Write a motivational message for someone learning to code.",
    "Explain how volcanoes erupt.",
    "Write a short story about a musician who loses her voice.",
    "Describe a day in the life of a farmer.",
    "Explain the importance of recycling.",
    "Write a letter to your future self.",
    "Explain how the heart pumps blood.",
    "Write a short adventure story set in the jungle.",
    "Describe how a library is organized.",
    "Explain what makes a good teacher.",
    "Write a short story about a baker who bakes magical bread.",
    "Explain how electricity reaches our homes.",
    "Describe the view from the top of a mountain.",
]


def _str(**kw) -> dict:
    return {"type": "string", **kw}


JSON_TASKS = [
    {
        "name": "review",
        "schema": {
            "type": "object",
            "properties": {
                "title": _str(maxLength=80),
                "review": _str(minLength=100, maxLength=400),
                "rating": {"type": "integer", "minimum": 1, "maximum": 5},
                "pros": {"type": "array", "items": _str(maxLength=60), "maxItems": 3},
            },
            "required": ["title", "review", "rating", "pros"],
            "additionalProperties": False,
        },
        "template": "Write a product review of a {} as JSON with the keys title, review, rating "
                    "(1 to 5) and pros (a list of short strings).",
        "subjects": ["stainless steel water bottle", "pair of noise-cancelling headphones",
                     "budget mechanical keyboard", "camping tent for two people", "electric kettle",
                     "standing desk", "robot vacuum cleaner", "pair of running shoes",
                     "cast iron skillet", "wireless mouse", "board game for families", "smart watch",
                     "coffee grinder"],
    },
    {
        "name": "story",
        "schema": {
            "type": "object",
            "properties": {
                "title": _str(maxLength=60),
                "genre": {"enum": ["fantasy", "mystery", "science fiction", "romance", "adventure",
                                   "horror", "comedy"]},
                "story": _str(minLength=200, maxLength=600),
            },
            "required": ["title", "genre", "story"],
            "additionalProperties": False,
        },
        "template": "Write a very short story about {} as JSON with the keys title, genre and story.",
        "subjects": ["a lighthouse keeper", "a talking cat", "a lost key", "the last tree on Earth",
                     "a haunted library", "a chef who cannot taste", "a journey to the Moon",
                     "a secret garden", "a clockmaker's apprentice", "a storm at sea",
                     "a village of giants", "a detective on holiday", "a dragon's birthday"],
    },
    {
        "name": "recipe",
        "schema": {
            "type": "object",
            "properties": {
                "name": _str(maxLength=60),
                "description": _str(minLength=100, maxLength=400),
                "ingredients": {"type": "array", "items": _str(maxLength=40), "minItems": 3,
                                "maxItems": 6},
                "minutes": {"type": "integer", "minimum": 1, "maximum": 240},
            },
            "required": ["name", "description", "ingredients", "minutes"],
            "additionalProperties": False,
        },
        "template": "Describe a recipe for {} as JSON with the keys name, description, "
                    "ingredients and minutes.",
        "subjects": ["pancakes", "tomato soup", "banana bread", "vegetable curry", "lemonade",
                     "apple pie", "fried rice", "guacamole", "chocolate cookies", "lentil stew",
                     "pizza dough", "Greek salad", "mushroom risotto"],
    },
    {
        "name": "travel",
        "schema": {
            "type": "object",
            "properties": {
                "city": _str(maxLength=40),
                "country": _str(maxLength=40),
                "description": _str(minLength=150, maxLength=500),
                "best_month": {"enum": ["January", "February", "March", "April", "May", "June",
                                        "July", "August", "September", "October", "November",
                                        "December"]},
            },
            "required": ["city", "country", "description", "best_month"],
            "additionalProperties": False,
        },
        "template": "Describe {} for a travel guide as JSON with the keys city, country, "
                    "description and best_month.",
        "subjects": ["Lisbon", "Kyoto", "Cape Town", "Vancouver", "Marrakesh", "Prague", "Buenos Aires",
                     "Sydney", "Istanbul", "Reykjavik", "Hanoi", "Edinburgh", "Mexico City"],
    },
]

# Two structure-heavy tasks: mostly enums, booleans, numbers and short strings, where
# most choices are between a few allowed tokens (what grammar-aware detection is for).
_LEVEL = {"enum": ["very low", "low", "medium", "high", "very high"]}
JSON_TASKS += [
    {
        "name": "survey",
        "schema": {
            "type": "object",
            "properties": {
                "respondent_age_group": {"enum": ["18-24", "25-34", "35-44", "45-54", "55-64", "65+"]},
                "overall_satisfaction": _LEVEL,
                "would_recommend_to_a_friend": {"type": "boolean"},
                "number_of_visits_this_year": {"type": "integer", "minimum": 0, "maximum": 99},
                "value_for_money": _LEVEL,
                "staff_friendliness": _LEVEL,
                "cleanliness_rating": {"type": "integer", "minimum": 1, "maximum": 10},
                "preferred_contact_method": {"enum": ["email", "phone", "text message", "post", "none"]},
                "first_visit_date": {"type": "string", "format": "date"},
                "member_of_loyalty_program": {"type": "boolean"},
                "one_word_summary": _str(maxLength=15),
            },
            "required": ["respondent_age_group", "overall_satisfaction", "would_recommend_to_a_friend",
                         "number_of_visits_this_year", "value_for_money", "staff_friendliness",
                         "cleanliness_rating", "preferred_contact_method", "first_visit_date",
                         "member_of_loyalty_program", "one_word_summary"],
            "additionalProperties": False,
        },
        "template": "Fill in a customer survey about {} as JSON.",
        "subjects": ["a local gym", "a pizza restaurant", "a public library", "a hair salon", "a bakery",
                     "a cinema", "a dentist", "a car wash", "a bookshop", "a swimming pool"],
    },
    {
        "name": "order",
        "schema": {
            "type": "object",
            "properties": {
                "order_status": {"enum": ["pending", "paid", "shipped", "delivered", "cancelled", "returned"]},
                "priority": {"enum": ["low", "normal", "high", "urgent"]},
                "items": {"type": "array", "minItems": 2, "maxItems": 4, "items": {
                    "type": "object",
                    "properties": {
                        "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
                        "quantity": {"type": "integer", "minimum": 1, "maximum": 20},
                        "gift_wrapped": {"type": "boolean"},
                        "size": {"enum": ["XS", "S", "M", "L", "XL"]},
                    },
                    "required": ["sku", "quantity", "gift_wrapped", "size"],
                    "additionalProperties": False,
                }},
                "express_delivery": {"type": "boolean"},
                "shipping_region": {"enum": ["north", "south", "east", "west", "central", "overseas"]},
            },
            "required": ["order_status", "priority", "items", "express_delivery", "shipping_region"],
            "additionalProperties": False,
        },
        "template": "Write an example online order for {} as JSON.",
        "subjects": ["t-shirts", "running socks", "winter jackets", "baseball caps", "yoga pants",
                     "rain coats", "hoodies", "swimwear", "gloves", "scarves"],
    },
]

# Human-written English beside the licenses: the docstrings of the Python standard
# library and of numpy, read from their source files (``ast``, nothing imported).
DOC_PACKAGES = ["stdlib", "numpy"]
SKIP_DIRS = {"test", "tests", "testing", "idle_test", "lib2to3", "site-packages", "__pycache__"}
LICENSE_DIR = "/usr/share/common-licenses"


def log(msg: str) -> None:
    print(f"[wm] {msg}", file=sys.stderr, flush=True)


def md_table(headers: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# -- generation ----------------------------------------------------------------------------


def chat(tok, instruction: str) -> str:
    return tok.apply_chat_template([{"role": "user", "content": instruction}],
                                   add_generation_prompt=True, tokenize=False)


def strip_after_eos(row: list[int], eos: int) -> list[int]:
    """The model's own tokens: everything before the first EOS (later ones are padding)."""
    return row[: row.index(eos)] if eos in row else row


@torch.inference_mode()
def generate(model, tok, prompts: list[str], make_processor, seed: int, max_new: int,
             min_new: int | None = None):
    """One batched sampled ``generate`` call; returns (output ids, attention mask, prompt
    length). ``make_processor()`` builds this call's processor (or returns None)."""
    inputs = tok(prompts, return_tensors="pt", padding=True)
    proc = make_processor()
    torch.manual_seed(seed)
    out = model.generate(
        **inputs,
        logits_processor=LogitsProcessorList([proc]) if proc is not None else None,
        do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
        max_new_tokens=max_new, min_new_tokens=min_new,
        pad_token_id=tok.pad_token_id,
    )
    mask = torch.cat([inputs["attention_mask"],
                      torch.ones(out.shape[0], out.shape[1] - inputs["input_ids"].shape[1],
                                 dtype=inputs["attention_mask"].dtype)], dim=1)
    return out, mask, inputs["input_ids"].shape[1]


def batches(items: list, size: int) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)]


@torch.inference_mode()
def new_token_nll(model, out: torch.Tensor, mask: torch.Tensor, prompt_len: int, sub_batch: int = 5):
    """Per row: the summed NLL of the new tokens given the prompt, and their count, scored
    by the plain model (no processor) in one forward pass per ``sub_batch`` rows."""
    sums, counts = [], []
    for s in range(0, out.shape[0], sub_batch):
        ids, am = out[s : s + sub_batch], mask[s : s + sub_batch]
        pos = (am.cumsum(-1) - 1).clamp(min=0)  # as generate numbers left-padded rows
        logits = model(input_ids=ids, attention_mask=am, position_ids=pos).logits
        logp = torch.log_softmax(logits[:, prompt_len - 1 : -1].float(), dim=-1)
        target = ids[:, prompt_len:]
        nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
        sums += nll.sum(dim=1).tolist()
        counts += [target.shape[1]] * target.shape[0]
    return sums, counts


# -- human-written text ----------------------------------------------------------------------


def _normalize(text: str) -> str:
    paragraphs = re.split(r"\n\s*\n", text)
    return "\n\n".join(" ".join(p.split()) for p in paragraphs if p.strip())


def human_documents() -> list[tuple[str, str]]:
    """(source, text): each distinct license under LICENSE_DIR, then the docstrings of
    each source file of DOC_PACKAGES, with repeated docstrings dropped."""
    docs, seen = [], set()
    if os.path.isdir(LICENSE_DIR):
        for name in sorted(os.listdir(LICENSE_DIR)):
            try:
                with open(os.path.join(LICENSE_DIR, name), encoding="utf-8", errors="replace") as f:
                    text = _normalize(f.read())
            except (OSError, IsADirectoryError):
                continue
            digest = hashlib.sha256(text.encode()).hexdigest()
            if text and digest not in seen:  # GPL -> GPL-3 and the like are symlinks
                seen.add(digest)
                docs.append(("license", text))
    for package in DOC_PACKAGES:
        for text in package_docstrings(package, seen):
            docs.append((f"{package} docstrings", text))
    return docs


def package_docstrings(package: str, seen: set) -> list[str]:
    """One text per source file of ``package`` ("stdlib" or an installed package): its
    module, class and function docstrings of more than 40 characters, each docstring
    once across everything read (``seen``)."""
    if package == "stdlib":
        root = sysconfig.get_paths()["stdlib"]
    else:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            return []
        root = spec.submodule_search_locations[0]
    texts = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            try:
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    tree = ast.parse(f.read())
            except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
                continue
            parts = []
            for node in ast.walk(tree):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    doc = ast.get_docstring(node)
                    if doc and len(doc) > 40 and doc not in seen:
                        seen.add(doc)
                        parts.append(_normalize(doc))
            if parts:
                texts.append("\n\n".join(parts))
    return texts


def token_chunks(tok, docs: list[tuple[str, str]], length: int):
    """Consecutive ``length``-token chunks of each document (the tail is dropped); also
    the whole token stream and the chunk count per source."""
    chunks, stream, per_source = [], [], {}
    for source, text in docs:
        ids = tok.encode(text, add_special_tokens=False)
        stream += ids
        for s in range(0, len(ids) - length + 1, length):
            chunks.append(ids[s : s + length])
            per_source[source] = per_source.get(source, 0) + 1
    return chunks, stream, per_source


# -- detection summaries -----------------------------------------------------------------------


def replace_tokens(ids: list[int], frac: float, vocab_size: int, rng: np.random.Generator) -> list[int]:
    """``ids`` with ``round(frac * len)`` positions, drawn without replacement, set to
    uniform random vocabulary ids."""
    out = np.array(ids, dtype=np.int64)
    k = int(round(frac * len(out)))
    pos = rng.choice(len(out), size=k, replace=False)
    out[pos] = rng.integers(0, vocab_size, size=k)
    return out.tolist()


def rule_of_three(flagged: int, n: int) -> str:
    """An upper 95% bound on a rate with ``flagged`` of ``n`` (3/n when none)."""
    if n == 0:
        return "n/a"
    if flagged == 0:
        return f"<= {3 / n:.3g}"
    return f"~{flagged / n:.3g}"


def summary_row(label: str, results, rate_name: str) -> list:
    z = [r.z_score for r in results]
    flagged = sum(r.is_watermarked for r in results)
    n = len(results)
    return [label, n, f"{statistics.mean(r.num_tokens_scored for r in results):.1f}",
            f"{statistics.mean(r.green_fraction for r in results):.3f}",
            f"{statistics.mean(z):.2f}", f"{min(z):.2f}", f"{max(z):.2f}",
            f"{flagged}/{n}", f"{rate_name} {flagged / n:.3f}"]


SUMMARY_HEADERS = ["set", "n", "tokens scored (mean)", "green fraction (mean)", "z mean", "z min",
                   "z max", "z >= 4", "rate"]


# -- 1. free text --------------------------------------------------------------------------------


def eval_free_text(model, tok, det, args) -> list[int]:
    """Section 1; returns the human-text token stream (reused by section 3)."""
    prompts = [chat(tok, p) for p in (PROMPTS * (args.prompts // len(PROMPTS) + 1))[: args.prompts]]
    vocab_size = len(tok)
    arms = {"watermarked": lambda: WatermarkLogitsProcessor(vocab_size, KEY, gamma=GAMMA, delta=DELTA),
            "unwatermarked": lambda: None}
    gens = {arm: [] for arm in arms}
    nll = {arm: ([], []) for arm in arms}
    groups = batches(prompts, args.batch)
    t0 = time.perf_counter()
    for b, group in enumerate(groups):
        for arm, make in arms.items():
            t = time.perf_counter()
            out, mask, plen = generate(model, tok, group, make, args.seed + b, args.new_tokens, args.new_tokens)
            gens[arm] += out[:, plen:].tolist()
            s, c = new_token_nll(model, out, mask, plen)
            nll[arm][0].extend(s)
            nll[arm][1].extend(c)
            log(f"free text batch {b + 1}/{len(groups)} {arm}: {len(group)} x {out.shape[1] - plen} tokens, "
                f"{time.perf_counter() - t:.1f} s")
    gen_s = time.perf_counter() - t0

    log("human text: collecting and tokenising")
    chunks, stream, per_source = token_chunks(tok, human_documents(), args.new_tokens)
    res = {arm: det.detect_batch(gens[arm]) for arm in arms}
    human = det.detect_batch(chunks)
    rng = np.random.default_rng(args.seed)
    attacked = {f: det.detect_batch([replace_tokens(g, f, vocab_size, rng) for g in gens["watermarked"]])
                for f in REPLACE_FRACTIONS}

    wm, un = res["watermarked"], res["unwatermarked"]
    print(f"\n## 1. Free text ({len(prompts)} prompts, {args.new_tokens} new tokens each, "
          f"gamma {GAMMA}, delta {DELTA}, z >= {Z_THRESHOLD:g})\n")
    print(f"Generation: {gen_s:.0f} s for both arms. Human text: {len(chunks)} chunks of "
          f"{args.new_tokens} tokens ({', '.join(f'{k} {v}' for k, v in per_source.items())}).\n")
    rows = [summary_row("watermarked", wm, "TPR"),
            summary_row("unwatermarked (same prompts)", un, "FPR"),
            summary_row("human-written", human, "FPR")]
    rows += [summary_row(f"watermarked, {int(f * 100)}% tokens replaced", attacked[f], "TPR")
             for f in REPLACE_FRACTIONS]
    print(md_table(SUMMARY_HEADERS, rows))

    ppl = {arm: math.exp(sum(nll[arm][0]) / sum(nll[arm][1])) for arm in arms}
    per_text = {arm: statistics.median(math.exp(s / c) for s, c in zip(*nll[arm])) for arm in arms}
    print("\nPerplexity of the new tokens under the plain model (no processor), given the prompt:\n")
    print(md_table(["arm", "PPL = exp(mean NLL)", "median per-text PPL"],
                   [[arm, f"{ppl[arm]:.2f}", f"{per_text[arm]:.2f}"] for arm in arms]
                   + [["ratio watermarked / unwatermarked", f"{ppl['watermarked'] / ppl['unwatermarked']:.3f}",
                       f"{per_text['watermarked'] / per_text['unwatermarked']:.3f}"]]))

    tpr = sum(r.is_watermarked for r in wm) / len(wm)
    negatives = un + human
    fp = sum(r.is_watermarked for r in negatives)
    print(f"\nTarget TPR >= {TARGET_TPR} at FPR <= {TARGET_FPR:g}: TPR {tpr:.3f} "
          f"({'MET' if tpr >= TARGET_TPR else 'MISSED'}); false positives {fp}/{len(negatives)} "
          f"(95% bound {rule_of_three(fp, len(negatives))}; nominal one-sided normal tail at z = 4: 3.2e-05)")
    print("\nExamples (first 240 characters):\n")
    for arm in arms:
        text = tok.decode(gens[arm][0], skip_special_tokens=True)
        print(f"- {arm}, z = {res[arm][0].z_score:.2f}: {text[:240]!r}")
    return stream


# -- 2. schema-constrained JSON ------------------------------------------------------------------


def json_jobs(n: int) -> list[tuple[dict, str]]:
    """(task, instruction), round-robin over the tasks."""
    jobs = []
    for i in range(n):
        task = JSON_TASKS[i % len(JSON_TASKS)]
        subject = task["subjects"][(i // len(JSON_TASKS)) % len(task["subjects"])]
        jobs.append((task, task["template"].format(subject)))
    return jobs


def eval_json(model, tok, det, args) -> None:
    vocab_size = len(tok)
    eos = tok.eos_token_id
    guides = {t["name"]: guided.compile(guided.JsonSchema(t["schema"], whitespace="compact"), tok)
              for t in JSON_TASKS}
    by_task: dict[str, list[str]] = {}
    for task, instruction in json_jobs(args.json_outputs):
        by_task.setdefault(task["name"], []).append(chat(tok, instruction))
    calls = [(name, group) for name, prompts in by_task.items() for group in batches(prompts, args.batch)]
    arms = {  # "watermarked" is the default (spelling="hard" with a guide)
        "watermarked": lambda g: (lambda: WatermarkLogitsProcessor(vocab_size, KEY, gamma=GAMMA, delta=DELTA, guide=g)),
        "watermarked, spelling=soft": lambda g: (lambda: WatermarkLogitsProcessor(
            vocab_size, KEY, gamma=GAMMA, delta=DELTA, guide=g, spelling="soft")),
        "unwatermarked": lambda g: (lambda: guided.LogitsProcessor(g)),
    }
    outputs = {arm: [] for arm in arms}  # (task name, new ids)
    t0 = time.perf_counter()
    for c, (name, group) in enumerate(calls):
        for arm, factory in arms.items():
            t = time.perf_counter()
            out, _, plen = generate(model, tok, group, factory(guides[name]), args.seed + 1000 + c, args.json_tokens)
            outputs[arm] += [(name, strip_after_eos(row, eos)) for row in out[:, plen:].tolist()]
            log(f"json call {c + 1}/{len(calls)} ({name}) {arm}: {len(group)} rows, "
                f"{time.perf_counter() - t:.1f} s")
    gen_s = time.perf_counter() - t0

    log("json: detection")
    detected = {}
    for arm, rows in outputs.items():
        detected[arm] = {
            "naive": [det.detect(ids) for _, ids in rows],
            "grammar-aware": [det.detect(ids, guide=guides[name]) for name, ids in rows],
            # The published text, re-tokenised: where only the split was open it is
            # the tokenizer's, and those positions are not scored.
            "grammar-aware, from text": [det.detect(tok.decode(ids), guide=guides[name]) for name, ids in rows],
        }

    wm_rows = outputs["watermarked"]
    complete = sum(_is_json(tok.decode(ids)) for _, ids in wm_rows)
    mismatches = sum(r.grammar_mismatch_at is not None for r in detected["watermarked"]["grammar-aware"])
    print(f"\n## 2. Schema-constrained JSON ({len(wm_rows)} outputs, {len(JSON_TASKS)} schemas "
          f"({', '.join(by_task)}), compact whitespace, at most {args.json_tokens} new tokens)\n")
    print(f"Generation: {gen_s:.0f} s for {len(arms)} arms. Watermarked outputs (default, spelling=hard): mean "
          f"{statistics.mean(len(ids) for _, ids in wm_rows):.1f} new tokens, {complete}/{len(wm_rows)} "
          f"complete JSON documents (the rest hit the token limit); grammar mismatches in detection: "
          f"{mismatches}.\n")
    rows = []
    for mode in detected["watermarked"]:
        w, u = detected["watermarked"][mode], detected["unwatermarked"][mode]
        tp, fp = sum(r.is_watermarked for r in w), sum(r.is_watermarked for r in u)
        rows.append([mode, f"{tp}/{len(w)} = {tp / len(w):.3f}",
                     f"{statistics.mean(r.z_score for r in w):.2f}", f"{statistics.median(r.z_score for r in w):.2f}",
                     f"{min(r.z_score for r in w):.2f}",
                     f"{statistics.mean(r.num_tokens_scored for r in w):.1f}",
                     f"{statistics.mean(r.num_forced for r in w):.1f}",
                     f"{fp}/{len(u)}", f"{statistics.mean(r.z_score for r in u):.2f}",
                     f"{max(r.z_score for r in u):.2f}"])
    print(md_table(["detection", "TPR (z >= 4)", "z mean", "z median", "z min", "tokens scored (mean)",
                    "forced tokens (mean)", "FPR, unwatermarked JSON", "z mean, unwm.", "z max, unwm."], rows))
    print("\nTokens scored: positions with a real choice (grammar-aware). \"from text\": the decoded "
          "output, re-tokenised by the detector.")
    print("\nBy schema (watermarked outputs): the free-text-heavy schemas first, the structure-heavy last.\n")
    task_rows = []
    for name in by_task:
        idx = [i for i, (n, _) in enumerate(wm_rows) if n == name]
        nv = [detected["watermarked"]["naive"][i] for i in idx]
        gv = [detected["watermarked"]["grammar-aware"][i] for i in idx]
        tv = [detected["watermarked"]["grammar-aware, from text"][i] for i in idx]
        task_rows.append([name, len(idx), f"{sum(r.is_watermarked for r in nv)}/{len(idx)}",
                          f"{sum(r.is_watermarked for r in gv)}/{len(idx)}",
                          f"{sum(r.is_watermarked for r in tv)}/{len(idx)}",
                          f"{statistics.mean(r.z_score for r in nv):.2f}", f"{statistics.mean(r.z_score for r in gv):.2f}",
                          f"{statistics.mean(r.z_score for r in tv):.2f}",
                          f"{statistics.mean(r.num_tokens_scored for r in gv):.1f}",
                          f"{statistics.mean(r.num_forced for r in gv):.1f}",
                          f"{statistics.mean(r.num_tokens_scored for r in tv):.1f}"])
    print(md_table(["schema", "n", "naive TPR", "grammar-aware TPR", "from text TPR", "naive z mean",
                    "grammar-aware z mean", "from text z mean", "scored (aware)", "forced", "scored (text)"],
                   task_rows))
    n_tpr = sum(r.is_watermarked for r in detected["watermarked"]["naive"]) / len(wm_rows)
    for mode in detected["watermarked"]:
        if mode == "naive":
            continue
        g_tpr = sum(r.is_watermarked for r in detected["watermarked"][mode]) / len(wm_rows)
        print(f"\nTarget TPR >= {TARGET_JSON_TPR} and above naive, {mode}: {g_tpr:.3f} vs {n_tpr:.3f} "
              f"({'MET' if g_tpr >= TARGET_JSON_TPR and g_tpr > n_tpr else 'MISSED'})")
    name, ids = wm_rows[0]
    print(f"\nExample ({name}, grammar-aware z = {detected['watermarked']['grammar-aware'][0].z_score:.2f}): "
          f"{tok.decode(ids)[:240]!r}")

    arm = "watermarked, spelling=soft"
    soft_rows = outputs[arm]
    print("\n### With spelling=\"soft\" (splits of fixed text only biased, like any other position)\n")
    print(f"Complete JSON documents: {sum(_is_json(tok.decode(ids)) for _, ids in soft_rows)}/{len(soft_rows)}; "
          f"mean {statistics.mean(len(ids) for _, ids in soft_rows):.1f} new tokens.\n")
    rows = []
    for name in list(by_task) + ["all"]:
        idx = [i for i, (n, _) in enumerate(soft_rows) if name in (n, "all")]
        cells = [name, len(idx)]
        for mode in detected[arm]:
            rs = [detected[arm][mode][i] for i in idx]
            cells += [f"{sum(r.is_watermarked for r in rs)}/{len(idx)}", f"{statistics.mean(r.z_score for r in rs):.2f}"]
        rows.append(cells)
    print(md_table(["schema", "n"] + [f"{m} {c}" for m in detected[arm] for c in ("TPR", "z mean")], rows))


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


# -- 3. throughput -------------------------------------------------------------------------------


def best_time(fn, repeats: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def eval_throughput(tok, det, stream: list[int], args) -> None:
    n, length = args.throughput_texts, args.throughput_len
    rng = np.random.default_rng(args.seed)
    stream = np.asarray(stream * (length // max(len(stream), 1) + 2), dtype=np.int64)
    starts = rng.integers(0, len(stream) - length, size=n)
    ids = [stream[s : s + length].tolist() for s in starts]
    texts = tok.batch_decode(ids)
    det.detect_batch(ids[:10])  # warm-up
    [det.detect(t) for t in texts[:10]]
    modes = [
        ("detect_batch, token ids", lambda: det.detect_batch(ids)),
        ("detect one at a time, token ids", lambda: [det.detect(x) for x in ids]),
        ("detect_batch, strings (tokenisation included)", lambda: det.detect_batch(texts)),
        ("detect one at a time, strings", lambda: [det.detect(t) for t in texts]),
        ("tokeniser alone (encode each string)", lambda: [tok.encode(t, add_special_tokens=False) for t in texts]),
        ("one batched tokeniser call, then detect_batch on the ids",
         lambda: det.detect_batch(tok(texts, add_special_tokens=False)["input_ids"])),
    ]
    rows = []
    for label, fn in modes:
        secs, out = best_time(fn, args.repeats)
        tokens = sum(len(x) for x in out) if label.startswith("tokeniser") else sum(r.num_tokens for r in out)
        rows.append([label, n, f"{tokens:,}", f"{secs:.3f}", f"{tokens / secs:,.0f}"])
        log(f"throughput {label}: {tokens / secs:,.0f} tokens/s")
    print(f"\n## 3. Detection throughput (CPU, {n} texts of {length} token ids, windows of the human "
          f"text; best of {args.repeats})\n")
    print(md_table(["mode", "texts", "tokens", "seconds", "tokens/s"], rows))
    best = float(rows[0][4].replace(",", ""))
    print(f"\nTarget >= {TARGET_TOKENS_PER_S:,.0f} tokens/s (detect_batch on ids): {best:,.0f} "
          f"({'MET' if best >= TARGET_TOKENS_PER_S else 'MISSED'})")


# -- main --------------------------------------------------------------------------------------


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", type=int, default=50, help="free-text generations per arm")
    ap.add_argument("--new-tokens", type=int, default=200, help="free-text length (also the human chunk length)")
    ap.add_argument("--json-outputs", type=int, default=60)
    ap.add_argument("--json-tokens", type=int, default=120, help="max new tokens of a JSON output")
    ap.add_argument("--batch", type=int, default=25, help="prompts per model.generate call")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (1: on a shared 2-core machine, 2 threads ran up to 9x slower)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--throughput-texts", type=int, default=1000)
    ap.add_argument("--throughput-len", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3, help="throughput: best of this many runs")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 8 prompts, 64 tokens, 8 JSON outputs of <= 64 tokens, 200 texts, 1 repeat")
    ap.add_argument("--skip-free-text", action="store_true")
    ap.add_argument("--skip-json", action="store_true")
    ap.add_argument("--skip-throughput", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.prompts, args.new_tokens, args.json_outputs, args.json_tokens = 8, 64, 8, 64
        args.throughput_texts, args.repeats = 200, 1
    return args


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    t_start = time.perf_counter()
    model, tok = guided.models.load_default_model()
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    det = WatermarkDetector(tok, KEY, gamma=GAMMA, delta=DELTA, z_threshold=Z_THRESHOLD)

    print("# Watermark evaluation\n")
    print(f"Command: `python {' '.join(shlex.quote(a) for a in sys.argv)}`\n")
    print(f"Model {guided.models.DEFAULT_MODEL_NAME} ({model.dtype}), torch {torch.__version__}, "
          f"torch threads {torch.get_num_threads()}, seed {args.seed}, batch {args.batch}. Sampling: "
          "do_sample, temperature 1.0, top_k 0, top_p 1.0. Watermark: gamma "
          f"{GAMMA}, delta {DELTA}, lefthash, context width 1, repeated n-grams scored once, "
          f"key {KEY!r}.")

    if args.skip_free_text:
        stream = token_chunks(tok, human_documents(), args.new_tokens)[1]
    else:
        stream = eval_free_text(model, tok, det, args)
    if not args.skip_json:
        eval_json(model, tok, det, args)
    if not args.skip_throughput:
        eval_throughput(tok, det, stream, args)
    print(f"\nTotal wall time: {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
