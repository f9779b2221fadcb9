"""Structural tags (``guided.StructuralTag``): XGrammar's documented examples, a
reference written here for tool-call structures on generated texts (canonical and
random token segmentations), and clear errors."""

from __future__ import annotations

import json
import random
import re

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guided
from guided.bitmask import allocate_token_bitmask
from guided.grammars.structural_tag import compile_structural_tag, parse_structural_tag


def accepts(fmt, text: str) -> bool:
    return compile_structural_tag(parse_structural_tag(fmt), "flexible").matches(text.encode())


def const(value):
    return {"type": "const_string", "value": value}


ANY = {"type": "any_text"}
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"]}


# -- XGrammar's documentation (docs/tutorials/structural_tag.md), as it documents -----------


def test_triggered_tags_accept_the_documented_outputs():
    fmt = {"type": "triggered_tags", "triggers": ["<function="], "tags": [
        {"begin": "<function=func1>", "content": {"type": "json_schema", "json_schema": PERSON}, "end": "</function>"},
        {"begin": "<function=func2>", "content": {"type": "json_schema", "json_schema": PERSON}, "end": "</function>"},
    ], "at_least_one": False, "stop_after_first": False}
    for text in ['<function=func1>{"name": "John", "age": 30}</function>',
                 '<function=func2>{"name": "Jane", "age": 25}</function>',
                 'any_text<function=func1>{"name": "John", "age": 30}</function>any_text1'
                 '<function=func2>{"name": "Jane", "age": 25}</function>any_text2']:
        assert accepts(fmt, text), text
    # A trigger starts a tag: what follows must be one of them.
    assert not accepts(fmt, 'x<function=func3>{"name": "J", "age": 1}</function>')
    assert not accepts(fmt, '<function=func1>{"name": "John"}</function>')  # age is required
    assert not accepts(fmt, '<function=func1>{"name": "John", "age": 30}')  # not closed


def test_at_least_one_starts_with_a_tag_and_stop_after_first_ends_after_it():
    tag = {"begin": "<f=a>", "content": const("1"), "end": "</f>"}
    base = {"type": "triggered_tags", "triggers": ["<f="], "tags": [tag]}
    at_least_one = dict(base, at_least_one=True)
    assert accepts(at_least_one, "<f=a>1</f>text after") and not accepts(at_least_one, "")
    assert not accepts(at_least_one, "text first<f=a>1</f>")
    stop = dict(base, stop_after_first=True)
    assert accepts(stop, "text<f=a>1</f>") and accepts(stop, "only text") and accepts(stop, "")
    assert not accepts(stop, "<f=a>1</f>more")
    both = dict(base, at_least_one=True, stop_after_first=True)
    assert accepts(both, "<f=a>1</f>") and not accepts(both, "") and not accepts(both, "<f=a>1</f>x")


def test_tags_with_separator_as_documented():
    fmt = {"type": "tags_with_separator", "separator": ",", "at_least_one": False, "stop_after_first": False,
           "tags": [{"type": "tag", "begin": "<function=func1>", "end": "</function>",
                     "content": {"type": "json_schema", "json_schema": PERSON}}]}
    call = '<function=func1>{"name": "John", "age": 30}</function>'
    for text in ["", call, call + "," + call, call + "," + call + "," + call]:
        assert accepts(fmt, text)
    for text in [call + ",", "text", call + " " + call]:
        assert not accepts(fmt, text)
    assert not accepts(dict(fmt, at_least_one=True), "")
    assert not accepts(dict(fmt, stop_after_first=True), call + "," + call)


def test_any_text_in_a_tag_stops_at_the_first_end_string():
    think = {"type": "tag", "begin": "<think>", "content": ANY, "end": "</think>"}
    assert accepts(think, "<think>a < b, so </thinking is not the end</think>")
    assert not accepts(think, "<think>done</think>again</think>")
    # Elsewhere in the tag's content free text may not hold the end string at all.
    seq = dict(think, content={"type": "sequence", "elements": [ANY, const("!")]})
    assert accepts(seq, "<think>x!y!</think>") and not accepts(seq, "<think>x</think>!</think>")
    # Outside any tag, any text (an any_text followed by more is plain concatenation).
    assert accepts({"type": "sequence", "elements": [ANY, const("END")]}, "abENDcEND")


def test_think_then_triggered_tool_calls_the_documented_force_think_example():
    fmt = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "tag", "begin": "<think>", "content": ANY, "end": "</think>"},
        {"type": "triggered_tags", "triggers": ["<function="], "tags": [
            {"begin": "<function=func1>", "content": {"type": "json_schema", "json_schema": PERSON},
             "end": "</function>"}]}]}}
    assert accepts(fmt, '<think>plan</think>Sure. <function=func1>{"name": "A", "age": 1}</function> Done.')
    assert not accepts(fmt, 'Sure. <function=func1>{"name": "A", "age": 1}</function>')  # no thinking
    assert not accepts(fmt, '<think>plan</think><function=func1>{"name": "A"}</function>')


def test_the_older_structures_and_triggers_form_reads_as_triggered_tags():
    legacy = {"type": "structural_tag", "triggers": ["<function="], "structures": [
        {"begin": "<function=get_weather>", "schema": json.dumps({"type": "object", "properties": {
            "city": {"type": "string"}}, "required": ["city"]}), "end": "</function>"}]}
    assert accepts(legacy, 'Let me check.<function=get_weather>{"city": "Paris"}</function>')
    assert not accepts(legacy, '<function=get_weather>{"town": "Paris"}</function>')


def test_combinators_and_text_formats():
    assert accepts({"type": "regex", "pattern": r"\d{2}-\w+"}, "12-ab") and not accepts(
        {"type": "regex", "pattern": r"\d{2}"}, "123")
    opt = {"type": "sequence", "elements": [const("a"), {"type": "optional", "content": const("b")}]}
    assert accepts(opt, "a") and accepts(opt, "ab") and not accepts(opt, "abb")
    rep = {"type": "repeat", "min": 2, "max": 3, "content": const("x")}
    assert [accepts(rep, "x" * n) for n in range(5)] == [False, False, True, True, False]
    assert accepts({"type": "plus", "content": const("x")}, "xxxx") and not accepts(
        {"type": "plus", "content": const("x")}, "")
    either = {"type": "or", "elements": [const("yes"), {"type": "json_schema", "json_schema": {"type": "integer"}}]}
    assert accepts(either, "yes") and accepts(either, "-12") and not accepts(either, "no")
    excl = {"type": "any_text", "excludes": ["DROP TABLE"]}
    assert accepts(excl, "SELECT 1") and not accepts(excl, "x; DROP TABLE t")
    assert accepts(ANY, "héllo 日本 \n\t") and not compile_structural_tag(parse_structural_tag(ANY)).matches(b"\xff")


# -- a reference for tool-call structures, on generated texts ----------------------------

TOOLS = {
    "get_weather": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                                     "unit": {"enum": ["c", "f"]}},
                    "required": ["city"], "additionalProperties": False},
    "add": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"], "additionalProperties": False},
}
TRIGGER, END = "<tool_call>", "</tool_call>"


def tool_structure(at_least_one: bool, stop_after_first: bool) -> dict:
    return {"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": [TRIGGER], "at_least_one": at_least_one,
        "stop_after_first": stop_after_first, "excludes": ["<|im_end|>"],
        "tags": [{"begin": f'{TRIGGER}{{"name":"{name}","arguments":', "end": "}" + END,
                  "content": {"type": "json_schema", "json_schema": schema}} for name, schema in TOOLS.items()]}}


def _compact_json_at(text: str, at: int):
    """The compact JSON value starting at ``at`` and where it ends, or None."""
    try:
        value, end = json.JSONDecoder(object_pairs_hook=lambda pairs: pairs).raw_decode(text, at)
    except json.JSONDecodeError:
        return None
    in_string = escaped = False
    for ch in text[at:end]:  # compact: no whitespace outside strings
        if in_string:
            escaped, in_string = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            in_string = True
        elif ch in " \t\r\n":
            return None
    return value, end


def _valid_arguments(pairs, schema) -> bool:
    if not isinstance(pairs, list):
        return False
    keys = [k for k, _ in pairs]
    order = list(schema["properties"])
    if len(set(keys)) != len(keys) or keys != [k for k in order if k in keys]:
        return False  # each key once, in the schema's order
    value = {k: v for k, v in pairs}
    return jsonschema.Draft202012Validator(schema).is_valid(value)


def reference(text: str, at_least_one: bool, stop_after_first: bool) -> bool:
    """Whether ``text`` is free text and tool calls as ``tool_structure`` describes,
    read left to right with regexes and ``json`` (no automaton)."""
    calls, at = 0, 0
    head = re.compile(re.escape(TRIGGER) + r'\{"name":"(\w+)","arguments":')
    while True:
        hit = text.find(TRIGGER, at)
        free = text[at:] if hit < 0 else text[at:hit]
        if "<|im_end|>" in free or (at_least_one and calls == 0 and free) or (stop_after_first and calls and free):
            return False
        if hit < 0:
            return calls >= 1 or not at_least_one
        if stop_after_first and calls:
            return False
        m = head.match(text, hit)
        if not m or m.group(1) not in TOOLS:
            return False
        got = _compact_json_at(text, m.end())
        if got is None or not _valid_arguments(got[0], TOOLS[m.group(1)]):
            return False
        if not text.startswith("}" + END, got[1]):
            return False
        at, calls = got[1] + len("}" + END), calls + 1


_FREE = st.lists(st.sampled_from(list("ab <>{}\"/_:,\nétool_cal|im_end") + ["<tool", "call>", "</tool", "<|im"]),
                max_size=8).map("".join)


@st.composite
def tool_texts(draw):
    """Free text and tool calls (valid, or with a wrong name or arguments), then maybe
    a random edit."""
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        parts.append(draw(_FREE))
        name = draw(st.sampled_from([*TOOLS, "nope"]))
        args = draw(st.sampled_from([{"city": "Paris"}, {"city": "Oslo", "unit": "c"}, {"unit": "f", "city": "X"},
                                     {"a": 1, "b": -20}, {"b": 1, "a": 2}, {"a": "1", "b": 2}, {}]))
        parts.append(f'{TRIGGER}{{"name":"{name}","arguments":{json.dumps(args, separators=(",", ":"))}}}{END}')
    parts.append(draw(_FREE))
    text = "".join(parts)
    if text and draw(st.booleans()):
        i = draw(st.integers(0, len(text) - 1))
        text = text[:i] + draw(st.sampled_from(["", "x", "<", "}", '"'])) + text[i + 1:]
    return text


@pytest.fixture(scope="module")
def tool_guides(smollm2_vocab):
    return {(a, s): guided.compile(guided.StructuralTag(tool_structure(a, s), whitespace="compact"), smollm2_vocab)
            for a in (False, True) for s in (False, True)}


def _matcher_accepts(guide, ids: list[int]) -> bool:
    m = guide.matcher()
    bitmask = allocate_token_bitmask(1, guide.vocab_size)
    words = bitmask.numpy()[0]
    for t in ids + [guide.eos_token_ids[0]]:
        m.fill_next_token_bitmask(bitmask, 0)
        if not (int(words[t >> 5]) >> (t & 31)) & 1:
            return False
        if not m.accept_token(t):
            return False
    return True


def _segmented(tokenizer, text: str, rng: random.Random) -> list[int]:
    """A non-canonical tokenization of ``text``: cut at random places, each piece
    tokenized alone."""
    cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(0, 6)))) if len(text) > 1 else []
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    return [t for p in pieces for t in tokenizer.encode(p, add_special_tokens=False)]


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(text=tool_texts(), at_least_one=st.booleans(), stop_after_first=st.booleans(), seed=st.integers(0, 9))
def test_tool_call_structures_agree_with_the_reference(text, at_least_one, stop_after_first, seed, tool_guides,
                                                       smollm2_tokenizer):
    expected = reference(text, at_least_one, stop_after_first)
    guide = tool_guides[(at_least_one, stop_after_first)]
    assert guide.dfa.matches(text.encode()) == expected, text
    canonical = smollm2_tokenizer.encode(text, add_special_tokens=False)
    assert _matcher_accepts(guide, canonical) == expected, text
    if expected:  # every way of writing an accepted text is accepted
        assert _matcher_accepts(guide, _segmented(smollm2_tokenizer, text, random.Random(seed))), text


def test_a_random_model_writes_only_what_the_structure_accepts(tiny_model, smollm2_tokenizer):
    spec = guided.StructuralTag(tool_structure(True, False), whitespace="compact")
    for seed in range(8):
        result = guided.generate(tiny_model, smollm2_tokenizer, "Call a tool.", spec, max_new_tokens=60,
                                 temperature=1.0, seed=seed)
        if result.finish_reason == "eos":
            assert reference(result.text, True, False), result.text
        else:  # cut by the token limit: a prefix of an accepted text
            assert result.finish_reason == "length" and result.text.startswith(TRIGGER)


# -- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt, message", [
    ({"type": "grammar", "grammar": "root ::= \"a\""}, r"^/format: grammar content is not supported"),
    ({"type": "token", "token": 5}, r"^/format: format 'token' is not supported"),
    ({"type": "tag", "begin": "<a>", "content": {"type": "any_text", "excluded_str": ["x"]}, "end": "</a>"},
     r'^/format/content: unknown keys \[.excluded_str.\] in any_text \(XGrammar names it "excludes"\)'),
    ({"type": "triggered_tags", "triggers": ["<f="], "tags": [{"begin": "<g=x>", "content": ANY, "end": "</g>"}]},
     r"^/format/tags/0/begin: a tag's begin must start with exactly one trigger"),
    ({"type": "sequence", "elements": [const("a"), {"type": "regex", "pattern": "(a"}]},
     r"^/format/elements/1/pattern: regex: invalid regex: missing \)"),
    ({"type": "tag", "begin": "<a>", "content": {"type": "json_schema", "json_schema": {"type": "integer",
                                                                                       "minimum": 5, "maximum": 1}},
      "end": "</a>"}, r"^/format/content: json_schema: numeric bounds leave no value"),
    ({"type": "json_schema", "json_schema": {"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}},
                                             "$ref": "#/$defs/n"}}, r"^/format: json_schema: .*a recursive schema is not supported inside"),
    ({"type": "tag", "begin": "<a>", "content": ANY, "end": ""}, r"end strings are all empty"),
    ({"type": "json_schema", "json_schema": {}, "style": "qwen_xml"}, r"style 'qwen_xml' is not supported"),
    ({"type": "repeat", "min": 3, "max": 1, "content": ANY}, r"0 <= min <= max"),
    ({"type": "no_such"}, r"unknown format type 'no_such'"),
])
def test_what_cannot_be_enforced_is_an_error_naming_where(fmt, message, smollm2_vocab):
    with pytest.raises(guided.StructuralTagError, match=message) as info:
        guided.compile(guided.StructuralTag({"type": "structural_tag", "format": fmt}), smollm2_vocab)
    assert isinstance(info.value, guided.SpecError)


def test_a_structural_tag_is_cached_like_any_spec(smollm2_vocab):
    fmt = {"type": "tag", "begin": "<a>", "content": ANY, "end": "</a>"}
    one = guided.compile(guided.StructuralTag(fmt), smollm2_vocab)
    assert guided.compile(guided.StructuralTag(json.dumps(fmt)), smollm2_vocab) is one
    assert guided.compile(guided.StructuralTag(fmt, whitespace="compact"), smollm2_vocab) is not one
