"""Budgets: the compile time limit, a guide's memory limit, the compile cache's
bound in bytes, and specs the vocabulary cannot write."""

from __future__ import annotations

import time

import pytest

import guided
from guided.bitmask import allocate_token_bitmask
from guided.fsm.deadline import check, time_limit

#: Compiles in a few seconds on this machine: long enough to pass a short limit.
SLOW_REGEX = r"\w{300}x|\w{200}(ab|c)+"


@pytest.fixture
def cache_bounds():
    """Restore the cache's default bounds after a test changes them."""
    before = guided.cache_info()
    guided.clear_cache()
    yield
    guided.configure_cache(max_bytes=before["max_bytes"], max_entries=before["max_entries"])
    guided.clear_cache()


def test_a_compile_past_its_time_limit_stops_with_a_clear_error(smollm2_vocab, cache_bounds):
    guided.compile(guided.Regex(SLOW_REGEX), smollm2_vocab, timeout=None)  # numba's kernels compiled now
    guided.clear_cache()
    t = time.monotonic()
    with pytest.raises(guided.CompileTimeoutError, match=r"time limit of 0.2 s") as info:
        guided.compile(guided.Regex(SLOW_REGEX), smollm2_vocab, timeout=0.2)
    # Checks stand between steps of the compile; one step may run on (~1 s here).
    assert time.monotonic() - t < 0.2 + 3.0
    assert isinstance(info.value, guided.SpecError) and info.value.seconds == 0.2
    assert guided.cache_info()["entries"] == 0


def test_a_compile_that_finishes_past_its_limit_fails_too(monkeypatch, cache_bounds):
    """Its last steps ran with no check after them: it is refused, not returned."""
    import guided.compiler as compiler

    real = compiler._compile_uncached

    def slow_last_step(spec, vocab, eager):
        guide = real(spec, vocab, eager)
        time.sleep(0.3)
        return guide

    monkeypatch.setattr(compiler, "_compile_uncached", slow_last_step)
    vocab = guided.Vocabulary([bytes([b]) for b in range(256)] + [None], [256])
    with pytest.raises(guided.CompileTimeoutError):
        guided.compile(guided.Regex("[a-z]+"), vocab, timeout=0.1)
    assert guided.cache_info()["entries"] == 0
    assert guided.compile(guided.Regex("[a-z]+"), vocab, timeout=5).matcher()


def test_time_limits_nest_and_refuse_nonsense():
    with time_limit(60):
        with time_limit(0.01):
            time.sleep(0.02)
            with pytest.raises(guided.CompileTimeoutError):
                check()
        check()  # the outer limit is back
    check()  # and none outside
    with pytest.raises(ValueError, match="positive"):
        with time_limit(0):
            pass


def test_a_guide_over_its_memory_limit_is_refused_at_compile(smollm2_vocab, cache_bounds):
    with pytest.raises(guided.GuideMemoryError, match=r"over its limit of 1.0 MiB") as info:
        guided.compile(guided.Regex(r"[a-z]{1,200}[0-9]{1,200}"), smollm2_vocab, max_guide_bytes=1 << 20, eager=True)
    assert info.value.used > info.value.limit == 1 << 20
    assert guided.cache_info()["entries"] == 0


@pytest.mark.parametrize("thinking", [False, True], ids=["schema", "after_thinking"])
def test_a_lazy_guide_that_outgrows_its_limit_while_decoding_raises(thinking, smollm2_vocab, smollm2_tokenizer):
    """A long string's automaton is built as the text reaches it; past the limit,
    the next mask raises ``GuideMemoryError`` (never a looser mask). Behind a
    thinking block the limit reaches the answer's guide: it is what grows there."""
    spec = guided.JsonSchema({"type": "string", "maxLength": 20000})
    texts = ['"' + "hello world, " * 800]
    if thinking:  # (the tag encoded apart: the mask has no token spanning it and the answer)
        spec, texts = guided.AfterThinking(spec, start=""), ["</think>", *texts]
    guide = guided.compile(spec, smollm2_vocab, eager=False, max_guide_bytes=None)
    guide.max_bytes = guide.nbytes() + (4 << 20)
    ids = [t for text in texts for t in smollm2_tokenizer.encode(text, add_special_tokens=False)]
    bitmask = allocate_token_bitmask(1, guide.vocab_size)
    m = guide.matcher()
    with pytest.raises(guided.GuideMemoryError, match="over its limit"):
        for token in ids:
            m.fill_next_token_bitmask(bitmask, 0)
            assert m.accept_token(token)
    assert m.num_tokens < len(ids)
    if thinking:
        assert m.answering and guide.answer.max_bytes == guide.think.max_bytes == guide.max_bytes


@pytest.mark.parametrize("schema", [
    # lazy: open values and long strings are built (pasted into arrays) as decoding reaches them
    {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "object"}},
                                      "b": {"type": "string", "maxLength": 300}}},
    # recursive: a call NFA per rule
    {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                                         "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
     "$ref": "#/$defs/node"},
], ids=["lazy", "recursive"])
def test_a_guides_measured_size_agrees_with_a_walk_of_every_object(schema, smollm2_vocab, smollm2_tokenizer,
                                                                   monkeypatch):
    """NFAs size their per-state lists in bulk (``footprint.self_measured``); the
    figure the memory limit and the cache read must stay that of visiting each."""
    from guided.fsm import footprint

    guide = guided.compile(schema, smollm2_vocab, timeout=None, max_guide_bytes=None)
    m = guide.matcher()
    for token in smollm2_tokenizer.encode('{"a":[{"x":[1,{"y":"z"}]}],"b":"' + "word " * 20
                                          if "properties" in schema else '{"v":1,"kids":[{"v":2,"kids":[]}]}',
                                          add_special_tokens=False):
        m.fill_next_token_bitmask(allocate_token_bitmask(1, guide.vocab_size), 0)
        assert m.accept_token(token)
    bulk = guide.nbytes()
    monkeypatch.setattr(footprint, "_SELF_MEASURED", {})
    monkeypatch.setattr(footprint, "_kinds", {})
    every_object = guide.nbytes()
    assert bulk == pytest.approx(every_object, rel=0.03)


def test_vocabulary_tables_made_after_the_first_measurement_are_not_counted(smollm2_vocab, cache_bounds,
                                                                            monkeypatch):
    """The vocabulary's trie table, made on the first compiled walk after the shared
    objects were listed, is shared by every guide: no guide's size counts it."""
    from guided.fsm import footprint, kernels
    from guided.fsm.trie import split_vocabulary

    if not kernels.AVAILABLE:
        pytest.skip("numba is not installed (the table is the compiled walk's)")
    split = split_vocabulary(smollm2_vocab).byte_level
    monkeypatch.setattr(footprint, "_shared_ids", {})
    monkeypatch.setattr(split, "table", None)
    footprint.shared_ids((smollm2_vocab, split_vocabulary(smollm2_vocab)))  # listed before the table is made
    late = guided.compile(guided.Regex("[0-9]{2,9}x"), smollm2_vocab, eager=False)  # its first walk makes it
    assert split.table is not None and late.index._walker.table is split.table
    measured = late.nbytes()
    footprint._shared_ids.clear()
    assert measured == late.nbytes() < 2 << 20


def test_a_grammar_guide_does_not_count_the_tries_walk_tables(smollm2_vocab, cache_bounds, monkeypatch):
    """The byte sets below each node of the vocabulary's trie (4 MB for SmolLM2) and
    its heights are made by a grammar's first compiled walk and shared by every
    grammar guide over the vocabulary, whether the shared objects were listed
    before they were made or after: no guide's size counts them."""
    from guided.fsm import footprint, kernels
    from guided.fsm.trie import vocabulary_bytes
    from guided.grammars.grammar_index import vocabulary_pieces

    if not kernels.AVAILABLE:
        pytest.skip("numba is not installed (the tables are the compiled walk's)")
    trie = vocabulary_bytes(smollm2_vocab).trie
    for listed_first in (True, False):
        monkeypatch.setattr(footprint, "_shared_ids", {})
        monkeypatch.setattr(trie, "derived", {})
        guided.clear_cache()
        if listed_first:  # (a grammar guide's shared roots)
            footprint.shared_ids((smollm2_vocab, vocabulary_pieces(smollm2_vocab), vocabulary_bytes(smollm2_vocab)))
        guide = guided.compile(guided.Grammar.from_name("arithmetic"), smollm2_vocab)
        below = trie.derived["below"]
        assert below.nbytes > 1 << 20
        assert guide.nbytes() < below.nbytes


def test_the_cache_is_bounded_by_bytes_least_recently_used_first(smollm2_vocab, cache_bounds):
    specs = [guided.Regex(f"[a-z]{{1,{n}}}[0-9]{{1,{n}}}") for n in (60, 61, 62, 63)]
    sizes = [guided.compile(s, smollm2_vocab, eager=True).nbytes() for s in specs]
    assert guided.cache_info()["entries"] == 4
    guided.clear_cache()
    guided.configure_cache(max_bytes=sizes[0] + sizes[1] + sizes[2] // 2)
    first = guided.compile(specs[0], smollm2_vocab, eager=True)
    guided.compile(specs[1], smollm2_vocab, eager=True)
    assert guided.compile(specs[0], smollm2_vocab, eager=True) is first  # now the most recent
    guided.compile(specs[2], smollm2_vocab, eager=True)  # evicts specs[1], the least recent
    info = guided.cache_info()
    assert info["entries"] == 2 and info["bytes"] <= info["max_bytes"]
    assert guided.compile(specs[0], smollm2_vocab, eager=True) is first
    guided.configure_cache(max_bytes=sizes[3] // 2)
    guided.compile(specs[3], smollm2_vocab, eager=True)  # larger than the whole bound: not kept
    assert guided.cache_info()["bytes"] <= sizes[3] // 2


def test_a_compile_measures_other_cached_guides_only_when_the_bound_is_at_stake(smollm2_vocab, smollm2_tokenizer,
                                                                               cache_bounds, monkeypatch):
    """A cached guide that grew since it was measured counts at its estimate (no
    walk of its objects, which would add milliseconds to every compile); once the
    estimates put the byte bound at stake, it is measured before anything goes."""
    from guided.matcher import Guide

    schema = {"type": "string", "maxLength": 3000}
    lazy = guided.compile(schema, smollm2_vocab, eager=False)
    m = guided.compile(schema, smollm2_vocab, eager=False).matcher()  # a request served from the cache
    for token in smollm2_tokenizer.encode('"' + "hello world, " * 40, add_special_tokens=False):
        m.fill_next_token_bitmask(allocate_token_bitmask(1, lazy.vocab_size), 0)
        assert m.accept_token(token)
    assert lazy.grew_since_measured()
    time.sleep(1.0)  # a while after its measurement, as between a server's requests
    walked = []
    walk = Guide.nbytes
    monkeypatch.setattr(Guide, "nbytes", lambda self: walked.append(self) or walk(self))
    guided.compile(guided.Regex("[0-9]+x"), smollm2_vocab)
    assert not any(g is lazy for g in walked)
    estimate = lazy.size_estimate()
    guided.configure_cache(max_bytes=guided.cache_info()["bytes"])  # the next guide does not fit
    guided.compile(guided.Regex("[a-z]+y"), smollm2_vocab)
    assert any(g is lazy for g in walked)
    assert lazy.size_estimate() == lazy._last_measured[0] < estimate
    assert walk(lazy) == pytest.approx(lazy._last_measured[0], abs=256)  # (the figure kept is in the guide)
    assert guided.cache_info()["bytes"] <= guided.cache_info()["max_bytes"]


def test_a_grammar_guide_measures_its_growth_a_slice_per_mask(smollm2_vocab, smollm2_tokenizer, monkeypatch):
    """A growth measurement of a grammar guide (tens of ms for one of thousands of
    parse states) is spread over the masks built after it starts, a bounded slice
    each, and its figure is the guide's size."""
    from guided import grammar_matcher
    from guided.fsm import footprint

    guide = guided.compile(guided.Grammar.from_name("arithmetic"), smollm2_vocab, max_guide_bytes=None)
    guide.max_bytes = 4 * guide.nbytes()  # measured at every check, never over
    guide._next_check = 1  # checked from the first parse state built on
    monkeypatch.setattr(grammar_matcher, "MEASURE_SLICE", 500)
    budgets, figures = [], []
    run = footprint.Walk.run
    monkeypatch.setattr(footprint.Walk, "run", lambda self, budget=None: budgets.append(budget) or run(self, budget))
    measured = guide._measured
    monkeypatch.setattr(guide, "_measured", lambda used: figures.append((used, guide.nbytes())) or measured(used))
    m = guide.matcher()
    bitmask = allocate_token_bitmask(1, guide.vocab_size)
    text = "(1+2)*3-4/(5+6*(7-8))+9*10-(11/12)*((13-14)/(15+16))-17*(18+(19-(20*21)))"
    for token in smollm2_tokenizer.encode(text, add_special_tokens=False):
        before = len(budgets)
        m.fill_next_token_bitmask(bitmask, 0)
        assert sum(b is not None for b in budgets[before:]) <= 1  # one slice at most per mask
        assert m.accept_token(token)
    assert figures and set(budgets) == {500, None}  # (None: the walks in the figures' check)
    assert budgets.count(500) > 2 * len(figures)  # each measurement took several masks
    for used, size in figures:
        assert used == pytest.approx(size, rel=0.25)


def test_cache_bounds_are_checked():
    with pytest.raises(ValueError, match="max_bytes"):
        guided.configure_cache(max_bytes=-1)
    with pytest.raises(ValueError, match="max_entries"):
        guided.configure_cache(max_entries=1.5)


def test_a_spec_no_token_can_begin_is_a_compile_error(smollm2_vocab):
    """SmolLM2 has no token for the byte 0x14: the regex matches text, but none the
    model could write."""
    with pytest.raises(guided.UnwritableSpecError, match="no token of the vocabulary"):
        guided.compile(guided.Regex("\x14"), smollm2_vocab)
    guided.compile(guided.Regex("\x14?b"), smollm2_vocab)  # "b" can be written


def test_a_dead_end_while_decoding_is_reported_as_no_match(tiny_model, smollm2_tokenizer):
    """After "a" no token can write 0x14: EOS is forced, and the result says the text
    does not match rather than "eos"."""
    r = guided.generate(tiny_model, smollm2_tokenizer, "x", guided.Regex("a\x14"), max_new_tokens=5, temperature=0)
    assert r.text == "a" and r.finish_reason == "no_match"


def test_a_dfas_bulk_size_agrees_with_a_walk_of_every_object(monkeypatch):
    """DFAs (memoised by the hundred in a compile) size their row and class lists in
    bulk; the figure stays that of visiting each object."""
    from guided.fsm import footprint
    from guided.fsm.ops import free_states
    from guided.fsm.regex import compile_regex

    dfa = compile_regex(r"[a-z]{1,40}@[a-z]{2,12}\.(com|org|net)")
    dfa.step(dfa.start, b"someone@example.org")  # builds the Python rows
    free_states(dfa)
    bulk = footprint.nbytes(dfa)
    monkeypatch.setattr(footprint, "_SELF_MEASURED", {})
    monkeypatch.setattr(footprint, "_kinds", {})
    assert bulk == pytest.approx(footprint.nbytes(dfa), rel=0.05)


def test_a_guide_does_not_count_its_spec(smollm2_vocab):
    """A guide's size is what compiling made, not the caller's schema it keeps a
    reference to: a megabyte of ``description`` adds nothing."""
    base = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    plain = guided.compile(guided.JsonSchema(base), smollm2_vocab).nbytes()
    documented = guided.compile(guided.JsonSchema({**base, "description": "x" * (1 << 20)}), smollm2_vocab).nbytes()
    assert abs(documented - plain) < 64 << 10, (plain, documented)
