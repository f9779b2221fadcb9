"""JSON Schema strings: ``pattern`` with ``re.search`` semantics (anchors, patterns
found in every string), length bounds kept per place, and ``format`` automata (copied
in where decoding reaches them; checked formats that cannot be enforced refused). The
format regexes themselves: test_json_formats.py.
"""

from __future__ import annotations

import itertools
import random

import pytest
from json_helpers import compact, reference_validator

import guided
from guided.grammars.json_schema.compiler import compile_json_schema


def test_one_string_type_in_many_places_keeps_each_places_bounds():
    """Bounded pattern strings are built once per (constraints, bounds) in a compile:
    places that share the pattern but not the bounds each keep their own."""
    word = "^x+$"
    schema = {"type": "object", "properties": {
        "a": {"type": "string", "pattern": word, "maxLength": 3},
        "b": {"type": "string", "pattern": word, "maxLength": 5},
        "c": {"type": "string", "pattern": word, "minLength": 2},
        "d": {"type": "string", "pattern": word, "maxLength": 3},
        "e": {"type": "string", "pattern": word, "format": "email", "maxLength": 3}}}
    dfa = compile_json_schema(schema, "compact")
    validator = reference_validator(schema)
    for key in "abcde":
        for n in range(7):
            doc = {key: "x" * n}
            assert dfa.matches(compact(doc)) == validator.is_valid(doc), doc


@pytest.mark.parametrize("pattern,everywhere", [
    ("([0-9a-zA-Z]+)?", True), (".*", True), ("(?s).*", True), ("a|", True), ("x?y?", True),
    ("^.*$", False),      # "a\nb": $ matches only at the end or before a final newline
    ("^$|.", False),      # "\n\n"
    ("^[a-z]*$", False), ("[a-z]+", False), ("^$", False),
])
def test_a_pattern_found_in_every_string_is_dropped_and_no_other(pattern, everywhere):
    """``re.search`` always succeeds for such a pattern, so it constrains nothing; the
    check must agree with ``re`` itself (newlines and anchors included)."""
    import re

    from guided.grammars.json_schema.strings import always_found as _always_found

    assert _always_found(pattern) is everywhere
    samples = ["", "a", "A1", "\n", "\n\n", "a\nb", "x y", "é", "-", "ab\n"]
    assert all(re.search(pattern, t) for t in samples) or not everywhere
    schema = {"type": "string", "pattern": pattern, "maxLength": 4}
    dfa = compile_json_schema(schema, "compact")
    for t in samples:
        assert dfa.matches(compact(t)) == reference_validator(schema).is_valid(t), (pattern, t)


@pytest.mark.parametrize("pattern", [
    "^.*$", "a$", "^a$", "^$", "(?m)^a$", "(?m)a$", "(?m)^a", "(?m)^$", r"a\Z", r"\Aa", "^a|b$", "(a|^b)$",
])
def test_pattern_anchors_mean_what_re_search_means(pattern):
    """``$`` also holds before a final newline and ``(?m)`` anchors at any line's
    ends, as in ``re.search``, which the validator runs."""

    schema = {"type": "string", "pattern": pattern}
    dfa = compile_json_schema(schema, "compact")
    validator = reference_validator(schema)
    for n in range(4):
        for chars in itertools.product("ab\n", repeat=n):
            text = "".join(chars)
            assert dfa.matches(compact(text)) == validator.is_valid(text), (pattern, text)


def test_large_format_automata_are_copied_in_where_decoding_reaches_them():
    """A format with a large DFA (regex: 22k edges; hostname: 3.3k) is copied into
    the lazy automaton only where a document reaches it: 40 hostnames compile to a
    few thousand NFA states instead of ~40 copies, and reading builds the copies it
    needs. Verdicts are those of the formats' own tests (``test_json_formats``:
    jsonschema checks hostnames only with the optional fqdn package)."""
    schema = {"type": "object", "additionalProperties": False,
              "properties": {f"h{i}": {"type": "string", "format": "hostname"} for i in range(40)}
              | {"rx": {"type": "array", "items": {"type": "string", "format": "regex"}}}}
    dfa = compile_json_schema(schema, "compact")
    compiled = dfa.nfa_size
    assert compiled < 5_000  # one hostname copy is ~750 NFA states, one regex copy ~770
    for doc, valid in [({"h39": "example.com"}, True), ({"h39": "-bad.com"}, False), ({"h0": "a.b", "h7": "exa_mple.com"}, False),
                       ({"rx": ["^a+$", "(?:x)"]}, True), ({"rx": ["a**"]}, False), ({"rx": ["[z-a]"]}, False),
                       ({"h12": "localhost", "rx": ["\\d+", "[a-z]{2,}"]}, True)]:
        assert dfa.matches(compact(doc)) == valid, doc
    assert dfa.nfa_size > compiled + 1_000  # the copies the documents reached


@pytest.mark.parametrize(
    "pattern",
    [
        r"^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$|^[0-9a-f]{16}$",  # Python factors out the shared ^
        r"^ab|cd$", r"(^a|b)c", r"x(y$|z)", r"^$", r"a", r"^(a|b)+$", r"(?:^|,)x(?:,|$)", r"\d{2}",
        r"^[\w-]{8,12}$", r"[^,]{8}", r"x.{8,}",  # long counted runs of one class (laid out as one DFA)
        r"\w{1,16}", r"\d+[a-d]", r"^a{2,5}", r"b{2,5}$", r"x*", r"(ab){2,}z?",  # counted ends cut under search
    ],
)
def test_pattern_has_re_search_semantics(pattern):
    import re

    dfa = compile_json_schema({"type": "string", "pattern": pattern}, "compact")
    rng = random.Random(pattern)
    alphabet = "abcdxyz,0f-19/\"é"
    for _ in range(1500):
        value = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 18)))
        assert dfa.matches(compact(value)) == bool(re.search(pattern, value)), value


def test_validated_format_we_cannot_enforce_is_refused():
    # uri-template is checked by the reference validator: ignoring it would be looser.
    with pytest.raises(guided.UnsupportedSchemaError, match="uri-template"):
        compile_json_schema({"type": "string", "format": "uri-template"})
    # A format validators do not know is an annotation.
    assert compile_json_schema({"type": "string", "format": "my-own-format"}, "compact").matches(b'"x"')
