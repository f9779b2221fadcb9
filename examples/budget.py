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
    # The same guarantee in beam search and speculative decoding, and with a tighter
    # whitespace bound (at most 2 characters per run).
    beams = guided.generate(model, tok, prompt, guide, max_new_tokens=16, num_beams=3)
    fast = guided.generate(model, tok, prompt, guide, max_new_tokens=16, speculative="auto")
    tight = guided.generate(model, tok, prompt, guided.JsonSchema(schema, max_whitespace=2), max_new_tokens=16)
    print(f"\nmax_new_tokens=16, 3 beams ({beams.finish_reason}): {beams.text}")
    print(f"max_new_tokens=16, speculative ({fast.finish_reason}, {fast.stats.target_forward_passes} passes): "
          f"{fast.text}")
    print(f"max_new_tokens=16, max_whitespace=2 ({tight.finish_reason}): {tight.text}")
    # Grammars too: an SQL query and a recursive schema (a tree) close in time.
    sql = guided.generate(model, tok, "Write an SQL query listing the customers from Paris.",
                          guided.Grammar.from_name("sql"), max_new_tokens=12)
    tree = {"type": "object", "properties": {"name": {"type": "string"},
                                             "children": {"type": "array", "items": {"$ref": "#"}}},
            "required": ["name", "children"]}
    family = guided.generate(model, tok, "A family tree as JSON.", guided.JsonSchema(tree), max_new_tokens=30)
    print(f"\nmax_new_tokens=12, SQL grammar ({sql.finish_reason}): {sql.text}")
    print(f"max_new_tokens=30, recursive schema ({family.finish_reason}): {family.text}")
    try:
        guided.generate(model, tok, prompt, guide, max_new_tokens=guide.min_tokens() - 1)
    except guided.TokenBudgetError as err:
        print("\n", err)
