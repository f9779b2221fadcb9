"""Regexes for JSON Schema ``format`` values.

Each regex describes the *decoded* string value (not its JSON-escaped text), in the
Python ``re`` syntax that :func:`guided.fsm.compile_regex` understands (``re.fullmatch``
semantics, no lookarounds, ASCII classes spelled out: ``\\d`` / ``\\w`` would be
Unicode).

The ground truth is ``jsonschema``'s format checker for draft 2020-12
(``jsonschema.Draft202012Validator.FORMAT_CHECKER``) with the optional packages it
uses installed: ``rfc3339-validator`` (date-time, time), ``fqdn`` (hostname),
``rfc3987`` (uri, uri-reference) and ``isoduration`` (duration). MaskBench's labels
agree with exactly that checker. The contract of every regex here:

* **sound** -- every string it accepts is accepted by that checker;
* **useful** -- it accepts the common valid forms (what real data and a language
  model write). Where the checker's language is not compact as a DFA, the regex is
  a documented subset.

Per format:

``date``
    Exact. ``YYYY-MM-DD`` with year 0001-9999, month 01-12, the day within the
    month, and 02-29 only in Gregorian leap years (divisible by 4, centuries only
    when divisible by 400) -- what ``date.fromisoformat`` accepts after the
    checker's ``\\d{4}-\\d{2}-\\d{2}`` pre-check.
``time``
    Exact. RFC 3339 ``full-time``: ``HH:MM:SS[.frac](Z|+HH:MM|-HH:MM)``, hours
    00-23, minutes and seconds 00-59 (no leap second: the checker rejects 60),
    offset hours 00-23; ``z`` may be lower case (the checker upper-cases).
``date-time``
    Exact. ``date`` + ``T``/``t`` + ``time`` (a space separator is rejected by the
    checker, and so here).
``duration``
    Subset. ISO 8601 / RFC 3339 durations: ``P[nY][nM][nD][T[nH][nM][nS]]`` with at
    least one component (and at least one after ``T``) or ``PnW``; each number is
    ``[0-9]+`` with an optional ``.fraction`` (``PT0.5S``, ``P1.5D``).
    (``isoduration`` also takes signs, decimal commas and ``P0001-02-03``-style
    forms.)
``email``
    Subset. The checker only requires an ``@``. Here: a dot-atom local part
    (RFC 5322 ``atext``) ``@`` a domain of one or more hostname labels
    (``user@example.com``, ``first.last+tag@sub.example.co.uk``, ``a@localhost``).
``hostname``
    Subset of ``fqdn.FQDN(min_labels=1)``: labels of ``[A-Za-z0-9-]`` that neither
    start nor end with ``-``, optional trailing dot. The 253-character limit is kept
    by bounding the shape: either at most 3 labels of up to 63 characters (at most
    191 in all) or at most 10 labels of up to 24 characters (at most 249).
``ipv4``
    Exact. Dotted quad, each part 0-255 without leading zeros
    (``ipaddress.IPv4Address``).
``ipv6``
    Exact for ``ipaddress.IPv6Address`` without a scope id (the checker rejects
    ``%scope``): all ``::`` compressions, 1-4 hex digits a group, either case, and
    the IPv4-suffixed forms (``::ffff:192.0.2.1``).
``uuid``
    Subset. ``8-4-4-4-12`` hex digits, either case (the checker also takes some
    odd forms with extra hyphens).
``uri`` / ``uri-reference``
    Exact RFC 3986 grammar as ``rfc3987`` implements it (``URI`` and
    ``URI_reference`` rules), with a strict IPv4 ``dec-octet`` and no ``IPvFuture``
    host -- so it is also accepted by ``rfc3986-validator``. The grammar is wide:
    it accepts ``urn:isbn:0451450523``, ``mailto:a@b.c`` and ``a:`` just as it
    accepts ``https://example.com/x?y=1#z``; no spaces, quotes, backslashes or
    non-ASCII characters (those must be percent-encoded).
``regex``
    Subset. The checker accepts what ``re.compile`` accepts; here, patterns made of
    literal characters, ``.``, escapes (``\\d``, ``\\w``, ``\\s``, ``\\.`` and other
    escaped punctuation), character classes (``[a-z0-9_-]``, ``[^\\s]``, ranges
    within digits, lower or upper case letters, in order), ``^`` / ``$``, groups
    (``(...)``, ``(?:...)``, nested up to three deep) and alternation, each atom
    with at most one quantifier (``*``, ``+``, ``?``, ``{m}``, ``{m,}``, ``{,n}``,
    ``{m,n}`` with ``m <= n``, optionally lazy): ``^[a-zA-Z0-9_]{3,16}$``,
    ``^(foo|bar)\\.js$``. Balanced parentheses are not regular, hence the depth.
"""

from __future__ import annotations

__all__ = ["FORMATS", "format_regex"]

# ----------------------------------------------------------------- date and time

_YEAR = "(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"  # 0001-9999
_DIV4 = "(?:0[48]|[2468][048]|[13579][26])"  # 04..96, two digits divisible by 4
_LEAP_YEAR = f"(?:[0-9]{{2}}{_DIV4}|{_DIV4}00)"  # no 0000: it is not a valid year
_DATE = (
    "(?:"
    f"{_YEAR}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))"
    f"|{_LEAP_YEAR}-02-29"
    ")"
)
_HOUR = "(?:[01][0-9]|2[0-3])"
_MIN = "[0-5][0-9]"
_OFFSET = f"(?:[Zz]|[+-]{_HOUR}:{_MIN})"
_TIME = f"{_HOUR}:{_MIN}:{_MIN}(?:\\.[0-9]+)?{_OFFSET}"
_DATE_TIME = f"{_DATE}[Tt]{_TIME}"

_NUM = "[0-9]+(?:\\.[0-9]+)?"
_DUR_TIME = f"T(?:{_NUM}H(?:{_NUM}M)?(?:{_NUM}S)?|{_NUM}M(?:{_NUM}S)?|{_NUM}S)"
_DURATION = (
    f"P(?:{_NUM}W"
    f"|{_NUM}Y(?:{_NUM}M)?(?:{_NUM}D)?(?:{_DUR_TIME})?"
    f"|{_NUM}M(?:{_NUM}D)?(?:{_DUR_TIME})?"
    f"|{_NUM}D(?:{_DUR_TIME})?"
    f"|{_DUR_TIME})"
)

# ------------------------------------------------------------- network addresses

_DEC_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = f"{_DEC_OCTET}(?:\\.{_DEC_OCTET}){{3}}"
_H16 = "[0-9A-Fa-f]{1,4}"
_LS32 = f"(?:{_H16}:{_H16}|{_IPV4})"
_IPV6 = (
    "(?:"
    + "|".join(
        [
            f"(?:{_H16}:){{6}}{_LS32}",
            f"::(?:{_H16}:){{5}}{_LS32}",
            f"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
            f"(?:(?:{_H16}:)?{_H16})?::(?:{_H16}:){{3}}{_LS32}",
            f"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
            f"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
            f"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
            f"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
            f"(?:(?:{_H16}:){{0,6}}{_H16})?::",
        ]
    )
    + ")"
)


def _label(max_len: int) -> str:
    return f"[A-Za-z0-9](?:[A-Za-z0-9-]{{0,{max_len - 2}}}[A-Za-z0-9])?"


def _labels(count: int, max_len: int) -> str:
    label = _label(max_len)
    return f"{label}(?:\\.{label}){{0,{count - 1}}}"


# <= 3 labels of <= 63 chars (<= 191 chars) or <= 10 labels of <= 24 (<= 249 chars)
_HOSTNAME = f"(?:{_labels(3, 63)}|{_labels(10, 24)})\\.?"

_ATEXT = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_EMAIL_LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_EMAIL = f"{_ATEXT}+(?:\\.{_ATEXT}+)*@{_EMAIL_LABEL}(?:\\.{_EMAIL_LABEL})*"

_HEX = "[0-9A-Fa-f]"
_UUID = f"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"

# ------------------------------------------------------------------ RFC 3986 URIs

_UNRESERVED = "A-Za-z0-9._~\\-"
_SUB_DELIMS = "!$&'()*+,;="
_PCT = f"%{_HEX}{{2}}"
_PCHAR = f"(?:[{_UNRESERVED}{_SUB_DELIMS}:@]|{_PCT})"
_QUERY = f"(?:[{_UNRESERVED}{_SUB_DELIMS}:@/?]|{_PCT})*"  # query and fragment
_SEGMENT = f"{_PCHAR}*"
_SEGMENT_NZ = f"{_PCHAR}+"
_SEGMENT_NZ_NC = f"(?:[{_UNRESERVED}{_SUB_DELIMS}@]|{_PCT})+"
_USERINFO = f"(?:[{_UNRESERVED}{_SUB_DELIMS}:]|{_PCT})*"
_REG_NAME = f"(?:[{_UNRESERVED}{_SUB_DELIMS}]|{_PCT})*"  # covers IPv4address too
_HOST = f"(?:\\[{_IPV6}\\]|{_REG_NAME})"
_AUTHORITY = f"(?:{_USERINFO}@)?{_HOST}(?::[0-9]*)?"
_PATH_ABEMPTY = f"(?:/{_SEGMENT})*"
_PATH_ABSOLUTE = f"/(?:{_SEGMENT_NZ}{_PATH_ABEMPTY})?"
_PATH_ROOTLESS = f"{_SEGMENT_NZ}{_PATH_ABEMPTY}"
_PATH_NOSCHEME = f"{_SEGMENT_NZ_NC}{_PATH_ABEMPTY}"
_SCHEME = "[A-Za-z][A-Za-z0-9+.-]*"
_HIER_PART = f"(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_PATH_ROOTLESS}|)"
_RELATIVE_PART = f"(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_PATH_NOSCHEME}|)"
_URI = f"{_SCHEME}:{_HIER_PART}(?:\\?{_QUERY})?(?:#{_QUERY})?"
# URI | relative-ref, with the common query and fragment tail factored out
_URI_REFERENCE = f"(?:{_SCHEME}:{_HIER_PART}|{_RELATIVE_PART})(?:\\?{_QUERY})?(?:#{_QUERY})?"

# ------------------------------------------------------------------------- regex

# Characters that stand for themselves outside a class (no metacharacter, no brace:
# a brace that starts no quantifier is literal in Python, but need not be here).
_RX_LITERAL = "[^\\\\()\\[\\]{}*+?|^$.]"
_RX_ESCAPE = "\\\\[dDsSwWntrfv.\\-/\\\\^$*+?()\\[\\]{}|]"
_RX_ANCHOR = "(?:[\\^$]|\\\\[AZbB])"  # zero-width: never quantified ("nothing to repeat")
# A class: an optional leading and trailing "-", items in between, at least one; a
# "^" only escaped (a bare one first would negate, and "[^]" is unterminated).
_RX_RANGE = "(?:" + "|".join(
    f"{c}-[{c}-{end}]" for first, end in (("0", "9"), ("a", "z"), ("A", "Z"))
    for c in (chr(x) for x in range(ord(first), ord(end) + 1))) + ")"
_RX_CLASS_ITEM = f"(?:{_RX_RANGE}|[^\\\\\\[\\]\\-^]|\\\\[dDsSwWntrfv.\\-/\\\\^\\[\\]])"
_RX_CLASS = f"\\[\\^?-?{_RX_CLASS_ITEM}+-?\\]"
_RX_COUNT = "(?:0|[1-9][0-9]{0,2})"
_RX_BOUNDS = ("(?:" + _RX_COUNT + ",?|," + _RX_COUNT
              + "|" + "|".join(f"{m},[{m}-9]" for m in range(10))  # one digit each, m <= n
              + "|[0-9],[1-9][0-9]{1,2}|[1-9][0-9],[1-9][0-9]{2})")  # n has more digits
_RX_QUANT = f"(?:[*+?]|\\{{{_RX_BOUNDS}\\}})\\??"


def _rx_alternation(depth: int) -> str:
    atom = f"{_RX_LITERAL}|\\.|{_RX_ESCAPE}|{_RX_CLASS}"
    if depth:
        atom += f"|\\((?:\\?:)?{_rx_alternation(depth - 1)}\\)"
    sequence = f"(?:{atom})(?:{_RX_QUANT})?|{_RX_ANCHOR}"
    return f"(?:{sequence})*(?:\\|(?:{sequence})*)*"


_REGEX = _rx_alternation(3)

FORMATS: dict[str, str] = {
    "date": _DATE,
    "time": _TIME,
    "date-time": _DATE_TIME,
    "duration": _DURATION,
    "email": _EMAIL,
    "hostname": _HOSTNAME,
    "ipv4": _IPV4,
    "ipv6": _IPV6,
    "uuid": _UUID,
    "uri": _URI,
    "uri-reference": _URI_REFERENCE,
    "regex": _REGEX,
}


def format_regex(name: str) -> str | None:
    """The regex for JSON Schema format ``name`` (decoded value), or ``None``.

    ``None`` means the format is not known here: the caller should then treat the
    value as an unconstrained string (JSON Schema makes ``format`` an annotation
    by default).

    Example::

        >>> import re
        >>> bool(re.fullmatch(format_regex("date"), "2024-02-29"))
        True
        >>> bool(re.fullmatch(format_regex("date"), "2023-02-29"))
        False
        >>> format_regex("no-such-format") is None
        True
    """
    return FORMATS.get(name)
