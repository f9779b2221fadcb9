"""Your own decoding loop with the matcher contract (what an inference engine does).

Greedy decoding with a KV cache, written out: each step fills the matcher's bitmask,
applies it to the logits in place, takes the argmax and accepts it, until the matcher
is terminated or EOS comes. Then ``rollback`` undoes a token, as speculative decoding
and beam search do.

    python examples/custom_loop.py
"""

import torch

import guided

torch.set_num_threads(1)
model, tokenizer = guided.models.load_default_model()
guide = guided.compile(guided.Regex(r"(red|green|blue)( and (red|green|blue))?"), tokenizer)

matcher = guide.matcher()  # one per sequence
bitmask = guided.allocate_token_bitmask(1, model.config.vocab_size)
ids = tokenizer.apply_chat_template(
    [{"role": "user", "content": "Name one or two colours of the French flag."}],
    add_generation_prompt=True, return_tensors="pt", return_dict=True,
)["input_ids"]

out = model(input_ids=ids, use_cache=True)
generated = []
with torch.inference_mode():
    while not matcher.is_terminated():
        logits = out.logits[:, -1, :]
        matcher.fill_next_token_bitmask(bitmask, index=0)
        guided.apply_token_bitmask_(logits, bitmask)  # in place, on logits' device
        token = int(logits.argmax(dim=-1))
        assert matcher.accept_token(token)
        if token in guide.eos_token_ids:
            break
        generated.append(token)
        out = model(input_ids=torch.tensor([[token]]), past_key_values=out.past_key_values, use_cache=True)

print(tokenizer.decode(generated))
# Speculative decoding and beam search use rollback / fork:
matcher.rollback(1)
print("after rollback(1), allowed next:", len(matcher.allowed_token_ids()), "tokens")
