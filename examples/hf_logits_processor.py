"""Plug the guide into Hugging Face ``model.generate``: batched, sampled.

``guided.LogitsProcessor(guide)`` in ``logits_processor=`` constrains two left-padded
prompts, two samples each, to ISO dates (one fresh processor per ``generate`` call).

    python examples/hf_logits_processor.py
"""

import torch

import guided

torch.set_num_threads(1)
model, tokenizer = guided.models.load_default_model()
guide = guided.compile(guided.Regex(r"[0-9]{4}-[0-9]{2}-[0-9]{2}"), tokenizer)

questions = ["When did World War II end?", "When was the Eiffel Tower finished?"]
prompts = [
    tokenizer.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=False)
    for q in questions
]
tokenizer.padding_side = "left"
inputs = tokenizer(prompts, return_tensors="pt", padding=True)

torch.manual_seed(0)
out = model.generate(
    **inputs,
    logits_processor=[guided.LogitsProcessor(guide)],  # one per generate call
    do_sample=True,
    temperature=0.7,
    top_p=0.9,
    num_return_sequences=2,
    max_new_tokens=16,
    pad_token_id=tokenizer.eos_token_id,
)
for row in out[:, inputs["input_ids"].shape[1] :]:
    print(tokenizer.decode(row, skip_special_tokens=True))
