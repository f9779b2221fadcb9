"""Spec types: what the output must look like, independent of any tokenizer."""

from __future__ import annotations

import json
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


class JsonSchema:
    """Output must be a JSON document valid against a JSON Schema.

    ``schema`` is a dict (or ``True``/``False``), JSON text, or a pydantic model class.
    ``whitespace``: ``"flexible"`` (default: short runs between tokens, at most one
    newline each), ``"compact"`` (none), or ``{"indent": n}`` (``json.dumps(indent=n)``
    layout). ``strict=True`` refuses keywords that cannot be enforced, naming the
    keyword and its JSON pointer; ``strict=False`` drops them with a warning.

    Example::

        >>> spec = guided.JsonSchema({"type": "object", "properties": {"age": {"type": "integer"}}})
        >>> guided.generate(model, tokenizer, "Age of Ada Lovelace?", spec).value
        {'age': 36}
    """

    def __init__(self, schema, whitespace="flexible", strict: bool = True):
        self.model = None
        if isinstance(schema, type) and _is_pydantic_model(schema):
            self.model = schema
            schema = schema.model_json_schema()
        elif isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except json.JSONDecodeError as e:
                raise ValueError(f"schema is not valid JSON: {e}") from None
        if not isinstance(schema, (dict, bool)):
            raise TypeError(f"JsonSchema takes a dict, JSON text or a pydantic model class, not {type(schema).__name__}")
        self.schema = schema
        self.whitespace = whitespace
        self.strict = strict

    def key(self) -> tuple:
        ws = json.dumps(self.whitespace, sort_keys=True)
        return ("json", json.dumps(self.schema, sort_keys=True, default=str), ws, self.strict)

    def parse(self, text: str):
        """The generated text as a Python value (a validated model instance for pydantic)."""
        if self.model is not None:
            return self.model.model_validate_json(text)
        return json.loads(text)

    def __repr__(self) -> str:
        return f"JsonSchema({self.schema!r}, whitespace={self.whitespace!r}, strict={self.strict})"


def _is_pydantic_model(cls) -> bool:
    try:
        import pydantic
    except ImportError:  # pragma: no cover - pydantic is a dependency
        return False
    return issubclass(cls, pydantic.BaseModel)


def as_spec(spec):
    """A dict, bool or pydantic class means a JSON Schema; specs pass through."""
    if isinstance(spec, (dict, bool)) or (isinstance(spec, type) and _is_pydantic_model(spec)):
        return JsonSchema(spec)
    return spec
