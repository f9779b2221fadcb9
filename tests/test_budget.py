"""Budget-aware masks: distances in tokens against a breadth-first search over the
whole vocabulary, outputs that always finish within their budget, the error below
the shortest output, and the same masks through every way a loop asks for them."""

from __future__ import annotations

import json
import re
from collections import deque

import jsonschema
import numpy as np
import pytest
import torch

import guided
from guided.fsm.distance import INFINITE, fewest_tokens
from guided.grammar_matcher import GrammarMatcher
from guided.grammars.grammar_index import Readings
from guided.matcher import FSMMatcher

try:
    from tests import tokenizer_zoo
    from tests.grammar_sampler import lalr_parser
except ImportError:  # tests/ itself on sys.path
    import tokenizer_zoo
    from grammar_sampler import lalr_parser

SMALL_SPECS = [
    guided.Regex(r"(yes|no)"),
    guided.Regex(r"[0-9]{3}-[a-z]{2,5}"),
    guided.Regex(r"a{5,9}b?"),
    guided.Regex(r"(ab|cde)+x"),
    guided.JsonSchema({"type": "object", "properties": {"name": {"type": "string", "maxLength": 4},
                                                        "n": {"type": "integer"}},
                       "required": ["name", "n"], "additionalProperties": False}, whitespace="compact"),
    guided.JsonSchema({"type": "array", "items": {"enum": ["red", "green", 3]}, "minItems": 2, "maxItems": 3},
                      whitespace="compact"),
]

OPEN_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"},
                                                "tags": {"type": "array", "items": {"type": "string"}}},
               "required": ["name"]}


def token_graph_distances(guide) -> dict[int, int]:
    """Fewest tokens to acceptance from every state the start reaches, by stepping
    every token of the vocabulary from every state (the reference)."""
    tokens = [b for b in guide.vocab.token_bytes if b]
    dfa = guide.dfa
    succ, seen, queue = {}, {dfa.start}, deque([dfa.start])
    while queue:
        s = queue.popleft()
        succ[s] = {t for t in (dfa.step(s, b) for b in tokens) if t >= 0}
        for t in succ[s] - seen:
            seen.add(t)
            queue.append(t)
    dist = {s: 0 if dfa.is_accepting(s) else INFINITE for s in seen}
    changed = True
    while changed:
        changed = False
        for s in seen:
            best = min((dist[t] + 1 for t in succ[s]), default=INFINITE)
            if best < dist[s]:
                dist[s], changed = best, True
    return dist


@pytest.fixture(scope="module", params=["smollm2", "mistral"])
def family_vocab(request):
    """The vocabularies of two tokenizer families: byte-level BPE and SentencePiece."""
    return guided.Vocabulary.from_tokenizer(getattr(tokenizer_zoo, request.param)())


@pytest.mark.parametrize("spec", SMALL_SPECS, ids=lambda s: str(s)[:40])
def test_distances_equal_a_search_over_the_whole_vocabulary(spec, family_vocab):
    guide = guided.compile(spec, family_vocab)
    distances = guide.distances()
    assert distances.exact
    expected = token_graph_distances(guide)
    assert {s: distances.distance(s) for s in expected} == expected
    assert guide.min_tokens() == expected[guide.dfa.start] + 1


@pytest.mark.parametrize("spec", [SMALL_SPECS[1], SMALL_SPECS[5]], ids=lambda s: str(s)[:40])
def test_budget_masks_equal_the_tokens_that_fit(spec, family_vocab):
    """Every reachable state, every budget up to past its distance: the mask is the
    tokens whose target can still finish in ``remaining - 2``, EOS where the state
    accepts (or the closest tokens where nothing fits), by stepping every token."""
    guide = guided.compile(spec, family_vocab)
    dist = token_graph_distances(guide)
    dfa, eos = guide.dfa, guide.vocab.eos_token_ids[0]
    tokens = [(i, b) for i, b in enumerate(guide.vocab.token_bytes) if b]
    bitmask = guided.allocate_token_bitmask(1, guide.vocab_size)
    for state in dist:
        targets = {i: dfa.step(state, b) for i, b in tokens}
        targets = {i: t for i, t in targets.items() if t >= 0}
        for remaining in range(1, dist[state] + 4):
            fits = {i for i, t in targets.items() if dist[t] <= remaining - 2}
            if not fits and not dfa.is_accepting(state):  # the closest tokens
                fits = {i for i, t in targets.items() if dist[t] == min(dist[u] for u in targets.values())}
            expected = fits | ({eos} if dfa.is_accepting(state) else set())
            FSMMatcher(guide, [state]).fill_next_token_bitmask(bitmask, 0, remaining)
            bits = np.unpackbits(bitmask[0].numpy().view(np.uint8), bitorder="little")
            assert set(np.nonzero(bits)[0].tolist()) == expected, (state, remaining)


@pytest.mark.parametrize("spec", [SMALL_SPECS[1], SMALL_SPECS[4], guided.JsonSchema(OPEN_SCHEMA)],
                         ids=lambda s: str(s)[:40])
def test_compiled_successors_equal_the_numpy_walk(spec, smollm2_vocab):
    """The kernel's runs (``fsm.kernels.successors``) are its Python twin's, state by state."""
    pytest.importorskip("numba")
    guide = guided.compile(spec, smollm2_vocab)
    m, states = guide.matcher(), []
    rng = np.random.default_rng(0)
    for _ in range(12):  # a random walk through the spec
        states.append(m.state)
        ids = np.array(m.allowed_token_ids())
        ids = ids[ids != guide.vocab.eos_token_ids[0]]
        if not len(ids):
            break
        assert m.accept_token(int(rng.choice(ids)))

    def runs(compiled):
        guide.index.compiled = compiled
        try:
            return sorted(zip(*(a.tolist() for a in guide.index.successors(states))))
        finally:
            guide.index.compiled = True

    assert runs(True) == runs(False)
    # The distinct targets, compiled and not, are those of the runs.
    pairs = sorted({(m, t) for m, _, _, t in runs(True)})
    for compiled in (True, False):
        guide.index.compiled = compiled
        try:
            member, target = guide.index.successor_targets(states)
        finally:
            guide.index.compiled = True
        assert sorted(zip(member.tolist(), target.tolist())) == pairs


def test_a_bound_is_a_real_token_path(smollm2_vocab):
    """An open schema (deferred parts) gets bounds; each is the length of a path
    whose every step the masks allow and which ends in an accepting state."""
    guide = guided.compile(guided.JsonSchema(OPEN_SCHEMA), smollm2_vocab)
    d = guide.distances()
    assert not d.exact
    m = guide.matcher()
    # Greedy descent: at each step some allowed token leads one closer.
    for _ in range(d.distance(guide.dfa.start)):
        here = d.distance(m.state)
        ids = np.array(m.allowed_token_ids())
        ids = ids[ids != 2]
        nxt = [(d.distance(guide.index.next_state(m.state, int(t))), int(t)) for t in ids]
        best, token = min(nxt)
        assert best <= here - 1
        assert m.accept_token(token)
    assert m.is_accepting()


def test_fewest_tokens_splits_into_the_fewest_pieces():
    strings = frozenset({b"a", b"b", b"c", b"ab", b"bc", b"abc"})
    assert fewest_tokens(b"abcabc", strings, 3) == [0, 3, 6]
    assert fewest_tokens(b"abd", strings, 3) is None


def finished_within(model, tokenizer, guide, budget: int, seeds, **kw):
    """Sampled outputs, one per seed, each asserted complete (EOS, or a match nothing
    extends) within ``budget`` tokens, EOS included."""
    for seed in seeds:
        r = guided.generate(model, tokenizer, [1, 2, 3], guide, max_new_tokens=budget, temperature=1.0, seed=seed,
                            **kw)
        assert r.finish_reason in ("eos", "complete"), (budget, seed, r.text)
        assert len(r.token_ids) + (r.finish_reason == "eos") <= budget
        yield r


@pytest.mark.parametrize("kind", ["regex", "closed_schema", "open_schema", "grammar", "recursive_schema"])
def test_every_output_is_complete_and_valid_within_its_budget(kind, tiny_model, smollm2_tokenizer):
    spec, check = {
        "grammar": (ARITHMETIC, lambda text: lalr_parser(ARITHMETIC.lark_text).parse(text) is not None),
        "recursive_schema": (guided.JsonSchema(TREE),
                             lambda text: jsonschema.validate(json.loads(text), TREE) or True),
        "regex": (guided.Regex(r"[a-z]+(,[a-z]+)*"), lambda text: re.fullmatch(r"[a-z]+(,[a-z]+)*", text)),
        "closed_schema": (SMALL_SPECS[4], lambda text: jsonschema.validate(json.loads(text), SMALL_SPECS[4].schema)
                          or True),
        "open_schema": (guided.JsonSchema(OPEN_SCHEMA),
                        lambda text: jsonschema.validate(json.loads(text), OPEN_SCHEMA) or True),
    }[kind]
    guide = guided.compile(spec, smollm2_tokenizer)
    shortest = guide.min_tokens()
    for budget in (shortest, shortest + 2, shortest + 7):
        for r in finished_within(tiny_model, smollm2_tokenizer, guide, budget, range(100)):
            assert check(r.text), (budget, r.text)


def test_without_a_budget_outputs_are_cut(tiny_model, smollm2_tokenizer):
    """The same loop with budget_aware=False: the tiny model runs out of tokens."""
    guide = guided.compile(guided.JsonSchema(OPEN_SCHEMA), smollm2_tokenizer)
    cut = sum(guided.generate(tiny_model, smollm2_tokenizer, [1, 2, 3], guide, max_new_tokens=guide.min_tokens() + 2,
                              temperature=1.0, seed=seed, budget_aware=False).finish_reason == "length"
              for seed in range(20))
    assert cut > 10


def test_below_the_shortest_output_is_a_clear_error(tiny_model, smollm2_tokenizer):
    guide = guided.compile(guided.Regex(r"[0-9]{3}-[a-z]{2,5}"), smollm2_tokenizer)
    shortest = guide.min_tokens()
    with pytest.raises(guided.TokenBudgetError, match=f"takes {shortest} tokens, EOS included") as err:
        guided.generate(tiny_model, smollm2_tokenizer, [1, 2, 3], guide, max_new_tokens=shortest - 1)
    assert (err.value.needed, err.value.budget) == (shortest, shortest - 1)
    with pytest.raises(guided.TokenBudgetError):
        guided.LogitsProcessor(guide, max_new_tokens=shortest - 1)
    # Off: the old behaviour, an unfinished output.
    r = guided.generate(tiny_model, smollm2_tokenizer, [1, 2, 3], guide, max_new_tokens=shortest - 1,
                        budget_aware=False)
    assert r.finish_reason == "length"


def test_hugging_face_generate_finishes_within_max_new_tokens(tiny_model, smollm2_tokenizer):
    guide = guided.compile(guided.JsonSchema(OPEN_SCHEMA), smollm2_tokenizer)
    budget = guide.min_tokens() + 3
    processor = guided.LogitsProcessor(guide, max_new_tokens=budget)
    torch.manual_seed(0)
    prompt = torch.tensor([[1, 2, 3]] * 4)
    out = tiny_model.generate(prompt, attention_mask=torch.ones_like(prompt), logits_processor=[processor],
                              max_new_tokens=budget, do_sample=True, pad_token_id=2, eos_token_id=2)
    for row in out[:, 3:].tolist():
        assert 2 in row, row  # EOS came by the budget
        text = smollm2_tokenizer.decode(row[: row.index(2)])
        jsonschema.validate(json.loads(text), OPEN_SCHEMA)


def test_the_batch_fill_gives_each_matchers_budget_mask(smollm2_vocab, smollm2_tokenizer):
    guide = guided.compile(SMALL_SPECS[1], smollm2_vocab)
    matchers = [guide.matcher() for _ in range(4)]
    for m, text in zip(matchers, ["", "12", "123-", "123-ab"]):
        assert m.accept_tokens(smollm2_tokenizer.encode(text, add_special_tokens=False))
    remaining = [6, 3, 2, None]
    expected = guided.allocate_token_bitmask(4, guide.vocab_size)
    for i, (m, n) in enumerate(zip(matchers, remaining)):
        m.fill_next_token_bitmask(expected, i, n)
    for _ in range(2):  # the second time from the kept rows
        got = guided.allocate_token_bitmask(4, guide.vocab_size)
        guided.fill_next_token_bitmasks(matchers, got, remaining=remaining)
        assert torch.equal(got, expected)
    # A budget that binds takes tokens away: at remaining 2 after "123-", one token
    # of 2-5 letters and EOS; a single letter (which needs another) is gone.
    plain = guided.allocate_token_bitmask(1, guide.vocab_size)
    matchers[2].fill_next_token_bitmask(plain, 0)
    one_letter = smollm2_tokenizer.convert_tokens_to_ids("a")
    assert allows(plain[0], one_letter) and not allows(expected[2], one_letter)


def allows(row: torch.Tensor, token: int) -> bool:
    return bool((int(row[token // 32]) >> (token % 32)) & 1)


def test_guides_without_budget_masks_refuse_remaining(smollm2_vocab, tiny_model, smollm2_tokenizer):
    guide = guided.compile(guided.JsonSchema(UNIQUE, whitespace="compact"), smollm2_vocab)
    with pytest.raises(ValueError, match="not for UniqueItemsGuide"):
        guide.matcher().fill_next_token_bitmask(guided.allocate_token_bitmask(1, guide.vocab_size), 0, 5)
    with pytest.raises(ValueError, match="not for UniqueItemsGuide"):
        guided.generate(tiny_model, smollm2_tokenizer, [1, 2, 3], guide, max_new_tokens=5, budget_aware=True)
    # The default leaves them as they were: unbudgeted, cut at the limit.
    r = guided.generate(tiny_model, smollm2_tokenizer, [1, 2, 3], guide, max_new_tokens=5)
    assert r.finish_reason == "length" and r.text.startswith("[")


UNIQUE = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}


# -- grammars and recursive schemas -----------------------------------------------------

LINKED_LIST = {"$defs": {"node": {"type": "object", "properties": {
    "value": {"type": "integer", "minimum": 0}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
    "required": ["value", "next"]}}, "$ref": "#/$defs/node"}
TREE = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                         "kids": {"type": "array", "items": {"$ref": "#"}}},
        "required": ["name"], "additionalProperties": False}
ARITHMETIC = guided.Grammar.from_name("arithmetic")
GRAMMAR_SPECS = [
    guided.Grammar('start: "(" start ")" | "x"'),
    guided.Grammar('start: "[" [NUM ("," NUM)*] "]"\nNUM: /[0-9]+/'),
    ARITHMETIC,
    guided.JsonSchema(LINKED_LIST, whitespace="compact"),
    guided.JsonSchema(TREE, whitespace="compact"),
]


def walked_states(guide, seed: int, walks: int = 6, steps: int = 5) -> list:
    """Matcher states on random token paths from the start (one per successor state
    a step picks, so long tokens and short ones alike)."""
    rng, completions, out = np.random.default_rng(seed), guide.completions(), []
    for _ in range(walks):
        state = guide.index.initial()
        out.append(state)
        for _ in range(steps):
            nexts = completions.successors(state, guide.row(state))
            if not nexts:
                break
            state = nexts[rng.integers(len(nexts))][1]
            out.append(state)
    return out


def fewest_to_a_sentence(guide, state, limit: int) -> int:
    """The reference: breadth-first over every token the masks allow, each step's
    states merged where equal, to the first level holding a complete sentence
    (tokens, EOS included); INFINITE past ``limit`` tokens."""
    completions, frontier = guide.completions(), {state}
    for depth in range(limit + 1):
        if any(guide.can_end(s) for s in frontier):
            return depth + 1
        frontier = {nxt for s in frontier for _, nxt in completions.successors(s, guide.row(s))}
    return INFINITE


@pytest.mark.parametrize("spec", GRAMMAR_SPECS, ids=lambda s: str(s)[:40])
def test_grammar_bounds_equal_a_search_over_the_whole_vocabulary(spec, family_vocab):
    guide = guided.compile(spec, family_vocab)
    completions = guide.completions()
    for state in walked_states(guide, seed=0):
        completions.top(state, guide.row(state))  # as a budget mask computes it
        bound = completions.bound(state)
        assert bound == fewest_to_a_sentence(guide, state, bound - 1)
        # The bound is a real token path: its witness read from the state ends complete.
        m = GrammarMatcher(guide, [state])
        assert m.accept_tokens(completions.witness(state)) and m.is_accepting()
        assert len(completions.witness(state)) == bound - 1
    assert guide.min_tokens() == completions.bound(guide.index.initial())


# if/then (a BigQuery table schema): a field read two ways at once until its "type"
# decides (a state of several readings).
FIELD = {"definitions": {
    "name": {"type": "string"}, "type": {"type": "string", "enum": ["INT", "DATE", "DATETIME", "RECORD"]},
    "field": {"type": "object", "required": ["name", "type"],
              "properties": {"name": {"$ref": "#/definitions/name"}, "type": {"$ref": "#/definitions/type"}},
              "if": {"properties": {"type": {"enum": ["STRUCT", "RECORD"]}}},
              "then": {"required": ["fields", "type", "name"],
                       "properties": {"name": {"$ref": "#/definitions/name"}, "type": {"$ref": "#/definitions/type"},
                                      "fields": {"type": "array", "items": {"$ref": "#/definitions/field"}}}}}},
    "items": {"$ref": "#/definitions/field"}, "type": "array"}


@pytest.mark.parametrize("spec, text", [(ARITHMETIC, None), (guided.JsonSchema(TREE), None),
                                        (guided.JsonSchema(LINKED_LIST), None),
                                        (guided.JsonSchema(FIELD), '[{"name": "Big tables", "type": "DATE')],
                         ids=["arithmetic", "tree", "linked_list", "readings"])
def test_grammar_successors_equal_reading_each_token(spec, text, smollm2_vocab, smollm2_tokenizer):
    """The bulk reading of a state's tokens, lexeme by lexeme (reading by reading),
    gives each token the state that reading it alone gives."""
    guide = guided.compile(spec, smollm2_vocab)
    if text is None:
        states = walked_states(guide, seed=1, walks=3, steps=6)
    else:  # the states along a text
        m = guide.matcher()
        for t in smollm2_tokenizer.encode(text, add_special_tokens=False):
            assert m.accept_token(t)
        states = m._states
        assert any(isinstance(s, Readings) for s in states)
    eos = set(smollm2_vocab.eos_token_ids)
    for state in states:
        row = guide.row(state)
        got = {int(t): nxt for tokens, nxt in guide.completions().successors(state, row) for t in tokens.tolist()}
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")[: guide.vocab_size]
        expected = {t: guide.consume_token(state, t) for t in np.flatnonzero(bits).tolist() if t not in eos}
        assert got == {t: nxt for t, nxt in expected.items() if nxt is not None}


def test_grammar_budget_masks_allow_the_tokens_that_fit(smollm2_vocab):
    """Under every budget, a token is allowed where its successor's bound fits and
    the plain mask allows it; the mask is never empty while the state's own bound fits."""
    guide = guided.compile(GRAMMAR_SPECS[1], smollm2_vocab)
    completions = guide.completions()
    for state in walked_states(guide, seed=2, walks=3, steps=4):
        row = guide.row(state)
        successors = {int(t): nxt for tokens, nxt in completions.successors(state, row) for t in tokens.tolist()}
        for remaining in range(1, completions.top(state, row) + 2):
            got = guided.allocate_token_bitmask(1, guide.vocab_size)
            GrammarMatcher(guide, [state]).fill_next_token_bitmask(got, 0, remaining)
            fits = {t for t, nxt in successors.items() if completions.bound(nxt) <= remaining - 1}
            if guide.can_end(state):
                fits |= set(smollm2_vocab.eos_token_ids)
            allowed = set(np.flatnonzero(np.unpackbits(got[0].numpy().view(np.uint8), bitorder="little")).tolist())
            if completions.bound(state) <= remaining:
                assert allowed == fits
                assert allowed


def test_an_object_with_many_required_keys_in_any_order_has_a_bound(smollm2_vocab, smollm2_tokenizer):
    """Keys in any order inside a recursive schema are lazy grammar nodes, one per set
    of keys written: 20 required keys are too many subsets to search them all, and
    the bound comes from a greedy derivation, still a valid document."""
    keys = [f"k{i}" for i in range(20)]
    schema = {"type": "object", "required": keys,
              "properties": {**{k: {"type": "integer"} for k in keys}, "kids": {"type": "array", "items": {"$ref": "#"}}}}
    guide = guided.compile(guided.JsonSchema(schema, whitespace="compact", key_order="any"), smollm2_vocab)
    shortest = guide.min_tokens()
    witness = guide.completions().witness(guide.index.initial())
    assert len(witness) + 1 == shortest
    jsonschema.validate(json.loads(smollm2_tokenizer.decode(witness)), schema)


def test_a_grammar_below_its_shortest_output_is_a_clear_error(tiny_model, smollm2_tokenizer):
    guide = guided.compile(guided.JsonSchema(LINKED_LIST, whitespace="compact"), smollm2_tokenizer)
    shortest = guide.min_tokens()
    with pytest.raises(guided.TokenBudgetError, match=f"shortest output guided finds takes {shortest} tokens"):
        guided.generate(tiny_model, smollm2_tokenizer, [1, 2, 3], guide, max_new_tokens=shortest - 1)


# -- bounded whitespace, and no loop until the limit ---------------------------------------


def _ws_runs_ok(text: str, n: int) -> bool:
    """The reference for ``max_whitespace=n``: every whitespace run at most n
    characters, one line break at most, a carriage return only before it."""
    for run in re.findall(r"[ \t\r\n]+", text):
        if len(run) > n or run.count("\n") > 1 or re.search(r"\r(?!\n)", run):
            return False
    return True


@pytest.mark.parametrize("n", [0, 1, 3, 6])
def test_max_whitespace_bounds_every_run(n, smollm2_vocab):
    """Against the reference on random layouts of one array, whitespace at every site."""
    guide = guided.compile(guided.JsonSchema({"type": "array", "items": {"type": "integer"}}, max_whitespace=n),
                           smollm2_vocab)
    rng = np.random.default_rng(n)
    pieces = [" ", "\t", "\n", "\r\n", "\r"]
    for _ in range(300):
        runs = ["".join(rng.choice(pieces, size=rng.integers(0, 4))) for _ in range(4)]
        text = f"[{runs[0]}1,{runs[1]}22,{runs[2]}3{runs[3]}]"
        assert guide.dfa.matches(text.encode()) == _ws_runs_ok(text, n), repr(text)
    assert guided.JsonSchema({"type": "integer"}, max_whitespace=0).whitespace == {"max_whitespace": 0}
    with pytest.raises(ValueError, match="bounds the flexible whitespace"):
        guided.JsonSchema({"type": "integer"}, whitespace="compact", max_whitespace=2)
    with pytest.raises(ValueError, match="integer >= 0"):
        guided.JsonSchema({"type": "integer"}, max_whitespace=-1)


class _Bias:
    """Pushes the model toward the given tokens (a model that loves whitespace and commas)."""

    def __init__(self, tokens, by=12.0):
        self.tokens = torch.tensor(sorted(tokens))
        self.by = by

    def __call__(self, input_ids, scores):
        scores[:, self.tokens] += self.by
        return scores


@pytest.mark.parametrize("whitespace", [None, 4])
def test_no_output_loops_on_whitespace_or_an_array_until_the_limit(whitespace, tiny_model, smollm2_tokenizer):
    """A model pushed to whitespace and to one more item: without a budget the array
    runs to the limit; with one, every output closes in time and every whitespace run
    keeps its bound."""
    schema = {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "integer"}}},
              "required": ["xs"], "additionalProperties": False}
    guide = guided.compile(guided.JsonSchema(schema, max_whitespace=whitespace), smollm2_tokenizer)
    vocab = guide.vocab
    loves = [t for t, b in enumerate(vocab.token_bytes) if b and (b.strip(b" \t\r\n") in (b"", b",", b"1", b"7"))]
    bias = _Bias(loves)
    limit = max(_flexible_max(whitespace), 1)
    budget = guide.min_tokens() + 12
    cut = 0
    for seed in range(20):
        free = guided.generate(tiny_model, smollm2_tokenizer, [1, 2, 3], guide, max_new_tokens=budget,
                               temperature=1.0, seed=seed, processors=[bias], budget_aware=False)
        cut += free.finish_reason == "length"
        r, = finished_within(tiny_model, smollm2_tokenizer, guide, budget, [seed], processors=[bias])
        jsonschema.validate(json.loads(r.text), schema)
        for run in re.findall(r"[ \t\r\n]+", free.text + r.text):
            assert len(run) <= limit and run.count("\n") <= 1, repr(run)
    assert cut >= 15


def _flexible_max(n):
    return 28 if n is None else n  # the default: two spaces or tabs, a line break, 24 more


# -- other loops: speculative decoding, beam search ---------------------------------------


def test_speculative_decoding_keeps_the_budget(tiny_model, smollm2_tokenizer):
    """Each verified position is masked with the tokens left there: greedy output is
    plain budget-aware decoding's, and sampled outputs finish within the budget."""
    from guided.decoding.speculative import DraftModel, ForcedTokens

    guide = guided.compile(guided.JsonSchema(OPEN_SCHEMA), smollm2_tokenizer)
    for budget in (guide.min_tokens(), guide.min_tokens() + 6):
        plain = guided.generate(tiny_model, smollm2_tokenizer, [1, 2, 3], guide, max_new_tokens=budget)
        for drafters in ("auto", [ForcedTokens(smollm2_tokenizer), DraftModel(tiny_model)]):
            fast = guided.generate(tiny_model, smollm2_tokenizer, [1, 2, 3], guide, max_new_tokens=budget,
                                   speculative=drafters, num_draft_tokens=4)
            assert fast.token_ids == plain.token_ids and fast.finish_reason == plain.finish_reason
            assert fast.stats.draft_tokens > 0
        for r in finished_within(tiny_model, smollm2_tokenizer, guide, budget, range(30), speculative="auto",
                                 num_draft_tokens=4):
            jsonschema.validate(json.loads(r.text), OPEN_SCHEMA)


def test_beam_search_hypotheses_finish_within_the_budget(tiny_model, smollm2_tokenizer):
    guide = guided.compile(guided.JsonSchema(OPEN_SCHEMA), smollm2_tokenizer)
    shortest = guide.min_tokens()
    for budget in range(shortest, shortest + 8, 2):
        r = guided.generate(tiny_model, smollm2_tokenizer, [1, 2, 3], guide, max_new_tokens=budget, num_beams=3)
        assert r.finish_reason in ("eos", "complete"), (budget, r.text)
        assert len(r.token_ids) + (r.finish_reason == "eos") <= budget
        jsonschema.validate(json.loads(r.text), OPEN_SCHEMA)
    cut = guided.generate(tiny_model, smollm2_tokenizer, [1, 2, 3], guide, max_new_tokens=shortest + 2, num_beams=3,
                          budget_aware=False)
    assert cut.finish_reason == "length"


def test_tool_calls_finish_within_the_budget(tiny_model, smollm2_tokenizer):
    """Tool calls compile to an automaton: a required call is whole by the limit."""
    tools = [{"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"]}}}]
    spec = guided.ToolCalls(tools, tool_choice="required")
    guide = guided.compile(spec, smollm2_tokenizer)
    budget = guide.min_tokens() + 4
    for r in finished_within(tiny_model, smollm2_tokenizer, guide, budget, range(20)):
        _, calls = spec.parse(r.text)
        assert calls and all(c["function"]["name"] == "add" for c in calls), r.text
        for c in calls:
            jsonschema.validate(json.loads(c["function"]["arguments"]), tools[0]["function"]["parameters"])


@pytest.mark.parametrize("max_thinking_tokens", [None, 3])
def test_thinking_then_the_answer_within_the_budget(max_thinking_tokens, tiny_model, smollm2_tokenizer):
    """The block is closed in time for the shortest answer; the answer then finishes."""
    spec = guided.AfterThinking(guided.JsonSchema(OPEN_SCHEMA), max_thinking_tokens=max_thinking_tokens)
    guide = guided.compile(spec, smollm2_tokenizer)
    shortest = guide.min_tokens()
    assert shortest == guide.think.min_tokens() - 1 + guide.answer.min_tokens()
    for budget in (shortest, shortest + 3, shortest + 10):
        for r in finished_within(tiny_model, smollm2_tokenizer, guide, budget, range(15)):
            thought, answer = spec.split(r.text)
            assert r.text.startswith("<think>") and "</think>" not in thought, r.text
            jsonschema.validate(json.loads(answer), OPEN_SCHEMA)
    with pytest.raises(guided.TokenBudgetError):
        guided.generate(tiny_model, smollm2_tokenizer, [1, 2, 3], guide, max_new_tokens=shortest - 1)
    cut = sum(guided.generate(tiny_model, smollm2_tokenizer, [1, 2, 3], guide, max_new_tokens=shortest + 3,
                              temperature=1.0, seed=seed, budget_aware=False).finish_reason == "length"
              for seed in range(10))
    assert cut >= 5  # without budget-aware masks, the same runs are cut
