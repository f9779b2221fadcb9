"""The errors a JSON Schema compile raises: each names the keyword and the JSON pointer
where it stands (``grammars.json_schema`` re-exports them)."""

from __future__ import annotations


class SchemaError(ValueError):
    """A schema that cannot be compiled: names the keyword and its JSON pointer."""

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
    """A ``$ref`` cycle: recursive schemas need the grammar engine."""
