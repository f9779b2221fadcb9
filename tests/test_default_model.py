"""End to end with the real default model (SmolLM2-135M-Instruct, offline)."""

from __future__ import annotations

import re

import pytest
import torch

import guided

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def default_model():
    torch.set_num_threads(1)
    return guided.models.load_default_model(verbose=False)


@pytest.mark.parametrize(
    "prompt, pattern",
    [
        ("Give me a US phone number for a pizza place.", r"\(\d{3}\) \d{3}-\d{4}"),
        ("What is the capital of France? One word.", r"[A-Z][a-z]{1,20}"),
        ("Write an email address for Ada Lovelace.", r"[a-z]+(\.[a-z]+)?@[a-z]+\.(com|org)"),
        ("Give a person as JSON.", r'\{"name": "[A-Z][a-z]{1,15}", "age": [1-9][0-9]?\}'),
    ],
)
def test_generation_matches(default_model, prompt, pattern):
    model, tokenizer = default_model
    r = guided.generate(model, tokenizer, prompt, guided.Regex(pattern), max_new_tokens=48)
    assert re.fullmatch(pattern, r.text), r.text
    assert r.finish_reason in ("eos", "complete")


def test_constraint_keeps_the_models_knowledge(default_model):
    model, tokenizer = default_model
    spec = guided.Regex(r"The capital of France is (Berlin|London|Madrid|Paris|Rome)\.")
    r = guided.generate(model, tokenizer, "What is the capital of France?", spec)
    assert r.text == "The capital of France is Paris."


def test_hf_generate_with_processor(default_model):
    model, tokenizer = default_model
    guide = guided.compile(guided.Regex(r"(yes|no)"), tokenizer)
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Is Paris in France? yes or no."}],
        add_generation_prompt=True, return_tensors="pt", return_dict=True,
    )
    out = model.generate(**ids, logits_processor=[guided.LogitsProcessor(guide)], max_new_tokens=5, do_sample=False)
    text = tokenizer.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
    assert text in ("yes", "no")
