"""JSON Schema -> byte-level automaton: the compiler's core (``SchemaCompiler``, ``compile_json_schema``).

::

    schema ──$ref / allOf merge──> one keyword view per node ──fragments──> NFA ──> DFA (lazy)
                                   (anyOf: union; oneOf / not / if: exact DFA algebra)

The accepted texts are JSON documents valid against the schema, written with the
chosen whitespace, object keys in ``properties`` order (optional ones may be left
out; additional keys, where allowed, come after them), or with ``key_order="any"`` in
any order (``containers.key_order``).

Polarity: the normal ("under") compile accepts a *subset* of the valid texts (key
order, bounded nesting of open values, format subsets). Whatever is subtracted --
``not X``, the ``else`` side of ``if``, the other branches of ``oneOf`` -- is
compiled by a partner in "over" mode, which accepts a *superset* (objects and arrays
written member by member one level deep, ``superset``, deeper ones brackets around
any text; required keys somewhere inside), so that ``under - over`` is again a
subset: stricter than the schema, never looser. Where the schema asks for
something an automaton cannot check exactly, the constraint is refused with a
``SchemaError`` naming the keyword and its JSON pointer (``strict=True``), or dropped
with a warning (``strict=False``); it is never silently loosened. Values of
unconstrained type (``{}``, ``true``, additional properties) nest up to
``OPEN_DEPTH`` levels in the top-level automaton, where each level is a deferred NFA
fragment built only when decoding opens a container (``NFA.deferred``). Inside the
eagerly built sub-automata of DFA algebra they nest at most ``ANY_DEPTH`` levels (the
nesting is not regular, so a full DFA of it grows exponentially).

Layout: this module holds the compiler's core (entry points, ``$ref``, the per-node
keyword dispatch ``value``, DFA algebra's budget, open values); its keyword families
are mixins in their own modules: ``logic.combinators.LogicCompiler`` (allOf / anyOf /
oneOf / not / if), ``scalars.values.ScalarCompiler`` (enum, const, numbers, strings),
``containers.arrays.ArrayCompiler``, ``containers.objects.ObjectCompiler``; tables,
limits and small helpers shared by all of them are in ``keywords``.

Cost notes: one NFA for the whole schema (``$ref`` targets inlined, each built once
and deferred at its other uses: ``reuse``), determinised lazily (``fsm.lazy``):
compile time grows with the schema's size, not with its DFA's, and only the states
decoding visits are ever built. Sub-automata are built eagerly (and minimised) only
where DFA algebra needs them: ``oneOf`` overlaps, ``not``, ``if``, ``allOf`` parts
that do not merge, several patterns on one string, keys.
"""

from __future__ import annotations

import contextlib
import json
import warnings

from guided.errors import (
    ApproximationLimitError,
    EmptyLanguageError,
    RecursiveSchemaError,
    RegexTooLargeError,
    SchemaError,
    UnsatisfiableSchemaError,
    UnsupportedSchemaError,
)
from guided.fsm.dfa import DFA, MAX_DFA_STATES, determinize
from guided.fsm.lazy import LazyDFA
from guided.fsm.nfa import NFA, PastedOnce, Template
from guided.fsm.ops import MAX_PRODUCT_STATES, embed, intersect
from guided.grammars.json_schema.containers.arrays import ArrayCompiler
from guided.grammars.json_schema.containers.key_order import AnyOrderTooLarge
from guided.grammars.json_schema.containers.objects import ObjectCompiler, object_of
from guided.grammars.json_schema.logic.combinators import LogicCompiler
from guided.grammars.json_schema.logic.conditional import negation
from guided.grammars.json_schema.logic.merge import ANNOTATIONS
from guided.grammars.json_schema.logic.presence import presence_keys, presence_variants
from guided.grammars.json_schema.scalars.values import ScalarCompiler

from . import superset as sup
from . import text as jt
from .drafts import identified_schemas, in_declared_draft
from .keywords import (
    ANY_DEPTH,
    DEPENDENCY_KEYWORDS,
    HANDLED,
    KEY_ORDERS,
    MAX_DEPENDENCY_TRIGGERS,
    OPEN_DEPTH,
    STANDARD,
    TYPES,
    WHOLE_ANY_ORDER_STATES,
    WHOLE_ANY_ORDER_WORK,
    WHOLE_KEYS_LADDER,
    WHOLE_RUNG_FAILURES,
    is_recursion_panic,
    json_pointer,
    listed_before_properties,
    satisfiable_builds,
    union_dfa,
    without_idle_conditionals,
)
from .reuse import ReusedValues
from .shape import check_shape, schema_from_text
from .strings import minus

# -- whitespace ----------------------------------------------------------------------


class Whitespace:
    """Where and what whitespace may appear between JSON tokens.

    ``"flexible"`` (default): at most two spaces or tabs, then at most one newline
    followed by at most 24 spaces or tabs, between any two tokens but before a comma:
    pretty-printing fits, runaway newlines do not. ``{"max_whitespace": n}``: the
    same sites, each run at most ``n`` characters (spaces and tabs, at most one line
    break, ``\r\n`` counting two); 0 is compact. ``"compact"``: none.
    ``{"indent": n}``: exactly ``json.dumps(value, indent=n)``.

    Args:
        spec: ``"flexible"`` (or None), ``"compact"``, ``{"indent": n}`` or
            ``{"max_whitespace": n}`` with an int ``n >= 0``.

    Raises:
        ValueError: for any other ``spec``.

    Example::

        >>> Whitespace({"indent": 2}).key()
        ('indent', 2)
        >>> Whitespace("compact").depth_matters()
        False
        >>> Whitespace({"max_whitespace": 4}).key()
        ('max', 4)
    """

    FLEXIBLE = r"[ \t]{0,2}(\r?\n[ \t]{0,24})?"

    def __init__(self, spec="flexible"):
        self.indent = None
        if spec in (None, "flexible"):
            self.kind = "flexible"
        elif spec == "compact":
            self.kind = "compact"
        elif isinstance(spec, dict) and len(spec) == 1 and set(spec) <= {"indent", "max_whitespace"} \
                and type(n := next(iter(spec.values()))) is int and n >= 0:
            self.kind = "indent" if "indent" in spec else "max"
            self.indent = n
        else:
            raise ValueError(f'whitespace must be "flexible", "compact", {{"indent": n}} or '
                             f'{{"max_whitespace": n}} (n >= 0), not {spec!r}')

    def key(self):
        """A hashable key of this layout (caches of whitespace-dependent automata)."""
        return (self.kind, self.indent)

    def depth_matters(self) -> bool:
        """Whether the text depends on the nesting depth (only with an indent)."""
        return self.kind == "indent"

    def brackets(self, nfa: NFA, opener: bytes, closer: bytes, depth: int, empty: bool):
        """The fragments ``opener`` and ``closer`` of a container (``{``/``}``, ``[``/``]``),
        linked by the empty container's whitespace where it may be ``empty``; the
        caller puts the members between them."""
        open_, close = nfa.byte_string(opener), nfa.byte_string(closer)
        if empty:
            e = self.site(nfa, "empty", depth)
            nfa.epsilon(open_[1], e[0])
            nfa.epsilon(e[1], close[0])
        return open_, close

    def site(self, nfa: NFA, kind: str, depth: int) -> tuple[int, int]:
        """The fragment of the whitespace allowed at one site of a container at ``depth``;
        ``kind``: open / close / comma / colon / empty (between ``{`` and ``}``)."""
        if self.kind == "compact":
            return nfa.empty()
        if self.kind == "flexible":
            return jt.regex_fragment(nfa, self.FLEXIBLE)
        if self.kind == "max":
            return self._bounded(nfa, self.indent)
        pad = b" " * self.indent
        text = {
            "open": b"\n" + pad * (depth + 1),
            "comma": b"\n" + pad * (depth + 1),
            "close": b"\n" + pad * depth,
            "colon": b" ",
            "empty": b"",
        }[kind]
        return nfa.byte_string(text)

    @staticmethod
    def _bounded(nfa: NFA, n: int) -> tuple[int, int]:
        """Fragment: at most ``n`` spaces, tabs and line breaks, one line break at most.
        A state per (characters so far, line break seen), plus one after each ``\r``."""
        end = nfa.state()
        before = [nfa.state() for _ in range(n + 1)]    # no line break yet
        after = [nfa.state() for _ in range(n + 1)]     # after the line break
        for k in range(n + 1):
            nfa.epsilon(before[k], end)
            nfa.epsilon(after[k], end)
            if k == n:
                continue
            for states in (before, after):
                nfa.edge(states[k], 0x20, 0x20, states[k + 1])
                nfa.edge(states[k], 0x09, 0x09, states[k + 1])
            nfa.edge(before[k], 0x0A, 0x0A, after[k + 1])
            if k + 2 <= n:
                cr = nfa.state()
                nfa.edge(before[k], 0x0D, 0x0D, cr)
                nfa.edge(cr, 0x0A, 0x0A, after[k + 2])
        return before[0], end



# -- the compiler --------------------------------------------------------------------


class SchemaCompiler(LogicCompiler, ScalarCompiler, ArrayCompiler, ObjectCompiler):
    """Compiles one root schema; ``compile()`` returns the automaton of valid documents.

    One instance per compile: it holds the schema, the settings and the per-compile
    caches (sub-schema DFAs, string bodies, reused values). Its keyword families are
    the mixins it is made of (``LogicCompiler``, ``ScalarCompiler``, ``ArrayCompiler``,
    ``ObjectCompiler``); ``value`` dispatches each sub-schema to them. DFA algebra
    asks the partner of the other polarity (``opposite``) for what it subtracts.

    Args:
        schema: the root schema: a dict, a bool, or its JSON text.
        whitespace: the layout (``Whitespace``'s spec).
        strict: refuse a keyword the automaton cannot enforce (``UnsupportedSchemaError``);
            with False it is dropped and ``compile`` warns.
        key_order: ``"schema"`` (keys in ``properties`` order) or ``"any"``.
        over: compile a superset of the valid texts (the partner's mode; see the
            module docstring).
        partner: the compiler of the other polarity, whose schema, settings and
            bookkeeping this one shares (``opposite`` makes it); ``schema`` is then
            ignored.
        unique_beside: ``uniqueItems`` on arrays of open kinds may be left to a check
            beside the automaton (``unique_site_map`` says where).

    Raises:
        SchemaError: ``schema`` is not valid JSON, or neither an object nor a boolean.
        ValueError: an unknown ``whitespace`` or ``key_order``.

    Example::

        >>> dfa = SchemaCompiler({"type": "integer", "minimum": 1}, "compact").compile()
        >>> dfa.matches(b"12"), dfa.matches(b"0")
        (True, False)
    """

    def __init__(self, schema, whitespace="flexible", strict: bool = True, *, key_order: str = "schema",
                 over: bool = False, partner=None, unique_beside: bool = False):
        self.over = over
        #: Whether ``uniqueItems`` of open kinds may be left to a check beside the automaton.
        self.unique_beside_allowed = unique_beside and partner is None
        self._partner = partner
        self._ref_stack: list[str] = []
        self._identified: dict | None = None  # resolve_pointer: the schemas named by identifiers
        self._deepest: list[str] = []  # where the recursion limit was met (``too_deep``)
        self._dfas: dict[tuple, DFA] = {}
        self._string_bodies: dict[tuple, DFA] = {}  # (constraints, minLength, maxLength) -> body
        self._deferred_bodies: dict[tuple, set | str | None] = {}  # the same key -> cuts if deferred, or "levels"
        self._pattern_templates: dict[str, Template] = {}  # _pattern_fragment
        self._reused = ReusedValues()  # value's sub-schemas built so far
        #: Over mode: supersets taken so far, and the cached DFAs that hold one.
        self.approximations = 0
        #: Over mode: container levels still written member by member (``superset``).
        self._superset_levels = sup.SUPERSET_LEVELS
        self._flat_supersets = False
        self._inexact: set[tuple] = set()
        self._too_large: dict[tuple, tuple[RegexTooLargeError, bool]] = {}
        self._differences: dict[tuple, tuple] = {}  # subtract's results
        self._placed: dict[int, tuple[list, list[str]]] = {}  # placed: made lists and their pointers
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
            self._deepest, self._placed = partner._deepest, partner._placed
            self._unique_sites, self.unique_checked = None, set()
            if partner.grammar is not None:
                # Grammar mode keeps flat text supersets: with every lexeme end kept by
                # the grammar's lexer, member-by-member ones change no MaskBench result
                # among the grammar-mode schemas.
                self._superset_levels = 0
                self._flat_supersets = True
            self.grammar = None
            return
        if isinstance(schema, str):
            schema = schema_from_text(schema)
        if not isinstance(schema, (dict, bool)):
            raise SchemaError(f"a schema must be an object or a boolean, not {type(schema).__name__}", "#")
        check_shape(schema)
        self.root = in_declared_draft(schema)
        self.ws = Whitespace(whitespace)
        if key_order not in KEY_ORDERS:
            raise ValueError(f'key_order must be "schema" or "any", not {key_order!r}')
        self.key_order = key_order
        self.strict = strict
        self.dropped: list[tuple[str, str]] = []
        self._validator = None
        #: ``containers.unique``: the arrays whose ``uniqueItems`` may be checked beside the
        #: automaton and the ``$ref`` targets met (found when first needed), and the
        #: ids of those this compile left to that check.
        self._unique_sites: tuple[set[int], dict] | None = None
        self.unique_checked: set[int] = set()
        #: Set by ``recursive`` (the grammar being built): turns recursive ``$ref`` and open
        #: values in its own NFAs into calls of grammar rules.
        self.grammar = None

    # -- entry points --------------------------------------------------------------

    def compile(self) -> LazyDFA:
        """The automaton of valid documents, determinised on demand (a large schema's
        full DFA can have thousands of states, of which decoding visits a few).

        Returns:
            The ``LazyDFA`` of the root schema; with ``strict=False`` it warns
            (``UserWarning``) listing the keywords it dropped.

        Raises:
            SchemaError: a subclass naming the keyword and its pointer: the schema is
                malformed, unsatisfiable, asks for what an automaton cannot enforce
                (``strict=True``), or recurses (``RecursiveSchemaError``).
        """
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
            dfas = satisfiable_builds(lambda b: self.dfa(b, path, depth), union,
                                "not/if/then/else leave no valid value", path)
            return dfas[0] if len(dfas) == 1 else union_dfa(dfas, self.algebra_limit(MAX_DFA_STATES))
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

    def too_deep(self, error: type) -> SchemaError:
        """``error`` for a schema whose expansion went past Python's recursion limit,
        at the pointer where it did (shortened in the middle): most such schemas
        expand a recursive ``$ref`` without end where recursion cannot be a grammar
        rule (inside ``allOf`` / ``oneOf`` / ``not`` algebra), the rest nest about 50
        objects deep."""
        at = self._deepest[0] if self._deepest else "#"
        if len(at) > 160:
            at = at[:60] + "/…/" + at[-90:]
        return error("the schema nests too deeply for this compiler (past Python's recursion limit; "
                     "a recursive $ref expanded through allOf / oneOf / not, or very deep nesting)", at)

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
        """Refuse ``keyword`` at ``path`` (``UnsupportedSchemaError`` saying ``why``), or
        with ``strict=False`` note it as dropped (``compile`` warns)."""
        if self.strict:
            raise UnsupportedSchemaError(f"unsupported keyword {keyword!r} ({why})", json_pointer(path, keyword), keyword)
        self.dropped.append((keyword, json_pointer(path, keyword)))

    # -- $ref ----------------------------------------------------------------------

    def resolve_pointer(self, ref: str, path: str):
        """The schema ``ref`` names: a JSON pointer into the root (``#/...``), or an
        identifier the schema declares (``drafts.identified_schemas``: ``#name``,
        an ``$id``'s URI, with a pointer into it after ``#/``)."""
        if ref == "#" or ref == "":
            return self.root
        node = self.root
        if not ref.startswith("#/"):
            if self._identified is None:
                self._identified = identified_schemas(self.root)
            named = self._identified.get(ref[:-1] if ref.endswith("#") else ref)
            if named is not None:
                return named
            base, _, fragment = ref.partition("#")
            node = self._identified.get(base) if fragment.startswith("/") else None
            if node is None:
                raise UnsupportedSchemaError(
                    f"$ref {ref!r} is neither a local JSON pointer ('#/...') nor an identifier this schema declares"
                    " (an $id, id or $anchor; other documents are not fetched)",
                    json_pointer(path, "$ref"), "$ref",
                )
            ref = "#" + fragment
        for raw in ref[2:].split("/"):
            part = raw.replace("~1", "/").replace("~0", "~")
            from urllib.parse import unquote

            part = unquote(part)
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise SchemaError(f"$ref {ref!r} does not resolve", json_pointer(path, "$ref"), "$ref")
        return node

    def deref(self, schema, path: str):
        """Follow ``$ref`` chains. Draft 4-7 ignore a ``$ref``'s siblings; 2019+ add them."""
        seen = []
        while isinstance(schema, dict) and "$ref" in schema:
            ref = schema["$ref"]
            if not isinstance(ref, str):
                raise SchemaError("$ref must be a string", json_pointer(path, "$ref"), "$ref")
            if ref in seen:
                raise RecursiveSchemaError(f"$ref {ref!r} refers to itself", json_pointer(path, "$ref"), "$ref")
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
        """The fragment ``(start, end)`` in ``nfa`` of the texts of ``schema``'s values.

        The per-node dispatch every part calls for a sub-schema: ``$ref`` (a grammar
        rule's call in grammar mode, refused where it recurses otherwise), booleans,
        reuse of a sub-schema built before, then the keywords (``_value_of``).

        Args:
            nfa: the NFA being built (lazy for the top-level automaton).
            schema: the sub-schema.
            path: its JSON pointer in the user's schema (for errors).
            depth: container nesting depth (the indent; open values' nesting).

        Raises:
            UnsatisfiableSchemaError: no value satisfies ``schema``.
            RecursiveSchemaError: a ``$ref`` that recurses, outside grammar mode.
            SchemaError: other refusals, naming the keyword and its pointer.
        """
        # The innermost frame that meets the recursion limit notes where it stands: the
        # error then names that pointer (``too_deep``), not the root.
        try:
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
                    raise RecursiveSchemaError(f"recursive $ref {ref!r}: {why}", json_pointer(path, "$ref"), "$ref")
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
            if nfa.lazy and not self.over and (self.grammar is None or not self.grammar.owns(nfa)):
                # A sub-schema used again ($ref targets, a value in each key count's
                # chain) is deferred after its first copy (``reuse``).
                at = depth if self.ws.depth_matters() else 0
                later = self._reused.later_copy(nfa, schema, at, lambda: self._value_of(nfa, schema, path, depth))
                if later is not None:
                    return later
                first = len(nfa)
                frag = self._value_of(nfa, schema, path, depth)
                self._reused.built(nfa, schema, at, first, frag)
                return frag
            return self._value_of(nfa, schema, path, depth)
        except RecursionError:
            if not self._deepest:
                self._deepest.append(path)
            raise

    def _value_of(self, nfa: NFA, schema: dict, path: str, depth: int) -> tuple[int, int]:
        """``value`` of a schema object (``$ref`` and booleans dealt with)."""
        self.check_keywords(schema, path)
        schema = without_idle_conditionals(schema)
        if "not" in schema:
            defined = self._defined_deref(path)
            if negation(defined(schema["not"]), defined) == []:
                # `"not": {}` (a forbidden property, once merged) excludes every value:
                # no algebra needed to show it.
                raise UnsatisfiableSchemaError("'not' of a schema that every value satisfies", json_pointer(path, "not"))
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
                              "no anyOf branch can be satisfied", json_pointer(path, "anyOf"))
        if "oneOf" in schema:
            return self.one_of(nfa, schema, path, depth)
        if "not" in schema or "if" in schema:
            union = self._logic_as_union(schema, path)
            if union is not None:  # no algebra: a union of merged schemas (logic.conditional)
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
        """``unsupported`` for each standard keyword of ``schema`` this compiler cannot enforce."""
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
                raise SchemaError(f"{k} must be an object", json_pointer(path, k), k)
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
        ``oneOf``), each joined with the keywords beside it (those that constrain:
        a branch left as it is stays the schema object it was, which
        ``containers.unique``'s checks beside the automaton go by)."""
        base = {k: v for k, v in schema.items() if k != keyword and k in STANDARD}
        first = listed_before_properties(schema, keyword)
        return [({"allOf": [b, base] if first else [base, b]} if base else b, ptr)
                for b, ptr in self.listed(schema, keyword, path)]

    def union(self, nfa, parts, depth, why: str, path: str) -> tuple[int, int]:
        """The union of the satisfiable ``(schema, pointer)`` parts; ``why`` at ``path``
        when none is."""
        return nfa.union(satisfiable_builds(lambda part: self.value(nfa, part[0], part[1], depth), parts, why, path))

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

    def listed(self, schema, keyword: str, path: str) -> list[tuple]:
        """``(sub-schema, pointer)`` for each item of the list ``schema[keyword]``: the
        pointer where it stands in the user's schema (``placed``), else its index
        under ``path``."""
        items = self.list_of_schemas(schema, keyword, path)
        placed = self._placed.get(id(items))
        if placed is not None and placed[0] is items:
            return list(zip(items, placed[1]))
        return [(b, json_pointer(path, keyword, i)) for i, b in enumerate(items)]

    def placed(self, parts: list[tuple]) -> list:
        """A list of sub-schemas this compiler makes from ``(sub-schema, pointer)``
        parts, noted so that errors inside them name where they stand in the user's
        schema (a ``oneOf`` split by type: ``#/oneOf/2``, not ``#/oneOf/oneOf/0``)."""
        items = [b for b, _ in parts]
        self._placed[id(items)] = (items, [ptr for _, ptr in parts])  # the list kept: its id stays its own
        return items

    def list_of_schemas(self, schema, keyword, path):
        """``schema[keyword]``, checked to be a non-empty list (``SchemaError`` if not)."""
        v = schema[keyword]
        if not isinstance(v, list) or not v:
            raise SchemaError(f"{keyword} must be a non-empty array of schemas", json_pointer(path, keyword), keyword)
        return v

    def types_of(self, schema: dict, path: str) -> list[str]:
        """The JSON types ``schema`` allows, in ``TYPES`` order ("integer" dropped where
        "number" is there; every type without ``type`` or with draft 3's "any")."""
        t = schema.get("type")
        if t is None:
            return list(TYPES)
        names = t if isinstance(t, list) else [t]
        for n in names:
            if n not in TYPES and n != "any":
                raise SchemaError(f"unknown type {n!r}", json_pointer(path, "type"), "type")
        if "any" in names:
            return list(TYPES)
        if "number" in names and "integer" in names:
            names = [n for n in names if n != "integer"]
        return [n for n in TYPES if n in names]

    # -- values of open type -----------------------------------------------------------

    def any_value(self, nfa, depth, levels):
        """Any JSON value (over mode: ``superset.any_json``). In a lazy NFA it nests up to
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
        return nfa.deferred(self._any_builder(nfa, depth, levels), cuts)

    def _any_builder(self, nfa, depth, levels) -> PastedOnce:
        """The builder of an open value ``levels`` containers from the nesting limit.

        Pasted after the first (at levels == 0 only scalars: _any never calls
        child): making a value's ~100 states costs ~100 µs, in the first mask that
        reaches it. Its children are deferred values whose builders serve every
        copy (``NFA.template``'s holes). Where the indent does not depend on the
        depth, a value at any level but 0 has the same states, its children a level
        deeper: one kept for the whole process (``_ANY_SHAPES``) is pasted with
        this level's children, so no compile builds one again (a level's first
        build costs ~150 µs, in the first mask that reaches it)."""

        def child(n, i=0):
            return self._deferred_any(n, depth + 1, levels - 1)

        def from_shape():
            return self._any_from_shape(nfa, depth, levels)

        key = ("any", self.ws.key(), depth if self.ws.depth_matters() else 0, levels)
        make = from_shape if levels > 0 and not self.ws.depth_matters() else None
        return PastedOnce(nfa, nfa.templates, key, lambda: self._any(nfa, depth, levels, child), True, make)

    def _any_from_shape(self, nfa, depth, levels) -> Template | None:
        """An open value's template at ``levels`` (> 0) from the process's shape,
        made from a level this NFA built where there is none yet."""
        shape = _ANY_SHAPES.get(self.ws.key())
        if shape is None:
            built = nfa.templates.get(("any", self.ws.key(), 0, levels + 1))
            if built is None or not all(isinstance(b, PastedOnce) and b.key[0] == "any" for _, _, b in built.holes):
                return None
            shape = _ANY_SHAPES[self.ws.key()] = built.with_holes(None)  # (no builder: no NFA kept alive)
            shape.packed()
        return shape.with_holes(self._any_builder(nfa, depth + 1, levels - 1))

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
            frags.append(object_of(self, nfa, lambda: self.entry_any(nfa, inner, child), depth))
        return nfa.union(frags)

    def entry_any(self, nfa, inner, child):
        """One ``"key": value`` member of an open object (any key; ``child`` builds the value)."""
        parts = [jt.quoted(nfa, jt.string_body(nfa)), self.ws.site(nfa, "empty", inner - 1),
                  nfa.byte_string(b":"), self.ws.site(nfa, "colon", inner - 1),
                  child(nfa, 0)]
        return nfa.concat(parts)


_ANY_CACHE: dict[tuple, DFA] = {}
_ANY_CUTS: dict[tuple, set[int]] = {}
#: Per whitespace key: the states of an open value below the nesting limit, children
#: left as holes (``SchemaCompiler._any_builder``).
_ANY_SHAPES: dict[tuple, Template] = {}



def compile_json_schema(schema, whitespace="flexible", strict: bool = True, key_order: str = "schema", *,
                        with_unique_sites: bool = False):
    """The automaton of JSON documents valid against ``schema`` (determinised lazily).

    The entry point of the JSON Schema compiler (``guided.compile`` calls it for a
    ``guided.JsonSchema``): it accepts only valid documents, in the chosen layout and
    key order, and refuses (or with ``strict=False`` drops, with a warning) what an
    automaton cannot enforce; see the module docstring.

    Args:
        schema: a dict, a bool, or its JSON text.
        whitespace: ``"flexible"``, ``"compact"`` or ``{"indent": n}`` (``Whitespace``).
        strict: refuse unenforceable keywords (True) or drop them with a warning.
        key_order: ``"schema"`` (``properties`` order) or ``"any"``.
        with_unique_sites: also return the ``containers.unique.SiteMap`` of the
            arrays whose ``uniqueItems`` the automaton leaves to a check beside it
            (None where there are none); without it such arrays are refused, since
            the automaton alone would accept repeated items.

    Returns:
        A ``LazyDFA``, or ``(LazyDFA, SiteMap | None)`` with ``with_unique_sites``.

    Raises:
        RecursiveSchemaError: a ``$ref`` recurses (``recursive.compile_recursive_schema``
            takes such schemas).
        UnsatisfiableSchemaError: no value satisfies the schema.
        UnsupportedSchemaError: a keyword this compiler cannot enforce (``strict=True``),
            or a schema nesting past Python's recursion limit.
        SchemaError: a malformed schema.
        RegexTooLargeError: the automaton outgrows its size limits.
        ValueError: an unknown ``whitespace`` or ``key_order``.

    Example::

        >>> dfa = compile_json_schema({"type": "object", "properties": {"a": {"type": "boolean"}},
        ...                            "required": ["a"]}, "compact")
        >>> dfa.matches(b'{"a":true}'), dfa.matches(b'{}')
        (True, False)
    """
    compiler = SchemaCompiler(schema, whitespace, strict, key_order=key_order, unique_beside=with_unique_sites)
    try:
        dfa = compiler.compile()
        return (dfa, compiler.unique_site_map()) if with_unique_sites else dfa
    except RecursionError:
        raise compiler.too_deep(UnsupportedSchemaError) from None
    except BaseException as e:
        if is_recursion_panic(e):
            raise compiler.too_deep(UnsupportedSchemaError) from None
        raise
