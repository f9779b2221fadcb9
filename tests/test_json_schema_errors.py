"""JSON Schema compile errors: unsupported keywords named with their pointer,
unsatisfiable schemas, approximation limits, lenient mode's warnings, recursive refs,
invalid patterns, and schemas nesting past the recursion limit.
"""

from __future__ import annotations

import os
import re

import jsonschema
import pytest

import guided
from guided.grammars.json_schema.compiler import compile_json_schema


def test_unsupported_keyword_names_keyword_and_pointer():
    schema = {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}}
    with pytest.raises(guided.UnsupportedSchemaError) as e:
        compile_json_schema(schema)
    assert "uniqueItems" in str(e.value) and "#/properties/tags/uniqueItems" in str(e.value)
    assert e.value.keyword == "uniqueItems"


BIG_UNIQUE = {"type": "array", "items": {"enum": [f"v{i}" for i in range(30)]}, "uniqueItems": True}


@pytest.mark.parametrize("schema, pointer", [
    # A oneOf split by JSON type (some branch allows no objects): the parts are made
    # by the compiler, and errors inside them still name the user's branch.
    ({"properties": {"a": {"type": ["array", "null"], "oneOf": [{"$ref": "#/$defs/k"}, {"type": "array", "maxItems": 1},
                                                                 {"type": "null"}]}},
      "$defs": {"k": BIG_UNIQUE}}, "#/properties/a/oneOf/0/uniqueItems"),
    ({"type": ["array", "string"], "oneOf": [{"type": "string"}, {"type": "string", "maxLength": 2}, BIG_UNIQUE]},
     "#/oneOf/2/uniqueItems"),
    ({"type": ["array", "string"], "oneOf": [{"type": "string"}, BIG_UNIQUE, {"type": "array", "maxItems": 3}]},
     "#/oneOf/1/uniqueItems"),
])
def test_errors_inside_a_one_of_split_by_type_name_the_branch(schema, pointer):
    with pytest.raises(guided.UnsupportedSchemaError) as e:
        compile_json_schema(schema, "compact")
    assert e.value.pointer == pointer and e.value.keyword == "uniqueItems"


def test_algebra_over_supersets_is_not_reported_as_a_proof_of_no_value():
    # [1] is valid (exactly one branch holds), but branches are told apart by
    # subtracting a superset of the other ("any bracketed text"), which leaves nothing.
    schema = {"oneOf": [{"type": "array", "contains": {"type": "integer"}},
                        {"type": "array", "contains": {"type": "string"}}]}
    with pytest.raises(guided.UnsupportedSchemaError, match="cannot be told apart exactly") as e:
        compile_json_schema(schema)
    assert "#/oneOf" in str(e.value)
    # A oneOf whose branches are the same schema really has no value.
    same = {"oneOf": [{"type": "string", "multipleOf": 2}, {"type": "string"}]}
    with pytest.raises(guided.UnsatisfiableSchemaError) as e:
        compile_json_schema(same)
    assert not isinstance(e.value, guided.UnsupportedSchemaError)


def test_approximation_limit_under_an_optional_key_is_an_error_not_a_dropped_key():
    """Where algebra over supersets leaves a value with nothing, the key, array items or
    extra keys holding it must not silently vanish: the compile says so."""
    limit = {"oneOf": [{"type": "array", "contains": {"type": "integer"}},
                       {"type": "array", "contains": {"type": "string"}}]}
    for schema, where in [({"type": "object", "properties": {"a": limit, "b": {"type": "integer"}}}, "#/properties/a/oneOf"),
                          ({"type": "array", "items": limit}, "#/items/oneOf"),
                          ({"type": "object", "additionalProperties": limit}, "#/additionalProperties/oneOf")]:
        with pytest.raises(guided.ApproximationLimitError) as e:
            compile_json_schema(schema, "compact")
        assert where in str(e.value)
    # A proof of no value is another matter: the key is simply never written.
    forbidden = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"not": {}}}}
    dfa = compile_json_schema(forbidden, "compact")
    assert dfa.matches(b'{"a":1}') and not dfa.matches(b'{"a":1,"b":1}')


def test_lenient_mode_warns_and_drops():
    schema = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
    with pytest.warns(UserWarning, match="uniqueItems at #/uniqueItems"):
        dfa = compile_json_schema(schema, "compact", strict=False)
    assert dfa.matches(b"[1,1]")


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "integer", "minimum": 5, "maximum": 3},
        {"type": "string", "minLength": 4, "maxLength": 2},
        {"allOf": [{"type": "string"}, {"type": "integer"}]},
        {"type": "object", "required": ["a"], "properties": {"a": False}},
        {"type": "object", "required": ["a"], "propertyNames": False},
        False,
        {"enum": [1, 2], "type": "string"},
        {"const": True, "enum": [1, "a"]},  # const beside an enum that does not list it
    ],
)
def test_unsatisfiable_schema_is_an_error(schema):
    with pytest.raises(guided.UnsatisfiableSchemaError):
        compile_json_schema(schema)


def test_recursive_ref_is_a_clear_error():
    schema = {"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}}, "$ref": "#/$defs/node"}
    with pytest.raises(guided.RecursiveSchemaError, match="recursive"):
        compile_json_schema(schema)


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("extra", [{}, {"maxLength": 300}])
@pytest.mark.parametrize("pattern, why", [("[^\\s\\S]", ""), ("a\\ud800", "lone surrogate U+D800 at position 1")])
def test_a_pattern_matching_no_string_is_unsatisfiable_never_dropped(pattern, why, extra, strict):
    """Not an UnsupportedSchemaError, which lenient mode would drop (any string then),
    nor a ValueError from an empty character class; a lone surrogate is named."""
    with pytest.raises(guided.UnsatisfiableSchemaError, match="matches no string") as info:
        compile_json_schema({"type": "string", "pattern": pattern, **extra}, "compact", strict)
    assert info.value.pointer == "#/pattern" and why in str(info.value)


def test_invalid_pattern_is_named():
    with pytest.raises(guided.UnsupportedSchemaError, match="pattern"):
        compile_json_schema({"type": "string", "pattern": "(?<=a)b"})


def test_running_out_of_stack_inside_the_validator_is_a_clear_error(monkeypatch):
    # jsonschema's `referencing` uses rpds (Rust): out of stack there, pyo3 raises a
    # PanicException (a BaseException), which must not kill the caller.

    class PanicException(BaseException):
        pass

    def panics(self, instance):
        raise PanicException("__eq__ failed!: PyErr { value: <unprintable RecursionError object> }")

    monkeypatch.setattr(jsonschema.Draft202012Validator, "is_valid", panics)
    with pytest.raises(guided.UnsupportedSchemaError, match="nests too deeply"):
        compile_json_schema({"enum": ["a", "b"], "minLength": 1})


def test_a_schema_past_the_recursion_limit_names_where_it_got_to():
    # 120 nested objects, each an anyOf branch (built at once, not deferred): the
    # error says where the expansion stood when it met Python's recursion limit.
    schema = {"type": "string"}
    for _ in range(120):
        schema = {"anyOf": [{"type": "object", "properties": {"c": schema}, "required": ["c"]}, {"type": "null"}]}
    with pytest.raises(guided.UnsupportedSchemaError, match="nests too deeply") as info:
        compile_json_schema(schema)
    assert info.value.pointer.startswith("#/anyOf/0/properties/c/anyOf/0/properties/c")
    assert "/…/" in info.value.pointer and len(info.value.pointer) < 200  # shortened in the middle


@pytest.mark.subprocess
def test_a_first_compile_past_the_recursion_limit_leaves_numba_usable(tmp_path):
    # Under pytest's deeper stack, a first compile that nests 120 objects reached
    # its first compiled call (numba's import) near the recursion limit, which cut
    # the import short: numba stayed half-initialised and the next compile failed
    # ("partially initialized module 'numba.core.types'"). A fresh pytest process,
    # as numba is long imported in this one.
    import subprocess
    import sys

    (tmp_path / "test_first_compile.py").write_text(
        "from guided.grammars.json_schema.compiler import compile_json_schema\n"
        "def test_deep_first():\n"
        "    s = {'type': 'string'}\n"
        "    for _ in range(120):\n"
        "        s = {'type': 'object', 'properties': {'c': s}, 'required': ['c']}\n"
        "    try:\n"
        "        compile_json_schema(s)\n"
        "    except Exception as e:\n"
        "        assert 'nests too deeply' in str(e), e\n"
        "def test_then_another():\n"
        "    dfa = compile_json_schema({'type': 'array', 'items': {'type': 'integer'}}, 'compact')\n"
        "    assert dfa.matches(b'[1,22]') and not dfa.matches(b'[1,')\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", root,
                           "-c", os.path.join(root, "pyproject.toml"), str(tmp_path / "test_first_compile.py")],
                          cwd=root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]


def _nested(key, n, leaf):
    out = leaf
    for _ in range(n):
        out = {key: out}
    return out


def _deep_list(n):
    out = []
    for _ in range(n):
        out = [out]
    return out


@pytest.mark.parametrize("schema,pointer,fragment", [
    ({"type": "string", "pattern": 5}, "#/pattern", "pattern must be a string"),
    ({"type": "object", "properties": []}, "#/properties", "properties must be an object"),
    ({"type": "object", "required": "abc"}, "#/required", "required must be an array of strings"),
    ({"type": "object", "properties": {"a": {"minLength": -1}}}, "#/properties/a/minLength", "non-negative integer"),
    ({"type": "integer", "maximum": 10**1000}, "#/maximum", "maximum must be between"),
    ({"type": "number", "minimum": float("inf")}, "#/minimum", "minimum must be a number"),
    ({"multipleOf": 0}, "#/multipleOf", "multipleOf must be a number above 0"),
    ({"anyOf": []}, "#/anyOf", "non-empty array"),
    ({"type": "strin"}, "#/type", "type must be one of"),
    ({"items": 3}, "#/items", "items must be a schema"),
    (_nested("items", 600, {}), "#" + "/items" * 257, "nests deeper than 256"),
    ({"enum": [_deep_list(900)]}, "#/enum", "a value nests deeper"),
    ({"type": "array", "maxItems": 10**400}, "#/maxItems", "maxItems must be at most"),  # not an OverflowError
    # Identifiers the reference validator reads as URIs (an AttributeError inside it otherwise).
    ({"$schema": float("nan"), "enum": ["a"]}, "#/$schema", "$schema must be a string"),
    ({"$id": 5, "enum": ["a"]}, "#/$id", "$id must be a string"),
    ({"properties": {"a": {"$schema": "http://json-schema.org/draft-04/schema#", "id": 5}}},
     "#/properties/a/id", "id must be a string"),
    # exclusiveMinimum / exclusiveMaximum in the other drafts' form: a validator reads
    # draft 4's true as the number 1, and draft 4 reads a number as a flag.
    ({"type": "number", "maximum": 5, "exclusiveMaximum": True}, "#/exclusiveMaximum", "must be a number"),
    ({"$schema": "http://json-schema.org/draft-04/schema#", "type": "number", "exclusiveMinimum": 3},
     "#/exclusiveMinimum", "must be a boolean in drafts 3 and 4"),
])
def test_a_schema_of_the_wrong_shape_is_a_schema_error(schema, pointer, fragment):
    """Keyword values of the wrong type, numbers past what the compiler handles and
    nesting past the limit are refused before the compile, naming keyword and pointer
    (not an AttributeError, an OverflowError or a RecursionError, nor a keyword ignored)."""
    for compile_ in (lambda: compile_json_schema(schema, "compact"),
                     lambda: guided.compile(guided.JsonSchema(schema), guided.Vocabulary([b"a", b"b"], [1]))):
        with pytest.raises(guided.SchemaError, match=re.escape(fragment)) as info:
            compile_()
        assert info.value.pointer == pointer


def test_schema_text_nesting_past_the_parser_is_a_schema_error():
    text = '{"items":' * 10000 + "{}" + "}" * 10000
    with pytest.raises(guided.SchemaError, match="nests"):
        guided.JsonSchema(text)
    with pytest.raises(guided.SchemaError, match="nests"):
        compile_json_schema(text, "compact")


@pytest.mark.parametrize("step", [1e-20, 1e-300, 10**-25])
def test_tiny_multiple_of_steps_compile_exactly(step):
    from decimal import Decimal
    from fractions import Fraction

    dfa = compile_json_schema({"type": "number", "multipleOf": step}, "compact")
    exact = Fraction(Decimal(repr(step)))
    for text in ("0", "7", "0.5", "-2.25", "0." + "0" * 19 + "1", "0." + "0" * 24 + "1", "0." + "0" * 40 + "3"):
        assert dfa.matches(text.encode()) == ((Fraction(text) / exact).denominator == 1), text


def test_an_enum_too_large_for_the_automaton_names_enum_and_its_pointer():
    values = [f"{i:06d}" * 3 for i in range(30_000)]
    schema = {"type": "object", "properties": {"code": {"enum": values}}}
    with pytest.raises(guided.UnsupportedSchemaError) as info:
        guided.compile(guided.JsonSchema(schema), guided.Vocabulary([b"a", b"b"], [1]))
    assert info.value.keyword == "enum" and info.value.pointer == "#/properties/code/enum"
    assert "enum of 30,000 values" in str(info.value) and "#/properties/code/enum" in str(info.value)
    assert isinstance(info.value, guided.RegexTooLargeError)  # what the compiler's retries catch
