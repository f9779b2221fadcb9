"""The detection HTTP service: ``guided serve --key-file K`` (FastAPI + uvicorn).

Endpoints: ``POST /v1/watermark/detect`` (``{"text": ...}`` or ``{"token_ids": [...]}``,
optional ``"schema"`` for grammar-aware detection, with the ``"whitespace"`` and
``"key_order"`` generation used, ``"window"``), ``GET /healthz``,
and the OpenAPI docs at ``/docs`` and ``/openapi.json``.

Errors: a body over the size limit is 413; malformed JSON, unknown fields, a bad
schema or both/neither of text and token_ids are 422 with a message naming the
problem. The key is held by the detector and never enters a response or a log line
(responses carry its ``key_id``, a hash). Detection is CPU work, so the endpoint is a
plain function: FastAPI runs it in its thread pool, and concurrent clients are served
side by side (the detector is read-only once built).
"""

from __future__ import annotations

import json

from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from .detector import WatermarkDetector

#: Default request body limit (bytes) and token limit per request.
MAX_BODY_BYTES = 2_000_000
MAX_TOKENS = 100_000


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

    @model_validator(mode="after")
    def _one_input(self):
        if (self.text is None) == (self.token_ids is None):
            raise ValueError("give exactly one of 'text' and 'token_ids'")
        if self.token_ids is not None and any(t < 0 or t >= 1 << 63 for t in self.token_ids):
            raise ValueError("token_ids must be non-negative and below 2**63")
        return self


class BodyLimit:
    """ASGI middleware: refuse bodies over ``max_bytes`` with 413, whether or not the
    client sent a Content-Length (chunked bodies are counted as they arrive)."""

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            return await _too_large(send, self.max_bytes)
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
                    await _too_large(send, self.max_bytes)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message):
            if not rejected:
                await send(message)

        await self.app(scope, limited_receive, guarded_send)


async def _too_large(send, limit: int) -> None:
    body = json.dumps({"detail": f"request body larger than {limit} bytes"}).encode()
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def create_app(detector: WatermarkDetector, *, max_body_bytes: int = MAX_BODY_BYTES,
               max_tokens: int = MAX_TOKENS) -> FastAPI:
    """The FastAPI app serving ``detector`` (endpoints and errors: the module docstring).

    Args:
        detector: the detector; its key never leaves it.
        max_body_bytes: larger request bodies are refused with 413 (0: no limit).
        max_tokens: requests with more tokens are refused with 413.

    Returns:
        The ``FastAPI`` app, for any ASGI server (or ``fastapi.testclient``).

    Example::

        >>> app = create_app(WatermarkDetector(tokenizer, load_key("wm.key")))
        >>> uvicorn.run(app, host="127.0.0.1", port=8000)
        >>> httpx.post("http://127.0.0.1:8000/v1/watermark/detect", json={"text": "..."}).json()["z_score"]
    """
    app = FastAPI(
        title="guided watermark detection",
        description="Red-green watermark z-test, naive or grammar-aware. The key stays on the server.",
        version="1",
        # FastAPI's /docs and /redoc pages load scripts from outside CDNs: off.
        # /openapi.json describes the API.
        docs_url=None,
        redoc_url=None,
    )

    @app.get("/healthz")
    def healthz() -> dict:
        return {"status": "ok", "config": detector.fingerprint}

    @app.post("/v1/watermark/detect")
    def detect(request: DetectRequest) -> JSONResponse:
        try:
            ids = request.token_ids if request.token_ids is not None else detector.tokenize(request.text)
        except ValueError as e:
            raise HTTPException(422, str(e)) from None
        if len(ids) > max_tokens:
            raise HTTPException(413, f"{len(ids)} tokens: at most {max_tokens} per request")
        guide = None
        if request.json_schema is not None:
            guide = _compile_schema(detector, request)
        try:
            # from_text: the tokens of a text are the tokenizer's split, not the model's
            # (see watermark.spelling), as in the Python API.
            result = detector.detect(ids, guide=guide, window=request.window, min_window=request.min_window,
                                     from_text=request.text is not None)
        except ValueError as e:
            raise HTTPException(422, str(e)) from None
        return JSONResponse(result.as_dict())

    if max_body_bytes:
        app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    return app


def _compile_schema(detector: WatermarkDetector, request: DetectRequest):
    from guided.compiler import compile as compile_spec
    from guided.specs import JsonSchema

    try:
        spec = JsonSchema(request.json_schema, whitespace=request.whitespace, key_order=request.key_order)
        return compile_spec(spec, detector.tokenizer)
    except ValueError as e:  # SchemaError, RegexError: unsupported or invalid
        raise HTTPException(422, f"schema: {e}") from None


def serve(detector: WatermarkDetector, host: str = "127.0.0.1", port: int = 8000, **limits) -> None:
    """Run the service until interrupted (uvicorn; access logs carry no bodies).

    ``guided serve --key-file K`` calls it.

    Args:
        detector: the detector to serve.
        host: the interface to listen on (``127.0.0.1``: this machine only).
        port: the TCP port.
        **limits: ``max_body_bytes`` and ``max_tokens``, as for ``create_app``.

    Example::

        >>> serve(WatermarkDetector(load_tokenizer(), load_key("wm.key")), port=8000)
    """
    import uvicorn

    uvicorn.run(create_app(detector, **limits), host=host, port=port, log_level="info")
