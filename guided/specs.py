"""Spec types: what the output must look like, independent of any tokenizer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import guided.grammars
from guided.errors import SchemaError

#: Where the shipped grammars live (``Grammar.from_name``): ``grammars/lark/`` in the
#: repository, ``guided/grammars/lark/`` once installed.
GRAMMAR_DIR = Path(guided.grammars.__file__).resolve().parent / "lark"


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
    ``key_order="schema"`` (default) writes object keys in ``properties`` order, as
    Outlines and XGrammar do; ``key_order="any"`` accepts them in any order, each at
    most once (objects inside ``oneOf`` / ``not`` algebra keep schema order).

    Example::

        >>> spec = guided.JsonSchema({"type": "object", "properties": {"age": {"type": "integer"}}})
        >>> guided.generate(model, tokenizer, "Age of Ada Lovelace?", spec).value
        {'age': 36}
    """

    def __init__(self, schema, whitespace="flexible", strict: bool = True, key_order: str = "schema"):
        self.model = None
        if isinstance(schema, type) and _is_pydantic_model(schema):
            self.model = schema
            schema = schema.model_json_schema()
        elif isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except json.JSONDecodeError as e:
                raise SchemaError(f"schema is not valid JSON: {e}", "") from None
        if not isinstance(schema, (dict, bool)):
            raise TypeError(f"JsonSchema takes a dict, JSON text or a pydantic model class, not {type(schema).__name__}")
        self.schema = schema
        if key_order not in ("schema", "any"):
            raise ValueError(f'key_order must be "schema" or "any", not {key_order!r}')
        self.whitespace = whitespace
        self.strict = strict
        self.key_order = key_order

    def key(self) -> tuple:
        ws = json.dumps(self.whitespace, sort_keys=True)
        return ("json", json.dumps(self.schema, sort_keys=True, default=str), ws, self.strict, self.key_order)

    def parse(self, text: str):
        """The generated text as a Python value (a validated model instance for pydantic)."""
        if self.model is not None:
            return self.model.model_validate_json(text)
        return json.loads(text)

    def __repr__(self) -> str:
        return (f"JsonSchema({self.schema!r}, whitespace={self.whitespace!r}, strict={self.strict}, "
                f"key_order={self.key_order!r})")


class Grammar:
    """Output must be a sentence of a lark grammar (EBNF, as lark users write it).

    ``lark_text`` is the grammar; ``start`` its start rule. Terminals are read by
    longest match among those the parser allows (lark's contextual lexer; on a tie
    the higher priority, then a string literal over a regex, so keywords are not
    names), and ``%ignore`` terminals may appear between any two terminals.
    ``Grammar.from_name("json")`` loads a shipped grammar (see ``Grammar.names()``).

    Example::

        >>> spec = guided.Grammar('''
        ...     start: sum
        ...     sum: NUMBER (("+" | "-") NUMBER)*
        ...     %import common.NUMBER
        ... ''')
        >>> guided.generate(model, tokenizer, "2 plus 3 as a sum:", spec).text
        '2+3'
    """

    def __init__(self, lark_text: str, start: str = "start", name: str | None = None):
        if not isinstance(lark_text, str):
            raise TypeError(f"Grammar takes lark grammar text (a str), not {type(lark_text).__name__}")
        self.lark_text = lark_text
        self.start = start
        self.name = name

    @staticmethod
    def names() -> list[str]:
        """The shipped grammars' names."""
        return sorted(p.stem for p in GRAMMAR_DIR.glob("*.lark"))

    @classmethod
    def from_name(cls, name: str, start: str = "start") -> "Grammar":
        """A shipped grammar: ``json``, ``arithmetic``, ``sql``, ``csv``, ``python_expr``."""
        path = GRAMMAR_DIR / f"{name}.lark"
        if not path.is_file():
            raise ValueError(f"no shipped grammar named {name!r}; available: {', '.join(cls.names())}")
        return cls(path.read_text(encoding="utf-8"), start=start, name=name)

    @classmethod
    def from_file(cls, path, start: str = "start") -> "Grammar":
        path = Path(path)
        return cls(path.read_text(encoding="utf-8"), start=start, name=path.stem)

    def key(self) -> tuple:
        return ("grammar", self.lark_text, self.start)

    def parse(self, text: str):
        """The generated text parsed by lark itself (a ``lark.Tree``)."""
        import lark

        return lark.Lark(self.lark_text, start=self.start, parser="earley").parse(text)

    def __repr__(self) -> str:
        return f"Grammar.from_name({self.name!r})" if self.name else f"Grammar({self.lark_text[:40]!r}..., start={self.start!r})"


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
