"""Recursive JSON Schemas through the grammar engine, checked against jsonschema."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from json_helpers import compact, mutations, ordered, reference_validator

import guided
from guided.grammar_matcher import GrammarGuide
from guided.grammars.grammar_index import Readings
from guided.grammars.json_schema.recursive import compile_recursive_schema

TREE = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 8}, "kids": {"type": "array", "items": {"$ref": "#"}}},
    "required": ["name"],
    "additionalProperties": False,
}

LINKED_LIST = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {"value": {"type": "integer", "minimum": 0}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
            "required": ["value", "next"],
        }
    },
    "$ref": "#/$defs/node",
}

# Mutual recursion, through additionalProperties and arrays, with a scalar base case.
EXPR = {
    "$defs": {
        "expr": {"anyOf": [{"type": "number"}, {"$ref": "#/$defs/call"}]},
        "call": {
            "type": "object",
            "properties": {"op": {"enum": ["+", "*", "neg"]}, "args": {"type": "array", "items": {"$ref": "#/$defs/expr"}, "minItems": 1, "maxItems": 3}},
            "required": ["op", "args"],
            "additionalProperties": False,
        },
    },
    "$ref": "#/$defs/expr",
}

JSON_VALUE = {
    "$defs": {
        "value": {
            "anyOf": [
                {"type": ["null", "boolean", "number", "string"]},
                {"type": "array", "items": {"$ref": "#/$defs/value"}},
                {"type": "object", "additionalProperties": {"$ref": "#/$defs/value"}},
            ]
        }
    },
    "$ref": "#/$defs/value",
}

# An open value ({}) at any depth inside a recursive schema is a rule of its own.
OPEN_LEAF = {
    "type": "object",
    "properties": {"data": {}, "children": {"type": "array", "items": {"$ref": "#"}}},
}

SCHEMAS = {"tree": TREE, "linked_list": LINKED_LIST, "expr": EXPR, "json_value": JSON_VALUE, "open_leaf": OPEN_LEAF}

VALID = {
    "tree": [{"name": "a"}, {"name": "r", "kids": [{"name": "b", "kids": [{"name": "c", "kids": []}]}, {"name": "d"}]}],
    "linked_list": [{"value": 1, "next": None}, {"value": 1, "next": {"value": 2, "next": {"value": 0, "next": None}}}],
    "expr": [3, {"op": "+", "args": [1, {"op": "neg", "args": [2.5]}]}, {"op": "*", "args": [{"op": "+", "args": [1, 2, 3]}]}],
    "json_value": [None, [1, [2, [3, {"a": [True, "x"]}]]], {"k": {"k": {"k": {}}}}],
    "open_leaf": [{}, {"data": {"any": [1, {"deep": [[[]]]}]}, "children": [{"data": 1, "children": [{}]}]}],
}


def matches(guide, text: bytes) -> bool:
    """Byte-level acceptance (independent of how a tokenizer splits the text)."""
    index = guide.index
    state = index.consume(index.initial(), text)
    return state is not None and index.can_end(state)


@pytest.fixture(scope="module", params=["shared", "per point"])
def guides(smollm2_vocab, request):
    """Each point's terminals read through its rule's one compiled construction
    (``SharedPointTable``), and through a Python construction of the point's own
    (``PointTable``, without numba)."""
    from guided.fsm.kernels import AVAILABLE
    from guided.grammars import terminal_tables

    if request.param == "shared" and not AVAILABLE:
        pytest.skip("numba is not installed")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(terminal_tables, "COMPILED_AVAILABLE", request.param == "shared")
        # Not through guided.compile: its cache would hand the second param the first's guides.
        guides = {name: GrammarGuide(compile_recursive_schema(s, "compact"), smollm2_vocab)
                  for name, s in SCHEMAS.items()}
    table = type(guides["tree"].index.lexer.table(0)).__name__
    assert table == ("SharedPointTable" if request.param == "shared" else "PointTable")
    return guides


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_agrees_with_jsonschema(guides, name):
    schema, guide = SCHEMAS[name], guides[name]
    assert isinstance(guide, GrammarGuide)
    validator = reference_validator(schema)
    rng = random.Random(name)
    for value in VALID[name]:
        assert validator.is_valid(value)
        assert matches(guide, compact(ordered(value, schema))), value
        for m in mutations(value, rng, n=20):
            text = compact(ordered(m, schema))
            if matches(guide, text):
                assert validator.is_valid(m), f"invalid instance accepted: {text!r}"
            elif validator.is_valid(m):
                pytest.fail(f"valid mutated instance rejected: {text!r}")


def test_deep_nesting_and_token_level_stepping(guides, smollm2_tokenizer):
    guide = guides["linked_list"]
    value = None
    for i in range(40):
        value = {"value": i, "next": value}
    text = compact(value).decode()
    m = guide.matcher()
    assert m.accept_tokens(smollm2_tokenizer.encode(text, add_special_tokens=False))
    assert m.accept_token(guide.eos_token_ids[0])


def test_flexible_whitespace(smollm2_vocab):
    guide = guided.compile(guided.JsonSchema(TREE), smollm2_vocab)
    doc = json.dumps({"name": "a", "kids": [{"name": "b"}]}, indent=2).encode()
    assert matches(guide, doc)
    assert not matches(guide, b'{"name": "a",\n\n\n\n "kids": []}')  # runaway newlines stay bounded


def test_one_of_with_disjoint_branches_is_a_union(smollm2_vocab):
    """Branches that no value can match twice (by their supersets) keep their calls."""
    schema = {"$defs": {"n": {"oneOf": [{"type": "object", "properties": {"x": {"$ref": "#/$defs/n"}}}, {"type": "string"}]}},
              "$ref": "#/$defs/n"}
    guide = guided.compile(guided.JsonSchema(schema, whitespace="compact"), smollm2_vocab)
    validator = reference_validator(schema)
    for value in ["s", {}, {"x": {"x": "deep"}}, {"x": 1}, [], {"x": {"x": {"x": None}}}]:
        assert matches(guide, compact(value)) == validator.is_valid(value), value


# Where one alternative's lexeme ends at a call and another's reads on: under longest
# match only the longer reading was kept (MaskBench wp_105, o55244 and 7 more).
_CLOSED = {"properties": {"type": {"type": "integer"}}, "additionalProperties": False}
ENDS_AT_A_CALL = {
    # The open branch's lexeme ends at {"type": (its value is a call of "any
    # value"); the closed branch's reads on through the integer.
    "open_beside_closed": ({"properties": {"p": {"anyOf": [_CLOSED, {"type": "object"}]}, "r": {"items": {"$ref": "#"}}}},
                           [{"p": {"type": 1, "x": 2}}, {"p": {"type": 12}}, {"r": [{"p": {"type": [1, {"a": 2}]}}]}],
                           [{"p": {"type": 1, "x": 2}}]),
    # o55244 cut down: a oneOf branch built by algebra is one terminal reading past
    # {, beside an object whose pairs call rules.
    "one_of_required": ({"oneOf": [{"required": ["p"]},
                                   {"additionalProperties": False, "properties": {"c": {}, "r": {"items": {"$ref": "#"}}}}]},
                        [{"c": 1}, {"p": 1, "c": 2}, {"r": [{"c": 1}, {"p": {}}]}, {"r": [{"r": []}]}],
                        [{"r": [{"c": 1}, {"p": {}}]}]),
}


# The ways a lexer state's token view is walked (``grammars.grammar_index``): a small
# class trie level by level; the byte trie's live pairs in numpy, or going on over
# whole levels; compiled, depth first (``fsm.kernels.units``).
walk_modes = pytest.mark.parametrize("class_trie_max, dense_from, compiled",
                                     [(10**6, 0, False), (0, 10**9, False), (0, 0, False), (0, 0, True)],
                                     ids=["class_trie_levels", "byte_trie_live_pairs", "byte_trie_then_levels",
                                          "byte_trie_compiled_depth_first"])


def _walk_mode(monkeypatch, class_trie_max, dense_from, compiled):
    import guided.grammars.grammar_index as gi
    from guided.fsm.kernels import AVAILABLE

    if compiled and not AVAILABLE:
        pytest.skip("numba is not installed")
    monkeypatch.setattr(gi, "CLASS_TRIE_MAX_CLASSES", class_trie_max)
    monkeypatch.setattr(gi, "_DENSE_FROM", dense_from)
    monkeypatch.setattr(gi, "COMPILED_AVAILABLE", compiled)


@pytest.mark.parametrize("key_order", ["schema", "any"])
@pytest.mark.parametrize("name", sorted(ENDS_AT_A_CALL))
def test_a_lexeme_that_may_end_or_read_on_is_read_both_ways(smollm2_vocab, name, key_order):
    """A JSON Schema grammar's lexeme ends wherever its terminals accept, not only
    where it cannot go on (``CompiledGrammar.every_end``): each reading is followed,
    so documents valid by the alternative whose lexeme ends first are accepted, and
    the matcher agrees with jsonschema on them and on their mutations."""
    schema, values, _ = ENDS_AT_A_CALL[name]
    guide = guided.compile(guided.JsonSchema(schema, whitespace="compact", key_order=key_order), smollm2_vocab)
    assert isinstance(guide, GrammarGuide)
    validator = reference_validator(schema)
    rng = random.Random(name)
    for value in values:
        assert validator.is_valid(value)
        assert matches(guide, compact(value)), value
        for m in mutations(value, rng, n=30):
            assert matches(guide, compact(m)) == validator.is_valid(m), m


@walk_modes
def test_every_end_masks_are_the_tokens_the_readings_accept(smollm2_vocab, smollm2_tokenizer, class_trie_max,
                                                           dense_from, compiled, monkeypatch):
    """With every lexeme end kept, a token may also leave the lexeme where it reads
    on past an accepting state, and so may the rest of a token read from the next
    lexeme: every way of walking a lexer state's view gives, at each step of
    documents that need it, exactly the tokens that stepping the readings accepts."""
    _walk_mode(monkeypatch, class_trie_max, dense_from, compiled)
    for schema, _, docs in ENDS_AT_A_CALL.values():
        guide = GrammarGuide(compile_recursive_schema(schema, "compact"), smollm2_vocab)  # not the cached one
        index = guide.index
        for value in docs:
            m = guide.matcher()
            for t in smollm2_tokenizer.encode(compact(value).decode(), add_special_tokens=False) + [None]:
                state = m._states[-1]
                want = np.array([index.consume_token(state, x) is not None for x in range(guide.vocab_size)])
                for e in guide.eos_token_ids:
                    want[e] = index.can_end(state)
                got = np.zeros(guide.vocab_size, dtype=bool)
                got[sorted(m.allowed_token_ids())] = True
                assert (got == want).all(), (value, t, np.flatnonzero(got != want)[:10])
                assert t is None or m.accept_token(t)
            assert m.is_accepting()


@walk_modes
def test_token_views_list_every_place_a_token_may_leave_the_lexeme(smollm2_vocab, smollm2_tokenizer, class_trie_max,
                                                                  dense_from, compiled, monkeypatch):
    """With every end kept, a lexer state's token view lists each token at every
    offset where the lexeme read so far accepts and the token reads on (as well as
    where it dies): the places and the rests that stepping its bytes finds, in every
    way of walking the view."""
    _walk_mode(monkeypatch, class_trie_max, dense_from, compiled)
    schema, _, docs = ENDS_AT_A_CALL["open_beside_closed"]
    index = GrammarGuide(compile_recursive_schema(schema, "compact"), smollm2_vocab).index
    lexer, pieces = index.lexer, index.pieces
    states = set()
    for value in docs:  # every lexer state the readings pass, byte by byte
        state = index.initial()
        for b in compact(value):
            readings = state.readings if isinstance(state, Readings) else (state,)
            states |= {lx for _, lx, _ in readings}
            state = index.consume(state, bytes([b]))
    tokens = np.flatnonzero(pieces.token_piece >= 0)
    mid_exits = 0
    for lx in sorted(states):
        row, exits = index._token_units.walk_row(lexer, lx, pieces, mids=True)
        got = {(int(t), a, int(r)) for a, units, rests in exits.groups for t, r in zip(units, rests)}
        want, inside = set(), np.zeros(smollm2_vocab.size, dtype=bool)
        for t in tokens.tolist():
            stays, ends = index._piece_ends(lx, int(pieces.token_piece[t]))
            inside[t] = stays
            want |= {(t, a, rest) for a, rest in ends}
        assert got == want, (lx, sorted(got ^ want)[:5])
        allowed = np.unpackbits(row.view(np.uint8), bitorder="little")[:smollm2_vocab.size].astype(bool)
        assert (allowed == inside).all(), lx
        mid_exits += sum(1 for t, _, _ in want if inside[t])
    assert mid_exits > 0  # tokens that stay inside the lexeme, and may also leave it on the way


def test_recursion_inside_overlapping_one_of_is_named():
    """Overlapping branches that do not negate as schemas (minProperties) need
    automaton algebra, which cannot hold a recursive reference."""
    schema = {"$defs": {"n": {"oneOf": [{"type": "object", "properties": {"x": {"$ref": "#/$defs/n"}}, "minProperties": 1},
                                        {"type": "object", "required": ["y"], "minProperties": 1}]}},
              "$ref": "#/$defs/n"}
    with pytest.raises(guided.RecursiveSchemaError, match="#/\\$defs/n"):
        compile_recursive_schema(schema, "compact")


def test_recursion_in_the_one_of_branch_that_negates_the_others_as_schemas(smollm2_vocab):
    """The recursive branch is joined with the negation of ``required: [y]`` (no
    algebra); only the other branch, whose negation of ``minProperties`` is no union
    of schemas, is left to subtraction, where a superset of the recursive branch
    (any object with a key) empties it: its values are refused, never a wrong one
    accepted."""
    schema = {"$defs": {"n": {"oneOf": [{"type": "object", "properties": {"x": {"$ref": "#/$defs/n"}}, "minProperties": 1},
                                        {"type": "object", "required": ["y"]}]}},
              "$ref": "#/$defs/n"}
    guide = guided.compile(guided.JsonSchema(schema, whitespace="compact"), smollm2_vocab)
    validator = reference_validator(schema)
    for doc in ({"x": {"z": 1}}, {"x": {"x": {"z": 1}}}, {"z": 1}):
        assert validator.is_valid(doc) and matches(guide, compact(doc)), doc
    for doc in ({}, {"y": 1}, {"x": {"y": 1}}, {"x": {}}, {"x": 5, "y": 1}, {"x": 5}):
        assert not matches(guide, compact(doc)) or validator.is_valid(doc), doc


def test_recursion_inside_overlapping_one_of_of_plain_objects(smollm2_vocab):
    """Branches that only say type / required / properties are joined with the other
    branches' negations (no algebra), so recursion through them compiles. Where a
    negation would hold the recursion itself ("x" is not an n), that part is left out:
    stricter, never looser."""
    schema = {"$defs": {"n": {"oneOf": [{"type": "object", "properties": {"x": {"$ref": "#/$defs/n"}}},
                                        {"type": "object", "required": ["y"]}]}},
              "$ref": "#/$defs/n"}
    guide = guided.compile(guided.JsonSchema(schema, whitespace="compact"), smollm2_vocab)
    validator = reference_validator(schema)
    for doc in ({}, {"x": {}}, {"x": {"x": {}}}, {"x": 5, "y": 1}):
        assert validator.is_valid(doc) and matches(guide, compact(doc)), doc
    for doc in ({"y": 1}, {"x": {"y": 1}}, {"x": {}, "y": 1}, {"x": {"x": {"y": 1}}}, {"x": 5}):
        assert not validator.is_valid(doc) and not matches(guide, compact(doc)), doc


def test_recursion_without_a_base_case_is_unsatisfiable():
    schema = {"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]}
    with pytest.raises(guided.UnsatisfiableSchemaError, match="recursion never ends"):
        compile_recursive_schema(schema, "compact")


def test_indented_layout_is_refused_with_a_reason(smollm2_vocab):
    with pytest.raises(guided.RecursiveSchemaError, match="indent"):
        guided.compile(guided.JsonSchema(TREE, whitespace={"indent": 2}), smollm2_vocab)


def test_generation_outputs_validate(tiny_model, smollm2_tokenizer):
    validator = reference_validator(EXPR)
    finished = 0
    for seed in range(20):
        r = guided.generate(tiny_model, smollm2_tokenizer, "JSON:", guided.JsonSchema(EXPR, whitespace="compact"),
                            max_new_tokens=48, temperature=1.0, seed=seed, chat=False)
        if r.finish_reason != "length":
            finished += 1
            assert validator.is_valid(r.value), r.text
    assert finished >= 10


def test_pydantic_recursive_model(tiny_model, smollm2_tokenizer):
    import pydantic

    class Node(pydantic.BaseModel):
        label: str = pydantic.Field(max_length=6)
        children: list["Node"] = pydantic.Field(max_length=2)

    spec = guided.JsonSchema(Node, whitespace="compact")
    r = guided.generate(tiny_model, smollm2_tokenizer, "Tree:", spec, max_new_tokens=64, temperature=1.0, seed=3, chat=False)
    if r.finish_reason != "length":
        assert isinstance(r.value, Node)
    guide = guided.compile(spec, smollm2_tokenizer)
    assert matches(guide, b'{"label":"a","children":[{"label":"b","children":[]}]}')
    assert not matches(guide, b'{"label":"a","children":[{"label":"b"}]}')


def test_terminal_tables_are_built_as_the_text_reaches_them(smollm2_vocab):
    """Compiling builds one row per point of each rule (is its terminal nonempty?),
    not the subset construction of a pattern times a length counter; the rest is
    built while reading, and the verdicts agree with jsonschema."""
    schema = {
        "type": "object",
        "properties": {"id": {"type": "string", "pattern": "^[a-z][a-z0-9-]*$", "maxLength": 120},
                       "kids": {"type": "array", "items": {"$ref": "#"}}},
        "required": ["id"],
        "additionalProperties": False,
    }
    grammar = compile_recursive_schema(schema, "compact")
    tables = {id(t.table): t.table for t in grammar.terminal_dfas}
    assert sum(t.rows_built for t in tables.values()) <= len(tables)
    guide = GrammarGuide(grammar, smollm2_vocab)
    validator = reference_validator(schema)
    for value in [{"id": "a"}, {"id": "a" * 120}, {"id": "a" * 121}, {"id": "a-b", "kids": [{"id": "x9", "kids": []}]},
                  {"id": "9"}, {"id": "a", "kids": [{"id": "B"}]}, {"id": "q", "kids": [{"id": "r" * 121}]}]:
        assert matches(guide, compact(value)) == validator.is_valid(value), value
    assert sum(t.rows_built for t in tables.values()) > len(tables)


def test_large_counted_arrays_in_a_rule_are_built_as_reached(smollm2_vocab):
    """A rule's large counted repetition without calls (200 patterned ids) is a
    deferred fragment: compiling builds one copy, reading builds the rest, and the
    count stays exact. A repetition whose items call a rule (recursive kids) is
    built whole (the rule's ends, one per call, are fixed before reading), and still
    counts exactly."""
    schema = {
        "type": "object",
        "properties": {
            "ids": {"type": "array", "items": {"type": "string", "pattern": "^[0-9a-f]{24}$"}, "maxItems": 200},
            "kids": {"type": "array", "items": {"$ref": "#"}, "maxItems": 300},
        },
        "additionalProperties": False,
    }
    grammar = compile_recursive_schema(schema, "compact")
    nfa = next(t.table.rule.nfa for t in grammar.terminal_dfas)
    compiled = len(nfa)
    assert compiled < 10_000  # 200 whole copies of the id are ~80k states
    assert nfa.pending
    guide = GrammarGuide(grammar, smollm2_vocab)
    validator = reference_validator(schema)
    one = "0123456789abcdef01234567"
    for value in [{}, {"ids": [one] * 3}, {"ids": [one] * 200}, {"ids": [one] * 201}, {"ids": [one[:-1]]},
                  {"kids": [{"ids": [one] * 150}, {}] * 150}, {"kids": [{}] * 301}, {"kids": [{"ids": [one] * 201}]},
                  {"ids": [one, one.upper()]}]:
        assert matches(guide, compact(value)) == validator.is_valid(value), value
    assert len(nfa) > compiled  # reading built the copies it reached


# Recursive objects with required, optional, pattern and counted keys, for key_order="any".
ANY_ORDER_TREE = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 4}, "size": {"type": "integer"},
                   "kids": {"type": "array", "items": {"$ref": "#"}}, "never": {"not": {}}},
    "patternProperties": {"^x": {"type": "boolean"}},
    "required": ["name"],
    "maxProperties": 3,
    "additionalProperties": False,
}


def _shuffled(value, rng: random.Random):
    """The value with every object's keys in a random order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


@pytest.mark.parametrize("whitespace", ["compact", "flexible"])
def test_any_key_order_in_recursive_schemas_agrees_with_jsonschema(smollm2_vocab, whitespace):
    """key_order="any" reaches objects whose values recurse: every order of their
    keys, at every depth, is judged as jsonschema judges it (each key at most once,
    required keys present, maxProperties counted); schema order refuses the reordered."""
    import itertools

    schema = ANY_ORDER_TREE
    guide = guided.compile(guided.JsonSchema(schema, whitespace=whitespace, key_order="any"), smollm2_vocab)
    ordered_only = guided.compile(guided.JsonSchema(schema, whitespace=whitespace), smollm2_vocab)
    assert isinstance(guide, GrammarGuide)
    validator = reference_validator(schema)
    dump = compact if whitespace == "compact" else (lambda v: json.dumps(v).encode())
    values = {"name": "ab", "size": 3, "kids": [{"size": 1, "name": "c"}], "x1": True, "never": 0}
    docs = [{k: values[k] for k in keys} for n in range(5) for keys in itertools.permutations(values, n)]
    docs += [{"kids": [{"kids": [{"name": "d", "x": False}], "name": "c"}], "name": "a"},
             {"kids": [{"kids": [{"name": "d", "x": 1}], "name": "c"}], "name": "a"},
             {"name": "a", "kids": [{"size": 1}]}, {"name": "a", "name2": 1}, {"xa": True, "xb": False, "name": "n"}]
    rng = random.Random(7)
    reordered = 0
    for doc in docs:
        for value in (doc, _shuffled(doc, rng)):
            valid = validator.is_valid(value)
            assert matches(guide, dump(value)) == valid, dump(value)
            reordered += valid and not matches(ordered_only, dump(value))
    assert reordered > 0
    assert not matches(guide, b'{"name":"a","name":"b"}')  # each key at most once
    assert not matches(guide, b'{"size":1,"size":1,"name":"a"}')


def test_any_key_order_nodes_are_made_as_the_parser_reaches_them(smollm2_vocab):
    """20 optional keys beside a recursive one have 2**20 key sets: the parser asks
    for the node of each key set it reaches, and only those are made."""
    schema = {"type": "object", "properties": {**{f"k{i}": {"type": "integer"} for i in range(20)},
                                               "kids": {"type": "array", "items": {"$ref": "#"}}}}
    grammar = compile_recursive_schema(schema, "compact", key_order="any")
    guide = GrammarGuide(grammar, smollm2_vocab)
    nodes = grammar.cfg.lazy
    assert matches(guide, b'{"k19":1,"kids":[{"k3":2,"k0":1},{}],"k3":2}')
    assert nodes.made <= 8  # {}, {k19}, {k19,kids}, {k19,kids,k3}; {}, {k3}, {k3,k0}; {} again
    assert not matches(guide, b'{"k19":1,"kids":[],"k19":2}')


def test_any_key_order_keeps_a_required_key_that_recurses_forever_out(smollm2_vocab):
    """A key is written only where its value can end: an object that requires a key
    whose value recurses forever is impossible, and an optional such key is left out."""
    endless = {"type": "object", "properties": {"next": {"$ref": "#"}, "a": {"type": "integer"}}, "required": ["next"]}
    with pytest.raises(guided.UnsatisfiableSchemaError, match="recursion never ends"):
        compile_recursive_schema(endless, "compact", key_order="any")
    schema = {"$defs": {"loop": {"type": "object", "properties": {"again": {"$ref": "#/$defs/loop"}}, "required": ["again"]}},
              "type": "object", "properties": {"a": {"type": "integer"}, "loop": {"$ref": "#/$defs/loop"},
                                               "kids": {"type": "array", "items": {"$ref": "#"}}}}
    guide = guided.compile(guided.JsonSchema(schema, whitespace="compact", key_order="any"), smollm2_vocab)
    assert matches(guide, b'{"kids":[{"a":1}],"a":2}')
    assert not matches(guide, b'{"kids":[],"loop":{')
    assert guide.index.consume(guide.index.initial(), b'{"kids":[],"loop"') is None  # refused at once


def test_any_key_order_token_masks_allow_each_token_of_valid_documents(smollm2_vocab, smollm2_tokenizer):
    """Stepping real tokens: each token of a reordered valid document is in the mask
    before it, and EOS is allowed only at the end."""
    guide = guided.compile(guided.JsonSchema(ANY_ORDER_TREE, whitespace="compact", key_order="any"), smollm2_vocab)
    eos = guide.eos_token_ids[0]
    n = len(smollm2_tokenizer)
    for doc in ({"x9": True, "kids": [{"name": "b", "kids": []}], "name": "a"}, {"size": -4, "name": "abcd"}):
        m = guide.matcher()
        bits = guided.allocate_token_bitmask(1, n)
        for t in smollm2_tokenizer.encode(compact(doc).decode(), add_special_tokens=False):
            m.fill_next_token_bitmask(bits)
            allowed = guided.unpack_token_bitmask(bits, n)[0]
            assert allowed[t] and not allowed[eos]
            assert m.accept_token(t)
        m.fill_next_token_bitmask(bits)
        assert guided.unpack_token_bitmask(bits, n)[0][eos]


def test_a_schema_that_refers_to_its_root_compiles_the_root_once(monkeypatch):
    """``{"$ref": "#"}`` inside the schema calls the start rule. The root's body
    was compiled a second time for it, with every rule the first copy made kept
    beside the second's (JSONSchemaStore's renovate: 87k rules instead of 44k)."""
    from guided.grammars.json_schema.compiler import SchemaCompiler

    roots = []
    value = SchemaCompiler.value

    def counting(self, nfa, schema, path, depth):
        if schema is self.root:
            roots.append(path)
        return value(self, nfa, schema, path, depth)

    monkeypatch.setattr(SchemaCompiler, "value", counting)
    for key_order in ("schema", "any"):
        roots.clear()
        compile_recursive_schema(TREE, "compact", key_order=key_order)
        assert roots == ["#"], key_order


def test_returns_of_alternative_calls_share_one_nonterminal(smollm2_vocab):
    """The returns of an array's ``anyOf`` references have one closure: they share
    one table and one nonterminal (``_grammar``'s ``same``), so the terminals grow
    with the number of alternatives, not with its square (each return had its own,
    and met every call again: 60, 144, 408 terminals for 4, 8, 16), and documents
    are judged as before."""

    def schema(k):
        defs = {f"d{i}": {"type": "object", "properties": {f"k{i}": {"$ref": "#"}}} for i in range(k)}
        return {"type": "array", "items": {"anyOf": [{"$ref": f"#/definitions/d{i}"} for i in range(k)]},
                "definitions": defs}

    counts = [len(compile_recursive_schema(schema(k), "compact").terminal_names) for k in (4, 8, 16)]
    assert counts[2] - counts[1] <= 2.5 * (counts[1] - counts[0]), counts  # linear: 37, 65, 121
    guide = guided.compile(guided.JsonSchema(schema(6), whitespace="compact"), smollm2_vocab)
    validator = reference_validator(schema(6))
    for text in ['[]', '[{}]', '[{"k0":[{"k5":[]}]},{"k3":[]}]', '[{"k0":[{"k5":{}}]}]', '[{"k6":[]}]',
                 '[{"k1":[],"k2":[]}]', '[{},]', '[{"k0":[]}{}]']:
        try:
            valid = validator.is_valid(json.loads(text))
        except json.JSONDecodeError:
            valid = False
        assert matches(guide, text.encode()) == valid, text


def test_any_key_order_pairs_repeated_across_objects_are_compiled_once(smollm2_vocab, monkeypatch):
    """Generated schemas repeat one object under many names (renovate: 660 objects
    with keys in any order, 40k key/value pairs, 736 distinct): a key and its value
    schema become one rule, shared by every object that has them, and each copy is
    still judged as jsonschema judges it, in any key order."""
    from guided.grammars.json_schema.compiler import SchemaCompiler

    base = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 4}, "size": {"type": "integer"},
                                             "kids": {"type": "array", "items": {"$ref": "#/$defs/base"}}}}
    schema = {"$defs": {"base": base}, "type": "object", "additionalProperties": False,
              "properties": {f"p{i}": {"allOf": [{"$ref": "#/$defs/base"}], "required": ["name"]} for i in range(30)}}
    entries = []
    entry = SchemaCompiler.entry

    def counting(self, nfa, key_frag, sub, path, depth, cuts=None):
        entries.append(path)
        return entry(self, nfa, key_frag, sub, path, depth, cuts)

    monkeypatch.setattr(SchemaCompiler, "entry", counting)
    guide = GrammarGuide(compile_recursive_schema(schema, "compact", key_order="any"), smollm2_vocab)
    repeated = [p for p in entries if p.rsplit("/", 1)[-1] in ("name", "size", "kids")]
    assert len(repeated) <= 6  # base's keys: in base's own rule, and once for the 30 merged objects
    validator = reference_validator(schema)
    rng = random.Random(3)
    kid = {"size": 2, "name": "k", "kids": [{"name": "abcd"}]}
    for doc in [{"p29": {"name": "ab", "size": 1, "kids": [kid]}}, {"p0": {"size": 1}}, {"p3": {"name": "abcde"}},
                {"p7": {"name": "a", "kids": [{"size": "x"}]}}, {"p1": {"name": "a"}, "p30": {"name": "b"}},
                {"p2": {"name": "a", "name2": 1}, "p12": {"kids": [], "name": "z"}}]:
        for value in (doc, _shuffled(doc, rng)):
            assert matches(guide, compact(value)) == validator.is_valid(value), value


# Keys, open strings, patterned and counted strings, nesting: each rule's points end in
# several terminals (one per call), so the terminals alive decide what a token may read;
# "alt" reads one text as the end of two terminals (either call may follow).
TABLE_WALKED = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "tag": {"type": "string", "pattern": "^[a-z]{2,5}$"},
                   "note": {"type": "string", "maxLength": 6}, "kids": {"type": "array", "items": {"$ref": "#"}},
                   "next": {"$ref": "#"}, "alt": {"anyOf": [{"$ref": "#"}, {"$ref": "#/$defs/leaf"}]},
                   # Counted strings: whole subtrees taken by room (``fsm.kernels.units._table_room``).
                   "desc": {"type": "string", "maxLength": 40}, "code": {"type": "string", "pattern": "^[0-9]{3,30}$"}},
    "required": ["name"],
    "additionalProperties": False,
    "$defs": {"leaf": {"type": "object", "properties": {"v": {"type": "integer"}}, "additionalProperties": False}},
}
TABLE_WALKED_DOCS = [
    {"name": "root node, with words", "tag": "ab", "kids": [{"name": "é \u00fc \\\"x\"", "note": "short"},
                                                             {"name": "", "next": {"name": "n", "kids": []}}]},
    {"name": "x", "note": "", "next": {"name": "y", "tag": "qwert", "next": {"name": "z"}}, "alt": {"v": -3}},
    # Closing several objects at once: a token that ends one lexeme reads on in the next.
    {"name": "a", "next": {"name": "b", "next": {"name": "c", "next": {"name": "d", "next": {"name": "e"}}}}},
    {"name": "a", "kids": [{"name": "b", "kids": [{"name": "c", "kids": [{"name": "d", "kids": []}]}]}]},
    {"name": "c", "next": {"name": "d", "desc": "", "code": "999"}, "desc": "a description of thirty-nine characters",
     "code": "0123456789012345"},
]


def test_token_views_walked_over_rule_tables_are_the_lexer_walks(smollm2_vocab, smollm2_tokenizer, monkeypatch):
    """A lexer state inside one rule's terminals is walked over the rule's compiled
    table itself (``grammars.unit_walk``: the bits of the terminals still alive carried
    along, the table's rows built in the kernel), not over lexer states made for
    each pair; every mask along the documents is the one the lexer walk gives."""
    from guided.fsm.kernels import AVAILABLE
    from guided.grammars import unit_walk
    from guided.grammars.lexer import Lexer

    if not AVAILABLE:
        pytest.skip("numba is not installed")

    def masks():
        guide = GrammarGuide(compile_recursive_schema(TABLE_WALKED, "compact"), smollm2_vocab)
        out = []
        for value in TABLE_WALKED_DOCS:
            m = guide.matcher()
            for t in smollm2_tokenizer.encode(compact(value).decode(), add_special_tokens=False):
                out.append(sorted(m.allowed_token_ids()))
                assert m.accept_token(t)
            out.append(sorted(m.allowed_token_ids()))
            assert guide.eos_token_ids[0] in out[-1]
        return out

    with monkeypatch.context() as mp:
        mp.setattr(Lexer, "table_group", lambda self, state: None)
        want = masks()
    walks = []
    real = unit_walk.CompiledUnitWalk.walk_table
    monkeypatch.setattr(unit_walk.CompiledUnitWalk, "walk_table",
                        lambda self, *args: walks.append(args) or real(self, *args))
    got = masks()
    assert len(walks) > 20
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, (i, sorted(set(g) ^ set(w))[:10])


def test_table_walks_read_only_the_terminals_allowed(smollm2_vocab, monkeypatch):
    """Where the parser allows only some of a point's terminals, a walk over the
    rule's table reads only theirs: each terminal alone gives the lexer walk's view
    (the tokens inside the lexeme, and those that leave it, by what they complete)."""
    from guided.fsm.kernels import AVAILABLE
    from guided.grammars.lexer import Lexer

    if not AVAILABLE:
        pytest.skip("numba is not installed")
    index = GrammarGuide(compile_recursive_schema(TABLE_WALKED, "compact"), smollm2_vocab).index
    lexer = index.lexer
    by_table: dict[int, list[int]] = {}
    for t, view in enumerate(lexer.dfas):
        by_table.setdefault(id(view.table), []).append(t)

    def view(state):
        row, exits = index._token_units.walk_row(lexer, state, index.pieces, index.every_end)
        return row.tolist(), {a: sorted(zip(u.tolist(), r.tolist())) for a, u, r in exits.groups}

    compared = 0
    for terms in by_table.values():
        for t in terms if len(terms) > 1 else ():
            state = lexer.start(frozenset({t}))
            assert lexer.table_group(state) is not None
            got = view(state)
            with monkeypatch.context() as mp:
                mp.setattr(Lexer, "table_group", lambda self, state: None)
                assert got == view(state), t
            compared += 1
    assert compared >= 4


def test_pieces_read_over_rule_tables_are_the_piece_views(smollm2_vocab, monkeypatch):
    """``CompiledUnitWalk.read_pieces`` (what a token's rest reads from a fresh
    lexeme, read piece by piece over the rule's table) says of every piece of the
    vocabulary what the piece view walked over lexer states says: whether it stays
    inside the lexeme, else what the lexeme accepts where it leaves and the piece
    read after."""
    from guided.fsm.kernels import AVAILABLE
    from guided.grammars.lexer import Lexer

    if not AVAILABLE:
        pytest.skip("numba is not installed")
    index = GrammarGuide(compile_recursive_schema(TABLE_WALKED, "compact"), smollm2_vocab).index
    lexer, pieces = index.lexer, index.pieces
    every = np.arange(pieces.size)
    starts = sorted({lexer.start(frozenset({t})) for t in range(len(lexer.dfas))} |
                    {lexer.start(frozenset(range(len(lexer.dfas))))})
    compared = leaving = 0
    for state in starts:
        group = lexer.table_group(state)
        if group is None:
            continue
        k, s, bits = group
        inside, keys, rests, mid = index._token_units.walker.read_pieces(lexer, k, s, bits, every,
                                                                         index.pieces.first_byte, pieces.suffix)
        # mid: the piece passes an accepting state and reads on (every end kept, it may leave there too)
        ends = [len(index._piece_ends(state, piece)[1]) for piece in every.tolist()]
        assert (mid == (np.array(ends) > np.where(inside, 0, keys != 0))).all()
        accept = np.array([lexer.accept_id_of_bits(k, key) if key else 0 for key in keys.tolist()])
        with monkeypatch.context() as mp:
            mp.setattr(Lexer, "table_group", lambda self, state: None)
            view = index._build_piece_view(state)
        assert (inside == view.inside).all()
        assert (accept == view.exit_accept).all()
        out = accept > 0
        assert (rests[out] == view.exit_rest[out]).all()
        compared += 1
        leaving += int(out.sum())
    assert compared >= 4 and leaving > 50
