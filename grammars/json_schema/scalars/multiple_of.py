"""``multipleOf`` as an automaton: JSON number texts that are exact multiples of a
decimal step, any step (``0.01``, ``2.5``, ``7``, ``13.5``).

::

    step = p/q (lowest terms), 10**k the smallest power of ten that q divides
    text "-"? I "." F      value = M / 10**k, M = the digits of I then F padded to k
    multiple  <=>  M = 0 (mod m),   m = step * 10**k   (an integer)

    start ─"-"─> neg ─┬─"0"──> zero ─"."─┐
      └───────────────┴─1-9──> int(r) ─"."─> frac(r, j) ──> … ──> frac(r, k) ─"0"─> tail(r)
                               r = M mod m so far; j fraction digits read (at most k
                               count, later ones must be 0); accepting where the
                               digits still to pad make M = 0 (mod m)

Exact decimal arithmetic, as the JSON Schema specification reads ``multipleOf``
("division results in an integer"), on the number as written: ``19.99`` is a
multiple of ``0.01``. (``jsonschema`` divides Python floats and calls it one only
when the float quotient is integral, so it rejects ``19.99`` and ``0.07``.)
Exponent forms are not produced (``1e2`` is left out, ``100`` is accepted): the
constrained text is always a plain decimal.

Cost: ``m * (k + 3)`` states before minimisation, ``MAX_STATES`` at most.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import numpy as np

from guided.fsm.dfa import DFA, minimize

#: Largest automaton (before minimisation) built for one step.
MAX_STATES = 40_000

_OTHER, _MINUS, _DOT = 0, 1, 2  # byte classes; digit d is class 3 + d


def exact_step(step) -> Fraction:
    """The step as written in the schema: ``0.1`` is 1/10, not the float nearest it.

    Raises:
        TypeError: ``step`` is not a number.
        ValueError: ``step`` is not positive.

    Example::

        >>> exact_step(0.1), exact_step(3)
        (Fraction(1, 10), Fraction(3, 1))
    """
    if isinstance(step, bool) or not isinstance(step, (int, float)):
        raise TypeError(f"multipleOf must be a number, not {type(step).__name__}")
    value = Fraction(step) if isinstance(step, int) else Fraction(Decimal(repr(step)))
    if value <= 0:
        raise ValueError(f"multipleOf must be positive, not {step!r}")
    return value


def multiple_of_dfa(step) -> DFA | None:
    """Minimal DFA of the plain decimal JSON numbers (``-?(0|[1-9][0-9]*)(\\.[0-9]+)?``)
    whose value is an exact multiple of ``step``; None when it would need more than
    ``MAX_STATES`` states.

    Raises:
        TypeError, ValueError: as ``exact_step``.

    Example::

        >>> d = multiple_of_dfa(0.25)
        >>> [t for t in ("1", "1.5", "1.75", "1.750", "-2.25", "1.3", "0.125") if d.matches(t.encode())]
        ['1', '1.5', '1.75', '1.750', '-2.25']
    """
    value = exact_step(step)
    k = 0
    while (10**k) % value.denominator:
        k += 1
    m = int(value * 10**k)
    if m * (k + 3) + 3 > MAX_STATES:
        return None
    start, neg, zero = 0, 1, 2

    def integer(r):
        return 3 + r

    def fraction(r, j):
        return 3 + m + j * m + r

    def tail(r):
        return 3 + m + (k + 1) * m + r

    n = 3 + m * (k + 3)
    trans = np.full((n, 13), -1, dtype=np.int32)
    accepting = np.zeros(n, dtype=bool)
    r = np.arange(m)
    digits = np.arange(10)
    for s in (start, neg):
        trans[s, 3] = zero
        trans[s, 4:] = integer(np.arange(1, 10) % m)
    trans[start, _MINUS] = neg
    trans[zero, _DOT] = fraction(0, 0)
    accepting[zero] = True
    # int(r): another digit, or the point.
    trans[integer(r)[:, None], 3 + digits[None, :]] = integer((10 * r[:, None] + digits[None, :]) % m)
    trans[integer(r), _DOT] = fraction(r, 0)
    # Powers of ten reduced mod m first: r * 10**k overflows int64 for k >= 19 (small steps).
    accepting[integer(r)] = (r * (10**k % m)) % m == 0
    # frac(r, j): digits that count, then only zeros.
    for j in range(k):
        trans[fraction(r, j)[:, None], 3 + digits[None, :]] = fraction((10 * r[:, None] + digits[None, :]) % m, j + 1)
    for j in range(1, k + 1):
        accepting[fraction(r, j)] = (r * (10 ** (k - j) % m)) % m == 0
    trans[fraction(r, k), 3] = tail(r)
    trans[tail(r), 3] = tail(r)
    accepting[tail(r)] = r == 0
    byte_to_class = np.zeros(256, dtype=np.int32)
    byte_to_class[ord("-")] = _MINUS
    byte_to_class[ord(".")] = _DOT
    byte_to_class[ord("0"):ord("9") + 1] = 3 + digits
    return minimize(trans, byte_to_class, accepting)
