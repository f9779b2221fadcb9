"""JSON text building blocks as byte automata: string characters, keys, whitespace.

A JSON string constraint speaks about the *decoded* value (``maxLength``, ``pattern``,
``format``), while the model writes the *encoded* text. Here each decoded character
class becomes the automaton of its encodings:

* characters that need no escape: their UTF-8 bytes;
* ``"`` and ``\\``: ``\\"`` and ``\\\\``; ``/``: ``/`` or ``\\/``;
* control characters: ``\\b \\f \\n \\r \\t`` or ``\\u00XX`` (as ``json.dumps`` writes them).

Other ``\\uXXXX`` spellings of ordinary characters are not accepted (a model can write
the character itself), and surrogates never are, so one encoded unit is always one
code point and lengths count exactly as the validator counts them.
"""

from __future__ import annotations

import functools
from bisect import bisect_right

import numpy as np

from guided.fsm.dfa import DFA, determinize
from guided.fsm.kernels import AVAILABLE as COMPILED_AVAILABLE
from guided.fsm.kernels import ready as kernels_ready
from guided.fsm.memo import memo
from guided.fsm.nfa import NFA, Template
from guided.fsm.ops import embed
from guided.fsm.regex import lookahead_dfa, regex_to_nfa
from guided.fsm.utf8 import MAX_CODE_POINT, normalize, subtract
from guided.grammars.json_schema.scalars.numbers import JSON_NUMBER, plain_number_dfa

ANY_CHAR = ((0, MAX_CODE_POINT),)
#: Code points with an escaped spelling (or only one: controls).
_ESCAPED = ((0, 0x1F), (0x22, 0x22), (0x2F, 0x2F), (0x5C, 0x5C))
_SHORT_ESCAPES = {0x08: b"\\b", 0x09: b"\\t", 0x0A: b"\\n", 0x0C: b"\\f", 0x0D: b"\\r"}


def _contains(ranges, cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in ranges)


@memo
def json_char_dfa(ranges: tuple) -> DFA:
    """Minimal DFA of the JSON encodings of one character from ``ranges``."""
    nfa = NFA()
    parts = []
    raw = subtract(ranges, ((0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)))
    if raw:
        parts.append(nfa.code_points(raw))
    if _contains(ranges, 0x22):
        parts.append(nfa.byte_string(b'\\"'))
    if _contains(ranges, 0x5C):
        parts.append(nfa.byte_string(b"\\\\"))
    if _contains(ranges, 0x2F):
        parts.append(nfa.byte_string(b"\\/"))
    for cp in range(0x20):
        if _contains(ranges, cp):
            if cp in _SHORT_ESCAPES:
                parts.append(nfa.byte_string(_SHORT_ESCAPES[cp]))
            for digits in {f"{cp:04x}", f"{cp:04X}"}:
                parts.append(nfa.byte_string(b"\\u" + digits.encode()))
    if not parts:
        raise ValueError("empty character class")
    start, end = nfa.union(parts)
    return determinize(nfa, start, end)


def json_char(nfa: NFA, ranges) -> tuple[int, int]:
    """Fragment: one encoded character from the code point set ``ranges`` (one that no
    text crosses where the set is empty: ``[^\\s\\S]``, or only lone surrogates)."""
    ranges = tuple(ranges)
    if ranges == ANY_CHAR:
        return embed(nfa, any_json_char_dfa())
    chars, plain = _classify(ranges)
    if not chars:
        return nfa.state(), nfa.state()
    if plain:  # each character spelled one way: itself
        return nfa.code_points(chars)
    return embed(nfa, _json_char_dfa_of(ranges))


@functools.lru_cache(maxsize=4096)
def _classify(ranges: tuple) -> tuple[tuple, bool]:
    """``ranges`` normalised, and whether none of them has an escaped spelling."""
    chars = tuple(normalize(list(ranges)))
    return chars, subtract(chars, _ESCAPED) == list(chars)


@functools.lru_cache(maxsize=1)
def any_json_char_dfa() -> DFA:
    """``json_char_dfa`` of any character, built once per process rather than memoised:
    nearly every schema has a string, and the memo may be cleared between compiles."""
    return json_char_dfa(tuple(normalize(list(ANY_CHAR))))


@memo
def _json_char_dfa_of(ranges: tuple) -> DFA:
    # Keyed by the ranges as given: every string's characters ask for ANY_CHAR, and
    # normalising them again at each of ~100k calls costs more than the copy itself.
    return json_char_dfa(tuple(normalize(list(ranges))))


def string_body(nfa: NFA, min_length: int = 0, max_length: int | None = None) -> tuple[int, int]:
    """Fragment: the encoded characters of a string (no quotes), length-bounded."""
    return nfa.repeat(lambda: json_char(nfa, ANY_CHAR), min_length, max_length, any_char=True)


def pattern_body(nfa: NFA, pattern: str) -> tuple[int, int]:
    """Fragment: encoded string contents in which ``re.search(pattern, value)`` succeeds
    (JSON Schema patterns are unanchored), with Python ``re`` meaning as the validator has."""
    return _body(nfa, pattern, True)


def full_match_body(nfa: NFA, pattern: str) -> tuple[int, int]:
    """Fragment: encoded string contents whose value fully matches ``pattern``."""
    return _body(nfa, pattern, False)


def _body(nfa: NFA, pattern: str, search: bool) -> tuple[int, int]:
    # A pattern opening with lookaheads is automaton algebra over the encoded
    # contents: every encoding of each value is in each part, so their intersection
    # and difference hold every encoding of the values the pattern matches.
    looked = lookahead_dfa(pattern, 0, _encoded_dfa, search)
    if looked is not None:
        return embed(nfa, looked, True)
    return regex_to_nfa(pattern, nfa, char_fragment=lambda ranges: json_char(nfa, ranges), char_dfa=_json_char_dfa_of,
                        search=search)


def _encoded_dfa(pattern: str, search: bool) -> DFA:
    nfa = NFA()
    s, e = regex_to_nfa(pattern, nfa, char_fragment=lambda ranges: json_char(nfa, ranges), char_dfa=_json_char_dfa_of,
                        search=search)
    return determinize(nfa, s, e)


def regex_fragment(nfa: NFA, pattern: str) -> tuple[int, int]:
    """Fragment: raw bytes fully matching ``pattern`` (numbers, whitespace)."""
    return regex_to_nfa(pattern, nfa)


def any_number(nfa: NFA) -> tuple[int, int]:
    """Fragment: any JSON number, a copy of one minimal DFA built once per process.
    Open values are built again at every place decoding reaches one, and parsing
    the number pattern each time costs more than the rest of the value."""
    return embed(nfa, plain_number_dfa(JSON_NUMBER))


def quoted(nfa: NFA, body: tuple[int, int]) -> tuple[int, int]:
    return nfa.concat([nfa.byte_string(b'"'), body, nfa.byte_string(b'"')])


#: Characters with more than one JSON spelling (or none raw).
_ESCAPABLE = {'"', "\\", "/"} | {chr(c) for c in range(0x20)}


@functools.lru_cache(maxsize=8)
def _string_body_dfa() -> DFA:
    nfa = NFA()
    s, e = string_body(nfa)
    return determinize(nfa, s, e)


def key_excluding(nfa: NFA, names) -> tuple[int, int]:
    """Fragment: a quoted JSON string whose *value* is none of ``names``.

    In a lazy NFA the fragment is deferred (built when decoding first reaches an
    extra key of this object): every object that allows other keys has one, a trie
    of its names with a copy of the string body, and a large schema has hundreds
    of such objects that decoding never enters."""
    names = set(names)
    if any(ch in _ESCAPABLE for name in names for ch in name):
        return _key_excluding_by_char(nfa, names)
    if nfa.lazy:
        # Built once per NFA and set of names and pasted after that: with keys in
        # any order, every set of written keys is a node of its own with its own
        # copy. With numba a kernel makes the template's arrays, here and now: ~11
        # µs as the object is built, where building it in the first mask to reach an
        # other key would cost that mask ~50 µs more (a walk's cold caches).
        names = frozenset(names)
        key = ("key_excluding", names)
        if COMPILED_AVAILABLE and kernels_ready() and key not in nfa.templates:
            made = key_trie_template(names)
            if made is not None:
                nfa.templates[key] = made
        return nfa.deferred_once(nfa.templates, key, lambda: _key_excluding_by_byte(nfa, names),
                                 _key_trie_cuts(names))
    return _key_excluding_by_byte(nfa, names)


def key_trie_template(names) -> Template | None:
    """``_key_excluding_by_byte``'s states made by a compiled kernel as a template
    (``fsm.kernels.key_trie``; needs numba), for a compiled construction to
    paste; None where a name leaves the string body (the Python builder then
    builds it)."""
    from guided.fsm.kernels.key_trie import key_trie_packed  # imports numba

    # One buffer, each name closed by a NUL (none holds one: see ``_ESCAPABLE``),
    # the kernel finds where they start: numpy calls here cost more than the kernel.
    text = "".join(name + "\0" for name in sorted(names)).encode("utf-8")
    packed, n, start, end = key_trie_packed(np.frombuffer(text, dtype=np.uint8), len(names), *_string_body_arrays())
    return Template.of_packed(packed, n, start, end) if n else None


@functools.lru_cache(maxsize=1)
def _string_body_arrays() -> tuple:
    """The string body DFA for ``key_trie_packed``: its transitions, byte classes,
    accepting states, and moves (``DFA.flat_edges``) as arrays."""
    body = _string_body_dfa()
    lo, hi, target, spans, _ = body.flat_edges()
    return (body.transitions, body.byte_to_class.astype(np.int64), body.accepting.astype(bool),
            np.array(lo, dtype=np.int64), np.array(hi, dtype=np.int64), target.astype(np.int64),
            np.array(spans, dtype=np.int64).reshape(-1, 2))


def _key_trie_cuts(names) -> set[int]:
    """The byte-range boundaries ``_key_excluding_by_byte`` uses: the string body's
    and, around each byte of a name, the holes it punches."""
    cuts = set(_string_body_cuts())
    for b in {b for name in names for b in name.encode("utf-8")}:
        cuts.add(b)
        cuts.add(b + 1)
    return cuts


@functools.lru_cache(maxsize=1)
def _string_body_cuts() -> frozenset[int]:
    edges, _ = _string_body_dfa().edge_list()
    return frozenset({ord('"'), ord('"') + 1}.union(*({lo, hi + 1} for moves in edges for lo, hi, _ in moves)))


def _key_excluding_by_byte(nfa: NFA, names) -> tuple[int, int]:
    """Names whose characters each have one spelling (their UTF-8 bytes): a byte trie
    of the names, leaving it into one copy of the generic string-body DFA on the
    first byte that no name continues with. No determinisation needed.

    This runs for every object that allows other keys, so each trie node copies its
    body state's moves (sorted, merged ranges) and only splits the ranges holding a
    byte some name continues with."""
    body = _string_body_dfa()
    body_edges, _ = body.edge_list()
    base, body_end = embed(nfa, body)  # body state k is NFA state base + k
    open_quote = nfa.byte_string(b'"')
    close = nfa.byte_string(b'"')
    nfa.epsilon(body_end, close[0])
    # Trie over the names' bytes, numbered from 0 and added as states root + k in
    # one go; each node remembers the body-DFA state it stands for.
    children: list[dict[int, int]] = [{}]
    body_state = [0]
    terminal: set[int] = set()
    stepped: dict[tuple[int, int], int] = {}
    for name in sorted(names):
        node = 0
        for byte in name.encode("utf-8"):
            nxt = children[node].get(byte)
            if nxt is None:
                nxt = children[node][byte] = len(children)
                children.append({})
                key = (body_state[node], byte)
                got = stepped.get(key)
                if got is None:
                    got = stepped[key] = body.step(key[0], bytes([byte]))
                body_state.append(got)
            node = nxt
        terminal.add(node)
    root = len(nfa)
    moved: dict[int, tuple] = {}  # body state -> its moves into this copy of the body, their starts
    edges = []
    for kids, bstate in zip(children, body_state):
        got = moved.get(bstate)
        if got is None:
            moves = [(lo, hi, base + t) for lo, hi, t in body_edges[bstate]]
            got = moved[bstate] = (moves, [m[0] for m in moves])
        out = _punched(*got, sorted(kids)) if kids else list(got[0])
        out.extend((b, b, root + kid) for b, kid in kids.items())
        edges.append(out)
    nfa.add_states(len(children), edges)
    nfa.epsilon(open_quote[1], root)
    eps = nfa.eps
    for node, bstate in enumerate(body_state):
        if node not in terminal and body.is_accepting(bstate):
            eps[root + node].append(close[0])
    return open_quote[0], close[1]


def _punched(moves, starts: list[int], holes: list[int]) -> list[tuple[int, int, int]]:
    """Sorted ranges ``moves`` (``starts``: their ``lo``) without the sorted bytes
    ``holes``. Only the ranges holding a hole are split; the runs between are
    copied as slices (a trie node has a hole or two among ~20 ranges, and this runs
    for each node of every object that allows other keys)."""
    out: list[tuple[int, int, int]] = []
    done, k, n = 0, 0, len(holes)
    while k < n:
        i = bisect_right(starts, holes[k]) - 1
        if i < 0 or moves[i][1] < holes[k]:  # between ranges: nothing to split
            k += 1
            continue
        lo, hi, t = moves[i]
        out.extend(moves[done:i])
        cur = lo
        while k < n and holes[k] <= hi:
            if cur < holes[k]:
                out.append((cur, holes[k] - 1, t))
            cur = holes[k] + 1
            k += 1
        if cur <= hi:
            out.append((cur, hi, t))
        done = i + 1
    out.extend(moves[done:])
    return out


def _key_excluding_by_char(nfa: NFA, names) -> tuple[int, int]:
    """Fragment: a quoted JSON string whose *value* is none of ``names``.

    A character trie over the names tracks how much of a name has been written;
    leaving the trie means the key can no longer be a name. Each trie edge is a
    decoded character, so ``"a\\/b"`` is recognised as the name ``a/b``.
    """
    names = set(names)
    children: list[dict[int, int]] = [{}]
    terminal = [False]
    for name in names:
        node = 0
        for ch in name:
            cp = ord(ch)
            if cp not in children[node]:
                children[node][cp] = len(children)
                children.append({})
                terminal.append(False)
            node = children[node][cp]
        terminal[node] = True
    open_quote = nfa.byte_string(b'"')
    close = nfa.state()
    states = [nfa.state() for _ in children]
    diverged = nfa.state()
    nfa.epsilon(open_quote[1], states[0])
    s, e = json_char(nfa, ANY_CHAR)
    nfa.epsilon(diverged, s)
    nfa.epsilon(e, diverged)
    for node, kids in enumerate(children):
        for cp, child in kids.items():
            s, e = json_char(nfa, ((cp, cp),))
            nfa.epsilon(states[node], s)
            nfa.epsilon(e, states[child])
        others = subtract(ANY_CHAR, [(cp, cp) for cp in kids])
        if others:
            s, e = json_char(nfa, others)
            nfa.epsilon(states[node], s)
            nfa.epsilon(e, diverged)
        if not terminal[node]:
            nfa.epsilon(states[node], close)
    nfa.epsilon(diverged, close)
    q = nfa.byte_string(b'"')
    nfa.epsilon(close, q[0])
    return open_quote[0], q[1]
