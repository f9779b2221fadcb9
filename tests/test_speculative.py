"""Speculative decoding: exact (greedy output identical, sampled distribution equal to
plain constrained sampling), drafts always allowed, fewer target forward passes."""

from __future__ import annotations

import math
from collections import Counter

import pytest
import torch

import guided
from guided.decoding.speculative import (
    DraftModel,
    EarlyExit,
    ForcedTokens,
    PromptLookup,
    default_drafters,
    forced_bytes,
    propose,
    truncated_model,
)

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 3},
    },
    "required": ["name", "age", "tags"],
    "additionalProperties": False,
}
PROMPT = 'Person: {"name": "Ada", "age": 36, "tags": ["red", "blue"]} Another person:'


@pytest.fixture(scope="module")
def other_tiny_model(tiny_model):
    """A second random model over the same (padded) vocabulary: a draft model whose
    distribution differs from the target's."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(1)
    model = LlamaForCausalLM(tiny_model.config).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(40.0)
    return model


def drafter_sets(tokenizer, draft_model=None, target=None):
    sets = {"forced": [ForcedTokens(tokenizer)], "lookup": [PromptLookup()], "auto": default_drafters(tokenizer)}
    if draft_model is not None:
        sets["draft_model"] = [DraftModel(draft_model)]
        sets["combined"] = [ForcedTokens(tokenizer), PromptLookup(), DraftModel(draft_model)]
    if target is not None:
        sets["early_exit"] = [EarlyExit(target, 1)]
    return sets


@pytest.mark.parametrize("which", ["forced", "lookup", "auto", "draft_model", "combined", "early_exit"])
@pytest.mark.parametrize(
    "spec",
    [
        guided.JsonSchema(PERSON, whitespace="compact"),
        guided.Regex(r"(Ada|Bob) is [0-9]{2} years old, tags: (red|green|blue)(, (red|green|blue)){0,2}\."),
        guided.Grammar.from_name("json"),
        None,
    ],
    ids=["schema", "regex", "grammar", "free"],
)
def test_greedy_output_is_identical(tiny_model, other_tiny_model, smollm2_tokenizer, spec, which):
    plain = guided.generate(tiny_model, smollm2_tokenizer, PROMPT, spec, max_new_tokens=40, chat=False)
    fast = guided.generate(tiny_model, smollm2_tokenizer, PROMPT, spec, max_new_tokens=40, chat=False,
                           speculative=drafter_sets(smollm2_tokenizer, other_tiny_model, tiny_model)[which])
    assert fast.token_ids == plain.token_ids
    assert fast.finish_reason == plain.finish_reason
    # Plain decoding: the prompt's pass, then one per token after the first (and the
    # EOS step). Each kept draft saves a pass; a round that ends on a draft costs one.
    plain_passes = len(plain.token_ids) + (plain.finish_reason == "eos")
    assert fast.stats["target_forward_passes"] <= plain_passes - fast.stats.accepted_draft_tokens + 2


@pytest.mark.parametrize("which", ["lookup", "draft_model"])
def test_free_text_after_a_chat_prompt_is_identical(tiny_model, other_tiny_model, smollm2_tokenizer, which):
    """The chat template holds EOS tokens (<|im_end|>): a drafter may find them in the
    context, but EOS is never drafted, so the text ends where plain decoding ends it."""
    prompt = "Repeat: the cat sat on the mat. The cat sat on the mat."
    plain = guided.generate(tiny_model, smollm2_tokenizer, prompt, None, max_new_tokens=30)
    fast = guided.generate(tiny_model, smollm2_tokenizer, prompt, None, max_new_tokens=30,
                           speculative=drafter_sets(smollm2_tokenizer, other_tiny_model)[which])
    assert fast.token_ids == plain.token_ids and fast.finish_reason == plain.finish_reason


def test_a_draft_model_equal_to_the_target_is_always_right(tiny_model, smollm2_tokenizer):
    spec = guided.JsonSchema(PERSON, whitespace="compact")
    r = guided.generate(tiny_model, smollm2_tokenizer, PROMPT, spec, max_new_tokens=40, chat=False,
                        speculative=[DraftModel(tiny_model)], num_draft_tokens=4)
    assert r.stats.accepted_draft_tokens == r.stats.draft_tokens > 0


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_draft_model_uses_generations_processors_and_watermark(tiny_model, smollm2_tokenizer, temperature):
    """The draft model drafts from the same chain as generation (processors, warpers,
    watermark with its green list among the allowed tokens): the target drafting for
    itself is then right every time, and the output is plain decoding's."""
    from guided.steering import RepetitionPenalty
    from guided.watermark import WatermarkLogitsProcessor

    spec = guided.compile(guided.JsonSchema(PERSON, whitespace="compact"), smollm2_tokenizer)

    def run(speculative):
        # The draft model drafts without the budget: both runs leave it off, so that every draft is kept.
        wm = WatermarkLogitsProcessor(tiny_model.config.vocab_size, b"speculative-test-key-0001", guide=spec)
        return guided.generate(tiny_model, smollm2_tokenizer, PROMPT, spec, max_new_tokens=30, chat=False,
                               temperature=temperature, seed=3, processors=[RepetitionPenalty(1.5)], watermark=wm,
                               speculative=speculative, num_draft_tokens=4, budget_aware=False)

    plain, fast = run(None), run([DraftModel(tiny_model)])
    assert fast.stats.draft_tokens > 0
    assert fast.stats.accepted_draft_tokens == fast.stats.draft_tokens
    if temperature == 0:
        assert fast.token_ids == plain.token_ids


def test_schema_drafts_save_forward_passes(tiny_model, smollm2_tokenizer):
    spec = guided.JsonSchema(PERSON, whitespace="compact")
    r = guided.generate(tiny_model, smollm2_tokenizer, PROMPT, spec, max_new_tokens=60, chat=False, speculative="auto")
    assert r.stats.accepted_draft_tokens >= 5  # the keys and punctuation are forced
    assert r.stats["target_forward_passes"] < len(r.token_ids)


def test_every_draft_is_accepted_by_the_matcher(smollm2_vocab, smollm2_tokenizer):
    guide = guided.compile(guided.JsonSchema(PERSON, whitespace="compact"), smollm2_vocab)
    context = smollm2_tokenizer.encode(PROMPT + ' {"name":"Ada","age":3', add_special_tokens=False)
    m = guide.matcher()
    assert m.accept_tokens(smollm2_tokenizer.encode('{"name":"Ada","age":3', add_special_tokens=False))
    for drafters in drafter_sets(smollm2_tokenizer).values():
        fork = m.fork()
        draft, _ = propose(drafters, context, fork, 12)
        check = m.fork()
        assert check.accept_tokens(draft), draft
    before = m.allowed_token_ids()
    propose(default_drafters(smollm2_tokenizer), context, m.fork(), 12)
    assert m.allowed_token_ids() == before  # proposing works on a fork only


def test_forced_tokens_learn_the_targets_split(smollm2_vocab, smollm2_tokenizer):
    """The tokenizer splits '{"name":' as '{"' 'name' '":'; a model that writes '{' '"'
    rejects the first draft. Told what the target kept, the drafter drafts '{' from
    then on, for any forced string whose canonical split begins with '{"'."""
    enc = lambda text: smollm2_tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    guide = guided.compile(guided.Regex(r'\{"(name|nom)":"[a-z]+"\}'), smollm2_vocab)
    other = guided.compile(guided.Regex(r'\{"age":[0-9]+\}'), smollm2_vocab)
    drafter = ForcedTokens(smollm2_tokenizer, splits={})
    prompt = enc("Answer:")
    assert drafter.propose(prompt, guide.matcher(), 4) == enc('{"')
    brace, quote = enc("{")[0], enc('"')[0]
    # The target wrote '{' instead; the next proposal starts from there.
    m = guide.matcher()
    assert m.accept_token(brace)
    assert drafter.propose(prompt + [brace], m, 4)[:1] == [quote]
    assert drafter.splits == {enc('{"')[0]: brace}
    assert drafter.propose(prompt, other.matcher(), 1) == [brace]


def test_forced_tokens_draft_the_targets_layout_where_the_spec_leaves_a_choice(smollm2_vocab, smollm2_tokenizer):
    """With flexible whitespace nothing is forced after '{' or ',': the layout is the
    model's choice. Once the drafter has seen the target lay out one object (asked at
    every step, as the loop asks it), it drafts that layout and the forced keys
    between its choices, for the next object of the schema (not the values: content
    is left to the other drafters), and, by the two tokens before a choice, for
    another schema's object too."""
    enc = lambda text: smollm2_tokenizer.encode(text, add_special_tokens=False)
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"], "additionalProperties": False}
    guide = guided.compile(guided.JsonSchema(schema), smollm2_vocab)
    prompt, ids = enc("Answer:"), enc('{\n  "name": "Bob",\n  "age": 7\n}')
    fresh = ForcedTokens(smollm2_tokenizer, splits={}, habits={})
    assert fresh.propose(prompt, guide.matcher(), 8) == []  # '{' or whitespace: a choice, nothing seen yet
    drafter = ForcedTokens(smollm2_tokenizer, splits={}, habits={})
    m = guide.matcher()
    for i, t in enumerate(ids):
        drafter.propose(prompt + ids[:i], m.fork(), 8)
        assert m.accept_token(t)
    drafter.propose(prompt + ids, m.fork(), 8)  # (learns the last token)
    m = guide.matcher()
    assert m.accept_tokens(ids[:1])
    again = drafter.propose(prompt + ids[:1], m, len(ids))
    assert again == ids[1:6]  # '\n ' ' "' 'name' '":' ' "': the layout, the forced key, up to the value
    m = guide.matcher()
    assert m.accept_tokens(ids[:7])  # ... "Bob
    assert drafter.propose(prompt + ids[:7], m, len(ids)) == ids[7:13]  # '",' '\n ' ' "' 'age' '":' ' '
    other = guided.compile(guided.JsonSchema({"type": "object", "properties": {"city": {"type": "string"}},
                                              "required": ["city"]}), smollm2_vocab)
    m = other.matcher()
    assert m.accept_tokens(enc("{"))
    got = drafter.propose(prompt + enc("{"), m, 4)
    assert got[:1] == ids[1:2]  # the newline and indent after '{', learned on the other schema


def test_early_exit_is_the_targets_first_layers(tiny_model):
    """The view runs layer 0 only, with the target's own weights; the target is untouched."""
    from transformers import LlamaForCausalLM

    ids = torch.tensor([[5, 17, 300, 42]])
    with torch.no_grad():
        full_before = tiny_model(input_ids=ids).logits
        view = truncated_model(tiny_model, 1)
        config = type(tiny_model.config).from_dict({**tiny_model.config.to_dict(), "num_hidden_layers": 1})
        reference = LlamaForCausalLM(config).eval()
        missing, _ = reference.load_state_dict(tiny_model.state_dict(), strict=False)
        assert not [k for k in missing if "rotary" not in k]
        assert torch.allclose(view(input_ids=ids).logits, reference(input_ids=ids).logits, atol=1e-5)
        assert torch.equal(tiny_model(input_ids=ids).logits, full_before)
    assert len(tiny_model.model.layers) == tiny_model.config.num_hidden_layers == 2
    assert view.lm_head is tiny_model.lm_head and view.model.layers[0] is tiny_model.model.layers[0]
    with pytest.raises(ValueError, match="num_layers"):
        EarlyExit(tiny_model, 2)


def test_forced_bytes_of_a_key(smollm2_vocab):
    guide = guided.compile(guided.Regex(r'\{"name":"[a-z]+"\}'), smollm2_vocab)
    assert forced_bytes(guide.dfa, guide.dfa.start) == b'{"name":"'


def test_prompt_lookup_continues_the_latest_match():
    lookup = PromptLookup(max_ngram=2)
    assert lookup.propose([5, 6, 7, 8, 1, 5, 6, 9, 2, 5, 6], None, 3) == [9, 2, 5]
    assert lookup.propose([1, 2, 3], None, 3) == []


def _exact_string_distribution(model, vocab, prompt_ids, guide):
    """Probability of every output string under plain constrained sampling
    (temperature 1): the sum over its token paths of the masked softmax products."""
    out: Counter = Counter()

    def walk(ids, matcher, prob):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0, -1].float()
        allowed = matcher.allowed_token_ids()
        p = torch.softmax(logits[allowed], dim=-1).tolist()
        for tok, q in zip(allowed, p):
            if tok in guide.eos_token_ids:
                out[vocab.decode(ids[len(prompt_ids):]).decode()] += prob * q
                continue
            child = matcher.fork()
            assert child.accept_token(tok)
            if child.is_terminated():
                out[vocab.decode(ids[len(prompt_ids):] + [tok]).decode()] += prob * q
            else:
                walk(ids + [tok], child, prob * q)

    walk(list(prompt_ids), guide.matcher(), 1.0)
    return out


def test_sampled_outputs_follow_the_plain_distribution(tiny_model, other_tiny_model, smollm2_tokenizer, smollm2_vocab):
    """Chi-square against the exact distribution, for each drafter (fixed seeds)."""
    spec = guided.Regex(r"x(ab|ba|bb)yz")
    guide = guided.compile(spec, smollm2_vocab)
    prompt = smollm2_tokenizer.encode("xabyz xbayz x", add_special_tokens=False)
    exact = _exact_string_distribution(tiny_model, smollm2_vocab, prompt, guide)
    assert set(exact) == {"xabyz", "xbayz", "xbbyz"} and abs(sum(exact.values()) - 1) < 1e-6
    n = 150
    for which, drafters in drafter_sets(smollm2_tokenizer, other_tiny_model, tiny_model).items():
        if which == "combined":
            continue  # its parts are each checked; the chain is exact if they are
        counts, drafted = Counter(), 0
        for seed in range(n):
            r = guided.generate(tiny_model, smollm2_tokenizer, prompt, guide, temperature=1.0, seed=seed,
                                max_new_tokens=10, speculative=drafters)
            counts[r.text] += 1
            drafted += r.stats.accepted_draft_tokens
        assert drafted >= n // 3  # drafts were really used
        assert chi_square_p_value(counts, exact, n) > 1e-3, (which, counts, exact)


def chi_square_p_value(counts: Counter, probs: dict, n: int) -> float:
    """Pearson's test, with categories expected fewer than 5 times merged into the
    next rarer-but-larger one (1 or 2 degrees of freedom here)."""
    cells = sorted(([n * p, counts[s]] for s, p in probs.items()), reverse=True)
    while len(cells) > 1 and cells[-1][0] < 5:
        expected, observed = cells.pop()
        cells[-1][0] += expected
        cells[-1][1] += observed
    stat = sum((o - e) ** 2 / e for e, o in cells)
    df = len(cells) - 1
    if df == 1:
        return math.erfc(math.sqrt(stat / 2))
    if df == 2:
        return math.exp(-stat / 2)
    raise ValueError(f"{df} degrees of freedom")


def test_feed_costs_pad_only_to_a_length_measured_cheaper():
    """A verification feed is padded to a longer one only where that length measured
    cheaper (by a margin), never before the feed's own length is measured, and never
    where passes are not timed (GPU)."""
    from guided.decoding.feed_costs import MIN_SAMPLES, FeedCosts

    costs = FeedCosts()
    for _ in range(MIN_SAMPLES):
        costs.record(4, 0.080)
    assert costs.padding(2) == costs.padding(3) == 0  # 2 and 3 not measured yet
    for _ in range(MIN_SAMPLES):
        costs.record(2, 0.093)
        costs.record(3, 0.114)
    assert (costs.padding(2), costs.padding(3), costs.padding(1)) == (2, 1, 0)
    faster = FeedCosts()  # the other kind of CPU: 4 rows switch to a slower kernel
    for n, seconds in ((2, 0.063), (3, 0.066), (4, 0.093)):
        for _ in range(MIN_SAMPLES):
            faster.record(n, seconds)
    assert faster.padding(2) == faster.padding(3) == 0
    close = FeedCosts()  # within timing noise: no padding
    for n, seconds in ((3, 0.100), (4, 0.098)):
        for _ in range(MIN_SAMPLES):
            close.record(n, seconds)
    assert close.padding(3) == 0
    gpu = FeedCosts(timed=False)
    for n, seconds in ((3, 0.114), (4, 0.080)):
        for _ in range(MIN_SAMPLES):
            gpu.record(n, seconds)
    assert gpu.padding(3) == 0 and gpu.cost(4) is None


def test_padded_verification_feeds_keep_the_output(tiny_model, smollm2_tokenizer, monkeypatch):
    """Where feeds are padded (dummy positions whose logits and cache entries are
    dropped), greedy output is still plain decoding's."""
    from guided.decoding import speculative
    from guided.decoding.feed_costs import FeedCosts

    pads = []

    class Padding(FeedCosts):
        def padding(self, n):
            pads.append(2)
            return 2

    monkeypatch.setattr(speculative.FeedCosts, "for_model", classmethod(lambda cls, model: Padding()))
    spec = guided.JsonSchema(PERSON, whitespace="compact")
    plain = guided.generate(tiny_model, smollm2_tokenizer, PROMPT, spec, max_new_tokens=40, chat=False)
    fast = guided.generate(tiny_model, smollm2_tokenizer, PROMPT, spec, max_new_tokens=40, chat=False,
                           speculative="auto")
    assert any(pads)
    assert fast.token_ids == plain.token_ids and fast.finish_reason == plain.finish_reason


def test_feed_costs_verify_the_drafts_that_pay_for_their_place():
    """With passes of 4+ positions measured much dearer than 3, a draft of three
    likely tokens is cut to two (more expected tokens per second); four certain ones
    are kept whole; an unmeasured length or untimed passes keep every draft."""
    from guided.decoding.feed_costs import MIN_SAMPLES, FeedCosts

    costs = FeedCosts()
    for n, seconds in ((1, 0.059), (2, 0.063), (3, 0.066), (4, 0.093), (5, 0.097)):
        for _ in range(MIN_SAMPLES):
            costs.record(n, seconds)
    assert costs.best_length([0.9, 0.9, 0.9]) == 2
    assert costs.best_length([1.0] * 4) == 4
    assert costs.best_length([0.9] * 6) == 6  # 7 positions never measured: measure them
    assert FeedCosts(timed=False).best_length([0.1] * 3) == 3


@pytest.mark.parametrize("max_new_tokens", [1, 2, 3])
def test_a_budget_of_a_few_tokens_is_plain_decodings(tiny_model, smollm2_tokenizer, max_new_tokens):
    """With no room for a draft (the last token is the verification's own), the loop
    still gives plain decoding's output."""
    spec = guided.JsonSchema(PERSON, whitespace="compact")
    kwargs = dict(max_new_tokens=max_new_tokens, chat=False, budget_aware=False)
    plain = guided.generate(tiny_model, smollm2_tokenizer, PROMPT, spec, **kwargs)
    fast = guided.generate(tiny_model, smollm2_tokenizer, PROMPT, spec, speculative="auto", **kwargs)
    assert fast.token_ids == plain.token_ids and fast.finish_reason == plain.finish_reason == "length"
