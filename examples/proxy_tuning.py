"""Proxy-tuning, the mechanics: a demo with one model, not a real proxy-tuning setup.

Proxy-tuning (Liu et al. 2024, "Tuning Language Models by Proxy") steers a *large base*
model with the difference between a *small tuned* model (the expert) and the *same
small model before tuning* (the anti-expert), all three sharing one vocabulary::

    z = z_large_base + alpha * (z_small_tuned - z_small_untuned),   alpha = 1

so the large model gets most of the tuning's effect without its weights being touched
(e.g. Llama-2-70B base steered by Llama-2-7B-chat minus Llama-2-7B base).

What exists offline here is one model, SmolLM2-135M-Instruct; no base / tuned pair of
different sizes shares its vocabulary. So this script only shows the arithmetic and
the plumbing, with the *same* model in all three roles and "tuning" stood in for by
the chat template:

- base:        the model reading the instruction as plain text, then a newline
               (``chat=False``: no chat template)
- expert:      ``ContextModel(model, chat-templated instruction)``  ("tuned" view)
- anti-expert: ``ContextModel(model, the same plain text)``          ("untuned" view)

Because base and anti-expert are the same model on the same ids, their logits cancel
and, at alpha = 1, the proxy-tuned scores are the expert's (up to float rounding): the
greedy proxy-tuned output should equal plain chat-templated generation token for
token. That is the check this script prints. Other alphas interpolate
(0 < alpha < 1) or extrapolate (alpha > 1) between the plain-text and the chat
behaviour. In a real setup base and anti-expert differ, and nothing cancels.

    python examples/proxy_tuning.py               # ~1 minute on one CPU thread
"""

import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

import guided  # noqa: E402
from guided.decoding.generation import prompt_ids  # noqa: E402
from guided.steering import ContextModel, ProxyTuning  # noqa: E402

torch.set_num_threads(1)
INSTRUCTIONS = [
    "Give three tips for staying healthy.",
    "What is the capital of France?",
]
NEW_TOKENS = 40


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main() -> None:
    progress("loading the default model ...")
    model, tokenizer = guided.models.load_default_model()
    print(__doc__.split("\n\n")[0])
    print("Real proxy-tuning: large base + alpha * (small tuned expert - small untuned anti-expert), alpha = 1.")
    print("Here: ONE model (SmolLM2-135M-Instruct) in all three roles; the chat template stands in for")
    print("tuning. Base and anti-expert cancel, so alpha = 1 must reproduce chat generation exactly.\n")
    t0 = time.perf_counter()
    all_match = True
    for instruction in INSTRUCTIONS:
        plain = prompt_ids(tokenizer, instruction + "\n", chat=False)  # what the base and the anti-expert read
        chat = prompt_ids(tokenizer, instruction, chat=True)    # what the "tuned" expert reads

        def run(label, prompt, processors=()):
            progress(f"[{time.perf_counter() - t0:5.0f}s] {instruction!r}: {label}")
            r = guided.generate(model, tokenizer, prompt, None, max_new_tokens=NEW_TOKENS, processors=list(processors))
            print(f"  {label:34s} | {r.text.strip()!r}")
            return r

        print(f"=== {instruction!r}  (greedy, {NEW_TOKENS} new tokens)")
        base = run("base (plain text)", plain)
        expert_alone = run("expert alone (chat template)", chat)
        results = {}
        for alpha in (1.0, 0.5, 2.0):
            expert, anti = ContextModel(model, chat), ContextModel(model, plain)
            proc = ProxyTuning(expert, anti, alpha=alpha)
            results[alpha] = run(f"proxy-tuned, alpha = {alpha:g}", plain, [proc])
            if alpha == 1.0:
                steps = len(results[alpha].token_ids) + (results[alpha].finish_reason == "eos")
                print(f"  {'':34s}   helper forwards: expert {expert.forward_passes}, anti-expert "
                      f"{anti.forward_passes} for {steps} steps")
        same = results[1.0].token_ids == expert_alone.token_ids
        all_match &= same
        print(f"  alpha = 1 output == chat-template output, token for token: {same}")
        print(f"  alpha = 1 output == base output: {results[1.0].token_ids == base.token_ids}\n")
    print("Mechanics check " + ("passed" if all_match else "FAILED") + ": with base == anti-expert the arithmetic "
          "reduces to the expert.")
    print("This is a demo of the plumbing; the quality claim of proxy-tuning needs a larger base model.")


if __name__ == "__main__":
    main()
