"""Spec types: what the output must look like, independent of any tokenizer.

A spec is compiled for one vocabulary by ``guided.compile`` (or by ``guided.generate``,
which calls it): ``Regex``, ``JsonSchema`` and ``StructuralTag`` become byte-level
automata, ``Grammar`` (and recursive JSON Schemas) an Earley parser over a lexer.
"""

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

    The pattern is parsed by Python's own ``re`` parser, so syntax and meaning are
    ``re``'s; the automaton accepts the UTF-8 encoding of exactly the strings
    ``re.fullmatch(pattern, s, flags)`` accepts. What is not regular (backreferences,
    lookbehinds, lookarounds except right after a leading ``^``, word boundaries,
    possessive quantifiers, atomic groups) is refused when the spec is compiled:
    ``guided.compile`` raises a ``RegexError`` (``RegexSyntaxError`` with the position,
    ``UnsupportedRegexFeature``, ``EmptyLanguageError``, ``RegexTooLargeError``).

    Args:
        pattern: the regex, as ``re`` writes it.
        flags: ``re`` flags (``re.IGNORECASE``, ``re.DOTALL``, ``re.ASCII``,
            ``re.VERBOSE``, ``re.MULTILINE``); ``re.LOCALE`` is refused.

    Raises:
        TypeError: ``pattern`` is not a str.

    Example::

        >>> spec = guided.Regex(r"\\d{3}-\\d{4}")
        >>> text = guided.generate(model, tokenizer, "A phone number:", spec).text
        >>> re.fullmatch(spec.pattern, text) is not None
        True
    """

    pattern: str
    flags: int = 0

    def __post_init__(self):
        if not isinstance(self.pattern, str):
            raise TypeError(f"Regex pattern must be a str, not {type(self.pattern).__name__}")


class JsonSchema:
    """Output must be a JSON document valid against a JSON Schema.

    Every document the spec accepts is valid against the schema; valid documents it
    cannot write are those outside the key order below, with values of unconstrained
    type nested very deep, or outside a format's regular subset. A keyword that cannot
    be enforced is never silently loosened (see ``strict``). A schema that declares a
    draft in ``$schema`` is read with that draft's keywords (2020-12's without one); a
    schema whose ``$ref`` recurses compiles through the grammar engine, and
    ``uniqueItems`` on items of open kinds is checked beside the automaton.
    ``guided.compile`` raises a ``SchemaError`` (``UnsatisfiableSchemaError``,
    ``UnsupportedSchemaError``, ...) naming the keyword and its JSON pointer for a
    schema it cannot compile, and a ``ValueError`` for an unknown ``whitespace``.

    Key order, ``key_order="schema"`` (the default, as Outlines and XGrammar do):
    object keys are written in ``properties`` order, then required keys that
    ``properties`` does not list; optional keys may be left out; additional keys
    (``additionalProperties`` / ``patternProperties``), where allowed, come after the
    defined ones. Keys of ``allOf`` parts merge in the order the schema text gives them.

    ``key_order="any"``: keys in any order, each at most once, with additional keys
    anywhere among them, as a JSON Schema validator accepts them, at every depth and
    in recursive schemas too. The sub-automata that automaton algebra builds whole
    (``oneOf`` branches that overlap, ``not``, ``if`` / ``then`` / ``else``,
    ``contains``, ``allOf`` parts that do not merge) take any key order as well, for
    objects of at most 8 keys; where such an automaton grows past its size limits it
    is built again with any order for objects of at most 6 keys, then in schema order.
    Larger objects there, and every such automaton once the compile's budget for them
    is spent, keep schema order: stricter than the schema, never looser.

    Args:
        schema: a dict (or ``True`` / ``False``), JSON text, or a pydantic model class
            (its ``model_json_schema()``; ``parse`` then returns a validated instance).
        whitespace: what may stand between JSON tokens. ``"flexible"`` (default): at
            most two spaces or tabs, then at most one newline followed by at most 24
            spaces or tabs, between any two tokens but before a comma (pretty-printing
            fits, runaway newlines do not); ``"compact"``: none; ``{"indent": n}``:
            exactly the layout of ``json.dumps(value, indent=n)``;
            ``{"max_whitespace": n}``: as ``max_whitespace``.
        max_whitespace: flexible whitespace with at most this many characters per
            run (spaces and tabs, at most one line break; 0 is compact). None
            (default): the flexible bound above.
        strict: ``True`` refuses keywords that cannot be enforced exactly (an
            ``UnsupportedSchemaError`` naming the keyword and its JSON pointer);
            ``False`` drops them with a warning.
        key_order: ``"schema"`` or ``"any"``, as above.

    Raises:
        SchemaError: ``schema`` is text that is not valid JSON.
        TypeError: ``schema`` is none of the accepted kinds.
        ValueError: ``key_order`` is neither ``"schema"`` nor ``"any"``, or
            ``max_whitespace`` is negative or given with a non-flexible ``whitespace``.

    Example::

        >>> spec = guided.JsonSchema({"type": "object", "properties": {"age": {"type": "integer"}}},
        ...                          whitespace="compact", key_order="any")
        >>> guided.generate(model, tokenizer, "Age of Ada Lovelace?", spec).value
        {'age': 36}
    """

    def __init__(self, schema, whitespace="flexible", strict: bool = True, key_order: str = "schema",
                 max_whitespace: int | None = None):
        self.model = None
        if isinstance(schema, type) and _is_pydantic_model(schema):
            self.model = schema
            schema = schema.model_json_schema()
        elif isinstance(schema, str):
            # Imported here: the JSON Schema package costs ~50 ms to import, paid only by
            # specs given as text before their compile.
            from guided.grammars.json_schema.shape import schema_from_text

            schema = schema_from_text(schema)
        if not isinstance(schema, (dict, bool)):
            raise TypeError("JsonSchema takes a dict, JSON text or a pydantic model class, "
                            f"not {type(schema).__name__}")
        self.schema = schema
        if key_order not in ("schema", "any"):
            raise ValueError(f'key_order must be "schema" or "any", not {key_order!r}')
        if max_whitespace is not None:
            if whitespace not in (None, "flexible"):
                raise ValueError(f"max_whitespace bounds the flexible whitespace, not {whitespace!r}")
            if type(max_whitespace) is not int or max_whitespace < 0:
                raise ValueError(f"max_whitespace must be an integer >= 0, not {max_whitespace!r}")
            whitespace = {"max_whitespace": max_whitespace}
        self.whitespace = whitespace
        self.strict = strict
        self.key_order = key_order

    def key(self) -> tuple:
        """The compile cache's key: equal for specs that compile to the same guide."""
        ws = json.dumps(self.whitespace, sort_keys=True)
        try:
            text = json.dumps(self.schema, sort_keys=True, default=str)
        except RecursionError:
            raise SchemaError("the schema nests too deeply", "#") from None
        return ("json", text, ws, self.strict, self.key_order)

    def parse(self, text: str):
        """The generated text as a Python value.

        Args:
            text: a document this spec accepts.

        Returns:
            The parsed JSON, or a validated model instance when the spec was made
            from a pydantic class.

        Raises:
            ValueError: ``text`` is not valid JSON (``json.JSONDecodeError``), or
                pydantic's ``ValidationError``.
        """
        if self.model is not None:
            return self.model.model_validate_json(text)
        return json.loads(text)

    def __repr__(self) -> str:
        return (f"JsonSchema({self.schema!r}, whitespace={self.whitespace!r}, strict={self.strict}, "
                f"key_order={self.key_order!r})")


class Grammar:
    """Output must be a sentence of a lark grammar (EBNF, as lark users write it).

    The grammar is loaded by lark itself (``%import``, templates, ``?rule``, aliases,
    ``[..]`` and ``(..)*`` are lark's). Terminals are read by longest match among those
    the parser allows (lark's contextual lexer; on a tie the higher priority, then a
    string literal over a regex, so keywords are not names), and ``%ignore``
    terminals may appear between any two terminals. ``guided.compile`` raises a
    ``GrammarError`` (with line and column) for a grammar it cannot compile.

    Args:
        lark_text: the grammar.
        start: its start rule.
        name: a name for ``repr`` (``from_name`` and ``from_file`` set it).

    Raises:
        TypeError: ``lark_text`` is not a str.

    Example::

        >>> spec = guided.Grammar('''
        ...     start: sum
        ...     sum: NUMBER (("+" | "-") NUMBER)*
        ...     %import common.NUMBER
        ... ''')
        >>> guided.generate(model, tokenizer, "2 plus 3 as a sum:", spec).text
        '2+3'
        >>> guided.Grammar.from_name("sql")
        Grammar.from_name('sql')
    """

    def __init__(self, lark_text: str, start: str = "start", name: str | None = None):
        if not isinstance(lark_text, str):
            raise TypeError(f"Grammar takes lark grammar text (a str), not {type(lark_text).__name__}")
        self.lark_text = lark_text
        self.start = start
        self.name = name

    @staticmethod
    def names() -> list[str]:
        """The shipped grammars' names, sorted (``arithmetic``, ``csv``, ``json``, ...)."""
        return sorted(p.stem for p in GRAMMAR_DIR.glob("*.lark"))

    @classmethod
    def from_name(cls, name: str, start: str = "start") -> "Grammar":
        """A shipped grammar: ``json``, ``arithmetic``, ``sql``, ``csv``, ``python_expr``.

        Args:
            name: one of ``Grammar.names()``.
            start: the start rule.

        Raises:
            ValueError: no shipped grammar has that name (the message lists them).
        """
        path = GRAMMAR_DIR / f"{name}.lark"
        if not path.is_file():
            raise ValueError(f"no shipped grammar named {name!r}; available: {', '.join(cls.names())}")
        return cls(path.read_text(encoding="utf-8"), start=start, name=name)

    @classmethod
    def from_file(cls, path, start: str = "start") -> "Grammar":
        """A grammar read from a ``.lark`` file (UTF-8), named after the file.

        Args:
            path: the file.
            start: the start rule.

        Raises:
            OSError: the file cannot be read.
        """
        path = Path(path)
        return cls(path.read_text(encoding="utf-8"), start=start, name=path.stem)

    def key(self) -> tuple:
        """The compile cache's key: the grammar text and start rule."""
        return ("grammar", self.lark_text, self.start)

    def parse(self, text: str):
        """The generated text parsed by lark itself (Earley), an independent check.

        Returns:
            A ``lark.Tree``.

        Raises:
            lark.exceptions.LarkError: ``text`` is not a sentence of the grammar.
        """
        import lark

        return lark.Lark(self.lark_text, start=self.start, parser="earley").parse(text)

    def __repr__(self) -> str:
        if self.name:
            return f"Grammar.from_name({self.name!r})"
        return f"Grammar({self.lark_text[:40]!r}..., start={self.start!r})"


class StructuralTag:
    """Output is free text with constrained parts, in XGrammar's structural-tag format.

    Tool calls in a model's own syntax, a reasoning block before an answer: text is
    free outside the tags, and each tag's content is held to its format (a JSON
    Schema, a regex, a constant, ...). The JSON is XGrammar's, so a structural tag
    written for XGrammar (or for vLLM's ``structural_tag`` requests) compiles
    unchanged: ``{"type": "structural_tag", "format": {...}}``, a bare format, or the
    older ``{"structures": [...], "triggers": [...]}``. Formats: ``const_string``,
    ``json_schema``, ``regex``, ``any_text``, ``sequence``, ``or``, ``optional``,
    ``star``, ``plus``, ``repeat``, ``tag``, ``triggered_tags``, ``tags_with_separator``
    (docs/structural-tags.md says how each reads text). What guided cannot enforce
    exactly (``grammar`` content, a recursive schema inside, token-level formats) is a
    ``StructuralTagError`` naming the JSON pointer, never a looser constraint.

    Args:
        structural_tag: a dict or its JSON text.
        whitespace: the whitespace of every ``json_schema`` part (as ``JsonSchema``'s).

    Raises:
        StructuralTagError: a malformed structural tag, or a part that cannot be
            enforced exactly (``guided.compile`` raises it for a JSON Schema or regex
            part that does not compile).

    Example::

        >>> spec = guided.StructuralTag({"type": "structural_tag", "format": {
        ...     "type": "triggered_tags", "triggers": ["<tool_call>"],
        ...     "tags": [{"begin": "<tool_call>", "end": "</tool_call>",
        ...               "content": {"type": "json_schema", "json_schema": {"type": "object"}}}]}})
        >>> guided.generate(model, tokenizer, prompt, spec).text
        'Let me look that up. <tool_call>{"city": "Paris"}</tool_call>'
    """

    def __init__(self, structural_tag, whitespace="flexible"):
        from guided.grammars.structural_tag import parse_structural_tag

        self.format = parse_structural_tag(structural_tag)
        if isinstance(structural_tag, (str, bytes)):
            structural_tag = json.loads(structural_tag)
        self.structural_tag = structural_tag
        self.whitespace = whitespace

    def key(self) -> tuple:
        """The compile cache's key: the structural tag's JSON and the whitespace."""
        return ("structural_tag", json.dumps(self.structural_tag, sort_keys=True, default=str),
                json.dumps(self.whitespace, sort_keys=True))

    def __repr__(self) -> str:
        return f"StructuralTag({json.dumps(self.structural_tag)[:60]!r}..., whitespace={self.whitespace!r})"


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
