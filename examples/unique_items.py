"""``uniqueItems`` on strings: the matcher refuses a repeated tag, and the default
model writes a list of distinct tags.

    python examples/unique_items.py
"""

import torch

import guided

torch.set_num_threads(1)
model, tokenizer = guided.models.load_default_model()
schema = {
    "type": "object",
    "properties": {"tags": {"type": "array", "items": {"type": "string", "maxLength": 20},
                            "minItems": 3, "maxItems": 5, "uniqueItems": True}},
    "required": ["tags"],
}
guide = guided.compile(guided.JsonSchema(schema, whitespace="compact"), tokenizer)

# The matcher, token by token: a repeat is refused where it would be completed.
for text in ['{"tags":["pasta","pizza","pasta"]}', '{"tags":["pasta","pizza","\\u0070asta"]}',
             '{"tags":["pasta","pizza","risotto"]}']:
    m = guide.matcher()
    ok = m.accept_tokens(tokenizer.encode(text, add_special_tokens=False))
    print(f"{text:45} {'accepted' if ok else 'refused (a repeated item)'}")

# A repeat is never in the mask, so generation cannot write one.
result = guided.generate(model, tokenizer, "Give three tags for an Italian restaurant, as JSON.", guide,
                         max_new_tokens=60)
print(result.text)
print("value:", result.value)
