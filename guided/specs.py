"""Spec types: what the output must look like, independent of any tokenizer."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Regex:
    """Output must fully match a Python regex (``re.fullmatch`` semantics).

    Example::

        >>> guide = guided.compile(guided.Regex(r"\\d{3}-\\d{4}"), tokenizer)
    """

    pattern: str
    flags: int = 0

    def __post_init__(self):
        if not isinstance(self.pattern, str):
            raise TypeError(f"Regex pattern must be a str, not {type(self.pattern).__name__}")
