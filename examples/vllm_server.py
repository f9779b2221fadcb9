"""guided in vLLM's OpenAI-compatible server: constrained and watermarked requests,
a refused spec, and watermark detection by the same server.

Starts the server on 127.0.0.1 (``VLLM_PLUGINS=guided`` loads guided's endpoint
plugin; a fresh watermark key in a private temporary file), sends requests with
``vllm_xargs``, and stops it. Run it in the environment where vLLM and guided are
installed (``make test-vllm`` builds ``.venv-vllm``):

    .venv-vllm/bin/python examples/vllm_server.py [MODEL]      # ~2 minutes on a small CPU

By hand, the server is::

    VLLM_PLUGINS=guided GUIDED_WATERMARK_KEY_FILE=wm.key \\
        python -m vllm.entrypoints.openai.api_server --model MODEL --host 127.0.0.1 --port 8000
"""

import base64
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import httpx

SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                           "country": {"type": "string", "maxLength": 30}},
          "required": ["city", "country"], "additionalProperties": False}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chat(text: str) -> str:
    return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"


def start_server(model: str, key_file: str, port: int, log) -> subprocess.Popen:
    env = {**os.environ, "VLLM_PLUGINS": "guided", "GUIDED_WATERMARK_KEY_FILE": key_file,
           "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    return subprocess.Popen([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
                             "--served-model-name", "model", "--host", "127.0.0.1", "--port", str(port),
                             "--dtype", "float32", "--enforce-eager", "--max-model-len", "1024"],
                            env=env, stdout=log, stderr=subprocess.STDOUT)


def wait_ready(url: str, server: subprocess.Popen, seconds: float = 300) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline and server.poll() is None:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError("the server did not start (see its log)")


def complete(url: str, prompt: str, xargs: dict | None, **kw) -> httpx.Response:
    body = {"model": "model", "prompt": prompt, "max_tokens": 80, "temperature": 0.8, "seed": 0,
            "return_token_ids": True, **kw}
    if xargs:
        body["vllm_xargs"] = xargs
    return httpx.post(url + "/v1/completions", json=body, timeout=300)


def main() -> None:
    model = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cache/guided/models/smollm2-135m-instruct")
    with tempfile.TemporaryDirectory() as tmp:
        key_file = os.path.join(tmp, "wm.key")
        with open(os.open(key_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(base64.b64encode(os.urandom(32)).decode())
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        with open(os.path.join(tmp, "server.log"), "w") as log:
            server = start_server(model, key_file, port, log)
        try:
            print("starting vLLM (30-60 s) ...", flush=True)
            wait_ready(url, server)

            r = complete(url, chat("Where is the Eiffel tower? Answer in JSON."), {"guided_json": json.dumps(SCHEMA)})
            print("JSON:   ", r.json()["choices"][0]["text"])
            r = complete(url, chat("Pick a primary colour."), {"guided_choice": ["red", "yellow", "blue"]})
            print("choice: ", r.json()["choices"][0]["text"])
            r = complete(url, chat("Pick a colour."), {"guided_regex": "(red|green"})
            print("refused:", r.status_code, r.json()["error"]["message"].splitlines()[0])

            detect = url + "/v1/watermark/detect"
            for marked in (True, False):
                r = complete(url, chat("Tell a story about a fox."), {"watermark": True} if marked else None,
                             max_tokens=200, temperature=1.0)
                ids = r.json()["choices"][0]["token_ids"]
                z = httpx.post(detect, json={"token_ids": ids}, timeout=60).json()
                print(f"watermarked={marked}: z = {z['z_score']:.2f} over {z['num_tokens_scored']} tokens,"
                      f" detected: {z['is_watermarked']}")
            r = complete(url, chat("Where is the Colosseum? Answer in JSON."),
                         {"guided_json": json.dumps(SCHEMA), "watermark": True}, temperature=1.0)
            ids = r.json()["choices"][0]["token_ids"]
            z = httpx.post(detect, json={"token_ids": ids, "schema": SCHEMA}, timeout=60).json()
            print(f"JSON, grammar-aware detection: z = {z['z_score']:.2f} over {z['num_tokens_scored']} tokens "
                  "(short outputs carry little signal)")
        finally:
            server.terminate()
            server.wait(60)


if __name__ == "__main__":
    main()
