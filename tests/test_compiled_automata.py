"""The compiled determinisation (with numba) agrees with the Python one: the subset
construction (``fsm.kernels.subsets``) builds the same table as ``fsm.dfa.subset_table``
(the same states, numbered alike, the same byte classes and accepting states) and
refuses the same patterns; Hopcroft's algorithm (``fsm.kernels.partition``) finds the
same coarsest partition as ``fsm.dfa``'s Hopcroft and Moore refinements; the product of
two DFAs (``fsm.kernels.product``) has the same pairs, numbered alike, as
``fsm.ops._product_by_pair``."""

import itertools

import numpy as np
import pytest

from guided.errors import RegexTooLargeError
from guided.fsm import memo
from guided.fsm.dfa import coarsest_partition, determinize, subset_table
from guided.fsm.kernels import AVAILABLE
from guided.fsm.nfa import NFA
from guided.fsm.regex import regex_to_nfa

pytestmark = pytest.mark.skipif(not AVAILABLE, reason="numba is not installed")

PATTERNS = [
    r'"([^"\\]|\\.)*"',                        # a JSON string: escapes, a loop
    r"[a-z]{2,5}x|ab+c",                       # overlapping alternatives: subsets of several states
    r'\{"name":"[^"\\]*","n":-?\d{1,3}\}',     # a small object
    r"(a|b)*abb(a|b){0,6}",                    # many target sets of several states (remembered)
    r"\d{1,3}(\.\d+)?([eE][+-]?\d+)?",         # a number
    r"[\u0100-\uffff]{1,4}é|\w+@\w+\.com",     # multi-byte characters, many byte classes
    r"(a|b)*a(a|b){9}",                        # 2,048 states: the state buffers grow
    "x(" + "|".join(a + b for a in "abcdefghijklmnopqrstuvwxyz" for b in "abcdefghijkl") + ")",  # a wide row
    r"",                                       # the empty string only
]


def _python_and_compiled(pattern: str, limit: int = 10**6):
    from guided.fsm import subset_arrays

    nfa = NFA()
    start, end = regex_to_nfa(pattern, nfa)
    trans, classes, sets = subset_table(nfa, start, {end}, limit=limit)
    accepting = np.array([end in s for s in sets], dtype=bool)
    return (trans, classes, accepting), subset_arrays.subset_table(nfa, start, end, None, limit)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_compiled_table_equals_the_python_table(pattern):
    (trans, classes, accepting), (c_trans, c_classes, c_accepting) = _python_and_compiled(pattern)
    assert trans.dtype == c_trans.dtype and classes.dtype == c_classes.dtype
    assert np.array_equal(trans, c_trans)
    assert np.array_equal(classes, c_classes)
    assert np.array_equal(accepting, c_accepting)


def _assert_same_dfa(fast, slow) -> None:
    assert np.array_equal(fast.transitions, slow.transitions)
    assert np.array_equal(fast.byte_to_class, slow.byte_to_class)
    assert np.array_equal(fast.accepting, slow.accepting)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_compiled_determinize_equals_python_determinize(pattern):
    nfa = NFA()
    start, end = regex_to_nfa(pattern, nfa)
    _assert_same_dfa(determinize(nfa, start, end, compiled=True), determinize(nfa, start, end, compiled=False))


@pytest.mark.parametrize("pattern", PATTERNS)
def test_compiled_minimisation_equals_python_minimisation(pattern, monkeypatch):
    """The whole of ``minimize`` (Hopcroft's partition, then the quotient's
    breadth-first numbering), compiled and in Python."""
    from guided.fsm import dfa as dfa_module

    nfa = NFA()
    start, end = regex_to_nfa(pattern, nfa)
    trans, classes, sets = subset_table(nfa, start, {end})
    accepting = np.array([end in s for s in sets], dtype=bool)
    got = []
    for compiled in (True, False):
        monkeypatch.setattr(dfa_module, "COMPILED_AVAILABLE", compiled)
        memo.clear()
        got.append(dfa_module.minimize(trans, classes, accepting))
    _assert_same_dfa(*got)


def _canonical(block: np.ndarray) -> list[int]:
    """Block ids renumbered by first appearance (partitions compare equal then)."""
    ids: dict[int, int] = {}
    return [ids.setdefault(b, len(ids)) for b in block.tolist()]


@pytest.mark.parametrize("seed", range(12))
def test_compiled_partition_equals_python_partitions(seed):
    """Random complete tables with few distinct behaviours (so blocks merge), small
    ones (Python: Hopcroft) and large ones (Python: Moore)."""
    rng = np.random.default_rng(seed)
    n = [40, 300, 3000][seed % 3]
    k = [2, 5, 9][seed // 4 % 3]
    kinds = max(2, n // 10)  # states copy one of a few rows, up to which state they lead to
    sink = n
    base = rng.integers(0, n + 1, size=(kinds, k))
    t = base[rng.integers(0, kinds, size=n)]
    t = np.where(rng.random(t.shape) < 0.05, rng.integers(0, n + 1, size=t.shape), t)
    t = np.vstack([t, np.full((1, k), sink)])
    accepting = np.append(rng.random(n) < 0.3, False)
    # (Seeds 5, 8 and 11 make tables of at least MOORE_MIN_CELLS: Python uses Moore's.)
    fast = coarsest_partition(t, accepting, sink, compiled=True)
    slow = coarsest_partition(t, accepting, sink, compiled=False)
    assert _canonical(fast) == _canonical(slow)
    assert len(set(fast.tolist())) < n  # some states merged: the test is not trivial


def test_compiled_determinize_matches_like_python():
    """Both minimise to the same automaton, which agrees with ``re.fullmatch``."""
    import re

    pattern = r"(ab|a[b-d]c)*d?"
    nfa = NFA()
    start, end = regex_to_nfa(pattern, nfa)
    fast = determinize(nfa, start, end, compiled=True)
    _assert_same_dfa(fast, determinize(nfa, start, end, compiled=False))
    for text in ["", "ab", "abc", "acc", "ababd", "abd", "adc", "d", "dd", "abacc"]:
        assert fast.matches(text.encode()) == bool(re.fullmatch(pattern, text)), text


def test_compiled_construction_refuses_past_the_limit_like_python():
    with pytest.raises(RegexTooLargeError) as python_error:
        _python_and_compiled(r"(a|b)*a(a|b){9}", limit=1000)
    from guided.fsm import subset_arrays

    nfa = NFA()
    start, end = regex_to_nfa(r"(a|b)*a(a|b){9}", nfa)
    with pytest.raises(RegexTooLargeError) as compiled_error:
        subset_arrays.subset_table(nfa, start, end, None, 1000)
    assert str(compiled_error.value) == str(python_error.value) == "pattern needs more than 1000 DFA states"


def test_deferred_fragments_are_refused():
    nfa = NFA(lazy=True)
    start, end = nfa.deferred(lambda: nfa.byte_string(b"x"), {ord("x"), ord("x") + 1})
    with pytest.raises(ValueError, match="LazyDFA only"):
        determinize(nfa, start, end, compiled=True)


OPERANDS = [r"[a-z]{2,9}@[a-z]+\.com", r"\w{3,40}", r"(ab|cd)*e?", r"[^x]{0,30}", r"[\u0100-\uffff]{1,4}é|\w+"]
OPERATIONS = {"and": (lambda x, y: x and y, True), "or": (lambda x, y: x or y, False),
              "and not": (lambda x, y: x and not y, False)}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
@pytest.mark.parametrize("left", range(len(OPERANDS)))
def test_compiled_product_equals_the_python_product(left, operation):
    from guided.fsm import ops
    from guided.fsm.regex import compile_regex

    accept, both = OPERATIONS[operation]
    a = compile_regex(OPERANDS[left])
    for right in OPERANDS:
        b = compile_regex(right)
        slow = ops._product_by_pair(a, b, accept, both, 10**6)
        fast = ops._product_compiled(a, b, accept, both, 10**6)
        for x, y in zip(slow, fast):
            assert x.dtype == y.dtype and np.array_equal(x, y), (OPERANDS[left], operation, right)


def test_compiled_product_refuses_past_the_limit_like_python():
    from guided.fsm import ops
    from guided.fsm.regex import compile_regex

    a, b = compile_regex(r"\w{3,40}"), compile_regex(r"[^x]{0,30}")
    for product in (ops._product_by_pair, ops._product_compiled):
        with pytest.raises(RegexTooLargeError, match="combined automaton exceeds 5 states"):
            product(a, b, lambda x, y: x and y, True, 5)


# Lazy determinisation: specs whose NFAs hold deferred fragments (counted repetitions
# built as reached, open JSON values, "any other key" tries, copies of large items).
LAZY_REGEXES = ["a{0,1000}", "(ab|c){70,90}", r"[\u0100-\uffff]{1,4}é|\w+@\w+\.com", "[a-z]{2,5}x|ab+c",
                r"x[0-9]{100,}y"]
LAZY_SCHEMAS = [
    {},
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 90}},
     "additionalProperties": True},
    {"type": "array", "items": {"type": "object", "properties": {f"p{i}": {"type": "string", "maxLength": 40}
                                                                 for i in range(30)}}, "maxItems": 6},
    {"type": "string", "maxLength": 300},
    {"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 100}, "minItems": 1},
]


def _lazy_pair(spec, monkeypatch):
    """The same spec's LazyDFA built the Python way and the compiled way."""
    from functools import partial

    from guided.fsm.lazy import LazyDFA
    from guided.grammars.json_schema import compiler as json_schema

    out = []
    for compiled in (False, True):
        if isinstance(spec, str):
            nfa = NFA(lazy=True)
            s, e = regex_to_nfa(spec, nfa)
            out.append(LazyDFA(nfa, s, e, compiled=compiled))
        else:
            monkeypatch.setattr(json_schema, "LazyDFA", partial(LazyDFA, compiled=compiled))
            out.append(json_schema.compile_json_schema(spec, "compact", key_order="any"))
    return out


def _explore(dfa, limit: int = 1500) -> None:
    """Expand states breadth-first from the start, ``limit`` rows at most."""
    seen, queue = {0}, [0]
    for k in itertools.count():
        if k == len(queue) or k == limit:
            return
        for t in dfa.next_states(queue[k]):
            if t >= 0 and t not in seen:
                seen.add(t)
                queue.append(t)


@pytest.mark.parametrize("spec", LAZY_REGEXES + LAZY_SCHEMAS, ids=lambda s: str(s)[:40])
def test_compiled_lazy_rows_equal_the_python_rows(spec, monkeypatch):
    """``LazyDFA``'s compiled construction (``fsm.subset_arrays.LazySubsets``)
    makes the states the Python one makes, numbered alike, building the same
    deferred fragments on the way."""
    slow, fast = _lazy_pair(spec, monkeypatch)
    assert fast._fast is not None and slow._fast is None
    for dfa in (slow, fast):
        _explore(dfa)
    n = slow.num_states
    assert n == fast.num_states and n > 1
    assert np.array_equal(slow.transitions[:n], fast.transitions[:n])
    assert np.array_equal(slow.accepting, fast.accepting)
    assert slow.nfa_size == fast.nfa_size
    assert [slow.member_room(d) for d in range(n)] == [fast.member_room(d) for d in range(n)]


@pytest.mark.parametrize("spec", [LAZY_REGEXES[1], LAZY_REGEXES[2], LAZY_SCHEMAS[1], LAZY_SCHEMAS[2]],
                         ids=lambda s: str(s)[:40])
def test_compiled_lazy_rows_are_the_same_when_every_buffer_grows(spec, monkeypatch):
    """From room for 4 states and 8 entries, each of the construction's buffers
    grows many times while rows are built (the DFA table with its hash table in one
    step): the rows stay the Python construction's."""
    from guided.fsm import subset_arrays

    monkeypatch.setattr(subset_arrays, "LAZY_STATES", 4)
    monkeypatch.setattr(subset_arrays, "LAZY_ITEMS", 8)
    grown = []
    grow = subset_arrays.Buffers.grow
    monkeypatch.setattr(subset_arrays.Buffers, "grow", lambda self, outcome: grown.append(outcome) or grow(self, outcome))
    slow, fast = _lazy_pair(spec, monkeypatch)
    for dfa in (slow, fast):
        _explore(dfa, 600)
    n = slow.num_states
    assert n == fast.num_states and n > 32
    assert np.array_equal(slow.transitions[:n], fast.transitions[:n])
    assert np.array_equal(slow.accepting, fast.accepting)
    assert subset_arrays.FULL_DFA in grown and subset_arrays.FULL_CL in grown


def test_compiled_lazy_construction_pastes_kept_fragments_from_their_arrays(monkeypatch):
    """Open values after the first are pasted straight into the compiled
    construction's arrays (``NFA.paste_pending``): their states have no Python
    lists, which refuse to be read, and the automaton is the Python one."""
    from guided.fsm.nfa import IN_ARRAYS

    slow, fast = _lazy_pair({"type": "array", "items": {}}, monkeypatch)
    for dfa in (slow, fast):
        _explore(dfa, 400)
    assert slow.nfa_size == fast.nfa_size
    n = slow.num_states
    assert n == fast.num_states and np.array_equal(slow.transitions[:n], fast.transitions[:n])
    pasted = [s for s, moves in enumerate(fast._nfa.eps) if moves is IN_ARRAYS]
    assert len(pasted) > fast.nfa_size // 2 and not any(moves is IN_ARRAYS for moves in slow._nfa.eps)
    with pytest.raises(RuntimeError, match="arrays only"):
        fast._nfa.flat()
    for text in (b'[1,{"a":[null,"x"]},[[true]]]', b'[{"b":{"c":{}}}]'):
        assert fast.matches(text) and slow.matches(text)
    assert not fast.matches(b'[{"b":{"c":}}]')


def test_compiled_lazy_growth_limit_leaves_the_state_unexpanded(monkeypatch):
    """Past ``growth_limit`` a row that needs a deferred fragment raises
    ``GrowthDeferred`` and stays unbuilt, in both constructions alike; without the
    limit it is built."""
    from guided.fsm.lazy import GrowthDeferred

    rows = []
    for dfa in _lazy_pair("a{0,1000}", monkeypatch):
        dfa.growth_limit = dfa.nfa_size
        state, steps = 0, 0
        with pytest.raises(GrowthDeferred):
            while True:
                state = dfa.step(state, b"a")
                steps += 1
        assert not dfa.is_expanded(state)
        dfa.growth_limit = None
        assert dfa.matches(b"a" * 1000) and not dfa.matches(b"a" * 1001)
        rows.append((steps, dfa.num_states, dfa.transitions[: dfa.num_states].copy()))
    assert rows[0][:2] == rows[1][:2] and np.array_equal(rows[0][2], rows[1][2])


def test_open_values_below_the_first_are_pasted_from_the_process_shape(monkeypatch):
    """Once one compile built an open value below the nesting limit, later compiles
    build none in Python: every level's first copy is the process's shape pasted
    with that level's children, and the automaton is the one built in Python."""
    import collections

    from guided.fsm.nfa import NFA as NFA_

    schema = {"type": "object", "properties": {"a": {}, "b": {"type": "array"}}}
    text = b'{"a":[1,{"x":[[null],{"y":{}}]}],"b":[{"z":[true]}]}'
    assert _lazy_pair(schema, monkeypatch)[1].matches(text)  # (the shape exists after this)
    builds = collections.Counter()
    materialize = NFA_.materialize

    def counting(nfa, s):
        key = getattr(nfa.pending[s][0], "key", None)
        if isinstance(key, tuple) and key[0] == "any":
            builds[id(nfa)] += 1
        materialize(nfa, s)

    monkeypatch.setattr(NFA_, "materialize", counting)
    slow, fast = _lazy_pair(schema, monkeypatch)
    for dfa in (slow, fast):
        assert dfa.matches(text) and not dfa.matches(text[:-1] + b"]")
        _explore(dfa, 800)
    assert builds[id(slow._nfa)] >= 4 and builds[id(fast._nfa)] == 0
    n = slow.num_states
    assert n == fast.num_states and slow.nfa_size == fast.nfa_size
    assert np.array_equal(slow.transitions[:n], fast.transitions[:n])


def test_middle_chunks_of_a_long_string_are_made_as_arrays(monkeypatch):
    """The first middle chunk of a long string's characters is made as arrays
    (``fsm.nfa._chunk_template``) where the Python construction builds it: the
    same states, numbered alike, and the same rooms."""
    from guided.fsm import nfa as nfa_module

    made = []
    real = nfa_module._chunk_template
    monkeypatch.setattr(nfa_module, "_chunk_template", lambda *args: made.append(args[1]) or real(*args))
    slow, fast = _lazy_pair({"type": "string", "maxLength": 300}, monkeypatch)
    for dfa in (slow, fast):
        assert dfa.matches(b'"' + "é".encode() * 150 + b'"') and dfa.matches(b'"' + b"x" * 300 + b'"')
        assert not dfa.matches(b'"' + b"x" * 301 + b'"')
        _explore(dfa, 1500)
    assert made  # (the chunk from copy 1 on, once)
    n = slow.num_states
    assert n == fast.num_states and slow.nfa_size == fast.nfa_size
    assert np.array_equal(slow.transitions[:n], fast.transitions[:n])
    assert [slow.member_room(d) for d in range(n)] == [fast.member_room(d) for d in range(n)]
