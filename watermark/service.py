"""The detection HTTP service: ``guided serve --key-file K`` (FastAPI + uvicorn).

Endpoints: ``POST /v1/watermark/detect`` (``{"text": ...}`` or ``{"token_ids": [...]}``,
optional ``"schema"`` for grammar-aware detection, with the ``"whitespace"`` and
``"key_order"`` generation used, ``"window"``), ``GET /healthz``, and the OpenAPI
description at ``/openapi.json``.

What a response tells a client (the threat model, in full in docs/watermark.md): by
default only aggregates (``AGGREGATE_FIELDS``): the z-score, p-value and verdict, the
scored and green counts, and public facts (token counts, forced positions, where the
text left the grammar, the configuration). Apart from the green count, each is fixed
by what the client sent and the public configuration, so a request scoring n tokens
reveals at most log2(n + 1) bits about the key; a windowed request, at most
log2(w * (n + 1)) bits for its w windows searched. Per-token green flags and the
window's span (``DETAIL_FIELDS``) would make the service a green-list oracle (one
request of ``[p, t0, p, t1, ...]`` reads the green list of ``p``): they are sent only
when the request asks (``"details": true``) and the server allows it
(``allow_details``); otherwise asking is 403. Texts with fewer than
``min_scored_tokens`` scored tokens are refused (422). Over time, learning is bounded
by the per-client rate limit (a token bucket per bearer token, or per client address
when auth is off; 429 with ``Retry-After``); bearer tokens (``auth_tokens``) decide who
may ask at all (401 with ``WWW-Authenticate: Bearer``). ``/healthz`` stays open, and
shows the configuration only to authenticated clients.

Errors: a body over the size limit is 413, and so is a request over the token limit;
malformed or unreadable JSON, unknown fields, a bad schema (including one whose
compile passes the time limit) or both/neither of text and token_ids are 422 with a
message naming the problem, never echoing the body. The key is held by the detector
and never enters a response or a log line (responses carry its ``key_id``, a hash);
bearer tokens are never logged.

Work: detection is CPU work and runs in FastAPI's thread pool, so concurrent clients
are served side by side (the detector is read-only once built). Requests with a schema
(a compile, cached by ``guided.compile``, and a grammar replay of every token) take one
of ``max_schema_jobs`` slots; up to ``schema_queue`` more wait for one, each at most
``compile_timeout`` seconds, without holding a thread; past that they get 503 with
``Retry-After``. So many clients sending distinct expensive schemas run at most
``max_schema_jobs`` compiles at once, each stopped at ``compile_timeout`` seconds.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import logging
import math
import os
import threading
import time
import warnings
from collections import OrderedDict
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from .config import KeyFileWarning
from .detector import WatermarkDetector

#: Defaults: request body limit (bytes), token limit per request, the fewest scored
#: tokens a text needs, the per-client rate (requests per second) and burst, the
#: compile time limit (seconds), schema jobs at once and schema requests waiting.
MAX_BODY_BYTES = 2_000_000
MAX_TOKENS = 100_000
MIN_SCORED_TOKENS = 16
RATE_LIMIT = 2.0
RATE_BURST = 20
COMPILE_TIMEOUT = 10.0
MAX_SCHEMA_JOBS = 2
SCHEMA_QUEUE = 32
#: The most clients the rate limiter tracks at once (least recently seen dropped first).
MAX_TRACKED_CLIENTS = 65_536
#: The most connections and requests uvicorn serves at once (503 past it).
MAX_CONNECTIONS = 1024

#: What every ``/v1/watermark/detect`` response carries.
AGGREGATE_FIELDS = (
    "z_score", "p_value", "num_tokens_scored", "num_green", "green_fraction", "is_watermarked", "threshold",
    "config", "mode", "num_tokens", "num_forced", "windows_searched", "grammar_mismatch_at",
)
#: Added with ``"details": true`` on a server that allows it (``allow_details``).
DETAIL_FIELDS = ("green_flags", "span")

_OPEN_PATHS = ("/healthz",)
_CLIENT_KEY = "guided.client"  # scope entry: (authenticated, rate-limit identity)

log = logging.getLogger("guided.watermark.service")


class DetectRequest(BaseModel):
    """One text to test: exactly one of ``text`` and ``token_ids``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    text: str | None = Field(None, description="the text to test (tokenized with the service's tokenizer)")
    token_ids: list[int] | None = Field(None, description="token ids, instead of text")
    json_schema: dict | bool | None = Field(
        None, alias="schema", description="JSON Schema the text was generated under: grammar-aware detection")
    whitespace: str | dict = Field(
        "flexible",
        description='with schema: the JSON whitespace generation used ("flexible", "compact", {"indent": n})')
    key_order: str = Field("schema", description='with schema: the key order generation used ("schema" or "any")')
    window: bool = Field(False, description="find the most watermarked span (p-value corrected for the search)")
    min_window: int = Field(32, ge=4, le=100_000, description="shortest span tried in window mode (tokens)")
    details: bool = Field(
        False, description="also answer per-token green flags and the window's span: only on a server started "
                           "with --allow-details (403 otherwise)")

    @model_validator(mode="after")
    def _one_input(self):
        if (self.text is None) == (self.token_ids is None):
            raise ValueError("give exactly one of 'text' and 'token_ids'")
        if self.token_ids is not None and any(t < 0 or t >= 1 << 63 for t in self.token_ids):
            raise ValueError("token_ids must be non-negative and below 2**63")
        return self


# -- bearer tokens ---------------------------------------------------------------------------


class TokenFileWarning(KeyFileWarning):
    """An auth token file that users other than its owner may read or write (a
    ``KeyFileWarning``, so one filter covers both secret files)."""


def load_auth_tokens(path: str) -> list[bytes]:
    """Read the bearer tokens a service accepts: one per line, at least 16 characters.

    Blank lines and lines starting with ``#`` are skipped. Each token is one client
    identity: with a rate limit, each has its own bucket.

    Args:
        path: the token file.

    Returns:
        The tokens, as bytes.

    Warns:
        TokenFileWarning: other users may read or write the file (a ``KeyFileWarning``).

    Raises:
        ValueError: the file cannot be read, holds no token, or a token is shorter
            than 16 characters or holds whitespace.

    Example::

        >>> tokens = load_auth_tokens("tokens.txt")   # (umask 077; head -c 24 /dev/urandom | base64 > tokens.txt)
        >>> app = create_app(detector, auth_tokens=tokens)
    """
    try:
        with open(path, "rb") as f:
            if os.name == "posix" and os.fstat(f.fileno()).st_mode & 0o077:
                # Anyone who reads a token may query the service as that client.
                warnings.warn(f"the auth token file {path!r} is readable or writable by other users: "
                              f"chmod 600 {path}", TokenFileWarning, stacklevel=2)
            data = f.read()
    except OSError as e:
        raise ValueError(f"cannot read the auth token file {path!r}: {e.strerror}") from None
    tokens = []
    for number, line in enumerate(data.splitlines(), 1):
        token = line.strip()
        if not token or token.startswith(b"#"):
            continue
        if len(token) < 16 or any(c in token for c in b" \t\v\f"):
            raise ValueError(f"the auth token on line {number} of {path!r} is shorter than 16 characters "
                             "or holds whitespace")
        tokens.append(token)
    if not tokens:
        raise ValueError(f"the auth token file {path!r} holds no token")
    return tokens


class _Tokens:
    """The accepted bearer tokens, compared in constant time (digests, all of them)."""

    def __init__(self, tokens):
        tokens = [t.encode("utf-8") if isinstance(t, str) else bytes(t) for t in tokens]
        if not tokens or any(len(t) < 16 for t in tokens):
            raise ValueError("auth tokens must be at least 16 bytes each, and at least one is needed")
        self.digests = [hashlib.sha256(t).digest() for t in tokens]

    def match(self, header: bytes | None) -> int | None:
        """The index of the token an ``Authorization: Bearer`` header carries, or None."""
        if header is None:
            return None
        scheme, _, value = header.strip().partition(b" ")
        if scheme.lower() != b"bearer" or not value.strip():
            return None
        given = hashlib.sha256(value.strip()).digest()
        found = None
        for i, digest in enumerate(self.digests):  # no early exit: every token is compared
            if hmac.compare_digest(given, digest) and found is None:
                found = i
        return found


# -- rate limit ------------------------------------------------------------------------------


class RateLimiter:
    """Token buckets per client: ``rate`` requests per second, bursts of ``burst``.

    A bucket left alone refills to full, which is the same as no bucket: so at most
    ``max_clients`` are kept, those seen least recently dropped first.

    Args:
        rate: requests per second each client may sustain (> 0).
        burst: requests a client may send at once (>= 1).
        max_clients: the most buckets kept.
        clock: seconds, monotonic (tests pass their own).

    Example::

        >>> limiter = RateLimiter(2.0, 20)
        >>> limiter.take("203.0.113.7")      # 0.0: allowed; else the seconds to wait
        0.0
    """

    def __init__(self, rate: float, burst: int, max_clients: int = MAX_TRACKED_CLIENTS, clock=time.monotonic):
        if not (rate > 0 and math.isfinite(rate)) or burst < 1:
            raise ValueError(f"a rate limit needs rate > 0 and burst >= 1, got {rate}, {burst}")
        self.rate = float(rate)
        self.burst = int(burst)
        self.max_clients = max_clients
        self.clock = clock
        self.lock = threading.Lock()
        self.buckets: OrderedDict = OrderedDict()  # client -> (tokens, when)

    def take(self, client) -> float:
        """Spend one request of ``client``'s bucket: 0.0 if allowed, else the seconds
        until one is (nothing spent)."""
        now = self.clock()
        with self.lock:
            tokens, when = self.buckets.pop(client, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - when) * self.rate)
            allowed = tokens >= 1.0
            if allowed:
                tokens -= 1.0
            self.buckets[client] = (tokens, now)
            while len(self.buckets) > self.max_clients:
                self.buckets.popitem(last=False)
            return 0.0 if allowed else (1.0 - tokens) / self.rate


def _client_address(scope) -> str:
    """The peer's address as the rate limiter keys it: an IPv6 address by its /64."""
    client = scope.get("client")
    if not client:
        return "unknown"
    host = client[0]
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return str(host)
    if ip.version == 6:
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class Guard:
    """ASGI middleware: bearer-token auth, then the per-client rate limit, before any
    body is read.

    ``/healthz`` passes unchecked. A request over its client's rate is 429 with
    ``Retry-After``; one without a valid token is 401 with ``WWW-Authenticate:
    Bearer``, and it still spends from its address's bucket, so guessing tokens is
    rate limited too. The app finds ``(authenticated, identity)`` in the scope.

    Args:
        app: the ASGI app it guards.
        tokens: the accepted tokens (None: no auth).
        limiter: the rate limiter (None: no limit).

    Example::

        >>> app.add_middleware(Guard, tokens=_Tokens(load_auth_tokens("tokens.txt")),
        ...                    limiter=RateLimiter(2.0, 20))
    """

    def __init__(self, app, tokens: _Tokens | None, limiter: RateLimiter | None):
        self.app = app
        self.tokens = tokens
        self.limiter = limiter

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        index = None
        if self.tokens is not None:
            auth = [v for k, v in scope["headers"] if k == b"authorization"]
            index = self.tokens.match(auth[0] if len(auth) == 1 else None)
        authenticated = self.tokens is None or index is not None
        identity = f"token:{index}" if index is not None else f"address:{_client_address(scope)}"
        scope[_CLIENT_KEY] = (authenticated, identity)
        if scope["path"] in _OPEN_PATHS:
            return await self.app(scope, receive, send)
        if self.limiter is not None:
            wait = self.limiter.take(identity)
            if wait > 0:
                retry = max(1, math.ceil(wait))
                return await _answer(send, 429, f"rate limit: {self.limiter.rate:g} requests per second per "
                                                f"client, bursts of {self.limiter.burst}; retry in {retry} s",
                                     [(b"retry-after", str(retry).encode())])
        if not authenticated:
            has_header = any(k == b"authorization" for k, _ in scope["headers"])
            challenge = b'Bearer realm="guided"' + (b', error="invalid_token"' if has_header else b"")
            detail = "invalid bearer token" if has_header else "missing bearer token (Authorization: Bearer ...)"
            return await _answer(send, 401, detail, [(b"www-authenticate", challenge)])
        return await self.app(scope, receive, send)


# -- body size -------------------------------------------------------------------------------


class BodyLimit:
    """ASGI middleware: refuse bodies over ``max_bytes`` with 413, whether or not the
    client sent a Content-Length (chunked bodies are counted as they arrive).

    Args:
        app: the ASGI app it guards.
        max_bytes: the largest body accepted.

    Example::

        >>> app.add_middleware(BodyLimit, max_bytes=2_000_000)
    """

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            return await _answer(send, 413, f"request body larger than {self.max_bytes} bytes")
        received = 0
        rejected = False

        async def limited_receive():
            nonlocal received, rejected
            if rejected:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    # Answer now; the app sees a disconnected client and its replies are dropped.
                    rejected = True
                    await _answer(send, 413, f"request body larger than {self.max_bytes} bytes")
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message):
            if not rejected:
                await send(message)

        await self.app(scope, limited_receive, guarded_send)


async def _answer(send, status: int, detail: str, headers=()) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


# -- schema jobs -----------------------------------------------------------------------------


class _SchemaGate:
    """At most ``slots`` schema jobs at once; at most ``queue`` requests wait for a
    slot, each at most ``wait`` seconds, in the event loop (no thread held)."""

    def __init__(self, slots: int, queue: int, wait: float | None):
        if slots < 1 or queue < 0:
            raise ValueError(f"schema jobs must be >= 1 and the queue >= 0, got {slots}, {queue}")
        self.slots, self.queue, self.wait = slots, queue, wait
        self.waiting = 0
        self._sem: asyncio.Semaphore | None = None
        self._loop = None

    @asynccontextmanager
    async def slot(self):
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # one loop when served; a test client may start another
            self._sem, self._loop = asyncio.Semaphore(self.slots), loop
        sem = self._sem
        if not sem.locked():
            await sem.acquire()  # a free slot and no one waiting: taken at once
        elif self.waiting >= self.queue:
            raise HTTPException(503, f"busy: {self.slots} schema requests running and {self.waiting} waiting; "
                                     "retry later", headers={"Retry-After": "1"})
        else:
            self.waiting += 1
            try:
                await asyncio.wait_for(sem.acquire(), self.wait)
            except asyncio.TimeoutError:
                raise HTTPException(503, f"busy: no schema slot came free within {self.wait:g} s; retry later",
                                    headers={"Retry-After": "1"}) from None
            finally:
                self.waiting -= 1
        try:
            yield
        finally:
            sem.release()


# -- the app ---------------------------------------------------------------------------------


def create_app(detector: WatermarkDetector, *, max_body_bytes: int = MAX_BODY_BYTES, max_tokens: int = MAX_TOKENS,
               min_scored_tokens: int = MIN_SCORED_TOKENS, allow_details: bool = False,
               auth_tokens=None, rate_limit: float = RATE_LIMIT, rate_burst: int = RATE_BURST,
               compile_timeout: float | None = COMPILE_TIMEOUT, max_schema_jobs: int = MAX_SCHEMA_JOBS,
               schema_queue: int = SCHEMA_QUEUE, prefix: str = "/v1/watermark") -> FastAPI:
    """The FastAPI app serving ``detector`` (endpoints, errors, threat model: the
    module docstring and docs/watermark.md).

    Args:
        detector: the detector; its key never leaves it.
        max_body_bytes: larger request bodies are refused with 413 (0: no limit).
        max_tokens: requests with more tokens are refused with 413.
        min_scored_tokens: texts with fewer scored tokens are refused with 422 (0: none).
        allow_details: answer per-token green flags and window spans to requests that
            ask (``"details": true``). This makes the service a green-list oracle for
            whoever may call it: only for trusted clients.
        auth_tokens: bearer tokens (str or bytes, at least 16 bytes each) one of which
            every request but ``/healthz`` must carry (None: no auth); see
            ``load_auth_tokens``.
        rate_limit: requests per second per client (per bearer token with auth, else
            per address; IPv6 by /64), 429 past it (0: no limit).
        rate_burst: requests a client may send at once.
        compile_timeout: seconds a schema's compile may take (422 past it), and the
            longest a schema request waits for a slot (503 past it). None: no limit.
        max_schema_jobs: schema requests (compile and grammar replay) run at once.
        schema_queue: schema requests that may wait for a slot (503 past it).
        prefix: the detection route is ``{prefix}/detect`` ("" for an app mounted
            at the prefix, as the vLLM endpoint plugin does).

    Returns:
        The ``FastAPI`` app, for any ASGI server (or ``fastapi.testclient``).

    Raises:
        ValueError: a limit out of range, or an auth token shorter than 16 bytes.

    Example::

        >>> app = create_app(WatermarkDetector(tokenizer, load_key("wm.key")),
        ...                  auth_tokens=load_auth_tokens("tokens.txt"), rate_limit=2)
        >>> uvicorn.run(app, host="127.0.0.1", port=8000, proxy_headers=False)
        >>> httpx.post("http://127.0.0.1:8000/v1/watermark/detect", json={"text": "..."},
        ...            headers={"Authorization": "Bearer " + token}).json()["z_score"]
    """
    if min_scored_tokens < 0 or max_tokens < 1 or rate_limit < 0:
        raise ValueError("min_scored_tokens and rate_limit must be >= 0, max_tokens >= 1")
    if compile_timeout is not None and not compile_timeout > 0:
        raise ValueError(f"compile_timeout must be positive (or None), got {compile_timeout}")
    tokens = _Tokens(auth_tokens) if auth_tokens is not None else None
    limiter = RateLimiter(rate_limit, rate_burst) if rate_limit else None
    gate = _SchemaGate(max_schema_jobs, schema_queue, compile_timeout)
    app = FastAPI(
        title="guided watermark detection",
        description="Red-green watermark z-test, naive or grammar-aware. The key stays on the server; "
                    "responses carry aggregates (a request scoring n tokens reveals at most log2(n + 1) bits "
                    "about the key), per-token flags only where the server allows them.",
        version="1",
        # FastAPI's /docs and /redoc pages load scripts from outside CDNs: off.
        # /openapi.json describes the API.
        docs_url=None,
        redoc_url=None,
    )

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 400:  # FastAPI's answer to a body json cannot read
            return JSONResponse({"detail": "the body is not JSON this service reads (nested too deeply, or a "
                                           "number of more than 4300 digits)"}, status_code=422)
        return await http_exception_handler(request, exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        # FastAPI's own answer echoes the offending input: name the field and the problem only.
        errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
                  for e in exc.errors()[:20]]
        return JSONResponse({"detail": errors}, status_code=422)

    @app.get("/healthz")
    def healthz(request: Request) -> dict:
        authenticated, _ = request.scope.get(_CLIENT_KEY, (True, None))
        return {"status": "ok", "config": detector.fingerprint} if authenticated else {"status": "ok"}

    @app.post(f"{prefix}/detect")
    async def detect(request: DetectRequest) -> JSONResponse:
        if request.details and not allow_details:
            raise HTTPException(403, "per-token details are off on this server (guided serve --allow-details)")
        if request.text is not None:
            ids = await run_in_threadpool(_ids_of, detector, request, max_tokens)
        else:
            ids = _ids_of(detector, request, max_tokens)
        if request.json_schema is None:
            body = await run_in_threadpool(_detect, detector, request, ids, None, min_scored_tokens)
        else:
            async with gate.slot():
                body = await run_in_threadpool(_detect, detector, request, ids, compile_timeout, min_scored_tokens)
        return JSONResponse(body)

    if max_body_bytes:
        app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    if tokens is not None or limiter is not None:
        app.add_middleware(Guard, tokens=tokens, limiter=limiter)  # added last: runs first
    return app


def _ids_of(detector: WatermarkDetector, request: DetectRequest, max_tokens: int) -> list[int]:
    """The request's token ids (its text tokenized), within the token limit."""
    try:
        ids = request.token_ids if request.token_ids is not None else detector.tokenize(request.text)
    except ValueError as e:
        raise HTTPException(422, str(e)) from None
    if len(ids) > max_tokens:
        raise HTTPException(413, f"{len(ids)} tokens: at most {max_tokens} per request")
    return ids


def _detect(detector: WatermarkDetector, request: DetectRequest, ids, compile_timeout, min_scored: int) -> dict:
    """Detection for one request, as the response body (aggregates, details if asked)."""
    guide = _compile_schema(detector, request, compile_timeout) if request.json_schema is not None else None
    try:
        # from_text: the tokens of a text are the tokenizer's split, not the model's
        # (see watermark.spelling), as in the Python API.
        result = detector.detect(ids, guide=guide, window=request.window, min_window=request.min_window,
                                 from_text=request.text is not None, time_limit=compile_timeout)
    except ValueError as e:  # GuideMemoryError while replaying, among others
        raise HTTPException(422, str(e)) from None
    except Exception as e:
        if guide is None:
            raise
        # A guide that fails while replaying this text is the schema's problem: refuse it.
        log.exception("grammar-aware detection failed")
        raise HTTPException(422, f"schema: grammar-aware detection failed on this schema "
                                 f"({type(e).__name__}; see the server log)") from None
    scored = sum(flag is not None for flag in result.green_flags)
    if scored < min_scored:
        # Whether a text is scored depends only on its tokens, the grammar and the
        # settings, never on the key: refusing reveals nothing about the green lists.
        raise HTTPException(422, f"{scored} tokens scored (repeated, forced and first-context tokens are not): "
                                 f"this service tests texts with at least {min_scored}")
    d = result.as_dict()
    body = {k: d[k] for k in AGGREGATE_FIELDS}
    if request.details:
        body.update({k: d[k] for k in DETAIL_FIELDS})
    return body


def _compile_schema(detector: WatermarkDetector, request: DetectRequest, timeout: float | None):
    from guided.compiler import compile as compile_spec
    from guided.specs import JsonSchema

    try:
        spec = JsonSchema(request.json_schema, whitespace=request.whitespace, key_order=request.key_order)
        return compile_spec(spec, detector.tokenizer, timeout=timeout)
    except ValueError as e:  # SpecError: unsupported or invalid, or past the time or memory budget
        raise HTTPException(422, f"schema: {e}") from None
    except Exception as e:
        # Anything else escaping a compile is a compiler bug, but the schema caused it:
        # refuse the schema, keep the details for the operator.
        log.exception("schema compile failed")
        raise HTTPException(422, f"schema: the compiler failed on this schema ({type(e).__name__}; "
                                 "see the server log)") from None


def serve(detector: WatermarkDetector, host: str = "127.0.0.1", port: int = 8000, **limits) -> None:
    """Run the service until interrupted (uvicorn; access logs carry no bodies or tokens).

    ``guided serve --key-file K`` calls it. Client addresses are the TCP peers':
    ``X-Forwarded-For`` is not trusted, so behind a proxy every client shares the
    proxy's address (give clients bearer tokens, or rate-limit at the proxy).

    Args:
        detector: the detector to serve.
        host: the interface to listen on (``127.0.0.1``: this machine only).
        port: the TCP port.
        **limits: ``create_app``'s keyword arguments (limits, auth, details).

    Example::

        >>> serve(WatermarkDetector(load_tokenizer(), load_key("wm.key")), port=8000,
        ...       auth_tokens=load_auth_tokens("tokens.txt"))
    """
    import uvicorn

    if limits.get("allow_details") and limits.get("auth_tokens") is None:
        log.warning("per-token details are on without auth: every client can read green lists")
    uvicorn.run(create_app(detector, **limits), host=host, port=port, log_level="info",
                proxy_headers=False, limit_concurrency=MAX_CONNECTIONS)
