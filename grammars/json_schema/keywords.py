"""The JSON Schema compiler's keyword tables, limits and small helpers, shared by
its parts (``compiler`` and the mixins in ``logic.combinators``, ``scalars.values``,
``containers.arrays``, ``containers.objects``)."""

from __future__ import annotations

import json
import math
import re

from guided.errors import ApproximationLimitError, SchemaError, UnsatisfiableSchemaError
from guided.fsm.dfa import MAX_DFA_STATES, determinize
from guided.fsm.nfa import NFA
from guided.fsm.ops import embed
from guided.grammars.json_schema.logic.merge import ANNOTATIONS
from guided.grammars.json_schema.scalars.numbers import JSON_INTEGER

#: Nesting depth of open values inside eagerly built sub-automata (DFA algebra).
ANY_DEPTH = 2
#: Most key regions (sets of matching patterns) one patternProperties may split into.
MAX_PATTERN_REGIONS = 16
#: Most sets of used values one ``uniqueItems`` array over enum items may track.
MAX_UNIQUE_SETS = 4096
#: Nesting depth of open values in the top-level (lazily built) automaton.
OPEN_DEPTH = 64
#: A format DFA with more edges than this is copied into a lazy automaton only when
#: decoding reaches it (format "regex": 22k edges, 6 ms and ~2 MB a copy, used 2,640
#: times in JSONSchemaStore's renovate schema; hostname: 3.3k). Smaller ones (uri: 900)
#: are copied at once, which costs less than the deferred step's closure.
EMBED_LATER_EDGES = 2_000

#: JSON numbers written with an exponent (what the plain-decimal automata leave out).
NUMBER_EXP = JSON_INTEGER + r"(?:\.[0-9]+)?[eE][+-]?[0-9]+"

#: ``key_order``: "schema" (keys in ``properties`` order) or "any" (``containers.key_order``).
KEY_ORDERS = ("schema", "any")
#: With ``key_order="any"``, the sub-automata DFA algebra builds whole have objects of
#: at most this many keys in any order, then (where one grows past its limits) this
#: many, then none: the last try is schema order.
WHOLE_KEYS_LADDER = (8, 6, 0)
#: Once an object was built whole with keys in any order, the DFAs and products of
#: that try stop here (instead of MAX_DFA_STATES / MAX_PRODUCT_STATES): one that
#: grows past it is cheaper to build again with fewer such objects.
WHOLE_ANY_ORDER_STATES = 50_000
#: The states all such tries of one compile may build (the DFAs they keep, and the
#: limit for each that failed on it); past it the tries stop and schema order is
#: used.
WHOLE_ANY_ORDER_WORK = 300_000
#: A rung of the ladder whose tries failed on those limits this often in one compile
#: is not tried again there: reaching a limit takes seconds (5-7 s a try for a schema
#: of 15 large ``oneOf`` branches), and the sub-automata of one schema tend to be alike.
WHOLE_RUNG_FAILURES = 2

#: Formats whose regex is exactly the checker's language (the others are subsets, so
#: an over-approximation must not use them).
EXACT_FORMATS = {"date", "time", "date-time", "ipv4", "ipv6"}

DEPENDENCY_KEYWORDS = ("dependentRequired", "dependentSchemas", "dependencies")


#: Keywords ``value`` acts on before ``not`` / ``if`` (the schema is theirs first).
EARLIER_KEYWORDS = ("$ref", "enum", "const", "allOf", "anyOf", "oneOf") + DEPENDENCY_KEYWORDS
#: minProperties / maxProperties count keys in states; larger counts are refused.
MAX_COUNTED_PROPERTIES = 24
#: Key dependencies expand into 2**n branches; more trigger keys than this are refused.
MAX_DEPENDENCY_TRIGGERS = 4
#: Most parts a ``oneOf`` becomes as a union of each branch and the others' negations.
MAX_ONE_OF_CHOICES = 64
#: Objects in an ``enum`` / ``const`` up to this many keys are spelled in every key
#: order in supersets; larger ones are braces around any text.
MAX_SPELLED_KEYS = 3

#: Formats the reference validator (jsonschema, draft 2020-12 checker) checks.
VALIDATED_FORMATS = {
    "date", "date-time", "duration", "email", "hostname", "idn-email", "idn-hostname", "ipv4",
    "ipv6", "iri", "iri-reference", "json-pointer", "regex", "relative-json-pointer", "time",
    "uri", "uri-reference", "uri-template", "uuid",
}

TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
#: Keywords on objects and on arrays: without them, a container's superset takes in
#: no value the schema refuses (no approximation to note).
OBJECT_KEYWORDS = {"properties", "required", "additionalProperties", "patternProperties", "propertyNames",
                   "minProperties", "maxProperties", "unevaluatedProperties"}
ARRAY_KEYWORDS = {"items", "prefixItems", "additionalItems", "minItems", "maxItems", "contains",
                  "minContains", "maxContains", "uniqueItems", "unevaluatedItems"}

#: The keywords that constrain values of one JSON type only (integers are numbers).
TYPE_KEYWORDS = {
    "string": {"minLength", "maxLength", "pattern", "format", "contentEncoding", "contentMediaType"},
    "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"},
    "array": ARRAY_KEYWORDS,
    "object": OBJECT_KEYWORDS | {"dependentRequired", "dependentSchemas", "dependencies"},
}

#: Per JSON type, the keywords that constrain only values of other types.
OTHER_TYPES_KEYWORDS = {t: set().union(*(kws for kind, kws in TYPE_KEYWORDS.items() if kind != t))
                         for t in ("null", "boolean", "number", "string", "array", "object")}

HANDLED = {
    "type", "enum", "const", "properties", "required", "additionalProperties",
    "patternProperties", "propertyNames", "items", "prefixItems", "additionalItems",
    "minItems", "maxItems", "contains", "minContains", "maxContains", "minLength", "maxLength",
    "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref",
    "minProperties", "maxProperties", "uniqueItems", "dependentRequired", "dependencies",
    "dependentSchemas", "unevaluatedProperties", "unevaluatedItems",
}
#: Standard keywords an automaton cannot enforce in general (handled when trivial).
STANDARD = HANDLED | {"$dynamicRef", "$recursiveRef", "$recursiveAnchor", "disallow", "extends", "divisibleBy"}



def json_pointer(path: str, *parts) -> str:
    """``path`` extended by ``parts``, each escaped as RFC 6901 says (``~0``, ``~1``).

    Example::

        >>> json_pointer("#/properties", "a/b", 0)
        '#/properties/a~1b/0'
    """
    out = path
    for p in parts:
        out += "/" + str(p).replace("~", "~0").replace("/", "~1")
    return out


def compact_json(value) -> bytes:
    """``value`` as compact UTF-8 JSON (no spaces, no ASCII escaping)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def value_texts(v) -> list[bytes]:
    """The compact spellings of a value (1 and 1.0 are equal in JSON Schema). An
    integer gets its float spelling only where the float is the same number:
    ``10**20 + 1`` as a float is ``1e+20``, another value (and past 1.8e308 there is
    no float at all)."""
    texts = [compact_json(v)]
    if isinstance(v, float) and v.is_integer():
        texts.append(compact_json(int(v)))
    elif isinstance(v, int) and not isinstance(v, bool) and abs(v) <= 2**1023:
        f = float(v)
        if f == v:
            texts.append(compact_json(f))
    return texts


def scalar_enum(schema) -> list | None:
    """Scalar values that a property schema's value must be one of (its own enum /
    const, or an ``allOf`` part's), else None."""
    if not isinstance(schema, dict):
        return None
    values = [schema["const"]] if "const" in schema else schema.get("enum")
    if isinstance(values, list) and values and not any(isinstance(v, (dict, list)) for v in values):
        return values
    for part in schema.get("allOf", []) if isinstance(schema.get("allOf"), list) else []:
        got = scalar_enum(part)
        if got is not None:
            return got
    return None


_SCALAR_TYPES = ("string", "number", "integer", "boolean", "null")


def scalar_kinds(schema) -> list | None:
    """What a property's value can be when it is surely a scalar: its enum values as
    ``("value", v)`` or its scalar type names; None when it may be a container."""
    values = scalar_enum(schema)
    if values is not None:
        return [("value", v) for v in values]
    if not isinstance(schema, dict):
        return None
    types = schema.get("type")
    types = [types] if isinstance(types, str) else types
    if not isinstance(types, list) or not types or any(t not in _SCALAR_TYPES for t in types):
        return None
    return list(dict.fromkeys(types))


def multiple_of_step(schema, path):
    """``multipleOf`` (an int where it is integral), None when absent; a
    ``SchemaError`` unless it is a positive number."""
    step = schema.get("multipleOf")
    if step is None:
        return None
    if not isinstance(step, (int, float)) or isinstance(step, bool) or not math.isfinite(step) or step <= 0:
        raise SchemaError("multipleOf must be a positive number", json_pointer(path, "multipleOf"), "multipleOf")
    return int(step) if isinstance(step, float) and step.is_integer() else step


def listed_before_properties(schema: dict, keyword: str) -> bool:
    """Whether ``keyword`` (a logic keyword) comes before ``properties`` in ``schema``.

    Merged objects list their keys in the order the schema text names them: the keys
    of ``{"allOf": [{"$ref": "#/$defs/base"}], "properties": {...}}`` start with the
    base's, those of ``{"properties": {...}, "oneOf": [...]}`` with its own. (But a
    part that only names keys the other names too takes the other's order:
    ``logic.merge.merge``.)
    """
    order = list(schema)
    return "properties" in schema and order.index(keyword) < order.index("properties")


def excluded_by(view, part) -> bool:
    """Whether no value of ``view`` (``object_view``) can satisfy the negation
    ``part``: their types do not meet, or the part lacks a key an object-only view
    requires."""
    if view is None or not isinstance(part, dict):
        return False
    kinds = part.get("type")
    if kinds is not None:
        kinds = set(kinds if isinstance(kinds, list) else [kinds])
        numbers = {"number", "integer"}
        if not (kinds & view[0] or (kinds & numbers and view[0] & numbers)):
            return True
    if view[0] != {"object"}:
        return False
    props = part.get("properties", {})
    return any(props.get(name) is False for name in view[1])


def defined_keywords(schema):
    """``schema`` without keywords no draft defines (x-intellij-..., nullable): they
    constrain nothing, and two ``allOf`` parts disagreeing on one must still merge."""
    if not isinstance(schema, dict):
        return schema
    return {k: v for k, v in schema.items() if k in STANDARD or k in ANNOTATIONS}


def without_idle_conditionals(schema):
    """``schema`` without the keywords of ``if`` / ``then`` / ``else`` that do nothing:
    ``then`` and ``else`` with no ``if`` beside them, an ``if`` with neither. (Left in,
    a merge would join a stray ``else`` to another part's ``if``.)"""
    if not isinstance(schema, dict):
        return schema
    if "if" in schema:
        idle = () if "then" in schema or "else" in schema else ("if",)
    else:
        idle = ("then", "else")
    if not any(k in schema for k in idle):
        return schema
    return {k: v for k, v in schema.items() if k not in idle}


def satisfiable_builds(build, items, why: str, path: str) -> list:
    """``build(item)`` for each item that is satisfiable; ``why`` at ``path`` when none is."""
    out = []
    approximated = False
    for item in items:
        try:
            out.append(build(item))
        except UnsatisfiableSchemaError:
            pass
        except ApproximationLimitError:
            approximated = True
    if not out:
        raise nothing_left_error(why, path, approximated)
    return out


def nothing_left_error(why: str, path: str, approximated: bool) -> SchemaError:
    """Nothing is left: a proof of that, or only the limit of algebra over supersets."""
    if approximated:
        return ApproximationLimitError(
            f"{why}, after subtracting supersets of the excluded values: the overlap cannot be "
            "told apart exactly here (valid values may exist)", path)
    return UnsatisfiableSchemaError(why, path)


def union_dfa(dfas, limit: int = MAX_DFA_STATES):
    """The minimal DFA of the union of ``dfas`` (``RegexTooLargeError`` past ``limit`` states)."""
    nfa = NFA()
    s, e = nfa.union([embed(nfa, d) for d in dfas])
    return determinize(nfa, s, e, limit)


def pattern_search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` finds a match in ``text`` by Python's ``re`` (False for a pattern
    ``re`` cannot read): which ``patternProperties`` apply to a listed key."""
    import re

    try:
        return re.search(pattern, text) is not None
    except re.error:
        return False


def number_spellings(v) -> str:
    """A regex for the plain spellings of the number ``v`` (trailing zeros allowed),
    plus every exponent spelling of any number: a superset of how ``v`` is written."""
    if isinstance(v, float) and not v.is_integer():
        text = repr(v)
        if "e" in text or "E" in text:
            return NUMBER_EXP
        plain = re.escape(text) + "0*"
    else:
        plain = re.escape(str(int(v))) + r"(\.0+)?"
    if v == 0:
        plain = r"-?0(\.0+)?"
    return f"{plain}|{NUMBER_EXP}"


def int_lower(lo, xlo):
    """The least integer ``>= lo`` and ``> xlo`` (either may be None; None when both are)."""
    vals = []
    if lo is not None:
        vals.append(math.ceil(lo))
    if xlo is not None:
        vals.append(math.floor(xlo) + 1)
    return max(vals) if vals else None


def int_upper(hi, xhi):
    """The greatest integer ``<= hi`` and ``< xhi`` (either may be None; None when both are)."""
    vals = []
    if hi is not None:
        vals.append(math.floor(hi))
    if xhi is not None:
        vals.append(math.ceil(xhi) - 1)
    return min(vals) if vals else None


def is_recursion_panic(e: BaseException) -> bool:
    """A Rust extension's panic (pyo3 ``PanicException``) caused by a RecursionError."""
    return type(e).__name__ == "PanicException" and "RecursionError" in str(e)
