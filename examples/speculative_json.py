"""Speculative decoding of schema-constrained JSON: the same output, fewer model passes.

    python examples/speculative_json.py

Generates one JSON object greedily four ways (plain, "auto" = forced tokens + prompt
lookup, auto + the model's own first layers as a draft model, and sampling with
"auto") and prints the model passes, drafted / kept tokens and time of each.
"""

import torch

import guided
from guided.decoding.speculative import EarlyExit, ForcedTokens, PromptLookup

torch.set_num_threads(1)
model, tokenizer = guided.models.load_default_model()

schema = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 30},
        "birth_year": {"type": "integer", "minimum": 1800, "maximum": 2025},
        "occupation": {"type": "string", "maxLength": 40},
        "country_of_birth": {"type": "string", "maxLength": 30},
    },
    "required": ["name", "birth_year", "occupation", "country_of_birth"],
    "additionalProperties": False,
}
spec = guided.JsonSchema(schema, whitespace="compact")
prompt = ("Marie Curie, born in 1867 in Warsaw, Poland, was a physicist and chemist. "
          "Give her record as JSON.")


def run(label, speculative, **kw):
    r = guided.generate(model, tokenizer, prompt, spec, max_new_tokens=80, speculative=speculative, **kw)
    s = r.stats
    passes = s.target_forward_passes if speculative else s.new_tokens  # plain: one pass per token
    print(f"{label:<22} {passes:3d} passes for {s.new_tokens} tokens, kept {s.accepted_draft_tokens:3d} of "
          f"{s.draft_tokens:3d} drafted, {s.total_s:.2f} s")
    return r


plain = run("plain", None)
print(plain.text)
auto = run('speculative="auto"', "auto")
early = run("auto + EarlyExit(7)", [ForcedTokens(tokenizer), PromptLookup(), EarlyExit(model, 7)])
assert auto.token_ids == plain.token_ids == early.token_ids  # greedy output is unchanged
sampled = run("sampled, auto", "auto", temperature=0.8, seed=3)
print(sampled.text)
