"""Python ``re`` syntax to a minimal byte-level DFA.

Parsing is Python's own (``re._parser``), so syntax, escapes, character-class
meaning and error positions are exactly those of ``re``; this module only walks the
parse tree. The DFA accepts the UTF-8 encoding of exactly the strings that
``re.fullmatch(pattern, s)`` accepts.

Supported: literals, classes (ranges, negation, ``\\d \\w \\s`` and negations, Unicode
or ``re.ASCII``), ``.`` (with or without ``re.DOTALL``), groups of every capturing
kind, alternation, ``* + ? {m} {m,} {m,n}`` greedy or lazy, verbose mode, ``^`` at
the start and ``$`` / ``\\Z`` at the end of the pattern.

Refused with a named error: lookarounds, backreferences, conditionals, possessive
quantifiers and atomic groups (not regular, or they change the language in a way an
automaton cannot follow), word boundaries, anchors in the middle, ``re.IGNORECASE`` and
``re.LOCALE``.
"""

from __future__ import annotations

import functools
import re

try:  # Python >= 3.11
    from re import _constants as C
    from re import _parser as sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as C  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

from .dfa import DFA, determinize
from .errors import RegexSyntaxError, UnsupportedRegexFeature
from .nfa import NFA
from .utf8 import MAX_CODE_POINT, complement, normalize, ranges_matching

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

_UNSUPPORTED_FLAGS = (
    (re.IGNORECASE, "re.IGNORECASE / (?i) is not supported; spell the cases out, e.g. [Aa]"),
    (re.LOCALE, "re.LOCALE / (?L) is not supported"),
)


@functools.lru_cache(maxsize=256)
def compile_regex(pattern: str, flags: int = 0) -> DFA:
    """Compile a Python regex to a minimal byte-level DFA (cached).

    Raises ``RegexSyntaxError`` (with the position) for invalid syntax,
    ``UnsupportedRegexFeature`` naming the feature for non-regular constructs, and
    ``EmptyLanguageError`` when nothing can match.

    Example::

        >>> dfa = compile_regex(r"\\d{3}-\\d{4}")
        >>> dfa.matches("555-1234".encode()), dfa.matches(b"5551234")
        (True, False)
    """
    if not isinstance(pattern, str):
        raise TypeError(f"regex pattern must be a str, not {type(pattern).__name__}")
    nfa = NFA()
    start, end = regex_to_nfa(pattern, nfa, flags)
    return determinize(nfa, start, end)


def regex_to_nfa(pattern: str, nfa: NFA, flags: int = 0, *, char_fragment=None, search: bool = False) -> tuple[int, int]:
    """Add ``pattern`` to an existing NFA as a fragment (used by spec compilers).

    ``char_fragment(ranges)`` builds the fragment for one character from a code
    point set (default: its UTF-8 bytes; a JSON compiler passes the character's
    JSON encodings). ``search=True`` gives ``re.search`` semantics: the text must
    *contain* a match, except that ``^`` / ``$`` at the ends of a top-level
    alternative pin it to the start / end.
    """
    tree = _parse(pattern, flags)
    builder = _Builder(pattern, nfa, char_fragment)
    flags = tree.state.flags
    if not search:
        return builder.sequence(tree, flags, True, True)
    # Search: text = [pad] match [pad]. A "^" (or "$") standing where the match
    # starts (ends) holds only when there is no padding on that side, so the
    # pattern is built once per padding combination, with those anchors either
    # satisfied or impossible. Without such anchors one copy suffices.
    variants = [(True, True), (False, True), (True, False), (False, False)] if _has_anchor(tree) else [(False, False)]
    frags = []
    for anchored_start, anchored_end in variants:
        builder.allow_start, builder.allow_end = anchored_start, anchored_end
        parts = [] if anchored_start else [builder.any_text()]
        parts.append(builder.sequence(tree, flags, True, True))
        if not anchored_end:
            parts.append(builder.any_text())
        frags.append(nfa.concat(parts))
    return nfa.union(frags) if len(frags) > 1 else frags[0]


def _parse(pattern: str, flags: int):
    """Python's own parse tree; its errors become ``RegexSyntaxError`` with the position."""
    try:
        return sre_parse.parse(pattern, flags)
    except re.error as e:
        raise RegexSyntaxError(f"invalid regex: {e.msg}", pattern, e.pos) from None
    except RecursionError:
        raise RegexSyntaxError("invalid regex: nested too deeply", pattern, None) from None


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


class _Builder:
    def __init__(self, pattern: str, nfa: NFA | None = None, char_fragment=None):
        self.pattern = pattern
        self.nfa = nfa if nfa is not None else NFA()
        self.chars = char_fragment if char_fragment is not None else self.nfa.code_points
        # In search mode: whether a start (end) anchor can hold in this copy.
        self.allow_start = True
        self.allow_end = True

    def never(self):
        """A fragment no input can cross."""
        return self.nfa.state(), self.nfa.state()

    def any_text(self):
        """Any run of characters (the unanchored ends of a search)."""
        return self.nfa.repeat(lambda: self.chars([(0, MAX_CODE_POINT)]), 0, None)

    def fail(self, what: str, markers=()) -> None:
        pos = min((p for p in (self.pattern.find(m) for m in markers) if p >= 0), default=None)
        where = f" at position {pos}" if pos is not None else ""
        raise UnsupportedRegexFeature(
            f"{what}{where} is not supported: it is not a regular-language feature, "
            f"so no automaton can enforce it (pattern {self.pattern!r})"
        )

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
            if name == "ASSERT" and av[0] < 0:
                what = "lookbehind assertion"
            self.fail(what, markers)
        if op is C.LITERAL:
            return self.chars([(av, av)])
        if op is C.NOT_LITERAL:
            return self.chars(complement([(av, av)]))
        if op is C.ANY:
            if flags & re.DOTALL:
                return self.chars([(0, MAX_CODE_POINT)])
            return self.chars(complement([(10, 10)]))
        if op is C.IN:
            return self.chars(self.char_set(av, flags))
        if op is C.BRANCH:
            return nfa.union(self.sequence(alt, flags, at_start, at_end) for alt in av[1])
        if op is C.SUBPATTERN:
            _group, add_flags, del_flags, sub = av
            return self.sequence(sub, (flags | add_flags) & ~del_flags, at_start, at_end)
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            lo, hi, sub = av
            hi = None if hi == C.MAXREPEAT else hi
            return nfa.repeat(lambda: self.sequence(sub, flags, False, False), lo, hi)
        if op is C.AT:
            return self.anchor(av, at_start, at_end)
        self.fail(f"regex construct {name}")

    def anchor(self, av, at_start: bool, at_end: bool):
        kind = str(av)
        if kind in ("AT_BEGINNING", "AT_BEGINNING_STRING") and at_start:
            return self.nfa.empty() if self.allow_start else self.never()
        if kind in ("AT_END", "AT_END_STRING") and at_end:
            return self.nfa.empty() if self.allow_end else self.never()
        if kind in ("AT_BOUNDARY", "AT_NON_BOUNDARY"):
            self.fail("word boundary \\b / \\B", ("\\b", "\\B"))
        symbol = {"AT_BEGINNING": "^", "AT_BEGINNING_STRING": "\\A", "AT_END": "$"}.get(kind, "\\Z")
        self.fail(f"anchor {symbol} away from the start/end of the pattern", (symbol,))

    def char_set(self, items, flags: int):
        ranges = []
        negate = False
        for op, av in items:
            if op is C.NEGATE:
                negate = True
            elif op is C.LITERAL:
                ranges.append((av, av))
            elif op is C.RANGE:
                ranges.append(av)
            elif op is C.CATEGORY:
                pattern, negated = _CATEGORIES[str(av)]
                got = list(ranges_matching(pattern, re.ASCII if flags & re.ASCII else 0))
                ranges.extend(complement(got) if negated else got)
            else:
                self.fail(f"character-class item {op}")
        ranges = normalize(ranges)
        return complement(ranges) if negate else ranges
