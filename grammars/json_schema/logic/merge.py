"""``allOf`` by keyword merging: the conjunction of two schemas as one schema.

Merging keeps one object chain in ``properties`` order (an automaton intersection of
two object languages would only accept keys in an order both agree on). Where a
merge would not be exact, ``merge`` returns None and the compiler intersects the
automata instead.
"""

from __future__ import annotations

#: Keywords that constrain no value (annotations, and the stores of sub-schemas).
ANNOTATIONS = {
    "title", "description", "default", "examples", "example", "$comment", "$schema", "$id",
    "id", "readOnly", "writeOnly", "deprecated", "contentMediaType", "contentEncoding",
    "contentSchema", "$anchor", "$dynamicAnchor", "$vocabulary", "definitions", "$defs",
}


def json_equal(a, b) -> bool:
    """JSON equality: ``true`` is not ``1`` (but ``1`` is ``1.0``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b



def merge(a, b):
    """The keyword-level conjunction of two schemas, or None when that is not exact
    (the caller then intersects automata instead).

    Keys of ``properties`` follow ``a``'s order, then ``b``'s new ones (unless ``a``
    names only keys ``b`` names too: then ``b``'s order); bounds take the tighter
    value, ``required`` lists join, a key named on both sides gets an ``allOf`` of
    its two schemas. ``False`` where the types cannot meet.

    Example::

        >>> merge({"properties": {"a": {}}, "required": ["a"]}, {"properties": {"b": {}}, "maxLength": 3})
        {'properties': {'a': {}, 'b': {}}, 'required': ['a'], 'maxLength': 3}
        >>> merge({"type": "string"}, {"type": "integer"})
        False
        >>> merge({"anyOf": [{}]}, {"anyOf": [{"type": "null"}]}) is None
        True
    """
    if a is True or a == {}:
        return b
    if b is True or b == {}:
        return a
    if a is False or b is False:
        return False
    if not isinstance(a, dict) or not isinstance(b, dict):
        return None
    if "$ref" in a or "$ref" in b:
        return None
    out = dict(a)
    for k, v in b.items():
        if k in ANNOTATIONS:
            out.setdefault(k, v)
            continue
        if k not in out:
            out[k] = v
            continue
        w = out[k]
        if w == v:
            continue
        if k == "type":
            ta = set(w if isinstance(w, list) else [w])
            tb = set(v if isinstance(v, list) else [v])
            both = (ta & tb) | ({"integer"} if ("integer" in ta and "number" in tb) or ("number" in ta and "integer" in tb) else set())
            if not both:
                return False
            out[k] = sorted(both)
        elif k == "required":
            out[k] = list(dict.fromkeys(list(w) + list(v)))
        elif k in ("minimum", "minLength", "minItems", "minProperties", "exclusiveMinimum") and not isinstance(v, bool) and not isinstance(w, bool):
            out[k] = max(w, v)
        elif k in ("maximum", "maxLength", "maxItems", "maxProperties", "exclusiveMaximum") and not isinstance(v, bool) and not isinstance(w, bool):
            out[k] = min(w, v)
        elif k == "properties":
            # Keys follow the first side's order, then the other's new keys; but a
            # side that only names keys the other names too (a oneOf branch pinning
            # some of the object's properties) takes the other's order.
            order = list(v) if set(w) < set(v) else list(w) + [n for n in v if n not in w]
            out[k] = {n: ({"allOf": [w[n], v[n]]} if n in w and n in v else w[n] if n in w else v[n]) for n in order}
        elif k == "enum":
            out[k] = [x for x in w if any(json_equal(x, y) for y in v)]
        elif k in ("items", "additionalProperties", "propertyNames", "contains") and isinstance(w, (dict, bool)) and isinstance(v, (dict, bool)):
            out[k] = {"allOf": [w, v]}
        elif k == "pattern":
            out[k] = (w if isinstance(w, list) else [w]) + [v]
        elif k in ("anyOf", "oneOf", "allOf"):
            out[k] = None
            return None
        else:
            return None
    # additionalProperties of one side restricts the other's properties.
    for x, y in ((a, b), (b, a)):
        if "additionalProperties" in x and "properties" in y:
            # A key y forbids (``false``) stays forbidden whatever x says of it.
            extra = [n for n, sub in y["properties"].items() if n not in x.get("properties", {}) and sub is not False]
            if extra and x.get("patternProperties"):
                return None
            if extra and x["additionalProperties"] is not True:
                props = dict(out["properties"])
                for n in extra:
                    props[n] = {"allOf": [props[n], x["additionalProperties"]]} if x["additionalProperties"] is not False else False
                out["properties"] = props
    return out


