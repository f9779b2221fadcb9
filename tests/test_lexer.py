"""The grammar lexer against each terminal stepped on its own."""

from __future__ import annotations

import random

import pytest

from guided.grammars.json_schema.recursive import compile_recursive_schema
from guided.grammars.lexer import Lexer, TerminalView

SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "string", "pattern": "^[a-z][a-z0-9-]*$", "maxLength": 12},
                   "n": {"type": "integer"},
                   "kids": {"type": "array", "items": {"$ref": "#"}}},
    "required": ["id"],
    "additionalProperties": False,
}
TEXT = b'{"id":"ab-9","n":-12,"kids":[{"id":"x"}]}'


def _reference(terminals, allowed, data: bytes):
    """The terminals that accept ``data`` as one lexeme, stepping each one's
    table on its own; None when none can read it."""
    alive = {t: terminals[t].table.start for t in allowed}
    for b in data:
        nxt = {}
        for t, s in alive.items():
            table, bit = terminals[t].table, terminals[t].bit
            m = table.row(s)[table.byte_to_class[b]]
            if m >= 0 and (table.live_bits is None or table.live_bits[m] & bit):
                nxt[t] = m
        alive = nxt
        if not alive:
            return None
    return frozenset(t for t, s in alive.items() if terminals[t].table.accept_bits[s] & terminals[t].bit)


def _lexemes(seed: int, n: int):
    """Slices of a document and random bytes from its alphabet."""
    rng = random.Random(seed)
    for _ in range(n):
        if rng.random() < 0.5:
            i = rng.randrange(len(TEXT))
            yield TEXT[i : rng.randrange(i + 1, len(TEXT) + 1)]
        else:
            yield bytes(rng.choice(TEXT) for _ in range(rng.randrange(1, 8)))


def _check(terminals, seed: int) -> Lexer:
    lexer = Lexer(terminals)
    rng = random.Random(seed)
    everything = range(len(terminals))
    for data in _lexemes(seed, 400):
        allowed = frozenset(rng.sample(everything, rng.randrange(1, len(terminals) + 1)))
        state = lexer.step(lexer.start(allowed), data)
        expected = _reference(terminals, allowed, data)
        got = None if state < 0 else lexer.accepting_terminals(state)
        assert got == expected, (data, sorted(allowed))
    return lexer


def test_lexer_agrees_with_each_terminal_alone():
    """One-group states (every terminal of one shared table in one table state)
    are stepped as (table, state, bits); the accepting terminals after each lexeme
    are those of the terminals stepped one by one."""
    terminals = compile_recursive_schema(SCHEMA, "compact").terminal_dfas
    assert len({id(t.table) for t in terminals}) < len(terminals)  # tables are shared
    lexer = _check(terminals, 1)
    assert any(g is not None for g in lexer._group) and any(g is None for g in lexer._group)


@pytest.mark.parametrize("seed", [2, 3])
def test_lexer_with_terminals_sharing_a_bit(seed):
    """Two terminals that are the same bit of one table keep member tuples, and
    still agree with stepping each alone."""
    terminals = list(compile_recursive_schema(SCHEMA, "compact").terminal_dfas)
    terminals.append(TerminalView(terminals[0].table, terminals[0].bit))
    lexer = _check(terminals, seed)
    assert lexer._term_of_bit[lexer._table_of[0]] is None


def test_a_state_reached_from_several_tables_is_the_one_group_state():
    """When the terminals still alive after a lexeme begun with several tables all
    sit in one table state, the state is the one those terminals reach alone."""
    terminals = compile_recursive_schema(SCHEMA, "compact").terminal_dfas
    lexer = Lexer(terminals)
    everything = frozenset(range(len(terminals)))
    assert lexer._group[lexer.start(everything)] is None  # several tables
    checked = 0
    for data in {TEXT[i:j] for i in range(len(TEXT)) for j in range(i + 1, min(i + 8, len(TEXT) + 1))}:
        both = lexer.step(lexer.start(everything), data)
        if both < 0 or lexer._group[both] is None:
            continue
        k, _, bits = lexer._group[both]
        alive = frozenset(t for t in everything if lexer._table_of[t] == k and lexer._bit[t] & bits)
        assert lexer.step(lexer.start(alive), data) == both, data
        checked += 1
    assert checked >= 10
