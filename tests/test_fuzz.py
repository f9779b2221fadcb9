"""Fuzzing the three spec languages: random and mutated regexes, JSON Schemas (MaskBench's
mutated keyword by keyword too) and lark grammars, each compiled for a small vocabulary
and judged against its reference (``tests/fuzz_specs.py`` says how).

Every outcome must be a guide that agrees with the reference on sampled strings, or a
documented error (a ``guided.SpecError``) within the time budget. The fast tier runs a
few of each with fixed seeds; ``slow`` runs more; ``benchmarks/fuzz.py`` runs the same
fuzzer for as long as asked. Below them: checks of the fuzzer's own references, and
regressions of what it found.
"""

from __future__ import annotations

import random
import re

import lark
import pytest

import guided

try:
    from tests import fuzz_specs as fz
    from tests import grammar_sampler as gs
except ImportError:  # tests/ itself on sys.path
    import fuzz_specs as fz
    import grammar_sampler as gs


@pytest.fixture(scope="module")
def vocab():
    return fz.fuzz_vocab()


def _run(language: str, seed: int, count: int, vocab, **kwargs) -> list[fz.Outcome]:
    outcomes = []
    for i in range(count):
        rng = random.Random(f"{seed}-{language}-{i}")
        outcomes.append(fz.fuzz_one(language, rng, vocab, **kwargs))
    return outcomes


def _assert_expected(outcomes: list[fz.Outcome]) -> None:
    bad = [o for o in outcomes if o.unexpected]
    new = [o for o in bad if not fz.known(o)]
    assert not new, f"{len(new)} of {len(outcomes)} unexpected:\n" + "\n".join(o.report() for o in new[:5])
    if bad:
        pytest.xfail("known: " + "; ".join(sorted({why for o in bad for why in fz.known(o)})))


# -- the fast tier ---------------------------------------------------------------------


def test_random_and_mutated_regexes(vocab):
    outcomes = _run("regex", 0, 200, vocab)
    _assert_expected(outcomes)
    kinds = {o.kind for o in outcomes}
    assert {"guide", "RegexSyntaxError", "UnsupportedRegexFeature"} <= kinds
    assert sum(o.checked for o in outcomes) > 1000


def test_random_json_schemas(vocab):
    outcomes = _run("json", 0, 150, vocab)
    _assert_expected(outcomes)
    assert sum(o.kind == "guide" for o in outcomes) > 50
    assert sum(o.checked for o in outcomes) > 1000


def test_random_and_mutated_grammars(vocab):
    outcomes = _run("grammar", 0, 60, vocab)
    _assert_expected(outcomes)
    assert sum(o.kind == "guide" for o in outcomes) > 20
    assert "GrammarError" in {o.kind for o in outcomes}


@pytest.fixture(scope="module")
def maskbench():
    if not fz.MASKBENCH.exists():
        pytest.skip(f"MaskBench data not found at {fz.MASKBENCH}")
    return fz.maskbench_rows(random.Random(0), 200)


@pytest.mark.data
def test_maskbench_schemas_mutated_keyword_by_keyword(vocab, maskbench):
    outcomes = _run("maskbench", 0, 30, vocab, maskbench=maskbench)
    _assert_expected(outcomes)
    assert sum(o.kind == "guide" for o in outcomes) > 12


# -- longer runs -----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("language", ["regex", "json", "grammar"])
def test_longer_fuzzing(vocab, language):
    _assert_expected(_run(language, 1, {"regex": 400, "json": 300, "grammar": 100}[language], vocab))


@pytest.mark.slow
@pytest.mark.data
def test_longer_maskbench_fuzzing(vocab, maskbench):
    _assert_expected(_run("maskbench", 1, 100, vocab, maskbench=maskbench))


# -- the fuzzer's own parts ------------------------------------------------------------


def test_the_vocabulary_spells_every_byte_and_some_pieces(vocab):
    rng = random.Random(0)
    data = "é日 the {\"ab\": true}".encode()
    assert vocab.decode(fz.segmentation(data, None)) == data
    ids = fz.segmentation(data, rng)
    assert vocab.decode(ids) == data and any(i >= 256 for i in ids)


@pytest.mark.parametrize("pattern", [r"[a-z]{2,4}\d", r"(?i)straße|K+", r"(ab|cd)*?e$", r"[^\W\d]+\s?"])
def test_regex_members_are_members(pattern):
    got = fz.regex_members(pattern, 0, random.Random(pattern), 5)
    assert got and all(re.fullmatch(pattern, s) for s in got)


def test_a_regex_disagreement_is_reported(vocab, monkeypatch):
    """The judge notices a guide that accepts a string ``re`` refuses."""
    real = fz.regex_reference
    monkeypatch.setattr(fz, "regex_reference", lambda compiled, data: not real(compiled, data))
    out = fz.check_regex("ab?", 0, vocab, random.Random(0))
    assert "re.fullmatch says" in out.unexpected


@pytest.mark.parametrize("name", guided.Grammar.names())
def test_grammar_reference_reads_what_lark_reads(name):
    """The grammar reference (every tokenization) accepts whatever lark's Earley parser
    accepts, and its own derivations."""
    text = guided.Grammar.from_name(name).lark_text
    ref = fz.GrammarReference(text)
    earley = gs.earley_parser(text)
    rng = random.Random(name)
    for i in range(16):
        s = gs.sample(text, rng, max_depth=3)
        if i % 2:
            s = gs.mutate(s, rng)
        if len(s) <= 40 and gs.lark_accepts(earley, s):
            assert ref.accepts(s), s
    for _ in range(5):
        got = ref.sample(rng)
        if got is not None and len(got[0]) <= 40:
            assert ref.accepts(got[0]), got


def test_grammar_reference_takes_ignored_text_around_and_between():
    ref = fz.GrammarReference('start: "in" NAME\nNAME: /[a-z]+/\n%import common.WS\n%ignore WS\n')
    assert ref.accepts("in x") and ref.accepts("  in\n x \t") and ref.accepts("inx")
    assert not ref.accepts("in") and not ref.accepts("x in")
    with pytest.raises(lark.exceptions.LarkError):
        fz.GrammarReference("start: (")


def test_json_judge_reads_repeated_keys_both_ways():
    ref = fz.JsonReference({"properties": {"a": {"type": "integer"}}})
    readings, exact = ref.parse(b'{"a":1,"a":"x"}')
    assert len(readings) == 2 and exact and ref.verdict(readings) is False
    readings, exact = ref.parse(b"0.1000000000000000000001")
    assert not exact


# -- regressions of what the fuzzer found ----------------------------------------------


@pytest.mark.parametrize("value", [10**20 + 1, 2**53 + 1, -(10**30) - 7, 10**400])
def test_an_integer_in_an_enum_is_not_spelled_as_a_float_of_another_value(value):
    """A float spelling of an enum's integer only where the float is that number:
    ``1e+20`` is not ``10**20 + 1``; ``10**400`` has no float."""
    from guided.grammars.json_schema.compiler import compile_json_schema

    dfa = compile_json_schema({"enum": [value]}, "compact")
    assert dfa.matches(str(value).encode())
    if abs(value) < 2**1023:
        f = float(value)
        for text in {repr(f), repr(f).replace("e+", "e"), f"{f:.1f}", str(int(f))}:
            assert not dfa.matches(text.encode()), text


def test_a_max_length_past_any_string_compiles_as_a_bound_nothing_reaches():
    from guided.grammars.json_schema.compiler import compile_json_schema

    dfa = compile_json_schema({"type": "string", "minLength": 1, "maxLength": 1e300}, "compact")
    assert dfa.matches(b'"ab"') and not dfa.matches(b'""')
    with pytest.raises(guided.UnsupportedSchemaError, match="minLength"):
        compile_json_schema({"type": "string", "minLength": 10**20}, "compact")


def test_const_beside_an_enum_takes_only_a_value_both_allow():
    from guided.grammars.json_schema.compiler import compile_json_schema

    dfa = compile_json_schema({"type": "object", "properties": {"a": {"const": True, "enum": [1, "x"]},
                                                                "b": {"const": 1, "enum": [1.0, 2]}}}, "compact")
    assert not dfa.matches(b'{"a":true}') and dfa.matches(b"{}")
    assert dfa.matches(b'{"b":1}') and dfa.matches(b'{"b":1.0}') and not dfa.matches(b'{"b":2}')
