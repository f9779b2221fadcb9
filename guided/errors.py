"""The errors guided raises for a spec it cannot compile.

Every one is a ``SpecError``, itself a ``ValueError``, so a server can answer all of
them with one "bad request" and a caller can tell them apart by type::

    SpecError
    ├── RegexError                 a regex (or a JSON Schema ``pattern``) ...
    │   ├── RegexSyntaxError       ... that is not valid ``re`` syntax (with its position)
    │   ├── UnsupportedRegexFeature ... valid ``re``, but not regular (backreferences, ...)
    │   ├── EmptyLanguageError     ... that matches no string at all
    │   └── RegexTooLargeError     ... whose automaton passes the size limits
    ├── SchemaError                a JSON Schema, naming the keyword and its JSON pointer
    │   ├── UnsatisfiableSchemaError  no JSON value satisfies it
    │   └── UnsupportedSchemaError    a keyword that cannot be enforced exactly
    │       ├── ApproximationLimitError
    │       └── RecursiveSchemaError
    └── GrammarError               a lark grammar, naming the line and column

Example::

    >>> import guided
    >>> try:
    ...     guided.compile(guided.Regex("(a)\\\\1"), tokenizer)
    ... except guided.SpecError as e:
    ...     print(type(e).__name__, e)
    UnsupportedRegexFeature backreferences are not regular ...

This module imports nothing from the project: every layer may raise its errors.
"""

from __future__ import annotations


class SpecError(ValueError):
    """A spec (regex, JSON Schema or grammar) that cannot be compiled exactly."""


# -- regex ------------------------------------------------------------------------------


class RegexError(SpecError):
    """A regex that is invalid, not regular, or unsupported."""


class RegexSyntaxError(RegexError):
    """The pattern is not valid Python ``re`` syntax; the message shows the position.

    Args:
        message: what is wrong.
        pattern: the pattern as given.
        pos: the character offset of the error in ``pattern``, or ``None``.
    """

    def __init__(self, message: str, pattern: str, pos: int | None):
        self.pattern = pattern
        self.pos = pos
        if pos is not None:
            pointer = " " * pos + "^"
            message = f"{message} at position {pos}\n  {pattern}\n  {pointer}"
        super().__init__(message)


class UnsupportedRegexFeature(RegexError):
    """A feature that is valid Python ``re`` but not regular (or not supported)."""


class EmptyLanguageError(RegexError):
    """The spec matches no string at all, so no generation could ever finish."""


class RegexTooLargeError(RegexError):
    """The automaton would exceed the configured size limits."""


# -- JSON Schema --------------------------------------------------------------------------


class SchemaError(SpecError):
    """A schema that cannot be compiled: names the keyword and its JSON pointer.

    Args:
        message: what is wrong.
        pointer: the JSON pointer of the sub-schema (``"#/properties/a"``); ``""`` for
            the schema text as a whole.
        keyword: the keyword at fault, where there is one.
    """

    def __init__(self, message: str, pointer: str = "#", keyword: str | None = None):
        self.pointer = pointer
        self.keyword = keyword
        where = f" at {pointer}" if pointer else ""
        super().__init__(f"{message}{where}")


class UnsupportedSchemaError(SchemaError):
    """A keyword (or keyword value) that cannot be enforced exactly."""


class UnsatisfiableSchemaError(SchemaError):
    """No JSON value satisfies the schema."""


class ApproximationLimitError(UnsupportedSchemaError):
    """DFA algebra left no value, but only after subtracting a *superset* of what a
    ``oneOf`` branch, ``not`` or ``if`` excludes (objects and arrays there are compared
    by supersets): valid values may exist that this compiler cannot write. Beside
    other alternatives (an ``anyOf`` / ``oneOf`` branch, a type) it is dropped, as an
    inexact subtraction narrows; anywhere else it is a compile error, never taken as
    "no value": an optional key, array items or additional keys silently ruled out
    would surprise more than the error."""


class RecursiveSchemaError(UnsupportedSchemaError):
    """A ``$ref`` cycle where a regular automaton was asked for: recursive schemas
    compile through the grammar engine (``guided.compile`` does so by itself)."""


# -- grammars -----------------------------------------------------------------------------


class GrammarError(SpecError):
    """A lark grammar that is invalid or cannot be compiled (the message says where:
    line and column for syntax errors, the terminal or rule otherwise)."""


__all__ = [
    "ApproximationLimitError",
    "EmptyLanguageError",
    "GrammarError",
    "RecursiveSchemaError",
    "RegexError",
    "RegexSyntaxError",
    "RegexTooLargeError",
    "SchemaError",
    "SpecError",
    "UnsatisfiableSchemaError",
    "UnsupportedRegexFeature",
    "UnsupportedSchemaError",
]
