"""Lark grammar text to a terminal list (byte-level DFAs) and an integer CFG.

::

    lark text ──lark's own loader──> rules + terminal patterns + %ignore
              (%import, templates, ?rule, aliases, [..] and (..)* expansion:
               all lark's; its errors keep their line and column)
    terminals ──fsm regex compiler──> one minimal DFA per terminal
    rules     ──symbols to ints, trim──> CFG for grammars.earley

Tree-shaping features (``?rule`` inlining, aliases, ``_hidden`` names) do not change
the language, so they need nothing here. Lexing is longest match among the terminals
the parser allows (see ``grammars.lexer``); when several accept the same lexeme, the
higher priority wins, then a string literal over a regex, as in lark.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from guided.errors import GrammarError, RegexError
from guided.fsm.dfa import DFA
from guided.fsm.regex import compile_regex

from .earley import CFG, productive_symbols, trim

# lark's common.lark terminals that use a lookbehind, with regular equivalents: the
# language of lexemes lark's regex matches, written without the assertion.
_REGULAR_EQUIVALENTS = {
    # "  .*?  (?<!\\)(\\\\)*?  "   == a quote-free run where \ escapes the next char
    r'".*?(?<!\\)(\\\\)*?"': r'"(?:[^"\\\n]|\\[^\n])*"',
    r"'.*?(?<!\\)(\\\\)*?'": r"'(?:[^'\\\n]|\\[^\n])*'",
}


@dataclass
class CompiledGrammar:
    """Terminals as DFAs, the trimmed CFG over their ids, and the ignored terminals."""

    terminal_names: list[str]
    terminal_dfas: list[DFA]
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
    try:
        parsed = lark.Lark(text, start=start, parser="earley", lexer="dynamic")
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
    except re.error as e:  # a terminal's regex that Python's re refuses, checked by lark as it loads
        raise GrammarError(f"grammar error: invalid regex in a terminal: {e}") from None
    except OSError as e:  # %import of a grammar file that is not there
        name = getattr(e, "filename", None) or e
        raise GrammarError(f"grammar error: %import: cannot read {name}") from None
    except RecursionError:
        raise GrammarError("grammar error: the grammar nests too deeply") from None

    names = [t.name for t in parsed.terminals]
    term_id = {n: i for i, n in enumerate(names)}
    dfas = []
    for term in parsed.terminals:
        regex = _terminal_regex(term)
        try:
            dfa = compile_regex(regex)
        except RegexError as e:
            raise GrammarError(f"terminal {term.name}: {e}") from None
        if dfa.is_accepting(0):
            raise GrammarError(
                f"terminal {term.name} matches the empty string; every terminal must match at least one character"
            )
        dfas.append(dfa)

    nt_id: dict[str, int] = {}

    def symbol(sym) -> int:
        if sym.is_term:
            if sym.name not in term_id:
                raise GrammarError(f"terminal {sym.name} is declared but has no pattern (%declare is not supported)")
            return term_id[sym.name]
        return nt_id.setdefault(sym.name, len(names) + len(nt_id))

    start_id = nt_id.setdefault(start, len(names))
    rules = tuple((symbol(r.origin), tuple(symbol(s) for s in r.expansion)) for r in parsed.rules)
    cfg = CFG(len(names), rules, start_id)
    rule_names = {i: n for n, i in nt_id.items()}
    good = productive_symbols(cfg)
    if start_id not in good:
        raise GrammarError(
            f"the grammar's language is empty: rule {start!r} can never be completed "
            "(every alternative needs a rule that recurses without a way out)"
        )
    ignore = frozenset(term_id[n] for n in parsed.ignore_tokens if n in term_id)
    # As lark's lexers do: a higher priority wins a tie, then a string literal over a
    # regex (the keyword "select" over NAME), so keywords are never read as names.
    ranks = [(t.priority, type(t.pattern).__name__ == "PatternStr") for t in parsed.terminals]
    return CompiledGrammar(names, dfas, trim(cfg, good), ignore, rule_names, ranks)
