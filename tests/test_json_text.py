"""JSON text fragments: other keys than the listed ones, and the DFA edge lists that
schema fragments are copied from."""

import json
import random

import numpy as np
import pytest

from guided.fsm.dfa import determinize
from guided.fsm.kernels import AVAILABLE as COMPILED_AVAILABLE
from guided.fsm.lazy import LazyDFA
from guided.fsm.nfa import NFA, Template
from guided.fsm.regex import compile_regex
from guided.grammars.json_schema import text as jt


def _other_keys_dfa(names, lazy=False):
    nfa = NFA(lazy=lazy)
    s, e = jt.key_excluding(nfa, names)
    # A lazy NFA defers the fragment: its byte classes come from the announced cuts.
    return LazyDFA(nfa, s, e) if lazy else determinize(nfa, s, e)


def _candidates(names, rng):
    """Names, their prefixes, one-character extensions and edits, random strings."""
    out = {""}
    alphabet = sorted({ch for n in names for ch in n} | set("az_é€😀\"\\/\n"))
    for n in names:
        out.update(n[:i] for i in range(len(n) + 1))
        out.update(n + ch for ch in alphabet[:6])
        for i in range(len(n)):
            out.add(n[:i] + rng.choice(alphabet) + n[i + 1:])
    for _ in range(200):
        out.add("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))))
    return sorted(out)


NAME_SETS = [
    [],
    ["a"],
    ["apiVersion", "kind", "metadata", "spec", "status", "api"],  # shared prefixes
    ["", "x", "xy", "xyz"],                                         # the empty name, nested names
    ["café", "caf", "naïve", "€uro", "😀"],                          # multi-byte characters
    ["a/b", 'say "hi"', "tab\there", "back\\slash"],               # characters with several spellings
]


@pytest.mark.parametrize("names", NAME_SETS)
@pytest.mark.parametrize("lazy", [False, True])
def test_other_keys_are_exactly_the_strings_that_are_no_listed_name(names, lazy):
    dfa = _other_keys_dfa(names, lazy)
    rng = random.Random(7)
    for text in _candidates(names, rng):
        quoted = json.dumps(text, ensure_ascii=False).encode("utf-8")
        assert dfa.matches(quoted) == (text not in names), (names, text)
    # Another spelling of a listed name is still that name.
    if "a/b" in names:
        assert not dfa.matches(b'"a\\/b"')
    # Not a string at all.
    assert not dfa.matches(b"abc")


@pytest.mark.parametrize("names", NAME_SETS)
def test_other_keys_used_twice_in_one_lazy_nfa_judge_alike(names):
    """Objects with keys in any order use one object's other-keys fragment in every
    node; in a lazy NFA the second copy is pasted from the first (names whose
    characters have one spelling each), and both accept exactly the other keys."""
    nfa = NFA(lazy=True)
    one = nfa.concat([nfa.byte_string(b"1"), jt.key_excluding(nfa, names)])
    two = nfa.concat([nfa.byte_string(b"2"), jt.key_excluding(nfa, names)])
    s, e = nfa.union([one, two])
    dfa = LazyDFA(nfa, s, e)
    for text in _candidates(names, random.Random(3)):
        quoted = json.dumps(text, ensure_ascii=False).encode("utf-8")
        assert dfa.matches(b"1" + quoted) == dfa.matches(b"2" + quoted) == (text not in names), (names, text)
    by_byte = not any(ch in '"\\/' or ord(ch) < 0x20 for name in names for ch in name)
    assert len(nfa.templates) == (1 if by_byte else 0)


@pytest.mark.skipif(not COMPILED_AVAILABLE, reason="numba is not installed")
def test_the_other_key_template_is_made_with_the_object_and_the_fragment_stays_deferred():
    """The template's arrays are made when the fragment is declared (as the object
    is built), so the first mask that reaches an other key pastes a copy; the
    fragment itself is still built only when the automaton reaches it."""
    nfa = NFA(lazy=True)
    names = ["alpha", "beta", "gamma"]
    s, e = nfa.concat([nfa.byte_string(b"1"), jt.key_excluding(nfa, names)])
    assert isinstance(nfa.templates.get(("key_excluding", frozenset(names))), Template)
    assert len(nfa.pending) == 1 and len(nfa) < 10
    dfa = LazyDFA(nfa, s, e)
    assert dfa.matches(b'1"delta"') and not dfa.matches(b'1"beta"')


@pytest.mark.skipif(not COMPILED_AVAILABLE, reason="numba is not installed")
@pytest.mark.parametrize("names", [n for n in NAME_SETS if not any(ch in '"\\/\t' for name in n for ch in name)]
                         + [[f"k{i}" for i in range(120)], ["ab", "abc", "abd", "b", "ba"]])
def test_the_compiled_key_trie_makes_the_python_builders_states(names):
    """``key_trie_template`` (a numba kernel) makes the states that the Python
    builder makes, in the same order: a compiled construction pastes the one and the
    Python construction builds the other, and they must agree."""
    nfa = NFA(lazy=True)
    nfa.state()  # the fragment not at state 0: its targets are counted from its first state
    s, e = jt._key_excluding_by_byte(nfa, set(names))
    built = nfa.template(1, s, e)
    made = jt.key_trie_template(frozenset(names))
    one_by_one = [made.moves_of(i) for i in range(made.n)]  # read from the arrays, before any unpacking
    assert (made.n, made.start, made.end) == (built.n, built.start, built.end)
    assert np.array_equal(made.packed()[0], built.packed()[0])
    assert made.edges == [[(lo, hi, t - 1) for lo, hi, t in moves] for moves in built.edges]
    assert made.eps == [[t - 1 for t in targets] for targets in built.eps]
    assert one_by_one == list(zip(made.eps, made.edges))


@pytest.mark.parametrize("pattern", [r"[a-c]|[d-f]x", r"[\x00-\x7f]+z", r"\w{1,3}", r"é|[^é]"])
def test_edge_lists_are_sorted_merged_ranges_that_move_as_the_dfa_does(pattern):
    dfa = compile_regex(pattern)
    edges, accepting = dfa.edge_list()
    assert accepting == [s for s in range(dfa.num_states) if dfa.is_accepting(s)]
    for s, moves in enumerate(edges):
        for (lo1, hi1, t1), (lo2, hi2, t2) in zip(moves, moves[1:]):
            assert hi1 < lo2, "ranges are sorted and disjoint"
            assert not (t1 == t2 and hi1 + 1 == lo2), "neighbours of one target are joined"
        target = {}
        for lo, hi, t in moves:
            for b in range(lo, hi + 1):
                target[b] = t
        for b in range(256):
            assert target.get(b, -1) == dfa.step(s, bytes([b]))


def test_a_small_pattern_is_copied_in_as_its_minimal_dfa():
    """``small_pattern_dfa``: a pattern with a small automaton is copied in as its
    minimal DFA (here ~4x smaller than its NFA), which matches what the pattern
    matches in JSON text, Unicode digits included; a pattern with a
    long counted part stays an NFA built as reached."""
    import jsonschema

    from guided.grammars.json_schema.compiler import compile_json_schema
    from guided.grammars.json_schema.strings import small_pattern_dfa

    rx = r"^[A-Fa-f\d]{24}$"
    nfa = NFA(lazy=True)
    jt.pattern_body(nfa, rx)
    dfa = small_pattern_dfa(rx)
    assert dfa is not None and 2 * dfa.num_states <= len(nfa)
    assert small_pattern_dfa("[a-z]{1,255}") is None
    schema = {"type": "array", "items": {"type": "string", "pattern": rx}, "maxItems": 3}
    automaton = compile_json_schema(schema, "compact")
    texts = ['["0123456789abcdef01234567"]', '["0123456789abcdef01234567","0123456789ABCDEF01234567"]',
             '["0123456789abcdef0123456٣"]', '["0123456789abcdef0123456"]', '["0123456789abcdef0123456g"]',
             '["0123456789abcdef012345678"]', '["0123456789abcdef0123456\\n"]', '[]']
    for text in texts:
        valid = jsonschema.Draft202012Validator(schema).is_valid(json.loads(text))
        assert automaton.matches(text.encode()) == valid, text
