"""``guided.compile``: a spec plus a tokenizer (or ``Vocabulary``) gives a ``Guide``, cached."""

from __future__ import annotations

import gc
import threading
from collections import OrderedDict

import numpy as np

from guided.errors import CompileTimeoutError, SpecError, UnwritableSpecError
from guided.fsm import kernels, memo
from guided.fsm.deadline import check as check_deadline
from guided.fsm.deadline import time_limit
from guided.fsm.gc_pause import gc_paused
from guided.fsm.regex import compile_regex
from guided.fsm.vocabulary import Vocabulary

from .bitmask import allocate_token_bitmask
from .matcher import FSMGuide, Guide
from .specs import Grammar, JsonSchema, Regex, StructuralTag, as_spec
from .thinking import AfterThinking, ThinkingGuide

#: Defaults: the compile time limit (seconds), the most bytes a guide may hold as it
#: grows, and the compile cache's bounds (bytes, then entries).
DEFAULT_TIMEOUT = 10.0
DEFAULT_MAX_GUIDE_BYTES = 512 << 20
DEFAULT_CACHE_BYTES = 1 << 30
DEFAULT_CACHE_ENTRIES = 256


class _Cache:
    """The compile cache: guides by key, least recently used first, bounded by the
    bytes its guides hold and by entries. Guides grow after they are cached (lazy
    masks): a guide's figure is its last measurement plus its growth since at the
    rate its memory limit assumes (``Guide.size_estimate``, no walk). Only where
    those figures put the byte bound at stake are the guides that grew measured
    again (a walk of each one's objects, milliseconds for a large guide) before any
    is evicted, so a compile pays for measuring other guides only when the cache is
    nearly full."""

    def __init__(self):
        self.lock = threading.Lock()
        self.max_bytes = DEFAULT_CACHE_BYTES
        self.max_entries = DEFAULT_CACHE_ENTRIES
        self.guides: "OrderedDict[tuple, Guide]" = OrderedDict()
        self.building: dict[tuple, _Building] = {}
        self.hits = self.misses = 0
        self.evicted_bytes = 0  # since memory was last handed back (_return_freed_memory)

    def get(self, key):
        with self.lock:
            guide = self.guides.get(key)
            if guide is not None:
                self.guides.move_to_end(key)
                self.hits += 1
            return guide

    def put(self, key, guide: Guide) -> None:
        """Keep ``guide`` (measured: ``Guide.check_memory``) under ``key`` and evict the
        least recently used guides past the bounds."""
        with self.lock:
            self.misses += 1
            if guide.size_estimate() <= self.max_bytes:  # (one larger than the whole bound is never kept)
                self.guides[key] = guide
            held = list(self.guides.items())
        sizes = {k: g.size_estimate() for k, g in held}
        if sum(sizes.values()) > self.max_bytes:
            for k, g in held:
                if g.grew_since_measured():
                    sizes[k] = g.measure()
        with self.lock:
            sizes = {k: sizes[k] if k in sizes else g.size_estimate() for k, g in self.guides.items()}
            total = sum(sizes.values())
            while total > self.max_bytes or len(self.guides) > self.max_entries:
                old, _ = self.guides.popitem(last=False)
                total -= sizes[old]
                self.evicted_bytes += sizes[old]
            release = self.evicted_bytes >= _RELEASE_BYTES
            if release:
                self.evicted_bytes = 0
        if release:
            _return_freed_memory()

    def clear(self) -> None:
        with self.lock:
            self.guides.clear()
            self.hits = self.misses = 0


def _malloc_trim():
    try:
        import ctypes

        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


_trim = _malloc_trim()


#: Evicted guide bytes after which their memory is collected and handed back.
_RELEASE_BYTES = 256 << 20


def _return_freed_memory() -> None:
    """Collect evicted guides and hand the heap memory back to the system. Guides
    hold reference cycles, which wait for a full collection (rare: compiles move
    what they build to the oldest generation), and glibc keeps freed heap memory
    for reuse, so a server compiling many large specs would otherwise look as if it
    held every guide it ever evicted. A full collection costs tens to hundreds of
    ms, so it runs once per ``_RELEASE_BYTES`` evicted."""
    gc.collect()
    if _trim is not None:
        _trim(0)


class _Building:
    """A compile under way: callers asking for the same key wait for its outcome."""

    def __init__(self):
        self.done = threading.Event()
        self.guide: Guide | None = None
        self.error: BaseException | None = None


_cache = _Cache()


def configure_cache(max_bytes: int | None = None, max_entries: int | None = None,
                    max_memo_bytes: int | None = None) -> dict:
    """Set the compile cache's bounds (None leaves one as it is); evicts at the next
    compile.

    Args:
        max_bytes: the most bytes the cached guides may hold together (default 1 GiB).
        max_entries: the most guides kept (default 256).
        max_memo_bytes: the most bytes the automata memoised between compiles may hold
            (``guided.fsm.memo``; default 256 MiB).

    Returns:
        ``cache_info()``.

    Example::

        >>> guided.configure_cache(max_bytes=256 << 20)["max_bytes"]
        268435456
    """
    for name, value in (("max_bytes", max_bytes), ("max_entries", max_entries), ("max_memo_bytes", max_memo_bytes)):
        if value is not None and (not isinstance(value, int) or value < 0):
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    with _cache.lock:
        if max_bytes is not None:
            _cache.max_bytes = max_bytes
        if max_entries is not None:
            _cache.max_entries = max_entries
    if max_memo_bytes is not None:
        memo.set_max_bytes(max_memo_bytes)
    return cache_info()


def load_kernels(wait: bool = True) -> None:
    """Load numba and the compiled kernels now (~0.25 s), rather than behind the
    first compile. A fresh process's first small compile otherwise runs on the
    Python twins and loads numba in a background thread after it; an automaton
    guide made then keeps its Python construction of lazy rows. A server calls this
    at start-up (the vLLM plug-in does), so that no request meets either.

    Args:
        wait: return once loaded; False starts the load in a background thread.

    Raises:
        ImportError: numba is installed but cannot be loaded (with ``wait``).

    Example::

        >>> guided.load_kernels()        # at start-up, before the first request
    """
    if not kernels.AVAILABLE:
        return
    if wait:
        kernels.load()
    else:
        kernels.warm_up()


def cache_info() -> dict:
    """The compile cache's state: ``entries``, ``bytes`` (as last measured, plus
    the growth since at an assumed rate: ``Guide.size_estimate``),
    ``max_bytes``, ``max_entries``, ``hits``, ``misses``, and ``memo`` (the memoised
    automata: ``entries``, ``bytes``, ``max_bytes``).

    Example::

        >>> guided.cache_info()["entries"]
        3
    """
    with _cache.lock:
        info = {"entries": len(_cache.guides), "bytes": sum(g.size_estimate() for g in _cache.guides.values()),
                "max_bytes": _cache.max_bytes, "max_entries": _cache.max_entries,
                "hits": _cache.hits, "misses": _cache.misses}
    info["memo"] = memo.info()
    return info


def clear_cache() -> None:
    """Drop every cached guide and memoised automaton (guides in use stay valid)."""
    _cache.clear()
    memo.clear()


def as_vocabulary(tokenizer_or_vocab) -> Vocabulary:
    """A ``Vocabulary`` as given, or read from a Hugging Face tokenizer."""
    if isinstance(tokenizer_or_vocab, Vocabulary):
        return tokenizer_or_vocab
    return Vocabulary.from_tokenizer(tokenizer_or_vocab)


def compile(spec, tokenizer_or_vocab, *, eager: bool | None = None,  # noqa: A001
            timeout: float | None = DEFAULT_TIMEOUT,
            max_guide_bytes: int | None = DEFAULT_MAX_GUIDE_BYTES) -> Guide:
    """Compile ``spec`` for a tokenizer's vocabulary into a ``Guide``.

    Results are cached (keyed by the spec, the vocabulary's fingerprint and
    ``eager``; bounded by the bytes the guides hold, see ``configure_cache``), so
    compiling the same spec again is a lookup, and callers asking for a spec being
    compiled wait for that compile. One guide serves every sequence under the spec,
    in any number of threads, each sequence with its own matcher. A regex or a JSON
    Schema becomes a byte-level automaton whose states' token masks are computed on
    demand (``FSMGuide``); a lark grammar or a recursive JSON Schema becomes an
    Earley parser over a lexer (``GrammarGuide``); ``uniqueItems`` that the
    automaton leaves open is checked beside it (``UniqueItemsGuide``).

    Args:
        spec: a ``guided.Regex``, ``guided.JsonSchema`` or ``guided.Grammar``, or a
            JSON Schema given directly as a dict, a bool or a pydantic model class.
        tokenizer_or_vocab: a Hugging Face tokenizer, or a ``guided.Vocabulary``.
        eager: automaton guides only: ``True`` computes every state's mask now,
            ``False`` on first visit, ``None`` decides by the automaton's size.
        timeout: seconds the compile may take (None: no limit); past it,
            ``CompileTimeoutError`` and nothing is kept.
        max_guide_bytes: the most bytes the guide may hold, when compiled and as it
            grows while decoding (None: no limit); past it, ``GuideMemoryError``.

    Returns:
        The ``Guide``; its ``spec`` attribute is the spec it was compiled from.

    Raises:
        SpecError: the spec cannot be compiled (``RegexError``, ``SchemaError``,
            ``GrammarError``, each naming where), or passes a budget
            (``CompileTimeoutError``, ``GuideMemoryError``).
        TypeError: ``spec`` is not a spec (a bare pattern string, say: wrap it as
            ``guided.Regex(pattern)``).

    Example::

        >>> guide = guided.compile(guided.Regex(r"[0-9]{3}"), tokenizer)
        >>> matcher = guide.matcher()
        >>> guided.compile({"type": "integer"}, tokenizer).spec
        JsonSchema({'type': 'integer'}, whitespace='flexible', strict=True, key_order='schema')
    """
    vocab = as_vocabulary(tokenizer_or_vocab)
    spec = as_spec(spec)
    key = (_spec_key(spec), vocab.fingerprint, eager)
    while True:
        guide = _cache.get(key)
        if guide is not None:
            return guide
        with _cache.lock:
            building = _cache.building.get(key)
            owner = building is None
            if owner:
                building = _cache.building[key] = _Building()
        if owner:
            break
        building.done.wait()
        if building.guide is not None:
            return building.guide
        if _shared_error(building.error, timeout):
            raise building.error
        # Otherwise this caller compiles itself: the other was interrupted, or ran
        # out of a shorter time limit.
    try:
        with gc_paused(), time_limit(timeout):
            guide = _compile_uncached(spec, vocab, eager)
            _check_writable(guide)  # the first mask: its row is built here
            check_deadline()  # a compile whose last steps ran past the limit fails too
        guide.spec = spec
        guide.max_bytes = max_guide_bytes
        guide.check_memory()
        _cache.put(key, guide)
        building.guide = guide
        if kernels.AVAILABLE and not kernels.ready():  # the compile ran without numba: load it behind
            kernels.warm_up()
        return guide
    except BaseException as e:
        building.error = e
        raise
    finally:
        with _cache.lock:
            _cache.building.pop(key, None)
        building.done.set()


def _check_writable(guide: Guide) -> None:
    """``UnwritableSpecError`` where the first mask allows no token but EOS and EOS
    cannot end the text (the mask forces EOS at such a dead end)."""
    matcher = guide.matcher()
    if matcher.is_accepting():
        return
    bitmask = allocate_token_bitmask(1, guide.vocab_size)
    matcher.fill_next_token_bitmask(bitmask, 0)
    row = bitmask[0].numpy().copy()
    for e in guide.eos_token_ids:
        row[e >> 5] &= ~np.int32(np.uint32(1 << (e & 31)).view(np.int32))
    if not row.any():
        raise UnwritableSpecError(
            "no token of the vocabulary can begin a text that matches the spec (it needs bytes the "
            "tokenizer has no token for)")


def _shared_error(error: BaseException | None, timeout: float | None) -> bool:
    """Whether a caller that waited for another's compile fails as it did: for the
    spec's own errors, not for an interruption or a tighter time limit than its own."""
    if isinstance(error, CompileTimeoutError):
        return timeout is not None and timeout <= error.seconds
    return isinstance(error, SpecError)


def _spec_key(spec):
    """The spec's part of the cache key; a TypeError for what is not a spec."""
    if isinstance(spec, Regex):
        return ("regex", spec.pattern, spec.flags)
    if isinstance(spec, (JsonSchema, Grammar, StructuralTag)):
        return spec.key()
    if isinstance(spec, AfterThinking):
        return spec.key(_spec_key(spec.spec))
    raise TypeError(
        f"cannot compile a spec of type {type(spec).__name__}: expected guided.Regex, "
        "guided.JsonSchema, guided.Grammar, guided.StructuralTag, guided.AfterThinking, a JSON Schema dict or "
        "a pydantic model class"
        + (" (wrap a pattern string as guided.Regex(pattern))" if isinstance(spec, str) else "")
    )


def _compile_uncached(spec, vocab: Vocabulary, eager) -> Guide:
    """The guide for one spec: an automaton, or the grammar engine where the spec needs it."""
    if isinstance(spec, Regex):
        return FSMGuide(compile_regex(spec.pattern, spec.flags), vocab, eager=eager)
    if isinstance(spec, JsonSchema):
        from guided.grammars.json_schema.compiler import RecursiveSchemaError, compile_json_schema

        try:
            dfa, sites = compile_json_schema(spec.schema, spec.whitespace, spec.strict, spec.key_order,
                                             with_unique_sites=True)
            guide = FSMGuide(dfa, vocab, eager=eager)
        except RecursiveSchemaError:
            # Recursion is not regular: the grammar engine takes the schema.
            from guided.grammars.json_schema.recursive import compile_recursive_schema

            from .grammar_matcher import GrammarGuide

            grammar, sites = compile_recursive_schema(spec.schema, spec.whitespace, spec.strict, spec.key_order,
                                                      with_unique_sites=True)
            guide = GrammarGuide(grammar, vocab)
        if sites is not None:  # uniqueItems the automaton leaves to a check beside it
            from .unique_items import UniqueItemsGuide

            guide = UniqueItemsGuide(guide, sites)
        return guide
    if isinstance(spec, AfterThinking):
        from guided.grammars.structural_tag import compile_structural_tag, parse_structural_tag

        think = FSMGuide(compile_structural_tag(parse_structural_tag(spec.think_tag())), vocab, eager=eager)
        answer = _compile_uncached(spec.spec, vocab, eager)
        answer.spec = spec.spec
        return ThinkingGuide(think, answer, spec)
    if isinstance(spec, StructuralTag):
        from guided.grammars.structural_tag import compile_structural_tag

        return FSMGuide(compile_structural_tag(spec.format, spec.whitespace), vocab, eager=eager)
    if isinstance(spec, Grammar):
        from guided.grammars.lark_frontend import compile_lark

        from .grammar_matcher import GrammarGuide

        return GrammarGuide(compile_lark(spec.lark_text, spec.start), vocab)
    raise TypeError(f"cannot compile {spec!r}")  # unreachable: _spec_key checked the type
