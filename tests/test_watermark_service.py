"""The detection API: a real HTTP server on loopback, the app in-process, and the CLI.

What the service must not be: a green-list oracle (per-token flags for pairs a client
chose), open to anyone when auth is on, unlimited in rate, or a 500 for any body.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx
import pytest
import torch
from fastapi import HTTPException
from fastapi.testclient import TestClient

from guided.watermark import KeyFileWarning, WatermarkDetector, WatermarkLogitsProcessor
from guided.watermark.service import (
    AGGREGATE_FIELDS,
    DETAIL_FIELDS,
    RateLimiter,
    TokenFileWarning,
    _client_address,
    _SchemaGate,
    create_app,
    load_auth_tokens,
)

KEY = b"service-test-key-0123456789"
V = 49152
T = 120  # seconds: client timeout (the machine may be busy)
DETECT = "/v1/watermark/detect"
TOKENS = ["client-a-0123456789abcdef", "client-b-0123456789abcdef"]
#: A recursive JSON tree: compiled to the grammar engine.
TREE = {"type": "object", "required": ["name", "children"],
        "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}}}


@functools.lru_cache(maxsize=None)
def _watermarked(n, seed):
    wm = WatermarkLogitsProcessor(V, KEY)
    gen = torch.Generator().manual_seed(seed)
    ids = torch.tensor([[1]])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one-row ops: extra threads only wait for each other on a busy machine
    try:
        for _ in range(n):
            scores = wm(ids, torch.randn(1, V, generator=gen) * 3)
            nxt = torch.multinomial(torch.softmax(scores[0], -1), 1, generator=gen)
            ids = torch.cat([ids, nxt[None]], dim=1)
    finally:
        torch.set_num_threads(threads)
    return tuple(ids[0, 1:].tolist())


def watermarked_ids(n=300, seed=0):
    return list(_watermarked(n, seed))


@contextmanager
def serving(app):
    """Run ``app`` with uvicorn on 127.0.0.1 (a free port) in a thread; stop it after."""
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", proxy_headers=False))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not srv.started:
        assert time.time() < deadline, "server did not start"
        assert thread.is_alive(), "server thread died"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def detector(smollm2_tokenizer):
    return WatermarkDetector(smollm2_tokenizer, KEY)


@pytest.fixture(scope="module")
def server(detector):
    """The production defaults, but no rate limit (tests send many requests from one
    address), no minimum of scored tokens (short grammar texts), a generous compile
    time limit (the machine may be busy)."""
    app = create_app(detector, max_body_bytes=200_000, rate_limit=0, min_scored_tokens=0, compile_timeout=120)
    with serving(app) as url:
        yield url, detector


@pytest.mark.server
def test_health_and_openapi(server):
    url, detector = server
    r = httpx.get(url + "/healthz", timeout=T)
    assert r.status_code == 200 and r.json()["status"] == "ok"
    assert r.json()["config"]["key_id"] == detector.fingerprint["key_id"]
    assert DETECT in httpx.get(url + "/openapi.json", timeout=T).json()["paths"]


@pytest.mark.server
def test_detect_token_ids_and_text(server, smollm2_tokenizer):
    url, detector = server
    ids = watermarked_ids()
    r = httpx.post(url + DETECT, json={"token_ids": ids}, timeout=T)
    assert r.status_code == 200
    body = r.json()
    assert body["is_watermarked"] and body["z_score"] == pytest.approx(detector.detect(ids).z_score)
    assert set(body) == set(AGGREGATE_FIELDS)
    human = "The quick brown fox jumps over the lazy dog, and then it goes home to sleep for a while."
    r = httpx.post(url + DETECT, json={"text": human}, timeout=T)
    assert r.status_code == 200 and not r.json()["is_watermarked"]
    for resp in (r.text, httpx.get(url + "/healthz", timeout=T).text):
        assert KEY.decode() not in resp and KEY.hex() not in resp


@pytest.mark.server
def test_grammar_aware_request(server):
    url, _ = server
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    r = httpx.post(url + DETECT, json={"text": '{"a": "hello there"}', "schema": schema}, timeout=T)
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
        r = httpx.post(url + DETECT, json={"text": text, "schema": schema, "whitespace": "compact", "key_order": order},
                       timeout=T)
        assert r.status_code == 200
        results[order] = r.json()
    assert results["schema"]["grammar_mismatch_at"] is not None
    assert results["any"]["grammar_mismatch_at"] is None
    import guided

    guide = guided.compile(guided.JsonSchema(schema, whitespace="compact", key_order="any"), smollm2_tokenizer)
    assert results["any"]["z_score"] == pytest.approx(detector.detect(text, guide=guide).z_score)
    r = httpx.post(url + DETECT, json={"text": text, "schema": schema, "key_order": "sorted"}, timeout=T)
    assert r.status_code == 422 and "key_order" in r.text


def _deep(levels: int, leaf: dict) -> dict:
    for _ in range(levels):
        leaf = {"type": "array", "items": leaf}
    return leaf


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
    # bodies json cannot read: nested past its recursion limit, a 5,000-digit number
    (b'{"text": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", "not json"),
    (b'{"token_ids": [1' + b"0" * 5000 + b"]}", "not json"),
    (b"[1, 2]", "dictionary"),
    (b"null", "dictionary"),
    # schemas: not a schema, too deep, a huge number, a remote $ref, bad whitespace
    (json.dumps({"text": "x", "schema": [1, 2]}).encode(), "schema"),
    (json.dumps({"text": "x", "schema": "string"}).encode(), "schema"),
    (json.dumps({"text": "[[1]]", "schema": _deep(300, {"type": "integer"})}).encode(), "deeper"),
    (json.dumps({"text": "1", "schema": {"$ref": "http://example.invalid/s.json"}}).encode(), "$ref"),
    (json.dumps({"text": "{}", "schema": {"type": "object"}, "whitespace": {"indent": -1}}).encode(), "whitespace"),
    (json.dumps({"text": "1", "schema": {"type": "integer", "minimum": float("nan")}}).encode(), "minimum"),
    (json.dumps({"text": "x", "schema": {"type": "string", "pattern": "(a)\\1"}}).encode(), "backreference"),
    (json.dumps({"text": "x", "schema": False}).encode(), "false"),
])
@pytest.mark.server
def test_bad_requests_are_422_with_a_reason(server, body, fragment):
    url, _ = server
    r = httpx.post(url + DETECT, content=body, headers={"content-type": "application/json"}, timeout=T)
    assert r.status_code == 422, r.text
    assert fragment in r.text.lower()
    assert len(r.content) < 2000  # the reason, never the body echoed back


@pytest.mark.parametrize("body", [
    {"text": "1", "schema": {"const": 10**400}},
    {"text": "1", "schema": {"enum": [{"a": [1, {"b": None}]}, 1.5e300, -0.0, 10**400]}},
    {"text": "1", "schema": {"type": "number", "multipleOf": 1e-300}},
    {"text": '"a"', "schema": {"type": "string", "minLength": 10**30}},
    {"text": '"a"', "schema": {"type": "string", "format": "no-such-format"}},
    {"text": "x", "schema": True},
    {"token_ids": [90, 10**9, 3], "schema": {"type": "object"}},
    {"token_ids": [90, 10**9, 3]},
    {"text": "a\u0000b"},
    {"token_ids": list(range(50)), "window": True, "min_window": 100_000},
])
@pytest.mark.server
def test_odd_bodies_are_never_a_server_error(server, body):
    url, _ = server
    r = httpx.post(url + DETECT, json=body, timeout=T)
    assert r.status_code in (200, 422), r.text


@pytest.mark.server
def test_oversized_bodies_are_413(server):
    url, _ = server
    big = json.dumps({"text": "a" * 300_000}).encode()
    assert httpx.post(url + DETECT, content=big, headers={"content-type": "application/json"},
                      timeout=T).status_code == 413

    def chunks():  # no Content-Length: counted as it arrives
        for i in range(0, len(big), 16_384):
            yield big[i : i + 16_384]

    r = httpx.post(url + DETECT, content=chunks(), headers={"content-type": "application/json"}, timeout=T)
    assert r.status_code == 413
    assert httpx.get(url + "/healthz", timeout=T).status_code == 200  # still up


@pytest.mark.server
def test_concurrent_clients(server):
    url, detector = server
    texts = [watermarked_ids(200, seed=s) for s in range(5)]
    expected = [detector.detect(t).z_score for t in texts]

    def call(i):
        with httpx.Client() as c:
            return c.post(url + DETECT, json={"token_ids": texts[i % 5]}, timeout=T)

    with ThreadPoolExecutor(max_workers=32) as pool:
        responses = list(pool.map(call, range(100)))
    assert all(r.status_code == 200 for r in responses)
    assert all(r.json()["z_score"] == pytest.approx(expected[i % 5]) for i, r in enumerate(responses))


def _tree_text(i: int) -> str:
    tree = {"name": f"node {i} of the quick brown fox", "children": [
        {"name": f"leaf {i} jumps over", "children": []},
        {"name": "the lazy dog", "children": [{"name": f"deep {i * 7}", "children": []}]}]}
    return json.dumps(tree, separators=(",", ":"))


@pytest.mark.server
def test_32_concurrent_requests_with_a_recursive_schema(detector, smollm2_tokenizer):
    """32 clients at once, one recursive schema (the grammar engine, one guide shared
    by the server's threads), on the default schema job slots and queue: no errors,
    and each answer is the in-process one. Needs thread-safe shared guides."""
    import guided

    app = create_app(detector, rate_limit=0, min_scored_tokens=0, compile_timeout=120)
    with serving(app) as url:
        def call(i):
            with httpx.Client() as c:
                return c.post(url + DETECT, timeout=T,
                              json={"text": _tree_text(i), "schema": TREE, "whitespace": "compact"})

        with ThreadPoolExecutor(max_workers=32) as pool:
            responses = list(pool.map(call, range(32)))
    errors = [(r.status_code, r.text[:200]) for r in responses if r.status_code != 200]
    assert errors == []
    guide = guided.compile(guided.JsonSchema(TREE, whitespace="compact"), smollm2_tokenizer)
    for i, r in enumerate(responses):
        body = r.json()
        assert body["mode"] == "grammar" and body["grammar_mismatch_at"] is None
        assert body["z_score"] == pytest.approx(detector.detect(_tree_text(i), guide=guide).z_score)


def test_cli_detect(tmp_path, smollm2_tokenizer, capsys):
    from guided.cli import main

    key_file = tmp_path / "wm.key"
    key_file.write_bytes(KEY + b"\n")
    os.chmod(key_file, 0o600)
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
    assert httpx.get(url + "/docs", timeout=T).status_code == 404
    assert httpx.get(url + "/redoc", timeout=T).status_code == 404
    assert httpx.get(url + "/openapi.json", timeout=T).status_code == 200


# -- not an oracle ----------------------------------------------------------------------------


def _oracle_ids(p: int, candidates) -> list[int]:
    """The green-list oracle request: [p, t0, p, t1, ...] scores (p, t) for every t."""
    return [x for t in candidates for x in (p, t)]


def test_an_oracle_request_learns_only_the_green_count(detector):
    """By default a response carries aggregates only: for the [p, t0, p, t1, ...]
    request, nothing per token, and nothing that is not fixed by the green count and
    public facts (another request scoring as many tokens, as many of them green,
    gets the very same answer): at most log2(n + 1) bits for n scored tokens."""
    client = TestClient(create_app(detector))  # the defaults
    ids = _oracle_ids(504, range(1000, 1400))
    r = client.post(DETECT, json={"token_ids": ids})
    assert r.status_code == 200
    body = r.json()
    assert set(body) == set(AGGREGATE_FIELDS)
    assert not set(DETAIL_FIELDS) & set(body)
    truth = detector.detect(ids)  # what the key holder sees: every pair's flag
    n, g = body["num_tokens_scored"], body["num_green"]
    assert (n, g) == (truth.num_tokens_scored, truth.num_green) and 0 <= g <= n
    assert sum(f is not None for f in truth.green_flags) == n == len(ids) - 1

    rng = random.Random(0)
    for _ in range(2000):  # another text with the same n and g
        other = [rng.randrange(V) for _ in ids]
        res = detector.detect(other)
        if (res.num_tokens_scored, res.num_green) == (n, g) and other != ids:
            break
    else:
        pytest.fail("no text with the same counts found")
    assert client.post(DETECT, json={"token_ids": other}).json() == body

    # Windowed: the best span's aggregates, not where it is.
    r = client.post(DETECT, json={"token_ids": ids, "window": True})
    assert r.status_code == 200 and set(r.json()) == set(AGGREGATE_FIELDS) and r.json()["windows_searched"] > 0
    # Asking for details is refused, not silently dropped.
    r = client.post(DETECT, json={"token_ids": ids, "details": True})
    assert r.status_code == 403 and "allow-details" in r.text


def test_details_only_where_the_server_allows_them(detector):
    client = TestClient(create_app(detector, allow_details=True))
    ids = _oracle_ids(504, range(1000, 1100))
    plain = client.post(DETECT, json={"token_ids": ids}).json()
    assert set(plain) == set(AGGREGATE_FIELDS)  # the same shape unless asked
    full = client.post(DETECT, json={"token_ids": ids, "details": True}).json()
    assert set(full) == set(AGGREGATE_FIELDS) | set(DETAIL_FIELDS)
    assert full["green_flags"] == detector.detect(ids).green_flags and full["span"] is None
    window = client.post(DETECT, json={"token_ids": ids, "window": True, "details": True}).json()
    assert len(window["span"]) == 2


def test_too_few_scored_tokens_are_refused(detector):
    client = TestClient(create_app(detector, min_scored_tokens=16, rate_limit=0))
    r = client.post(DETECT, json={"token_ids": list(range(100, 116))})  # 15 scored: the first has no context
    assert r.status_code == 422 and "15 tokens scored" in r.json()["detail"] and "at least 16" in r.json()["detail"]
    r = client.post(DETECT, json={"token_ids": list(range(100, 117))})
    assert r.status_code == 200 and r.json()["num_tokens_scored"] == 16
    r = client.post(DETECT, json={"token_ids": [7, 8] * 40})  # repeats are scored once: 2 n-grams
    assert r.status_code == 422 and "2 tokens scored" in r.json()["detail"]


# -- auth --------------------------------------------------------------------------------------


def _token_file(tmp_path, mode=0o600, text=None):
    path = tmp_path / "tokens.txt"
    path.write_text(text if text is not None else "# clients\n" + "\n".join(TOKENS) + "\n\n")
    os.chmod(path, mode)
    return str(path)


def test_auth_token_file(tmp_path, recwarn):
    assert load_auth_tokens(_token_file(tmp_path)) == [t.encode() for t in TOKENS]
    assert not [w for w in recwarn if issubclass(w.category, KeyFileWarning)]
    if os.name == "posix":
        with pytest.warns(TokenFileWarning, match="chmod 600"):
            load_auth_tokens(_token_file(tmp_path, 0o644))
        assert issubclass(TokenFileWarning, KeyFileWarning)
    with pytest.raises(ValueError, match="no token"):
        load_auth_tokens(_token_file(tmp_path, text="# nothing\n\n"))
    with pytest.raises(ValueError, match="shorter than 16"):
        load_auth_tokens(_token_file(tmp_path, text="short\n"))
    with pytest.raises(ValueError, match="cannot read the auth token file"):
        load_auth_tokens(str(tmp_path / "missing.txt"))


def test_bearer_auth(detector):
    client = TestClient(create_app(detector, auth_tokens=TOKENS, rate_limit=0))
    body = {"token_ids": list(range(100, 140))}
    r = client.post(DETECT, json=body)
    assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
    assert "invalid_token" not in r.headers["www-authenticate"]
    r = client.post(DETECT, json=body, headers={"Authorization": "Bearer " + TOKENS[0][:-1] + "X"})
    assert r.status_code == 401 and 'error="invalid_token"' in r.headers["www-authenticate"]
    assert client.post(DETECT, json=body, headers={"Authorization": "Basic " + TOKENS[0]}).status_code == 401
    for token in TOKENS:
        assert client.post(DETECT, json=body, headers={"Authorization": "Bearer " + token}).status_code == 200
    assert client.post(DETECT, json=body, headers={"authorization": "bearer " + TOKENS[1]}).status_code == 200
    assert client.get("/openapi.json").status_code == 401
    health = client.get("/healthz")  # open, but the configuration only for clients
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    health = client.get("/healthz", headers={"Authorization": "Bearer " + TOKENS[0]})
    assert health.json()["config"]["key_id"] == detector.fingerprint["key_id"]


@pytest.mark.server
def test_bearer_auth_over_http(detector):
    with serving(create_app(detector, auth_tokens=TOKENS)) as url:
        body = {"token_ids": list(range(100, 140))}
        r = httpx.post(url + DETECT, json=body, timeout=T)
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
        r = httpx.post(url + DETECT, json=body, timeout=T, headers={"Authorization": f"Bearer {TOKENS[0]}"})
        assert r.status_code == 200 and set(r.json()) == set(AGGREGATE_FIELDS)
        assert httpx.get(url + "/healthz", timeout=T).json() == {"status": "ok"}


# -- rate limit --------------------------------------------------------------------------------


def test_rate_limiter_token_bucket():
    now = [100.0]
    limiter = RateLimiter(2.0, 3, max_clients=2, clock=lambda: now[0])
    assert [limiter.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take("a") == pytest.approx(0.5)  # one request refills in 1 / rate s
    assert limiter.take("b") == 0.0  # its own bucket
    now[0] += 0.5
    assert limiter.take("a") == 0.0 and limiter.take("a") > 0
    limiter.take("c")  # a third client: the least recently seen is dropped
    assert len(limiter.buckets) == 2 and "b" not in limiter.buckets
    with pytest.raises(ValueError):
        RateLimiter(0, 1)


def test_client_addresses():
    def addr(host):
        return _client_address({"client": (host, 1234)})

    assert addr("203.0.113.7") == "203.0.113.7" != addr("203.0.113.8")
    assert addr("2001:db8::1") == addr("2001:db8::ffff") == "2001:db8::/64"  # one host, one /64
    assert addr("2001:db8:0:1::1") != addr("2001:db8::1")
    assert addr("::ffff:203.0.113.7") == "203.0.113.7"
    assert _client_address({"client": None}) == "unknown"


def test_rate_limit_answers_429_with_retry_after(detector):
    client = TestClient(create_app(detector, rate_limit=0.5, rate_burst=2))
    body = {"token_ids": list(range(100, 140))}
    assert [client.post(DETECT, json=body).status_code for _ in range(2)] == [200, 200]
    r = client.post(DETECT, json=body)
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1 and "rate limit" in r.json()["detail"]
    assert client.get("/healthz").status_code == 200  # never limited


def test_rate_limit_is_per_token_with_auth(detector):
    client = TestClient(create_app(detector, auth_tokens=TOKENS, rate_limit=0.5, rate_burst=2))
    body = {"token_ids": list(range(100, 140))}
    a, b = ({"Authorization": f"Bearer {t}"} for t in TOKENS)
    assert [client.post(DETECT, json=body, headers=a).status_code for _ in range(3)] == [200, 200, 429]
    assert client.post(DETECT, json=body, headers=b).status_code == 200  # another client's bucket
    # Wrong tokens spend from the address's bucket: guessing is limited too.
    wrong = {"Authorization": "Bearer " + "x" * 24}
    assert [client.post(DETECT, json=body, headers=wrong).status_code for _ in range(3)] == [401, 401, 429]


# -- schema jobs and the compile time limit ------------------------------------------------------


def test_schema_gate_bounds_jobs_and_waiters():
    async def scenario():
        gate = _SchemaGate(1, 1, 0.2)
        async with gate.slot():
            waiter = asyncio.ensure_future(_enter(gate))
            await asyncio.sleep(0.01)
            assert gate.waiting == 1
            with pytest.raises(HTTPException) as full:  # one running, one waiting: the next is refused
                await _enter(gate)
            assert full.value.status_code == 503 and full.value.headers["Retry-After"] == "1"
            with pytest.raises(HTTPException) as late:  # the waiter gave up after 0.2 s
                await waiter
            assert late.value.status_code == 503
        await _enter(gate)  # free again
        return gate.waiting

    async def _enter(gate):
        async with gate.slot():
            pass

    assert asyncio.run(scenario()) == 0


def _expensive_schema(salt: str, k: int = 13) -> dict:
    """A schema whose compile takes seconds: two patterns whose automata have ~2**k
    states each, intersected (``salt`` makes it one no cache holds)."""
    return {"type": "string", "allOf": [{"pattern": f"^{salt}[a-z]*a[a-z]{{{k}}}$"},
                                        {"pattern": f"^{salt}[a-z]*b[a-z]{{{k - 1}}}[a-z]*$"}]}


@pytest.mark.server
def test_distinct_expensive_schemas_at_once_are_bounded(detector):
    """One schema job at a time and none waiting: of four distinct expensive schemas
    sent at once, those that find the slot taken are 503 with Retry-After, none 500."""
    app = create_app(detector, rate_limit=0, min_scored_tokens=0, max_schema_jobs=1, schema_queue=0)
    with serving(app) as url:
        def call(i):
            with httpx.Client() as c:
                return c.post(url + DETECT, timeout=T,
                              json={"text": '"abc"', "schema": _expensive_schema(uuid.uuid4().hex[:8], 11)})

        with ThreadPoolExecutor(max_workers=4) as pool:
            responses = list(pool.map(call, range(4)))
    codes = sorted(r.status_code for r in responses)
    assert set(codes) <= {200, 422, 503} and 503 in codes and codes[0] != 503, codes
    assert all(r.headers["retry-after"] == "1" for r in responses if r.status_code == 503)


def test_compile_timeout_is_passed_to_compile(detector, monkeypatch):
    import guided.compiler

    seen = {}
    real = guided.compiler.compile

    def spy(spec, vocab, **kw):
        seen.update(kw)
        return real(spec, vocab, **kw)

    monkeypatch.setattr(guided.compiler, "compile", spy)
    client = TestClient(create_app(detector, compile_timeout=7.5, min_scored_tokens=0, rate_limit=0))
    r = client.post(DETECT, json={"text": '{"a": 1}', "schema": {"type": "object"}})
    assert r.status_code == 200 and seen["timeout"] == 7.5


def test_a_compile_past_the_time_limit_is_422(detector):
    client = TestClient(create_app(detector, compile_timeout=0.05, min_scored_tokens=0, rate_limit=0))
    r = client.post(DETECT, json={"text": '"abc"', "schema": _expensive_schema(uuid.uuid4().hex[:8])})  # not cached
    assert r.status_code == 422 and "time limit" in r.json()["detail"]


# -- the CLI -------------------------------------------------------------------------------------


def test_cli_serve_flags_reach_the_app(tmp_path, monkeypatch):
    import guided.watermark.service as service
    from guided.cli import main

    key_file = tmp_path / "wm.key"
    key_file.write_bytes(KEY)
    os.chmod(key_file, 0o600)
    calls = []
    monkeypatch.setattr(service, "serve", lambda detector, host, port, **limits: calls.append((host, port, limits)))
    assert main(["serve", "--key-file", str(key_file), "--port", "9999", "--auth-token-file", _token_file(tmp_path),
                 "--allow-details", "--rate-limit", "5", "--rate-burst", "7", "--compile-timeout", "3",
                 "--max-schema-jobs", "4", "--schema-queue", "9", "--min-scored-tokens", "0",
                 "--max-tokens", "500"]) == 0
    (host, port, limits), = calls
    assert (host, port) == ("127.0.0.1", 9999)
    assert limits == {"max_body_bytes": 2_000_000, "max_tokens": 500, "min_scored_tokens": 0, "allow_details": True,
                      "auth_tokens": [t.encode() for t in TOKENS], "rate_limit": 5.0, "rate_burst": 7,
                      "compile_timeout": 3.0, "max_schema_jobs": 4, "schema_queue": 9}
    calls.clear()
    assert main(["serve", "--key-file", str(key_file)]) == 0
    limits = calls[0][2]
    assert (limits["auth_tokens"], limits["allow_details"], limits["rate_limit"], limits["compile_timeout"],
            limits["min_scored_tokens"]) == (None, False, 2.0, 10.0, 16)


def test_cli_serve_refuses_a_bad_token_file(tmp_path, capsys):
    from guided.cli import main

    key_file = tmp_path / "wm.key"
    key_file.write_bytes(KEY)
    assert main(["serve", "--key-file", str(key_file), "--auth-token-file", str(tmp_path / "missing")]) == 2
    assert "cannot read the auth token file" in capsys.readouterr().err
