"""Keywords of older JSON Schema drafts: a schema that declares a draft (``$schema``)
is read with that draft's vocabulary.

::

    {"$schema": "...draft-04/schema#", "if": {...}, "then": {...}, "const": 1}
        --> {"$schema": "...draft-04/schema#"}        (draft 4 has no if/then/const)

The reference validator (``jsonschema.validators.validator_for``) picks its rules by
``$schema`` and ignores keywords a draft does not define, so a draft-04 schema's
``const`` constrains nothing. The compiler does the same by removing those keywords
from every sub-schema before it reads any of them (an analysis that saw ``const``
and a builder that did not would disagree about which ``oneOf`` branches overlap).
"""

from __future__ import annotations

#: Keywords the compiler enforces, by the draft that introduced them (earlier
#: drafts do not know them). Draft 2020-12 and undeclared drafts know them all.
_INTRODUCED = {
    "draft-06": {"const", "contains", "propertyNames"},
    "draft-07": {"if", "then", "else"},
    "2019-09": {"dependentRequired", "dependentSchemas", "minContains", "maxContains", "unevaluatedProperties",
                "unevaluatedItems"},
    "2020-12": {"prefixItems"},
}
_ORDER = ["draft-03", "draft-04", "draft-06", "draft-07", "2019-09", "2020-12"]

# Where sub-schemas stand: a keyword whose value is one schema, a list of them, or a
# name -> schema map (draft-04 "dependencies" maps to lists of names as well).
ONE_SCHEMA_KEYWORDS = ("additionalProperties", "additionalItems", "items", "not", "contains", "propertyNames", "if", "then",
        "else", "unevaluatedProperties", "unevaluatedItems")
LIST_KEYWORDS = ("allOf", "anyOf", "oneOf", "items", "prefixItems")
MAP_KEYWORDS = ("properties", "patternProperties", "definitions", "$defs", "dependencies", "dependentSchemas")


def declared_draft(root) -> int | None:
    """The index in ``_ORDER`` of the draft ``root``'s ``$schema`` names, or None."""
    declared = str(root.get("$schema", "")) if isinstance(root, dict) else ""
    return next((i for i, draft in enumerate(_ORDER) if draft in declared), None)


def unknown_to_draft(root) -> frozenset[str]:
    """The enforced keywords that the draft ``root`` declares does not define."""
    i = declared_draft(root)
    if i is None:
        return frozenset()
    return frozenset().union(*(_INTRODUCED.get(later, set()) for later in _ORDER[i + 1:]))


def in_declared_draft(root):
    """``root`` with every keyword its declared draft does not define removed from
    every sub-schema (``root`` itself is returned when there is nothing to remove).

    Example::

        >>> in_declared_draft({"$schema": "http://json-schema.org/draft-04/schema#",
        ...                    "properties": {"a": {"const": 1, "type": "integer"}}})["properties"]
        {'a': {'type': 'integer'}}
    """
    unknown = unknown_to_draft(root)
    return _strip(root, unknown) if unknown else root


def _strip(schema, unknown: frozenset[str]):
    if not isinstance(schema, dict):
        return schema
    out = {k: v for k, v in schema.items() if k not in unknown}
    for k in ONE_SCHEMA_KEYWORDS:
        if isinstance(out.get(k), dict):
            out[k] = _strip(out[k], unknown)
    for k in LIST_KEYWORDS:
        if isinstance(out.get(k), list):
            out[k] = [_strip(s, unknown) for s in out[k]]
    for k in MAP_KEYWORDS:
        if isinstance(out.get(k), dict):
            out[k] = {name: _strip(s, unknown) for name, s in out[k].items()}
    return out


def identified_schemas(root) -> dict[str, object]:
    """The sub-schemas ``root`` names, by the ``$ref`` that finds them: ``"#name"``
    for a plain-name fragment (draft 3-4 ``"id": "#name"``, draft 6-7 ``"$id":
    "#name"``, 2019-09 on ``"$anchor": "name"``), and an ``$id``'s URI (an empty
    fragment dropped) for the schema it identifies. Identifiers stand where the
    declared draft puts them and are searched where sub-schemas stand, as the
    reference validator does; URIs are matched as written (not resolved against a
    base).

    Example::

        >>> identified_schemas({"$schema": "http://json-schema.org/draft-04/schema#",
        ...                     "definitions": {"d": {"id": "#day", "type": "string"}}})
        {'#day': {'id': '#day', 'type': 'string'}}
    """
    draft = declared_draft(root)
    id_keyword = "id" if draft is not None and draft < _ORDER.index("draft-06") else "$id"
    anchors = draft is None or draft >= _ORDER.index("2019-09")
    found: dict[str, object] = {}

    def visit(schema) -> None:
        if not isinstance(schema, dict):
            return
        ident = schema.get(id_keyword)
        if isinstance(ident, str) and ident not in ("", "#"):
            found.setdefault(ident[:-1] if ident.endswith("#") else ident, schema)
        for k in ("$anchor", "$dynamicAnchor") if anchors else ():
            if isinstance(schema.get(k), str):
                found.setdefault("#" + schema[k], schema)
        for k in ONE_SCHEMA_KEYWORDS:
            visit(schema.get(k))
        for k in LIST_KEYWORDS:
            if isinstance(schema.get(k), list):
                for sub in schema[k]:
                    visit(sub)
        for k in MAP_KEYWORDS:
            if isinstance(schema.get(k), dict):
                for sub in schema[k].values():
                    visit(sub)

    visit(root)
    return found
