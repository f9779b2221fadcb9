"""Unicode code point sets and their UTF-8 encodings as byte-range sequences.

A character class such as ``[a-zé-ü]``, ``\\w`` or ``.`` is a set of code points. The
automata in this package read bytes, so each set is turned into a short list of
byte-range sequences, e.g. ``[é-ü]`` (U+00E9..U+00FC) becomes ``[C3][A9-BC]``.

Sets are kept as sorted lists of disjoint inclusive ``(lo, hi)`` ranges. Surrogates
(U+D800..U+DFFF) are never members: they have no UTF-8 encoding.
"""

from __future__ import annotations

import functools
import re

MAX_CODE_POINT = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)

Ranges = list[tuple[int, int]]

#: The well-formed UTF-8 sequences of one non-ASCII character, as byte ranges
#: (Unicode's table 3-7: no overlong forms, no surrogates).
UTF8_SEQUENCES = (
    ((0xC2, 0xDF), (0x80, 0xBF)),
    ((0xE0, 0xE0), (0xA0, 0xBF), (0x80, 0xBF)),
    ((0xE1, 0xEC), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xED, 0xED), (0x80, 0x9F), (0x80, 0xBF)),
    ((0xEE, 0xEF), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xF0, 0xF0), (0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xF1, 0xF3), (0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xF4, 0xF4), (0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)),
)


def normalize(ranges) -> Ranges:
    """Sort, merge, and drop surrogates."""
    out: Ranges = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return _without_surrogates(out)


def _without_surrogates(ranges: Ranges) -> Ranges:
    return _cut(ranges, [SURROGATES])


def _cut(ranges, remove) -> Ranges:
    """``ranges`` minus the code points in ``remove`` (both lists of ranges)."""
    out: Ranges = []
    for lo, hi in ranges:
        pieces = [(lo, hi)]
        for rlo, rhi in remove:
            nxt = []
            for a, b in pieces:
                if rhi < a or rlo > b:
                    nxt.append((a, b))
                    continue
                if a < rlo:
                    nxt.append((a, rlo - 1))
                if b > rhi:
                    nxt.append((rhi + 1, b))
            pieces = nxt
        out.extend(pieces)
    return out


def subtract(ranges, remove) -> Ranges:
    """The code points of ``ranges`` not in ``remove``, normalised."""
    return _cut(normalize(list(ranges)), list(remove))


def complement(ranges: Ranges) -> Ranges:
    """All scalar values not in ``ranges``."""
    out: Ranges = []
    nxt = 0
    for lo, hi in normalize(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODE_POINT:
        out.append((nxt, MAX_CODE_POINT))
    return _without_surrogates(out)


@functools.lru_cache(maxsize=None)
def _all_scalars() -> str:
    return "".join(map(chr, range(SURROGATES[0]))) + "".join(
        map(chr, range(SURROGATES[1] + 1, MAX_CODE_POINT + 1))
    )


@functools.lru_cache(maxsize=None)
def ranges_matching(pattern: str, flags: int = 0) -> tuple[tuple[int, int], ...]:
    """The code points that Python's ``re`` matches with a one-character ``pattern``.

    Used for ``\\d``, ``\\w``, ``\\s`` and friends so that their meaning is exactly
    Python's (Unicode or ASCII mode), not an approximation of it.
    """
    text = _all_scalars()
    out = []
    for m in re.finditer(f"(?:{pattern})+", text, flags):
        lo, hi = ord(text[m.start()]), ord(text[m.end() - 1])
        out.append((lo, hi))
    # The scan string skips the surrogate gap, so one match may straddle it.
    return tuple(normalize(out))


def utf8_sequences(ranges: Ranges) -> list[list[tuple[int, int]]]:
    """Byte-range sequences whose union encodes exactly the code points in ``ranges``."""
    seqs: list[list[tuple[int, int]]] = []
    for lo, hi in normalize(ranges):
        for a, b in ((0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, MAX_CODE_POINT)):
            l, h = max(lo, a), min(hi, b)
            if l <= h:
                _split_same_length(l, h, seqs)
    return seqs


def _split_same_length(lo: int, hi: int, out: list) -> None:
    # Split until every continuation byte position spans a full or aligned range, so
    # the range is a cross product of byte ranges.
    n = len(chr(lo).encode("utf-8"))
    for i in range(1, n):
        m = (1 << (6 * i)) - 1
        if (lo & ~m) != (hi & ~m):
            if lo & m:
                _split_same_length(lo, lo | m, out)
                _split_same_length((lo | m) + 1, hi, out)
                return
            if (hi & m) != m:
                _split_same_length(lo, (hi & ~m) - 1, out)
                _split_same_length(hi & ~m, hi, out)
                return
    a = chr(lo).encode("utf-8")
    b = chr(hi).encode("utf-8")
    out.append(list(zip(a, b)))
