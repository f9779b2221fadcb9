"""Python ``re`` syntax to a minimal byte-level DFA.

Parsing is Python's own (``re._parser``), so syntax, escapes, character-class
meaning and error positions are exactly those of ``re``; this module only walks the
parse tree. The DFA accepts the UTF-8 encoding of exactly the strings that
``re.fullmatch(pattern, s, flags)`` accepts.

Supported: literals, classes (ranges, negation, ``\\d \\w \\s`` and negations, Unicode
or ``re.ASCII``), ``.`` (with or without ``re.DOTALL``), groups of every capturing
kind, alternation, ``* + ? {m} {m,} {m,n}`` greedy or lazy, verbose mode, ``^`` at
the start, ``$`` / ``\\Z`` anywhere (away from the end as mark bytes resolved on the
fragment's DFA: ``_end_marks_resolved``), and ``re.IGNORECASE``
(``(?i)``, scoped ``(?i:...)`` / ``(?-i:...)``, with or without ``re.ASCII``).

Case-insensitive matching follows what ``re`` itself does, not ``str.lower()``: a
character matches when its simple lowercase (``_sre.unicode_tolower``) is in the
folded set, with the extra equivalences of ``re._casefix`` (``s``/``ſ``, ``k``/Kelvin
sign, the Greek sigmas, ...); a negated class folds the positive set, then
complements it (``(?i)[^a]`` excludes ``A``). Under ``re.ASCII`` only ASCII letters
fold. Quirks of the running Python's ``re`` in classes with characters beyond the BMP
(gh-126505, fixed in the late-2024 releases) are followed too, so the DFA and ``re`` agree.

Lookaheads right after the leading ``^`` (``^(?!reserved$)[a-z]+``, the common idiom)
are automaton algebra: the pattern without them, intersected with (``(?=X)``) or less
(``(?!X)``) the texts that start with a match of ``X`` (``lookahead_dfa``).

Refused with a named error: other lookarounds and lookbehinds (regular, but not built
here), backreferences, conditionals, possessive quantifiers and atomic groups (not
regular, or they change the language in a way an automaton cannot follow), word
boundaries, ``^`` away from the start (and ``$`` in the middle under ``re.MULTILINE``),
and ``re.LOCALE``.
"""

from __future__ import annotations

import _sre
import bisect
import functools
import re

try:  # Python >= 3.11
    from re import _constants as C
    from re import _parser as sre_parse
    from re._casefix import _EXTRA_CASES
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as C  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]
    from sre_compile import _ignorecase_fixes as _EXTRA_CASES  # type: ignore[no-redef]

from guided.errors import EmptyLanguageError, RegexSyntaxError, UnsupportedRegexFeature

from .dfa import DFA, determinize
from .memo import memo
from .nfa import NFA
from .ops import difference, embed, intersect, repeat_unit
from .utf8 import MAX_CODE_POINT, SURROGATES, Ranges, complement, normalize, ranges_matching

#: Items that read exactly one character.
_ONE_CHARACTER = (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN)

_NOT_REGULAR = {
    "ASSERT": ("lookaround assertion", ("(?=", "(?<=")),
    "ASSERT_NOT": ("negative lookaround assertion", ("(?!", "(?<!")),
    "GROUPREF": ("backreference", ("\\1", "\\2", "\\3", "(?P=")),
    "GROUPREF_EXISTS": ("conditional group (?(id)yes|no)", ("(?(",)),
    "ATOMIC_GROUP": ("atomic group (?>...)", ("(?>",)),
    "POSSESSIVE_REPEAT": ("possessive quantifier", ("*+", "++", "?+", "}+")),
}

_CATEGORIES = {
    "CATEGORY_DIGIT": (r"\d", False),
    "CATEGORY_NOT_DIGIT": (r"\d", True),
    "CATEGORY_SPACE": (r"\s", False),
    "CATEGORY_NOT_SPACE": (r"\s", True),
    "CATEGORY_WORD": (r"\w", False),
    "CATEGORY_NOT_WORD": (r"\w", True),
}

_UNSUPPORTED_FLAGS = ((re.LOCALE, "re.LOCALE / (?L) is not supported"),)
_TYPE_FLAGS = re.ASCII | re.LOCALE | re.UNICODE


@memo
def compile_regex(pattern: str, flags: int = 0) -> DFA:
    """Compile a Python regex to a minimal byte-level DFA (cached).

    Raises ``RegexSyntaxError`` (with the position) for invalid syntax,
    ``UnsupportedRegexFeature`` naming the feature for non-regular constructs, and
    ``EmptyLanguageError`` when nothing can match (naming the lone surrogate, and its
    position, where one is why: no UTF-8 text holds U+D800..U+DFFF).

    Example::

        >>> dfa = compile_regex(r"\\d{3}-\\d{4}")
        >>> dfa.matches("555-1234".encode()), dfa.matches(b"5551234")
        (True, False)
    """
    if not isinstance(pattern, str):
        raise TypeError(f"regex pattern must be a str, not {type(pattern).__name__}")

    def dfa_of(rx: str, search: bool) -> DFA:
        nfa = NFA()
        start, end = regex_to_nfa(rx, nfa, flags, search=search)
        return determinize(nfa, start, end)

    try:
        looked = lookahead_dfa(pattern, flags, dfa_of, False)
        return looked if looked is not None else dfa_of(pattern, False)
    except EmptyLanguageError as e:
        why = lone_surrogate_reason(pattern, flags)
        if why is None:
            raise
        raise EmptyLanguageError(f"{e}: {why}") from None


def literal_ignore_case_fragment(nfa: NFA, text: str) -> tuple[int, int] | None:
    """``(?i:`` ``re.escape(text)`` ``)`` added to ``nfa`` as a fragment ``(start,
    end)``, built directly: per character, the characters ``re`` matches it with
    (``k`` also matches the Kelvin sign U+212A, ``i`` also İ and ı), as a trie of
    their UTF-8 bytes ending in the next character's state (~5 µs a keyword, where
    the regex compiler's parse takes ~0.1 ms). None for empty text, and where a
    character has no UTF-8 encoding (a lone surrogate: the regex compiler words why).

    Example::

        >>> nfa = NFA()
        >>> start, end = literal_ignore_case_fragment(nfa, "select")
    """
    chars = [_case_char(ch) for ch in text]
    if not chars or None in chars:
        return None
    start = state = nfa.state()
    for inner, edges in chars:
        nxt = nfa.add_states(inner + 1)  # the next character's state, then this one's inner states
        for at, byte, to in edges:
            nfa.edge(state if at == 0 else nxt + at, byte, byte, nxt if to < 0 else nxt + to)
        state = nxt
    return start, state


@functools.lru_cache(maxsize=4096)
def _case_char(ch: str) -> tuple[int, tuple[tuple[int, int, int], ...]] | None:
    """One character of ``literal_ignore_case_fragment``: the trie of the UTF-8
    bytes of the characters ``re`` matches it with, as ``(inner states, edges)``, an
    edge ``(from, byte, to)`` between 0 (the character's first state), the inner
    states 1.. and -1 (the next character's state); None where no character encodes."""
    encodings = [chr(c).encode("utf-8") for lo, hi in _fold_literal(ord(ch), False) for c in range(lo, hi + 1)
                 if not 0xD800 <= c <= 0xDFFF]
    if not encodings:
        return None
    inner: dict[bytes, int] = {}  # a proper prefix of an encoding -> its inner state
    edges = []
    for e in encodings:
        at = 0
        for k in range(1, len(e)):
            got = inner.get(e[:k])
            if got is None:
                got = inner[e[:k]] = len(inner) + 1
                edges.append((at, e[k - 1], got))
            at = got
        edges.append((at, e[-1], -1))
    return len(inner), tuple(edges)


def lone_surrogate_reason(pattern: str, flags: int = 0) -> str | None:
    """Why a pattern with an empty language needs a lone surrogate, where it does: a
    literal (or a class of nothing else) in U+D800..U+DFFF, which ``re`` matches in a
    str but no UTF-8 text can hold; the first one in the pattern is named, with its
    position. None where the pattern has none.

    Example::

        >>> lone_surrogate_reason("ab\\ud800")[:42]
        'it needs the lone surrogate U+D800 at posi'
        >>> lone_surrogate_reason("[^\\s\\S]") is None
        True
    """
    try:
        tree = sre_parse.parse(pattern, flags)
    except (re.error, RecursionError, ValueError):
        return None
    found = set()
    stack = [list(tree)]
    while stack:
        for op, av in stack.pop():
            if op is C.LITERAL and SURROGATES[0] <= av <= SURROGATES[1]:
                found.add(av)
            elif op is C.IN and all(o is C.LITERAL and SURROGATES[0] <= a <= SURROGATES[1]
                                    or o is C.RANGE and SURROGATES[0] <= a[0] and a[1] <= SURROGATES[1]
                                    for o, a in av):
                found.add(av[0][1] if av[0][0] is C.LITERAL else av[0][1][0])
            elif op is C.BRANCH:
                stack.extend(list(alt) for alt in av[1])
            elif op is C.SUBPATTERN:
                stack.append(list(av[3]))
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
                stack.append(list(av[2]))
    if not found:
        return None

    def position(cp: int) -> int | None:  # as written: the character itself, or \uXXXX / \UXXXXXXXX
        spelled = [pattern.find(chr(cp))] + [m.start() for m in re.finditer(
            rf"\\u{cp:04x}|\\U{cp:08x}", pattern, re.IGNORECASE)]
        return min((p for p in spelled if p >= 0), default=None)

    pos, cp = min(((position(cp), cp) for cp in found), key=lambda pc: (pc[0] is None, pc[0] or 0, pc[1]))
    where = f" at position {pos}" if pos is not None else ""
    return (f"it needs the lone surrogate U+{cp:04X}{where}, which has no UTF-8 encoding, so no text holds it "
            f"(pattern {pattern!r})")


def leading_lookaheads(pattern: str, flags: int = 0) -> tuple[str, list[tuple[bool, str]]] | None:
    """``(core, [(positive, X), ...])`` for a pattern that is ``^``, then lookaheads
    ``(?=X)`` / ``(?!X)``, then the rest (no alternation at its top level): ``core``
    is ``^`` and the rest. None for any other pattern (also under ``re.MULTILINE``,
    where ``^`` holds after newlines too, and ``re.VERBOSE``).

    Example::

        >>> leading_lookaheads("^(?!con$|nul$)(?=.{3})[a-z]+$")
        ('^[a-z]+$', [(False, 'con$|nul$'), (True, '.{3}')])
    """
    if flags & (re.MULTILINE | re.VERBOSE) or not pattern.startswith("^"):
        return None
    looks, at = [], 1
    while pattern.startswith(("(?=", "(?!"), at):
        end = _group_end(pattern, at)
        if end is None:
            return None
        looks.append((pattern[at + 2] == "=", pattern[at + 3 : end - 1]))
        at = end
    if not looks:
        return None
    items = list(_parse(pattern, flags))
    heads = [op for op, av in items[1 : 1 + len(looks)] if op in (C.ASSERT, C.ASSERT_NOT) and av[0] == 1]
    if items[0][0] is not C.AT or len(heads) != len(looks) or items[0][1] is not C.AT_BEGINNING:
        return None  # (the text was not split where the parser splits it)
    return "^" + pattern[at:], looks


def _group_end(pattern: str, at: int) -> int | None:
    """The index just past the ``)`` that closes the group opening at ``at``
    (escapes and character classes skipped), or None."""
    depth, i, in_class = 0, at, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            i += 1 + pattern.startswith("^", i + 1)
            if pattern.startswith("]", i):  # a "]" first in a class is itself
                i += 1
            continue
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def lookahead_dfa(pattern: str, flags: int, dfa_of, search: bool) -> DFA | None:
    """The DFA of ``pattern`` where it opens with lookaheads (``leading_lookaheads``),
    else None. ``dfa_of(rx, search)`` compiles a pattern without them in the
    caller's encoding (``search``: ``re.search`` semantics, else ``re.fullmatch``);
    the core has the caller's semantics (``search``), and a lookahead ``X`` is the
    texts that start with a match of it: ``^(?:X)`` searched (its ``$`` the text's
    end, as inside the lookahead). Raises ``EmptyLanguageError`` when no text is
    left."""
    split = leading_lookaheads(pattern, flags)
    if split is None:
        return None
    core, looks = split
    dfa = dfa_of(core, search)
    for positive, x in looks:
        starts = dfa_of(f"^(?:{x})", True)
        dfa = intersect(dfa, starts) if positive else difference(dfa, starts)
    return dfa


def regex_to_nfa(pattern: str, nfa: NFA, flags: int = 0, *, char_fragment=None, char_dfa=None,
                 search: bool = False) -> tuple[int, int]:
    r"""Add ``pattern`` to an existing NFA as a fragment (used by spec compilers).

    ``char_fragment(ranges)`` builds the fragment for one character from a code
    point set (default: its UTF-8 bytes; a JSON compiler passes the character's
    JSON encodings), and ``char_dfa(ranges)`` is the DFA it copies (a long counted
    run of one class, ``[\w-]{5,96}``, is then one DFA laid out directly,
    ``fsm.ops.repeat_unit``, not 96 copies for the subset construction to merge).
    ``search=True`` gives ``re.search`` semantics: the text must *contain* a match,
    except that ``^`` / ``$`` at the ends of a top-level alternative pin it to the
    start / end.
    """
    tree = _parse(pattern, flags)
    builder = _Builder(pattern, nfa, char_fragment, char_dfa if char_fragment is not None else utf8_char_dfa)
    first = len(nfa)
    frag = _built(builder, tree, search)
    if not builder.end_marks:
        return frag
    # "$" / "\Z" away from the end were built as mark bytes: resolved on the fragment's DFA.
    if any(s >= first for s in nfa.pending):  # (a lazy repetition inside: no DFA of it here)
        builder.fail("anchor $ away from the start/end of the pattern around a long repetition", ("$", "\\Z"),
                     "the pattern is too large to resolve it")
    resolved = _end_marks_resolved(determinize(nfa, *frag), builder.char_dfa(((10, 10),)), search)
    return embed(nfa, resolved)


def _built(builder: "_Builder", tree, search: bool) -> tuple[int, int]:
    nfa = builder.nfa
    flags = tree.state.flags
    if not search:
        return builder.sequence(tree, flags, True, True)
    # Search: text = [pad] match [pad]. A "^" (or "$") standing where the match
    # starts (ends) holds only when there is no padding on that side, so the
    # pattern is built once per padding combination, with those anchors either
    # satisfied or impossible. Without such anchors one copy suffices.
    variants = [(True, True), (False, True), (True, False), (False, False)] if _has_anchor(tree) else [(False, False)]
    frags = []
    builder.search = True
    for anchored_start, anchored_end in variants:
        builder.allow_start, builder.allow_end = anchored_start, anchored_end
        parts = [] if anchored_start else [builder.any_text()]
        parts.append(builder.sequence(_searched_core(list(tree), anchored_start, anchored_end), flags, True, True))
        if not anchored_end:
            parts.append(builder.any_text())
        frags.append(nfa.concat(parts))
    return nfa.union(frags) if len(frags) > 1 else frags[0]


def _searched_core(items: list, anchored_start: bool, anchored_end: bool) -> list:
    r"""The items of a searched pattern, with a counted repetition that stands at an
    end left open to any text cut to its minimum: a text holds ``A X{lo,hi}``
    somewhere exactly when it holds ``A X{lo}`` (the shorter match is a prefix of the
    longer one), and the same at the start. ``\w{1,16}`` under search is one word
    character, not a 16-step counter inside two runs of any text (0.5 s to build)."""
    for at, open_end in ((-1, not anchored_end), (0, not anchored_start)):
        if open_end and items and items[at][0] in (C.MAX_REPEAT, C.MIN_REPEAT):
            lo, _hi, sub = items[at][1]
            cut = [] if lo == 0 else [(items[at][0], (lo, lo, sub))]
            items = items[:-1] + cut if at == -1 else cut + items[1:]
    return items


def _parse(pattern: str, flags: int):
    """Python's own parse tree; its errors become ``RegexSyntaxError`` with the position."""
    try:
        return sre_parse.parse(pattern, flags)
    except re.error as e:
        raise RegexSyntaxError(f"invalid regex: {e.msg}", pattern, e.pos) from None
    except RecursionError:
        raise RegexSyntaxError("invalid regex: nested too deeply", pattern, None) from None
    except ValueError as e:  # flags re refuses for a str pattern (re.LOCALE)
        raise UnsupportedRegexFeature(f"unsupported regex flags: {e}") from None


def _has_anchor(items) -> bool:
    for op, av in items:
        if op is C.AT:
            return True
        if op is C.BRANCH and any(_has_anchor(alt) for alt in av[1]):
            return True
        if op is C.SUBPATTERN and _has_anchor(av[3]):
            return True
        if op in (C.MAX_REPEAT, C.MIN_REPEAT) and _has_anchor(av[2]):
            return True
    return False


#: Counted runs of one character class at least this long are laid out as one DFA.
COUNTED_RUN_MIN = 8


#: Bytes no UTF-8 text (nor JSON encoding) holds, standing for "$" (the text's end, or
#: just before its final newline) and "\\Z" (its end) away from a pattern's end.
END_MARK, STRICT_END_MARK = 0xFF, 0xFE


def _end_marks_resolved(dfa: DFA, newline: DFA, search: bool) -> DFA:
    """``dfa`` (over text and mark bytes) as the texts it accepts with each mark where
    its anchor holds, the marks dropped: a "$" mark at the text's end or just before
    its final newline (``newline``: that character's encodings, a DFA), a "\\Z" mark
    at the end. With ``search`` a match that ends at a "$" mark may leave that final
    newline unread (``re.search("(a$)b?", "a\\n")``).

    The product of ``dfa`` with where the text stands against the marks met: before
    any; at a "$" mark with the newline's DFA in state k (k = 0: nothing read since);
    past that newline (nothing more); at a "\\Z" mark (nothing more). A mark met
    again keeps the layer ("$$" holds where "$" does)."""
    lo, hi, target, spans, accepting = dfa.flat_edges()
    n_lo, n_hi, n_target, n_spans, n_accepting = newline.flat_edges()
    n, m = len(spans), len(n_spans)
    nfa = NFA()
    base = nfa.add_states(3 * n + n * m + 1)
    final = base + 3 * n + n * m

    def before(q: int) -> int:
        return base + q

    def past_newline(q: int) -> int:
        return base + n + q

    def strict_end(q: int) -> int:
        return base + 2 * n + q

    def at_end(q: int, k: int) -> int:
        return base + 3 * n + q * m + k

    targets, n_targets = target.tolist(), n_target.tolist()
    for q, (a, b) in enumerate(spans):
        for i in range(a, b):
            t = targets[i]
            if lo[i] < STRICT_END_MARK:  # text: before any mark, or a newline's bytes after "$"
                top = min(hi[i], STRICT_END_MARK - 1)
                nfa.edge(before(q), lo[i], top, before(t))
                for k, (na, nb) in enumerate(n_spans):
                    for j in range(na, nb):
                        low, high = max(lo[i], n_lo[j]), min(top, n_hi[j])
                        if low <= high:
                            nfa.edge(at_end(q, k), low, high, at_end(t, n_targets[j]))
            for mark in (STRICT_END_MARK, END_MARK):
                if lo[i] <= mark <= hi[i]:
                    reached = at_end(t, 0) if mark == END_MARK else strict_end(t)
                    nfa.epsilon(before(q), reached)
                    nfa.epsilon(at_end(q, 0), reached)
                    nfa.epsilon(past_newline(q), past_newline(t))
                    nfa.epsilon(strict_end(q), strict_end(t))
    for q in range(n):
        for k in n_accepting:  # the final newline read after a "$" mark
            nfa.epsilon(at_end(q, k), past_newline(q))
    for q in accepting:
        for s in (before(q), past_newline(q), strict_end(q), at_end(q, 0)):
            nfa.epsilon(s, final)
    if search:  # the newline left after a match that ends at a "$" mark
        unread = embed(nfa, newline)
        nfa.epsilon(unread[1], final)
        for q in accepting:
            nfa.epsilon(at_end(q, 0), unread[0])
    return determinize(nfa, before(0), final)


@memo
def utf8_char_dfa(ranges: tuple) -> DFA:
    """The DFA of one character from a code point set, as UTF-8."""
    nfa = NFA()
    s, e = nfa.code_points(ranges)
    return determinize(nfa, s, e)


@memo
def _counted_run(char_dfa, ranges: tuple, lo: int, hi: int | None) -> DFA | None:
    return repeat_unit(char_dfa(ranges), lo, hi)


class _Builder:
    def __init__(self, pattern: str, nfa: NFA | None = None, char_fragment=None, char_dfa=None):
        self.pattern = pattern
        self.nfa = nfa if nfa is not None else NFA()
        self.chars = char_fragment if char_fragment is not None else self.nfa.code_points
        self.char_dfa = char_dfa  # the DFA ``chars`` copies (None: unknown)
        # In search mode: whether a start (end) anchor can hold in this copy.
        self.allow_start = True
        self.allow_end = True
        self.search = False  # re.search semantics (``regex_to_nfa(search=True)``)
        self.end_marks = False  # whether a "$" / "\\Z" stands away from the end (a mark byte)

    def optional(self, frag):
        return self.nfa.union([frag, self.nfa.empty()])

    def never(self):
        """A fragment no input can cross."""
        return self.nfa.state(), self.nfa.state()

    def any_text(self):
        """Any run of characters (the unanchored ends of a search). Its loop takes
        any character and stays alive, so it has an unbounded room (``NFA.rooms``):
        the token index then takes every plain token whole while a search is on,
        instead of walking the vocabulary at each of its states."""
        return self.nfa.repeat(lambda: self.chars([(0, MAX_CODE_POINT)]), 0, None, any_char=True)

    def fail(self, what: str, markers=(), reason: str = "it is not a regular-language feature, so no "
                                                         "automaton can enforce it") -> None:
        pos = min((p for p in (self.pattern.find(m) for m in markers) if p >= 0), default=None)
        where = f" at position {pos}" if pos is not None else ""
        raise UnsupportedRegexFeature(f"{what}{where} is not supported: {reason} (pattern {self.pattern!r})")

    def check_flags(self, flags: int) -> None:
        for flag, message in _UNSUPPORTED_FLAGS:
            if flags & flag:
                raise UnsupportedRegexFeature(f"{message} (pattern {self.pattern!r})")

    def sequence(self, items, flags: int, at_start: bool, at_end: bool):
        self.check_flags(flags)
        items = list(items)
        frags = []
        for i, (op, av) in enumerate(items):
            only_anchors_before = all(items[j][0] is C.AT for j in range(i))
            only_anchors_after = all(items[j][0] is C.AT for j in range(i + 1, len(items)))
            frags.append(
                self.item(op, av, flags, at_start and only_anchors_before, at_end and only_anchors_after)
            )
        return self.nfa.concat(frags)

    def item(self, op, av, flags: int, at_start: bool, at_end: bool):
        nfa = self.nfa
        name = str(op)
        if name in _NOT_REGULAR:
            what, markers = _NOT_REGULAR[name]
            if name in ("ASSERT", "ASSERT_NOT"):
                if av[0] < 0:
                    what = "lookbehind assertion" if name == "ASSERT" else "negative lookbehind assertion"
                self.fail(what, markers[:1] if av[0] > 0 else markers[1:],
                          "a lookahead is taken only right after the pattern's leading ^ (^(?!X)... or "
                          "^(?=X)..., as automaton algebra); lookbehinds are not taken")
            self.fail(what, markers)
        if op in _ONE_CHARACTER:
            return self.chars(self.char_ranges(op, av, flags))
        if op is C.BRANCH:
            return nfa.union(self.sequence(alt, flags, at_start, at_end) for alt in av[1])
        if op is C.SUBPATTERN:
            _group, add_flags, del_flags, sub = av
            if add_flags & _TYPE_FLAGS:  # (?a:...) / (?u:...) replace the outer type, as in re
                flags &= ~_TYPE_FLAGS
            return self.sequence(sub, (flags | add_flags) & ~del_flags, at_start, at_end)
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            lo, hi, sub = av
            hi = None if hi == C.MAXREPEAT else hi
            if (self.char_dfa is not None and not nfa.lazy and max(lo, hi or 0) >= COUNTED_RUN_MIN
                    and len(sub) == 1 and sub[0][0] in _ONE_CHARACTER):
                ranges = tuple(normalize(list(self.char_ranges(*sub[0], flags))))
                counted = _counted_run(self.char_dfa, ranges, lo, hi) if ranges else None  # (empty: no DFA)
                if counted is not None:
                    return embed(nfa, counted)
            return nfa.repeat(lambda: self.sequence(sub, flags, False, False), lo, hi)
        if op is C.AT:
            return self.anchor(av, flags, at_start, at_end)
        self.fail(f"regex construct {name}")

    def char_ranges(self, op, av, flags: int):
        """The code point set of a one-character item (``_ONE_CHARACTER``)."""
        if op is C.LITERAL:
            if flags & re.IGNORECASE:
                return list(_fold_literal(av, bool(flags & re.ASCII)))
            return [(av, av)]
        if op is C.NOT_LITERAL:
            if flags & re.IGNORECASE:
                return complement(list(_fold_literal(av, bool(flags & re.ASCII))))
            return complement([(av, av)])
        if op is C.ANY:
            return [(0, MAX_CODE_POINT)] if flags & re.DOTALL else complement([(10, 10)])
        return self.char_set(av, flags)

    def anchor(self, av, flags: int, at_start: bool, at_end: bool):
        kind = str(av)
        multiline = bool(flags & re.MULTILINE)
        if kind in ("AT_BEGINNING", "AT_BEGINNING_STRING") and at_start:
            if not self.allow_start:
                return self.never()
            if self.search and kind == "AT_BEGINNING" and multiline:
                # (?m)^ also holds right after a newline: text before the match ends with one.
                return self.optional(self.nfa.concat([self.any_text(), self.chars([(10, 10)])]))
            return self.nfa.empty()
        if kind in ("AT_END", "AT_END_STRING") and at_end:
            if not self.allow_end:
                return self.never()
            if self.search and kind == "AT_END":
                # $ also holds before a final newline, (?m)$ before any newline: as in
                # re.search("a$", "a\n"), which the validator runs.
                tail = [self.chars([(10, 10)])] + ([self.any_text()] if multiline else [])
                return self.optional(self.nfa.concat(tail))
            return self.nfa.empty()
        if kind in ("AT_END", "AT_END_STRING") and not (kind == "AT_END" and multiline):
            # The text's end (or, for "$", its final newline) away from the pattern's
            # end: a mark byte here, resolved on the whole fragment (_end_marks_resolved).
            mark = END_MARK if kind == "AT_END" else STRICT_END_MARK
            self.end_marks = True
            s = self.nfa.state()
            e = self.nfa.state()
            self.nfa.edge(s, mark, mark, e)
            return s, e
        if kind in ("AT_BOUNDARY", "AT_NON_BOUNDARY"):
            self.fail("word boundary \\b / \\B", ("\\b", "\\B"))
        symbol = {"AT_BEGINNING": "^", "AT_BEGINNING_STRING": "\\A", "AT_END": "$"}.get(kind, "\\Z")
        self.fail(f"anchor {symbol} away from the start/end of the pattern", (symbol,))

    def char_set(self, items, flags: int):
        for op, _av in items:
            if op not in (C.NEGATE, C.LITERAL, C.RANGE, C.CATEGORY):
                self.fail(f"character-class item {op}")
        ranges = _class_set(items, flags)
        return complement(ranges) if any(op is C.NEGATE for op, _av in items) else ranges


def _category(name: str, flags: int) -> Ranges:
    pattern, negated = _CATEGORIES[name]
    got = list(ranges_matching(pattern, re.ASCII if flags & re.ASCII else 0))
    return complement(got) if negated else got


# -- case-insensitive matching -------------------------------------------------------
#
# This mirrors what re's compiler and _sre do with IGNORECASE (not LOCALE), so the
# languages agree exactly:
#
# * a cased literal ``c`` matches the characters whose lowercase (``_sre`` simple
#   lowercase; ASCII letters only under re.ASCII) is ``lower(c)`` or one of the extra
#   cases of ``lower(c)`` (``re._casefix``: s/ſ, k/K, the sigmas, ...);
# * a class with anything cased in it is folded into a set ``S`` (each member
#   replaced by its lowercase plus extra cases; \d \w \s kept as written) and matches
#   the characters whose lowercase is in ``S``; a range reaching past the BMP is
#   kept as written and also matches when ``upper(lower(ch))`` falls in it. A class
#   with nothing cased is matched as written. Negation applies last.
#
# Sets of characters "whose lowercase is in S" are preimages under a code point map;
# the maps are stored as the ~1,400-3,000 points they change, so a preimage costs a
# few bisections per range of S whatever the size of S.

BMP_MAX = 0xFFFF


class _CaseMap:
    """A code point map ``f``, stored as the points it changes, sorted both ways."""

    def __init__(self, pairs):
        pairs = sorted((c, v) for c, v in pairs if c != v)
        self.keys = [c for c, _ in pairs]
        self.key_vals = [v for _, v in pairs]
        by_val = sorted((v, c) for c, v in pairs)
        self.vals = [v for v, _ in by_val]
        self.keys_by_val = [c for _, c in by_val]

    def _cut(self, ranges):
        """The ranges without the changed points, and the index span of each cut-out run."""
        kept, spans = [], []
        for lo, hi in ranges:
            i, j = bisect.bisect_left(self.keys, lo), bisect.bisect_right(self.keys, hi)
            start = lo
            for k in self.keys[i:j]:
                if k > start:
                    kept.append((start, k - 1))
                start = k + 1
            if start <= hi:
                kept.append((start, hi))
            spans.append((i, j))
        return kept, spans

    def image(self, ranges) -> Ranges:
        """``{f(c) : c in ranges}``."""
        kept, spans = self._cut(normalize(ranges))
        kept.extend((v, v) for i, j in spans for v in self.key_vals[i:j])
        return normalize(kept)

    def preimage(self, ranges) -> Ranges:
        """``{c : f(c) in ranges}``."""
        ranges = normalize(ranges)
        kept, _ = self._cut(ranges)
        for lo, hi in ranges:
            i, j = bisect.bisect_left(self.vals, lo), bisect.bisect_right(self.vals, hi)
            kept.extend((c, c) for c in self.keys_by_val[i:j])
        return normalize(kept)


class _CaseTables:
    """What re's IGNORECASE needs, derived from ``_sre`` itself (built once, lazily)."""

    def __init__(self):
        lower = _sre.unicode_tolower
        #: Every code point with a case mapping (``_sre.unicode_iscased``), sorted.
        self.cased = list(filter(_sre.unicode_iscased, range(MAX_CODE_POINT + 1)))
        # _sre's uppercase is the first character of the full mapping (str.upper()).
        upper = {c: ord(chr(c).upper()[0]) for c in self.cased}
        self.lower = _CaseMap((c, lower(c)) for c in self.cased)
        self.upper = _CaseMap(upper.items())
        self.upper_of_lower = _CaseMap((c, upper.get(lower(c), lower(c))) for c in self.cased)
        self.ascii_lower = _CaseMap((c, c + 32) for c in range(ord("A"), ord("Z") + 1))
        # gh-126505: before the fix, a literal beyond the BMP in a class was kept
        # unfolded (an upper-case one then matched nothing), and under re.ASCII a
        # range reaching past the BMP also matched by Unicode uppercase. Follow the
        # running re, whichever it is.
        self.fold_wide_literal = re.fullmatch("(?i)[a\U00010400]", "\U00010400") is not None
        self.ascii_wide_range_upper = (
            re.fullmatch("[\ua7aa-\U00010000]", "\u0266", re.ASCII | re.IGNORECASE) is not None
        )

    def any_cased(self, lo: int, hi: int) -> bool:
        i = bisect.bisect_left(self.cased, lo)
        return i < len(self.cased) and self.cased[i] <= hi


@functools.lru_cache(maxsize=None)
def _case_tables() -> _CaseTables:
    return _CaseTables()


def _ascii_cased(lo: int, hi: int) -> bool:
    return (lo <= ord("Z") and hi >= ord("A")) or (lo <= ord("z") and hi >= ord("a"))


def _contains(ranges: Ranges, x: int) -> bool:
    i = bisect.bisect_right(ranges, (x, MAX_CODE_POINT + 1)) - 1
    return i >= 0 and ranges[i][0] <= x <= ranges[i][1]


@functools.lru_cache(maxsize=4096)
def _fold_literal(c: int, ascii_only: bool) -> tuple[tuple[int, int], ...]:
    """The characters that re matches with the literal ``c`` under IGNORECASE."""
    if ascii_only:
        if not _sre.ascii_iscased(c):
            return ((c, c),)
        lo = _sre.ascii_tolower(c)
        return tuple(_case_tables().ascii_lower.preimage([(lo, lo)]))
    if not _sre.unicode_iscased(c):
        return ((c, c),)
    lo = _sre.unicode_tolower(c)
    targets = [(x, x) for x in (lo, *_EXTRA_CASES.get(lo, ()))]
    return tuple(_case_tables().lower.preimage(targets))


def _class_set(items, flags: int) -> Ranges:
    """The code points a class matches before its negation (if any) is applied (a
    copy: each copy of a counted item asks again, and ``\\w`` is 734 ranges, ~1 ms
    to gather and normalise)."""
    return list(_class_set_of(tuple(items), flags))


@functools.lru_cache(maxsize=1024)
def _class_set_of(items: tuple, flags: int) -> tuple:
    if not flags & re.IGNORECASE:
        ranges: Ranges = []
        for op, av in items:
            if op is C.LITERAL:
                ranges.append((av, av))
            elif op is C.RANGE:
                ranges.append(av)
            elif op is C.CATEGORY:
                ranges.extend(_category(str(av), flags))
        return tuple(normalize(ranges))
    return tuple(_fold_class(items, flags))


def _fold_class(items, flags: int) -> Ranges:
    """The code points of a class under IGNORECASE, as re matches them (before negation)."""
    tables = _case_tables()
    ascii_only = bool(flags & re.ASCII)
    if ascii_only:
        lower, tolower, iscased, fixes = tables.ascii_lower, _sre.ascii_tolower, _sre.ascii_iscased, {}
        any_cased = _ascii_cased
    else:
        lower, tolower, iscased, fixes = tables.lower, _sre.unicode_tolower, _sre.unicode_iscased, _EXTRA_CASES
        any_cased = tables.any_cased
    plain: Ranges = []  # the class as written
    folded: Ranges = []  # what a character's lowercase is tested against
    wide: Ranges = []  # ranges past the BMP that also match by upper(lower(ch))
    hascased = False

    def add_folded(ranges: Ranges) -> None:
        image = lower.image(ranges)
        folded.extend(image)
        folded.extend((x, x) for k, extra in fixes.items() if _contains(image, k) for x in extra)

    for op, av in items:
        if op is C.LITERAL:
            plain.append((av, av))
            lo = tolower(av)
            if lo <= BMP_MAX:
                add_folded([(av, av)])
                hascased = hascased or iscased(av)
            elif tables.fold_wide_literal:
                folded.append((lo, lo))
                hascased = hascased or iscased(lo)
            else:
                folded.append((av, av))
                hascased = True
        elif op is C.RANGE:
            a, b = av
            plain.append((a, b))
            if b <= BMP_MAX:
                add_folded([(a, b)])
                hascased = hascased or any_cased(a, b)
            else:
                if a <= BMP_MAX:
                    add_folded([(a, BMP_MAX)])
                folded.append((a, b))
                hascased = True
                if not ascii_only or tables.ascii_wide_range_upper:
                    wide.append((a, b))
        elif op is C.CATEGORY:
            got = _category(str(av), flags)
            plain.extend(got)
            folded.extend(got)
    if not hascased:
        return normalize(plain)
    out = lower.preimage(folded)
    upper = tables.upper if ascii_only else tables.upper_of_lower
    for r in wide:
        out.extend(upper.preimage([r]))
    return normalize(out)
