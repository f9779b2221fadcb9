"""Deferred NFA fragments: built only when the lazy subset construction reaches them."""

import gc
import itertools
import json
import re

import jsonschema
import pytest

from guided.errors import RegexTooLargeError
from guided.fsm.gc_pause import gc_paused
from guided.fsm.kernels import AVAILABLE as COMPILED_AVAILABLE
from guided.fsm.lazy import LazyDFA
from guided.fsm.nfa import NFA, UNBOUNDED_ROOM
from guided.fsm.regex import regex_to_nfa
from guided.grammars.json_schema.compiler import OPEN_DEPTH, compile_json_schema
from guided.grammars.json_schema.text import string_body


def lazy_dfa(pattern: str) -> LazyDFA:
    nfa = NFA(lazy=True)
    s, e = regex_to_nfa(pattern, nfa)
    return LazyDFA(nfa, s, e)


@pytest.mark.parametrize("pattern", ["a{0,1000}", "(ab|c){70,90}", "x[0-9]{100,}y", "[a-c]{65}"])
def test_large_counted_repetition_agrees_with_re(pattern):
    dfa = lazy_dfa(pattern)
    built_before = len(dfa._nfa)
    for text in ["", "a" * 1000, "a" * 1001, "ab" * 70, "ab" * 69 + "c" * 21, "c" * 91,
                 "x" + "5" * 99 + "y", "x" + "5" * 100 + "y", "x" + "7" * 400 + "y", "abc" * 21 + "ab", "abc" * 22]:
        assert dfa.matches(text.encode()) == bool(re.fullmatch(pattern, text)), (pattern, text)
    assert len(dfa._nfa) > built_before  # the copies were built as the texts reached them


def test_lazy_repetition_builds_only_what_is_visited():
    nfa = NFA(lazy=True)
    s, e = regex_to_nfa("[a-z]{0,65535}", nfa)
    assert len(nfa) < 200  # one copy and a deferred rest, not 65,535 copies
    dfa = LazyDFA(nfa, s, e)
    assert dfa.matches(b"hello")
    assert len(nfa) < 2000


def test_few_copies_of_a_large_item_are_built_as_reached():
    """``maxItems: 6`` of a 30-property object: copies past the first are deferred
    (they would add more than ``LAZY_REPEAT_STATES``), and the counts stay exact."""
    obj = {"type": "object", "properties": {f"p{i}": {"type": "string", "maxLength": 40} for i in range(30)},
           "additionalProperties": False}
    schema = {"type": "array", "items": obj, "maxItems": 6, "minItems": 2}
    dfa = compile_json_schema(schema, "compact")
    compiled = dfa.nfa_size
    full = {f"p{i}": "x" for i in range(30)}
    for n in range(0, 9):
        for item in ({}, {"p3": "y"}, full):
            value = [item] * n
            text = json.dumps(value, separators=(",", ":")).encode()
            assert dfa.matches(text) == (2 <= n <= 6), n
    assert dfa.nfa_size > 2 * compiled  # the later copies were built while matching


def test_growth_past_the_limit_while_decoding_says_so(monkeypatch):
    """Deferred parts built as decoding reaches them may outgrow the automaton's
    limit; the error says that it happened while decoding, not that the pattern is
    too large (it compiled)."""
    import guided.fsm.nfa

    dfa = lazy_dfa("[a-z]{0,65535}")
    monkeypatch.setattr(guided.fsm.nfa, "MAX_NFA_STATES", len(dfa._nfa) + 100)  # checked past this
    monkeypatch.setattr(guided.fsm.nfa, "MAX_GROWN_NFA_STATES", len(dfa._nfa) + 500)
    with pytest.raises(RegexTooLargeError, match="while decoding"):
        dfa.matches(b"a" * 5000)


def test_deferred_needs_a_lazy_nfa():
    with pytest.raises(ValueError, match="lazy"):
        NFA().deferred(lambda: None, ())


def _with_deferred_tail(build, cuts):
    """``x`` then a deferred fragment made by ``build(nfa)``, as a lazy DFA."""
    nfa = NFA(lazy=True)
    head = nfa.byte_string(b"x")
    tail = nfa.deferred(lambda: build(nfa), cuts)
    s, e = nfa.concat([head, tail])
    return LazyDFA(nfa, s, e)


def test_a_deferred_fragment_using_a_byte_range_it_did_not_announce_is_refused():
    """Byte classes are fixed from the announced cuts; a fragment that cuts through a
    class would make every row wrong, so building it fails loudly instead."""
    dfa = _with_deferred_tail(lambda nfa: nfa.byte_string(b"b"), cuts={ord("a"), ord("c")})  # b-b: not a class
    with pytest.raises(AssertionError, match="byte range 98-98"):
        dfa.step(0, b"xb")
    fine = _with_deferred_tail(lambda nfa: nfa.byte_string(b"b"), cuts={ord("b"), ord("c")})
    assert fine.matches(b"xb") and not fine.matches(b"xc")


def test_dead_branches_of_a_deferred_fragment_are_not_followed():
    """A fragment may hold states that cannot reach its end (a branch into nothing);
    once it is built, the DFA must not step into them, or a mask would allow a token
    after which no document can be finished."""
    def build(nfa):
        s, e = nfa.state(), nfa.state()
        nfa.edge(s, ord("a"), ord("a"), e)
        dead = nfa.byte_string(b"bb")  # its end leads nowhere
        nfa.epsilon(s, dead[0])
        return s, e

    dfa = _with_deferred_tail(build, cuts={ord("a"), ord("b"), ord("c")})
    assert dfa.matches(b"xa")
    assert dfa.step(0, b"xb") == -1  # not a prefix of any match
    assert dfa.step(0, b"x") >= 0 and dfa.step(dfa.step(0, b"x"), b"a") >= 0


def test_truncate_drops_an_abandoned_fragment():
    """A fragment given up half-built (conditionals by value, too many copies) leaves
    no states and no deferred builders behind; what was built before still works."""
    nfa = NFA(lazy=True)
    s, e = regex_to_nfa("ab|cd", nfa)
    mark = len(nfa)
    regex_to_nfa("[a-z]{0,65535}", nfa)  # holds a deferred rest
    assert nfa.pending
    nfa.truncate(mark)
    assert len(nfa) == mark and not nfa.pending
    dfa = LazyDFA(nfa, s, e)
    assert dfa.matches(b"cd") and not dfa.matches(b"abc")


def _rooms_by_state(nfa: NFA) -> list[int]:
    return [room for _, room in sorted(nfa.rooms.items())]


@pytest.mark.parametrize("lo, hi, lazy", [(0, 5, False), (2, 5, True), (0, 40, True), (3, 300, True)])
def test_each_copy_of_a_counted_string_knows_the_characters_left(lo, hi, lazy):
    """``NFA.rooms``: the i-th copy of ``repeat(..., any_char=True)`` starts with
    room for ``hi - i`` more characters, whether the copy was made, pasted from a
    template or built by a deferred chunk. A pasted copy carrying its template's
    room would claim room that is not there."""
    nfa = NFA(lazy=lazy)
    s, e = nfa.concat([nfa.byte_string(b'"'), string_body(nfa, lo, hi), nfa.byte_string(b'"')])
    dfa = LazyDFA(nfa, s, e, compiled=False)
    assert dfa.matches(b'"' + b"x" * hi + b'"') and not dfa.matches(b'"' + b"x" * (hi + 1) + b'"')
    assert _rooms_by_state(nfa) == list(range(hi, 0, -1))  # every copy was built by now
    state = dfa.step(0, b'"abc')
    assert dfa.member_room(state) == hi - 3
    assert dfa.member_room(dfa.step(state, "é".encode())) == hi - 4  # a character, not a byte


def test_unbounded_strings_and_pasted_fragments_keep_their_rooms():
    nfa = NFA(lazy=True)
    s, e = string_body(nfa, 2, None)
    assert set(nfa.rooms.values()) == {UNBOUNDED_ROOM}
    key = object()
    nfa.built_once(nfa.templates, key, lambda: string_body(nfa, 0, 3))
    pasted_from = len(nfa)
    nfa.built_once(nfa.templates, key, lambda: pytest.fail("built again, not pasted"))
    assert [nfa.rooms[x] for x in sorted(nfa.rooms) if x >= pasted_from] == [3, 2, 1]
    mark = len(nfa)
    string_body(nfa, 0, 8)
    nfa.truncate(mark)
    assert max(nfa.rooms) < mark  # a room left on a dropped state would be wrong for the next one there


def test_the_token_index_reads_a_long_strings_room_without_building_ahead(smollm2_vocab):
    """At the start of a ``maxLength`` 255 string every plain and text token fits;
    the index learns that from the copies' rooms, not by building the ~160 states
    of the string ahead of the text (1,463 DFA states before)."""
    from guided.fsm.index import TokenIndex

    for compiled in (False, True) if COMPILED_AVAILABLE else (False,):
        nfa = NFA(lazy=True)
        s, e = nfa.concat([nfa.byte_string(b'"'), string_body(nfa, 0, 255), nfa.byte_string(b'"')])
        dfa = LazyDFA(nfa, s, e, compiled=compiled)
        index = TokenIndex(dfa, smollm2_vocab, eager=False, compiled=compiled)
        inside = dfa.step(0, b'"')
        row = index.mask(inside)
        assert dfa.num_states < 100
        assert index._plain_run(inside) == index._plain_cap and index._text_run(inside) == index._text_cap
        for t, b in enumerate(smollm2_vocab.token_bytes):
            if b:
                assert bool(row[t >> 5] >> (t & 31) & 1) == (dfa.step(inside, b) >= 0), (compiled, b)


@pytest.mark.parametrize("pattern", [
    "[a-m]x|[h-z]y|[k-p]+z",              # member states' ranges overlap, partly share targets
    "([a-f]|[c-h]|[e-k])*(bz|[a-c]y)",
    "(a|[a-c]|[b-d]a)(a|b)?|d[^a]",
])
def test_lazy_rows_agree_with_re_where_ranges_overlap(pattern):
    """Each lazy row splits the bytes where its NFA states' ranges start and end; every
    string over a small alphabet (all of length <= 4) is judged as ``re`` judges it."""
    dfa = lazy_dfa(pattern)
    for n in range(5):
        for chars in itertools.product("abcdhkmpxyz", repeat=n):
            text = "".join(chars)
            assert dfa.matches(text.encode()) == bool(re.fullmatch(pattern, text)), (pattern, text)


def test_lazy_row_where_two_member_states_share_a_target():
    """States 0 and 1 (one subset) both move to 2, on a-f and on c-h: the row has
    that target from a to h, though one of the two ranges ends at f."""
    nfa = NFA(lazy=True)
    s0 = nfa.add_states(4)
    s1, mid, end = s0 + 1, s0 + 2, s0 + 3
    nfa.epsilon(s0, s1)
    nfa.edge(s0, ord("a"), ord("f"), mid)
    nfa.edge(s1, ord("c"), ord("h"), mid)
    nfa.edge(mid, ord("z"), ord("z"), end)
    dfa = LazyDFA(nfa, s0, end)
    for c in "abcdefghi":
        assert dfa.matches(f"{c}z".encode()) == (c <= "h"), c


def test_dropping_the_automaton_frees_its_nfa():
    """Deferred builders close over their NFA, a reference cycle: the NFA's states are
    freed with the automaton, not at some later full garbage collection."""
    nfa = NFA(lazy=True)
    s, e = regex_to_nfa("[a-z]{0,65535}", nfa)
    dfa = LazyDFA(nfa, s, e)
    assert dfa.matches(b"hello") and nfa.pending
    del dfa
    assert len(nfa) == 0 and not nfa.pending


def test_gc_paused_restores_the_collector():
    assert gc.isenabled()
    with pytest.raises(KeyError):
        with gc_paused():
            assert not gc.isenabled()
            with gc_paused():  # nested: the outer pause resumes it
                pass
            assert not gc.isenabled()
            raise KeyError
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # the caller's choice stands
    finally:
        gc.enable()


def test_gc_paused_holds_until_the_last_thread_leaves():
    """Threads compiling at once: the collector resumes when the last pause ends,
    not when the first does."""
    import threading

    inside, leave = threading.Event(), threading.Event()

    def long_pause():
        with gc_paused():
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=long_pause)
    t.start()
    inside.wait(10)
    with gc_paused():
        pass
    assert not gc.isenabled()  # the other thread is still inside
    leave.set()
    t.join()
    assert gc.isenabled()


def test_gc_paused_moves_what_it_built_to_the_oldest_generation():
    gc.collect()
    with gc_paused():
        built = [[i] for i in range(5_000)]
    assert gc.isenabled() and gc.get_count()[0] < 1_000  # no young pass owed for ``built``
    assert gc.is_tracked(built[0]) and any(o is built for o in gc.get_objects(generation=2))
    assert gc.get_freeze_count() == 0


def test_gc_paused_keeps_the_process_frozen_heap_frozen():
    """A server that froze its start-up heap (vLLM does) keeps it frozen."""
    from guided.fsm import gc_pause

    gc.collect()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        for _ in range(3):
            with gc_paused():
                built = [[i] for i in range(100)]
        assert gc.get_freeze_count() >= frozen and built
    finally:
        gc.unfreeze()
        gc_pause._frozen_until = 0.0  # forget it: later blocks may move their objects again


def test_gc_paused_leaves_a_failed_blocks_objects_young():
    gc.collect()
    kept = []
    with pytest.raises(KeyError):
        with gc_paused():
            kept.append([[i] for i in range(100)])
            raise KeyError
    assert not any(o is kept[0] for o in gc.get_objects(generation=2))


def nested(levels: int):
    value = {"leaf": [1, "two", None]}
    for i in range(levels):
        value = {"k%d" % i: [value, {"x": True}]} if i % 2 else {"k%d" % i: value}
    return value


@pytest.mark.parametrize("schema", [{}, True, {"type": "object"}, {"properties": {"a": {"type": "integer"}}}])
def test_open_values_nest_deeply(schema):
    dfa = compile_json_schema(schema, "compact")
    deep = nested(30)
    text = json.dumps(deep, separators=(",", ":")).encode()
    assert jsonschema.validators.validator_for(schema)(schema).is_valid(deep)
    assert dfa.matches(text)
    assert not dfa.matches(text[:-1])
    assert not dfa.matches(text + b"}")


def test_open_depth_is_bounded():
    dfa = compile_json_schema(True, "compact")
    assert dfa.matches(b"[" * OPEN_DEPTH + b"]" * OPEN_DEPTH)
    assert not dfa.matches(b"[" * (OPEN_DEPTH + 1) + b"]" * (OPEN_DEPTH + 1))


def test_huge_max_length_string():
    # Compiles at once: the 65,535 copies are built only as far as a text goes.
    dfa = compile_json_schema({"type": "string", "maxLength": 65535}, "compact")
    assert dfa.matches(b'"' + b"a" * 3000 + b'"')
    assert dfa.matches('"é€😀"'.encode())
    dfa = compile_json_schema({"type": "string", "minLength": 10, "maxLength": 2000}, "compact")
    assert dfa.matches(b'"' + b"a" * 2000 + b'"')
    assert not dfa.matches(b'"' + b"a" * 2001 + b'"')
    assert not dfa.matches(b'"' + b"a" * 9 + b'"')


def test_nfa_liveness_is_the_same_searched_every_way(monkeypatch):
    """``_co_reachable`` (which NFA states can still reach the end, deferred fragments
    counted as leading to theirs) gives the same answer from its Python loop (small
    NFAs), its numpy search and its compiled search (large ones), dead states included."""
    import guided.fsm.lazy
    from guided.fsm.kernels import AVAILABLE

    schema = {"type": "object", "properties": {"a": {}, "b": {"type": "array", "items": {"type": "string", "maxLength": 3}}},
              "additionalProperties": {"type": "integer"}}
    from guided.grammars.json_schema.compiler import SchemaCompiler

    compiler = SchemaCompiler(schema, "compact")
    nfa = NFA(lazy=True)
    s, e = compiler.value(nfa, compiler.root, "#", 0)
    orphan = nfa.state()  # a dead state: reaches nothing
    nfa.epsilon(s, orphan)
    assert nfa.pending  # the open value "a" is deferred
    small = guided.fsm.lazy._co_reachable(nfa, e)
    monkeypatch.setattr(guided.fsm.lazy, "SMALL_SEARCH_EDGES", -1)
    monkeypatch.setattr(guided.fsm.lazy, "COMPILED_AVAILABLE", False)
    large = guided.fsm.lazy._co_reachable(nfa, e, nfa.flat())
    assert small == large
    if AVAILABLE:
        monkeypatch.setattr(guided.fsm.lazy, "COMPILED_AVAILABLE", True)
        assert guided.fsm.lazy._co_reachable(nfa, e, nfa.flat()) == small
    assert small[s] and not small[orphan]


@pytest.mark.parametrize("pattern", [r"[a-c]+x?", r"(ab|é)*[0-9]{2}", r"\w{1,3}"])
def test_a_pasted_template_matches_what_the_original_matches(pattern):
    """``NFA.template`` keeps a fragment as built; ``paste`` makes independent copies:
    a union of the original and two copies, each linked onward differently, still
    matches exactly the pattern followed by that copy's own suffix."""
    from guided.fsm.dfa import determinize

    nfa = NFA()
    first = len(nfa)
    s, e = regex_to_nfa(pattern, nfa)
    template = nfa.template(first, s, e)
    assert template is not None
    frags = [(s, e), nfa.paste(template), nfa.paste(template)]
    suffixed = [nfa.concat([f, nfa.byte_string(suffix)]) for f, suffix in zip(frags, (b"!", b"?", b""))]
    dfa = determinize(nfa, *nfa.union(suffixed))
    texts = ["", "a", "abcx", "x", "abé12", "é", "12", "ab", "héllo", "ab_"]
    for text in texts:
        for suffix in ("!", "?", ""):
            expected = bool(re.fullmatch(pattern, text))
            assert dfa.matches((text + suffix).encode()) == expected, (pattern, text, suffix)


def test_a_template_with_holes_gives_each_copy_its_own_deferred_fragments():
    """``template(..., holes=True)`` keeps a fragment's deferred parts as holes: each
    pasted copy gets deferred fragments of its own, built with the same builder
    when the automaton reaches it, and linked into that copy only."""
    nfa = NFA(lazy=True)
    built = []

    def inner():
        built.append(len(nfa))
        return nfa.byte_string(b"in")

    def outer():
        return nfa.concat([nfa.byte_string(b"<"), nfa.deferred(inner, {105, 106, 110, 111}), nfa.byte_string(b">")])

    templates = {}
    frags = [nfa.built_once(templates, "k", outer, holes=True) for _ in range(3)]
    assert len(templates["k"].holes) == 1 and len(nfa.pending) == 3
    suffixed = [nfa.concat([f, nfa.byte_string(suffix)]) for f, suffix in zip(frags, (b"a", b"b", b"c"))]
    dfa = LazyDFA(nfa, *nfa.union(suffixed))
    assert not built
    assert dfa.matches(b"<in>b") and len(built) == 3  # "<" reaches each copy's own hole
    assert dfa.matches(b"<in>a") and dfa.matches(b"<in>c")
    assert not dfa.matches(b"<>b") and not dfa.matches(b"<in>") and not dfa.matches(b"<in>d")
    plain = NFA(lazy=True)
    first = len(plain)
    s, e = plain.deferred(inner, set())
    assert plain.template(first, s, e) is None and plain.template(first, s, e, holes=True) is not None


def test_a_fragment_with_deferred_parts_is_not_a_template():
    nfa = NFA(lazy=True)
    first = len(nfa)
    s, e = regex_to_nfa("a{0,1000}", nfa)  # large: deferred copies
    assert nfa.pending and nfa.template(first, s, e) is None
    nfa = NFA()
    outside = nfa.state()
    first = len(nfa)
    s, e = regex_to_nfa("ab", nfa)
    nfa.epsilon(s, outside)  # a move out of the fragment
    assert nfa.template(first, s, e) is None


def test_a_pattern_used_in_many_places_is_checked_in_each():
    schema = {"type": "object", "properties": {k: {"type": "string", "pattern": "^[a-z]+[0-9]?$"} for k in "abc"}}
    dfa = compile_json_schema(schema, "compact")
    validator = jsonschema.Draft202012Validator(schema)
    for values in itertools.product(["ab", "ab1", "1", "", "abc12", "é"], repeat=3):
        doc = dict(zip("abc", values))
        text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
        assert dfa.matches(text) == validator.is_valid(doc), doc


UNICODE_WORDS = {"type": "object", "properties": {
    "a": {"type": "string", "pattern": r"^([\w/-]|[\w-][\w/-]*[\w-])$", "maxLength": 255},
    "b": {"type": "string", "pattern": r"^[\w.:-]+$", "minLength": 3, "maxLength": 200}},
    "additionalProperties": False}


VALUES = ["ab", "", "a/b", "/ab", "ab/", "é-ü", "日本語", "x" * 200, "x" * 201, "a b", "é" * 255, "é" * 256]


@pytest.mark.parametrize("key", ["a", "b"])
def test_large_string_products_are_built_when_reached(key):
    """A Unicode pattern times a length counter is a product of thousands of states:
    a deferred fragment, built when decoding enters that string, exact once built."""
    dfa = compile_json_schema(UNICODE_WORDS, "compact")
    compiled = dfa.nfa_size
    assert dfa.matches(b"{}")
    assert dfa.nfa_size == compiled  # neither product was needed
    for value in VALUES:
        instance = {key: value}
        text = json.dumps(instance, separators=(",", ":"), ensure_ascii=False).encode()
        valid = jsonschema.Draft202012Validator(UNICODE_WORDS).is_valid(instance)
        assert dfa.matches(text) == valid, value
        assert dfa.nfa_size > compiled + 1000  # the product was built to decide


def test_a_large_string_product_with_no_string_is_an_error_at_compile():
    from guided.grammars.json_schema.compiler import UnsatisfiableSchemaError

    with pytest.raises(UnsatisfiableSchemaError, match="string constraints contradict"):
        compile_json_schema({"type": "string", "pattern": r"^\w{300}$", "maxLength": 255}, "compact")


@pytest.mark.parametrize("pattern, lo, hi", [
    (r"^([\w/-]|[\w-][\w/-]*[\w-])$", 0, 255), (r"^[\w.:-]+$", 3, 200), (r"^[a-z]+é?$", 0, 40),
    (r"^(\S+\s){0,3}\S$", 1, 30), (r"^[^a]*$", 2, 9),
])
def test_product_bound_holds_the_pairs_a_product_reaches(pattern, lo, hi):
    from guided.fsm.ops import _product, product_bound
    from guided.grammars.json_schema.strings import body_parts as _body_parts

    a, b = _body_parts((("pattern", pattern),), lo, hi)
    reached = len(_product(a, b, lambda x, y: x and y, both=True, limit=10**7)[2])
    assert reached <= product_bound(a, b) <= a.num_states * b.num_states


def test_product_bound_of_automata_not_reading_utf8_is_the_plain_product():
    import numpy as np

    from guided.fsm.dfa import DFA
    from guided.fsm.ops import product_bound
    from guided.grammars.json_schema.strings import length_dfa as _length_dfa

    # One state looping on every byte: a continuation byte may come first.
    raw = DFA(np.zeros((1, 1), dtype=np.int32), np.zeros(256, dtype=np.int32), np.array([True]))
    body = _length_dfa(0, 3)
    assert product_bound(raw, body) == body.num_states
    assert product_bound(body, body) < body.num_states ** 2


def test_a_string_product_that_may_outgrow_the_limit_is_levelled_or_built_at_compile(monkeypatch):
    """A deferred product must not fail when decoding builds it: one whose bound
    passes the product limit is built level by level when its pattern is small
    (``counted_body``), else at once (a compile error if it is too large)."""
    import guided.grammars.json_schema.strings as strings

    schema = {"type": "object", "properties": {"a": UNICODE_WORDS["properties"]["a"]}, "additionalProperties": False}
    deferred = compile_json_schema(schema, "compact").nfa_size
    monkeypatch.setattr(strings, "MAX_PRODUCT_STATES", 1000)
    levelled = compile_json_schema(schema, "compact")
    assert levelled.nfa_size < deferred + 100  # nothing of the string built yet
    assert levelled.matches('{"a":"ab-c"}'.encode()) and not levelled.matches(b'{"a":"a b"}')
    monkeypatch.setattr(strings, "LEVELLED_STATES", 0)
    built = compile_json_schema(schema, "compact").nfa_size
    assert built > deferred + 10_000


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_reach_bits_is_what_a_search_from_each_state_finds(seed, compiled):
    """``NFA.reach_bits`` (one pass over strongly connected components, in Python or
    compiled) gives each state the OR of the seed bits of every state it reaches, on
    random graphs with cycles, self-loops, byte moves, epsilons and a deferred
    fragment; with more than 64 bits on odd seeds (several words compiled)."""
    import random

    from guided.fsm.kernels import AVAILABLE

    if compiled and not AVAILABLE:
        pytest.skip("numba is not installed")

    rng = random.Random(seed)
    nfa = NFA(lazy=True)
    n = 60
    states = [nfa.state() for _ in range(n)]
    for _ in range(90):
        a, b = rng.choice(states), rng.choice(states)
        if rng.random() < 0.5:
            nfa.epsilon(a, b)
        else:
            nfa.edges[a].append((97, 98, b))
    a, b = rng.sample(states, 2)
    nfa.pending[a] = (lambda: None, b)
    spread = 20 if seed % 2 else 1  # bits 0 to 140: three words
    seeds = {s: 1 << (spread * i) for i, s in enumerate(rng.sample(states, 8))}
    succ = nfa.successors()

    def reached(s):
        seen, stack = {s}, [s]
        while stack:
            for t in succ[stack.pop()]:
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
        return seen

    want = [0] * len(nfa)
    for s in range(len(nfa)):
        for t in reached(s):
            want[s] |= seeds.get(t, 0)
    assert nfa.reach_bits(seeds, compiled=compiled) == want
    assert b in reached(a)  # the deferred fragment counts as a move

    # A fragment built later: new states whose moves lead anywhere, old ones kept
    # final; the incremental search (``known``) extends the old bits to them.
    new = [nfa.state() for _ in range(30)]
    for _ in range(50):
        a, b = rng.choice(new), rng.choice(states + new)
        if rng.random() < 0.5:
            nfa.epsilon(a, b)
        else:
            nfa.edges[a].append((97, 98, b))
    seeds.update({s: 1 << (spread * (8 + i)) for i, s in enumerate(rng.sample(new, 5))})
    succ = nfa.successors()
    for s in new:
        want.append(0)
        for t in reached(s):
            want[s] |= seeds.get(t, 0)
    known = want[:n]
    assert nfa.reach_bits(seeds, known) == want
    assert known == want  # extended in place


@pytest.mark.parametrize("pattern", [r"\w{0,40}", r".{3,9}", r"[^a]*", r"(a|€|😀){1,5}", r".*é.*", r"\d{4}-\d{2}", r"[^\"\\]{0,20}"])
def test_utf8_phases_are_the_continuation_bytes_due_after_a_path(pattern):
    """``_utf8_phases`` (numpy over the edges) gives each reachable state the number
    of continuation bytes still due after any text that leads there, counted here by
    walking one shortest path per state."""
    import numpy as np

    from guided.fsm.ops import _utf8_phases
    from guided.fsm.regex import compile_regex

    dfa = compile_regex(pattern)
    first_byte = {int(c): b for b, c in reversed(list(enumerate(dfa.byte_to_class.tolist())))}
    path = {0: b""}
    frontier = [0]
    while frontier:
        nxt = []
        for s in frontier:
            for c, t in enumerate(dfa.transitions[s].tolist()):
                if t >= 0 and t not in path:
                    path[t] = path[s] + bytes([first_byte[c]])
                    nxt.append(t)
        frontier = nxt

    def due(data: bytes) -> int:
        left = 0
        for b in data:
            left = left - 1 if 0x80 <= b < 0xC0 else (1 if b >= 0xC0 else 0) + (b >= 0xE0) + (b >= 0xF0)
        return left

    want = np.bincount([due(path[s]) for s in sorted(path)], minlength=4)
    assert np.array_equal(np.bincount(_utf8_phases(dfa), minlength=4), want)


@pytest.mark.parametrize("pattern, match", [
    ("[a-zA-Z0-9_-]{162}", "x" * 162), ("https://w3id.org/chainpoint/v2", "https://w3id.org/chainpoint/v2"),
    ("^ab+c", ""), ("[0-9]{3}x$", "123x"),
])
def test_an_unanchored_patterns_search_takes_every_plain_token_whole(smollm2_vocab, pattern, match):
    """Inside a string under an unanchored ``pattern``, any text keeps the search
    alive until a match is found, so the index takes every plain token whole from
    the copies' rooms (a long counted search, ``[a-zA-Z0-9_-]{162}``, walked the
    whole vocabulary at each of its ~160 states: ~3 ms a mask). Rows along a text
    that first misses and then holds a match are checked against stepping every
    token; ``^`` and ``$`` searches have states that are not free."""
    from guided.fsm.index import TokenIndex

    text = '"' + ("abbc" if pattern[0] == "^" else "ab " * 70 + match) + ("" if pattern[-1] == "$" else "tail")
    for compiled in (False, True) if COMPILED_AVAILABLE else (False,):
        dfa = compile_json_schema({"type": "string", "pattern": pattern}, whitespace="compact")
        index = TokenIndex(dfa, smollm2_vocab, eager=False, compiled=compiled)
        state, whole = dfa.start, []
        for i, ch in enumerate(text):
            state = dfa.step(state, ch.encode())
            assert state >= 0, (pattern, text[: i + 1])
            if i % 50 and i < len(text) - 3:
                continue
            row = index.mask(state)
            whole.append(index._plain_run(state) == index._plain_cap)
            for t, b in enumerate(smollm2_vocab.token_bytes):
                if b:
                    assert bool(row[t >> 5] >> (t & 31) & 1) == (dfa.step(state, b) >= 0), (compiled, pattern, i, b)
        if pattern[0] != "^":  # the search states before a match
            assert all(whole[:4]), (compiled, pattern, whole)


@pytest.mark.parametrize("pattern", ["https://w3id", "^abc", "^abc$", "a{3}", "^[a-z]+$", "^x.*", "é", "[^a]", "(ab|b)c"])
def test_free_states_are_those_every_text_keeps_alive(pattern):
    """``fsm.ops.free_states`` of a pattern's string body: a state is free exactly
    when no run of characters from it dies, checked by a search over every plain
    byte and a few non-ASCII characters (2 to 4 bytes in UTF-8)."""
    from guided.fsm.dfa import determinize
    from guided.fsm.ops import free_states
    from guided.fsm.trie import PLAIN_BYTES
    from guided.grammars.json_schema.text import pattern_body

    nfa = NFA()
    dfa = determinize(nfa, *pattern_body(nfa, pattern))
    chars = [bytes([b]) for b in PLAIN_BYTES] + [c.encode() for c in "é日😀\u0080\U0010ffff"]

    def reached(s: int) -> set[int]:
        seen, todo = {s}, [s]
        while todo:
            u = todo.pop()
            for c in chars:
                t = dfa.step(u, c)
                if t >= 0 and t not in seen:
                    seen.add(t)
                    todo.append(t)
        return seen

    got = set(free_states(dfa))
    for s in reached(0):  # every state between characters
        assert (s in got) == all(dfa.step(u, c) >= 0 for u in reached(s) for c in chars), (pattern, s)
    assert got <= reached(0)
    assert bool(got) != pattern.endswith("$")
