"""Constrained generation in vLLM's offline engine: one batch mixing JSON Schema, regex,
grammar, choice and unconstrained requests.

Run it in the environment where vLLM and guided are installed (``make test-vllm``
builds one: ``.venv-vllm``); guided's processor loads itself from its entry point.
The model is the default SmolLM2 folder guided converts (``make demo`` makes it) or
any Hugging Face model folder / hub name given as the first argument.

    .venv-vllm/bin/python examples/vllm_offline.py [MODEL]     # ~1 minute on a small CPU
"""

import json
import os
import re
import sys

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache on a CPU build

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 30}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
DATE = r"(19|20)\d{2}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
GRAMMAR = 'start: "The answer is " ANSWER "."\nANSWER: "yes" | "no" | /[0-9]{1,3}/\n'


def chat(text: str) -> str:
    return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"


def main() -> None:
    from vllm import LLM, SamplingParams
    from vllm.exceptions import VLLMValidationError

    model = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cache/guided/models/smollm2-135m-instruct")
    llm = LLM(model=model, dtype="float32", enforce_eager=True, max_model_len=1024, max_num_seqs=4)
    requests = [
        ("Describe a famous scientist as JSON with name and age.", {"guided_json": json.dumps(SCHEMA)}),
        ("When did the Berlin wall fall? Give the date.", {"guided_regex": DATE}),
        ("Is the Earth round?", {"guided_choice": ["yes", "no"]}),
        ("How many legs has a spider?", {"guided_grammar": GRAMMAR}),
        ("A compact JSON object for a cat named Tom, age 3.",
         {"guided_json": json.dumps(SCHEMA), "guided_whitespace": "compact"}),
        ("Write one sentence about the sea.", None),  # unconstrained: guided leaves it alone
    ]
    params = [SamplingParams(max_tokens=60, temperature=0.7, seed=i, extra_args=extra)
              for i, (_, extra) in enumerate(requests)]
    outputs = llm.generate([chat(prompt) for prompt, _ in requests], params)
    for (prompt, extra), out in zip(requests, outputs):
        text, reason = out.outputs[0].text, out.outputs[0].finish_reason
        kind = next(iter(extra)) if extra else "unconstrained"
        print(f"{kind:<14} {reason:<6} {text!r}")
        if reason == "stop" and extra and "guided_regex" in extra:
            assert re.fullmatch(DATE, text)
        if reason == "stop" and extra and "guided_json" in extra:
            json.loads(text)  # complete JSON, valid against SCHEMA ("length": a cut prefix)
    # A bad spec is refused before generation, naming the problem.
    try:
        llm.generate([chat("Pick one.")], SamplingParams(extra_args={"guided_regex": "(red|green"}), use_tqdm=False)
    except VLLMValidationError as e:  # the engine goes on serving
        print("refused:", str(e).splitlines()[0])


if __name__ == "__main__":  # vLLM spawns processes
    main()
