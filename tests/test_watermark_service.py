"""The detection API: a real HTTP server on loopback, and the CLI."""

from __future__ import annotations

import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import torch

from guided.watermark import WatermarkDetector, WatermarkLogitsProcessor

KEY = b"service-test-key-0123456789"
V = 49152


def watermarked_ids(n=300, seed=0):
    wm = WatermarkLogitsProcessor(V, KEY)
    gen = torch.Generator().manual_seed(seed)
    ids = torch.tensor([[1]])
    for _ in range(n):
        scores = wm(ids, torch.randn(1, V, generator=gen) * 3)
        nxt = torch.multinomial(torch.softmax(scores[0], -1), 1, generator=gen)
        ids = torch.cat([ids, nxt[None]], dim=1)
    return ids[0, 1:].tolist()


@pytest.fixture(scope="module")
def server(smollm2_tokenizer):
    import uvicorn

    from guided.watermark.service import create_app

    detector = WatermarkDetector(smollm2_tokenizer, KEY)
    app = create_app(detector, max_body_bytes=200_000)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.time() + 20
    while not srv.started:
        assert time.time() < deadline, "server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", detector
    srv.should_exit = True
    thread.join(timeout=10)


@pytest.mark.server
def test_health_and_openapi(server):
    url, detector = server
    r = httpx.get(url + "/healthz")
    assert r.status_code == 200 and r.json()["status"] == "ok"
    assert r.json()["config"]["key_id"] == detector.fingerprint["key_id"]
    assert "/v1/watermark/detect" in httpx.get(url + "/openapi.json").json()["paths"]


@pytest.mark.server
def test_detect_token_ids_and_text(server, smollm2_tokenizer):
    url, detector = server
    ids = watermarked_ids()
    r = httpx.post(url + "/v1/watermark/detect", json={"token_ids": ids})
    assert r.status_code == 200
    body = r.json()
    assert body["is_watermarked"] and body["z_score"] == pytest.approx(detector.detect(ids).z_score)
    assert {"z_score", "p_value", "num_tokens_scored", "num_green", "green_fraction", "threshold", "config"} <= set(body)
    human = "The quick brown fox jumps over the lazy dog, and then it goes home to sleep for a while."
    r = httpx.post(url + "/v1/watermark/detect", json={"text": human})
    assert r.status_code == 200 and not r.json()["is_watermarked"]
    for resp in (r.text, httpx.get(url + "/healthz").text):
        assert KEY.decode() not in resp and KEY.hex() not in resp


@pytest.mark.server
def test_grammar_aware_request(server):
    url, _ = server
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    r = httpx.post(url + "/v1/watermark/detect", json={"text": '{"a": "hello there"}', "schema": schema})
    assert r.status_code == 200 and r.json()["mode"] == "grammar" and r.json()["num_forced"] > 0


@pytest.mark.server
def test_grammar_aware_request_with_the_generation_settings(server, smollm2_tokenizer):
    """whitespace / key_order as generation used them: out-of-order compact JSON
    replays without a grammar mismatch only with key_order "any"; text requests score
    as the Python API scores text."""
    url, detector = server
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}
    text = '{"b":"the_first_rather_long_property","a":12}'
    results = {}
    for order in ("schema", "any"):
        r = httpx.post(url + "/v1/watermark/detect",
                       json={"text": text, "schema": schema, "whitespace": "compact", "key_order": order})
        assert r.status_code == 200
        results[order] = r.json()
    assert results["schema"]["grammar_mismatch_at"] is not None
    assert results["any"]["grammar_mismatch_at"] is None
    import guided

    guide = guided.compile(guided.JsonSchema(schema, whitespace="compact", key_order="any"), smollm2_tokenizer)
    assert results["any"]["z_score"] == pytest.approx(detector.detect(text, guide=guide).z_score)
    r = httpx.post(url + "/v1/watermark/detect", json={"text": text, "schema": schema, "key_order": "sorted"})
    assert r.status_code == 422 and "key_order" in r.text


@pytest.mark.parametrize("body,fragment", [
    (b'{"text": "unterminated', "json"),
    (json.dumps({"text": "x", "colour": "red"}).encode(), "colour"),
    (json.dumps({"text": "x", "token_ids": [1, 2]}).encode(), "exactly one"),
    (json.dumps({}).encode(), "exactly one"),
    (json.dumps({"token_ids": [1, -5]}).encode(), "non-negative"),
    (json.dumps({"text": "x", "schema": {"type": "frobnicate"}}).encode(), "schema"),
    (b'{"text": "a \\ud800 b"}', "surrogate"),
    (json.dumps({"token_ids": [1, 2**63]}).encode(), "2**63"),
    (json.dumps({"token_ids": [1, 2**70]}).encode(), "2**63"),
])
@pytest.mark.server
def test_bad_requests_are_422_with_a_reason(server, body, fragment):
    url, _ = server
    r = httpx.post(url + "/v1/watermark/detect", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert fragment in r.text.lower()


@pytest.mark.server
def test_oversized_bodies_are_413(server):
    url, _ = server
    big = json.dumps({"text": "a" * 300_000}).encode()
    assert httpx.post(url + "/v1/watermark/detect", content=big,
                      headers={"content-type": "application/json"}).status_code == 413

    def chunks():  # no Content-Length: counted as it arrives
        for i in range(0, len(big), 16_384):
            yield big[i : i + 16_384]

    r = httpx.post(url + "/v1/watermark/detect", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert httpx.get(url + "/healthz").status_code == 200  # still up


@pytest.mark.server
def test_concurrent_clients(server):
    url, detector = server
    texts = [watermarked_ids(200, seed=s) for s in range(5)]
    expected = [detector.detect(t).z_score for t in texts]

    def call(i):
        with httpx.Client() as c:
            return c.post(url + "/v1/watermark/detect", json={"token_ids": texts[i % 5]}, timeout=60)

    with ThreadPoolExecutor(max_workers=32) as pool:
        responses = list(pool.map(call, range(100)))
    assert all(r.status_code == 200 for r in responses)
    assert all(r.json()["z_score"] == pytest.approx(expected[i % 5]) for i, r in enumerate(responses))


def test_cli_detect(tmp_path, smollm2_tokenizer, capsys):
    from guided.cli import main

    key_file = tmp_path / "wm.key"
    key_file.write_bytes(KEY + b"\n")
    text_file = tmp_path / "text.txt"
    text_file.write_text(smollm2_tokenizer.decode(watermarked_ids(200, seed=7)))
    assert main(["detect", "--key-file", str(key_file), str(text_file)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["is_watermarked"] and out["z_score"] > 4 and out["config"]["key_id"]
    assert KEY.decode() not in json.dumps(out)
    assert main(["detect", "--key-file", str(tmp_path / "missing.key"), str(text_file)]) == 2
    assert "cannot read the watermark key file" in capsys.readouterr().err


@pytest.mark.server
def test_no_page_loads_scripts_from_outside(server):
    url, _ = server
    assert httpx.get(url + "/docs").status_code == 404 and httpx.get(url + "/redoc").status_code == 404
    assert httpx.get(url + "/openapi.json").status_code == 200
