"""Regex-constrained generation with the default offline model.

Four prompts, each with a regex its answer must match (a phone number, a fixed
sentence with a free word, a rating, a JSON-shaped string); every output is checked
with ``re.fullmatch`` and printed with its speed and mask cost per token.

    python examples/regex_generate.py
"""

import re

import torch

import guided

torch.set_num_threads(1)
model, tokenizer = guided.models.load_default_model()

tasks = [
    ("Give me a US phone number for a pizza place.", r"\(\d{3}\) \d{3}-\d{4}"),
    ("What is the capital of France?", r"The capital of France is [A-Z][a-z]+\."),
    ("Rate this movie review from 1 to 5: 'Loved every minute!'", r"[1-5]"),
    ("Give a person as JSON.", r'\{"name": "[A-Z][a-z]{1,15}", "age": [1-9][0-9]?\}'),
]
for prompt, pattern in tasks:
    result = guided.generate(model, tokenizer, prompt, guided.Regex(pattern), max_new_tokens=64)
    assert re.fullmatch(pattern, result.text)
    s = result.stats
    print(f"{prompt}\n  -> {result.text!r}")
    print(f"     {s.new_tokens} tokens, {s.tokens_per_s:.1f} tok/s, mask {s.mask_us_per_token:.0f} us/token\n")
