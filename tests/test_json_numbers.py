"""Tests for guided.grammars.json_schema.scalars.numbers: bounded JSON numbers and integer multiples."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from guided.fsm import compile_regex
from guided.grammars.json_schema.scalars.numbers import (
    JSON_INTEGER,
    JSON_NUMBER,
    integer_multiple_of_regex,
    integer_range_regex,
    number_range_regex,
)

HYP = settings(derandomize=True, deadline=None, max_examples=150)

small_ints = st.integers(-3000, 3000)
huge_ints = st.integers(-(10**30), 10**30)
int_bounds = st.one_of(st.none(), small_ints, huge_ints, st.sampled_from([0, -1, 1, 10**18, -(10**18), 2**63 - 1]))


def _in(v, lo, hi) -> bool:
    return (lo is None or v >= lo) and (hi is None or v <= hi)


# ------------------------------------------------------------------ integers


@HYP
@given(int_bounds, int_bounds, st.lists(st.one_of(small_ints, huge_ints), max_size=30), st.data())
def test_integer_range_exact(lo, hi, values, data):
    assume(lo is None or hi is None or lo <= hi)
    rx = re.compile(integer_range_regex(lo, hi))
    near = [b + d for b in (lo, hi) if b is not None for d in (-2, -1, 0, 1, 2)]
    for v in values + near + [0]:
        assert bool(rx.fullmatch(str(v))) == _in(v, lo, hi), (lo, hi, v)
    for bad in ("-0", "00", "01", "-01", "+1", "1.0", "1e3", ""):
        assert not rx.fullmatch(bad)


@HYP
@given(st.integers(-200, 200), st.integers(0, 400))
def test_integer_range_small_exhaustive(lo, width):
    hi = lo + width
    rx = re.compile(integer_range_regex(lo, hi))
    for v in range(lo - 30, hi + 31):
        assert bool(rx.fullmatch(str(v))) == (lo <= v <= hi)


def test_integer_range_engine_agrees_and_is_small():
    for lo, hi in [(0, 10**18), (-(10**18), 10**18), (-5, 120), (None, -7), (13, None), (2**31, 2**63 - 1)]:
        p = integer_range_regex(lo, hi)
        dfa = compile_regex(p)
        assert dfa.num_states < 200
        for v in [0, 1, -1, 7, -7, 13, 120, 121, 10**18, 10**18 + 1, -(10**18) - 1, 2**31, 2**63]:
            assert dfa.matches(str(v).encode()) == _in(v, lo, hi), (lo, hi, v)
        assert not dfa.matches(b"-0")


def test_integer_range_errors_and_unbounded():
    with pytest.raises(ValueError):
        integer_range_regex(5, 4)
    with pytest.raises(TypeError):
        integer_range_regex(0.5, 4)
    rx = re.compile(integer_range_regex())
    assert rx.fullmatch("0") and rx.fullmatch("-12") and rx.fullmatch("123")
    assert not rx.fullmatch("-0") and not rx.fullmatch("012")
    assert re.fullmatch(JSON_INTEGER, "-0")


# ------------------------------------------------------------------- numbers

num_bounds = st.one_of(
    st.none(),
    small_ints,
    st.floats(-1000, 1000, allow_nan=False, allow_infinity=False),
    st.floats(-1, 1, allow_nan=False).map(lambda x: round(x, 3)),
    st.sampled_from([0, 0.0, -0.0, 0.1, 0.5, 99.99, 1e-5, 5e-324, 1e20, 10**20, 2**53 + 1, 3.6893488147419103e19]),
)


def _decimal_text(draw, bounds) -> str:
    kind = draw(st.integers(0, 4))
    finite = [b for b in bounds if b is not None]
    if kind == 0 and finite:
        b = Decimal(repr(float(draw(st.sampled_from(finite)))))
        delta = Decimal(draw(st.integers(-3, 3))) * Decimal(10) ** draw(st.integers(-25, 2))
        return format(b + delta, "f")
    if kind == 1:
        return str(draw(small_ints))
    if kind == 2:
        return "%.*f" % (draw(st.integers(1, 9)), draw(st.floats(-2000, 2000)))
    if kind == 3:
        digits = draw(st.integers(-(10**30), 10**30))
        return format(Decimal(digits) / Decimal(10) ** draw(st.integers(0, 40)), "f")
    return draw(st.sampled_from(["0", "-0", "0.0", "-0.0", "0.000", "-0.001", "0.001", "1e2", "-1E-3", "1.5e1", "0e0", "1E+400"]))


def _satisfies(v, b) -> bool:
    mn, mx, emn, emx = b
    return (
        (mn is None or v >= mn)
        and (mx is None or v <= mx)
        and (emn is None or v > emn)
        and (emx is None or v < emx)
    )


def _near_a_bound(x: Fraction, bounds) -> bool:
    return any(
        b is not None and abs(x - Fraction(b)) <= abs(Fraction(b)) * Fraction(1, 10**15) + Fraction(1, 10**300)
        for b in bounds
    )


@HYP
@given(st.tuples(num_bounds, num_bounds, num_bounds, num_bounds), st.data())
def test_number_range(bounds, data):
    try:
        p = number_range_regex(*bounds)
    except ValueError:
        return
    rx = re.compile(p)
    for _ in range(25):
        s = _decimal_text(data.draw, bounds)
        accepted = bool(rx.fullmatch(s))
        in_json, in_float = _satisfies(json.loads(s), bounds), _satisfies(float(s), bounds)
        if accepted:
            # sound under both parses; exponents only without bounds or under a lone
            # inclusive zero bound (a sign)
            assert in_json and in_float, (bounds, s)
            sign = bounds[2:] == (None, None) and sorted(bounds[:2], key=lambda b: b is None) in ([0, None], [0.0, None])
            assert all(b is None for b in bounds) or sign or "e" not in s.lower()
        elif all(b is None for b in bounds):
            pytest.fail(f"unbounded regex rejected {s}")
        else:
            x = Fraction(Decimal(s))
            exact_in = _satisfies(x, tuple(None if b is None else Fraction(b) for b in bounds))
            negative_zero = s.startswith("-") and x == 0
            if "e" not in s.lower() and not negative_zero and exact_in and in_json and in_float:
                assert _near_a_bound(x, bounds), (bounds, s)  # only ~17-digit texts at a bound


@pytest.mark.parametrize(
    "kwargs, accept, reject",
    [
        (dict(exclusive_minimum=0), ["0.0001", "1", "0.5", "123.456"], ["0", "0.0", "-0.0", "-0", "-0.1", "1e-3"]),
        (dict(minimum=0), ["0", "0.0", "0.000", "7", "3.25", "1e-06", "2.5E+3", "0e0", "1e-400", "1e400"],
         ["-0", "-0.0", "-1", "-0.001", "-1e-06", "1e", "1.e3"]),
        (dict(maximum=0), ["0", "-7", "-1e-06", "-2.5E+3", "0e0", "0.00e5", "-1e400"], ["1", "1e-06", "0.1e1", "1e-400"]),
        (dict(minimum=0, maximum=5), ["0", "4.5"], ["1e0", "1e-06"]),  # two bounds: no exponents
        (dict(exclusive_minimum=0, exclusive_maximum=None), ["1"], ["1e-06"]),  # 1e-400 would parse to 0
        (dict(minimum=0.5, exclusive_maximum=99.99), ["0.5", "0.50", "1", "99.98", "99.989999"], ["0.49", "99.99", "99.990", "100", "0"]),
        (dict(minimum=-3.5, maximum=-1), ["-3.5", "-3", "-1", "-1.0", "-2.25"], ["-3.51", "-0.5", "0", "-4", "1"]),
        (dict(maximum=10), ["10", "10.0", "9.999", "-1000000", "-0.5"], ["10.01", "11", "100"]),
        (dict(minimum=1.5, maximum=1.5), ["1.5", "1.50", "1.500"], ["1.51", "1.49", "2", "1"]),
        (dict(exclusive_minimum=1, exclusive_maximum=2), ["1.5", "1.0001", "1.9999"], ["1", "2", "1.0", "2.0"]),
        (dict(minimum=10**20), ["100000000000000000000", "100000000000000000000.5"], ["99999999999999999999", "1e21"]),
    ],
)
def test_number_range_examples(kwargs, accept, reject):
    p = number_range_regex(**kwargs)
    dfa = compile_regex(p)
    assert dfa.num_states < 400
    for s in accept:
        assert dfa.matches(s.encode()), (kwargs, s)
    for s in reject:
        assert not dfa.matches(s.encode()), (kwargs, s)


def test_number_range_unbounded_and_errors():
    assert number_range_regex() == JSON_NUMBER
    for kw in [
        dict(minimum=2, maximum=1),
        dict(exclusive_minimum=1, exclusive_maximum=1),
        dict(minimum=1, exclusive_maximum=1),
        dict(exclusive_minimum=1.0, maximum=1.0),
    ]:
        with pytest.raises(ValueError):
            number_range_regex(**kw)
    with pytest.raises(ValueError):
        number_range_regex(minimum=float("nan"))
    with pytest.raises(TypeError):
        number_range_regex(minimum="1")


def test_number_range_extreme_bounds_compile():
    for kw in [dict(exclusive_minimum=0), dict(maximum=1.7976931348623157e308), dict(minimum=5e-324, maximum=1e-300)]:
        dfa = compile_regex(number_range_regex(**kw))
        assert dfa.num_states < 1000
    dfa = compile_regex(number_range_regex(exclusive_minimum=0))
    assert dfa.matches(b"0." + b"0" * 300 + b"1")
    assert not dfa.matches(b"0." + b"0" * 330 + b"1")  # parses to 0.0, not > 0


# ---------------------------------------------------------------- multipleOf


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6, 8, 10, 16, 20, 25, 50, 100, 125, 1000])
def test_multiple_of_unbounded(k):
    p = integer_multiple_of_regex(k)
    assert p is not None and len(p) <= 20_000
    rx = re.compile(p)
    for v in range(-2500, 2500):
        assert bool(rx.fullmatch(str(v))) == (v % k == 0), (k, v)
    assert not rx.fullmatch("-0") and not rx.fullmatch("00")
    assert compile_regex(p).num_states <= k + 10


@pytest.mark.parametrize("k", [7, 9, 11, 13, 77, 1024])
def test_multiple_of_unbounded_too_big_is_none(k):
    assert integer_multiple_of_regex(k) is None


@HYP
@given(
    st.sampled_from([2, 3, 4, 5, 7, 10, 11, 16, 25, 100]),
    st.one_of(st.none(), st.integers(-3000, 3000)),
    st.one_of(st.none(), st.integers(-3000, 3000)),
)
def test_multiple_of_bounded(k, lo, hi):
    assume(lo is None or hi is None or lo <= hi)
    expected = [v for v in range(-3100, 3100) if v % k == 0 and _in(v, lo, hi)]
    try:
        p = integer_multiple_of_regex(k, lo, hi)
    except ValueError:
        assert lo is not None and hi is not None and not any(lo <= v <= hi for v in range(lo, hi + 1) if v % k == 0)
        return
    if p is None:
        assert k not in (2, 4, 5, 10, 16, 25, 100)
        return
    rx = re.compile(p)
    got = [v for v in range(-3100, 3100) if rx.fullmatch(str(v))]
    assert got == expected
    assert not rx.fullmatch("-0")


def test_multiple_of_huge_bounds():
    p = integer_multiple_of_regex(2, -(10**18), 10**18)
    dfa = compile_regex(p)
    assert dfa.num_states < 200
    for v in [10**18, 10**18 - 2, -(10**18), 10**18 + 2, 10**18 - 1, 0, 4, -6]:
        assert dfa.matches(str(v).encode()) == (v % 2 == 0 and abs(v) <= 10**18), v
    with pytest.raises(ValueError):
        integer_multiple_of_regex(0)
    with pytest.raises(ValueError):
        integer_multiple_of_regex(10, 1, 9)
