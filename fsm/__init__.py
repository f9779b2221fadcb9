"""Byte-level automata: regex -> minimal DFA (or a lazily determinised one for large
specs), DFA algebra, token vocabularies, token indexes.

Nothing in this package knows about torch models or spec formats other than regex;
``grammars`` and ``guided`` build on it.
"""

from guided.errors import (
    EmptyLanguageError,
    RegexError,
    RegexSyntaxError,
    RegexTooLargeError,
    UnsupportedRegexFeature,
)

from .dfa import DFA
from .lazy import LazyDFA
from .regex import compile_regex

__all__ = [
    "DFA",
    "LazyDFA",
    "EmptyLanguageError",
    "RegexError",
    "RegexSyntaxError",
    "RegexTooLargeError",
    "UnsupportedRegexFeature",
    "compile_regex",
]
