"""JSON Schema -> minimal byte-level DFA.

::

    schema ──$ref / allOf merge──> one keyword view per node ──fragments──> NFA ──> minimal DFA
                                   (anyOf: union; oneOf / not / if: exact DFA algebra)

The accepted texts are JSON documents valid against the schema, written with the
chosen whitespace, object keys in ``properties`` order (optional ones may be left
out; additional keys, where allowed, come after them), or with ``key_order="any"`` in
any order (``json_key_order``).

Polarity: the normal ("under") compile accepts a *subset* of the valid texts (key
order, bounded nesting of open values, format subsets). Whatever is subtracted --
``not X``, the ``else`` side of ``if``, the other branches of ``oneOf`` -- is
compiled by a partner in "over" mode, which accepts a *superset* (objects and arrays
written member by member one level deep, ``json_superset``, deeper ones brackets
around any text; required keys somewhere inside), so that ``under - over`` is again a subset: stricter than the schema, never looser. Where the schema asks for
something an automaton cannot check exactly, the constraint is refused with a
``SchemaError`` naming the keyword and its JSON pointer (``strict=True``), or dropped
with a warning (``strict=False``); it is never silently loosened. Values of
unconstrained type (``{}``, ``true``, additional properties) nest up to
``OPEN_DEPTH`` levels in the top-level automaton, where each level is a deferred NFA
fragment built only when decoding opens a container (``NFA.deferred``). Inside the
eagerly built sub-automata of DFA algebra they nest at most ``ANY_DEPTH`` levels (the
nesting is not regular, so a full DFA of it grows exponentially).

Cost notes: one NFA for the whole schema (``$ref`` targets inlined), determinised
lazily (``fsm.lazy``): compile time grows with the schema's size, not with its DFA's,
and only the states decoding visits are ever built. Sub-automata are built eagerly
(and minimised) only where DFA algebra needs them: ``oneOf`` overlaps, ``not``,
``if``, ``allOf`` parts that do not merge, several patterns on one string, keys.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import re
import warnings

from fsm.dfa import DFA, MAX_DFA_STATES, determinize
from fsm.errors import EmptyLanguageError, RegexError, RegexTooLargeError
from fsm.lazy import LazyDFA
from fsm.nfa import NFA, Template
from fsm.ops import MAX_PRODUCT_STATES, embed, intersect, is_empty_intersection
from fsm.ops import union as dfa_union
from fsm.regex import compile_regex

from . import json_text as jt
from .json_merge import ANNOTATIONS, merge
from .json_merge import json_equal as _json_equal
from .json_formats import format_regex
from .json_multiple_of import MAX_STATES as MAX_MULTIPLE_STATES
from .json_multiple_of import multiple_of_dfa
from .json_numbers import JSON_INTEGER, JSON_NUMBER, integer_multiple_of_regex, integer_range_regex, number_range_regex
from .json_conditional import conditional_as_union, conditionals_by_value, negation, not_as_union
from .json_disjoint import disjoint_pairs
from .json_string_dfas import (always_found, body_dfa, body_parts, bounded_body, class_cuts, constraint_cuts, constraint_dfa,
                               defer_product, keys_outside, minus, other_keys_dfa, pattern_key_dfa)
from .json_errors import (ApproximationLimitError, RecursiveSchemaError, SchemaError, UnsatisfiableSchemaError,
                          UnsupportedSchemaError)
from .json_drafts import in_declared_draft
from .json_key_order import AnyOrderTooLarge, ObjectShape, any_order_object
from .json_presence import presence_keys, presence_variants
from . import json_superset as sup

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

#: ``key_order``: "schema" (keys in ``properties`` order) or "any" (``json_key_order``).
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
#: is not tried again there: reaching a limit takes seconds, and the sub-automata of
#: one schema tend to be alike (Github_hard o17529: 15 oneOf branches, each try
#: failing after 5-7 s).
WHOLE_RUNG_FAILURES = 2

#: Formats whose regex is exactly the checker's language (the others are subsets, so
#: an over-approximation must not use them).
EXACT_FORMATS = {"date", "time", "date-time", "ipv4", "ipv6"}

DEPENDENCY_KEYWORDS = ("dependentRequired", "dependentSchemas", "dependencies")

#: Keywords ``value`` acts on before ``not`` / ``if`` (the schema is theirs first).
_EARLIER_KEYWORDS = ("$ref", "enum", "const", "allOf", "anyOf", "oneOf") + DEPENDENCY_KEYWORDS
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
_OTHER_TYPES_KEYWORDS = {t: set().union(*(kws for kind, kws in TYPE_KEYWORDS.items() if kind != t))
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


# -- whitespace ----------------------------------------------------------------------


class Whitespace:
    """Where and what whitespace may appear between JSON tokens.

    ``"flexible"`` (default): at most two spaces or tabs, then at most one newline
    followed by at most 24 spaces or tabs, between any two tokens: pretty-printing
    fits, runaway newlines do not. ``"compact"``: none. ``{"indent": n}``: exactly
    ``json.dumps(value, indent=n)``.
    """

    FLEXIBLE = r"[ \t]{0,2}(\r?\n[ \t]{0,24})?"

    def __init__(self, spec="flexible"):
        self.indent = None
        if spec in (None, "flexible"):
            self.kind = "flexible"
        elif spec == "compact":
            self.kind = "compact"
        elif isinstance(spec, dict) and set(spec) == {"indent"} and isinstance(spec["indent"], int) and spec["indent"] >= 0:
            self.kind = "indent"
            self.indent = spec["indent"]
        else:
            raise ValueError(f'whitespace must be "flexible", "compact" or {{"indent": n}}, not {spec!r}')

    def key(self):
        return (self.kind, self.indent)

    def depth_matters(self) -> bool:
        return self.kind == "indent"

    def site(self, nfa: NFA, kind: str, depth: int) -> tuple[int, int]:
        """``kind``: open / close / comma / colon / empty (between ``{`` and ``}``)."""
        if self.kind == "compact":
            return nfa.empty()
        if self.kind == "flexible":
            return jt.regex_fragment(nfa, self.FLEXIBLE)
        pad = b" " * self.indent
        text = {
            "open": b"\n" + pad * (depth + 1),
            "comma": b"\n" + pad * (depth + 1),
            "close": b"\n" + pad * depth,
            "colon": b" ",
            "empty": b"",
        }[kind]
        return nfa.byte_string(text)


def _pointer(path: str, *parts) -> str:
    out = path
    for p in parts:
        out += "/" + str(p).replace("~", "~0").replace("/", "~1")
    return out


def _dumps(value) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


# -- the compiler --------------------------------------------------------------------


class SchemaCompiler:
    """Compiles one root schema; ``compile()`` returns the DFA of valid documents.

    Example::

        >>> dfa = SchemaCompiler({"type": "integer", "minimum": 1}, "compact").compile()
        >>> dfa.matches(b"12"), dfa.matches(b"0")
        (True, False)
    """

    def __init__(self, schema, whitespace="flexible", strict: bool = True, *, key_order: str = "schema",
                 over: bool = False, partner=None):
        self.over = over
        self._partner = partner
        self._ref_stack: list[str] = []
        self._dfas: dict[tuple, DFA] = {}
        self._string_bodies: dict[tuple, DFA] = {}  # (constraints, minLength, maxLength) -> body
        self._deferred_bodies: dict[tuple, set | None] = {}  # the same key -> cuts if deferred
        self._pattern_templates: dict[str, Template] = {}  # _pattern_fragment
        #: Over mode: supersets taken so far, and the cached DFAs that hold one.
        self.approximations = 0
        #: Over mode: container levels still written member by member (``json_superset``).
        self._superset_levels = sup.SUPERSET_LEVELS
        self._flat_supersets = False
        self._inexact: set[tuple] = set()
        self._too_large: dict[tuple, tuple[RegexTooLargeError, bool]] = {}
        self._differences: dict[tuple, tuple] = {}  # subtract's results
        #: While DFA algebra builds a sub-automaton with ``key_order="any"``: objects of
        #: at most this many keys get any key order there (None: no such build).
        self.whole_keys: int | None = None
        self._whole_built = 0  # objects built whole in any key order, in this try
        self._holds_whole: set[tuple] = set()  # the cached DFAs that hold such objects
        self._whole_work_left = WHOLE_ANY_ORDER_WORK
        self._rung_failures: dict[int, int] = {}  # ladder rung -> tries failed on a size limit
        if partner is not None:  # share the schema, settings and bookkeeping
            self.root, self.ws, self.strict = partner.root, partner.ws, partner.strict
            self.key_order = partner.key_order
            self.dropped, self._validator = partner.dropped, None
            if partner.grammar is not None:
                # Grammar mode reads terminals by longest match: a finer superset makes
                # more inline "not X" alternatives start like the recursive calls beside
                # them, and the lexer would prefer them (``json_recursive``). Flat text
                # supersets there, as before member-by-member ones existed.
                self._superset_levels = 0
                self._flat_supersets = True
            self.grammar = None
            return
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except json.JSONDecodeError as e:
                raise SchemaError(f"schema is not valid JSON: {e}", "") from None
        if not isinstance(schema, (dict, bool)):
            raise SchemaError(f"a schema must be an object or a boolean, not {type(schema).__name__}", "#")
        self.root = in_declared_draft(schema)
        self.ws = Whitespace(whitespace)
        if key_order not in KEY_ORDERS:
            raise ValueError(f'key_order must be "schema" or "any", not {key_order!r}')
        self.key_order = key_order
        self.strict = strict
        self.dropped: list[tuple[str, str]] = []
        self._validator = None
        #: Set by ``grammars.json_recursive``: turns recursive ``$ref`` and open values
        #: in its own NFAs into calls of grammar rules.
        self.grammar = None

    # -- entry points --------------------------------------------------------------

    def compile(self) -> LazyDFA:
        """The automaton of valid documents, determinised on demand (a large schema's
        full DFA can have thousands of states, of which decoding visits a few)."""
        nfa = NFA(lazy=True)
        try:
            s, e = self.value(nfa, self.root, "#", 0)
            dfa = LazyDFA(nfa, s, e)
        except EmptyLanguageError:
            nfa.release()
            raise UnsatisfiableSchemaError("no JSON value satisfies the schema", "#") from None
        except BaseException:
            # The deferred builders close over the NFA: a cycle the failed compile's
            # traceback would otherwise keep for the collector to find.
            nfa.release()
            raise
        if self.dropped and not self.strict:
            listed = ", ".join(f"{k} at {p}" for k, p in self.dropped)
            warnings.warn(f"JSON Schema keywords not enforced: {listed}", stacklevel=3)
        return dfa

    def dfa(self, schema, path: str, depth: int) -> DFA:
        """A sub-schema's minimal DFA (memoised per compile: ``oneOf`` and ``not``
        ask for the same branches again and again)."""
        key = self._dfa_key(schema, depth)
        if key in self._too_large:
            e, whole = self._too_large[key]
            self._whole_built += whole  # a failure of a try with lower limits (``algebra``)
            # A fresh exception: raising the stored one again would chain this
            # call's frames (and what they hold) onto its traceback.
            raise type(e)(*e.args)
        got = self._dfas.get(key)
        before, whole_before = self.approximations, self._whole_built
        if got is None:
            try:
                got = self._dfas[key] = self._build_dfa(schema, path, depth)
                self._spend(got)
            except RegexTooLargeError as e:
                if self.over and not self._flat_supersets:
                    # Member-by-member pieces side by side (a union of several objects)
                    # can still blow up together: the flat supersets, as a last resort.
                    with self._supersets(0, True):
                        got = self._dfas[key] = self.dfa(schema, path, depth)
                else:
                    # Remembered too: finding out took the whole subset construction.
                    self._too_large[key] = (type(e)(*e.args), self._whole_built > 0)
                    raise
            if self.approximations != before:
                self._inexact.add(key)
            if self._whole_built != whole_before:
                self._holds_whole.add(key)
        else:
            self.approximations += key in self._inexact
            self._whole_built += key in self._holds_whole  # as building it again would
        return got

    def _dfa_key(self, schema, depth: int) -> tuple:
        return (json.dumps(schema, sort_keys=True, default=str), depth if self.ws.depth_matters() else 0,
                self._superset_levels, self._flat_supersets, self.whole_keys)

    def algebra(self, build):
        """``build()``: DFA algebra (sub-automata built whole, their products), with
        ``key_order="any"`` tried with objects in any key order where they are small
        enough (``WHOLE_KEYS_LADDER``). A try that builds no such object ran at the
        usual limits and is what schema order would build: its failure stands."""
        if self.whole_keys is not None or self.key_order != "any" or self.over:
            return build()  # inside a try already, or nothing to try
        try:
            for keys in WHOLE_KEYS_LADDER:
                if keys and (self._whole_work_left <= 0 or self._rung_failures.get(keys, 0) >= WHOLE_RUNG_FAILURES):
                    continue
                self.whole_keys, self._whole_built = keys, 0
                try:
                    return build()
                except RegexTooLargeError as e:
                    if not self._whole_built:
                        raise
                    if not isinstance(e, AnyOrderTooLarge):
                        self._whole_work_left -= WHOLE_ANY_ORDER_STATES  # about what hitting the limit took
                        self._rung_failures[keys] = self._rung_failures.get(keys, 0) + 1
        finally:
            self.whole_keys, self._whole_built = None, 0
        raise AssertionError("the last try builds no object in any key order")

    def algebra_limit(self, usual: int) -> int:
        """The state limit of a DFA or product built now (see ``WHOLE_ANY_ORDER_STATES``)."""
        return min(usual, WHOLE_ANY_ORDER_STATES) if self._whole_built else usual

    def _spend(self, dfa: DFA | None) -> None:
        """Count ``dfa`` against ``WHOLE_ANY_ORDER_WORK`` when this try has any-order objects."""
        if self._whole_built and dfa is not None:
            self._whole_work_left -= dfa.num_states
            if self._whole_work_left < 0:
                raise AnyOrderTooLarge(f"DFA algebra with objects in any key order passes {WHOLE_ANY_ORDER_WORK} states")

    def intersection(self, a: DFA, b: DFA) -> DFA:
        """``intersect`` within this try's limits (``algebra``)."""
        got = intersect(a, b, limit=self.algebra_limit(MAX_PRODUCT_STATES))
        self._spend(got)
        return got

    def _build_dfa(self, schema, path: str, depth: int) -> DFA:
        union = self._logic_as_union(schema, path)
        if union is not None:
            # One minimal DFA per branch, then their union: determinizing the branches
            # together would walk the product of their unminimised automata.
            dfas = _satisfiable(lambda b: self.dfa(b, path, depth), union,
                                "not/if/then/else leave no valid value", path)
            return dfas[0] if len(dfas) == 1 else _union_dfa(dfas, self.algebra_limit(MAX_DFA_STATES))
        nfa = NFA()
        s, e = self.value(nfa, schema, path, depth)
        structured = self.over and not self._flat_supersets
        try:
            return determinize(nfa, s, e, sup.SUPERSET_WHOLE_STATES if structured else self.algebra_limit(MAX_DFA_STATES))
        except EmptyLanguageError:
            raise UnsatisfiableSchemaError("no JSON value satisfies the schema", path) from None

    @contextlib.contextmanager
    def _supersets(self, levels: int, flat: bool):
        """Over mode: build supersets ``levels`` member-by-member levels deep (or flat)."""
        saved = self._superset_levels, self._flat_supersets
        self._superset_levels, self._flat_supersets = levels, flat
        try:
            yield
        finally:
            self._superset_levels, self._flat_supersets = saved

    def opposite(self) -> "SchemaCompiler":
        """The compiler of the other polarity (see the module docstring)."""
        if self._partner is None:
            self._partner = SchemaCompiler(None, over=not self.over, partner=self)
        return self._partner

    def negated_dfa(self, schema, path: str, depth: int) -> DFA:
        """What a subtraction may remove: a superset when we are the subset compiler."""
        return self.opposite().dfa(schema, path, depth)

    def approximate(self) -> None:
        """Over mode: note that the automaton being built accepts more than the schema."""
        self.approximations += 1

    def subtract(self, dfa: DFA, schema, path: str, depth: int) -> tuple[DFA | None, bool]:
        """``dfa`` minus what ``schema`` may hold (``negated_dfa``; None when nothing is
        left), and whether what was subtracted is a superset of ``schema``'s values."""
        over = self.opposite()
        # Memoised per compile: a definition used in two places (composer's repository,
        # under items and under additionalProperties) asks for the same differences.
        key = (id(dfa), over._dfa_key(schema, depth))
        got = self._differences.get(key)
        if got is not None:
            result, superset, _ = got
            over.approximations += superset  # as asking for the inexact superset again does
            return result, superset
        before = over.approximations
        try:
            negated = self.negated_dfa(schema, path, depth)
        except UnsatisfiableSchemaError:
            result, superset = dfa, False  # a proof that ``schema`` holds no value: nothing to remove
        except ApproximationLimitError:
            if not self.over:
                raise
            # The subset compiler found no value it can write: removing none of them
            # leaves a superset, which is all this (superset) compiler promises.
            result, superset = dfa, False
        else:
            result, superset = minus(dfa, negated, self.algebra_limit(MAX_PRODUCT_STATES)), over.approximations != before
            self._spend(result)
        self._differences[key] = (result, superset, dfa)  # dfa kept: its id stays its own
        return result, superset

    # -- problems ------------------------------------------------------------------

    def unsupported(self, keyword: str, path: str, why: str) -> None:
        if self.strict:
            raise UnsupportedSchemaError(f"unsupported keyword {keyword!r} ({why})", _pointer(path, keyword), keyword)
        self.dropped.append((keyword, _pointer(path, keyword)))

    # -- $ref ----------------------------------------------------------------------

    def resolve_pointer(self, ref: str, path: str):
        if ref == "#" or ref == "":
            return self.root
        if not ref.startswith("#/"):
            raise UnsupportedSchemaError(
                f"$ref {ref!r} is not a local JSON pointer (only '#/...' references are supported)",
                _pointer(path, "$ref"), "$ref",
            )
        node = self.root
        for raw in ref[2:].split("/"):
            part = raw.replace("~1", "/").replace("~0", "~")
            from urllib.parse import unquote

            part = unquote(part)
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise SchemaError(f"$ref {ref!r} does not resolve", _pointer(path, "$ref"), "$ref")
        return node

    def deref(self, schema, path: str):
        """Follow ``$ref`` chains. Draft 4-7 ignore a ``$ref``'s siblings; 2019+ add them."""
        seen = []
        while isinstance(schema, dict) and "$ref" in schema:
            ref = schema["$ref"]
            if not isinstance(ref, str):
                raise SchemaError("$ref must be a string", _pointer(path, "$ref"), "$ref")
            if ref in seen:
                raise RecursiveSchemaError(f"$ref {ref!r} refers to itself", _pointer(path, "$ref"), "$ref")
            seen.append(ref)
            target = self.resolve_pointer(ref, path)
            siblings = {k: v for k, v in schema.items() if k != "$ref" and k not in ANNOTATIONS}
            if siblings and self._siblings_apply():
                schema = {"allOf": [target, siblings]}
            else:
                schema = target
        return schema

    def _legacy_draft(self) -> bool:
        """Draft 3-7 (by ``$schema``): ``dependencies`` exists, ``$ref`` hides its siblings."""
        s = str(self.root.get("$schema", "")) if isinstance(self.root, dict) else ""
        return any(d in s for d in ("draft-03", "draft-04", "draft-06", "draft-07"))

    def _siblings_apply(self) -> bool:
        return not self._legacy_draft()

    # -- values --------------------------------------------------------------------

    def value(self, nfa: NFA, schema, path: str, depth: int) -> tuple[int, int]:
        if isinstance(schema, dict) and "$ref" in schema:
            ref = schema["$ref"]
            if self.grammar is not None and self.grammar.owns(nfa) and isinstance(ref, str) and not (
                set(schema) - {"$ref"} - ANNOTATIONS
            ):
                # Grammar mode: a plain reference is a rule, written once however often used.
                return self.grammar.call(nfa, ref)
            if ref in self._ref_stack:
                if self.over:
                    self.approximate()
                    return nfa.any_bytes()  # a superset of any recursive structure
                if self.grammar is not None and self.grammar.owns(nfa):
                    return self.grammar.call(nfa, ref)
                why = (
                    "recursion is supported through anyOf, properties and items, not inside the "
                    "oneOf / not / if / allOf parts that need automaton algebra"
                    if self.grammar is not None
                    else "recursive schemas are not supported by the regular (automaton) compiler"
                )
                raise RecursiveSchemaError(f"recursive $ref {ref!r}: {why}", _pointer(path, "$ref"), "$ref")
            self._ref_stack.append(ref)
            try:
                return self.value(nfa, self.deref(schema, path), path, depth)
            finally:
                self._ref_stack.pop()
        if schema is True:
            return self.any_value(nfa, depth, ANY_DEPTH)
        if schema is False:
            raise UnsatisfiableSchemaError("the schema is false: no value is valid", path)
        if not isinstance(schema, dict):
            raise SchemaError(f"a schema must be an object or a boolean, not {type(schema).__name__}", path)
        self.check_keywords(schema, path)
        schema = _without_idle_conditionals(schema)
        if "not" in schema:
            defined = self._defined_deref(path)
            if negation(defined(schema["not"]), defined) == []:
                # `"not": {}` (a forbidden property, once merged) excludes every value:
                # no algebra needed to show it.
                raise UnsatisfiableSchemaError("'not' of a schema that every value satisfies", _pointer(path, "not"))
        if any(k in schema for k in DEPENDENCY_KEYWORDS):
            return self.value(nfa, self.expand_dependencies(schema, path), path, depth)
        if "enum" in schema or "const" in schema:
            # A finite set: each value is checked against all the other keywords by
            # the reference validator, which is exact whatever they are.
            return self.enum(nfa, schema, path)
        keys = presence_keys(schema)
        if keys is not None:  # logic over which keys are present: a union of key sets
            variants = presence_variants(schema, keys)
            if not variants:
                raise UnsatisfiableSchemaError(f"no combination of the keys {keys} satisfies the logic", path)
            return self.value(nfa, variants[0] if len(variants) == 1 else {"anyOf": variants}, path, depth)
        if "allOf" in schema:
            return self.all_of(nfa, schema, path, depth)
        if "anyOf" in schema:
            return self.union(nfa, self.branches(schema, "anyOf", path), depth,
                              "no anyOf branch can be satisfied", _pointer(path, "anyOf"))
        if "oneOf" in schema:
            return self.one_of(nfa, schema, path, depth)
        if "not" in schema or "if" in schema:
            union = self._logic_as_union(schema, path)
            if union is not None:  # no algebra: a union of merged schemas (json_conditional)
                return self.union(nfa, [(b, path) for b in union], depth, "not/if/then/else leave no valid value", path)
            return embed(nfa, self.algebra(lambda: self.logic_dfa(schema, path, depth)))
        types = self.types_of(schema, path)
        frags = []
        errors = []
        for t in types:
            try:
                frags.append(self.typed(nfa, t, schema, path, depth))
            except (UnsatisfiableSchemaError, ApproximationLimitError) as e:
                errors.append(e)
        if not frags:
            raise errors[0] if errors else UnsatisfiableSchemaError("no type is possible", path)
        return nfa.union(frags) if len(frags) > 1 else frags[0]

    def check_keywords(self, schema: dict, path: str) -> None:
        for k in schema:
            if k in STANDARD and k not in HANDLED:
                self.unsupported(k, path, "not a keyword this compiler can enforce")

    def expand_dependencies(self, schema: dict, path: str) -> dict:
        """Key dependencies as an ``anyOf`` over which trigger keys are present.

        ``{"dependentRequired": {"a": ["b"]}}`` holds exactly when either "a" is absent,
        or "a" and "b" are both present (likewise a dependent schema applies when its
        key is present). Each combination becomes one branch with the trigger keys
        forbidden or required, so the object chain stays in ``properties`` order.
        """
        rules: dict[str, list] = {}  # trigger -> [required names..., schemas...]
        for k in DEPENDENCY_KEYWORDS:
            v = schema.get(k)
            if v is None or (k == "dependencies" and not self._legacy_draft()):
                continue  # 2019-09 and later replaced "dependencies": the validator ignores it
            if not isinstance(v, dict):
                raise SchemaError(f"{k} must be an object", _pointer(path, k), k)
            for trigger, dep in v.items():
                rules.setdefault(trigger, []).append(dep)
        base = {k: v for k, v in schema.items() if k not in DEPENDENCY_KEYWORDS}
        if not rules:
            return base
        if len(rules) > MAX_DEPENDENCY_TRIGGERS:
            self.unsupported("dependencies", path, f"more than {MAX_DEPENDENCY_TRIGGERS} trigger keys")
            return base
        branches = []
        triggers = list(rules)
        for mask in range(1 << len(triggers)):
            required = list(base.get("required", []) or [])
            props = dict(base.get("properties", {}) or {})
            extra = []
            for i, trigger in enumerate(triggers):
                if mask >> i & 1:
                    required.append(trigger)
                    for dep in rules[trigger]:
                        if isinstance(dep, list):
                            required.extend(dep)
                        else:
                            extra.append(dep)
                else:
                    if trigger in required:
                        break  # the key is required: the "absent" branch is impossible
                    props[trigger] = False
            else:
                branch = dict(base, required=list(dict.fromkeys(required)), properties=props)
                if not props:
                    branch.pop("properties")
                branches.append({"allOf": [branch] + extra} if extra else branch)
        if not branches:
            raise UnsatisfiableSchemaError("the key dependencies cannot all hold", path)
        # The branches only constrain objects; other types stay as the base allows.
        non_object = [t for t in self.types_of(base, path) if t != "object"]
        if non_object:
            branches.append(dict(base, type=non_object))
        return {"anyOf": branches}

    def branches(self, schema, keyword: str, path: str) -> list[tuple]:
        """``(branch, pointer)`` for each part of ``schema[keyword]`` (``anyOf`` /
        ``oneOf``), each joined with the keywords beside it."""
        base = {k: v for k, v in schema.items() if k != keyword}
        first = _listed_before_properties(schema, keyword)
        return [({"allOf": [b, base] if first else [base, b]} if base else b, _pointer(path, keyword, i))
                for i, b in enumerate(self.list_of_schemas(schema, keyword, path))]

    def union(self, nfa, parts, depth, why: str, path: str) -> tuple[int, int]:
        """The union of the satisfiable ``(schema, pointer)`` parts; ``why`` at ``path``
        when none is."""
        return nfa.union(_satisfiable(lambda part: self.value(nfa, part[0], part[1], depth), parts, why, path))

    def union_unless_too_large(self, nfa, parts, depth, why: str, path: str):
        """``union``, or None when its fragments outgrow the NFA (``RegexTooLargeError``):
        every part is built in full, where DFA algebra builds each sub-schema's
        minimal DFA once and embeds copies of that. Outside grammar mode the half-built
        parts are only ours to drop, and the caller falls back to algebra."""
        mark = len(nfa)
        try:
            return self.union(nfa, parts, depth, why, path)
        except RegexTooLargeError:
            if self.grammar is not None and self.grammar.owns(nfa):
                raise
            nfa.truncate(mark)
            return None

    def list_of_schemas(self, schema, keyword, path):
        v = schema[keyword]
        if not isinstance(v, list) or not v:
            raise SchemaError(f"{keyword} must be a non-empty array of schemas", _pointer(path, keyword), keyword)
        return v

    def types_of(self, schema: dict, path: str) -> list[str]:
        t = schema.get("type")
        if t is None:
            return list(TYPES)
        names = t if isinstance(t, list) else [t]
        for n in names:
            if n not in TYPES and n != "any":
                raise SchemaError(f"unknown type {n!r}", _pointer(path, "type"), "type")
        if "any" in names:
            return list(TYPES)
        if "number" in names and "integer" in names:
            names = [n for n in names if n != "integer"]
        return [n for n in TYPES if n in names]

    # -- combinators -----------------------------------------------------------------

    def merged_all_of(self, schema, path) -> tuple:
        """``(merged, leftovers)``: ``schema``'s ``allOf`` parts merged by keywords into
        the keywords beside them, and the parts that would not merge exactly."""
        beside = _without_idle_conditionals({k: v for k, v in schema.items() if k != "allOf"})
        parts = [_without_idle_conditionals(_defined_keywords(self.deref(p, _pointer(path, "allOf", i))))
                 for i, p in enumerate(self.list_of_schemas(schema, "allOf", path))]
        parts = parts + [beside] if _listed_before_properties(schema, "allOf") else [beside] + parts
        merged, leftovers = {}, []
        for p in parts:
            m = merge(merged, p)
            if m is None:
                leftovers.append(p)
            else:
                merged = m
        return merged, leftovers

    def all_of(self, nfa, schema, path, depth):
        by_value = conditionals_by_value(schema, lambda s: self.deref(s, path),
                                         lambda s: self.object_view(s, path), self.is_valid)
        if by_value is not None:  # one branch per value of the key the conditions test
            # Each branch repeats the whole object; too many copies of a large one and
            # the algebra below builds it once.
            got = self.union_unless_too_large(nfa, [(b, path) for b in by_value["anyOf"]], depth,
                                              "no value of the key the conditions test is valid", _pointer(path, "allOf"))
            if got is not None:
                return got
        merged, leftovers = self.merged_all_of(schema, path)
        if not leftovers:
            return self.value(nfa, merged, path, depth)
        merged, leftovers = self._logic_as_any_of(merged, leftovers, path)
        spread = self._any_of_spread(merged, leftovers, path)
        if spread is not None:  # no algebra: each choice of anyOf branches, merged
            got = self.union_unless_too_large(nfa, spread, depth, "no choice of the allOf parts' anyOf branches holds",
                                              _pointer(path, "allOf"))
            if got is not None:
                return got
        def joined() -> DFA:
            result = self.dfa(merged, path, depth)
            for p in leftovers:
                try:
                    result = self.intersection(result, self.dfa(p, _pointer(path, "allOf"), depth))
                except EmptyLanguageError:
                    raise UnsatisfiableSchemaError("the allOf branches contradict each other",
                                                   _pointer(path, "allOf")) from None
            return result

        return embed(nfa, self.algebra(joined))

    def _logic_as_any_of(self, merged, leftovers, path) -> tuple:
        """``(merged, leftovers)`` with each ``not`` and ``if`` / ``then`` / ``else``
        among them (the merged schema's own too) as an ``anyOf`` part, where its
        condition negates to a union of schemas (``json_conditional``): two ``not``
        parts that would not merge as keywords then spread into choices of merged
        schemas (``_any_of_spread``) instead of automaton algebra."""
        deref = lambda s: self.deref(s, path)  # noqa: E731
        logic = [k for k in ("not", "if", "then", "else") if isinstance(merged, dict) and k in merged]
        if logic and not (isinstance(merged, dict) and "anyOf" in merged):
            leftovers = [{k: merged[k] for k in logic}, *leftovers]
            merged = {k: v for k, v in merged.items() if k not in logic}
        out = []
        for part in leftovers:
            keys = set(part) - ANNOTATIONS if isinstance(part, dict) else None
            union = None
            if keys == {"not"}:
                union = not_as_union(part, deref)
            elif keys and "if" in keys and keys <= {"if", "then", "else"}:
                union = conditional_as_union(part, deref)
            out.append(part if union is None else union)
        return merged, out

    def _any_of_spread(self, merged, leftovers, path) -> list | None:
        """``allOf [M, {anyOf [A1, A2]}, {anyOf [B1, B2]}]`` as the union of
        ``allOf [M, Ai, Bj]`` for every choice (the ``(schema, pointer)`` parts), which
        merge by keywords where the parts did not (two ``anyOf`` of ``required``
        lists, say); None when no leftover part is an ``anyOf`` or the choices pass
        ``MAX_ONE_OF_CHOICES``."""
        if isinstance(merged, dict) and "anyOf" in merged:  # the first part's anyOf, kept in its place
            leftovers = [{"anyOf": merged["anyOf"]}, *leftovers]
            merged = {k: v for k, v in merged.items() if k != "anyOf"}
        spread = [p for p in leftovers if isinstance(p, dict) and "anyOf" in p]
        if not spread:
            return None
        rest = [p for p in leftovers if not (isinstance(p, dict) and "anyOf" in p)]
        ptr = _pointer(path, "allOf")
        options = [[b for b, _ in self.branches(p, "anyOf", ptr)] for p in spread]
        if math.prod(len(o) for o in options) > MAX_ONE_OF_CHOICES:
            return None
        return [({"allOf": [merged, *choice, *rest]}, ptr) for choice in itertools.product(*options)]

    def one_of(self, nfa, schema, path, depth):
        """Exactly one branch. In order of preference:

        - when no value can match two branches, their plain union (lazy);
        - when the branches that overlap have negations that are unions of schemas
          (``json_conditional.negation``), the union of each branch joined with the
          negation of each branch it overlaps (merged by keywords: no algebra, the
          branch's own key order);
        - otherwise each branch minus (a superset of) all the others.

        In over mode, the union of the branches is superset enough."""
        branches = self.branches(schema, "oneOf", path)
        if not self.over:
            apart = disjoint_pairs(self, branches, depth)
            n = len(branches)
            # Either way the parts stay NFA fragments: lazy, any key order where asked
            # and, in grammar mode, with their recursive $ref calls (algebra holds neither).
            if len(apart) == n * (n - 1) // 2:
                parts, why = branches, "no oneOf branch can be satisfied"
            else:
                parts = self._one_of_as_union(schema, branches, apart, path)
                if parts is None:
                    parts = self._one_of_by_type(schema, branches, path)
                why = "no value satisfies exactly one oneOf branch"
            if parts is not None:
                got = self.union_unless_too_large(nfa, parts, depth, why, _pointer(path, "oneOf"))
                if got is not None:
                    return got
        frags = []
        approximated = False  # a branch emptied only by subtracting supersets
        for i in range(len(branches)):
            try:
                only, inexact = self.algebra(lambda: self._branch_alone(branches, i, depth))
            except ApproximationLimitError:
                approximated = True
                continue
            except (UnsatisfiableSchemaError, EmptyLanguageError):
                continue
            if only is None:
                approximated |= inexact
                continue
            frags.append(embed(nfa, only))
        if not frags:
            raise _empty("no value satisfies exactly one oneOf branch", _pointer(path, "oneOf"), approximated)
        return nfa.union(frags)

    def _branch_alone(self, branches, i: int, depth: int) -> tuple[DFA | None, bool]:
        """``oneOf`` branch ``i`` minus (supersets of) the others, None when nothing is
        left; and whether a superset was subtracted (over mode: the branch itself)."""
        b, ptr = branches[i]
        only, inexact = self.dfa(b, ptr, depth), False
        if not self.over:
            for j, (other, optr) in enumerate(branches):
                if i != j:
                    only, superset = self.subtract(only, other, optr, depth)
                    inexact |= superset
                    if only is None:
                        return None, inexact
        return only, inexact

    def _one_of_by_type(self, schema, branches, path) -> list | None:
        """``(schema, pointer)`` parts whose union is exactly the ``oneOf``, one per
        JSON type: the branches that allow that type, under ``"type": t``. A type
        only one branch allows needs no algebra there, and a part of objects only
        may be told apart by its keys. (Composer's ``package``: ``oneOf
        [inline-package, array of them]``, where ``inline-package`` says no type, was
        a 0.4 s subtraction of whole objects.) None unless some branch allows no
        objects (otherwise the objects' part, the costly one, keeps every branch and
        the other parts only add work), or when ``schema`` already names one type."""
        if isinstance(schema.get("type"), str):
            return None
        allowed = []
        for b, ptr in branches:
            view = self.object_view(b, ptr)
            kinds = set(TYPES) if view is None else set(view[0])
            allowed.append({"number" if k == "integer" else k for k in kinds})
        if all("object" in a for a in allowed):
            return None
        ptr = _pointer(path, "oneOf")
        parts = []
        for t in ("null", "boolean", "number", "string", "array", "object"):
            these = [b for (b, _), kinds in zip(branches, allowed) if t in kinds]
            every = [b for b in these if self._takes_every(b, t, ptr)] if len(these) > 1 else []
            if len(these) == 1:
                parts.append(({"allOf": [{"type": t}, these[0]]}, ptr))
            elif len(every) == 1:
                # A branch every value of type t satisfies (an untyped object schema,
                # for arrays): exactly one holds where none of the others does. One
                # subtraction, not one per branch (composer's package: 46 ms less).
                rest = [b for b in these if b is not every[0]]
                parts.append(({"type": t, "not": {"anyOf": rest}}, ptr))
            elif these and not every:
                parts.append(({"type": t, "oneOf": these}, ptr))
            # Two branches every value of type t satisfies: none of those values is valid.
        return parts

    def _takes_every(self, branch, t: str, path: str) -> bool:
        """Whether every JSON value of type ``t`` satisfies ``branch``: it says nothing
        that applies to that type (no keyword at all, or only other types' keywords
        and annotations), and its ``type``, if any, names ``t``."""
        try:
            branch = self.deref(branch, path)
        except SchemaError:
            return False
        if branch is True:
            return True
        if not isinstance(branch, dict):
            return False
        types = branch.get("type", t)
        if t not in (types if isinstance(types, list) else [types]):
            return False
        return not set(branch) - {"type"} - ANNOTATIONS - _OTHER_TYPES_KEYWORDS[t]

    def _one_of_as_union(self, schema, branches, apart, path) -> list | None:
        """``(schema, pointer)`` parts whose union is exactly the ``oneOf``: branch i
        joined with one part of the negation of every branch j it is not shown
        ``apart`` from, for each choice of parts. None when such a negation is not a
        union of schemas or the choices pass ``MAX_ONE_OF_CHOICES``."""
        raw = [self.deref(b, _pointer(path, "oneOf", j)) for j, b in enumerate(self.list_of_schemas(schema, "oneOf", path))]
        negations: dict[int, list | None] = {}
        out = []
        for i, (b, ptr) in enumerate(branches):
            view = self.object_view(b, ptr)
            choices: list[list] = [[]]
            for j in range(len(branches)):
                if j == i or (max(i, j), min(i, j)) in apart:
                    continue
                if j not in negations:
                    negations[j] = negation(_defined_keywords(raw[j]), self._defined_deref(path))
                if negations[j] is None:
                    return None
                parts = [p for p in negations[j] if not _excluded_by(view, p)]
                choices = [c + [p] for c in choices for p in parts]
                if len(choices) > MAX_ONE_OF_CHOICES:
                    return None
            out += [({"allOf": [b] + c} if c else b, ptr) for c in choices]
        return out

    def object_view(self, schema, path):
        """``(types, required, properties, other)`` that every value of ``schema``
        satisfies (from its merged keywords; logic keywords beside them only narrow
        it further), or None when the schema cannot be read that way. ``other`` is
        the schema of keys not in ``properties`` (``additionalProperties``), None
        where ``patternProperties`` may govern them."""
        try:
            schema = self.deref(schema, path)
            while isinstance(schema, dict) and "allOf" in schema:
                schema, leftovers = self.merged_all_of(schema, path)
                if leftovers:
                    return None
            if not isinstance(schema, dict):
                return None
            types = set(self.types_of(schema, path))
        except SchemaError:
            return None
        required = schema.get("required", [])
        props = schema.get("properties", {})
        if not isinstance(required, list) or not isinstance(props, dict):
            return None
        other = None if "patternProperties" in schema else schema.get("additionalProperties", True)
        return types, set(required), props, other

    def _defined_deref(self, path: str):
        """``$ref`` following for ``json_conditional``: the schema referred to, without
        keywords no draft defines."""
        return lambda s: _defined_keywords(self.deref(s, path))

    def _logic_as_union(self, schema, path) -> list | None:
        """A schema whose first logic keyword is ``not`` or ``if``, as the schemas of
        a union (see ``json_conditional``; errors inside them point at ``path``), or
        None when it is not one or its condition cannot be negated that way."""
        if not isinstance(schema, dict) or not ("not" in schema or "if" in schema):
            return None
        if any(k in schema for k in _EARLIER_KEYWORDS) or presence_keys(schema) is not None:
            return None  # value() handles these first
        deref = self._defined_deref(path)
        union = conditional_as_union(schema, deref) if "if" in schema else not_as_union(schema, deref)
        if union is None:
            return None
        return [b for b, _ in self.branches(union, "anyOf", path)]

    def logic_dfa(self, schema, path, depth) -> DFA:
        """``not`` and ``if``/``then``/``else`` by automaton algebra; every subtracted
        language comes from the opposite-polarity compiler."""
        base = {k: v for k, v in schema.items() if k not in ("not", "if", "then", "else")}
        result = self.dfa(base if base else True, path, depth)
        approximated = False  # something was emptied by subtracting a superset
        try:
            if "not" in schema:
                result, approximated = self.subtract(result, schema["not"], _pointer(path, "not"), depth)
                if result is None:
                    raise EmptyLanguageError("not")
            if "if" in schema:
                cond = _pointer(path, "if")
                parts = []
                try:  # the "then" side: the condition holds
                    branch = self.intersection(result, self.dfa(schema["if"], cond, depth))
                    if "then" in schema:
                        branch = self.intersection(branch, self.dfa(schema["then"], _pointer(path, "then"), depth))
                    parts.append(branch)
                except (EmptyLanguageError, UnsatisfiableSchemaError):
                    pass
                try:  # the "else" side: the condition fails
                    branch, superset = self.subtract(result, schema["if"], cond, depth)
                    approximated |= superset
                    if branch is not None:
                        if "else" in schema:
                            branch = self.intersection(branch, self.dfa(schema["else"], _pointer(path, "else"), depth))
                        parts.append(branch)
                except (EmptyLanguageError, UnsatisfiableSchemaError):
                    pass
                if not parts:
                    raise EmptyLanguageError("if/then/else")
                result = parts[0] if len(parts) == 1 else _union_dfa(parts, self.algebra_limit(MAX_DFA_STATES))
        except EmptyLanguageError:
            raise _empty("not/if/then/else leave no valid value", path, approximated) from None
        return result

    # -- enum / const ----------------------------------------------------------------

    def enum(self, nfa, schema, path):
        if "const" in schema:
            values = [schema["const"]]
        else:
            values = schema["enum"]
            if not isinstance(values, list):
                raise SchemaError("enum must be an array", _pointer(path, "enum"), "enum")
        rest = {k: v for k, v in schema.items() if k not in ("enum", "const")}
        if "enum" in schema and "const" in schema:
            values = [v for v in values if _json_equal(v, schema["const"])]
        keep = [v for v in values if self.is_valid(v, rest)]
        if not keep:
            raise UnsatisfiableSchemaError("no enum/const value satisfies the other keywords", path)
        if self.over:
            return nfa.union([self.value_superset(nfa, v) for v in keep])
        texts = [t for v in keep for t in _value_texts(v)]
        return nfa.union([nfa.byte_string(t) for t in dict.fromkeys(texts)])

    def value_superset(self, nfa, v):
        """Every text of the value ``v`` the subset compiler could write, and more."""
        if isinstance(v, str):
            return jt.quoted(nfa, jt.full_match_body(nfa, re.escape(v)))  # any escaping
        if isinstance(v, bool) or v is None:
            return nfa.byte_string(_dumps(v))
        if isinstance(v, (int, float)):
            return jt.regex_fragment(nfa, _number_spellings(v))
        if isinstance(v, list):  # its items in order, any whitespace between
            return sup.spelled(nfa, b"[", b"]", [lambda n, x=x: self.value_superset(n, x) for x in v])
        if isinstance(v, dict) and len(v) <= MAX_SPELLED_KEYS:  # its members in every order
            def member(n, k, x):
                return sup.member(n, jt.quoted(n, jt.full_match_body(n, re.escape(k))), self.value_superset(n, x))

            return nfa.union([sup.spelled(nfa, b"{", b"}", [lambda n, k=k, x=x: member(n, k, x) for k, x in order])
                              for order in itertools.permutations(v.items())])
        self.approximate()
        return sup.bracketed_text(nfa, b"{", b"}")

    def is_valid(self, value, schema) -> bool:
        """Whether ``value`` satisfies ``schema`` (refs resolved against the root),
        by the reference validator with format checking."""
        if schema is True or schema == {}:
            return True
        if schema is False:
            return False
        import jsonschema

        if self._validator is None:
            root = self.root if isinstance(self.root, dict) else {}
            cls = jsonschema.validators.validator_for(root, default=jsonschema.Draft202012Validator)
            self._validator = cls(root, format_checker=cls.FORMAT_CHECKER)
        try:
            return self._validator.evolve(schema=schema).is_valid(value)
        except Exception:
            return False
        except BaseException as e:
            # Out of stack inside the validator's Rust parts (``rpds``): pyo3 turns the
            # RecursionError into a panic, which is not an Exception.
            if _is_recursion_panic(e):
                raise RecursionError(str(e)) from None
            raise

    # -- typed values ----------------------------------------------------------------

    def typed(self, nfa, t, schema, path, depth):
        if t == "null":
            return nfa.byte_string(b"null")
        if t == "boolean":
            return nfa.union([nfa.byte_string(b"true"), nfa.byte_string(b"false")])
        if t in ("integer", "number"):
            # A copy of the number's minimal DFA (cached per pattern): cheaper than
            # parsing the pattern again at each of a schema's many number properties.
            return embed(nfa, self.number_dfa(t, schema, path))
        if t == "string":
            return self.string(nfa, schema, path)
        if t == "array":
            return self.array(nfa, schema, path, depth)
        return self.object(nfa, schema, path, depth)

    def number_dfa(self, t, schema, path) -> DFA:
        if self.over:
            # Superset: exponent forms and integer-valued decimals are never excluded
            # (both may hold integers); other decimals only from a number's bounds.
            bounded, _ = self.number_regex_exact(t, {k: v for k, v in schema.items() if k != "multipleOf"}, path)
            plain = f"(?:{bounded})|{JSON_INTEGER}\\.0+"
            step = _multiple_of(schema, path)
            multiple = multiple_of_dfa(step) if step is not None else None
            if multiple is None:
                return compile_regex(f"{plain}|{NUMBER_EXP}")
            return self._multiples("over", plain, step, multiple, path)
        rx, step = self.number_regex_exact(t, schema, path)
        if step is None:
            return compile_regex(rx)
        multiple = multiple_of_dfa(step)
        if multiple is None:
            self.unsupported("multipleOf", path, f"multipleOf {step!r} needs more than {MAX_MULTIPLE_STATES} automaton states")
            return compile_regex(rx)
        return self._multiples("under", rx, step, multiple, path)

    def _multiples(self, mode, rx, step, multiple, path) -> DFA:
        """The plain decimals of ``rx`` that are multiples of ``step`` (over mode: and
        every exponent form, which the multiples leave out), once per compile."""
        key = ("multipleOf", mode, rx, step)
        if key not in self._dfas:
            try:
                dfa = intersect(compile_regex(rx), multiple)
            except EmptyLanguageError:
                raise UnsatisfiableSchemaError(f"no multiple of {step!r} lies within the bounds", path) from None
            self._dfas[key] = dfa_union(dfa, compile_regex(NUMBER_EXP)) if mode == "over" else dfa
        return self._dfas[key]

    def number_regex_exact(self, t, schema, path) -> tuple[str, int | float | None]:
        """The number's regex, and a ``multipleOf`` it leaves to ``multiple_of_dfa`` (or None)."""
        lo, hi = schema.get("minimum"), schema.get("maximum")
        xlo, xhi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        if isinstance(xlo, bool):  # draft 4: a flag on minimum
            xlo, lo = (lo, None) if xlo else (None, lo)
        if isinstance(xhi, bool):
            xhi, hi = (hi, None) if xhi else (None, hi)
        for k, v in (("minimum", lo), ("maximum", hi), ("exclusiveMinimum", xlo), ("exclusiveMaximum", xhi)):
            if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v)):
                raise SchemaError(f"{k} must be a number", _pointer(path, k), k)
        step = _multiple_of(schema, path)
        if step == 1 and t == "integer":
            step = None
        try:
            if t == "integer":
                ilo = _int_lower(lo, xlo)
                ihi = _int_upper(hi, xhi)
                if isinstance(step, int):
                    rx = integer_multiple_of_regex(step, ilo, ihi)
                    if rx is not None:
                        return rx, None
                rx = JSON_INTEGER if ilo is None and ihi is None else integer_range_regex(ilo, ihi)
                return rx, step
            if all(v is None for v in (lo, hi, xlo, xhi)):
                return JSON_NUMBER, step
            return number_range_regex(lo, hi, xlo, xhi), step
        except ValueError as e:
            if isinstance(e, SchemaError):
                raise
            raise UnsatisfiableSchemaError(f"numeric bounds leave no value ({e})", path) from None

    # -- strings ---------------------------------------------------------------------

    def string(self, nfa, schema, path):
        lo = schema.get("minLength", 0)
        hi = schema.get("maxLength")
        for k, v in (("minLength", lo), ("maxLength", hi)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                if isinstance(v, float) and v.is_integer() and v >= 0:
                    continue
                raise SchemaError(f"{k} must be a non-negative integer", _pointer(path, k), k)
        lo = int(lo)
        hi = None if hi is None else int(hi)
        if hi is not None and hi < lo:
            raise UnsatisfiableSchemaError("maxLength is below minLength", path)
        constraints = []  # sub-automata of the string body, to intersect
        patterns = schema.get("pattern")
        for p in patterns if isinstance(patterns, list) else ([patterns] if patterns is not None else []):
            if not always_found(p):
                constraints.append(("pattern", p))
        fmt = schema.get("format")
        if fmt is not None and self.over and fmt not in EXACT_FORMATS:
            self.approximate()  # the format is left out of the superset
        if fmt is not None and (not self.over or fmt in EXACT_FORMATS):
            rx = format_regex(fmt)
            if rx is not None:
                constraints.append(("format", rx))
            elif fmt in VALIDATED_FORMATS and not self.over:
                self.unsupported("format", path, f"format {fmt!r} is checked by validators but not enforced here")
            # Formats validators do not know are annotations: nothing to enforce.
        if not constraints:
            return jt.quoted(nfa, jt.string_body(nfa, lo, hi))
        if len(constraints) == 1 and lo == 0 and hi is None:
            # One constraint and no length bounds: no intersection. Format regexes
            # are ours and few: each DFA is built once per process and copied in
            # (uri: 180 states in 0.2 ms, against 2.5k NFA states parsed and built
            # in 15 ms at every use). A pattern's fragment goes straight into the
            # (lazily determinised) automaton: its own DFA may be large.
            kind, rx = constraints[0]
            if kind == "format":
                dfa = constraint_dfa(kind, rx)
                if nfa.lazy and len(dfa.flat_edges()[0]) > EMBED_LATER_EDGES:
                    return jt.quoted(nfa, nfa.deferred(lambda: embed(nfa, dfa), constraint_cuts(kind, rx)))
                return jt.quoted(nfa, embed(nfa, dfa))
            try:
                return jt.quoted(nfa, self._pattern_fragment(nfa, rx))
            except RegexTooLargeError:
                raise  # the whole automaton outgrew its limit, not this pattern alone
            except RegexError as e:
                if self.strict:
                    raise UnsupportedSchemaError(f"{kind} {rx!r}: {e}", _pointer(path, kind), kind) from None
                self.dropped.append((kind, _pointer(path, kind)))
                return jt.quoted(nfa, jt.string_body(nfa, lo, hi))
        usable = []
        for kind, rx in constraints:
            try:
                constraint_dfa(kind, rx)
            except RegexError as e:
                if self.strict or kind == "format":
                    raise UnsupportedSchemaError(f"{kind} {rx!r}: {e}", _pointer(path, kind), kind) from None
                self.dropped.append((kind, _pointer(path, kind)))
                continue
            except EmptyLanguageError:
                raise UnsatisfiableSchemaError(f"{kind} matches no string", _pointer(path, kind)) from None
            usable.append((kind, rx))
        if not usable:
            return jt.quoted(nfa, jt.string_body(nfa, lo, hi))
        key = (tuple(usable), lo, hi)
        if nfa.lazy and key not in self._string_bodies:
            if key not in self._deferred_bodies:  # decided once per compile, as built
                parts = body_parts(usable, lo, hi)
                self._deferred_bodies[key] = (set().union(*(class_cuts(d) for d in parts))
                                              if defer_product(parts, path) else None)
            cuts = self._deferred_bodies[key]
            if cuts is not None:
                # Decoding reaches few of a schema's strings: build this one's product
                # when it does (a Unicode class times a maxLength of 255 is 80k states,
                # ~0.4 s to build and copy in).
                return jt.quoted(nfa, nfa.deferred(lambda: embed(nfa, self._string_body(key, path)), cuts))
        return jt.quoted(nfa, embed(nfa, self._string_body(key, path)))

    def _string_body(self, key, path) -> DFA:
        """The body DFA of ``key`` = ``(constraints, minLength, maxLength)``. Schemas
        repeat one string type in many places (each a product with the length
        counter), so each is built once per compile."""
        body = self._string_bodies.get(key)
        if body is None:
            try:
                body = self._string_bodies[key] = bounded_body(*key)
            except EmptyLanguageError:
                raise UnsatisfiableSchemaError("the string constraints contradict each other", path) from None
        return body

    def _pattern_fragment(self, nfa, rx: str) -> tuple[int, int]:
        """``json_text.pattern_body``, parsed and built once per compile and copied at
        its other uses (schemas repeat their patterns: copying is several times
        cheaper than parsing the regex and building its Unicode classes again)."""
        template = self._pattern_templates.get(rx)
        if template is not None:
            return nfa.paste(template)
        first = len(nfa)
        s, e = jt.pattern_body(nfa, rx)
        template = nfa.template(first, s, e)
        if template is not None:
            self._pattern_templates[rx] = template
        return s, e

    # -- arrays ----------------------------------------------------------------------

    def array(self, nfa, schema, path, depth):
        if self.over:
            if ARRAY_KEYWORDS.intersection(schema):
                self.approximate()
            return self.array_superset(nfa, schema, path, depth)
        lo = int(schema.get("minItems", 0))
        hi = schema.get("maxItems")
        hi = None if hi is None else int(hi)
        if hi is not None and hi < lo:
            raise UnsatisfiableSchemaError("maxItems is below minItems", path)
        prefix = schema.get("prefixItems")
        items = schema.get("items")
        rest = True
        if isinstance(items, list):  # draft 4-2019 tuple form
            prefix = items
            rest = schema.get("additionalItems", True)
        elif items is not None:
            rest = items
        prefix = list(prefix or [])
        if schema.get("uniqueItems") and (hi is None or hi > 1):
            choices = None if prefix or "contains" in schema else self._distinct_choices(rest)
            if choices is not None:
                return self.unique_array(nfa, choices, lo, hi, path, depth)
            self.unsupported("uniqueItems", path, "distinct elements cannot be checked by an automaton "
                                                  "(only items from a small enum can)")
        if "contains" in schema:
            return embed(nfa, self.algebra(lambda: self.contains_dfa(schema, path, depth)))
        if rest is False:
            hi = len(prefix) if hi is None else min(hi, len(prefix))
            if lo > hi:
                raise UnsatisfiableSchemaError("minItems exceeds the number of allowed items", path)

        def element(n, i):
            if i < len(prefix):
                return self.value(n, prefix[i], _pointer(path, "prefixItems", i), depth + 1)
            return self.value(n, rest, _pointer(path, "items"), depth + 1)

        return self.array_body(nfa, element, len(prefix), rest is not False, lo, hi, path, depth)

    def _distinct_choices(self, items) -> list | None:
        """The distinct values an ``items`` schema allows when it is a scalar enum."""
        sub = self.deref(items, "#")
        values = _scalar_enum(sub)
        if values is None:
            return None
        distinct = []
        for v in values:
            if self.is_valid(v, sub) and not any(_json_equal(v, d) for d in distinct):
                distinct.append(v)
        return distinct

    def unique_array(self, nfa, values, lo, hi, path, depth):
        """``uniqueItems`` over enum items: one state per set of values used so far."""
        top = len(values) if hi is None else min(hi, len(values))
        if lo > top:
            raise UnsatisfiableSchemaError("minItems exceeds the number of distinct allowed items", path)
        if sum(math.comb(len(values), j) for j in range(top + 1)) > MAX_UNIQUE_SETS:
            self.unsupported("uniqueItems", path, f"{len(values)} distinct items make more than "
                                                  f"{MAX_UNIQUE_SETS} combinations to track")
        open_, close = nfa.byte_string(b"["), nfa.byte_string(b"]")
        if lo == 0:
            e = self.ws.site(nfa, "empty", depth)
            nfa.epsilon(open_[1], e[0])
            nfa.epsilon(e[1], close[0])
        o = self.ws.site(nfa, "open", depth)
        nfa.epsilon(open_[1], o[0])
        c = self.ws.site(nfa, "close", depth)
        nfa.epsilon(c[1], close[0])
        nodes = {frozenset(): o[1]}
        frontier = [frozenset()]
        while frontier:
            used = frontier.pop(0)
            here = nodes[used]
            if used and len(used) >= lo:
                nfa.epsilon(here, c[0])
            if len(used) == top:
                continue
            for i, v in enumerate(values):
                if i in used:
                    continue
                lit = nfa.union([nfa.byte_string(t) for t in _value_texts(v)])
                if used:
                    lit = nfa.concat([nfa.byte_string(b","), self.ws.site(nfa, "comma", depth), lit])
                nfa.epsilon(here, lit[0])
                key = used | {i}
                if key not in nodes:
                    nodes[key] = nfa.state()
                    frontier.append(key)
                nfa.epsilon(lit[1], nodes[key])
        return open_[0], close[1]

    def array_body(self, nfa, element, n_prefix, rest_allowed, lo, hi, path, depth):
        """``[`` e0 ``,`` e1 ... ``]`` with ``element(nfa, i)`` at position i, count in [lo, hi].

        Positions below ``max(lo, n_prefix)`` are spelled out one by one; more
        elements (of the position-independent ``rest`` kind) repeat after them.
        """
        open_ = nfa.byte_string(b"[")
        close = nfa.byte_string(b"]")
        if lo == 0:
            e = self.ws.site(nfa, "empty", depth)
            nfa.epsilon(open_[1], e[0])
            nfa.epsilon(e[1], close[0])
        if hi == 0:
            return open_[0], close[1]
        o = self.ws.site(nfa, "open", depth)
        nfa.epsilon(open_[1], o[0])
        c = self.ws.site(nfa, "close", depth)
        nfa.epsilon(c[1], close[0])

        def comma_then(frag):
            return nfa.concat([nfa.byte_string(b","), self.ws.site(nfa, "comma", depth), frag])

        cur = o[1]
        spelled = max(lo, n_prefix, 1) if hi is None else min(hi, max(lo, n_prefix, 1))
        closable = False
        for i in range(spelled):
            try:
                item = element(nfa, i)
            except UnsatisfiableSchemaError:
                if i < lo:
                    raise
                return open_[0], close[1]  # position i can never be filled: arrays stop before it
            frag = comma_then(item) if i else item
            nfa.epsilon(cur, frag[0])
            cur = frag[1]
            if i + 1 >= lo:
                nfa.epsilon(cur, c[0])
                closable = True
        more = None if hi is None else hi - spelled
        if rest_allowed and more is None and spelled > n_prefix:
            # Unbounded and the last spelled position is already a ``rest`` item:
            # more items loop back into it (one copy of the item schema, not two;
            # nested arrays would otherwise double per level).
            back = comma_then(nfa.empty())
            nfa.epsilon(cur, back[0])
            nfa.epsilon(back[1], item[0])
        elif rest_allowed and (more is None or more > 0):
            try:
                loop = nfa.repeat(lambda: comma_then(element(nfa, spelled)), 0, more)
            except UnsatisfiableSchemaError:
                loop = None
            if loop is not None:
                nfa.epsilon(cur, loop[0])
                nfa.epsilon(loop[1], c[0])
                closable = True
        if not closable:
            raise UnsatisfiableSchemaError("minItems cannot be reached", path)
        return open_[0], close[1]

    def contains_dfa(self, schema, path, depth) -> DFA:
        base = {k: v for k, v in schema.items() if k not in ("contains", "minContains", "maxContains")}
        main = self.dfa(base, path, depth)
        need = int(schema.get("minContains", 1))
        most = schema.get("maxContains")
        if need == 0 and most is None:
            return main
        c = schema["contains"]
        nfa = NFA()
        inner = depth + 1

        def counted(k_min, k_max):
            # Arrays of any elements, exactly/at least k contained ones: tracks 0..k.
            any_el = lambda n: self.any_value(n, inner, ANY_DEPTH)
            con_el = lambda n: self.value(n, c, _pointer(path, "contains"), inner)
            return _counting_array(self, nfa, any_el, con_el, k_min, depth)

        s, e = counted(need, None)
        try:
            result = self.intersection(main, determinize(nfa, s, e, self.algebra_limit(MAX_DFA_STATES)))
        except EmptyLanguageError:
            raise UnsatisfiableSchemaError("no array satisfies contains", _pointer(path, "contains")) from None
        if most is not None:
            self.unsupported("maxContains", path, "an upper bound on matching elements needs their exact complement")
        return result

    # -- objects ---------------------------------------------------------------------

    def object(self, nfa, schema, path, depth):
        if self.over:
            if OBJECT_KEYWORDS.intersection(schema):
                self.approximate()
            return self.object_superset(nfa, schema, path, depth)
        props = schema.get("properties", {}) or {}
        if not isinstance(props, dict):
            raise SchemaError("properties must be an object", _pointer(path, "properties"), "properties")
        required = list(dict.fromkeys(schema.get("required", []) or []))
        if isinstance(required, bool):
            required = []
        additional = schema.get("additionalProperties", True)
        patterns = schema.get("patternProperties", {}) or {}
        names_schema = schema.get("propertyNames")
        inner = depth + 1
        for k in ("unevaluatedProperties",):
            if k in schema and schema[k] not in ({}, None, True):
                if k == "unevaluatedProperties" and not patterns and additional is False:
                    continue  # nothing is unevaluated
                self.unsupported(k, path, "constraints between keys cannot be checked in property order")

        # Defined keys: properties first (schema order), then required keys not listed.
        order = list(props)
        for r in required:
            if r not in props:
                order.append(r)
        entries = []  # (name, schema, required)
        for name in order:
            sub = props.get(name)
            if sub is None:
                sub = self._extra_schema_for(name, patterns, additional)
            else:
                matching = [p for p in patterns if _search(p, name)]
                if matching:
                    sub = {"allOf": [sub] + [patterns[p] for p in matching]}
            if names_schema is not None and not self.is_valid(name, names_schema):
                sub = False
            is_req = name in required
            if sub is False:
                if is_req:
                    raise UnsatisfiableSchemaError(f"required property {name!r} is not allowed", path)
                continue
            entries.append((name, sub, is_req))

        # Extra keys (additional / pattern properties), after the defined ones.
        extras = self.extra_entries(nfa, schema, order, patterns, additional, names_schema, path, inner)

        n_req = sum(1 for _, _, r in entries if r)
        lo_p = int(schema.get("minProperties", 0) or 0)
        hi_p = schema.get("maxProperties")
        possible = None if extras is not None else len(entries)
        if hi_p is not None:
            hi_p = int(hi_p)
            if hi_p < n_req:
                raise UnsatisfiableSchemaError("maxProperties is below the number of required keys", path)
            if possible is not None and hi_p >= possible:
                hi_p = None  # cannot be exceeded
        if lo_p <= n_req:
            lo_p = 0  # the required keys already make it
        if possible is not None and lo_p > possible:
            raise UnsatisfiableSchemaError("minProperties exceeds the number of allowed keys", path)
        # Count tracks: track c = "c keys written so far", capped at k (or stopping at
        # maxProperties). Without count keywords k = 1: "nothing yet" / "some keys".
        k = hi_p if hi_p is not None else max(lo_p, 1)
        if k > MAX_COUNTED_PROPERTIES:
            word = "maxProperties" if hi_p is not None else "minProperties"
            self.unsupported(word, path, f"counting up to {k} keys (at most {MAX_COUNTED_PROPERTIES})")
            k, hi_p, lo_p = 1, None, 0

        if self.key_order == "any" and (nfa.lazy or len(entries) <= (self.whole_keys or 0)):
            shape = ObjectShape(
                tuple((name, sub, req, _pointer(path, "properties", name)) for name, sub, req in entries),
                extras, lo_p, hi_p, k)
            if self.grammar is not None and self.grammar.owns(nfa):
                return self.grammar.any_order_object(self, nfa, shape, path, depth)
            if not nfa.lazy and (len(entries) > 1 or (entries and extras is not None)):
                self._whole_built += 1  # order matters here: this try's limits are lower
            return any_order_object(self, nfa, shape, path, depth)

        def after(c: int):
            if c + 1 <= k:
                return c + 1
            return None if hi_p is not None else k  # at the cap: stay (or stop at max)

        open_ = nfa.byte_string(b"{")
        close = nfa.byte_string(b"}")
        if n_req == 0 and lo_p == 0:
            e = self.ws.site(nfa, "empty", depth)
            nfa.epsilon(open_[1], e[0])
            nfa.epsilon(e[1], close[0])
        if not entries and extras is None:
            return open_[0], close[1]
        o = self.ws.site(nfa, "open", depth)
        nfa.epsilon(open_[1], o[0])
        tracks = [o[1]] + [nfa.state() for _ in range(k)]
        for name, sub, is_req in entries:
            key = json.dumps(name, ensure_ascii=False).encode("utf-8")
            nxt = [nfa.state() for _ in range(k + 1)]
            try:
                self._step(nfa, tracks, nxt, after, lambda: self.entry(
                    nfa, nfa.byte_string(key), sub, _pointer(path, "properties", name), depth), depth)
            except UnsatisfiableSchemaError:
                if is_req:
                    raise
                # No value is possible, so the optional key is never written (the
                # first entry failed before anything was linked to it).
            if not is_req:
                for c in range(k + 1):
                    nfa.epsilon(tracks[c], nxt[c])
            tracks = nxt
        if extras is not None:
            try:
                self._step(nfa, tracks, tracks, after, extras, depth)
            except UnsatisfiableSchemaError:
                pass  # no extra key can have a valid value, so the object has none
        c_ws = self.ws.site(nfa, "close", depth)
        for c in range(max(lo_p, 1), k + 1):
            nfa.epsilon(tracks[c], c_ws[0])
        nfa.epsilon(c_ws[1], close[0])
        return open_[0], close[1]

    def _step(self, nfa, tracks, nxt, after, make_entry, depth):
        """One more key: track c leads through an entry to track ``after(c)``. Sources
        sharing a target share one entry fragment (with or without a comma)."""
        by_target: dict[int, list[int]] = {}
        for c in range(len(tracks)):
            t = after(c)
            if t is not None:
                by_target.setdefault(t, []).append(c)
        for t, sources in by_target.items():
            entry = make_entry()
            comma = None
            for c in sources:
                if c == 0:
                    nfa.epsilon(tracks[0], entry[0])
                else:
                    if comma is None:
                        comma = nfa.concat([nfa.byte_string(b","), self.ws.site(nfa, "comma", depth)])
                        nfa.epsilon(comma[1], entry[0])
                    nfa.epsilon(tracks[c], comma[0])
            nfa.epsilon(entry[1], nxt[t])

    def _join(self, nfa, a, b, entry, after, depth):
        """``a`` (nothing written) and ``b`` (a comma first) both lead into ``entry``."""
        comma = nfa.concat([nfa.byte_string(b","), self.ws.site(nfa, "comma", depth)])
        nfa.epsilon(a, entry[0])
        nfa.epsilon(b, comma[0])
        nfa.epsilon(comma[1], entry[0])
        nfa.epsilon(entry[1], after)

    def object_superset(self, nfa, schema, path, depth):
        """``{`` members ``}`` (``json_superset``): each listed key followed by its
        value's superset (a scalar superset where it is surely a scalar: what tells
        ``oneOf`` branches of tagged unions apart), any other key, unless the object
        is closed, by any value; each required key appears somewhere in the text (in
        any of its spellings), followed by one of its values where the property is a
        scalar enum or const. Below ``SUPERSET_LEVELS`` levels, ``{`` any text ``}``.
        Grammar mode keeps the flat form: any text (only the listed keys where the
        object is closed) holding the required keys."""
        if schema.get("propertyNames") is False or schema.get("maxProperties") == 0:
            # No key can appear: exactly the empty object.
            return sup.container(nfa, b"{", b"}", None)
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        if self._superset_levels > 0:
            try:
                body = body_dfa(lambda n: sup.members(n, self._member_superset(schema, props, path, depth)),
                                 sup.SUPERSET_STATES)
                return self._with_required_keys(nfa, schema, props, body, sup.SUPERSET_STATES)
            except RegexTooLargeError:
                pass  # values that may run over the members after them: a coarser form
        if self._superset_levels < sup.SUPERSET_LEVELS and not self._flat_supersets:
            # Inside a member-by-member parent: the parent's automaton would track this
            # one's key positions alongside its own (a subset blow-up); braces are enough.
            return sup.bracketed_text(nfa, b"{", b"}")
        body = self._closed_object_body(schema, props) or body_dfa(lambda n: n.any_bytes())
        return self._with_required_keys(nfa, schema, props, body)

    def _with_required_keys(self, nfa, schema, props, body: DFA, limit: int = MAX_PRODUCT_STATES):
        """``{`` body ``}`` where each required key appears somewhere in ``body``."""
        for name in schema.get("required", []) or []:
            if not isinstance(name, str):
                continue
            tags = _scalar_enum(self.deref(props.get(name), "#") if isinstance(props.get(name), dict) else None)

            def needle(n, name=name, tags=tags):
                parts = [jt.quoted(n, jt.full_match_body(n, re.escape(name)))]
                if tags is not None:
                    parts += [jt.regex_fragment(n, r"[ \t\n\r]*:[ \t\n\r]*"),
                              n.union([self.value_superset(n, v) for v in tags])]
                return n.concat([n.any_bytes()] + parts + [n.any_bytes()])

            try:
                body = intersect(body, body_dfa(needle), limit=limit)
            except EmptyLanguageError:
                # A superset without a value: a proof (an EmptyLanguageError would read
                # as an emptied subtraction further up).
                raise UnsatisfiableSchemaError(f"required key {name!r} cannot appear", "#") from None
        return nfa.concat([nfa.byte_string(b"{"), embed(nfa, body), nfa.byte_string(b"}")])

    def _member_superset(self, schema, props, path, depth) -> DFA | None:
        """One ``key: value`` of an object (None when no key can appear): a listed
        key with its value's superset, or any other key with a value, unless
        ``additionalProperties`` is false and there are no ``patternProperties``."""
        additional = schema.get("additionalProperties", True)
        if schema.get("patternProperties"):
            additional = True
        nfa = NFA()
        frags = []
        with self._supersets(self._superset_levels - 1, self._flat_supersets):
            for name, sub in props.items():
                value = self._value_superset_or_any(nfa, sub, _pointer(path, "properties", name), depth)
                if value is not None:
                    frags.append(sup.member(nfa, jt.quoted(nfa, jt.full_match_body(nfa, re.escape(name))), value))
            if additional is not False:
                value = self._value_superset_or_any(nfa, additional, _pointer(path, "additionalProperties"), depth)
                if value is not None:
                    frags.append(sup.member(nfa, jt.key_excluding(nfa, props), value))
        return determinize(nfa, *nfa.union(frags), limit=sup.SUPERSET_STATES) if frags else None

    def _value_superset_or_any(self, nfa, sub, path, depth):
        """The superset of ``sub``'s values (a cheap scalar one where it is surely a
        scalar), any value where it cannot be built here, None where ``sub`` has no
        value."""
        try:
            target = self.deref(sub, path)
            if target is False:
                return None
            kinds = _scalar_kinds(target)
            if kinds is not None:
                return self._scalar_superset(nfa, kinds)
            return self.value(nfa, sub, path, depth + 1)  # $ref and all: recursion stays bounded
        except UnsatisfiableSchemaError:
            return None  # over mode: a proof that no value exists
        except (SchemaError, RegexError):
            return sup.any_json(nfa, self._superset_levels)

    def array_superset(self, nfa, schema, path, depth):
        """``[`` items ``]`` (``json_superset``), each item a superset of what
        ``items`` allows (of any value where tuple keywords are present), as many as
        ``minItems`` / ``maxItems`` allow up to ``SUPERSET_COUNT_MAX``; below
        ``SUPERSET_LEVELS`` levels, ``[`` any text ``]``."""
        if self._superset_levels <= 0:
            return sup.bracketed_text(nfa, b"[", b"]")
        items = schema.get("items", True)
        if "prefixItems" in schema or not isinstance(items, (dict, bool)):
            items = True
        lo, hi = schema.get("minItems", 0), schema.get("maxItems")
        lo = min(lo, sup.SUPERSET_COUNT_MAX) if isinstance(lo, int) and lo > 0 else 0
        hi = hi if isinstance(hi, int) and 0 <= hi <= sup.SUPERSET_COUNT_MAX else None
        levels = self._superset_levels - 1
        tries = [(levels, 0, None)]
        if lo or hi is not None:
            # Counting items needs items that cannot run over a comma: one more level
            # of structure (scalars, strings, brackets) where the count means anything.
            # Brackets around any text inside a counted repetition may blow the DFA up
            # (each "]" may or may not end an item): then the count is dropped.
            tries.insert(0, (max(levels, 1), lo, hi))
        for item_levels, lo, hi in tries:
            try:
                return embed(nfa, self._array_superset_dfa(items, item_levels, lo, hi, path, depth))
            except RegexTooLargeError:
                continue
        return sup.bracketed_text(nfa, b"[", b"]")

    def _array_superset_dfa(self, items, levels: int, lo: int, hi: int | None, path, depth) -> DFA:
        sub_nfa = NFA()
        with self._supersets(levels, self._flat_supersets):
            item = self._value_superset_or_any(sub_nfa, items, _pointer(path, "items"), depth)
        if item is None:
            return body_dfa(lambda n: sup.container(n, b"[", b"]", None))
        item_dfa = determinize(sub_nfa, *item, limit=sup.SUPERSET_STATES)
        # Built apart and checked: an item that may run over the commas after it
        # makes the repetition's subsets blow up.
        return body_dfa(lambda n: sup.container(n, b"[", b"]", item_dfa, lo, hi), sup.SUPERSET_STATES)

    def _closed_object_body(self, schema, props) -> DFA | None:
        if schema.get("additionalProperties") is not False or schema.get("patternProperties") or not props:
            return None
        scalars = {}
        for name, sub in props.items():
            sub = self.deref(sub, "#")
            if sub is False:
                continue  # the key cannot appear
            scalars[name] = _scalar_kinds(sub)  # None: not a scalar, any text stands for it

        def build(n):
            def ws():
                return jt.regex_fragment(n, r"[ \t\n\r]*")

            def entry():
                return n.union([n.concat([jt.quoted(n, jt.full_match_body(n, re.escape(name))), ws(),
                                          n.byte_string(b":"), ws(),
                                          n.any_bytes() if kinds is None else self._scalar_superset(n, kinds)])
                                for name, kinds in scalars.items()])

            if not scalars:
                return ws()
            more = n.repeat(lambda: n.concat([ws(), n.byte_string(b","), ws(), entry()]), 0, None)
            return n.union([ws(), n.concat([ws(), entry(), more, ws()])])

        return body_dfa(build)

    def _scalar_superset(self, nfa, kinds):
        """Every spelling of a value of these scalar kinds (or these enum values)."""
        frags = []
        for kind in kinds:
            if isinstance(kind, tuple):  # ("value", v): an enum / const value
                frags.append(self.value_superset(nfa, kind[1]))
            elif kind == "string":
                frags.append(jt.quoted(nfa, jt.string_body(nfa)))
            elif kind in ("number", "integer"):
                frags.append(jt.any_number(nfa))
            elif kind == "boolean":
                frags.append(nfa.union([nfa.byte_string(b"true"), nfa.byte_string(b"false")]))
            else:
                frags.append(nfa.byte_string(b"null"))
        return nfa.union(frags)

    def entry(self, nfa, key_frag, sub, path, depth, cuts=None):
        """``key_frag : value``; with ``cuts`` (a lazy NFA's byte boundaries that the
        value's ranges already appear among) the value is deferred until the key is written."""
        parts = [key_frag, self.ws.site(nfa, "empty", depth), nfa.byte_string(b":"), self.ws.site(nfa, "colon", depth)]
        if cuts is None:
            parts.append(self.value(nfa, sub, path, depth + 1))
        else:
            parts.append(nfa.deferred(lambda: self.value(nfa, sub, path, depth + 1), cuts))
        return nfa.concat(parts)

    def _extra_schema_for(self, name, patterns, additional):
        matching = [p for p in patterns if _search(p, name)]
        if matching:
            return {"allOf": [patterns[p] for p in matching]} if len(matching) > 1 else patterns[matching[0]]
        return additional

    def extra_entries(self, nfa, schema, defined, patterns, additional, names_schema, path, inner):
        """A builder ``f(cuts=None, into=None) -> fragment`` for one extra key/value
        entry, or None; ``cuts`` defers the values (``entry``); ``into`` builds it in
        another NFA than ``nfa`` (a grammar rule of its own)."""
        if not patterns and additional is False:
            return None
        if not patterns and names_schema is None:
            # JSON Schema's default (any other key): the key fragment goes straight into
            # the automaton; a minimised DFA of it is only needed for key algebra.
            ptr = _pointer(path, "additionalProperties")

            def build_plain(cuts=None, into=None):
                n = nfa if into is None else into
                try:
                    return self.entry(n, jt.key_excluding(n, defined), additional, ptr, inner - 1, cuts)
                except UnsatisfiableSchemaError:
                    raise UnsatisfiableSchemaError("no additional property value is possible", path) from None

            return build_plain
        kinds = []  # (key DFA, value schema, pointer)
        try:
            excluded = other_keys_dfa(frozenset(defined))
        except EmptyLanguageError:
            return None
        pattern_keys = []
        for p, sub in patterns.items():
            try:
                kd = pattern_key_dfa(p)
                if any(_search(p, name) for name in defined):
                    # Only where a listed key matches is there anything to take out
                    # (OCDS's "^(name_(<language tag>))$" beside "name": nothing).
                    kd = intersect(excluded, kd)
            except EmptyLanguageError:
                continue
            except RegexError as e:
                raise UnsupportedSchemaError(f"patternProperties key {p!r}: {e}", _pointer(path, "patternProperties"), "patternProperties") from None
            pattern_keys.append((p, kd, sub))
        # A key matching several patterns must satisfy all their schemas: split the
        # keys into regions by the set of patterns they match.
        regions: list[tuple[DFA, list]] = []  # (keys, [(pattern, schema)])
        for p, kd, sub in pattern_keys:
            refined, fresh = [], kd
            for rd, members in regions:
                if is_empty_intersection(rd, kd):
                    refined.append((rd, members))
                    continue
                refined.append((intersect(rd, kd), members + [(p, sub)]))
                only = minus(rd, kd)
                if only is not None:
                    refined.append((only, members))
                fresh = None if fresh is None else minus(fresh, rd)
            if fresh is not None:
                refined.append((fresh, [(p, sub)]))
            regions = refined
            if len(regions) > MAX_PATTERN_REGIONS:
                self.unsupported("patternProperties", path, f"keys match more than {MAX_PATTERN_REGIONS} pattern combinations")
                break
        for rd, members in regions:
            sub = members[0][1] if len(members) == 1 else {"allOf": [m for _, m in members]}
            kinds.append((rd, sub, _pointer(path, "patternProperties", members[0][0])))
        if additional is not False:
            # Keys no pattern matches, once per pattern set, then only the listed keys
            # taken out: one intersection per object, not a difference per pattern.
            outside = keys_outside(tuple(p for p, _, _ in pattern_keys))
            try:
                rest = None if outside is None else intersect(excluded, outside, minimal=False)
            except EmptyLanguageError:
                rest = None
            if rest is not None:
                kinds.append((rest, additional, _pointer(path, "additionalProperties")))
        if names_schema is not None:
            try:
                names = body_dfa(lambda n: self.value(n, names_schema, _pointer(path, "propertyNames"), 0))
            except UnsatisfiableSchemaError:
                return None  # no name is valid (``propertyNames: false``): no extra keys
            narrowed = []
            for kd, sub, ptr in kinds:
                try:
                    narrowed.append((intersect(kd, names), sub, ptr))
                except EmptyLanguageError:
                    continue
            kinds = narrowed
        usable = []
        for kd, sub, ptr in kinds:
            if sub is False:
                continue
            usable.append((kd, sub, ptr))
        if not usable:
            return None
        depth = inner - 1

        empty = set()  # kinds whose value proved impossible (deferred copies leave them out)

        def build(cuts=None, into=None):
            n = nfa if into is None else into
            frags = []
            for i, (kd, sub, ptr) in enumerate(usable):
                if i in empty:
                    continue
                try:
                    frags.append(self.entry(n, embed(n, kd), sub, ptr, depth, cuts))
                except UnsatisfiableSchemaError:
                    empty.add(i)
                    continue
            if not frags:
                raise UnsatisfiableSchemaError("no additional property value is possible", path)
            return n.union(frags)

        return build

    # -- values of open type -----------------------------------------------------------

    def any_value(self, nfa, depth, levels):
        """Any JSON value (over mode: ``json_superset.any_json``). In a lazy NFA it nests up to
        ``OPEN_DEPTH`` containers, each built when reached; elsewhere at most
        ``levels`` more containers, from a cached DFA."""
        if self.over:
            return sup.any_json(nfa, self._superset_levels)
        if self.grammar is not None and self.grammar.owns(nfa):
            return self.grammar.call_any(nfa)
        if nfa.lazy:
            return self._deferred_any(nfa, depth, OPEN_DEPTH)
        key = (self.ws.key(), depth if self.ws.depth_matters() else 0, levels)
        dfa = _ANY_CACHE.get(key)
        if dfa is None:
            sub = NFA()
            s, e = self._bounded_any(sub, depth, levels)
            dfa = _ANY_CACHE[key] = determinize(sub, s, e)
        return embed(nfa, dfa)

    def _deferred_any(self, nfa, depth, levels):
        cuts = _ANY_CUTS.get(self.ws.key())
        if cuts is None:
            sample = NFA()
            self._bounded_any(sample, 0, 1)
            cuts = _ANY_CUTS[self.ws.key()] = sample.edge_cuts(0)

        def child(n, i=0):
            return self._deferred_any(n, depth + 1, levels - 1)

        def build():  # at levels == 0 only scalars: _any never calls child
            return self._any(nfa, depth, levels, child)

        return nfa.deferred(build, cuts)

    def _bounded_any(self, nfa, depth, levels):
        return self._any(nfa, depth, levels, lambda n, i=0: self._bounded_any(n, depth + 1, levels - 1))

    def _any(self, nfa, depth, levels, child):
        """Any value at ``depth``; ``child(nfa, i)`` builds a value one level deeper."""
        frags = [
            nfa.byte_string(b"null"), nfa.byte_string(b"true"), nfa.byte_string(b"false"),
            jt.any_number(nfa), jt.quoted(nfa, jt.string_body(nfa)),
        ]
        if levels > 0:
            inner = depth + 1
            frags.append(self.array_body(nfa, child, 0, True, 0, None, "#", depth))
            # Objects: any keys (duplicates are harmless: every value is allowed).
            frags.append(_object_of(self, nfa, lambda: self.entry_any(nfa, inner, child), depth))
        return nfa.union(frags)

    def entry_any(self, nfa, inner, child):
        parts = [jt.quoted(nfa, jt.string_body(nfa)), self.ws.site(nfa, "empty", inner - 1),
                  nfa.byte_string(b":"), self.ws.site(nfa, "colon", inner - 1),
                  child(nfa, 0)]
        return nfa.concat(parts)


_ANY_CACHE: dict[tuple, DFA] = {}
_ANY_CUTS: dict[tuple, set[int]] = {}


def _object_of(compiler, nfa, entry, depth):
    """``{}`` or ``{ entry (, entry)* }`` with the compiler's whitespace."""
    ws = compiler.ws
    open_ = nfa.byte_string(b"{")
    close = nfa.byte_string(b"}")
    e = ws.site(nfa, "empty", depth)
    nfa.epsilon(open_[1], e[0])
    nfa.epsilon(e[1], close[0])
    o = ws.site(nfa, "open", depth)
    nfa.epsilon(open_[1], o[0])
    after = nfa.state()
    compiler._join(nfa, o[1], after, entry(), after, depth)
    c = ws.site(nfa, "close", depth)
    nfa.epsilon(after, c[0])
    nfa.epsilon(c[1], close[0])
    return open_[0], close[1]


def _counting_array(compiler, nfa, any_el, con_el, k_min, depth):
    """Arrays of any elements of which at least ``k_min`` are ``con_el`` elements."""
    ws = compiler.ws
    open_ = nfa.byte_string(b"[")
    close = nfa.byte_string(b"]")
    if k_min == 0:
        e = ws.site(nfa, "empty", depth)
        nfa.epsilon(open_[1], e[0])
        nfa.epsilon(e[1], close[0])
    o = ws.site(nfa, "open", depth)
    nfa.epsilon(open_[1], o[0])
    # track[k][first?]: k contained elements so far (capped at k_min)
    first = [nfa.state() for _ in range(k_min + 1)]
    later = [nfa.state() for _ in range(k_min + 1)]
    nfa.epsilon(o[1], first[0])
    for k in range(k_min + 1):
        for src, comma in ((first[k], False), (later[k], True)):
            for el, nk in ((any_el, k), (con_el, min(k + 1, k_min))):
                parts = []
                if comma:
                    parts += [nfa.byte_string(b","), ws.site(nfa, "comma", depth)]
                parts.append(el(nfa))
                s, e = nfa.concat(parts)
                nfa.epsilon(src, s)
                nfa.epsilon(e, later[nk])
    c = ws.site(nfa, "close", depth)
    nfa.epsilon(later[k_min], c[0])
    nfa.epsilon(c[1], close[0])
    return open_[0], close[1]


def _value_texts(v) -> list[bytes]:
    """The compact spellings of a value (1 and 1.0 are equal in JSON Schema)."""
    texts = [_dumps(v)]
    if isinstance(v, float) and v.is_integer():
        texts.append(_dumps(int(v)))
    elif isinstance(v, int) and not isinstance(v, bool):
        texts.append(_dumps(float(v)))
    return texts


def _scalar_enum(schema) -> list | None:
    """Scalar values that a property schema's value must be one of (its own enum /
    const, or an ``allOf`` part's), else None."""
    if not isinstance(schema, dict):
        return None
    values = [schema["const"]] if "const" in schema else schema.get("enum")
    if isinstance(values, list) and values and not any(isinstance(v, (dict, list)) for v in values):
        return values
    for part in schema.get("allOf", []) if isinstance(schema.get("allOf"), list) else []:
        got = _scalar_enum(part)
        if got is not None:
            return got
    return None


_SCALAR_TYPES = ("string", "number", "integer", "boolean", "null")


def _scalar_kinds(schema) -> list | None:
    """What a property's value can be when it is surely a scalar: its enum values as
    ``("value", v)`` or its scalar type names; None when it may be a container."""
    values = _scalar_enum(schema)
    if values is not None:
        return [("value", v) for v in values]
    if not isinstance(schema, dict):
        return None
    types = schema.get("type")
    types = [types] if isinstance(types, str) else types
    if not isinstance(types, list) or not types or any(t not in _SCALAR_TYPES for t in types):
        return None
    return list(dict.fromkeys(types))


def _multiple_of(schema, path):
    """``multipleOf`` (an int where it is integral), None when absent; a
    ``SchemaError`` unless it is a positive number."""
    step = schema.get("multipleOf")
    if step is None:
        return None
    if not isinstance(step, (int, float)) or isinstance(step, bool) or not math.isfinite(step) or step <= 0:
        raise SchemaError("multipleOf must be a positive number", _pointer(path, "multipleOf"), "multipleOf")
    return int(step) if isinstance(step, float) and step.is_integer() else step


def _listed_before_properties(schema: dict, keyword: str) -> bool:
    """Whether ``keyword`` (a logic keyword) comes before ``properties`` in ``schema``.

    Merged objects list their keys in the order the schema text names them: the keys
    of ``{"allOf": [{"$ref": "#/$defs/base"}], "properties": {...}}`` start with the
    base's, those of ``{"properties": {...}, "oneOf": [...]}`` with its own.
    """
    order = list(schema)
    return "properties" in schema and order.index(keyword) < order.index("properties")


def _excluded_by(view, part) -> bool:
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


def _defined_keywords(schema):
    """``schema`` without keywords no draft defines (x-intellij-..., nullable): they
    constrain nothing, and two ``allOf`` parts disagreeing on one must still merge."""
    if not isinstance(schema, dict):
        return schema
    return {k: v for k, v in schema.items() if k in STANDARD or k in ANNOTATIONS}


def _without_idle_conditionals(schema):
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


def _satisfiable(build, items, why: str, path: str) -> list:
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
        raise _empty(why, path, approximated)
    return out


def _empty(why: str, path: str, approximated: bool) -> SchemaError:
    """Nothing is left: a proof of that, or only the limit of algebra over supersets."""
    if approximated:
        return ApproximationLimitError(
            f"{why}, after subtracting supersets of the excluded values: the overlap cannot be "
            "told apart exactly here (valid values may exist)", path)
    return UnsatisfiableSchemaError(why, path)


def _union_dfa(dfas, limit: int = MAX_DFA_STATES):
    nfa = NFA()
    s, e = nfa.union([embed(nfa, d) for d in dfas])
    return determinize(nfa, s, e, limit)


def _search(pattern: str, text: str) -> bool:
    import re

    try:
        return re.search(pattern, text) is not None
    except re.error:
        return False


def _number_spellings(v) -> str:
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


def _int_lower(lo, xlo):
    vals = []
    if lo is not None:
        vals.append(math.ceil(lo))
    if xlo is not None:
        vals.append(math.floor(xlo) + 1)
    return max(vals) if vals else None


def _int_upper(hi, xhi):
    vals = []
    if hi is not None:
        vals.append(math.floor(hi))
    if xhi is not None:
        vals.append(math.ceil(xhi) - 1)
    return min(vals) if vals else None


def compile_json_schema(schema, whitespace="flexible", strict: bool = True, key_order: str = "schema") -> LazyDFA:
    """The automaton of JSON documents valid against ``schema`` (determinised lazily)."""
    try:
        return SchemaCompiler(schema, whitespace, strict, key_order=key_order).compile()
    except RecursionError:
        raise UnsupportedSchemaError("the schema nests too deeply for this compiler", "#") from None
    except BaseException as e:
        if _is_recursion_panic(e):
            raise UnsupportedSchemaError("the schema nests too deeply for this compiler", "#") from None
        raise


def _is_recursion_panic(e: BaseException) -> bool:
    """A Rust extension's panic (pyo3 ``PanicException``) caused by a RecursionError."""
    return type(e).__name__ == "PanicException" and "RecursionError" in str(e)
