"""Finishing within the token budget: JSON that always parses, however short the limit.

Run: python examples/budget.py
"""

import guided

if __name__ == "__main__":
    model, tok = guided.models.load_default_model()
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "hobbies": {"type": "array", "items": {"type": "string"}}},
        "required": ["name", "hobbies"],
    }
    guide = guided.compile(guided.JsonSchema(schema), tok)
    print("shortest output:", guide.min_tokens(), "tokens, EOS included")
    prompt = "Describe a person who loves sailing as JSON."
    for budget in (12, 20, 40):
        cut = guided.generate(model, tok, prompt, guide, max_new_tokens=budget, budget_aware=False)
        fit = guided.generate(model, tok, prompt, guide, max_new_tokens=budget)
        print(f"\nmax_new_tokens={budget}")
        print(f"  without budget masks ({cut.finish_reason}): {cut.text}")
        print(f"  with budget masks    ({fit.finish_reason}): {fit.text}")
        print(f"  parsed: {fit.value}")
    try:
        guided.generate(model, tok, prompt, guide, max_new_tokens=guide.min_tokens() - 1)
    except guided.TokenBudgetError as err:
        print("\n", err)
