"""Schema-valid JSON from the default offline model: a dict schema (``.value`` is the
parsed JSON), a pydantic class (``.value`` is a validated instance, indented layout),
and ``key_order="any"``: the matcher as a streaming validator of JSON whose keys come
in any order, in a flat object, a recursive schema and a ``oneOf`` resolved by
automaton algebra.

    python examples/json_schema_generate.py       # ~20 s on one CPU thread
"""

from typing import Literal

import pydantic
import torch

import guided

torch.set_num_threads(1)
model, tokenizer = guided.models.load_default_model()

# 1. A JSON Schema dict: .value is the parsed JSON.
schema = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 30},
        "country": {"type": "string", "maxLength": 30},
        "population_millions": {"type": "number", "minimum": 0, "maximum": 50},
    },
    "required": ["city", "country"],
    "additionalProperties": False,
}
r = guided.generate(model, tokenizer, "Describe the capital of France as JSON.", schema, max_new_tokens=80)
print(r.text)
print("value:", r.value, f"({r.stats.new_tokens} tokens, {r.stats.tokens_per_s:.1f} tok/s)\n")


# 2. A pydantic model: .value is a validated instance.
class Pet(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")  # no keys beyond these four

    name: str = pydantic.Field(max_length=20)
    kind: Literal["cat", "dog", "rabbit"]
    age: int = pydantic.Field(ge=0, le=30)
    weight_kg: float = pydantic.Field(gt=0, le=80, multiple_of=0.5)  # 4, 4.5, 12.0, ...


r = guided.generate(model, tokenizer, "Invent a pet and describe it as JSON.",
                    guided.JsonSchema(Pet, whitespace={"indent": 2}))
print(r.text)
print("value:", repr(r.value))


# 3. Keys in any order: the matcher as a streaming validator of JSON written elsewhere.
# By default keys follow the schema's properties order; key_order="any" accepts any
# order (each key at most once), as a JSON Schema validator does.
for order in ("schema", "any"):
    m = guided.compile(guided.JsonSchema(schema, whitespace="compact", key_order=order), tokenizer).matcher()
    text = '{"country":"France","city":"Paris"}'
    ok = m.accept_tokens(tokenizer.encode(text, add_special_tokens=False)) and m.is_accepting()
    print(f"key_order={order!r}: {text} accepted: {ok}")

# Recursive schemas too (the grammar engine): here a tree whose nodes name their keys
# in any order, at every depth.
tree = {"type": "object", "required": ["name"], "additionalProperties": False,
        "properties": {"name": {"type": "string"}, "kids": {"type": "array", "items": {"$ref": "#"}}}}
m = guided.compile(guided.JsonSchema(tree, whitespace="compact", key_order="any"), tokenizer).matcher()
text = '{"kids":[{"name":"leaf"}],"name":"root"}'
ok = m.accept_tokens(tokenizer.encode(text, add_special_tokens=False)) and m.is_accepting()
print(f"recursive, key_order='any': {text} accepted: {ok}")

# And a oneOf whose branches overlap (a labelled point matches both, so it is invalid),
# which the compiler resolves by automaton algebra: its objects take any key order too.
shape = {"oneOf": [
    {"type": "object", "additionalProperties": False, "required": ["x", "y"],
     "properties": {"x": {"type": "number"}, "y": {"type": "number"}, "label": {"type": "string"}}},
    {"type": "object", "required": ["label"], "minProperties": 2, "properties": {"label": {"type": "string"}}},
]}
guide = guided.compile(guided.JsonSchema(shape, whitespace="compact", key_order="any"), tokenizer)
for text in ('{"y":2,"x":1}', '{"y":2,"label":"A","x":1}'):
    m = guide.matcher()
    ok = m.accept_tokens(tokenizer.encode(text, add_special_tokens=False)) and m.is_accepting()
    print(f"oneOf by algebra, key_order='any': {text} accepted: {ok}")
