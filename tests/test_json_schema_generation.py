"""JSON Schema through the public API: generation with a tiny random model (every
finished output valid, ``key_order="any"`` writing orders of its own), pydantic models
and dict specs.
"""

from __future__ import annotations

import json

from json_helpers import FAMILIES, KEY_ORDER_SHAPES, reference_validator

import guided


def test_generate_with_tiny_model_50_schemas(tiny_model, smollm2_tokenizer):
    names = sorted(FAMILIES)
    failures = []
    for seed in range(50):
        name = names[seed % len(names)]
        schema = FAMILIES[name]
        r = guided.generate(tiny_model, smollm2_tokenizer, "JSON:", guided.JsonSchema(schema),
                            max_new_tokens=96, temperature=1.0, top_k=40, seed=seed)
        if r.finish_reason == "length":
            continue  # a random model may ramble inside an unbounded string
        if not reference_validator(schema).is_valid(json.loads(r.text)):
            failures.append((name, r.text))
    assert not failures, failures


def test_generate_any_key_order_with_tiny_model(tiny_model, smollm2_tokenizer):
    """A random model under key_order="any" writes valid objects, in orders of its own."""
    schema = KEY_ORDER_SHAPES["closed"]
    orders = set()
    for seed in range(12):
        r = guided.generate(tiny_model, smollm2_tokenizer, "JSON:", guided.JsonSchema(schema, key_order="any"),
                            max_new_tokens=48, temperature=1.0, top_k=40, seed=seed)
        if r.finish_reason == "length":
            continue
        value = json.loads(r.text)
        assert reference_validator(schema).is_valid(value), r.text
        orders.add(tuple(value))
    assert any(list(o) != sorted(o) for o in orders), orders


def test_pydantic_round_trip(tiny_model, smollm2_tokenizer):
    from typing import Literal, Optional

    import pydantic

    class Pet(pydantic.BaseModel):
        kind: Literal["cat", "dog"]
        age: int = pydantic.Field(ge=0, le=30)
        name: Optional[str] = pydantic.Field(default=None, max_length=12)

    for seed in range(5):
        r = guided.generate(tiny_model, smollm2_tokenizer, "A pet:", Pet, max_new_tokens=64, temperature=1.0, seed=seed)
        if r.finish_reason == "length":
            continue
        assert isinstance(r.value, Pet)
        assert 0 <= r.value.age <= 30


def test_dict_spec_value_is_parsed(tiny_model, smollm2_tokenizer):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": False}
    r = guided.generate(tiny_model, smollm2_tokenizer, "x", schema, max_new_tokens=20)
    assert r.value in ({"ok": True}, {"ok": False})
