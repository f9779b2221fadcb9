"""guided's routes in vLLM's OpenAI-compatible server: spec validation and detection.

An entry point of vLLM's ``vllm.endpoint_plugins`` group. vLLM loads endpoint
plugins only when named in ``VLLM_PLUGINS``::

    VLLM_PLUGINS=guided GUIDED_WATERMARK_KEY_FILE=wm.key \\
        python -m vllm.entrypoints.openai.api_server --model MODEL

It does four things:

* serves structural tags: a request's ``response_format: {"type": "structural_tag",
  ...}`` or ``structured_outputs: {"structural_tag": ...}`` is moved into its
  ``vllm_xargs`` (``guided_structural_tag``) before vLLM reads it, so guided
  compiles and enforces it instead of vLLM's backend (``GUIDED_VLLM_STRUCTURAL_TAGS=vllm``
  leaves them to vLLM);
* compiles the spec of each ``/v1/completions`` and ``/v1/chat/completions``
  request (its ``vllm_xargs``) in a worker thread before vLLM reads the request:
  vLLM runs ``validate_params`` in its event loop, where a compile of seconds
  would hold up every other request. A spec that fails, or whose shortest output
  does not fit in the request's ``max_tokens`` (budget-aware masks,
  ``docs/budget.md``), is answered with HTTP 400 here; one that compiles is in the
  compile cache, its shortest output known, when ``validate_params`` asks;
* hands the served tokenizer to ``validate_params``, so requests are checked
  against the served vocabulary;
* serves ``POST /v1/watermark/detect`` (and ``GET /v1/watermark/healthz``) with the
  body and answer of ``guided serve`` (``guided.watermark.service``), with the
  served tokenizer and the server's key and settings (``vllm_watermark``).
"""

from __future__ import annotations

import json
import logging
import os

import anyio

from .vllm import check_request, register_vocabulary, vocabulary_for
from .vllm_watermark import configured, server_config, server_key

log = logging.getLogger("guided.vllm")

PREFIX = "/v1/watermark"
GENERATION_PATHS = ("/v1/completions", "/v1/chat/completions")
MAX_COMPILES = 2  # specs compiled at once; more requests wait their turn


class ValidateSpecs:
    """ASGI middleware: compile a generation request's spec off the event loop.

    Args:
        app: the ASGI app it wraps.

    Example::

        >>> app.add_middleware(ValidateSpecs)
    """

    def __init__(self, app):
        self.app = app
        self.limiter = anyio.CapacityLimiter(MAX_COMPILES)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in GENERATION_PATHS:
            await self.app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client left
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        body, scope = _structural_tags_to_guided(body, scope)
        error = await self._check(body)
        if error is not None:
            from starlette.responses import JSONResponse

            payload = {"error": {"message": error, "type": "BadRequestError", "param": None, "code": 400}}
            await JSONResponse(payload, status_code=400)(scope, receive, send)
            return
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _check(self, body: bytes) -> str | None:
        """The spec's error message, or None (no spec, or one that compiles; vLLM
        answers malformed bodies itself)."""
        try:
            payload = json.loads(body)
        except ValueError:
            return None  # vLLM answers a malformed body itself
        xargs = payload.get("vllm_xargs") if isinstance(payload, dict) else None
        if not isinstance(xargs, dict):
            return None
        # Without a limit in the body vLLM fills in what the context leaves: not known here.
        limit = payload.get("max_completion_tokens") or payload.get("max_tokens")
        limit = limit if isinstance(limit, int) and not isinstance(limit, bool) else None
        try:
            await anyio.to_thread.run_sync(lambda: check_request(xargs, limit), limiter=self.limiter)
        except ValueError as e:  # every spec error is a guided.SpecError, a ValueError
            return str(e)
        return None


def _structural_tags_to_guided(body: bytes, scope: dict) -> tuple[bytes, dict]:
    """The request with its structural tag (``response_format`` or
    ``structured_outputs``) moved into ``vllm_xargs`` as ``guided_structural_tag``,
    and its scope's ``content-length`` to match; unchanged where it has none, or where
    ``GUIDED_VLLM_STRUCTURAL_TAGS=vllm``."""
    if os.environ.get("GUIDED_VLLM_STRUCTURAL_TAGS", "guided") == "vllm":
        return body, scope
    try:
        payload = json.loads(body)
    except ValueError:
        return body, scope
    if not isinstance(payload, dict):
        return body, scope
    tag = None
    outputs = payload.get("structured_outputs")
    if isinstance(outputs, dict) and outputs.get("structural_tag") is not None:
        tag = outputs.pop("structural_tag")
        if not outputs:
            del payload["structured_outputs"]
    response_format = payload.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") == "structural_tag":
        tag = payload.pop("response_format")  # (vLLM: response_format overrides structured_outputs)
    if tag is None:
        return body, scope
    xargs = payload.get("vllm_xargs")
    if not isinstance(xargs, dict):
        xargs = payload["vllm_xargs"] = {}
    xargs["guided_structural_tag"] = tag if isinstance(tag, str) else json.dumps(tag)
    body = json.dumps(payload).encode()
    headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-length"]
    headers.append((b"content-length", str(len(body)).encode()))
    return body, {**scope, "headers": headers}


class GuidedEndpoints:
    """The ``guided`` endpoint plugin (vLLM builds it through ``plugin()``).

    Example::

        >>> p = plugin()
        >>> p.attach_router(app)                       # vLLM: while building the app
        >>> await p.init_state(engine_client, app.state, args)   # vLLM: at start-up
    """

    name = "guided"
    required_tasks = ("generate",)

    def __init__(self):
        self._app = None  # the detection app, built once the tokenizer is known

    def attach_router(self, app) -> None:
        """Add the validating middleware and mount the detection routes under ``/v1/watermark``."""
        app.add_middleware(ValidateSpecs)
        app.mount(PREFIX, self._asgi)

    async def init_state(self, engine_client, state, args) -> None:
        """Build the detector from the served model's tokenizer and the server's key."""
        from guided.watermark.detector import WatermarkDetector
        from guided.watermark.service import create_app

        if engine_client is None:
            return
        vocab = vocabulary_for(engine_client.model_config)
        register_vocabulary(vocab)
        if not configured():
            log.warning("guided: no watermark key in the environment; %s/detect answers 503", PREFIX)
            return
        from vllm.tokenizers import cached_tokenizer_from_config

        config = server_config()
        detector = WatermarkDetector(cached_tokenizer_from_config(model_config=engine_client.model_config),
                                     server_key(), config.gamma, config.delta, config.seeding,
                                     config.context_width, vocab_size=len(vocab))
        self._app = create_app(detector, prefix="")

    async def _asgi(self, scope, receive, send) -> None:
        if self._app is None:
            from starlette.responses import JSONResponse

            body = {"detail": "watermark detection is not configured on this server (no key)"}
            await JSONResponse(body, status_code=503)(scope, receive, send)
            return
        await self._app(scope, receive, send)


def plugin() -> GuidedEndpoints:
    """The entry point vLLM calls (``vllm.endpoint_plugins``: ``guided``)."""
    return GuidedEndpoints()
