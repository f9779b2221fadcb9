"""``guided.compile``: a spec plus a tokenizer (or ``Vocabulary``) gives a ``Guide``, cached."""

from __future__ import annotations

import threading
from collections import OrderedDict

from guided.fsm.gc_pause import gc_paused
from guided.fsm.regex import compile_regex
from guided.fsm.vocabulary import Vocabulary

from .matcher import FSMGuide, Guide
from .specs import Grammar, JsonSchema, Regex, as_spec

_CACHE_SIZE = 64
_cache: "OrderedDict[tuple, Guide]" = OrderedDict()
_lock = threading.Lock()


def as_vocabulary(tokenizer_or_vocab) -> Vocabulary:
    """A ``Vocabulary`` as given, or read from a Hugging Face tokenizer."""
    if isinstance(tokenizer_or_vocab, Vocabulary):
        return tokenizer_or_vocab
    return Vocabulary.from_tokenizer(tokenizer_or_vocab)


def compile(spec, tokenizer_or_vocab, *, eager: bool | None = None) -> Guide:  # noqa: A001
    """Compile ``spec`` for a tokenizer's vocabulary into a ``Guide``.

    Results are cached (the 64 most recent, keyed by the spec, the vocabulary's
    fingerprint and ``eager``), so compiling the same spec again is a lookup. One
    guide serves every sequence under the spec, each with its own matcher. A regex or
    a JSON Schema becomes a byte-level automaton whose states' token masks are
    computed on demand (``FSMGuide``); a lark grammar or a recursive JSON Schema
    becomes an Earley parser over a lexer (``GrammarGuide``); ``uniqueItems`` that
    the automaton leaves open is checked beside it (``UniqueItemsGuide``).

    Args:
        spec: a ``guided.Regex``, ``guided.JsonSchema`` or ``guided.Grammar``, or a
            JSON Schema given directly as a dict, a bool or a pydantic model class.
        tokenizer_or_vocab: a Hugging Face tokenizer, or a ``guided.Vocabulary``.
        eager: automaton guides only: ``True`` computes every state's mask now,
            ``False`` on first visit, ``None`` decides by the automaton's size.

    Returns:
        The ``Guide``; its ``spec`` attribute is the spec it was compiled from.

    Raises:
        SpecError: the spec cannot be compiled (``RegexError``, ``SchemaError``,
            ``GrammarError``, each naming where).
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
    with _lock:
        guide = _cache.get(key)
        if guide is not None:
            _cache.move_to_end(key)
            return guide
    with gc_paused():
        guide = _compile_uncached(spec, vocab, eager)
    guide.spec = spec
    with _lock:
        _cache[key] = guide
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return guide


def _spec_key(spec):
    """The spec's part of the cache key; a TypeError for what is not a spec."""
    if isinstance(spec, Regex):
        return ("regex", spec.pattern, spec.flags)
    if isinstance(spec, (JsonSchema, Grammar)):
        return spec.key()
    raise TypeError(
        f"cannot compile a spec of type {type(spec).__name__}: expected guided.Regex, "
        "guided.JsonSchema, guided.Grammar, a JSON Schema dict or a pydantic model class"
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
    if isinstance(spec, Grammar):
        from guided.grammars.lark_frontend import compile_lark

        from .grammar_matcher import GrammarGuide

        return GrammarGuide(compile_lark(spec.lark_text, spec.start), vocab)
    raise TypeError(f"cannot compile {spec!r}")  # unreachable: _spec_key checked the type
