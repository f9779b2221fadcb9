"""JSON Schema ``$ref`` and drafts: refs to identifiers a schema declares (``id`` /
``$id`` / ``$anchor``, each in its draft), remote refs refused, and keywords a declared
draft lacks constraining nothing.
"""

from __future__ import annotations

import copy
import json

import pytest
from json_helpers import compact, reference_validator

import guided
from guided.grammars.json_schema.compiler import compile_json_schema

DRAFT_04 = "http://json-schema.org/draft-04/schema#"


@pytest.mark.parametrize("declared, enforced", [
    (DRAFT_04, set()),
    ("http://json-schema.org/draft-06/schema#", {"const", "propertyNames"}),
    ("http://json-schema.org/draft-07/schema#", {"const", "propertyNames", "if"}),
    (None, {"const", "propertyNames", "if"}),
])
def test_keywords_a_declared_draft_lacks_constrain_nothing(declared, enforced):
    """Draft 4 has no ``const``, ``if``/``then`` or ``propertyNames``, draft 6 no
    ``if``: the reference validator ignores them there, and so does the compiler
    (in nested sub-schemas too); a schema without ``$schema`` is read as 2020-12."""
    schema = {"type": "object", "properties": {
        "a": {"type": "integer", "const": 1},
        "b": {"type": "object", "propertyNames": {"maxLength": 1}},
        "c": {"type": "array", "items": {"if": {"type": "integer"}, "then": {"minimum": 5}}},
    }}
    if declared:
        schema = {"$schema": declared, **schema}
    dfa = compile_json_schema(schema, "compact")
    validator = reference_validator(schema)
    cases = {"const": {"a": 2}, "propertyNames": {"b": {"long": 1}}, "if": {"c": [1]}}
    for keyword, doc in cases.items():
        assert validator.is_valid(doc) == (keyword not in enforced), keyword
        assert dfa.matches(compact(doc)) == validator.is_valid(doc), (declared, keyword)
    assert dfa.matches(compact({"a": 1, "b": {"k": 1}, "c": [7]}))


def test_remote_ref_is_refused():
    with pytest.raises(guided.SchemaError, match="neither a local JSON pointer"):
        compile_json_schema({"$ref": "https://example.com/schema.json"})
    with pytest.raises(guided.UnsupportedSchemaError, match="identifier this schema declares"):
        compile_json_schema({"$defs": {"a": {"$anchor": "a"}}, "$ref": "#b"})


ANCHORED = {
    # draft 4: "id": "#name" (EVE's ESI route schemas)
    "draft-04 id": {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
                    "properties": {"jump": {"$ref": "#jump"}},
                    "definitions": {"jump": {"id": "#jump", "type": "integer", "minimum": 1}}},
    "draft-07 $id": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                     "properties": {"jump": {"$ref": "#jump"}},
                     "definitions": {"jump": {"$id": "#jump", "type": "integer", "minimum": 1}}},
    "2020-12 $anchor": {"type": "object", "properties": {"jump": {"$ref": "#jump"}},
                        "$defs": {"jump": {"$anchor": "jump", "type": "integer", "minimum": 1}}},
    # the root's own absolute id, and a pointer below it (ninjs in JSON Schema Store)
    "absolute id": {"$schema": "http://json-schema.org/draft-04/schema#", "id": "http://example.com/s.json#",
                    "type": "object",
                    "properties": {"jump": {"$ref": "http://example.com/s.json#/definitions/jump"},
                                   "kids": {"type": "array", "items": {"$ref": "http://example.com/s.json#"}}},
                    "definitions": {"jump": {"type": "integer", "minimum": 1}}},
}


@pytest.mark.parametrize("name", list(ANCHORED))
def test_refs_to_identifiers_the_schema_declares(name, smollm2_vocab, smollm2_tokenizer):
    """A ``$ref`` may name a sub-schema by an identifier the schema declares (a
    plain-name fragment, or an ``$id``'s URI with a pointer below it), in the
    declared draft's keyword; compiled documents agree with jsonschema, recursion
    through such a ref included."""
    schema = ANCHORED[name]
    guide = guided.compile(guided.JsonSchema(schema, whitespace="compact"), smollm2_vocab)
    validator = reference_validator(schema)
    docs = [{}, {"jump": 3}, {"jump": 0}, {"jump": "x"}, {"jump": 2, "kids": [{"jump": 5}, {"kids": []}]},
            {"kids": [{"jump": 0}]}]
    for doc in docs:
        m = guide.matcher()
        text = json.dumps(doc, separators=(",", ":"))
        ok = m.accept_tokens(smollm2_tokenizer.encode(text, add_special_tokens=False)) and m.is_accepting()
        assert ok == validator.is_valid(doc), (name, doc)
    # In another draft's keyword the identifier is not one.
    legacy = copy.deepcopy(ANCHORED["draft-04 id"])
    legacy["$schema"] = "http://json-schema.org/draft-07/schema#"
    with pytest.raises(guided.UnsupportedSchemaError, match="identifier"):
        compile_json_schema(legacy)


def test_draft_3_required_booleans_make_their_keys_required():
    """Draft 3 marks a required key with ``"required": true`` in the key's own schema."""
    schema = {"$schema": "http://json-schema.org/draft-03/schema#", "type": "object",
              "properties": {"a": {"type": "object", "required": True}, "b": {"type": "string", "required": True},
                             "c": {"type": "integer"}}}
    dfa = compile_json_schema(schema, "compact")
    validator = reference_validator(schema)
    for value in ({}, {"a": {}}, {"b": "x"}, {"a": {}, "b": "x"}, {"a": {}, "b": "x", "c": 1}, {"a": {}, "c": 1}):
        assert dfa.matches(compact(value)) == validator.is_valid(value), value
