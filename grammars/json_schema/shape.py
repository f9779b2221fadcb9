"""The metaschema's shape, checked before anything else: each keyword's value has the
JSON type the drafts give it, numbers are within what the compiler handles, and the
schema nests no deeper than ``MAX_SCHEMA_DEPTH``.

A schema that breaks these rules is refused with a ``SchemaError`` naming the keyword
and its JSON pointer, instead of failing deep inside the compiler (an
``AttributeError`` on ``"pattern": 5``, an ``OverflowError`` on ``"maximum": 1e400``)
or compiling as if the keyword were absent (``"required": "abc"``). The walk is
iterative, so no schema is too deep for it. Only keywords the compiler reads are
checked; others (annotations, vendor keywords) may hold anything.

Cost notes: one visit per sub-schema, a dictionary lookup per keyword: well under a
millisecond for schemas of a few thousand nodes.

Example::

    >>> check_shape({"type": "string", "pattern": 5})
    Traceback (most recent call last):
    ...
    guided.errors.SchemaError: pattern must be a string at #/pattern
"""

from __future__ import annotations

import json
import math

from guided.errors import SchemaError

from .drafts import declared_draft

#: Sub-schemas nest at most this deep (objects and arrays of keywords, counted from the
#: root): deeper ones would exhaust Python's recursion limit in the compiler.
MAX_SCHEMA_DEPTH = 256

#: Magnitudes past this are refused: numbers are compared as floats in places, and a
#: bound past the float range has no float.
MAX_NUMBER = 1e300

_SCHEMA = "a schema (an object or a boolean)"
_COUNT_KEYWORDS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
                   "minContains", "maxContains")
_BOUND_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_ONE_SCHEMA = ("additionalProperties", "additionalItems", "contains", "propertyNames", "not", "if", "then", "else",
               "unevaluatedProperties", "unevaluatedItems")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_TYPES = ("null", "boolean", "object", "array", "number", "integer", "string", "any")


def schema_from_text(text: str):
    """A schema's JSON text parsed.

    Args:
        text: the schema as JSON text.

    Returns:
        The parsed value (its shape is not checked here: ``check_shape``).

    Raises:
        SchemaError: the text is not JSON, or nests past what the parser can read.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SchemaError(f"schema is not valid JSON: {e}", "") from None
    except RecursionError:
        raise SchemaError("the schema text nests too deeply to be parsed", "") from None


def check_shape(root) -> None:
    """Refuse a schema whose keyword values have the wrong JSON type, whose numbers the
    compiler cannot handle, or that nests past ``MAX_SCHEMA_DEPTH``.

    Args:
        root: the schema (a dict or a boolean).

    Raises:
        SchemaError: the first problem met, naming the keyword and its JSON pointer.
    """
    stack = [(root, "#", 0, False)]
    while stack:
        schema, path, depth, boolean_exclusive = stack.pop()
        if isinstance(schema, bool):
            continue
        if not isinstance(schema, dict):
            raise SchemaError(f"expected {_SCHEMA}, not {_json_type(schema)}", path)
        if depth > MAX_SCHEMA_DEPTH:
            raise SchemaError(f"the schema nests deeper than {MAX_SCHEMA_DEPTH} levels", path)
        if "$schema" in schema:  # drafts 3 and 4 from here down (a sub-schema may declare its own)
            draft = declared_draft(schema)
            boolean_exclusive = draft is not None and draft <= 1
        for keyword, value in schema.items():
            at = f"{path}/{_escape(keyword)}"
            subs = list(_check_keyword(keyword, value, at, boolean_exclusive))
            if subs:
                stack.extend((sub, sub_path, depth + 1, boolean_exclusive) for sub, sub_path in subs)
            elif isinstance(value, (dict, list)):  # enum / const values, annotations
                _check_depth(value, at, depth)


def _check_keyword(keyword: str, value, at: str, boolean_exclusive: bool = False):
    """Check one keyword's value; yield the sub-schemas it holds, with their pointers.
    ``boolean_exclusive``: the schema (or the sub-schema around it) declares draft 3 or
    4, where ``exclusiveMinimum`` / ``exclusiveMaximum`` are flags on ``minimum`` /
    ``maximum``, not bounds."""
    if keyword in _ONE_SCHEMA:
        _need(isinstance(value, (dict, bool)), keyword, at, _SCHEMA)
        yield value, at
    elif keyword == "items":
        if isinstance(value, list):  # the tuple form of drafts 3 to 2019-09
            yield from ((v, f"{at}/{i}") for i, v in enumerate(value))
        else:
            _need(isinstance(value, (dict, bool)), keyword, at, f"{_SCHEMA} or an array of schemas")
            yield value, at
    elif keyword in _SCHEMA_LISTS:
        _need(isinstance(value, list), keyword, at, "an array of schemas")
        _need(keyword == "prefixItems" or len(value) > 0, keyword, at, "a non-empty array of schemas")
        yield from ((v, f"{at}/{i}") for i, v in enumerate(value))
    elif keyword in _SCHEMA_MAPS:
        _need(isinstance(value, dict), keyword, at, "an object")
        yield from ((v, f"{at}/{_escape(k)}") for k, v in value.items())
    elif keyword == "dependencies":
        _need(isinstance(value, dict), keyword, at, "an object")
        for k, v in value.items():
            if isinstance(v, list):
                _need(all(isinstance(x, str) for x in v), keyword, f"{at}/{_escape(k)}", "an array of strings")
            elif isinstance(v, str):  # draft 3: one dependent key
                pass
            else:
                yield v, f"{at}/{_escape(k)}"
    elif keyword == "dependentRequired":
        _need(isinstance(value, dict), keyword, at, "an object")
        for k, v in value.items():
            _need(isinstance(v, list) and all(isinstance(x, str) for x in v), keyword, f"{at}/{_escape(k)}",
                  "an array of strings")
    elif keyword == "required":
        if not isinstance(value, bool):  # draft 3's boolean
            _need(isinstance(value, list) and all(isinstance(x, str) for x in value), keyword, at,
                  "an array of strings")
    elif keyword == "type":
        names = value if isinstance(value, list) else [value]
        for i, t in enumerate(names):
            if isinstance(t, dict) and isinstance(value, list):  # draft 3: a schema among the types
                yield t, f"{at}/{i}"
            else:
                _need(isinstance(t, str) and t in _TYPES, keyword, at, f"one of {', '.join(_TYPES[:-1])}, or an "
                      "array of them")
    elif keyword == "enum":
        _need(isinstance(value, list), keyword, at, "an array")
    elif keyword in ("pattern", "format", "$ref", "$schema", "$id", "$anchor", "$dynamicAnchor", "$dynamicRef"):
        _need(isinstance(value, str), keyword, at, "a string")
    elif keyword == "id" and boolean_exclusive:  # drafts 3 and 4 name a schema by "id"
        _need(isinstance(value, str), keyword, at, "a string")
    elif keyword in _COUNT_KEYWORDS:
        _need(_is_number(value) and value >= 0 and (isinstance(value, int) or value.is_integer()), keyword, at,
              "a non-negative integer")
        _need(value <= MAX_NUMBER, keyword, at, f"at most {MAX_NUMBER:g}")
    elif keyword in _BOUND_KEYWORDS:
        # The two forms of exclusiveMinimum / exclusiveMaximum each mean something else
        # to a validator of the other drafts (draft 4 takes a number as a flag, later
        # drafts compare with true as with 1): only the declared draft's form is taken.
        if keyword.startswith("exclusive") and boolean_exclusive:
            _need(isinstance(value, bool), keyword, at, "a boolean in drafts 3 and 4 (a number is the form of "
                  "draft 6 and later)")
            return
        if keyword.startswith("exclusive") and isinstance(value, bool):
            raise SchemaError(f"{keyword} must be a number (true / false is the form of drafts 3 and 4: declare "
                              '"$schema": "http://json-schema.org/draft-04/schema#" for it)', at, keyword)
        _need(_is_number(value), keyword, at, "a number")
        _need(abs(value) <= MAX_NUMBER, keyword, at, f"between -{MAX_NUMBER:g} and {MAX_NUMBER:g}")
    elif keyword in ("multipleOf", "divisibleBy"):
        _need(_is_number(value) and value > 0, keyword, at, "a number above 0")
        _need(1 / MAX_NUMBER <= value <= MAX_NUMBER, keyword, at, f"between {1 / MAX_NUMBER:g} and {MAX_NUMBER:g}")
    elif keyword == "uniqueItems":
        _need(isinstance(value, bool), keyword, at, "a boolean")


def _need(ok: bool, keyword: str, at: str, what: str) -> None:
    if not ok:
        raise SchemaError(f"{keyword} must be {what}", at, keyword)


def _is_number(value) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return not isinstance(value, float) or math.isfinite(value)


def _check_depth(value, path: str, depth: int) -> None:
    """Refuse JSON values (``enum`` / ``const`` members, annotations) nested past the limit."""
    stack = [(value, depth)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            if d > MAX_SCHEMA_DEPTH:
                raise SchemaError(f"a value nests deeper than {MAX_SCHEMA_DEPTH} levels", path)
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))


def _json_type(value) -> str:
    if value is None:
        return "null"
    return {str: "a string", int: "a number", float: "a number", list: "an array"}.get(type(value),
                                                                                       type(value).__name__)


def _escape(key) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")
