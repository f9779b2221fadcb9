"""JSON Schema scalars: ``enum`` / ``const``, the per-type dispatch (``typed``), numbers
(exact range and ``multipleOf`` automata) and strings (length, ``pattern``, ``format``).

Part of ``SchemaCompiler`` (``compiler``), as a mixin: ``self`` is the compiler."""

from __future__ import annotations

import itertools
import json
import math
import re

from guided.errors import (
    EmptyLanguageError,
    RegexError,
    RegexTooLargeError,
    SchemaError,
    SchemaTooLargeError,
    UnsatisfiableSchemaError,
    UnsupportedSchemaError,
)
from guided.fsm.dfa import DFA
from guided.fsm.ops import embed, intersect
from guided.fsm.ops import union as dfa_union
from guided.fsm.regex import compile_regex, lone_surrogate_reason
from guided.grammars.json_schema import superset as sup
from guided.grammars.json_schema import text as jt
from guided.grammars.json_schema.keywords import (
    EMBED_LATER_EDGES,
    EXACT_FORMATS,
    MAX_SPELLED_KEYS,
    NUMBER_EXP,
    VALIDATED_FORMATS,
    compact_json,
    int_lower,
    int_upper,
    is_recursion_panic,
    json_pointer,
    multiple_of_step,
    number_spellings,
    value_texts,
)
from guided.grammars.json_schema.logic.merge import json_equal as _json_equal
from guided.grammars.json_schema.strings import (
    always_found,
    body_parts,
    bounded_body,
    class_cuts,
    constraint_cuts,
    constraint_dfa,
    counted_body,
    defer_product,
    levelled,
    small_pattern_dfa,
)

from .formats import format_regex
from .multiple_of import MAX_STATES as MAX_MULTIPLE_STATES
from .multiple_of import multiple_of_dfa
from .numbers import (
    JSON_INTEGER,
    JSON_NUMBER,
    integer_multiple_of_regex,
    integer_range_regex,
    number_range_regex,
    plain_number_dfa,
)

#: The longest string lengths are counted to (the lazy counters are 64-bit): a
#: ``maxLength`` past it is taken as it, stricter only for strings no machine holds.
MAX_TEXT_LENGTH = 2**62


def _no_string(kind: str, rx: str, path: str) -> UnsatisfiableSchemaError:
    """The error for a ``pattern`` (or format) that matches no string this compiler
    writes, saying why where a lone surrogate is (JSON may escape one, ``"\\ud800"``,
    but no UTF-8 text holds it, and this compiler writes none)."""
    why = lone_surrogate_reason(rx, 0)
    return UnsatisfiableSchemaError(f"{kind} {rx!r} matches no string{': ' + why if why else ''}",
                                    json_pointer(path, kind), kind)


class ScalarCompiler:
    """The scalar values of ``SchemaCompiler`` (a mixin: ``self`` is the compiler).

    ``SchemaCompiler.value`` calls ``enum`` for ``enum`` / ``const`` and ``typed``
    once per JSON type a schema allows; ``is_valid`` (the reference validator) and
    ``valid_texts`` serve the other parts' analyses.

    Example::

        >>> from guided.grammars.json_schema import compile_json_schema
        >>> dfa = compile_json_schema({"type": "string", "maxLength": 3, "pattern": "^[a-z]+$"}, "compact")
        >>> dfa.matches(b'"abc"'), dfa.matches(b'"abcd"'), dfa.matches(b'"ab1"')
        (True, False, False)
    """

    # -- enum / const ----------------------------------------------------------------

    def enum(self, nfa, schema, path):
        """The compact texts of the listed values that satisfy the keywords beside
        them (checked by the reference validator); in over mode every spelling of
        them (``value_superset``).

        Raises:
            UnsatisfiableSchemaError: no listed value satisfies the other keywords.
            SchemaTooLargeError: the values' texts pass the automaton's size limit.
        """
        listed = schema.get("enum")
        if "enum" in schema and not isinstance(listed, list):
            raise SchemaError("enum must be an array", json_pointer(path, "enum"), "enum")
        if "const" in schema:  # (beside an enum: only if the enum lists it too)
            const = schema["const"]
            values = [const] if listed is None or any(_json_equal(v, const) for v in listed) else []
        else:
            values = listed
        rest = {k: v for k, v in schema.items() if k not in ("enum", "const")}
        spelled = [(v, self.valid_texts(v, rest)) for v in values]
        keep = [(v, texts) for v, texts in spelled if texts]
        if not keep:
            raise UnsatisfiableSchemaError("no enum/const value satisfies the other keywords", path)
        try:
            if self.over:
                return nfa.union([self.value_superset(nfa, v) for v, _ in keep])
            return nfa.union([nfa.byte_string(t) for t in dict.fromkeys(t for _, texts in keep for t in texts)])
        except RegexTooLargeError as e:
            if isinstance(e, SchemaError):
                raise
            keyword = "const" if "const" in schema else "enum"
            size = sum(len(t) for _, texts in keep for t in texts)
            what = f"{keyword} of {len(keep):,} values" if keyword == "enum" else keyword
            raise SchemaTooLargeError(
                f"{what} ({size:,} bytes as JSON text) is too large: its automaton, with what the rest of the "
                "schema built, passes the size limit", json_pointer(path, keyword), keyword) from None

    def valid_texts(self, v, schema) -> list[bytes]:
        """The compact spellings of ``v`` that satisfy ``schema``. ``1`` and ``1.0`` are
        one value to ``enum``, but not to draft 4's ``integer``, which takes ``1`` only."""
        return [t for t in value_texts(v) if self.is_valid(json.loads(t), schema)]

    def value_superset(self, nfa, v):
        """Every text of the value ``v`` the subset compiler could write, and more."""
        if isinstance(v, str):
            return jt.quoted(nfa, jt.full_match_body(nfa, re.escape(v)))  # any escaping
        if isinstance(v, bool) or v is None:
            return nfa.byte_string(compact_json(v))
        if isinstance(v, (int, float)):
            return jt.regex_fragment(nfa, number_spellings(v))
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
            if is_recursion_panic(e):
                raise RecursionError(str(e)) from None
            raise

    # -- typed values ----------------------------------------------------------------

    def typed(self, nfa, t, schema, path, depth):
        """The fragment of ``schema``'s values of JSON type ``t`` (a ``TYPES`` name)."""
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
        """The DFA of the numbers (``t``: "integer" or "number") ``schema``'s bounds and
        ``multipleOf`` allow; in over mode a superset (exponent forms and ``n.0``
        integers kept)."""
        if self.over:
            # Superset: exponent forms and integer-valued decimals are never excluded
            # (both may hold integers); other decimals only from a number's bounds.
            bounded, _ = self.number_regex_exact(t, {k: v for k, v in schema.items() if k != "multipleOf"}, path)
            plain = f"(?:{bounded})|{JSON_INTEGER}\\.0+"
            step = multiple_of_step(schema, path)
            multiple = multiple_of_dfa(step) if step is not None else None
            if multiple is None:
                return compile_regex(f"{plain}|{NUMBER_EXP}")
            return self._multiples("over", plain, step, multiple, path)
        rx, step = self.number_regex_exact(t, schema, path)
        if step is None:
            return plain_number_dfa(rx) if rx in (JSON_INTEGER, JSON_NUMBER) else compile_regex(rx)
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
                raise SchemaError(f"{k} must be a number", json_pointer(path, k), k)
        step = multiple_of_step(schema, path)
        if step == 1 and t == "integer":
            step = None
        try:
            if t == "integer":
                ilo = int_lower(lo, xlo)
                ihi = int_upper(hi, xhi)
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
        """The fragment of the quoted strings ``schema`` allows: length bounds,
        ``pattern`` (one, or a list from a merge), ``format``; each product built once
        per compile, and large ones deferred until decoding reaches them.

        Raises:
            UnsatisfiableSchemaError: the constraints contradict each other.
            UnsupportedSchemaError: a pattern this compiler cannot read, or a format
                validators check but this compiler cannot enforce (``strict=True``).
        """
        lo = schema.get("minLength", 0)
        hi = schema.get("maxLength")
        for k, v in (("minLength", lo), ("maxLength", hi)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                if isinstance(v, float) and v.is_integer() and v >= 0:
                    continue
                raise SchemaError(f"{k} must be a non-negative integer", json_pointer(path, k), k)
        lo = int(lo)
        if lo > MAX_TEXT_LENGTH:
            raise UnsupportedSchemaError(f"minLength {lo} is past the longest string this compiler counts to "
                                         f"({MAX_TEXT_LENGTH})", json_pointer(path, "minLength"), "minLength")
        # A larger maxLength bounds no string a machine can hold: taken as this one.
        hi = None if hi is None else min(int(hi), MAX_TEXT_LENGTH)
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
            # in 15 ms at every use). A small pattern is copied in as its minimal
            # DFA too (``small_pattern_dfa``); a larger one as its NFA, determinised
            # lazily with the rest: its own DFA may be large.
            kind, rx = constraints[0]
            if kind == "format":
                dfa = constraint_dfa(kind, rx)
                if nfa.lazy and len(dfa.flat_edges()[0]) > EMBED_LATER_EDGES:
                    return jt.quoted(nfa, nfa.deferred(lambda: embed(nfa, dfa, True), constraint_cuts(kind, rx)))
                return jt.quoted(nfa, embed(nfa, dfa, True))
            try:
                return jt.quoted(nfa, self._pattern_fragment(nfa, rx))
            except RegexTooLargeError:
                raise  # the whole automaton outgrew its limit, not this pattern alone
            except EmptyLanguageError:  # (a RegexError, but never a keyword to drop)
                raise _no_string(kind, rx, path) from None
            except RegexError as e:
                if self.strict:
                    raise UnsupportedSchemaError(f"{kind} {rx!r}: {e}", json_pointer(path, kind), kind) from None
                self.dropped.append((kind, json_pointer(path, kind)))
                return jt.quoted(nfa, jt.string_body(nfa, lo, hi))
        usable = []
        for kind, rx in constraints:
            try:
                constraint_dfa(kind, rx)
            except EmptyLanguageError:  # (a RegexError, but never a keyword to drop)
                raise _no_string(kind, rx, path) from None
            except RegexError as e:
                if self.strict or kind == "format":
                    raise UnsupportedSchemaError(f"{kind} {rx!r}: {e}", json_pointer(path, kind), kind) from None
                self.dropped.append((kind, json_pointer(path, kind)))
                continue
            usable.append((kind, rx))
        if not usable:
            return jt.quoted(nfa, jt.string_body(nfa, lo, hi))
        key = (tuple(usable), lo, hi)
        if nfa.lazy and key not in self._string_bodies:
            if key not in self._deferred_bodies:  # decided once per compile, as built
                parts = body_parts(usable, lo, hi)
                self._deferred_bodies[key] = ("levels" if levelled(parts, lo) else
                                              set().union(*(class_cuts(d) for d in parts))
                                              if defer_product(parts, path) else None)
            cuts = self._deferred_bodies[key]
            if cuts == "levels":
                # A large product (a Unicode class under maxLength 255: 80k states;
                # under 1024, past the limit): its levels are built a character at a
                # time as decoding reaches them.
                try:
                    return jt.quoted(nfa, counted_body(*key).fragment(nfa))
                except EmptyLanguageError:
                    raise UnsatisfiableSchemaError("the string constraints contradict each other", path) from None
            if cuts is not None:
                # Decoding reaches few of a schema's strings: build this one's product
                # when it does (a Unicode class times a maxLength of 255 is 80k states,
                # ~0.4 s to build and copy in).
                return jt.quoted(nfa, nfa.deferred(lambda: embed(nfa, self._string_body(key, path), True), cuts))
        return jt.quoted(nfa, embed(nfa, self._string_body(key, path), True))

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
        """``text.pattern_body``, parsed and built once per compile and copied at
        its other uses (schemas repeat their patterns: copying is several times
        cheaper than parsing the regex and building its Unicode classes again)."""
        small = small_pattern_dfa(rx)
        if small is not None:
            return embed(nfa, small, True)
        return nfa.built_once(self._pattern_templates, rx, lambda: jt.pattern_body(nfa, rx))
