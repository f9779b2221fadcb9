"""guided inside vLLM: the logits processor against a real engine and server (CPU).

Runs where vLLM is installed (``make test`` builds ``.venv-vllm`` for these);
elsewhere the module is skipped. The engine tests use the converted SmolLM2
folder that ``guided.models`` caches.
"""

import base64
import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

vllm = pytest.importorskip("vllm", reason="vLLM is not installed here (make test runs these in .venv-vllm)")

from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality

import guided
from guided.integrations.vllm import GuidedLogitsProcessor

ROOT = Path(__file__).resolve().parent.parent
BYTES = guided.Vocabulary([bytes([b]) for b in range(256)] + [None], [256])
EOS = 256
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"]}
SLOW_REGEX = r"\w{300}x|\w{200}(ab|c)+"  # ~5-7 s to compile, past the server's 2 s limit
GRAMMAR = 'start: "The answer is " ANSWER "."\nANSWER: "yes" | "no" | /[0-9]{1,3}/\n'


# -- the batch bookkeeping, without an engine ---------------------------------------------


def _params(extra, temperature=1.0, stops=(EOS,), max_tokens=None):
    return SimpleNamespace(extra_args=extra, all_stop_token_ids=set(stops), temperature=temperature,
                           max_tokens=max_tokens)


def _allowed(logits_row) -> set[int]:
    return set(torch.isfinite(logits_row).nonzero().flatten().tolist())


def _expected(spec, tokens) -> set[int]:
    m = guided.compile(spec, BYTES).matcher()
    assert m.accept_tokens(tokens)
    return set(m.allowed_token_ids())


def test_v1_follows_adds_moves_swaps_and_removals():
    proc = GuidedLogitsProcessor.from_vocabulary(BYTES, 4)
    specs = {"a": guided.Regex("[ab]+c"), "d": guided.Regex("[0-9]{2}-x")}
    out_a, out_d = [], []
    proc.update_state(BatchUpdate(3, [], [
        (0, _params({"guided_regex": "[ab]+c"}), [1, 2], out_a),
        (1, _params(None), [3], []),
        (2, _params({"guided_regex": "[0-9]{2}-x"}), [4], out_d),
    ], []))
    logits = proc.apply(torch.zeros(3, 257))
    assert _allowed(logits[0]) == _expected(specs["a"], [])
    assert _allowed(logits[1]) == set(range(257))  # an unconstrained row is untouched
    assert _allowed(logits[2]) == _expected(specs["d"], [])
    out_a.append(ord("a"))
    out_d.append(ord("4"))
    # row 1 finishes; row 2 moves into its place (vLLM condenses the batch)
    proc.update_state(BatchUpdate(2, [1], [], [(2, 1, MoveDirectionality.UNIDIRECTIONAL)]))
    logits = proc.apply(torch.zeros(2, 257))
    assert _allowed(logits[0]) == _expected(specs["a"], [ord("a")])
    assert _allowed(logits[1]) == _expected(specs["d"], [ord("4")])
    out_a.append(-1)  # a placeholder (async scheduling): not a token yet
    out_d.extend([ord("2"), ord("-")])
    proc.update_state(BatchUpdate(2, [], [], [(0, 1, MoveDirectionality.SWAP)]))
    logits = proc.apply(torch.zeros(2, 257))
    assert _allowed(logits[0]) == _expected(specs["d"], [ord("4"), ord("2"), ord("-")])
    assert _allowed(logits[1]) == _expected(specs["a"], [ord("a")])
    out_a[-1] = ord("c")  # the sampled id arrives
    out_d.append(ord("x"))
    logits = proc.apply(torch.zeros(2, 257))
    assert _allowed(logits[1]) == {EOS}  # complete and nothing can extend it: EOS alone
    assert _allowed(logits[0]) == {EOS}
    # a new request takes a freed index; the old one there is forgotten
    proc.update_state(BatchUpdate(2, [0], [(0, _params(None), [5], [])], []))
    logits = proc.apply(torch.zeros(2, 257))
    assert _allowed(logits[0]) == set(range(257))


def test_v1_stop_tokens_only_where_the_spec_is_complete():
    proc = GuidedLogitsProcessor.from_vocabulary(BYTES, 2)
    out = []
    proc.update_state(BatchUpdate(1, [], [(0, _params({"guided_regex": "ab(cd)?"}, stops=(EOS, 7)), [1], out)], []))
    assert 7 not in _allowed(proc.apply(torch.zeros(1, 257))[0])
    out.extend([ord("a"), ord("b")])
    allowed = _allowed(proc.apply(torch.zeros(1, 257))[0])
    assert {7, EOS, ord("c")} == allowed


def test_v1_a_refused_token_ends_the_request():
    proc = GuidedLogitsProcessor.from_vocabulary(BYTES, 1)
    out = []
    proc.update_state(BatchUpdate(1, [], [(0, _params({"guided_regex": "[0-9]+"}), [1], out)], []))
    out.append(ord("z"))  # forced by something else
    assert _allowed(proc.apply(torch.zeros(1, 257))[0]) == {EOS}


def test_v1_min_tokens_does_not_leave_a_row_without_tokens():
    proc = GuidedLogitsProcessor.from_vocabulary(BYTES, 1)
    out = [ord("a"), ord("b")]
    params = _params({"guided_regex": "ab"})
    params.min_tokens = 5
    proc.update_state(BatchUpdate(1, [], [(0, params, [1], out)], []))
    logits = torch.zeros(1, 257)
    logits[0, EOS] = float("-inf")  # vLLM's min_tokens processor ran first
    assert _allowed(proc.apply(logits)[0]) == {EOS}


def test_v1_masks_keep_the_output_within_max_tokens():
    proc = GuidedLogitsProcessor.from_vocabulary(BYTES, 3)
    a, b = ord("a"), ord("b")
    proc.update_state(BatchUpdate(3, [], [
        (0, _params({"guided_regex": "a+b"}, max_tokens=4), [1], [a, a]),
        (1, _params({"guided_regex": "a+b", "guided_budget_aware": False}, max_tokens=4), [1], [a, a]),
        (2, _params({"guided_regex": "a+b"}), [1], [a, a]),
    ], []))
    logits = proc.apply(torch.zeros(3, 257))
    assert _allowed(logits[0]) == {b}  # two tokens left: "b", then EOS
    assert _allowed(logits[1]) == _allowed(logits[2]) == {a, b}


def test_v2_masks_keep_the_output_within_max_tokens():
    states = SimpleNamespace(prompt_len=SimpleNamespace(np=np.array([3])),
                             all_token_ids=SimpleNamespace(gpu=torch.zeros(1, 16, dtype=torch.int64)))
    proc = GuidedLogitsProcessor.from_vocabulary(BYTES, 4, req_states=states)
    assert proc.add_request(0, _params({"guided_regex": "a+b"}, max_tokens=3))
    a, b = ord("a"), ord("b")
    ctx = SimpleNamespace(expanded_idx_mapping=torch.tensor([0, 0]), idx_mapping_np=np.array([0]),
                          pos=torch.tensor([2, 3]), input_ids=torch.tensor([9, a]),
                          expanded_local_pos=torch.tensor([0, 1]))
    logits = proc.apply(torch.zeros(2, 257), ctx)  # rows: the first output, then the one after a draft "a"
    assert _allowed(logits[0]) == {a}
    assert _allowed(logits[1]) == {b}


def test_v2_rows_follow_positions_and_drafts():
    prompt_len = np.array([3, 2], dtype=np.int64)
    history = torch.zeros(2, 32, dtype=torch.int64)
    states = SimpleNamespace(prompt_len=SimpleNamespace(np=prompt_len), all_token_ids=SimpleNamespace(gpu=history))
    proc = GuidedLogitsProcessor.from_vocabulary(BYTES, 8, req_states=states)
    spec = guided.Regex("[ab]+c")
    assert proc.add_request(0, _params({"guided_regex": "[ab]+c"}))
    assert not proc.add_request(1, _params(None))

    def ctx(rows):  # rows: (slot, pos, fed token, offset among the request's rows)
        slots, pos, fed, local = zip(*rows)
        return SimpleNamespace(expanded_idx_mapping=torch.tensor(slots), idx_mapping_np=np.array(sorted(set(slots))),
                               pos=torch.tensor(pos), input_ids=torch.tensor(fed), expanded_local_pos=torch.tensor(local))

    logits = proc.apply(torch.zeros(2, 257), ctx([(0, 2, 9, 0), (1, 1, 9, 0)]))  # prefill ends
    assert _allowed(logits[0]) == _expected(spec, []) and _allowed(logits[1]) == set(range(257))
    # a decode step with two drafts: rows see the committed "a", then drafts "b", "c"
    a, b, c = ord("a"), ord("b"), ord("c")
    logits = proc.apply(torch.zeros(3, 257), ctx([(0, 3, a, 0), (0, 4, b, 1), (0, 5, c, 2)]))
    assert _allowed(logits[0]) == _expected(spec, [a])
    assert _allowed(logits[1]) == _expected(spec, [a, b])
    assert _allowed(logits[2]) == {EOS}
    # the "b" draft was rejected and "a" sampled instead: the matcher rolls back
    logits = proc.apply(torch.zeros(1, 257), ctx([(0, 4, a, 0)]))
    assert _allowed(logits[0]) == _expected(spec, [a, a])
    # a resumed request: outputs before the fed token come from the token history
    assert proc.add_request(0, _params({"guided_regex": "[ab]+c"}))
    history[0, 3:6] = torch.tensor([a, b, a])
    logits = proc.apply(torch.zeros(1, 257), ctx([(0, 5, a, 0)]))
    assert _allowed(logits[0]) == _expected(spec, [a, b, a])


def test_validate_params_names_the_problem():
    GuidedLogitsProcessor.validate_params(_params({"guided_json": json.dumps(SCHEMA)}))
    with pytest.raises(ValueError, match="position 2"):
        GuidedLogitsProcessor.validate_params(_params({"guided_regex": "ab(c"}))
    with pytest.raises(ValueError, match="minLength.*#/properties/a"):
        GuidedLogitsProcessor.validate_params(_params({"guided_json": json.dumps(
            {"type": "object", "properties": {"a": {"type": "string", "minLength": 5, "maxLength": 2}},
             "required": ["a"]})}))
    with pytest.raises(ValueError, match="line 1"):
        GuidedLogitsProcessor.validate_params(_params({"guided_grammar": 'start: ("a"'}))
    with pytest.raises(ValueError, match="no watermark key"):
        GuidedLogitsProcessor.validate_params(_params({"watermark": True}))


def test_validate_params_refuses_a_max_tokens_below_the_shortest_output(monkeypatch):
    import guided.integrations.vllm as plugin

    digits = {"guided_regex": "[0-9]{4}"}  # four digits, then EOS: 5 tokens of the byte vocabulary
    GuidedLogitsProcessor.validate_params(_params(digits, max_tokens=3))  # token counts unknown: let through
    monkeypatch.setattr(plugin, "_frontend_vocab", BYTES)  # the served vocabulary, registered
    with pytest.raises(guided.TokenBudgetError, match="max_tokens=3 is too small.* takes 5 tokens"):
        GuidedLogitsProcessor.validate_params(_params(digits, max_tokens=3))
    GuidedLogitsProcessor.validate_params(_params(digits, max_tokens=5))
    GuidedLogitsProcessor.validate_params(_params({**digits, "guided_budget_aware": False}, max_tokens=3))
    with pytest.raises(ValueError, match="guided_budget_aware must be true or false"):
        GuidedLogitsProcessor.validate_params(_params({**digits, "guided_budget_aware": "maybe"}, max_tokens=9))


# -- a real engine -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model_folder():
    """The converted SmolLM2 folder (made by the main environment's guided.models)."""
    folder = Path.home() / ".cache/guided/models/smollm2-135m-instruct"
    if not (folder / "config.json").exists():
        main_python = ROOT / ".venv/bin/python"
        if not main_python.exists():
            pytest.skip("no converted SmolLM2 folder, and no .venv to make one")
        subprocess.run([str(main_python), "-c", "import guided.models as m; m.load_default_model()"], check=True)
    return str(folder)


def _run_job(tmp_path, name, job) -> dict:
    job_file, out_file = tmp_path / f"{name}.json", tmp_path / f"{name}.out.json"
    job_file.write_text(json.dumps(job))
    proc = subprocess.run([sys.executable, str(ROOT / "tests/vllm_run.py"), str(job_file), str(out_file)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out_file.read_text())


TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99},
                                     "b": {"type": "integer", "minimum": 0, "maximum": 99}},
    "required": ["a", "b"], "additionalProperties": False}}}]


def _check(extra, text):
    """The output satisfies the request's constraint, by a reference check."""
    import jsonschema

    if extra.get("guided_thinking"):
        m = re.fullmatch(r"<think>(.*?)</think>(.*)", text, re.S)
        assert m and "</think>" not in m.group(1), text
        text = m.group(2)
    if "guided_json" in extra:
        jsonschema.validate(json.loads(text), json.loads(extra["guided_json"]))
    elif "guided_regex" in extra:
        assert re.fullmatch(extra["guided_regex"], text), text
    elif "guided_choice" in extra:
        assert text in extra["guided_choice"]
    elif "guided_grammar" in extra:
        guided.Grammar(extra["guided_grammar"]).parse(text)
    elif "guided_tools" in extra:
        content, calls = guided.ToolCalls(TOOLS).parse(text)
        assert content == "" and len(calls) == 1, text
        jsonschema.validate(json.loads(calls[0]["function"]["arguments"]), TOOLS[0]["function"]["parameters"])


@pytest.mark.slow
def test_offline_mixed_batch(tmp_path, model_folder):
    chat = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
    constrained = [
        ("Describe a person as JSON with name and age.", {"guided_json": json.dumps(SCHEMA)}),
        ("Give today's date.", {"guided_regex": r"\d{4}-\d{2}-\d{2}"}),
        ("Is the sky blue?", {"guided_choice": ["yes", "no", "sometimes"]}),
        ("Is water wet?", {"guided_grammar": GRAMMAR}),
        ("Invent a person as compact JSON.", {"guided_json": json.dumps(SCHEMA), "guided_whitespace": "compact"}),
        ("Give a year.", {"guided_regex": r"(19|20)\d{2}"}),
    ]
    free = ["Write a poem about the sea.", "List three fruits.", "Tell me about Paris.", "What is 2 + 2?"]
    requests = []
    for i, (prompt, extra) in enumerate(constrained):
        requests.append({"prompt": chat.format(prompt), "max_tokens": 60, "temperature": 0.7, "seed": i,
                         "extra_args": extra})
        if i < len(free):  # unconstrained requests of different lengths among them
            requests.append({"prompt": chat.format(free[i]), "max_tokens": 12 + 9 * i, "temperature": 0.0})
    job = {"model": model_folder, "max_num_seqs": 3, "requests": requests, "plugin": True}
    got = _run_job(tmp_path, "guided", job)
    updates = got["batch_updates"]
    assert updates["removed"] > 0 and updates["moved"] + updates["swapped"] > 0, updates
    for r, out in zip(requests, got["outputs"]):
        extra = r.get("extra_args")
        if extra is None:
            continue
        assert out["finish_reason"] == "stop", (extra, out)
        _check(extra, out["text"])
    # Unconstrained requests: the same tokens as an engine without guided's processor.
    plain = _run_job(tmp_path, "plain", {**job, "plugin": False})
    for r, a, b in zip(requests, got["outputs"], plain["outputs"]):
        if r.get("extra_args") is None:
            assert a["token_ids"] == b["token_ids"]


@pytest.mark.slow
def test_offline_tool_calls_and_thinking(tmp_path, model_folder):
    chat = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
    requests = [
        {"prompt": chat.format("What is 2 + 3? Call add."), "max_tokens": 60, "temperature": 0.7, "seed": 0,
         "extra_args": {"guided_tools": json.dumps(TOOLS), "guided_tool_choice": "required",
                        "guided_parallel_tool_calls": False}},
        {"prompt": chat.format("Is 7 prime? Think first."), "max_tokens": 60, "temperature": 0.7, "seed": 1,
         "extra_args": {"guided_regex": "yes|no", "guided_thinking": True, "guided_max_thinking_tokens": 20}},
        {"prompt": chat.format("Say hi."), "max_tokens": 30, "temperature": 0.0},
    ]
    got = _run_job(tmp_path, "tools", {"model": model_folder, "max_num_seqs": 3, "requests": requests,
                                       "plugin": True})
    for r, out in zip(requests[:2], got["outputs"]):
        assert out["finish_reason"] == "stop", (r["extra_args"], out)
        _check(r["extra_args"], out["text"])


# -- the OpenAI-compatible server --------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory, model_folder):
    # The slow spec's kernels compiled (and cached on disk) first: numba's first compile
    # of a kernel moves a compile's deadline, which would let the slow spec through.
    subprocess.run([sys.executable, "-c", "import guided; guided.compile(guided.Regex(r'" + SLOW_REGEX + "'), "
                    "guided.Vocabulary([bytes([b]) for b in range(256)] + [None], [256]), timeout=None)"], check=True)
    folder = tmp_path_factory.mktemp("vllm_server")
    # A fixed key: the watermark test's z-scores are then those of fixed seeds (a random
    # key makes a sampled output's score vary from run to run).
    key = base64.b64encode(hashlib.sha256(b"guided tests: vLLM server key").digest()[:24]).decode()
    key_file = folder / "wm.key"
    key_file.write_text(key)
    key_file.chmod(0o600)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log_path = folder / "server.log"
    env = {**os.environ, "VLLM_PLUGINS": "guided", "GUIDED_WATERMARK_KEY_FILE": str(key_file),
           "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "GUIDED_VLLM_COMPILE_TIMEOUT": "2"}
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_folder,
                                 "--served-model-name", "smollm2", "--host", "127.0.0.1", "--port", str(port),
                                 "--dtype", "float32", "--enforce-eager", "--max-model-len", "1024",
                                 "--max-num-seqs", "8"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        import httpx

        deadline = time.time() + 300
        while True:
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.time() < deadline, log_path.read_text()[-4000:]
            time.sleep(0.5)
        yield SimpleNamespace(url=url, key=key, log=log_path, proc=proc)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _complete(server, prompt, xargs, **kw):
    import httpx

    body = {"model": "smollm2", "prompt": prompt, "max_tokens": kw.pop("max_tokens", 60), "temperature": 0.7,
            "seed": 1, "return_token_ids": True, **kw}
    if xargs is not None:
        body["vllm_xargs"] = xargs
    return httpx.post(server.url + "/v1/completions", json=body, timeout=300)


@pytest.mark.slow
@pytest.mark.server
def test_server_constrains_and_refuses_bad_specs(server):
    r = _complete(server, "A person as JSON:", {"guided_json": json.dumps(SCHEMA)})
    assert r.status_code == 200, r.text
    import jsonschema

    jsonschema.validate(json.loads(r.json()["choices"][0]["text"]), SCHEMA)
    # max_tokens binds: the masks finish the JSON in time; below the shortest output, a 400
    for seed in range(3):
        r = _complete(server, "A person as JSON:", {"guided_json": json.dumps(SCHEMA)}, max_tokens=16, seed=seed,
                      temperature=1.0)
        choice = r.json()["choices"][0]
        assert choice["finish_reason"] == "stop" and len(choice["token_ids"]) <= 16, choice
        jsonschema.validate(json.loads(choice["text"]), SCHEMA)
    r = _complete(server, "A person as JSON:", {"guided_json": json.dumps(SCHEMA)}, max_tokens=4)
    assert r.status_code == 400 and "max_tokens=4 is too small" in r.text, r.text
    r = _complete(server, "Pick:", {"guided_regex": "(red|green"})
    assert r.status_code == 400 and "position" in r.text, r.text
    bad = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 1}}, "required": ["n"]}
    r = _complete(server, "Pick:", {"guided_json": json.dumps(bad)})
    assert r.status_code == 400 and "#/properties/n" in r.text, r.text
    # A spec past the 2 s compile budget is refused, and requests beside it are served meanwhile.
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(_complete, server, "Pick:", {"guided_regex": SLOW_REGEX})
        time.sleep(0.3)
        r = _complete(server, "Choose a colour:", {"guided_choice": ["red", "green", "blue"]})
        assert r.status_code == 200 and r.json()["choices"][0]["text"] in ("red", "green", "blue")
        assert not slow.done()
        r = slow.result()
    assert r.status_code == 400 and "time limit" in r.text, r.text
    assert server.proc.poll() is None


@pytest.mark.slow
@pytest.mark.server
def test_server_serves_structural_tags_and_tools(server):
    import httpx

    tag = {"type": "structural_tag", "format": {"type": "tag", "begin": "<n>", "end": "</n>",
                                                 "content": {"type": "regex", "pattern": "[0-9]{3}"}}}
    chat = {"model": "smollm2", "messages": [{"role": "user", "content": "Write a number."}], "max_tokens": 30,
            "temperature": 0.7, "seed": 2}
    r = httpx.post(server.url + "/v1/chat/completions", json={**chat, "response_format": tag}, timeout=300)
    assert r.status_code == 200, r.text
    assert re.fullmatch(r"<n>[0-9]{3}</n>", r.json()["choices"][0]["message"]["content"])
    # guided enforces it (vLLM's backend would take a grammar part; guided says it cannot):
    grammar = {"type": "structural_tag", "format": {"type": "grammar", "grammar": 'root ::= "a"'}}
    r = httpx.post(server.url + "/v1/chat/completions", json={**chat, "response_format": grammar}, timeout=300)
    assert r.status_code == 400 and "grammar content is not supported" in r.text, r.text
    r = httpx.post(server.url + "/v1/chat/completions", timeout=300, json={
        **chat, "structured_outputs": {"structural_tag": json.dumps(tag)}})
    assert r.status_code == 200 and re.fullmatch(r"<n>[0-9]{3}</n>", r.json()["choices"][0]["message"]["content"])
    r = _complete(server, "<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n",
                  {"guided_tools": json.dumps(TOOLS), "guided_tool_choice": "add",
                   "guided_parallel_tool_calls": False}, max_tokens=80)
    assert r.status_code == 200, r.text
    _check({"guided_tools": True}, r.json()["choices"][0]["text"])


@pytest.mark.slow
@pytest.mark.server
def test_server_watermark_detected_and_key_kept(server):
    import httpx

    prompt = "<|im_start|>user\nWrite a long story about a dragon.<|im_end|>\n<|im_start|>assistant\n"
    marked = _complete(server, prompt, {"watermark": True}, max_tokens=200, temperature=1.0, seed=3)
    plain = _complete(server, prompt, None, max_tokens=200, temperature=1.0, seed=3)
    assert marked.status_code == 200 and plain.status_code == 200
    detect = server.url + "/v1/watermark/detect"
    z_marked = httpx.post(detect, json={"token_ids": marked.json()["choices"][0]["token_ids"]}, timeout=60)
    z_plain = httpx.post(detect, json={"token_ids": plain.json()["choices"][0]["token_ids"]}, timeout=60)
    assert z_marked.status_code == 200, z_marked.text
    z_marked, z_plain = z_marked.json()["z_score"], z_plain.json()["z_score"]
    assert z_marked >= 4 > z_plain, (z_marked, z_plain)
    # grammar-aware: constrained and watermarked, detected with the schema named
    list_schema = {"type": "array", "items": {"type": "string", "minLength": 20, "maxLength": 80},
                   "minItems": 6, "maxItems": 6}
    r = _complete(server, "<|im_start|>user\nDescribe six animals, a sentence each, as a JSON array of strings."
                  "<|im_end|>\n<|im_start|>assistant\n", {"watermark": True, "guided_json": json.dumps(list_schema)},
                  max_tokens=400, temperature=1.0, seed=5)
    text = r.json()["choices"][0]["text"]
    assert len(json.loads(text)) == 6
    ids = r.json()["choices"][0]["token_ids"]
    answer = httpx.post(detect, json={"token_ids": ids, "schema": list_schema}, timeout=60).json()
    assert answer.get("mode") == "grammar" and answer["z_score"] >= 4, answer
    for response in (marked, plain, r):
        assert server.key not in response.text
    assert server.key not in server.log.read_text()
