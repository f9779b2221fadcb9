"""Run one offline vLLM job for tests/test_vllm.py, in a process of its own.

Usage: ``python tests/vllm_run.py JOB.json OUT.json``. The job names the model
folder, ``max_num_seqs``, ``plugin`` (False: guided's processor is not loaded)
and the requests (prompt, max_tokens, temperature, seed, extra_args). The output
lists each request's text, token ids and finish reason, and the batch changes
guided's processor saw (added / removed / moved / swapped).
"""

import json
import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine in this process
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main(job_path: str, out_path: str) -> None:
    from vllm import LLM, SamplingParams
    from vllm.v1.sample import logits_processor as lp

    from guided.integrations.vllm import GuidedLogitsProcessor

    with open(job_path) as f:
        job = json.load(f)
    seen = {"added": 0, "removed": 0, "moved": 0, "swapped": 0}
    if job["plugin"]:
        update = GuidedLogitsProcessor.update_state

        def counting(self, batch_update):
            if batch_update is not None:
                seen["added"] += len(batch_update.added)
                seen["removed"] += len(batch_update.removed)
                for _, _, direction in batch_update.moved:
                    seen["swapped" if direction.name == "SWAP" else "moved"] += 1
            return update(self, batch_update)

        GuidedLogitsProcessor.update_state = counting
    else:
        lp._load_logitsprocs_plugins = lambda: []  # the installed entry point is not loaded
    llm = LLM(model=job["model"], dtype="float32", enforce_eager=True, max_model_len=1024,
              max_num_seqs=job["max_num_seqs"], seed=0)
    requests = job["requests"]
    params = [SamplingParams(max_tokens=r["max_tokens"], temperature=r["temperature"], seed=r.get("seed"),
                             extra_args=r.get("extra_args")) for r in requests]
    outputs = llm.generate([r["prompt"] for r in requests], params, use_tqdm=False)
    result = {"outputs": [{"text": o.outputs[0].text, "token_ids": list(o.outputs[0].token_ids),
                           "finish_reason": o.outputs[0].finish_reason} for o in outputs],
              "batch_updates": seen}
    with open(out_path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
