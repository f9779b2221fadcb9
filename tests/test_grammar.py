"""Lark grammars through the matcher contract, checked against lark's own parser."""

from __future__ import annotations

import json
import random
import re

import lark
import numpy as np
import pytest

import guided
import guided.grammars.grammar_index as gi
from guided.compiler import as_vocabulary
from guided.grammar_matcher import GrammarGuide
from guided.grammars.lark_frontend import compile_lark

try:
    from tests import grammar_sampler as gs
except ImportError:  # tests/ itself on sys.path
    import grammar_sampler as gs

JSON_GRAMMAR = r"""
?start: value
?value: object | array | string | SIGNED_NUMBER -> number | "true" -> true | "false" -> false | "null" -> null
array  : "[" [value ("," value)*] "]"
object : "{" [pair ("," pair)*] "}"
pair   : string ":" value
string : ESCAPED_STRING
%import common.ESCAPED_STRING
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
"""

# Keywords that are also names, an operator that prefixes another ("<" / "<="),
# case-insensitive keywords and a comment terminal that is ignored.
QUERY_GRAMMAR = r"""
start: "select"i NAME ("," NAME)* ("where"i cond)?
cond: NAME OP value
OP: "<" | "<=" | "=" | ">" | ">="
value: NAME | INT
NAME: /[a-z_][a-z0-9_]*/
COMMENT: /--[^\n]*/
%import common.INT
%import common.WS
%ignore WS
%ignore COMMENT
"""


def _vocab(tokenizer):
    return as_vocabulary(tokenizer)


def _token_map(vocab):
    return {b: i for i, b in enumerate(vocab.token_bytes) if b}


def random_segmentation(data: bytes, token_of: dict, rng: random.Random) -> list[int]:
    """Token ids whose bytes concatenate to ``data``, with random split points
    (every single byte is a token in the byte-level vocabularies used here)."""
    out, i = [], 0
    while i < len(data):
        choices = [n for n in range(1, min(16, len(data) - i) + 1) if data[i : i + n] in token_of]
        n = rng.choice(choices)
        out.append(token_of[data[i : i + n]])
        i += n
    return out


def matcher_accepts(guide, token_ids) -> bool:
    m = guide.matcher()
    for t in token_ids:
        if not m.accept_token(t):
            return False
    return m.accept_token(guide.eos_token_ids[0])


def brute_force_mask(guide, m) -> np.ndarray:
    """What the mask must be: every token the matcher's stepping accepts."""
    state = m._states[-1]
    index = guide.index
    ok = np.array([index.consume_token(state, t) is not None for t in range(guide.vocab_size)])
    for e in guide.eos_token_ids:
        ok[e] = index.can_end(state)
    return ok


def mask_of(guide, m) -> np.ndarray:
    return np.array(sorted(m.allowed_token_ids()))


@pytest.fixture(scope="module")
def json_guide(smollm2_vocab):
    return guided.compile(guided.Grammar(JSON_GRAMMAR), smollm2_vocab)


@pytest.fixture(scope="module")
def query_guide(smollm2_vocab):
    return guided.compile(guided.Grammar(QUERY_GRAMMAR), smollm2_vocab)


# -- agreement with lark ---------------------------------------------------------------


JSON_DOCS = [
    '{"a": [1, 2.5, {"b": null}], "c": "x\\"y"}',
    "[]",
    "[true,false,null]",
    ' { "k" : -1.5e3 } ',
    '"\\\\"',
    '{"nested": {"deeper": [[], [{}], "s p a c e"]}}',
    "12",
    '["\\u00e9t\\u00e9", "été", "日本"]',
]
JSON_BAD = ['{"a" 1}', "[1,]", '{"a":}', "tru", '"abc', "[1 2]", '{"a":1}}', "", "[", '"a\\"']


@pytest.mark.parametrize("doc", JSON_DOCS + JSON_BAD)
def test_json_grammar_agrees_with_lark(json_guide, smollm2_tokenizer, doc):
    expected = gs.lark_accepts(lark.Lark(JSON_GRAMMAR, parser="earley", lexer="dynamic"), doc)
    ids = smollm2_tokenizer.encode(doc, add_special_tokens=False)
    assert matcher_accepts(json_guide, ids) == expected
    token_of = _token_map(json_guide.vocab)
    rng = random.Random(doc)
    for _ in range(5):
        assert matcher_accepts(json_guide, random_segmentation(doc.encode(), token_of, rng)) == expected


@pytest.mark.parametrize("name", guided.Grammar.names())
def test_shipped_grammars_agree_with_lark(name, smollm2_vocab, smollm2_tokenizer):
    """Samples and near-miss mutations, through real tokenization and random token
    segmentations: the matcher accepts exactly what lark's parser accepts."""
    spec = guided.Grammar.from_name(name)
    guide = guided.compile(spec, smollm2_vocab)
    lalr = gs.lalr_parser(spec.lark_text)
    token_of = _token_map(smollm2_vocab)
    rng = random.Random(name)
    checked = rejected = 0
    for i in range(60):
        text = gs.sample(spec.lark_text, rng, max_depth=4)
        if i % 2:
            text = gs.mutate(text, rng)
        expected = gs.lark_accepts(lalr, text)
        if expected != gs.longest_match_accepts(lalr, text):
            continue  # the grammar's documented lexing exception (python_expr: "0else")
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        assert matcher_accepts(guide, ids) == expected, text
        assert matcher_accepts(guide, random_segmentation(text.encode(), token_of, rng)) == expected, text
        checked += 1
        rejected += not expected
    assert checked >= 50 and rejected >= 10


def test_shipped_grammars_with_a_sentencepiece_tokenizer():
    from tokenizer_zoo import mistral

    tok = mistral()
    for name in ("sql", "python_expr"):
        spec = guided.Grammar.from_name(name)
        guide = guided.compile(spec, tok)
        lalr = gs.lalr_parser(spec.lark_text)
        rng = random.Random(name)
        for _ in range(15):
            text = gs.sample(spec.lark_text, rng, max_depth=4)
            for candidate in (text, gs.mutate(text, rng)):
                expected = gs.lark_accepts(lalr, candidate)
                if expected != gs.longest_match_accepts(lalr, candidate):
                    continue
                ids = tok.encode(candidate, add_special_tokens=False)
                assert matcher_accepts(guide, ids) == expected, candidate


def test_masks_equal_brute_force_stepping(json_guide, smollm2_tokenizer):
    """The precomputed views give exactly the tokens that byte-by-byte stepping takes,
    including tokens that complete several terminals (``"},``) and end-of-text."""
    doc = '{"a": [1, 22, {"b": null}], "cc": "x\\"y"}'
    ids = smollm2_tokenizer.encode(doc, add_special_tokens=False)
    m = json_guide.matcher()
    for i, t in enumerate(ids + [None]):
        if i % 3 == 0 or t is None:
            got = np.zeros(json_guide.vocab_size, dtype=bool)
            got[mask_of(json_guide, m)] = True
            want = brute_force_mask(json_guide, m)
            assert (got == want).all(), (i, np.flatnonzero(got != want)[:10])
        if t is not None:
            assert m.accept_token(t)
    assert m.is_accepting()


@pytest.mark.parametrize("class_trie_max, dense_from, compiled",
                         [(10**6, 0, False), (0, 10**9, False), (0, 0, False), (0, 0, True)],
                         ids=["class_trie_levels", "byte_trie_live_pairs", "byte_trie_then_levels",
                              "byte_trie_compiled_depth_first"])
def test_lexer_state_walks_give_the_brute_force_masks(smollm2_vocab, smollm2_tokenizer, class_trie_max, dense_from,
                                                      compiled, monkeypatch):
    """A lexer state's view is walked over a small class trie level by level, or over
    the byte trie's live (node, state) pairs (in numpy, going on over whole levels
    once many pairs live; or compiled, depth first: ``fsm.kernels.units``), with
    the terminals' table built compiled or in Python (``grammars.terminal_tables``);
    every way gives the brute-force masks."""
    from guided.fsm.kernels import AVAILABLE
    from guided.grammars import terminal_tables

    if compiled and not AVAILABLE:
        pytest.skip("numba is not installed")
    monkeypatch.setattr(gi, "CLASS_TRIE_MAX_CLASSES", class_trie_max)
    monkeypatch.setattr(gi, "_DENSE_FROM", dense_from)
    monkeypatch.setattr(gi, "COMPILED_AVAILABLE", compiled)
    monkeypatch.setattr(terminal_tables, "COMPILED_AVAILABLE", compiled)
    spec = guided.Grammar(JSON_GRAMMAR)
    guide = GrammarGuide(compile_lark(spec.lark_text, spec.start), smollm2_vocab)  # not the cached one
    doc = '{"description": ["hello world", -1.5e3, true], "k2": {"items": null}, "name": "ab\\n"}'
    ids = smollm2_tokenizer.encode(doc, add_special_tokens=False)
    m = guide.matcher()
    for t in ids + [None]:
        got = np.zeros(guide.vocab_size, dtype=bool)
        got[mask_of(guide, m)] = True
        want = brute_force_mask(guide, m)
        assert (got == want).all(), np.flatnonzero(got != want)[:10]
        if t is not None:
            assert m.accept_token(t)


def test_keyword_name_ties_and_longest_match(query_guide, smollm2_tokenizer):
    parser = lark.Lark(QUERY_GRAMMAR, parser="lalr")
    cases = [
        "select a, b where a <= 3",
        "SELECT a where b<c",
        "Select select_x -- pick\n where a >= b",
        "select a where a < = 3",
        "select a where",
        "select a b",
        "selecta",
        "select where where where = 1",
    ]
    for text in cases:
        expected = gs.lark_accepts(parser, text)
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        assert matcher_accepts(query_guide, ids) == expected, text


def test_keywords_win_ties_with_names_as_in_lark(smollm2_vocab, smollm2_tokenizer):
    grammar = 'start: expr\nexpr: "not" expr | NAME\nNAME: /[a-z]+/\n%ignore " "'
    guide = guided.compile(guided.Grammar(grammar), smollm2_vocab)
    parser = lark.Lark(grammar, parser="lalr")
    for text in ["not x", "not not y", "not", "nothing", "not nothing", "x"]:
        expected = gs.lark_accepts(parser, text)
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        assert matcher_accepts(guide, ids) == expected, text


def test_lark_features_templates_aliases_imports(smollm2_vocab, smollm2_tokenizer):
    grammar = r"""
        start: _list{item, ";"}
        _list{x, sep}: x (sep x)*
        ?item: pair -> kv | SIGNED_INT [UNIT]
        pair: CNAME "=" SIGNED_INT
        UNIT: "kg"i | "m"
        %import common (CNAME, SIGNED_INT, WS_INLINE)
        %ignore WS_INLINE
    """
    guide = guided.compile(guided.Grammar(grammar), smollm2_vocab)
    parser = lark.Lark(grammar, parser="lalr")
    for text in ["a=1; -2 KG; 3 m", "x = 5", "1;", "a=b", "7kg;8", "", "3 kg kg"]:
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        assert matcher_accepts(guide, ids) == gs.lark_accepts(parser, text), text


def test_declared_terminal_is_refused(smollm2_vocab):
    with pytest.raises(guided.GrammarError):
        guided.compile(guided.Grammar("start: A\n%declare A"), smollm2_vocab)


def test_escaped_string_matches_lark_semantics(smollm2_vocab):
    """lark's ESCAPED_STRING uses a lookbehind; its regular equivalent must accept the
    same lexemes."""
    grammar = 'start: ESCAPED_STRING\n%import common.ESCAPED_STRING'
    guide = guided.compile(guided.Grammar(grammar), smollm2_vocab)
    parser = lark.Lark(grammar, parser="lalr")
    rng = random.Random(0)
    alphabet = ['"', "\\", "a", " ", "\n", "é"]
    token_of = _token_map(smollm2_vocab)
    for _ in range(300):
        body = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
        text = f'"{body}"'
        expected = gs.lark_accepts(parser, text)
        got = matcher_accepts(guide, random_segmentation(text.encode(), token_of, rng))
        assert got == expected, text


def test_two_tokenizer_families(smollm2_tokenizer):
    from tokenizer_zoo import mistral

    tok = mistral()
    guide = guided.compile(guided.Grammar(JSON_GRAMMAR), tok)
    for doc in JSON_DOCS[:4]:
        ids = tok.encode(doc, add_special_tokens=False)
        assert matcher_accepts(guide, ids), doc
    assert not matcher_accepts(guide, tok.encode("[1,]", add_special_tokens=False))


# -- rollback and fork ---------------------------------------------------------------


def test_rollback_and_fork_restore_masks(json_guide, smollm2_tokenizer):
    ids = smollm2_tokenizer.encode('{"key": [10, "v"], "z": true}', add_special_tokens=False)
    m = json_guide.matcher()
    masks = [mask_of(json_guide, m)]
    for t in ids:
        assert m.accept_token(t)
        masks.append(mask_of(json_guide, m))
    fork = m.fork()
    for n in range(len(ids), 0, -1):
        m.rollback(1)
        assert np.array_equal(mask_of(json_guide, m), masks[n - 1])
    assert np.array_equal(mask_of(json_guide, fork), masks[-1])  # the fork is untouched
    assert m.accept_tokens(ids) and np.array_equal(mask_of(json_guide, m), masks[-1])
    with pytest.raises(ValueError):
        m.rollback(len(ids) + 1)


def test_dropping_shared_caches_changes_no_mask(smollm2_vocab, smollm2_tokenizer, monkeypatch):
    """The cross-sequence cache is bounded; dropping it mid-sequence is invisible."""
    doc = '{"key": [10, "v", {"x": null}], "z": true}'
    ids = smollm2_tokenizer.encode(doc, add_special_tokens=False)
    reference = guided.compile(guided.Grammar(JSON_GRAMMAR), smollm2_vocab, eager=False)
    m = reference.matcher()
    want = []
    for t in ids:
        want.append(mask_of(reference, m))
        m.accept_token(t)
    monkeypatch.setattr(gi, "MAX_CACHED_SCANS", 5)
    guided.compiler._cache.clear()
    small = guided.compile(guided.Grammar(JSON_GRAMMAR), smollm2_vocab)
    for _ in range(2):  # the second sequence starts after several drops
        m = small.matcher()
        for t, expected in zip(ids, want):
            assert np.array_equal(mask_of(small, m), expected)
            assert m.accept_token(t)


def test_refused_token_leaves_state_unchanged(json_guide, smollm2_tokenizer):
    m = json_guide.matcher()
    before = mask_of(json_guide, m)
    bad = smollm2_tokenizer.encode("}", add_special_tokens=False)[0]
    assert not m.accept_token(bad)
    assert np.array_equal(mask_of(json_guide, m), before)
    assert not m.accept_token(json_guide.eos_token_ids[0])  # "" is not JSON


def test_termination(smollm2_vocab, smollm2_tokenizer):
    guide = guided.compile(guided.Grammar('start: "yes" | "no"'), smollm2_vocab)
    m = guide.matcher()
    assert not m.is_accepting()
    assert m.accept_tokens(smollm2_tokenizer.encode("yes", add_special_tokens=False))
    assert m.is_accepting() and m.is_terminated()
    assert m.allowed_token_ids() == list(guide.eos_token_ids)


# -- generation --------------------------------------------------------------------------


# Small values and no free whitespace, so a random model's outputs finish.
SMALL_JSON_GRAMMAR = r"""
?start: value
?value: object | array | STRING | INT | "true" | "false" | "null"
array  : "[" [value ("," value)*] "]"
object : "{" [pair ("," pair)*] "}"
pair   : STRING ":" value
STRING : /"[a-z ]{0,6}"/
%import common.INT
"""


def test_generation_outputs_always_parse(tiny_model, smollm2_tokenizer):
    spec = guided.Grammar(SMALL_JSON_GRAMMAR)
    parser = lark.Lark(SMALL_JSON_GRAMMAR, parser="lalr")
    finished = 0
    for seed in range(100):
        r = guided.generate(
            tiny_model, smollm2_tokenizer, "JSON:", spec, max_new_tokens=32, temperature=1.0, seed=seed, chat=False
        )
        if r.finish_reason != "length":
            finished += 1
            parser.parse(r.text)
            json.loads(r.text)
    assert finished >= 50


# -- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "grammar, message",
    [
        ('start: ("x"', "line 1, column"),
        ("start: a\n", "'a' used but not defined"),
        ("start: A\nA: /a*/", "A matches the empty string"),
        ('start: "x" b\nb: b "y"', "language is empty"),
        ("start: A\nA: /(?=a)a/", "terminal A: lookaround"),
        ("start: A\nA: /\\ud800/", "terminal A: the pattern matches no string at all: it needs the lone surrogate U+D800"),
        ("start: A\nA: /[a-z]+/\nstart2: B", "B"),
    ],
)
def test_bad_grammars_get_clear_errors(smollm2_vocab, grammar, message):
    with pytest.raises(guided.GrammarError, match=None) as info:
        guided.compile(guided.Grammar(grammar), smollm2_vocab)
    assert message in str(info.value)


def test_unknown_shipped_grammar():
    with pytest.raises(ValueError, match="available"):
        guided.Grammar.from_name("no-such-grammar")


@pytest.mark.parametrize("text,fragment", [
    ("start: /\\p{L}+/", "invalid regex in a terminal"),
    ("%import nonexist.X\nstart: X", "%import: cannot read"),
    ("start: " + "(" * 3000 + '"a"' + ")" * 3000, "nests too deeply"),
    # lark checks terminal regexes with the ``regex`` module where it is installed,
    # whose errors are not ``re.error``s.
    ("start: A\nA: /*a/", "invalid regex in a terminal"),
    ("start: A\nA: /a{2,1}/", "invalid regex in a terminal"),
])
def test_grammars_lark_cannot_load_are_grammar_errors(text, fragment):
    """Errors from lark's loading that are not lark's own (``re.error``, a missing
    file, the recursion limit) are ``GrammarError``s too."""
    from guided.grammars.lark_frontend import compile_lark

    with pytest.raises(guided.GrammarError, match=re.escape(fragment)):
        compile_lark(text)


@pytest.mark.parametrize("text", [
    "start: " + " ".join('("a" | "b" | "c")' for _ in range(12)),
    "start: " + " ".join('["x" ("y" | "z")]' for _ in range(10)),
    'start: r\nr: ("a" | "b" ("c" | "d" ["e"])) ~ 8',
])
def test_grammars_lark_would_expand_without_end_are_refused_at_once(text):
    """Lark writes out every combination of nested alternatives, [..] and ? (3**12
    here) in a loader no time limit reaches: such grammars are refused before it runs."""
    import time

    from guided.grammars.lark_frontend import compile_lark

    start = time.perf_counter()
    with pytest.raises(guided.GrammarError, match="expands to more than"):
        compile_lark(text)
    assert time.perf_counter() - start < 5


def test_grammars_with_many_optional_items_still_compile():
    from guided.grammars.lark_frontend import compile_lark

    compile_lark("start: " + " ".join(f'"{c}"?' for c in "abcdefghijkl"))  # 4,096 alternatives


def test_lark_parts_are_what_lark_itself_compiles():
    """Terminals, rules and ignored terminals come from lark's loader without building
    lark's parser: the same as ``lark.Lark(text, parser="earley", lexer="dynamic")``
    has them, for every shipped grammar and the test grammars."""
    from guided.grammars.lark_frontend import _lark_parts

    texts = [guided.Grammar.from_name(n).lark_text for n in guided.Grammar.names()] + [JSON_GRAMMAR, QUERY_GRAMMAR]
    for text in texts:
        terminals, rules, ignore = _lark_parts(text, "start")
        parsed = lark.Lark(text, start="start", parser="earley", lexer="dynamic")
        assert [(t.name, t.pattern, t.priority) for t in terminals] == \
            [(t.name, t.pattern, t.priority) for t in parsed.terminals]
        assert [(r.origin, r.expansion, r.alias) for r in rules] == [(r.origin, r.expansion, r.alias) for r in parsed.rules]
        assert list(ignore) == list(parsed.ignore_tokens)


def test_case_insensitive_string_terminals_get_the_regex_compilers_language():
    """A lark string terminal with the ``i`` flag is built directly
    (``fsm.regex.literal_ignore_case_fragment``): determinised, the very DFA the
    regex compiler gives ``(?i:...)``, for every such terminal of the shipped
    grammars and for random text (the characters ``re`` folds to non-ASCII ones: k,
    s, i; Greek, Latin Extended)."""
    import random

    from guided.fsm.dfa import determinize
    from guided.fsm.nfa import NFA
    from guided.fsm.regex import compile_regex, literal_ignore_case_fragment
    from guided.grammars.lark_frontend import _lark_parts

    texts = []
    for name in guided.Grammar.names():
        for term in _lark_parts(guided.Grammar.from_name(name).lark_text, "start")[0]:
            if type(term.pattern).__name__ == "PatternStr" and term.pattern.flags == {"i"}:
                texts.append(term.pattern.value)
    assert len(texts) >= 20
    rng = random.Random(7)
    texts += ["k", "s", "i", "\u212a", "\u017f", "\u0130", "ß", "ﬀ", "µ", "Σ"]
    texts += ["".join(chr(rng.choice([rng.randint(32, 126), rng.randint(0xA0, 0x24F), rng.randint(0x370, 0x3FF),
                                      rng.randint(0x1E00, 0x1FFF)])) for _ in range(rng.randint(1, 6)))
              for _ in range(400)]
    for text in texts:
        nfa = NFA()
        a = determinize(nfa, *literal_ignore_case_fragment(nfa, text))
        b = compile_regex(f"(?i:{re.escape(text)})")
        assert np.array_equal(a.transitions, b.transitions), text
        assert np.array_equal(a.byte_to_class, b.byte_to_class) and np.array_equal(a.accepting, b.accepting), text
    assert literal_ignore_case_fragment(NFA(), "") is None
    assert literal_ignore_case_fragment(NFA(), "a\ud800") is None  # (no UTF-8 text holds it)


def test_pieces_read_over_lexer_rows_are_read_one_by_one(smollm2_vocab):
    """``unit_walk.read_lexer_pieces`` (compiled, over the lexer's rows, building the
    rows it meets) reads every piece of the vocabulary as ``GrammarIndex._read_piece``
    steps its bytes, from lexer states whose terminals sit in several tables."""
    from guided.fsm.kernels import AVAILABLE

    if not AVAILABLE:
        pytest.skip("numba is not installed")
    from guided.grammars.unit_walk import read_lexer_pieces

    guide = GrammarGuide(compile_lark(guided.Grammar.from_name("python_expr").lark_text), smollm2_vocab)
    index = guide.index
    p = index.parser.root()
    starts = [index.start_state(p)]
    for text in (b"x", b"1", b"'", b"not", b">"):
        starts.append(index.lexer.step(starts[0], text))
    pieces = np.arange(index.pieces.size, dtype=np.int64)
    for start in starts:
        assert index.lexer.table_group(start) is None  # several tables: the path under test
        inside, accept, rests = read_lexer_pieces(index.lexer, start, pieces, index.pieces.first_byte,
                                                  index.pieces.suffix)
        for x in range(0, index.pieces.size, 7):
            a, rest = index._read_piece(start, x)
            if a == 0:
                assert inside[x], x
            else:
                assert not inside[x] and (accept[x], rests[x]) == ((a, rest) if a > 0 else (-1, -1)), x


@pytest.mark.parametrize("name", ["arithmetic", "python_expr", "sql", "json"])
def test_rests_read_by_walking_below_the_exits_are_read_one_by_one(name, smollm2_vocab, smollm2_tokenizer):
    """The rests of a token view's exits (the ~32k tokens that start with
    whitespace, less it) read from a fresh lexeme by one walk of the trie below the
    exits (``GrammarIndex._read_below``) give what reading each rest byte by byte
    gives (``unit_walk.read_lexer_pieces``): which stay inside, and per terminal set
    completed, which leave and the rest each reads next; the reads after those walk
    too and agree likewise. Every such read of random documents of four shipped
    grammars."""
    from guided.fsm.kernels import AVAILABLE

    if not AVAILABLE:
        pytest.skip("numba is not installed")
    from guided.grammars.unit_walk import read_lexer_pieces

    text = guided.Grammar.from_name(name).lark_text
    guide = GrammarGuide(compile_lark(text), smollm2_vocab)
    index = guide.index
    rng = random.Random(3)
    for doc in [gs.sample(text, rng, max_depth=4) for _ in range(8)] + NESTED_EXPRESSIONS.get(name, []):
        m = guide.matcher()
        for t in smollm2_tokenizer.encode(doc, add_special_tokens=False):
            m.fill_next_token_bitmask(guided.allocate_token_bitmask(1, smollm2_vocab.size), 0)
            assert m.accept_token(t)
    walked = [(start, got) for (start, _), got in index._reads.items()
              if index._rest_sources.get(id(got[2]), (None,))[0] is got[2] and len(got[2]) >= gi._READ_BELOW_FROM]
    assert len(walked) >= 2, name  # the whitespace rests, and reads after them
    for start, (inside, groups, pieces) in walked:
        want_inside, want_accept, want_rests = read_lexer_pieces(index.lexer, start, pieces,
                                                                 index.pieces.first_byte, index.pieces.suffix)
        assert np.array_equal(inside, want_inside)
        accept, rests = np.full(len(pieces), -1), np.full(len(pieces), -1)
        for a, sel, rest in groups:
            assert (accept[sel] == -1).all()
            accept[sel], rests[sel] = a, rest
        assert np.array_equal(accept, want_accept) and np.array_equal(rests[accept > 0], want_rests[accept > 0])


NESTED_EXPRESSIONS = {
    "arithmetic": ["((1 + (2 * (3 - x))) / f(a, (b), g(c, (d + 1))))", "-(-(x ^ -(y ^ 2)))",
                   "max(a, b, 1e-3) % 7 + sqrt((x))"],
    "python_expr": ["f(g(1, (2 + h(3))), [4, (5)], {'k': [(6)]})[0]", "not (a and (b or not c))",
                    "sorted(xs, key=lambda p: (p.a, -p.b))[:10]", "[[1], [[2]], [[[3]]]]"],
    "sql": ["SELECT a FROM t WHERE (x = 1 AND (y < 2 OR (z > 3))) ORDER BY a;",
            "SELECT a FROM t WHERE NOT (x = 1 AND (y < 2 OR (z > 3)));"],
}


@pytest.mark.parametrize("name", sorted(NESTED_EXPRESSIONS))
def test_masks_computed_on_cut_states_are_the_masks_of_the_states(name, smollm2_vocab, smollm2_tokenizer,
                                                                  monkeypatch):
    """What a token's rest reads is computed on the parse state cut a few open
    constructs deep (``EarleyParser.cut``) and shared by every state that agrees
    that deep; tokens closing several constructs at once (``)))``) need the state
    whole. Every mask of deeply nested expressions, read with a guide that shares
    work across them, equals the mask of a guide that never cuts; at some steps,
    the brute-force mask. Where a rest reads on from the cut set itself (``-`` after
    ``-``), the rests are read with the pieces they came from (``_read_folded``)."""
    spec = guided.Grammar.from_name(name)
    shared = GrammarGuide(compile_lark(spec.lark_text, spec.start), smollm2_vocab)
    folded = []
    read_folded = gi.GrammarIndex._read_folded
    monkeypatch.setattr(gi.GrammarIndex, "_read_folded", lambda *a: folded.append(1) or read_folded(*a))
    docs = [smollm2_tokenizer.encode(d, add_special_tokens=False) for d in NESTED_EXPRESSIONS[name]]
    got = []
    for ids in docs:
        m = shared.matcher()
        for t in ids + [None]:
            got.append(mask_of(shared, m))
            if t is not None:
                assert m.accept_token(t)
        assert m.is_accepting()
    assert folded  # (SmolLM2 has tokens of several "(" or "-")
    monkeypatch.setattr(gi, "CUT_DEPTHS", ())
    whole = GrammarGuide(compile_lark(spec.lark_text, spec.start), smollm2_vocab)
    step = 0
    for ids in docs:
        m = whole.matcher()
        for t in ids + [None]:
            assert np.array_equal(mask_of(whole, m), got[step]), step
            if step % 9 == 0:
                want = np.flatnonzero(brute_force_mask(whole, m))
                assert np.array_equal(want, got[step]), step
            step += 1
            if t is not None:
                m.accept_token(t)


def test_shipped_common_terminal_dfas_are_those_their_regexes_build():
    """lark's common.lark terminals ship built (``lark/common_dfas.npz``): each must be
    the DFA its regex builds now, or a grammar importing it would lex by an old one.
    On failure, write the file again (``lark_frontend.write_common_dfas``)."""
    import numpy as np

    from guided.fsm.regex import compile_regex
    from guided.grammars import lark_frontend

    regexes = lark_frontend.common_terminal_regexes()
    assert {"WS", "NUMBER", "SIGNED_NUMBER", "ESCAPED_STRING", "CNAME"} <= set(regexes)
    for name, regex in regexes.items():
        got = lark_frontend.COMMON_DFAS.get(regex)
        assert got is not None, f"common_dfas.npz has no entry for {name}'s regex: write it again"
        built = compile_regex(regex)
        for field in ("transitions", "byte_to_class", "accepting"):
            assert np.array_equal(getattr(got, field), getattr(built, field)), (name, field)
    assert lark_frontend.COMMON_DFAS.get(r"[ \t]+x") is None
