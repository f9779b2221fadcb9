"""Texts of JSON containers for the over-mode ("superset") compiler.

What DFA algebra subtracts must be a superset of the values it stands for. Braces
around any text are one, but a loose one: in ``{"d":[1],"tag":"x"}`` the text after
``"d":`` may run over ``"tag":"x"``, so nothing about ``tag`` can be said, and
``oneOf`` branches that differ in an optional tag (or in what their arrays hold)
cannot be told apart. Here containers are written member by member down to
``SUPERSET_LEVELS`` levels of nesting, and only below that as brackets around any
text::

    object   {  ws ( member ( ws , ws member )* )? ws  }
    member   key ws : ws value          (a listed key: its value's superset;
                                         any other key: any value, where allowed)
    array    [  ws ( item ( ws , ws item )* )? ws  ]

Whitespace is any JSON whitespace, whatever layout the subset compiler writes.

Cost notes: a member or item is built once, minimised, and embedded twice (first
and repeated); any value at a given level is one cached DFA per process.
"""

from __future__ import annotations

from guided.fsm.dfa import DFA, determinize
from guided.fsm.memo import memo
from guided.fsm.nfa import NFA
from guided.fsm.ops import embed

from . import text as jt

#: Levels of containers written member by member; deeper ones are bracketed text.
SUPERSET_LEVELS = 1
#: Item counts (``minItems`` / ``maxItems``) an array superset keeps: a larger
#: ``maxItems`` is dropped and a larger ``minItems`` lowered to this (still supersets).
SUPERSET_COUNT_MAX = 8
#: Most DFA states a member-by-member superset may take before the flat one is used
#: (a value that may be any text keeps every later member's start in its subsets).
SUPERSET_STATES = 1024
#: The same for a whole sub-schema's superset (several objects side by side); past it
#: the compiler builds it again with flat supersets.
SUPERSET_WHOLE_STATES = 16384

_WS = r"[ \t\n\r]*"


def ws(nfa: NFA) -> tuple[int, int]:
    """Any JSON whitespace."""
    return jt.regex_fragment(nfa, _WS)


def bracketed_text(nfa: NFA, open_: bytes, close: bytes) -> tuple[int, int]:
    """``open_`` any text ``close``: every container of that kind, and more."""
    return nfa.concat([nfa.byte_string(open_), nfa.any_bytes(), nfa.byte_string(close)])


def members(nfa: NFA, entry: DFA | None, lo: int = 0, hi: int | None = None) -> tuple[int, int]:
    """The inside of a container: ``entry`` texts separated by commas (none when
    ``entry`` is None), ``lo`` to ``hi`` of them (``hi`` None: any number). Counted
    texts stay a superset even where ``entry`` may run over a comma: a container of
    n members still reads as n entries."""
    if entry is None or hi == 0:
        return ws(nfa)
    more = nfa.repeat(lambda: nfa.concat([ws(nfa), nfa.byte_string(b","), ws(nfa), embed(nfa, entry)]),
                      max(lo - 1, 0), None if hi is None else hi - 1)
    some = nfa.concat([ws(nfa), embed(nfa, entry), more, ws(nfa)])
    return some if lo > 0 else nfa.union([ws(nfa), some])


def member(nfa: NFA, key: tuple[int, int], value: tuple[int, int]) -> tuple[int, int]:
    """``key : value`` (fragments of ``nfa``), any whitespace around the colon."""
    return nfa.concat([key, ws(nfa), nfa.byte_string(b":"), ws(nfa), value])


def container(nfa: NFA, open_: bytes, close: bytes, entry: DFA | None, lo: int = 0,
              hi: int | None = None) -> tuple[int, int]:
    """``open_`` ``members(nfa, entry, lo, hi)`` ``close``."""
    return nfa.concat([nfa.byte_string(open_), members(nfa, entry, lo, hi), nfa.byte_string(close)])


def spelled(nfa: NFA, open_: bytes, close: bytes, parts) -> tuple[int, int]:
    """``open_`` the fragments ``part(nfa)`` in order, separated by commas, ``close``,
    any whitespace around: one given array or object (an ``enum`` value)."""
    pieces = [nfa.byte_string(open_), ws(nfa)]
    for i, part in enumerate(parts):
        if i:
            pieces += [nfa.byte_string(b","), ws(nfa)]
        pieces += [part(nfa), ws(nfa)]
    return nfa.concat(pieces + [nfa.byte_string(close)])


def any_json(nfa: NFA, levels: int) -> tuple[int, int]:
    """Every JSON value: containers member by member for ``levels`` levels, then any
    text (which holds every value too)."""
    if levels <= 0:
        return nfa.any_bytes()
    return embed(nfa, _any_json_dfa(levels))


@memo
def _any_json_dfa(levels: int) -> DFA:
    """``any_json``'s minimal DFA for ``levels`` > 0, once per process."""
    nfa = NFA()
    inner = lambda n: any_json(n, levels - 1)  # noqa: E731
    item = _dfa(inner)
    entry = _dfa(lambda n: member(n, jt.quoted(n, jt.string_body(n)), inner(n)))
    s, e = nfa.union([
        jt.quoted(nfa, jt.string_body(nfa)), jt.any_number(nfa),
        nfa.byte_string(b"true"), nfa.byte_string(b"false"), nfa.byte_string(b"null"),
        container(nfa, b"[", b"]", item), container(nfa, b"{", b"}", entry),
    ])
    return determinize(nfa, s, e)


def _dfa(build) -> DFA:
    nfa = NFA()
    s, e = build(nfa)
    return determinize(nfa, s, e)
