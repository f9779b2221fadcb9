"""String-body and key automata that schemas share, and their products.

A JSON string's constraints (``minLength`` / ``maxLength``, ``pattern``, ``format``)
meet as a product of DFAs over the encoded body (``text``)::

    length counter  x  pattern  x  format  ->  body DFA, embedded between quotes

Schemas repeat one string type in many places and across the schemas a process
compiles, so the operands are built once per process (``fsm.memo``: within one byte
budget shared by every memoised automaton; ``functools.lru_cache`` for small values). A
large product (a Unicode class times a 255-character counter is 80k states; under
maxLength 1024, past ``MAX_PRODUCT_STATES``) is built a character's level at a time
as decoding reaches it (``levelled`` decides, ``counted_body`` and ``fsm.levels``
build); one whose pattern is too large for that is deferred, built whole when
decoding first enters that string (``defer_product``, ``SchemaCompiler.string``).
"""

from __future__ import annotations

import functools
import re

import numpy as np

from guided.errors import EmptyLanguageError, RegexError, RegexTooLargeError, UnsatisfiableSchemaError
from guided.fsm.dfa import DFA, MAX_DFA_STATES, determinize
from guided.fsm.levels import CountedLevels
from guided.fsm.memo import memo
from guided.fsm.nfa import NFA
from guided.fsm.ops import (
    MAX_PRODUCT_STATES,
    difference,
    intersect,
    is_empty_intersection,
    product_bound,
    repeat_unit,
)

from . import text as jt
from .format_dfas import format_dfa

#: A string body (pattern times length counter) whose operands' state counts multiply
#: to this many pairs or more is built level by level (``levelled``), or else whole
#: when decoding first reaches it...
DEFER_PRODUCT_PAIRS = 50_000
#: ...once a search of at most this many pairs has found a string it accepts.
DEFER_SEARCH_PAIRS = 20_000
#: A large string body is built level by level (``counted_body``) when its constraint
#: has at most this many states (each use copies it once, ``fsm.levels.Instance``):
#: a level costs far less to build in a mask than a whole deferred product. Larger
#: constraints are built whole.
LEVELLED_STATES = 5_000
#: ...and a ``minLength`` of at most this many characters (set-up works out which
#: states can still finish on each level below it, ~0.1 ms a level).
LEVELLED_MIN_LENGTH = 4_096


def minus(a: DFA, b: DFA, limit: int = MAX_PRODUCT_STATES) -> DFA | None:
    """``a - b``, or None when nothing is left."""
    try:
        return difference(a, b, limit)
    except EmptyLanguageError:
        return None


def body_dfa(build, limit: int = MAX_DFA_STATES) -> DFA:
    """The minimal DFA of the fragment ``build(nfa)`` makes in a fresh NFA (at most ``limit`` states)."""
    nfa = NFA()
    s, e = build(nfa)
    return determinize(nfa, s, e, limit)


def body_parts(constraints, lo: int, hi: int | None) -> list[DFA]:
    """The DFAs whose intersection is the string body: the length counter (if
    bounded) and each ``(kind, regex)`` constraint's."""
    parts = [length_dfa(lo, hi)] if lo > 0 or hi is not None else []
    return parts + [constraint_dfa(kind, rx) for kind, rx in constraints]


def bounded_body(constraints, lo: int, hi: int | None) -> DFA:
    """The string-body DFA of every ``(kind, regex)`` constraint, ``lo`` to ``hi``
    characters. Not minimised: a pattern times a length counter is about as large
    either way, and it is embedded in an NFA that is determinised lazily or whole."""
    body, *rest = body_parts(constraints, lo, hi)
    for d in rest:
        body = intersect(body, d, minimal=False)
    return body


def levelled(parts: list[DFA], lo: int) -> bool:
    """Whether a string body of ``parts`` (``body_parts``: a length counter and one
    constraint) of at least ``lo`` characters is built level by level as decoding
    reaches it (``counted_body``): a large product (``DEFER_PRODUCT_PAIRS`` pairs or
    more, past ``MAX_PRODUCT_STATES`` too) of a constraint of at most
    ``LEVELLED_STATES`` states, ``lo`` at most ``LEVELLED_MIN_LENGTH``."""
    return (len(parts) == 2 and parts[1].num_states <= LEVELLED_STATES and lo <= LEVELLED_MIN_LENGTH
            and parts[0].num_states * parts[1].num_states >= DEFER_PRODUCT_PAIRS)


def defer_product(parts: list[DFA], path: str) -> bool:
    """Whether a string body of two ``parts`` is worth building only when decoding
    reaches it: a large product, bounded below the product limit (``product_bound``:
    a build at decoding time must not fail), and shown non-empty here by a search for
    one string (a deferred fragment must be able to end; an empty one is a schema
    error now)."""
    if len(parts) != 2 or parts[0].num_states * parts[1].num_states < DEFER_PRODUCT_PAIRS:
        return False
    if product_bound(*parts) > MAX_PRODUCT_STATES:
        return False  # it may outgrow the limit: built now, where that is a compile error
    empty = is_empty_intersection(*parts, limit=DEFER_SEARCH_PAIRS)
    if empty:
        raise UnsatisfiableSchemaError("the string constraints contradict each other", path)
    return empty is not None


@memo
def counted_body(constraints: tuple, lo: int, hi: int | None) -> CountedLevels:
    """The body of a string meeting every ``(kind, regex)`` constraint with ``lo``
    to ``hi`` characters, as levels of (constraint state, characters so far) built
    as decoding reaches them (``fsm.levels``), for a large product (``levelled``).
    The constraints' product with the one-character loop tells which steps end a
    character. Raises ``EmptyLanguageError`` when no string fits."""
    body = length_dfa(0, None)  # the character loop: state 0 lies between characters
    for kind, rx in constraints:
        body = intersect(body, constraint_dfa(kind, rx), minimal=False)
    return CountedLevels(body, _character_ends(body), lo, hi)


def _character_ends(body: DFA) -> np.ndarray:
    """For each state of ``body`` (a product with ``length_dfa(0, None)`` first),
    whether it lies between characters: a step into it ends one."""
    loop = length_dfa(0, None)
    lows, _, targets, spans, _ = body.flat_edges()
    phase = np.full(body.num_states, -1, dtype=np.int64)
    phase[0] = 0
    todo = [0]
    targets = targets.tolist()
    while todo:
        q = todo.pop()
        for i in range(*spans[q]):
            t, at = targets[i], int(loop.transitions[phase[q], loop.byte_to_class[lows[i]]])
            if phase[t] < 0:
                phase[t] = at
                todo.append(t)
            elif phase[t] != at:  # a product's states each hold one state of the loop
                raise AssertionError("a string body state lies at two places in a character")
    return phase == 0


def class_cuts(dfa: DFA) -> set[int]:
    """The byte-range boundaries of ``dfa``'s byte classes (``NFA.deferred`` cuts)."""
    classes = dfa.byte_to_class
    return {0, 256, *(np.flatnonzero(classes[1:] != classes[:-1]) + 1).tolist()}


# Schemas repeat string lengths, key patterns and object shapes, within one schema
# and across the schemas a process compiles: each DFA below is built once.

@memo
def length_dfa(lo: int, hi: int | None) -> DFA:
    """The body of any string of ``lo`` to ``hi`` characters: copies of the one
    character automaton laid out directly (``repeat_unit``)."""
    counted = repeat_unit(jt.json_char_dfa(jt.ANY_CHAR), lo, hi)
    return counted if counted is not None else body_dfa(lambda n: jt.string_body(n, lo, hi))


@memo
def pattern_key_dfa(pattern: str) -> DFA:
    """A quoted key in which ``pattern`` finds a match."""
    return body_dfa(lambda n: jt.quoted(n, jt.pattern_body(n, pattern)))


@memo
def other_keys_dfa(defined: frozenset) -> DFA:
    """A quoted key that is none of ``defined``."""
    return body_dfa(lambda n: jt.key_excluding(n, defined))


@memo
def keys_outside(patterns: tuple) -> DFA | None:
    """A quoted key in which none of ``patterns`` finds a match (None: no key)."""
    rest = other_keys_dfa(frozenset())
    for p in patterns:
        rest = minus(rest, pattern_key_dfa(p))
        if rest is None:
            return None
    return rest


@functools.lru_cache(maxsize=512)
def always_found(pattern) -> bool:
    """Whether ``re.search(pattern, s)`` succeeds on every string ``s``, as it does
    for ``([A-Z]+)?`` or ``.*``: such a pattern constrains nothing, and left in it
    multiplies a ``maxLength`` counter (``([0-9a-zA-Z]+)?`` under ``maxLength: 4096``
    makes a 53k-state product, 1.2 s). Only patterns found in the empty string can be.

    Example::

        >>> always_found("([A-Z]+)?"), always_found("^[A-Z]")
        (True, False)
    """
    if not isinstance(pattern, str):
        return False
    try:
        if re.search(pattern, "") is None:
            return False
        return minus(length_dfa(0, None), constraint_dfa("pattern", pattern)) is None
    except (re.error, RegexError, EmptyLanguageError):
        return False  # left to the usual path, which reports the pattern


@memo
def constraint_dfa(kind: str, rx: str) -> DFA:
    """The string-body DFA of a pattern (search) or a format regex (full match; the
    formats' DFAs are shipped, ``format_dfas``)."""
    if kind == "format":
        return format_dfa(rx)
    return body_dfa(lambda n: jt.pattern_body(n, rx))


#: A pattern whose NFA has at most this many states, none of them deferred, is copied
#: in as its minimal DFA where that has at most half as many (``small_pattern_dfa``).
SMALL_PATTERN_STATES = 5_000


@memo
def small_pattern_dfa(rx: str) -> DFA | None:
    """The minimal DFA of a pattern's string body, where the pattern is small: its
    NFA (built lazily, so a long counted part is left deferred and says no) and its
    DFA have at most ``SMALL_PATTERN_STATES`` states, the DFA at most half as many
    as the NFA; else None. A copy of the DFA is a few times smaller than a copy of
    the NFA (each ``[A-Fa-f\\d]`` of ``^[A-Fa-f\\d]{24}$``, any Unicode digit in
    UTF-8, is ~100 NFA states; the DFA has ~22 a position), and the lazy
    automaton's rows over it are one state each."""
    nfa = NFA(lazy=True)
    s, e = jt.pattern_body(nfa, rx)
    if nfa.pending or len(nfa) > SMALL_PATTERN_STATES:
        return None
    try:
        dfa = determinize(nfa, s, e, SMALL_PATTERN_STATES)
    except RegexTooLargeError:
        return None
    return dfa if 2 * dfa.num_states <= len(nfa) else None


@functools.lru_cache(maxsize=512)
def constraint_cuts(kind: str, rx: str) -> frozenset[int]:
    """``class_cuts`` of ``constraint_dfa(kind, rx)``, kept with it."""
    return frozenset(class_cuts(constraint_dfa(kind, rx)))
