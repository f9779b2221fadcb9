"""Lark grammar text to terminals (bits of one shared table) and an integer CFG.

::

    lark text ──grammars.lark_reader, else lark's own loader──> rules + terminal
              patterns + %ignore, exactly as lark compiles them (?rule, aliases,
              templates, [..] and (..)* expansion, %import common; lark's loader for the
              rest and for every grammar with an error, whose messages keep
              their line and column)
    terminals ──fsm regex compiler──> one NFA, a fragment per terminal from one start
              (lark's common.lark terminals copied from shipped DFAs:
              common_dfas.npz); the lexer reads it as one table, a bit per
              terminal, determinised as lexing reaches it (grammars.terminal_tables)
    rules     ──symbols to ints, trim──> CFG for grammars.earley

Before either writes alternatives out, they are counted on the parse of the text
(``MAX_EXPANDED_ALTERNATIVES``): nested groups multiply them, and lark's loader,
which no compile time limit reaches, would run for hours on a few kilobytes of
them.

Tree-shaping features (``?rule`` inlining, aliases, ``_hidden`` names) do not change
the language, so they need nothing here. Lexing is longest match among the terminals
the parser allows (see ``grammars.lexer``); when several accept the same lexeme, the
higher priority wins, then a string literal over a regex, as in lark.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from guided.errors import GrammarError, RegexError, UnsupportedRegexFeature
from guided.fsm.dfa import DFA
from guided.fsm.dfa_archive import DfaArchive
from guided.fsm.nfa import NFA
from guided.fsm.ops import embed
from guided.fsm.regex import compile_regex, literal_ignore_case_fragment, regex_to_nfa

from .earley import CFG, productive_symbols, trim
from .lark_reader import read_lark
from .lexer import TerminalView
from .terminal_tables import PointTable, RuleEnds, SharedPointTable

# lark's common.lark terminals that use a lookbehind, with regular equivalents: the
# language of lexemes lark's regex matches, written without the assertion.
_REGULAR_EQUIVALENTS = {
    # "  .*?  (?<!\\)(\\\\)*?  "   == a quote-free run where \ escapes the next char
    r'".*?(?<!\\)(\\\\)*?"': r'"(?:[^"\\\n]|\\[^\n])*"',
    r"'.*?(?<!\\)(\\\\)*?'": r"'(?:[^'\\\n]|\\[^\n])*'",
}


#: Most alternatives lark's loader may write out for a grammar's rules. Lark turns each
#: group of alternatives, ``[..]`` and ``?`` inside a sequence into whole alternatives
#: of the rule (``a (b|c) [d]`` is four), so nested ones multiply: a grammar of a few
#: kilobytes can ask for billions. Lark's loading, which no time limit reaches, grows
#: faster than the count (its FIRST / FOLLOW sets: ~1 s for 5,000 alternatives, past
#: 20 s for 25,000), so grammars past this are refused before lark expands them. The
#: shipped ones write out fewer than 120.
MAX_EXPANDED_ALTERNATIVES = 5_000

#: lark's own thresholds (``lark.load_grammar``): a repetition ``~ n..m`` with ``m``
#: below the first is written out whole, larger ones as helper rules of at most the
#: second's repeats each.
_REPEAT_BREAK_THRESHOLD = 50
_SMALL_FACTOR_THRESHOLD = 5


class _TooManyAlternatives(Exception):
    """Raised inside ``_expanded_alternatives`` once the count passes the limit."""


def _expanded_alternatives(rule_defs, limit: int) -> tuple[int, str]:
    """An estimate of the alternatives lark's loader writes out for ``rule_defs`` (its
    parse of the grammar, before EBNF expansion), and the rule that writes the most;
    stops counting past ``limit``."""
    total = 0
    worst = (0, "")

    def count(tree) -> int:
        """Alternatives ``tree`` stands for inside its rule; helper rules lark adds for
        ``*``, ``+`` and long ``~`` go to ``total`` (as ``extra``)."""
        nonlocal extra
        data = getattr(tree, "data", None)
        if data is None:
            return 1
        kids = tree.children
        if data == "expansions":
            n = sum(count(k) for k in kids)
        elif data == "expansion":
            n = 1
            for k in kids:
                n *= count(k)
                if n > limit:
                    raise _TooManyAlternatives
        elif data == "alias":
            n = count(kids[0])
        elif data == "maybe":
            n = count(kids[0]) + 1
        elif data == "expr":
            inner = count(kids[0])
            op = str(kids[1])
            if op == "?":
                n = inner + 1
            elif op in ("*", "+"):
                extra += 2 * inner  # the helper rule: inner | helper inner
                n = 2 if op == "*" else 1
            else:  # "~ n" or "~ n..m"
                nums = [int(str(k)) for k in kids[2:]]
                lo, hi = nums[0], nums[-1]
                if hi < _REPEAT_BREAK_THRESHOLD:
                    n = 0
                    for k in range(lo, hi + 1):
                        n += inner ** k if inner > 1 else 1
                        if n > limit:
                            raise _TooManyAlternatives
                else:  # helper rules repeat it up to 2 * SMALL_FACTOR_THRESHOLD times each
                    if inner > 1 and 2 * _SMALL_FACTOR_THRESHOLD * math.log(inner) > math.log(limit):
                        raise _TooManyAlternatives
                    extra += (inner ** (2 * _SMALL_FACTOR_THRESHOLD)) * max(1, hi.bit_length())
                    n = 1
        else:  # a symbol, a literal, a template's use
            n = 1
        if n > limit or extra > limit:
            raise _TooManyAlternatives
        return n

    for name, _params, tree, _options in rule_defs:
        extra = 0
        try:
            n = count(tree) + extra
        except (_TooManyAlternatives, OverflowError, ValueError):
            return limit + 1, str(name)
        total += n
        worst = max(worst, (n, str(name)))
        if total > limit:
            return total, worst[1]
    return total, worst[1]


def _check_alternatives(rule_defs) -> None:
    """Refuse a grammar whose rules (as lark parses them, before EBNF expansion)
    write out more than ``MAX_EXPANDED_ALTERNATIVES`` alternatives."""
    alternatives, rule = _expanded_alternatives(rule_defs, MAX_EXPANDED_ALTERNATIVES)
    if alternatives > MAX_EXPANDED_ALTERNATIVES:
        raise GrammarError(
            f"grammar error: rule {rule!r} expands to more than {MAX_EXPANDED_ALTERNATIVES:,} alternatives "
            "(each group of alternatives, [..] and ? inside a sequence multiplies them): move nested "
            "groups into rules of their own")


def _load(text: str):
    """Lark's loaded grammar (``lark.load_grammar.Grammar``: its rules before EBNF
    expansion in ``rule_defs``), or None where this lark has no ``load_grammar`` of
    that shape; lark's own errors propagate."""
    try:
        from lark.load_grammar import load_grammar
    except ImportError:  # pragma: no cover - another lark
        return None
    try:
        return load_grammar(text, "<string>", [], False)[0]
    except TypeError:  # pragma: no cover - another signature
        return None


def _lark_parts(text: str, start: str) -> tuple[list, list, list]:
    """``(terminals, rules, ignored terminal names)`` as ``lark.Lark(text, start=start,
    parser="earley", lexer="dynamic")`` has them, and its errors: read directly
    (``grammars.lark_reader``) or, outside what that reads and for every grammar
    with an error, by lark's loader; then what lark's Earley frontend would check
    (the start rule, each terminal's regex), without building a parser guided does
    not use."""
    import lark

    parts = read_lark(text, start, lambda rules: _check_alternatives((n, (), t, None) for n, t in rules))
    if parts is not None:
        terminals, rules, ignore = parts
    else:
        grammar = _load(text)
        if grammar is None:  # pragma: no cover - another lark
            parsed = lark.Lark(text, start=start, parser="earley", lexer="dynamic")
            return parsed.terminals, parsed.rules, parsed.ignore_tokens
        _check_alternatives(getattr(grammar, "rule_defs", []))
        terminals, rules, ignore = grammar.compile([start], set())
    if not any(r.origin.name == start for r in rules):
        raise lark.exceptions.GrammarError(f"Using an undefined rule: NonTerminal({start!r})")
    for t in terminals:  # (lark's Earley frontend compiles them with re)
        re.compile(t.pattern.to_regexp())
    return terminals, rules, ignore


@dataclass
class CompiledGrammar:
    """Terminals, the trimmed CFG over their ids, and the ignored terminals.

    ``terminal_dfas``: per terminal, what ``grammars.lexer.Lexer`` reads it as: a
    ``TerminalView`` of a table the terminals share (lark grammars, recursive JSON
    Schemas), or a ``DFA``."""

    terminal_names: list[str]
    terminal_dfas: list[TerminalView | DFA]
    cfg: CFG
    ignore: frozenset[int]
    rule_names: dict[int, str]
    #: Per terminal, how it ranks when several accept the same lexeme (higher wins;
    #: None: no preference, the parser gets them all).
    ranks: list[tuple] | None = None
    #: How lexemes end: False, lark's longest match (a lexeme ends only where no
    #: allowed terminal can take the next byte); True, wherever its terminals accept
    #: (each reading followed, ``grammars.grammar_index``), for grammars whose
    #: terminals are cut at rule calls, where the longest reading may be the wrong one.
    every_end: bool = False


def _terminal_regex(term) -> str:
    regex = term.pattern.to_regexp()
    return regex if term.pattern.flags else _REGULAR_EQUIVALENTS.get(regex, regex)


#: The DFAs of lark's common.lark terminals (``%import common.WS`` and the like), by
#: their regexes, copied into a grammar's terminal NFA (``_fragment``): parsing and
#: building ``NUMBER``'s regex costs several times the copy. Written by
#: ``write_common_dfas``.
COMMON_DFAS = DfaArchive(Path(__file__).with_name("lark") / "common_dfas.npz")


def common_terminal_regexes() -> dict[str, str]:
    """The regex this module compiles for each terminal of lark's ``common.lark``
    that a grammar can import (named without a leading ``_``; literals left out:
    they are built directly)."""
    import lark

    text = (Path(lark.__file__).parent / "grammars" / "common.lark").read_text()
    regexes = {}
    for name in re.findall(r"^([A-Z][A-Z0-9_]*)\s*(?:\.\d+)?\s*:", text, re.MULTILINE):
        terminals, _, _ = _lark_parts(f"start: {name}\n%import common.{name}\n", "start")
        (term,) = [t for t in terminals if t.name == name]
        if type(term.pattern).__name__ != "PatternStr":
            regexes[name] = _terminal_regex(term)
    return regexes


def write_common_dfas() -> dict[str, int]:
    """Build the DFA of every ``common_terminal_regexes`` entry and write
    ``COMMON_DFAS``. Returns each one's state count.

    Example::

        >>> write_common_dfas()["WS"]
        2
    """
    entries = {name: (regex, compile_regex(regex)) for name, regex in common_terminal_regexes().items()}
    COMMON_DFAS.write(entries)
    return {name: dfa.num_states for name, (_, dfa) in entries.items()}


def _terminal_views(terminals) -> list[TerminalView]:
    """Each terminal as one bit of one table (``grammars.terminal_tables``): an NFA
    whose start leads into every terminal's fragment, each ending at a state of its
    own. Nothing is determinised here; the lexer's states are the construction's,
    made as lexing reaches them. ``GrammarError`` names a terminal whose regex is
    refused, or that matches the empty string or nothing."""
    nfa = NFA()
    point = nfa.state()
    ends = []
    for term in terminals:
        start, end = _fragment(nfa, term)
        nfa.epsilon(point, start)
        ends.append(end)
    rule = RuleEnds(nfa, ends)
    table = SharedPointTable(rule, point, walks=False) if rule.compiled else PointTable(rule, point)
    for i, term in enumerate(terminals):
        if table.start_accept >> i & 1:
            raise GrammarError(
                f"terminal {term.name} matches the empty string; every terminal must match at least one character"
            )
        if not table.start_live >> i & 1:  # (the regex compiler words why)
            try:
                compile_regex(_terminal_regex(term))
            except RegexError as e:
                raise GrammarError(f"terminal {term.name}: {e}") from None
            raise GrammarError(f"terminal {term.name} matches no string")
    return [TerminalView(table, 1 << i) for i in range(len(terminals))]


def _fragment(nfa: NFA, term) -> tuple[int, int]:
    """``term``'s language added to ``nfa`` as a fragment ``(start, end)``."""
    is_string = type(term.pattern).__name__ == "PatternStr"
    if is_string and not term.pattern.flags:  # ("+", "lambda": no regex to parse)
        return nfa.byte_string(term.pattern.value.encode("utf-8"))
    if is_string and term.pattern.flags == {"i"}:  # ("select"i: built directly, or None)
        got = literal_ignore_case_fragment(nfa, term.pattern.value)
        if got is not None:
            return got
    regex = _terminal_regex(term)
    try:
        dfa = COMMON_DFAS.get(regex)
        if dfa is not None:
            return embed(nfa, dfa)
        try:
            return regex_to_nfa(regex, nfa)
        except UnsupportedRegexFeature:  # (lookarounds the regex compiler resolves on DFAs)
            return embed(nfa, compile_regex(regex))
    except RegexError as e:
        raise GrammarError(f"terminal {term.name}: {e}") from None


def compile_lark(text: str, start: str = "start") -> CompiledGrammar:
    """Compile lark grammar text; raises ``GrammarError`` naming what is wrong.

    Example::

        >>> g = compile_lark('start: "a" start "b" | "c"')
        >>> g.terminal_names
        ['A', 'B', 'C']
    """
    import lark

    if not isinstance(text, str):
        raise TypeError(f"a lark grammar must be a str, not {type(text).__name__}")
    # lark checks terminal regexes with the ``regex`` module where it is installed: its
    # errors are not ``re.error``s.
    regex_errors = (re.error,) + ((sys.modules["regex"].error,) if "regex" in sys.modules else ())
    try:
        terminals, rules, ignore_tokens = _lark_parts(text, start)
    except lark.exceptions.GrammarError as e:
        msg = str(e)
        if "zero-width" in msg and e.args[1:]:
            name = getattr(e.args[1], "name", e.args[1])
            msg = f"terminal {name} matches the empty string; every terminal must match at least one character"
        raise GrammarError(f"grammar error: {msg}") from None
    except lark.exceptions.UnexpectedInput as e:
        raise GrammarError(f"grammar syntax error at line {e.line}, column {e.column}: {e}") from None
    except lark.exceptions.LarkError as e:
        raise GrammarError(f"grammar error: {e}") from None
    except regex_errors as e:  # a terminal's regex that re (or regex) refuses, checked by lark as it loads
        raise GrammarError(f"grammar error: invalid regex in a terminal: {e}") from None
    except OSError as e:  # %import of a grammar file that is not there
        name = getattr(e, "filename", None) or e
        raise GrammarError(f"grammar error: %import: cannot read {name}") from None
    except RecursionError:
        raise GrammarError("grammar error: the grammar nests too deeply") from None

    names = [t.name for t in terminals]
    term_id = {n: i for i, n in enumerate(names)}
    views = _terminal_views(terminals)

    nt_id: dict[str, int] = {}

    def symbol(sym) -> int:
        if sym.is_term:
            if sym.name not in term_id:
                raise GrammarError(f"terminal {sym.name} is declared but has no pattern (%declare is not supported)")
            return term_id[sym.name]
        return nt_id.setdefault(sym.name, len(names) + len(nt_id))

    start_id = nt_id.setdefault(start, len(names))
    rules = tuple((symbol(r.origin), tuple(symbol(s) for s in r.expansion)) for r in rules)
    cfg = CFG(len(names), rules, start_id)
    rule_names = {i: n for n, i in nt_id.items()}
    good = productive_symbols(cfg)
    if start_id not in good:
        raise GrammarError(
            f"the grammar's language is empty: rule {start!r} can never be completed "
            "(every alternative needs a rule that recurses without a way out)"
        )
    ignore = frozenset(term_id[n] for n in ignore_tokens if n in term_id)
    # As lark's lexers do: a higher priority wins a tie, then a string literal over a
    # regex (the keyword "select" over NAME), so keywords are never read as names.
    ranks = [(t.priority, type(t.pattern).__name__ == "PatternStr") for t in terminals]
    return CompiledGrammar(names, views, trim(cfg, good), ignore, rule_names, ranks)
