"""``multipleOf`` on numbers and integers: exact decimal multiples, checked against
``fractions.Fraction`` arithmetic on the text as written."""

import random
import re
from decimal import Decimal
from fractions import Fraction

import pytest

import guided
from guided.grammars.json_schema.compiler import compile_json_schema
from guided.grammars.json_schema.scalars.multiple_of import exact_step, multiple_of_dfa

PLAIN_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?")


def _is_multiple(text: str, step) -> bool:
    return bool(PLAIN_NUMBER.fullmatch(text)) and (Fraction(Decimal(text)) / exact_step(step)).denominator == 1


def _texts(rng: random.Random, step, n=3000):
    """Random texts near the multiples of ``step`` and anywhere, valid or not."""
    q = exact_step(step)
    for _ in range(n):
        if rng.random() < 0.4:
            v = q * rng.randint(-500, 500)
            text = str(Decimal(v.numerator) / Decimal(v.denominator))
            if "E" in text:
                continue
            yield text + ("0" * rng.randint(1, 2) if "." in text and rng.random() < 0.3 else "")
        else:
            text = rng.choice(["", "-"]) + rng.choice(["0", str(rng.randint(1, 10 ** rng.randint(1, 5)))])
            if rng.random() < 0.6:
                text += "." + "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 4)))
            if rng.random() < 0.05:
                text += rng.choice(["e1", ".", "-", "x", ".0.0"])
            yield text


@pytest.mark.parametrize("step", [0.01, 0.1, 0.25, 2.5, 6.75, 13.5, 7, 11, 256, 1, 1e-3])
def test_multiples_are_exact_on_the_text_as_written(step):
    dfa = multiple_of_dfa(step)
    rng = random.Random(str(step))
    for text in _texts(rng, step):
        assert dfa.matches(text.encode()) == _is_multiple(text, step), (step, text)


def test_steps_mean_what_the_schema_writes_not_the_nearest_float():
    assert exact_step(0.1) == Fraction(1, 10)
    assert exact_step(7) == 7
    with pytest.raises(ValueError):
        exact_step(0)


def test_prices_in_cents():
    # jsonschema divides floats and so rejects 19.99 and 0.07 as multiples of 0.01;
    # by the specification (and to a user writing prices) they are multiples.
    dfa = compile_json_schema({"type": "number", "multipleOf": 0.01, "minimum": 0, "maximum": 100}, "compact")
    for text in ("19.99", "0.07", "0", "100", "100.00", "42.5", "3.140"):
        assert dfa.matches(text.encode()), text
    for text in ("19.999", "100.01", "-0.01", "1e1", "0.001"):
        assert not dfa.matches(text.encode()), text


@pytest.mark.parametrize("schema, accept, reject", [
    ({"type": "integer", "multipleOf": 2.5}, ["0", "5", "-10", "1000005"], ["2.5", "7", "5.0"]),
    ({"type": "integer", "multipleOf": 11}, ["0", "121", "-1331"], ["12", "11.0"]),
    ({"type": "number", "multipleOf": 11}, ["22", "22.0", "-33.000"], ["22.5", "23", "2.2e1"]),
    ({"type": "number", "multipleOf": 0.5, "exclusiveMinimum": 1, "maximum": 2}, ["1.5", "2", "2.0"], ["1", "1.0", "2.5", "1.25"]),
])
def test_multiple_of_in_schemas(schema, accept, reject):
    dfa = compile_json_schema(schema, "compact")
    for text in accept:
        assert dfa.matches(text.encode()), (schema, text)
    for text in reject:
        assert not dfa.matches(text.encode()), (schema, text)


def test_no_multiple_within_the_bounds_is_unsatisfiable():
    with pytest.raises(guided.UnsatisfiableSchemaError, match="multiple"):
        compile_json_schema({"type": "number", "multipleOf": 0.5, "minimum": 1.1, "maximum": 1.4})


def test_a_step_too_fine_for_an_automaton_is_named():
    schema = {"properties": {"x": {"type": "number", "multipleOf": 0.0012347}}}
    with pytest.raises(guided.UnsupportedSchemaError, match="multipleOf") as e:
        compile_json_schema(schema)
    assert "#/properties/x" in str(e.value)
    with pytest.warns(UserWarning, match="multipleOf"):
        dfa = compile_json_schema(schema, "compact", strict=False)
    assert dfa.matches(b'{"x":0.5}')


def test_a_step_that_is_not_a_positive_number_is_a_schema_error():
    for step in (0, -2, "5", True):
        with pytest.raises(guided.SchemaError, match="multipleOf"):
            compile_json_schema({"type": "number", "multipleOf": step})



def test_a_bad_step_where_only_a_superset_is_built_is_still_a_schema_error():
    # Inside "not" the number is compiled as a superset only.
    with pytest.raises(guided.SchemaError, match="multipleOf"):
        compile_json_schema({"type": "number", "not": {"type": "number", "multipleOf": "2", "minimum": 1}})
