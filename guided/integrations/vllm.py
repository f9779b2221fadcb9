"""guided inside vLLM: a logits processor for the whole batch, one matcher per request.

Installed with guided, ``GuidedLogitsProcessor`` is registered in vLLM's
``vllm.logits_processors`` entry-point group, so every ``LLM(...)`` and every
OpenAI-compatible server of that environment loads it. A request asks for a
constraint through ``SamplingParams(extra_args={...})``, over HTTP ``vllm_xargs``
(keys in ``guided.integrations.requests``)::

    request ──► API server: validate_params ── compiles the spec ──► HTTP 400 on error
                    │
                    ▼
    engine core ──► worker: update_state(BatchUpdate)   added / removed / moved rows
                    │        apply(logits)               advance each matcher by the
                    │                                    tokens its output list gained,
                    ▼                                    fill every constrained row of one
              sampler ◄── masked logits                  int32 bitmask, mask in one call

Cost notes: a batch without constrained rows returns at once. A constrained row
costs its matcher's mask (a cached row: a lookup; a new state: its walk) and its
share of one bitmask application on the logits' device. Guides are compiled once
per process and spec (``guided.compile``'s cache): in the API server to validate,
and in the worker on the request's first step (a cache hit when the engine runs
in the same process).

vLLM has two model-runner interfaces: V1 (``update_state`` / ``apply(logits)``;
vLLM's CPU build and runners without Triton) and V2 (``add_request`` /
``apply(logits, ctx)``; the default on GPUs with Triton). The class implements
both, so installing guided never stops an engine from starting; vLLM picks the
interface. Settings come from the environment, since vLLM builds the processor
itself: ``GUIDED_VLLM_COMPILE_TIMEOUT`` (seconds, default 10),
``GUIDED_VLLM_MASK_THREADS`` (default 1), and the watermark key
(``guided.integrations.vllm_watermark``).
"""

from __future__ import annotations

import logging
import os
import threading

import numpy as np
import torch
from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality
from vllm.v1.sample.logits_processor import LogitsProcessor as V1LogitsProcessor

from guided.batch import fill_next_token_bitmasks
from guided.bitmask import allocate_token_bitmask, apply_token_bitmask_
from guided.budget import check_budget
from guided.compiler import compile as compile_spec
from guided.fsm import kernels
from guided.fsm.vocabulary import Vocabulary

from .requests import budget_aware_requested, spec_from_extra_args, watermark_requested
from .vllm_watermark import KEY_FILE_ENV, ServerWatermark
from .vllm_watermark import configured as watermark_configured

try:  # vLLM's Model Runner V2 interface (absent from older vLLM)
    from vllm.v1.worker.gpu.sample.logits_processor.interface import LogitsProcessor as V2LogitsProcessor
except ImportError:  # pragma: no cover - depends on the vLLM version
    class V2LogitsProcessor:
        pass

log = logging.getLogger("guided.vllm")

_vocab_lock = threading.Lock()
_frontend_vocab: Vocabulary | None = None
_byte_vocab: Vocabulary | None = None


def compile_timeout() -> float | None:
    """Seconds a spec may take to compile (``GUIDED_VLLM_COMPILE_TIMEOUT``; 0: no limit)."""
    value = float(os.environ.get("GUIDED_VLLM_COMPILE_TIMEOUT", "10"))
    return value if value > 0 else None


def register_vocabulary(vocab: Vocabulary) -> None:
    """Use ``vocab`` (the served model's) for ``validate_params`` in this process.

    The API server does not hand its tokenizer to logits processors; without a
    registered vocabulary, validation compiles against a byte vocabulary, which
    raises every error of the spec itself (syntax, unsupported keyword, empty
    language, time limit) but not those of one tokenizer (a character no token
    spells). The endpoint plugin and an in-process engine register theirs.
    """
    global _frontend_vocab
    with _vocab_lock:
        _frontend_vocab = vocab


def validation_vocabulary() -> Vocabulary:
    """The vocabulary ``validate_params`` compiles against (``register_vocabulary``)."""
    global _byte_vocab
    with _vocab_lock:
        if _frontend_vocab is not None:
            return _frontend_vocab
        if _byte_vocab is None:
            _byte_vocab = Vocabulary([bytes([b]) for b in range(256)] + [None], [256], name="bytes")
        return _byte_vocab


def check_request(extra_args, max_tokens: int | None) -> None:
    """Compile a request's spec against ``validation_vocabulary()``; where that is
    the served vocabulary and the request is budget-aware, check that its shortest
    output fits in ``max_tokens``.

    Raises:
        ValueError: the spec's error, or ``TokenBudgetError`` (naming the shortest
            output's length).
    """
    spec = spec_from_extra_args(extra_args)
    if spec is None:
        return
    vocab = validation_vocabulary()
    guide = compile_spec(spec, vocab, timeout=compile_timeout())
    if max_tokens is not None and vocab is not _byte_vocab and budget_aware_requested(extra_args):
        check_budget(guide, int(max_tokens), limit="max_tokens", opt_out='set "guided_budget_aware": false')


def vocabulary_for(model_config) -> Vocabulary:
    """The guided vocabulary of the tokenizer vLLM serves ``model_config`` with."""
    from vllm.tokenizers import cached_tokenizer_from_config

    tokenizer = cached_tokenizer_from_config(model_config=model_config)
    if tokenizer is None:
        raise ValueError("guided needs the model's tokenizer: start vLLM without --skip-tokenizer-init")
    return Vocabulary.from_tokenizer(tokenizer)


class _Row:
    """One constrained or watermarked request in the batch."""

    __slots__ = (
        "consumed",
        "failed",
        "matcher",
        "max_tokens",
        "min_tokens",
        "output",
        "prompt",
        "stops",
        "temperature",
        "watermark",
    )

    def __init__(self, output, prompt, stops, watermark, temperature, min_tokens=0):
        self.matcher = None          # None: watermark only, or the spec failed to compile
        self.output = output         # vLLM's live list of output ids (V1); None under V2
        self.prompt = prompt or ()   # prompt ids: the watermark's context at the first step (V1)
        self.consumed = 0            # output ids the matcher has accepted
        self.stops = stops           # ids that end the request: allowed where the spec is complete
        self.failed = False          # constrained, but refused a token or did not compile: EOS only
        self.watermark = watermark   # the request asked for the watermark
        self.temperature = temperature
        self.min_tokens = min_tokens  # vLLM masks the stop tokens until this many outputs
        self.max_tokens = None       # budget-aware masks: the request's max_tokens (EOS included)

    def remaining(self, next_output: int) -> int | None:
        """Tokens left to the request when it samples output number ``next_output``."""
        return None if self.max_tokens is None else max(1, self.max_tokens - next_output)

    @property
    def constrained(self) -> bool:
        return self.matcher is not None or self.failed


class GuidedLogitsProcessor(V1LogitsProcessor, V2LogitsProcessor):
    """Per-request JSON Schema / regex / grammar / choice constraints in vLLM.

    Contract (V1): vLLM calls ``update_state`` with the batch's changes before each
    step (rows removed, then added, then moved or swapped), then ``apply(logits)``
    with float32 ``[num_reqs, V]``. Each constrained row's matcher first accepts the
    tokens its output list gained (up to the first placeholder), then the rows'
    masks are filled into one int32 bitmask and applied on the logits' device; other
    rows are untouched. EOS and the request's stop tokens are allowed exactly where
    the spec is complete; a complete spec that nothing can extend allows EOS alone.
    Regex, JSON Schema and grammar masks are budget-aware (``docs/budget.md``): a token is
    allowed only where the spec can still be finished, EOS included, within the
    request's ``max_tokens`` (off with ``"guided_budget_aware": false``).
    A token the matcher refuses (another processor forced it) ends the request: EOS
    alone from then on, and a warning in the log. ``is_argmax_invariant`` is False:
    the mask changes greedy choices. Requests with ``"watermark": true`` get the
    server's red-green watermark (``vllm_watermark``), drawn among the allowed tokens
    when the request is constrained as well.

    Contract (V2): ``add_request`` per request slot, then ``apply(logits, ctx)`` with
    a logits row per request (and per draft token under speculative decoding); each
    row's matcher is brought to the row's position from the token fed there (rolled
    back where drafts were rejected).

    Args:
        vllm_config: the engine's ``VllmConfig`` (vLLM passes it).
        *args: V1: ``device, is_pin_memory``; V2: ``req_states``.

    Raises:
        ValueError (``validate_params``): the request's spec does not compile, or
            (where the served vocabulary is registered, ``register_vocabulary``) its
            shortest output does not fit in ``max_tokens`` (``TokenBudgetError``);
            the API server answers HTTP 400 with the message.

    Example::

        >>> from vllm import LLM, SamplingParams
        >>> llm = LLM(model="HuggingFaceTB/SmolLM2-135M-Instruct")   # guided loads itself
        >>> params = SamplingParams(max_tokens=64, extra_args={"guided_json": '{"type": "integer"}'})
        >>> llm.generate(["How many legs has a spider? Answer in JSON."], params)[0].outputs[0].text
        '8'
    """

    def __init__(self, vllm_config, *args):
        rows = vllm_config.scheduler_config.max_num_seqs
        if len(args) == 1:  # V2: (vllm_config, req_states)
            req_states, device = args[0], torch.device(args[0].device)
            pin = device.type == "cuda"
            spec = vllm_config.speculative_config
            rows *= 1 + (spec.num_speculative_tokens if spec is not None else 0)  # a row per draft
        else:  # V1: (vllm_config, device, is_pin_memory)
            req_states, device = None, torch.device(args[0])
            pin = bool(args[1]) and device.type == "cuda"
        if kernels.AVAILABLE:  # numba loads while the engine starts, not in the first request
            kernels.warm_up()
        vocab = vocabulary_for(vllm_config.model_config)
        if os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "1") == "0":
            register_vocabulary(vocab)  # the API side of this same process validates with it
        self._setup(vocab, vllm_config.model_config.get_vocab_size(), rows, pin, req_states)

    @classmethod
    def from_vocabulary(cls, vocab: Vocabulary, max_rows: int, *, width: int | None = None,
                        req_states=None) -> GuidedLogitsProcessor:
        """A processor built outside vLLM's loader (tests, a custom model runner).

        Args:
            vocab: the served tokenizer's vocabulary.
            max_rows: the most logits rows a step has.
            width: the logits' width (default: the vocabulary's size).
            req_states: V2's request state (``prompt_len``, ``all_token_ids``); None: V1.
        """
        self = cls.__new__(cls)
        self._setup(vocab, width or len(vocab), max_rows, False, req_states)
        return self

    def _setup(self, vocab: Vocabulary, width: int, rows: int, pin: bool, req_states) -> None:
        self.vocab = vocab
        self.width = width
        self.req_states = req_states
        self.bitmask = allocate_token_bitmask(rows, width)
        if pin:
            self.bitmask = self.bitmask.pin_memory()
        self._words = self.bitmask.numpy().view(np.uint32)
        self.threads = max(1, int(os.environ.get("GUIDED_VLLM_MASK_THREADS", "1")))
        self.timeout = compile_timeout()
        self.rows: dict[int, _Row] = {}
        self.watermark = ServerWatermark.from_environment(vocab)
        self._warned: set[int] = set()
        self._v2_last: dict[int, tuple[int, int, int]] = {}

    @classmethod
    def validate_params(cls, sampling_params) -> None:
        """Compile the request's spec (API server side); raise ``ValueError`` if it fails.

        Also refuses ``"watermark": true`` when the server has no watermark key, and
        a budget-aware request whose shortest output does not fit in ``max_tokens``
        where the served vocabulary is known (``register_vocabulary``: the byte
        vocabulary's token counts are not the model's).
        """
        extra = sampling_params.extra_args
        if watermark_requested(extra) and not watermark_configured():
            raise ValueError(f"this server has no watermark key (start it with {KEY_FILE_ENV} set)")
        check_request(extra, sampling_params.max_tokens)

    def is_argmax_invariant(self) -> bool:
        """False: masks and the watermark change which token is most likely."""
        return False

    # -- V1 interface -------------------------------------------------------------

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        """Follow the persistent batch: rows removed, then added, then moved."""
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.rows.pop(index, None)
        for index, params, prompt_ids, output_ids in batch_update.added:
            row = self._new_row(index, params, prompt_ids, output_ids)
            if row is None:
                self.rows.pop(index, None)
            else:
                self.rows[index] = row
        for a, b, direction in batch_update.moved:
            row_a, row_b = self.rows.pop(a, None), self.rows.pop(b, None)
            if row_a is not None:
                self.rows[b] = row_a
            if direction == MoveDirectionality.SWAP and row_b is not None:
                self.rows[a] = row_b

    def apply(self, logits: torch.Tensor, ctx=None) -> torch.Tensor:
        """Mask (and watermark) the constrained rows of ``logits`` in place."""
        if not self.rows:
            return logits
        if ctx is not None:
            return self._apply_v2(logits, ctx)
        entries = []
        for index in sorted(i for i in self.rows if i < logits.shape[0]):
            row = self.rows[index]
            if row.matcher is not None and not row.failed:
                self._catch_up(index, row)
            entries.append((index, index, row))
        masked = [(b, row) for _, b, row in entries if row.constrained]
        if masked:
            fill_next_token_bitmasks([row.matcher if not row.failed else None for _, row in masked],
                                     self.bitmask, [b for b, _ in masked], threads=self.threads,
                                     remaining=[row.remaining(row.consumed) for _, row in masked])
            for b, row in masked:
                self._finish_row(b, row)
        return self._apply_masks(logits, entries, self._v1_context)

    def _v1_context(self, index: int, row: _Row) -> list[int]:
        w = self.watermark.context_width
        out = row.output
        return list(out[-w:]) if len(out) >= w else list(row.prompt[len(row.prompt) - (w - len(out)):]) + list(out)

    # -- V2 interface -------------------------------------------------------------

    def add_request(self, req_idx: int, sampling_params) -> bool:
        """Start (or clear) slot ``req_idx``; True when this request is constrained or watermarked."""
        row = self._new_row(req_idx, sampling_params, None, None)
        if row is None:
            self.rows.pop(req_idx, None)
            return False
        self.rows[req_idx] = row
        return True

    def _apply_v2(self, logits: torch.Tensor, ctx) -> torch.Tensor:
        slots = ctx.idx_mapping_np
        if not any(int(s) in self.rows for s in slots):
            return logits
        mapping = ctx.expanded_idx_mapping.tolist()  # logits row -> slot
        picked = [r for r, s in enumerate(mapping) if s in self.rows]
        where = torch.tensor(picked, device=ctx.pos.device)
        positions = ctx.pos.index_select(0, where).tolist()
        fed = ctx.input_ids.index_select(0, where).tolist()
        local = ctx.expanded_local_pos.index_select(0, where).tolist()
        prompt_lens = self.req_states.prompt_len.np
        entries, self._v2_last = [], {}
        for b, (r, pos, token, draft) in enumerate(zip(picked, positions, fed, local)):
            slot = mapping[r]
            row = self.rows[slot]
            self._v2_last[r] = (slot, int(pos), int(token))
            if row.matcher is not None and not row.failed:
                # The token fed at `pos` is output number pos - prompt_len; the matcher
                # must hold every output before the one this row samples.
                out_index = int(pos) - int(prompt_lens[slot])
                if self._sync_v2(slot, row, out_index, int(token), draft > 0):
                    row.matcher.fill_next_token_bitmask(self.bitmask, b, row.remaining(out_index + 1))
                else:  # a draft the spec refuses: it is rejected, this row's sample unused
                    self._words[b] = 0
                    self._allow(b, row.stops or self.vocab.eos_token_ids)  # never a row of -inf
            if row.constrained:
                self._finish_row(b, row)
            entries.append((r, b, row))
        return self._apply_masks(logits, entries, self._v2_context)

    def _sync_v2(self, slot: int, row: _Row, out_index: int, token: int, draft: bool) -> bool:
        if out_index < 0:  # the last prompt token: the first output comes next
            if row.consumed:
                row.matcher.rollback(row.consumed)
                row.consumed = 0
            return True
        if row.consumed > out_index:  # drafts rejected: back to the last committed token
            row.matcher.rollback(row.consumed - out_index)
            row.consumed = out_index
        if row.consumed < out_index:  # a resumed request: its earlier outputs were prefilled
            start = int(self.req_states.prompt_len.np[slot]) + row.consumed
            missing = self.req_states.all_token_ids.gpu[slot, start:start + out_index - row.consumed].tolist()
            for t in missing:
                if not self._accept(slot, row, int(t)):
                    return False
        if draft:
            if not row.matcher.accept_token(token):
                return False
            row.consumed += 1
            return True
        return self._accept(slot, row, token)

    def _v2_context(self, r: int, row: _Row) -> list[int]:
        slot, pos, token = self._v2_last[r]
        w = self.watermark.context_width
        if w == 1:
            return [token]
        start = max(0, pos + 1 - w)
        return self.req_states.all_token_ids.gpu[slot, start:pos + 1].tolist()

    # -- shared -----------------------------------------------------------------------

    def _new_row(self, index, params, prompt_ids, output_ids) -> _Row | None:
        extra = params.extra_args
        try:
            spec = spec_from_extra_args(extra)
            watermark = watermark_requested(extra) and self.watermark is not None
            aware = budget_aware_requested(extra)
        except ValueError:
            return None  # validate_params refused it already; unreachable through the API
        if spec is None and not watermark:
            return None
        row = _Row(output_ids, prompt_ids, tuple(sorted(params.all_stop_token_ids)), watermark,
                   float(params.temperature), int(getattr(params, "min_tokens", 0) or 0))
        if spec is not None:
            try:
                guide = compile_spec(spec, self.vocab, timeout=self.timeout)
                row.matcher = guide.matcher()
                if aware and guide.supports_budget and params.max_tokens is not None:
                    # Where even the shortest output does not fit (validation could not
                    # tell: no registered vocabulary), masks still steer to the nearest
                    # finish; the output is cut as it would be without them.
                    row.max_tokens = int(params.max_tokens)
            except Exception as e:  # noqa: BLE001 - a tokenizer-specific error validation could not see
                log.error("guided: the spec of the request at batch row %d does not compile for this "
                          "tokenizer (%s); the request ends at once", index, e)
                row.failed = True
        if output_ids and row.matcher is not None:
            self._catch_up(index, row)  # a resumed request
        return row

    def _catch_up(self, index: int, row: _Row) -> None:
        out = row.output
        while row.consumed < len(out):
            token = out[row.consumed]
            if token < 0:  # a placeholder: the sampled id is not on the host yet
                return
            if not self._accept(index, row, token):
                return

    def _accept(self, index: int, row: _Row, token: int) -> bool:
        if row.matcher.accept_token(token):
            row.consumed += 1
            return True
        if token in row.stops and row.matcher.is_accepting():
            row.consumed += 1  # a stop token other than the tokenizer's EOS, where allowed
            return True
        row.failed = True
        if index not in self._warned:
            self._warned.add(index)
            log.warning("guided: token %d at batch row %d is outside its spec (another logits "
                        "processor or a forced token?); the request ends", token, index)
        return False

    def _finish_row(self, b: int, row: _Row) -> None:
        """After the matcher's fill: a failed row allows its stops alone; a complete
        spec allows the request's stop tokens besides the tokenizer's EOS."""
        if row.failed:
            self._words[b] = 0
            self._allow(b, row.stops or self.vocab.eos_token_ids)
        elif row.stops and row.matcher.is_accepting():
            self._allow(b, row.stops)

    def _unblock_stops(self, logits: torch.Tensor, rows) -> None:
        """vLLM's min_tokens processor runs first and sets the stop tokens to -inf; where
        the spec allows nothing but them, the row would have no token left: let them
        through (the output is complete; it cannot grow)."""
        for r, row in rows:
            if row.stops and row.output is not None and len(row.output) < row.min_tokens \
                    and bool(torch.isneginf(logits[r]).all()):
                logits[r, [t for t in row.stops if t < logits.shape[-1]]] = 0.0

    def _allow(self, b: int, ids) -> None:
        for t in ids:
            if 0 <= t < self.width:
                self._words[b, t >> 5] |= np.uint32(1 << (t & 31))

    def _apply_masks(self, logits: torch.Tensor, entries, context) -> torch.Tensor:
        """Apply the filled bitmask rows to their logits rows, then the watermark."""
        masked = [(r, b) for r, b, row in entries if row.constrained]
        if masked:
            logits_rows, bitmask_rows = [r for r, _ in masked], [b for _, b in masked]
            if logits_rows == bitmask_rows:
                apply_token_bitmask_(logits, self.bitmask[: max(bitmask_rows) + 1], indices=logits_rows)
            else:
                where = torch.tensor(logits_rows, device=logits.device)
                part = apply_token_bitmask_(logits.index_select(0, where), self.bitmask[torch.tensor(bitmask_rows)])
                logits.index_copy_(0, where, part)
            self._unblock_stops(logits, [(r, row) for r, _, row in entries if row.constrained and row.min_tokens])
        marked = [(r, context(r, row), row.temperature, b if row.constrained else None)
                  for r, b, row in entries if row.watermark]
        if marked:
            self.watermark.bias(logits, marked, self.bitmask)
        return logits
