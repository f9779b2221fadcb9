"""Regexes for JSON numbers and integers within bounds, and integer multiples.

All regexes are in the Python ``re`` syntax that :func:`guided.fsm.compile_regex` accepts
(``re.fullmatch`` semantics; only ASCII digit classes), and describe JSON number
*text*:

* JSON number: ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?``
* JSON integer: ``-?(0|[1-9][0-9]*)``

Conventions (the same in every function here):

* **No negative zero.** ``-0`` (and ``-0.0``, ``-0.000``) is never produced when a
  bound or a divisor is given; zero is written ``0`` (or ``0.0``...). Without any
  bound, :func:`number_range_regex` returns the whole JSON number grammar.
* **Bounds are inclusive for** :func:`integer_range_regex` and exact (Python ints of
  any size).
* :func:`number_range_regex` is **sound under float parsing**: every accepted text
  ``t`` satisfies the bounds both as ``json.loads(t)`` (int for integer texts, float
  for fraction texts) and as ``float(t)``. With a bound it accepts exponent forms
  only when that bound is ``minimum=0`` or ``maximum=0`` alone (a sign: every
  non-negative, or non-positive, exponent text satisfies it however it parses,
  ``1e-400`` and ``1e400`` included). It accepts:

  - every integer text ``n`` with ``L <= n <= U``, and
  - every fraction text (``int.frac``) whose exact decimal value lies between
    ``repr(L)`` and ``repr(U)``,

  where ``L`` is the smallest float that satisfies the lower bounds (``minimum``:
  ``>= minimum``; ``exclusiveMinimum``: ``> exclusiveMinimum``) and ``U`` the largest
  one that satisfies the upper bounds. So ``minimum=0.5`` accepts ``0.5``,
  ``0.50``, ``0.5000001``, ``1``; ``exclusiveMinimum=0`` accepts ``0.0001`` and ``1``
  but not ``0``, ``0.0`` or ``-0.0``; ``exclusiveMaximum=99.99`` accepts
  ``99.98999999999999`` but not ``99.99``. The only in-range texts it rejects are
  those with ~17 significant digits that fall strictly between a bound and its
  neighbouring float (their float value may round onto the bound).
"""

from __future__ import annotations

import functools
import math
from decimal import Decimal
from fractions import Fraction

__all__ = [
    "JSON_NUMBER",
    "JSON_INTEGER",
    "integer_range_regex",
    "number_range_regex",
    "integer_multiple_of_regex",
]

JSON_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
JSON_INTEGER = r"-?(?:0|[1-9][0-9]*)"


@functools.lru_cache(maxsize=2)
def plain_number_dfa(rx: str):
    """The DFA of ``JSON_INTEGER`` or ``JSON_NUMBER``, built once per process rather
    than memoised: most schemas have an unbounded number, and the memo may be
    cleared between compiles."""
    from guided.fsm.regex import compile_regex

    if rx not in (JSON_INTEGER, JSON_NUMBER):
        raise ValueError(f"not a plain number pattern: {rx!r}")
    return compile_regex(rx)
# Exponent texts of one sign (``1e-06`` is how ``json.dumps`` writes 0.000001):
# what ``minimum=0`` / ``maximum=0`` alone allow on top of the plain decimals.
_NONNEGATIVE_EXP = r"(?:0|[1-9][0-9]*)(?:\.[0-9]+)?[eE][+-]?[0-9]+"
_NONPOSITIVE_EXP = r"-(?:0|[1-9][0-9]*)(?:\.[0-9]+)?[eE][+-]?[0-9]+|0(?:\.0+)?[eE][+-]?[0-9]+"

MAX_MULTIPLE_OF_REGEX = 20_000  # characters; above this integer_multiple_of_regex gives None
MAX_MOD_K = 50  # largest divisor (not a divisor of a power of ten) tried by state elimination


# ------------------------------------------------------------------ small helpers


def _alt(parts: list[str]) -> str:
    parts = [p for p in parts if p is not None]
    if not parts:
        raise ValueError("empty alternation")
    if len(parts) == 1:
        return parts[0]
    return "(?:" + "|".join(parts) + ")"


def _cls(a: int, b: int) -> str:
    """Digit class for a..b (0 <= a <= b <= 9)."""
    if a == b:
        return str(a)
    if a == 0 and b == 9:
        return "[0-9]"
    return f"[{a}-{b}]"


def _any_digits(n: int) -> str:
    if n == 0:
        return ""
    if n == 1:
        return "[0-9]"
    return f"[0-9]{{{n}}}"


def _lit(s: str) -> str:
    """A digit string as a literal, with long runs written ``d{k}``."""
    out = []
    i = 0
    while i < len(s):
        j = i
        while j < len(s) and s[j] == s[i]:
            j += 1
        k = j - i
        out.append(f"{s[i]}{{{k}}}" if k > 3 else s[i] * k)
        i = j
    return "".join(out)


def _rep(d: str, lo: int, hi: int) -> str:
    """``d`` repeated lo..hi times."""
    if hi == 0:
        return ""
    if lo == hi:
        return _lit(d * lo)
    if lo == 0 and hi == 1:
        return f"{d}?"
    return f"{d}{{{lo},{hi}}}"


# ------------------------------------------------------------ integer digit ranges


def _ge_fixed(s: str) -> str:
    """Digit strings of length len(s) that are >= s (leading zeros allowed)."""
    if s.strip("0") == "":
        return _any_digits(len(s))
    if s.strip("9") == "":
        return _lit(s)
    d = int(s[0])
    parts = []
    if d < 9:
        parts.append(_cls(d + 1, 9) + _any_digits(len(s) - 1))
    parts.append(s[0] + _ge_fixed(s[1:]))
    return _alt(parts)


def _le_fixed(s: str) -> str:
    """Digit strings of length len(s) that are <= s (leading zeros allowed)."""
    if s.strip("9") == "":
        return _any_digits(len(s))
    if s.strip("0") == "":
        return _lit(s)
    d = int(s[0])
    parts = []
    if d > 0:
        parts.append(_cls(0, d - 1) + _any_digits(len(s) - 1))
    parts.append(s[0] + _le_fixed(s[1:]))
    return _alt(parts)


def _between_fixed(lo: str, hi: str) -> str:
    """Digit strings t with len(t) == len(lo) == len(hi) and lo <= t <= hi."""
    i = 0
    while i < len(lo) and lo[i] == hi[i]:
        i += 1
    prefix = _lit(lo[:i])
    lo, hi = lo[i:], hi[i:]
    if not lo:
        return prefix
    n = len(lo) - 1
    a, b = int(lo[0]), int(hi[0])
    lo_all = lo[1:].strip("0") == ""
    hi_all = hi[1:].strip("9") == ""
    parts = []
    if not lo_all:
        parts.append(lo[0] + _ge_fixed(lo[1:]))
    first, last = (a if lo_all else a + 1), (b if hi_all else b - 1)
    if first <= last:
        parts.append(_cls(first, last) + _any_digits(n))
    if not hi_all:
        parts.append(hi[0] + _le_fixed(hi[1:]))
    return prefix + _alt(parts)


def _nonneg_int_range(lo: int, hi: int | None) -> str | None:
    """Texts of the integers lo..hi (lo >= 0; hi None = unbounded), no leading zeros."""
    if hi is not None and hi < lo:
        return None
    n_lo = len(str(lo))
    parts = []
    top = 10**n_lo - 1
    if hi is None or hi >= top:
        parts.append(_between_fixed(str(lo), str(top)))
        if hi is None:
            parts.append(f"[1-9][0-9]{{{n_lo},}}")
        else:
            n_hi = len(str(hi))
            if n_hi - 1 > n_lo:  # full lengths n_lo+1 .. n_hi-1
                a, b = n_lo, n_hi - 2
                parts.append("[1-9]" + (f"[0-9]{{{a}}}" if a == b else f"[0-9]{{{a},{b}}}"))
            if n_hi > n_lo:
                parts.append(_between_fixed(str(10 ** (n_hi - 1)), str(hi)))
    else:
        parts.append(_between_fixed(str(lo), str(hi)))
    return _alt(parts)


def _int_range(lo: int | None, hi: int | None) -> str | None:
    """Texts of the integers lo..hi (None = unbounded), without ``-0``; None if empty."""
    if lo is not None and hi is not None and lo > hi:
        return None
    parts = []
    if hi is None or hi >= 0:
        parts.append(_nonneg_int_range(max(lo, 0) if lo is not None else 0, hi))
    if lo is None or lo < 0:
        mag_lo = max(1, -hi) if hi is not None else 1
        neg = _nonneg_int_range(mag_lo, -lo if lo is not None else None)
        if neg is not None:
            parts.append("-" + neg)
    parts = [p for p in parts if p is not None]
    return _alt(parts) if parts else None


def _check_int_bound(name: str, v) -> None:
    if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
        raise TypeError(f"{name} must be an int or None, not {type(v).__name__}")


def integer_range_regex(minimum: int | None = None, maximum: int | None = None) -> str:
    """JSON integer texts whose value v satisfies ``minimum <= v <= maximum``.

    Exact for any Python ints (huge and negative bounds included); ``None`` is
    unbounded. No leading zeros and no ``-0``.

    Raises:
        ValueError: the range is empty.
        TypeError: a bound is not an int (or None).

    Example::

        >>> import re
        >>> p = integer_range_regex(-5, 120)
        >>> [bool(re.fullmatch(p, s)) for s in ("-5", "-6", "0", "-0", "120", "121", "007")]
        [True, False, True, False, True, False, False]
    """
    _check_int_bound("minimum", minimum)
    _check_int_bound("maximum", maximum)
    r = _int_range(minimum, maximum)
    if r is None:
        raise ValueError(f"empty integer range [{minimum}, {maximum}]")
    return r


# ------------------------------------------------------------- decimal fractions
# Fraction digit strings f (non-empty, the digits after the point) compared by the
# value 0.f. Thresholds r are digit strings without trailing zeros ('' = 0).


def _run(r: str) -> tuple[str, int, str]:
    k = 1
    while k < len(r) and r[k] == r[0]:
        k += 1
    return r[0], k, r[k:]


def _frac_ge(r: str) -> str:
    """Non-empty f with 0.f >= 0.r (r without trailing zeros)."""
    if r == "":
        return "[0-9]+"
    d, k, rest = _run(r)
    parts = []
    if d != "9":
        parts.append(_rep(d, 0, k - 1) + _cls(int(d) + 1, 9) + "[0-9]*")
    parts.append(_lit(d * k) + ("[0-9]*" if rest == "" else _frac_ge(rest)))
    return _alt(parts)


def _frac_le(r: str) -> str:
    """Non-empty f with 0.f <= 0.r (r without trailing zeros)."""
    if r == "":
        return "0+"
    d, k, rest = _run(r)
    parts = []
    if d != "0":
        parts.append(_rep(d, 0, k - 1) + _cls(0, int(d) - 1) + "[0-9]*")
    if k > 1:
        parts.append(_rep(d, 1, k - 1))
    parts.append(_lit(d * k) + ("0*" if rest == "" else f"(?:{_frac_le(rest)})?"))
    return _alt(parts)


def _frac_pos_le(r: str) -> str:
    """Non-empty f with 0 < 0.f <= 0.r (r non-empty, without trailing zeros)."""
    d, k, rest = _run(r)
    if d == "0":
        return _lit("0" * k) + _frac_pos_le(rest)
    parts = []
    if k > 1:
        parts.append(_rep(d, 1, k - 1) + _cls(0, int(d) - 1) + "[0-9]*")
        parts.append(_rep(d, 1, k - 1))
    if d != "1":
        parts.append(_cls(1, int(d) - 1) + "[0-9]*")
    parts.append("0[0-9]*[1-9][0-9]*")
    parts.append(_lit(d * k) + ("0*" if rest == "" else f"(?:{_frac_le(rest)})?"))
    return _alt(parts)


def _frac_between(r1: str, r2: str, positive: bool) -> str:
    """Non-empty f with 0.r1 <= 0.f <= 0.r2 (and 0.f > 0 if positive)."""
    if r1 == "":
        if positive:
            return _frac_pos_le(r2)
        return _frac_le(r2)
    i = 0
    while i < len(r1) and i < len(r2) and r1[i] == r2[i]:
        i += 1
    if i == len(r1):  # r1 is a prefix of r2 (or equal)
        rest2 = r2[i:]
        return _lit(r1) + ("0*" if rest2 == "" else f"(?:{_frac_le(rest2)})?")
    p = _lit(r1[:i])
    c1, c2 = int(r1[i]), int(r2[i])  # c1 < c2 since 0.r1 <= 0.r2
    t1, t2 = r1[i + 1 :], r2[i + 1 :]
    parts = [str(c1) + ("[0-9]*" if t1 == "" else _frac_ge(t1))]
    if c1 + 1 <= c2 - 1:
        parts.append(_cls(c1 + 1, c2 - 1) + "[0-9]*")
    parts.append(str(c2) + ("0*" if t2 == "" else f"(?:{_frac_le(t2)})?"))
    return p + _alt(parts)


def _split(d: Decimal) -> tuple[int, str]:
    """A non-negative Decimal as (integer part, fraction digits without trailing zeros)."""
    s = format(abs(d), "f")
    if "." in s:
        ip, fp = s.split(".")
    else:
        ip, fp = s, ""
    return int(ip), fp.rstrip("0")


def _nonneg_fraction_range(a: Decimal, b: Decimal | None, positive: bool = False) -> str | None:
    """Texts ``int.frac`` with value in [a, b] (a >= 0; b None = unbounded).

    With ``positive`` (only meaningful for a == 0) the value must be > 0.
    """
    if b is not None and b < a:
        return None
    ai, af = _split(a)
    pos0 = positive and ai == 0 and af == ""
    ge = "[0-9]*[1-9][0-9]*" if pos0 else _frac_ge(af)
    if b is None:
        parts = [f"{ai}\\.{ge}", f"{_nonneg_int_range(ai + 1, None)}\\.[0-9]+"]
        return _alt(parts)
    bi, bf = _split(b)
    if pos0 and b == 0:
        return None
    if ai == bi:
        return f"{ai}\\.{_frac_between(af, bf, pos0)}"
    parts = [f"{ai}\\.{ge}"]
    mid = _nonneg_int_range(ai + 1, bi - 1)
    if mid is not None:
        parts.append(f"{mid}\\.[0-9]+")
    parts.append(f"{bi}\\.{_frac_le(bf)}")
    return _alt(parts)


def _fraction_range(lo: Decimal | None, hi: Decimal | None) -> str | None:
    """Texts ``-?int.frac`` with value in [lo, hi] (None = unbounded), never ``-0.0``."""
    parts = []
    if hi is None or hi >= 0:
        parts.append(_nonneg_fraction_range(max(lo, Decimal(0)) if lo is not None else Decimal(0), hi))
    if lo is None or lo < 0:
        if hi is not None and hi < 0:
            neg = _nonneg_fraction_range(-hi, -lo if lo is not None else None)
        else:
            neg = _nonneg_fraction_range(Decimal(0), -lo if lo is not None else None, positive=True)
        if neg is not None:
            parts.append("-" + neg)
    parts = [p for p in parts if p is not None]
    return _alt(parts) if parts else None


# ---------------------------------------------------------------- number bounds


def _exact(name: str, v) -> Fraction:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{name} must be an int, a float or None, not {type(v).__name__}")
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"{name} must be finite, not {v}")
    return Fraction(v)


def _to_float(x: Fraction) -> float:
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


def _float_at_least(x: Fraction, strict: bool) -> float:
    """The smallest float f with f >= x (f > x if strict); may be +inf."""
    f = _to_float(x)
    if f == -math.inf:
        return -1.7976931348623157e308
    while f != math.inf and (Fraction(f) < x or (strict and Fraction(f) == x)):
        f = math.nextafter(f, math.inf)
    return f


def _float_at_most(x: Fraction, strict: bool) -> float:
    return -_float_at_least(-x, strict)


def _round_sig(n: int, up: bool, digits: int = 17) -> int:
    """n rounded to ``digits`` significant digits, up (toward +inf) or down.

    Integer thresholds taken from a float bound can have hundreds of digits (the
    exact value of 1e308); rounding them (toward the inside of the range, so the
    regex stays sound) keeps the regex small. Floats have <= 17 significant digits,
    so the integers lost lie within one float spacing of the bound.
    """
    size = len(str(abs(n)))
    if size <= digits:
        return n
    unit = 10 ** (size - digits)
    return -((-n) // unit) * unit if up else (n // unit) * unit


def number_range_regex(
    minimum: int | float | None = None,
    maximum: int | float | None = None,
    exclusive_minimum: int | float | None = None,
    exclusive_maximum: int | float | None = None,
) -> str:
    """JSON number texts within the given bounds (JSON Schema keyword semantics).

    Without any bound: the whole JSON number grammar (exponents and ``-0``
    included). With a bound: integer and ``int.frac`` texts, no negative zero, and
    exponent texts only under ``minimum=0`` or ``maximum=0`` alone; see the module
    docstring for exactly which texts.

    Raises:
        ValueError: no number text can satisfy the bounds, or a bound is not finite.
        TypeError: a bound is not an int or a float (or None).

    Example::

        >>> import re
        >>> p = number_range_regex(exclusive_minimum=0, maximum=1.5)
        >>> [bool(re.fullmatch(p, s)) for s in ("0", "0.0", "0.001", "1", "1.5", "1.50", "1.51", "1e0")]
        [False, False, True, True, True, True, False, False]
    """
    lows = []
    highs = []
    if minimum is not None:
        lows.append(_float_at_least(_exact("minimum", minimum), strict=False))
    if exclusive_minimum is not None:
        lows.append(_float_at_least(_exact("exclusive_minimum", exclusive_minimum), strict=True))
    if maximum is not None:
        highs.append(_float_at_most(_exact("maximum", maximum), strict=False))
    if exclusive_maximum is not None:
        highs.append(_float_at_most(_exact("exclusive_maximum", exclusive_maximum), strict=True))
    if not lows and not highs:
        return JSON_NUMBER
    sign_only = exclusive_minimum is None and exclusive_maximum is None and (minimum is None) != (maximum is None)
    exponent = None
    if sign_only and minimum == 0:
        exponent = _NONNEGATIVE_EXP
    elif sign_only and maximum == 0:
        exponent = _NONPOSITIVE_EXP
    lo = max(lows) if lows else None
    hi = min(highs) if highs else None

    # Integer texts: lo <= n <= hi (exact; an infinite float bound comes from an int
    # bound beyond the float range, where the exact int comparison is what counts).
    def int_lo() -> int | None:
        if lo is None:
            return None
        if lo == math.inf:
            b = [math.floor(Fraction(v)) + 1 for v in (exclusive_minimum,) if v is not None]
            b += [math.ceil(Fraction(v)) for v in (minimum,) if v is not None]
            return max(b)
        return _round_sig(math.ceil(Fraction(lo)), up=True)

    def int_hi() -> int | None:
        if hi is None:
            return None
        if hi == -math.inf:
            b = [math.ceil(Fraction(v)) - 1 for v in (exclusive_maximum,) if v is not None]
            b += [math.floor(Fraction(v)) for v in (maximum,) if v is not None]
            return min(b)
        return _round_sig(math.floor(Fraction(hi)), up=False)

    parts = [_int_range(int_lo(), int_hi())]
    # Fraction texts: repr(lo) <= value <= repr(hi) (float(text) then stays in bounds).
    if not (lo == math.inf or hi == -math.inf):
        dlo = Decimal(repr(lo)) if lo is not None else None
        dhi = Decimal(repr(hi)) if hi is not None else None
        if dlo is None or dhi is None or dlo <= dhi:
            parts.append(_fraction_range(dlo, dhi))
    parts = [p for p in parts + [exponent] if p is not None]
    if not parts:
        raise ValueError(
            "empty number range: minimum=%r maximum=%r exclusive_minimum=%r exclusive_maximum=%r"
            % (minimum, maximum, exclusive_minimum, exclusive_maximum)
        )
    return _alt(parts)


# -------------------------------------------------------------------- multipleOf


def _two_five(k: int) -> int | None:
    """The smallest m with k | 10**m, or None if k has a prime factor other than 2, 5."""
    m = 0
    while 10**m % k:
        m += 1
        if m > 60:
            return None
    return m


def _trie_regex(words: list[str]) -> str:
    """A compact regex for a finite set of strings (prefix-sharing)."""
    if "" in words and len(words) == 1:
        return ""
    groups: dict[str, list[str]] = {}
    empty = False
    for w in words:
        if w == "":
            empty = True
        else:
            groups.setdefault(w[0], []).append(w[1:])
    # merge first characters that share the same continuation
    by_tail: dict[str, list[str]] = {}
    for c in sorted(groups):
        by_tail.setdefault(_trie_regex(sorted(set(groups[c]))), []).append(c)
    parts = []
    for tail, chars in by_tail.items():
        head = chars[0] if len(chars) == 1 else "[" + "".join(chars) + "]"
        parts.append(head + tail)
    r = _alt(parts)
    if empty:
        r = f"{_group(r)}?"
    return r


def _suffix_multiples_nonneg(k: int, m: int, lo: int, hi: int | None) -> str | None:
    """Texts of multiples of k (k | 10**m) in [lo, hi], lo >= 0."""
    step = 10**m
    suffixes = [s for s in range(0, step, k)]
    if hi is not None and hi < lo:
        return None

    def tail(sfx: list[int]) -> str | None:
        return _trie_regex([str(s).zfill(m) for s in sfx]) if sfx else None

    def small(sfx: list[int]) -> str | None:  # q == 0: the numbers themselves
        return _trie_regex([str(s) for s in sfx]) if sfx else None

    q_lo = lo // step
    q_hi = None if hi is None else hi // step
    parts = []

    def emit(q_from: int, q_to: int | None, sfx: list[int]) -> None:
        if not sfx or (q_to is not None and q_to < q_from):
            return
        if q_from == 0:
            parts.append(small(sfx))
            q_from = 1
            if q_to is not None and q_to < 1:
                return
        qr = _nonneg_int_range(q_from, q_to)
        if qr is not None:
            parts.append(qr + tail(sfx))

    lo_rem = lo - q_lo * step
    if q_hi is not None and q_hi == q_lo:
        emit(q_lo, q_lo, [s for s in suffixes if lo_rem <= s <= hi - q_hi * step])
    else:
        emit(q_lo, q_lo, [s for s in suffixes if s >= lo_rem])
        emit(q_lo + 1, None if q_hi is None else q_hi - 1, suffixes)
        if q_hi is not None:
            emit(q_hi, q_hi, [s for s in suffixes if s <= hi - q_hi * step])
    parts = [p for p in parts if p is not None]
    return _alt(parts) if parts else None


def _mod_k_regex(k: int) -> str | None:
    """Regex for positive decimal integers (no leading zero) divisible by k, by
    state elimination on the mod-k automaton; None if it grows past the limit."""
    start, final = k, k + 1
    edges: dict[tuple[int, int], str] = {}

    def add(i: int, j: int, r: str) -> None:
        if (i, j) in edges:
            edges[(i, j)] = _union(edges[(i, j)], r)
        else:
            edges[(i, j)] = r

    for r in range(k):
        by_target: dict[int, list[int]] = {}
        for d in range(10):
            by_target.setdefault((10 * r + d) % k, []).append(d)
        for t, ds in by_target.items():
            add(r, t, _digit_set(ds))
    by_target = {}
    for d in range(1, 10):
        by_target.setdefault(d % k, []).append(d)
    for t, ds in by_target.items():
        add(start, t, _digit_set(ds))
    add(0, final, "")
    remaining = set(range(k))
    while remaining:
        def cost(q: int) -> int:
            ins = [i for (i, j) in edges if j == q and i != q]
            outs = [j for (i, j) in edges if i == q and j != q]
            return sum(len(edges[(i, q)]) for i in ins) * len(outs) + sum(
                len(edges[(q, j)]) for j in outs
            ) * len(ins)

        q = min(remaining, key=cost)
        remaining.discard(q)
        loop = edges.pop((q, q), None)
        star = f"{_group(loop)}*" if loop else ""
        ins = [(i, r) for (i, j), r in edges.items() if j == q]
        outs = [(j, r) for (i, j), r in edges.items() if i == q]
        for i, _ in ins:
            edges.pop((i, q))
        for j, _ in outs:
            edges.pop((q, j))
        for i, ri in ins:
            for j, rj in outs:
                add(i, j, _concat(ri, star, rj))
        if sum(len(r) for r in edges.values()) > MAX_MULTIPLE_OF_REGEX:
            return None
    return edges.get((start, final))


def _digit_set(ds: list[int]) -> str:
    if len(ds) == 1:
        return str(ds[0])
    if ds == list(range(ds[0], ds[-1] + 1)):
        return f"[{ds[0]}-{ds[-1]}]"
    return "[" + "".join(map(str, ds)) + "]"


def _is_atom(r: str) -> bool:
    if len(r) == 1:
        return True
    if r.startswith("[") and r.endswith("]") and r.count("[") == 1:
        return True
    if r.startswith("(?:") and r.endswith(")"):
        depth = 0
        for i, c in enumerate(r):
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0 and i != len(r) - 1:
                    return False
        return True
    return False


def _group(r: str) -> str:
    return r if _is_atom(r) else f"(?:{r})"


def _has_top_alt(r: str) -> bool:
    depth = 0
    in_class = False
    for c in r:
        if in_class:
            if c == "]":
                in_class = False
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            return True
    return False


def _concat(*rs: str) -> str:
    return "".join(f"(?:{r})" if _has_top_alt(r) else r for r in rs if r)


def _union(a: str, b: str) -> str:
    if a == b:
        return a
    if a == "":
        return f"{_group(b)}?"
    if b == "":
        return f"{_group(a)}?"
    return f"{a}|{b}"


def integer_multiple_of_regex(
    k: int, minimum: int | None = None, maximum: int | None = None
) -> str | None:
    """JSON integer texts divisible by ``k`` (and within inclusive bounds), or None.

    Exact when a regex is returned (no ``-0``). Divisors of a power of ten with at
    most 1000 residues to list (1, 2, 4, 5, 8, 10, 16, 20, 25, 50, 100, 125, 1000,
    ...) work with any bounds: divisibility is a condition on the last digits.
    Other divisors: with both bounds, the multiples are listed when there are at
    most 256 of them; without bounds, a regex is derived from the mod-k automaton
    by state elimination for k <= ``MAX_MOD_K`` and kept if it stays within
    ``MAX_MULTIPLE_OF_REGEX`` characters (k = 3 and 6 fit; 7, 9, 11, 13... do not).
    Otherwise ``None``: the caller falls back to plain integers and
    ``multiple_of.multiple_of_dfa``.

    Raises:
        ValueError: k <= 0, or no multiple lies in the bounds.
        TypeError: k or a bound is not an int.

    Example::

        >>> import re
        >>> p = integer_multiple_of_regex(5, minimum=-12, maximum=40)
        >>> [s for s in ("-15", "-10", "-0", "0", "3", "35", "40", "45") if re.fullmatch(p, s)]
        ['-10', '0', '35', '40']
    """
    _check_int_bound("minimum", minimum)
    _check_int_bound("maximum", maximum)
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k must be an int, not {type(k).__name__}")
    if k <= 0:
        raise ValueError(f"multipleOf must be positive, not {k}")
    if k == 1:
        return integer_range_regex(minimum, maximum)
    if minimum is not None and maximum is not None:
        first = -((-minimum) // k) * k
        if first > maximum:
            raise ValueError(f"no multiple of {k} in [{minimum}, {maximum}]")
    m = _two_five(k)
    if m is not None and 10**m // k <= 1000:
        parts = []
        if maximum is None or maximum >= 0:
            parts.append(_suffix_multiples_nonneg(k, m, max(minimum, 0) if minimum is not None else 0, maximum))
        if minimum is None or minimum < 0:
            neg_lo = max(1, -maximum) if maximum is not None else 1
            neg = _suffix_multiples_nonneg(k, m, neg_lo, -minimum if minimum is not None else None)
            if neg is not None:
                parts.append("-" + neg)
        parts = [p for p in parts if p is not None]
        if not parts:
            raise ValueError(f"no multiple of {k} in [{minimum}, {maximum}]")
        return _alt(parts)
    if minimum is not None and maximum is not None:
        first = -((-minimum) // k) * k
        count = (maximum - first) // k + 1
        if count <= 256:
            return _alt([_trie_regex(sorted(str(v) for v in range(first, maximum + 1, k)))])
        return None
    if minimum is not None or maximum is not None or k > MAX_MOD_K:
        return None
    body = _mod_k_regex(k)
    if body is None:
        return None
    r = f"0|-?{_group(body)}"
    return None if len(r) > MAX_MULTIPLE_OF_REGEX else f"(?:{r})"
