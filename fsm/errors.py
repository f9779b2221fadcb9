"""Errors raised when a spec cannot be compiled. All are ``ValueError`` subclasses."""


class RegexError(ValueError):
    """A regex that is invalid, not regular, or unsupported."""


class RegexSyntaxError(RegexError):
    """The pattern is not valid Python ``re`` syntax; the message shows the position."""

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
