"""JSON Schema compiler: agreement with ``jsonschema`` (the reference validator) over
families of schemas.

Valid instances come from hypothesis-jsonschema; mutations of them give (mostly)
invalid ones. An accepted text must always be valid; a valid instance, written
compactly with keys in ``properties`` order, must be accepted. The families
(``json_helpers.FAMILIES``) span the keyword groups the compiler handles.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from json_helpers import FAMILIES, compact, dfa_for, mutations, ordered, reference_validator

hypothesis_jsonschema = pytest.importorskip("hypothesis_jsonschema")


#: Formats hypothesis-jsonschema does not generate (it writes any string instead).
CUSTOM_STRATEGIES = {
    "uuid": st.uuids().map(str),
    # The generator writes multiples of 2.5 as floats (0.0, 5.0); integers are written
    # as integer texts here.
    "integer_multiple_of_a_decimal": st.integers(max_value=200).map(lambda i: 5 * i),
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_agrees_with_jsonschema(name, data):
    schema = FAMILIES[name]
    dfa = dfa_for(name)
    validator = reference_validator(schema)
    strategy = CUSTOM_STRATEGIES.get(name)  # (`or` would ask a strategy for its truth: a HypothesisWarning)
    if strategy is None:
        strategy = hypothesis_jsonschema.from_schema(schema)
    instance = data.draw(strategy)
    # The generator does not know every format (it writes any string for "uuid").
    assume(validator.is_valid(instance))
    text = compact(ordered(instance, schema))
    assert dfa.matches(text), f"valid instance rejected: {text!r}"
    for m in mutations(instance, random.Random(repr(instance))):
        text = compact(ordered(m, schema))
        if dfa.matches(text):
            assert validator.is_valid(m), f"invalid instance accepted: {text!r}"
        elif validator.is_valid(m):
            pytest.fail(f"valid mutated instance rejected: {text!r}")
