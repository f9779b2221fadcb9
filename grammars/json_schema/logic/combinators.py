"""JSON Schema combinators: ``allOf`` merged or intersected, ``anyOf`` as unions,
``oneOf`` / ``not`` / ``if`` as unions of schemas where their negations allow
(``conditional``), else as exact DFA algebra (``SchemaCompiler.logic_dfa``).

Part of ``SchemaCompiler`` (``compiler``), as a mixin: ``self`` is the compiler."""

from __future__ import annotations

import itertools
import math

from guided.errors import ApproximationLimitError, EmptyLanguageError, SchemaError, UnsatisfiableSchemaError
from guided.fsm.dfa import DFA, MAX_DFA_STATES
from guided.fsm.ops import embed
from guided.grammars.json_schema.keywords import (
    EARLIER_KEYWORDS,
    MAX_ONE_OF_CHOICES,
    OTHER_TYPES_KEYWORDS,
    TYPES,
    defined_keywords,
    excluded_by,
    json_pointer,
    listed_before_properties,
    nothing_left_error,
    union_dfa,
    without_idle_conditionals,
)

from .conditional import choices_with, conditional_as_union, conditionals_by_value, negation, not_as_union
from .disjoint import disjoint_pairs
from .merge import ANNOTATIONS, merge
from .presence import presence_keys


class LogicCompiler:
    """The combinators of ``SchemaCompiler`` (a mixin: ``self`` is the compiler).

    ``SchemaCompiler.value`` calls ``all_of`` and ``one_of`` for those keywords and
    ``logic_dfa`` for ``not`` / ``if`` left to DFA algebra; ``object_view``,
    ``merged_all_of`` and ``_logic_as_union`` are the analyses the other parts ask.
    Each builder takes the NFA being built, the sub-schema, its JSON pointer and the
    nesting depth, and returns a fragment ``(start, end)`` of that NFA.

    Example::

        >>> from guided.grammars.json_schema import compile_json_schema
        >>> dfa = compile_json_schema({"oneOf": [{"type": "integer"}, {"minimum": 5}]}, "compact")
        >>> dfa.matches(b"3"), dfa.matches(b"7"), dfa.matches(b"7.5")
        (True, False, True)
    """

    # -- combinators -----------------------------------------------------------------

    def merged_all_of(self, schema, path) -> tuple:
        """``(merged, leftovers)``: ``schema``'s ``allOf`` parts merged by keywords into
        the keywords beside them, and the parts that would not merge exactly."""
        return _merged_parts(self._all_of_parts(schema, path, [id(schema)]))

    def _all_of_parts(self, schema, path, within: list) -> list:
        """``schema``'s own keywords and its ``allOf`` parts, in the order they merge; a
        part that has an ``allOf`` of its own is spread into its keywords and its parts
        (``allOf`` is associative), so that two such parts (cloudify's Kubernetes
        types, each ``allOf`` a shared base and more keys) still merge by keywords
        instead of intersecting whole-object automata. ``within``: the schemas being
        spread (a part that refers back to one of them is kept whole)."""
        beside = without_idle_conditionals({k: v for k, v in schema.items() if k != "allOf"})
        parts = []
        for p, ptr in self.listed(schema, "allOf", path):
            part = self.deref(p, ptr)
            if isinstance(part, dict) and isinstance(part.get("allOf"), list) and id(part) not in within:
                parts.extend(self._all_of_parts(defined_keywords(part), ptr, within + [id(part)]))
            else:
                parts.append(without_idle_conditionals(defined_keywords(part)))
        return parts + [beside] if listed_before_properties(schema, "allOf") else [beside] + parts

    def all_of(self, nfa, schema, path, depth):
        """``allOf``, cheapest exact form first: conditionals on one key's value as one
        branch per value; parts merged by keywords into one schema (``merge``); choices
        of the parts' ``anyOf`` branches, each merged; else the intersection of the
        parts' DFAs (``algebra``).

        Raises:
            UnsatisfiableSchemaError: the parts contradict each other.
        """
        by_value = conditionals_by_value(schema, lambda s: self.deref(s, path),
                                         lambda s: self.object_view(s, path), self.is_valid)
        if by_value is not None:  # one branch per value of the key the conditions test
            # Each branch repeats the whole object; too many copies of a large one and
            # the algebra below builds it once.
            got = self.union_unless_too_large(nfa, [(b, path) for b in by_value["anyOf"]], depth,
                                              "no value of the key the conditions test is valid", json_pointer(path, "allOf"))
            if got is not None:
                return got
        parts = self._all_of_parts(schema, path, [id(schema)])
        merged, leftovers = _merged_parts(parts)
        if not leftovers:
            if self._branch_keys_inside(merged, parts, path):
                spread = self._any_of_spread(merged, [], path, parts)
                got = None if spread is None else self.union_unless_too_large(
                    nfa, spread, depth, "no anyOf branch can be satisfied", json_pointer(path, "allOf"))
                if got is not None:
                    return got
            return self.value(nfa, merged, path, depth)
        merged, leftovers = self._logic_as_any_of(merged, leftovers, path)
        spread = self._any_of_spread(merged, leftovers, path, parts)
        if spread is not None:  # no algebra: each choice of anyOf branches, merged
            got = self.union_unless_too_large(nfa, spread, depth, "no choice of the allOf parts' anyOf branches holds",
                                              json_pointer(path, "allOf"))
            if got is not None:
                return got
        def joined() -> DFA:
            result = self.dfa(merged, path, depth)
            for p in leftovers:
                try:
                    result = self.intersection(result, self.dfa(p, json_pointer(path, "allOf"), depth))
                except EmptyLanguageError:
                    raise UnsatisfiableSchemaError("the allOf branches contradict each other",
                                                   json_pointer(path, "allOf")) from None
            return result

        return embed(nfa, self.algebra(joined))

    def _logic_as_any_of(self, merged, leftovers, path) -> tuple:
        """``(merged, leftovers)`` with each ``not`` and ``if`` / ``then`` / ``else``
        among them (the merged schema's own too) as an ``anyOf`` part, where its
        condition negates to a union of schemas (``conditional``): two ``not``
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

    def _any_of_spread(self, merged, leftovers, path, parts=()) -> list | None:
        """``allOf [M, {anyOf [A1, A2]}, {anyOf [B1, B2]}]`` as the union of
        ``allOf [M, Ai, Bj]`` for every choice (the ``(schema, pointer)`` parts), which
        merge by keywords where the parts did not (two ``anyOf`` of ``required``
        lists, say); None when no leftover part is an ``anyOf`` or the choices pass
        ``MAX_ONE_OF_CHOICES``. ``parts``: the ``allOf``'s parts in the order they
        merge (``_all_of_parts``), where a chosen branch's keys take the place of its
        ``anyOf`` (``_in_text_order``)."""
        any_of_at = {}  # id of a spread part -> where its anyOf stands among the parts
        if isinstance(merged, dict) and "anyOf" in merged:  # the first part's anyOf, kept in its place
            own = {"anyOf": merged["anyOf"]}
            any_of_at[id(own)] = next((i for i, p in enumerate(parts)
                                       if isinstance(p, dict) and p.get("anyOf") is merged["anyOf"]), None)
            leftovers = [own, *leftovers]
            merged = {k: v for k, v in merged.items() if k != "anyOf"}
        spread = [p for p in leftovers if isinstance(p, dict) and "anyOf" in p]
        if not spread:
            return None
        rest = [p for p in leftovers if not (isinstance(p, dict) and "anyOf" in p)]
        ptr = json_pointer(path, "allOf")
        options = [[b for b, _ in self.branches(p, "anyOf", ptr)] for p in spread]
        if math.prod(len(o) for o in options) > MAX_ONE_OF_CHOICES:
            return None
        for p in spread:
            if id(p) not in any_of_at:
                any_of_at[id(p)] = next((i for i, q in enumerate(parts) if q is p), None)
        skipped = {id(p) for p in leftovers}  # parts that are not in ``merged``
        out = []
        for choice in itertools.product(*options):
            placed: dict = {}  # where each chosen branch's anyOf stands -> the branches
            for p, b in zip(spread, choice):
                placed.setdefault(any_of_at[id(p)], []).append(b)
            ordered = self._in_text_order(merged, parts, skipped, placed, ptr)
            out.append(({"allOf": [merged, *choice, *rest]} if ordered is None else {"allOf": [ordered, *rest]},
                        ptr))
        return out

    def _branch_keys_inside(self, merged, parts, path) -> bool:
        """Whether ``merged``'s ``anyOf`` (from one of the ``allOf`` parts) has
        branches naming keys that the text lists before keys of a later part, so
        that its branches, joined to ``merged`` after it, would write them too late
        (``_in_text_order``)."""
        one_of_them = merged.get("anyOf") if isinstance(merged, dict) else None
        at = next((i for i, p in enumerate(parts) if isinstance(p, dict) and p.get("anyOf") is one_of_them), None)
        if one_of_them is None or at is None or at == len(parts) - 1:
            return False
        before, later = [], []
        for p in parts[: at + 1]:
            before = _key_order_with(before, p)
        for p in parts[at + 1 :]:
            later = _key_order_with(later, p)
        if not set(later) - set(before):
            return False
        ptr = json_pointer(path, "allOf")
        for b, _ in self.branches({"anyOf": one_of_them}, "anyOf", ptr):
            names: list = []
            for q in self._all_of_parts({"allOf": [b]}, ptr, []):
                names = _key_order_with(names, q)
            if set(names) - set(before):
                return True
        return False

    def _in_text_order(self, merged, parts, skipped, placed, ptr):
        """``merged`` merged with the chosen branches (``placed``: lists of them by
        the index of the part whose ``anyOf`` they come from, None where none of
        the parts holds it: a ``not`` made a union, say), its keys in
        the order the schema text gives them: a branch's keys where its ``anyOf``
        stands among the parts, not after every merged part's (``allOf [{match},
        {anyOf [{devices}, {device}]}, {platforms}]`` writes ``match``, ``devices``,
        ``platforms``). None where a branch does not merge by keywords (the caller
        then joins them in an ``allOf``, the branch's keys last)."""
        got, order = merged, []
        for i, p in [*enumerate(parts), (None, None)]:
            branch_first = p is not None and i in placed and listed_before_properties(p, "anyOf")
            if p is not None and id(p) not in skipped and not branch_first:
                order = _key_order_with(order, p)
            for q in self._all_of_parts({"allOf": placed[i]}, ptr, []) if i in placed else ():
                got, order = merge(got, q), _key_order_with(order, q)
                if not isinstance(got, dict):
                    return None
            if branch_first:
                order = _key_order_with(order, p)
        props = got.get("properties")
        if isinstance(props, dict) and list(props) != order[: len(props)]:
            listed = set(order)
            keys = [n for n in order if n in props] + [n for n in props if n not in listed]
            got = {**got, "properties": {n: props[n] for n in keys}}
        return got

    def one_of(self, nfa, schema, path, depth):
        """Exactly one branch. In order of preference:

        - when no value can match two branches, their plain union (lazy);
        - when the branches that overlap have negations that are unions of schemas
          (``conditional.negation``), the union of each branch joined with the
          negation of each branch it overlaps (merged by keywords: no algebra, the
          branch's own key order);
        - split by JSON type where some branch allows no objects;
        - otherwise each branch minus (supersets of) the others it is not shown apart
          from: only the branches whose negations of the others are not unions,
          where some are.

        In over mode: split by JSON type where some branch allows no objects (each
        part a superset), else the union of the branches.

        Raises:
            UnsatisfiableSchemaError: no value satisfies exactly one branch.
            ApproximationLimitError: every branch was emptied only by subtracting
                supersets (valid values may exist).
        """
        branches = self.branches(schema, "oneOf", path)
        ptr = json_pointer(path, "oneOf")
        alone = range(len(branches))  # the branches left to subtraction
        exact = []
        apart: set[tuple[int, int]] = set()
        if self.over:
            # Split by type, a tighter superset than the union of the branches: where
            # one branch takes every value of a type, the others' values of that type
            # are out (``oneOf [{}, {"type": "string"}]`` holds no string).
            parts = self._one_of_by_type(schema, branches, path)
            if parts is not None:
                got = self.union_unless_too_large(nfa, parts, depth, "no value satisfies exactly one oneOf branch", ptr)
                if got is not None:
                    return got
        else:
            apart = disjoint_pairs(self, branches, depth)
            n = len(branches)
            # Either way the parts stay NFA fragments: lazy, any key order where asked
            # and, in grammar mode, with their recursive $ref calls (algebra holds neither).
            if len(apart) == n * (n - 1) // 2:
                parts, why = branches, "no oneOf branch can be satisfied"
            else:
                unions = self._one_of_as_unions(schema, branches, apart, path)
                parts = [p for u in unions for p in u] if None not in unions else self._one_of_by_type(
                    schema, branches, path)
                why = "no value satisfies exactly one oneOf branch"
                if parts is None:
                    alone = [i for i, u in enumerate(unions) if u is None]
                    exact = [p for u in unions if u is not None for p in u]
            if parts is not None:
                got = self.union_unless_too_large(nfa, parts, depth, why, ptr)
                if got is not None:
                    return got
        frags = []
        approximated = False  # a branch emptied only by subtracting supersets
        if exact:
            try:
                got = self.union_unless_too_large(nfa, exact, depth, "no branch is left", ptr)
            except UnsatisfiableSchemaError:
                got = ()  # none of these branches has a value of its own
            except ApproximationLimitError:
                got, approximated = (), True
            if got is None:  # too large for the NFA: every branch by subtraction
                alone = range(len(branches))
            elif got:
                frags.append(got)
        for i in alone:
            try:
                only, inexact = self.algebra(lambda: self._branch_alone(branches, i, apart, depth))
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
            raise nothing_left_error("no value satisfies exactly one oneOf branch", ptr, approximated)
        return nfa.union(frags)

    def _branch_alone(self, branches, i: int, apart: set, depth: int) -> tuple[DFA | None, bool]:
        """``oneOf`` branch ``i`` minus (supersets of) the others it is not shown
        ``apart`` from, None when nothing is left; and whether a superset was
        subtracted (over mode: the branch itself). A branch apart from i removes
        nothing of it, and its superset might (of 45 noise-module branches told apart
        by a ``type`` pattern, one lies inside another's superset)."""
        b, ptr = branches[i]
        only, inexact = self.dfa(b, ptr, depth), False
        if not self.over:
            for j, (other, optr) in enumerate(branches):
                if i != j and (max(i, j), min(i, j)) not in apart:
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
        [inline-package, array of them]``, where ``inline-package`` says no type, is
        otherwise a 0.4 s subtraction of whole objects.) None when every branch allows objects
        and none takes every object (the objects' part, the costly one, would keep
        every branch and the other parts only add work; where one branch takes every
        object that part is one subtraction, where two do it is empty: tye's
        services are ``oneOf [executable, image, dockerFile, project]``, where
        ``image`` lists two keys with any values), or when ``schema`` already names
        one type."""
        if isinstance(schema.get("type"), str):
            return None
        allowed = []
        for b, ptr in branches:
            view = self.object_view(b, ptr)
            kinds = set(TYPES) if view is None else set(view[0])
            allowed.append({"number" if k == "integer" else k for k in kinds})
        ptr = json_pointer(path, "oneOf")
        if all("object" in a for a in allowed) and not any(self._takes_every(b, "object", ptr) for b, _ in branches):
            return None
        parts = []
        for t in ("null", "boolean", "number", "string", "array", "object"):
            these = [(b, bptr) for (b, bptr), kinds in zip(branches, allowed) if t in kinds]
            every = [b for b, _ in these if self._takes_every(b, t, ptr)] if len(these) > 1 else []
            if len(these) == 1:
                parts.append(({"allOf": [{"type": t}, these[0][0]]}, these[0][1]))
            elif len(every) == 1:
                # A branch every value of type t satisfies (an untyped object schema,
                # for arrays): exactly one holds where none of the others does. One
                # subtraction, not one per branch.
                rest = [(b, bptr) for b, bptr in these if b is not every[0]]
                parts.append(({"type": t, "not": {"anyOf": self.placed(rest)}}, path))
            elif these and not every:
                parts.append(({"type": t, "oneOf": self.placed(these)}, path))
            # Two branches every value of type t satisfies: none of those values is valid.
        return parts

    def _takes_every(self, branch, t: str, path: str) -> bool:
        """Whether every JSON value of type ``t`` satisfies ``branch``: it says nothing
        that applies to that type (no keyword at all, or only other types' keywords,
        annotations and keywords that constrain nothing, ``_idle_keywords``), and its
        ``type``, if any, names ``t``."""
        try:
            branch = defined_keywords(self.deref(branch, path))  # ("instanceof": constrains nothing)
        except SchemaError:
            return False
        if branch is True:
            return True
        if not isinstance(branch, dict):
            return False
        types = branch.get("type", t)
        if t not in (types if isinstance(types, list) else [types]):
            return False
        return not set(branch) - {"type"} - ANNOTATIONS - OTHER_TYPES_KEYWORDS[t] - _idle_keywords(branch)

    def _one_of_as_unions(self, schema, branches, apart, path) -> list[list | None]:
        """Per branch i, ``(schema, pointer)`` parts whose union is exactly the values
        of branch i and of no other branch: branch i joined with one part of the
        negation of every branch j it is not shown ``apart`` from, for each choice of
        parts (``choices_with``). None for a branch where such a negation is not a
        union of schemas or the choices pass ``MAX_ONE_OF_CHOICES``."""
        raw = [self._merged_branch(b, ptr) for b, ptr in self.listed(schema, "oneOf", path)]
        negations: dict[tuple, list | None] = {}
        out: list[list | None] = []
        for i, (b, ptr) in enumerate(branches):
            view = self.object_view(b, ptr)
            # A closed branch's objects have only its listed keys: a closed branch j
            # then fails on one of those it does not list (``negation``).
            keys = [k for k, v in view[2].items() if v is not False] if view is not None and view[3] is False else None
            choices: list[dict] | None = [{}]
            for j in range(len(branches)):
                if j == i or (max(i, j), min(i, j)) in apart:
                    continue
                key = (j, None if keys is None else tuple(keys))
                if key not in negations:
                    negations[key] = negation(defined_keywords(raw[j]), self._defined_deref(path), keys)
                if negations[key] is None:
                    choices = None
                    break
                choices = choices_with(choices, [p for p in negations[key] if not excluded_by(view, p)])
                if len(choices) > MAX_ONE_OF_CHOICES:
                    choices = None
                    break
            out.append(None if choices is None else
                       [({"allOf": [b, *c.values()]} if c else b, ptr) for c in choices])
        return out

    def _merged_branch(self, branch, path):
        """``branch`` with its ``$ref`` followed and its ``allOf`` merged where every
        part merges (vzlogger's meters: ``allOf [{"$ref": meter}, {protocol and its
        keys}]`` negates as the object it is)."""
        branch = self.deref(branch, path)
        if isinstance(branch, dict) and "allOf" in branch:
            try:
                merged, leftovers = self.merged_all_of(branch, path)
            except SchemaError:
                return branch
            if not leftovers:
                return merged
        return branch

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
        """``$ref`` following for ``conditional``: the schema referred to, without
        keywords no draft defines."""
        return lambda s: defined_keywords(self.deref(s, path))

    def _logic_as_union(self, schema, path) -> list | None:
        """A schema whose first logic keyword is ``not`` or ``if``, as the schemas of
        a union (see ``conditional``; errors inside them point at ``path``), or
        None when it is not one or its condition cannot be negated that way."""
        if not isinstance(schema, dict) or not ("not" in schema or "if" in schema):
            return None
        if any(k in schema for k in EARLIER_KEYWORDS) or presence_keys(schema) is not None:
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
                result, approximated = self.subtract(result, schema["not"], json_pointer(path, "not"), depth)
                if result is None:
                    raise EmptyLanguageError("not")
            if "if" in schema:
                cond = json_pointer(path, "if")
                parts = []
                try:  # the "then" side: the condition holds
                    branch = self.intersection(result, self.dfa(schema["if"], cond, depth))
                    if "then" in schema:
                        branch = self.intersection(branch, self.dfa(schema["then"], json_pointer(path, "then"), depth))
                    parts.append(branch)
                except (EmptyLanguageError, UnsatisfiableSchemaError):
                    pass
                try:  # the "else" side: the condition fails
                    branch, superset = self.subtract(result, schema["if"], cond, depth)
                    approximated |= superset
                    if branch is not None:
                        if "else" in schema:
                            branch = self.intersection(branch, self.dfa(schema["else"], json_pointer(path, "else"), depth))
                        parts.append(branch)
                except (EmptyLanguageError, UnsatisfiableSchemaError):
                    pass
                if not parts:
                    raise EmptyLanguageError("if/then/else")
                result = parts[0] if len(parts) == 1 else union_dfa(parts, self.algebra_limit(MAX_DFA_STATES))
        except EmptyLanguageError:
            raise nothing_left_error("not/if/then/else leave no valid value", path, approximated) from None
        return result


def _merged_parts(parts: list) -> tuple:
    """``(merged, leftovers)``: the parts merged by keywords in order, and those that
    would not merge exactly."""
    merged, leftovers = {}, []
    for p in parts:
        m = merge(merged, p)
        if m is None:
            leftovers.append(p)
        else:
            merged = m
    return merged, leftovers


def _key_order_with(order: list, part) -> list:
    """The key order after merging ``part`` into keys listed in ``order``, as
    ``merge.merge`` orders ``properties``."""
    names = list(part["properties"]) if isinstance(part, dict) and isinstance(part.get("properties"), dict) else []
    known = set(order)
    if known < set(names):
        return names
    return order + [n for n in names if n not in known]


def _idle_keywords(schema: dict) -> set:
    """The keywords of ``schema`` whose value constrains nothing: ``properties`` or
    ``patternProperties`` whose schemas all take every value, ``required: []``, an
    ``additionalProperties`` / ``items`` that takes every value."""
    every = lambda v: v is True or v == {}  # noqa: E731
    idle = set()
    for k in ("properties", "patternProperties"):
        if isinstance(schema.get(k), dict) and all(every(v) for v in schema[k].values()):
            idle.add(k)
    for k in ("additionalProperties", "items", "additionalItems"):
        if k in schema and every(schema[k]):
            idle.add(k)
    if schema.get("required") == []:
        idle.add("required")
    return idle
