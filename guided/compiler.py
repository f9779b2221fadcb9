"""``guided.compile``: a spec plus a tokenizer (or Vocabulary) gives a Guide."""

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
    if isinstance(tokenizer_or_vocab, Vocabulary):
        return tokenizer_or_vocab
    return Vocabulary.from_tokenizer(tokenizer_or_vocab)


def compile(spec, tokenizer_or_vocab, *, eager: bool | None = None) -> Guide:  # noqa: A001
    """Compile ``spec`` for a tokenizer's vocabulary; the result is cached.

    ``spec`` is a ``guided.Regex``, a ``guided.JsonSchema``, a ``guided.Grammar``, or a JSON Schema given
    directly as a dict or a pydantic model class. ``eager=True`` computes every
    state's mask now, ``False`` on first visit, ``None`` decides by automaton size.

    Example::

        >>> guide = guided.compile(guided.Regex(r"[0-9]{3}"), tokenizer)
        >>> matcher = guide.matcher()
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
