"""Which ``oneOf`` branches no value satisfies together, shown as cheaply as can be.

``oneOf`` is a plain (lazy) union where its branches are pairwise disjoint, so each
pair is looked at, cheapest proof first::

    types          string vs object, null vs number ............... no automaton
    keys           a key one branch requires, whose values cannot agree
                   (types, enum values, small witnesses; else the values'
                   superset automata); a union branch: each of its branches
    witness        a sampled value valid under both: they overlap, stop
    supersets      the whole branches' superset automata, intersected

Only the last may take seconds (a branch of six large objects, a 1024-character
string's counter); the others are validator calls and dictionary look-ups. A pair
not shown apart is handled by ``SchemaCompiler.one_of`` (negations or subtraction).
Each function takes the ``SchemaCompiler`` ``c`` whose branches these are.
"""

from __future__ import annotations

from guided.errors import ApproximationLimitError, EmptyLanguageError, RegexError, SchemaError, UnsatisfiableSchemaError
from guided.fsm.dfa import DFA
from guided.fsm.ops import is_empty_intersection
from guided.grammars.json_schema.keywords import scalar_kinds

from .presence import MAX_PRESENCE_KEYS, holds, presence_only
from .witness import listed_values, sample, witnesses

#: Most sub-branches of unions looked at to show two ``oneOf`` branches apart by keys.
MAX_APART_PAIRS = 64
#: Most levels of key values looked into to tell two objects apart by their keys.
MAX_APART_NESTING = 3
#: Most values of an ``enum`` checked one by one against another schema.
MAX_LISTED_WITNESSES = 64


def disjoint_pairs(c, branches, depth) -> set[tuple[int, int]]:
    """The pairs ``(i, j)``, ``i > j``, of ``oneOf`` branches that no value matches
    both, each tried in the order of the module docstring: by types or keys
    (``"kind": {"const": "a"}`` against ``{"const": "b"}``, a string against an
    object), unless a sampled value shows an overlap, and last by disjoint
    supersets of the whole branches.

    Args:
        c: the ``SchemaCompiler`` whose branches these are.
        branches: ``(schema, pointer)`` per branch (``SchemaCompiler.branches``).
        depth: the nesting depth of the ``oneOf``.

    Returns:
        The pairs shown apart; a pair left out may still be disjoint.

    Example::

        >>> from guided.grammars.json_schema import SchemaCompiler
        >>> c = SchemaCompiler({}, "compact")
        >>> schema = {"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "number", "minimum": 0}]}
        >>> sorted(disjoint_pairs(c, c.branches(schema, "oneOf", "#"), 0))
        [(1, 0), (2, 0)]
    """
    views = [c.object_view(b, ptr) for b, ptr in branches]
    supersets: dict[int, DFA | None] = {}

    def superset(i):
        if i not in supersets:
            b, ptr = branches[i]
            try:
                supersets[i] = c.negated_dfa(b, ptr, depth)
            except (UnsatisfiableSchemaError, ApproximationLimitError, EmptyLanguageError):
                supersets[i] = None
        return supersets[i]

    apart = set()
    for i in range(len(branches)):
        for j in range(i):
            if _apart_by_keys(c, branches[i], branches[j], views[i], views[j], depth):
                apart.add((i, j))
                continue
            if _overlap_shown(c, branches[i][0], branches[j][0]):
                continue
            si, sj = superset(i), superset(j)
            if si is not None and sj is not None and is_empty_intersection(si, sj):
                apart.add((i, j))
    return apart

def _apart_by_keys(c, a, b, view_a, view_b, depth, budget: list | None = None, nest: int = 0) -> bool:
    """Whether the ``(schema, pointer)`` branches ``a`` and ``b`` are shown to
    share no value without their supersets: by JSON type, by a discriminating
    key (``_discriminated``), or, where one is itself a union (``anyOf`` /
    ``oneOf``), by each of its branches being apart from the other. (Composer's
    ``oneOf [repository, {"additionalProperties": false-only}]``, where
    ``repository`` is six kinds of object, each with its own ``type`` tag, takes
    0.6 s to tell apart by supersets.) ``budget`` bounds the pairs looked at, and
    ``nest`` counts the key values this looks into (``_discriminated``)."""
    budget = [MAX_APART_PAIRS] if budget is None else budget
    if types_apart(view_a, view_b) or _discriminated(c, view_a, view_b, depth, budget, nest) \
            or _presence_apart(c, a[0], b[0], view_a, view_b):
        return True
    for this, that, view_that in ((a, b, view_b), (b, a, view_a)):
        parts = _alternatives(c, *this)
        if parts is None or len(parts) > budget[0]:
            continue
        budget[0] -= len(parts)
        if all(_apart_by_keys(c, p, that, c.object_view(*p), view_that, depth, budget, nest) for p in parts):
            return True
    return False

def _alternatives(c, schema, path) -> list | None:
    """The ``(schema, pointer)`` branches of a schema that is a union (one of
    ``anyOf`` / ``oneOf``, each branch joined with the keywords beside it); None
    for any other schema. A ``oneOf``'s values are among its branches' too."""
    try:
        schema = c.deref(schema, path)
    except SchemaError:
        return None
    if not isinstance(schema, dict):
        return None
    kinds = [k for k in ("anyOf", "oneOf") if k in schema]
    if len(kinds) != 1 or "allOf" in schema:
        return None
    try:
        return c.branches(schema, kinds[0], path)
    except SchemaError:
        return None

def _discriminated(c, a, b, depth, budget: list, nest: int = 0) -> bool:
    """Two views (one of them object-only, so that common values are objects) that
    list a key with disjoint value schemas, required by at least one of them: an
    object of the other branch either lacks the key
    (failing the one that requires it) or has a value that cannot satisfy both.
    (The ABI schemas' ``"type": {"enum": ["event"]}``, optional in one branch.)
    Values that are objects are told apart by their own keys the same way, up to
    ``MAX_APART_NESTING`` levels down, before any superset automaton: two rule
    kinds whose ``to`` objects differ by a key one requires and the other's
    ``additionalProperties: false`` forbids (dependency-cruiser's rules: 0.13 s by
    supersets)."""

    # Values of both are objects when one side allows objects only (the other's key
    # keywords then apply to all of them; ``field-rule`` in tree-sitter's grammar
    # schema says no ``type`` at all).
    if a is None or b is None or "object" not in a[0] or "object" not in b[0] or {"object"} not in (a[0], b[0]):
        return False

    def value_schema(view, key):  # None: patternProperties may govern the key
        return view[2][key] if key in view[2] else view[3]

    # Scalar values first (the usual tags, and cheap): a container's superset may
    # take seconds to build. A fixed order, too: set order varies per process.
    keys = sorted(a[1] | b[1], key=lambda k: (scalar_kinds(value_schema(a, k)) is None
                                              or scalar_kinds(value_schema(b, k)) is None, k))
    for key in keys:
        sa, sb = value_schema(a, key), value_schema(b, key)
        if sa is False or sb is False:
            return True  # one side requires the key, and one forbids it (or is empty)
        if sa is None or sb is None or sa is True or sb is True or sa == {} or sb == {}:
            continue  # unknown, or any value: nothing to tell apart
        quick = _values_apart(c, sa, sb)
        if quick is not None:
            if quick:
                return True
            continue
        if nest < MAX_APART_NESTING and _objects_apart(c, sa, sb, depth, budget, nest + 1):
            return True
        try:
            va = c.negated_dfa(sa, "#", depth + 1)
            vb = c.negated_dfa(sb, "#", depth + 1)
        except (SchemaError, RegexError):  # unprovable here: the subtraction decides
            continue
        if is_empty_intersection(va, vb):
            return True
    return False

def _presence_apart(c, a, b, view_a, view_b) -> bool:
    """Two schemas whose common values are objects (one allows objects only) and
    whose conditions on which keys are present (``required``, keys set to
    ``false``, and ``not`` / ``anyOf`` / ``oneOf`` of those, through ``allOf`` and
    ``$ref``) hold together for no set of keys: JSON-RPC's success (``result``
    required) and error (``error`` required), both under ``not`` both. Other
    keywords are left out, which only widens each side."""
    if view_a is None or view_b is None or "object" not in view_a[0] or "object" not in view_b[0] \
            or {"object"} not in (view_a[0], view_b[0]):
        return False
    nodes_a, nodes_b = _presence_nodes(c, a), _presence_nodes(c, b)
    named = sorted({k for n in nodes_a + nodes_b for k in _named_keys(n)})
    if not nodes_a or not nodes_b or len(named) > MAX_PRESENCE_KEYS:
        return False
    for mask in range(1 << len(named)):
        present = {k for i, k in enumerate(named) if mask >> i & 1}
        if all(holds(n, present) for n in nodes_a + nodes_b):
            return False
    return True

def _presence_nodes(c, schema, depth: int = 0) -> list:
    """The presence conditions ``schema`` imposes on objects, as ``presence``
    nodes (``holds`` reads them), gathered through ``allOf`` and ``$ref``."""
    try:
        schema = c.deref(schema, "#")
    except SchemaError:
        return []
    if schema is False:
        return [False]
    if not isinstance(schema, dict) or depth > MAX_APART_NESTING:
        return []
    out = []
    req = schema.get("required")
    if isinstance(req, list) and req and all(isinstance(k, str) for k in req):
        out.append({"required": req})
    props = schema.get("properties")
    if isinstance(props, dict):
        out.extend({"not": {"required": [k]}} for k, v in props.items() if v is False)
    for key in ("not", "anyOf", "oneOf"):
        if key not in schema:
            continue
        subs = [schema[key]] if key == "not" else schema[key]
        if isinstance(subs, list) and subs and all(presence_only(s, []) for s in subs):
            out.append({key: schema[key]})
    for part in schema.get("allOf", []) if isinstance(schema.get("allOf"), list) else []:
        out.extend(_presence_nodes(c, part, depth + 1))
    return out

def _named_keys(node) -> list[str]:
    named: list[str] = []
    presence_only(node, named)
    return named

def _objects_apart(c, a, b, depth, budget: list, nest: int) -> bool:
    """``_apart_by_keys`` for two key values (schemas, not branches)."""
    try:
        a, b = c.deref(a, "#"), c.deref(b, "#")
    except SchemaError:
        return False
    return _apart_by_keys(c, (a, "#"), (b, "#"), c.object_view(a, "#"), c.object_view(b, "#"), depth + 1, budget, nest)

def _overlap_shown(c, a, b) -> bool:
    """Whether a sampled value of either schema (``witness.sample``) or a small
    value of a simple kind (branches without ``type`` take any scalar) is valid under
    both, by the reference validator: then they overlap, and no superset automaton
    needs to show it."""
    def deref(s):
        try:
            return c.deref(s, "#")
        except SchemaError:
            return None

    candidates = []
    for one in (a, b):
        try:
            candidates.append(sample(one, deref))
        except RecursionError:
            continue
    return any(c.is_valid(v, a) and c.is_valid(v, b) for v in candidates + witnesses(a, b))


def _values_apart(c, a, b) -> bool | None:
    """Whether no value satisfies both schemas, where that is cheap to decide, else
    None (superset automata decide). Schemas of no common JSON type are apart; a
    listed ``enum`` / ``const`` is apart from the other schema when none of its
    values is valid there (by the reference validator); any two schemas are not
    apart when a small witness (an empty container, a number, a string of a
    length both bounds name...) is valid under both. A ``maxLength: 1024``
    string's superset, a long counter, takes ~0.1 s to build."""
    try:
        a, b = c.deref(a, "#"), c.deref(b, "#")
    except SchemaError:
        return None
    if types_apart(c.object_view(a, "#"), c.object_view(b, "#")):
        return True
    for one, other in ((a, b), (b, a)):
        listed = _listed_by_some_part(c, one)
        if listed is not None and len(listed) <= MAX_LISTED_WITNESSES:
            return not any(c.is_valid(v, one) and c.is_valid(v, other) for v in listed)
    for v in witnesses(a, b):
        if c.is_valid(v, a) and c.is_valid(v, b):
            return False
    return None

def _listed_by_some_part(c, schema) -> list | None:
    """Values that include all of ``schema``'s: those it lists, or, for an ``allOf``,
    the shortest list among its parts (a value of the whole is one of each part's).
    A branch merged with the keywords beside it restricts a tag there:
    ``{"allOf": [{"enum": [twelve commands]}, {"enum": ["close"]}]}`` (Rc2's messages,
    whose last three branches name commands the outer enum lacks: empty branches)."""
    listed = listed_values(schema)
    if listed is not None or not isinstance(schema, dict) or not isinstance(schema.get("allOf"), list):
        return listed
    lists = []
    for part in schema["allOf"]:
        try:
            got = listed_values(c.deref(part, "#"))
        except SchemaError:
            continue
        if got is not None:
            lists.append(got)
    return min(lists, key=len) if lists else None


def types_apart(a, b) -> bool:
    """Two ``object_view``s whose values have no JSON type in common (a string
    against null: no superset automaton, which for a long ``maxLength`` string is a
    counter of thousands of states, is needed to tell). Integers are numbers."""
    if a is None or b is None:
        return False
    ta, tb = (set(t) | {"integer"} if "number" in t else set(t) for t in (a[0], b[0]))
    return not ta & tb
