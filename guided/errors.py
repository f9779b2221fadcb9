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
    │       ├── RecursiveSchemaError
    │       └── SchemaTooLargeError   a keyword whose automaton passes the size limits
    │                                 (also a RegexTooLargeError)
    ├── GrammarError               a lark grammar, naming the line and column
    ├── StructuralTagError         a structural tag, naming the JSON pointer of the format
    ├── UnwritableSpecError        a spec no text in the vocabulary's tokens can start
    └── BudgetExceededError        a spec whose compile or guide passes a budget
        ├── CompileTimeoutError    ... the compile time limit (``timeout=``)
        └── GuideMemoryError       ... a guide's memory limit (``max_guide_bytes=``)

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


class SchemaTooLargeError(UnsupportedSchemaError, RegexTooLargeError):
    """A keyword whose automaton alone passes the size limits (an ``enum`` of tens of
    thousands of long values): an ``UnsupportedSchemaError`` naming the keyword and its
    pointer, and a ``RegexTooLargeError`` to the compiler's parts that retry smaller
    builds on one.

    Args:
        message: what is too large.
        pointer: the keyword's JSON pointer.
        keyword: the keyword.
    """

    def __init__(self, message: str, pointer: str = "#", keyword: str | None = None):
        super().__init__(message, pointer, keyword)
        self._text = str(self.args[0])
        self.args = (message, pointer, keyword)  # ``type(e)(*e.args)`` makes the same error again

    def __str__(self) -> str:
        return self._text


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


# -- structural tags -----------------------------------------------------------------------


class StructuralTagError(SpecError):
    """A structural tag that is malformed or asks for what cannot be enforced exactly;
    the message starts with the JSON pointer of the format at fault
    (``/format/tags/0/content: ...``).

    Args:
        message: what is wrong.
        pointer: where, in the structural tag as given.
    """

    def __init__(self, message: str, pointer: str = ""):
        self.pointer = pointer
        super().__init__(f"{pointer}: {message}" if pointer else message)


class UnwritableSpecError(SpecError):
    """The spec matches some text, but no token of the vocabulary can begin any of it
    (a byte the tokenizer has no token for, say): generation could only stop at once
    with text that does not match."""


# -- budgets ------------------------------------------------------------------------------


class BudgetExceededError(SpecError):
    """A spec whose compile (or whose guide's growth while decoding) would pass a
    configured budget. The spec may be valid: a larger budget may compile it."""


class CompileTimeoutError(BudgetExceededError):
    """The compile ran past its time limit (``guided.compile(..., timeout=)``); what it
    had built is dropped.

    Args:
        seconds: the limit that was passed.
    """

    def __init__(self, seconds: float):
        self.seconds = seconds
        super().__init__(f"compile time limit of {seconds:g} s exceeded (raise it with timeout=, "
                         "or simplify the spec)")


class GuideMemoryError(BudgetExceededError):
    """A guide (or the compile making it) would hold more memory than its limit.

    Args:
        used: bytes the guide would hold.
        limit: the limit in bytes.
    """

    def __init__(self, used: int, limit: int, what: str = "guide"):
        self.used = used
        self.limit = limit
        super().__init__(f"{what} would hold {used / 2**20:.1f} MiB, over its limit of "
                         f"{limit / 2**20:.1f} MiB (raise it with max_guide_bytes=, or simplify the spec)")


class TokenBudgetError(ValueError):
    """No output of the spec fits in the tokens allowed (``max_new_tokens``): the
    shortest takes more. Raised before generating, by budget-aware decoding.

    Args:
        needed: the fewest tokens an output takes, EOS included.
        budget: the tokens allowed.
        limit: the setting's name (``max_new_tokens``; vLLM: ``max_tokens``).
        opt_out: how to turn budget-aware masks off, for the message.
        exact: ``needed`` is the true minimum (False: an upper bound, the shortest
            output guided found; see docs/budget.md).
    """

    def __init__(self, needed: int, budget: int, limit: str = "max_new_tokens",
                 opt_out: str = "pass budget_aware=False", exact: bool = True):
        self.needed = needed
        self.budget = budget
        self.exact = exact
        what = "the shortest output of the spec takes" if exact else "the shortest output guided finds takes"
        super().__init__(f"{limit}={budget} is too small: {what} {needed} tokens, EOS included (raise {limit}, "
                         f"or {opt_out} to allow an unfinished output)")


__all__ = [
    "StructuralTagError",
    "TokenBudgetError",
    "BudgetExceededError",
    "CompileTimeoutError",
    "GuideMemoryError",
    "ApproximationLimitError",
    "EmptyLanguageError",
    "GrammarError",
    "RecursiveSchemaError",
    "RegexError",
    "RegexSyntaxError",
    "RegexTooLargeError",
    "SchemaError",
    "SchemaTooLargeError",
    "SpecError",
    "UnsatisfiableSchemaError",
    "UnsupportedRegexFeature",
    "UnsupportedSchemaError",
    "UnwritableSpecError",
]
