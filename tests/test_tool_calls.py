"""Tool calls (``guided.ToolCalls``): every format and tool_choice, on a tiny random
model's outputs, checked by parsing the calls and validating their arguments."""

from __future__ import annotations

import json

import jsonschema
import pytest

import guided
from guided.tool_calls import FORMATS

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 8}, "unit": {"enum": ["c", "f"]}},
        "required": ["city"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "add", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99},
                                         "b": {"type": "integer", "minimum": 0, "maximum": 99}},
        "required": ["a", "b"], "additionalProperties": False}}},
]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
TRIGGERS = {"hermes": "<tool_call>", "llama3": '{"name": ', "mistral": "[TOOL_CALLS]", "json": '[{"name": '}
CHOICES = ["auto", "required", "none", {"type": "function", "function": {"name": "add"}}]


def _check(spec, result, choice, parallel: bool) -> None:
    """The calls in the output are valid and where they may be; an output cut by the
    token limit is checked as far as it goes (its complete calls)."""
    content, calls = result.value, result.tool_calls
    finished = result.finish_reason != "length"
    for call in calls:
        assert call["type"] == "function" and call["id"].startswith("call_")
        name = call["function"]["name"]
        assert name in SCHEMAS
        if isinstance(choice, dict):
            assert name == choice["function"]["name"]
        jsonschema.validate(json.loads(call["function"]["arguments"]), SCHEMAS[name])
    trigger = TRIGGERS[spec.call_format]
    if choice == "none":
        assert calls == [] and trigger not in result.text
    elif choice != "auto":  # calls only
        assert result.text.startswith(trigger[: len(result.text)]), result.text
        if finished:
            assert calls and content == "", result.text
    if not parallel:
        assert len(calls) <= 1
    if choice == "auto" and finished and not calls:  # text only: it never starts a call
        assert trigger not in result.text


@pytest.mark.parametrize("format", FORMATS)
def test_every_output_is_valid_calls_or_allowed_text(format, tiny_model, smollm2_tokenizer):
    finished = 0
    for i, choice in enumerate(CHOICES * 25):  # 100 seeds per format, 25 per tool_choice
        parallel = i % 2 == 0
        spec = guided.ToolCalls(TOOLS, tool_choice=choice, parallel=parallel, format=format, whitespace="compact")
        result = guided.generate(tiny_model, smollm2_tokenizer, "Call a tool.", spec, max_new_tokens=64,
                                 temperature=1.0, seed=i)
        assert result.finish_reason in ("eos", "complete", "length"), result.finish_reason
        finished += result.finish_reason != "length"
        _check(spec, result, choice, parallel)
    assert finished >= 10  # calls of one tool, made whole and closed


@pytest.mark.parametrize("format, text, content, names", [
    ("hermes", 'Sure.<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>\n'
               '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>', "Sure.",
     ["add", "get_weather"]),
    ("llama3", '{"name": "add", "parameters": {"a": 1, "b": 2}}; {"name": "add", "parameters": {"a": 3, "b": 4}}',
     "", ["add", "add"]),
    ("mistral", 'Let me add. [TOOL_CALLS][{"name": "add", "arguments": {"a": 1, "b": 2}}]', "Let me add.", ["add"]),
    ("json", '[{"name": "get_weather", "arguments": {"city": "Rome", "unit": "c"}}]', "", ["get_weather"]),
    ("hermes", "No tools needed: it is 4.", "No tools needed: it is 4.", []),
])
def test_calls_parse_back_from_the_text(format, text, content, names, smollm2_vocab):
    spec = guided.ToolCalls(TOOLS, format=format)
    assert guided.compile(spec, smollm2_vocab).dfa.matches(text.encode())
    got_content, calls = spec.parse(text)
    assert got_content == content
    assert [c["function"]["name"] for c in calls] == names
    assert all(isinstance(json.loads(c["function"]["arguments"]), dict) for c in calls)


def test_a_call_is_refused_unless_its_name_and_arguments_fit(smollm2_vocab):
    dfa = guided.compile(guided.ToolCalls(TOOLS), smollm2_vocab).dfa
    ok = '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>'
    assert dfa.matches(ok.encode())
    assert not dfa.matches(ok.replace('"add"', '"sub"').encode())
    assert not dfa.matches(ok.replace('"b": 2', '"b": 200').encode())
    assert not dfa.matches(ok.replace(', "b": 2', "").encode())
    one = guided.compile(guided.ToolCalls(TOOLS, parallel=False), smollm2_vocab).dfa
    assert one.matches(ok.encode()) and not one.matches((ok + "\n" + ok).encode())


def test_strict_calls_take_only_declared_keys(smollm2_vocab):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}, "o": {"type": "object", "properties": {
            "x": {"type": "string"}}}}, "required": ["a"]}}}]
    call = '<tool_call>\n{{"name": "f", "arguments": {}}}\n</tool_call>'
    strict = guided.compile(guided.ToolCalls(tools), smollm2_vocab).dfa
    loose = guided.compile(guided.ToolCalls(tools, strict=False), smollm2_vocab).dfa
    for args, strict_ok in [('{"a": 1}', True), ('{"a": 1, "o": {"x": "y"}}', True), ('{"a": 1, "b": 2}', False),
                            ('{"a": 1, "o": {"x": "y", "z": 1}}', False)]:
        text = call.format(args).encode()
        assert strict.matches(text) == strict_ok and loose.matches(text), args
    # allOf parts stay open (closing each would refuse the other part's keys)
    merged = guided.tool_calls.closed_objects({"allOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}]})
    assert all("additionalProperties" not in part for part in merged["allOf"])


def test_the_system_prompt_lists_the_tools_and_the_syntax():
    prompt = guided.ToolCalls(TOOLS, tool_choice="required", format="hermes").system_prompt()
    assert '"name": "get_weather"' in prompt and "<tool_call>" in prompt and "must call" in prompt


@pytest.mark.parametrize("kwargs, message", [
    ({"tools": TOOLS, "format": "xml"}, r"unknown tool-call format 'xml'"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "sub"}}}, r"'sub'.*not among"),
    ({"tools": TOOLS, "tool_choice": "sometimes"}, r"tool_choice must be"),
    ({"tools": TOOLS + TOOLS[:1]}, r"two tools are named 'get_weather'"),
    ({"tools": [{"type": "function"}]}, r"^/tools/0: a tool is"),
])
def test_bad_tool_definitions_are_clear_errors(kwargs, message):
    with pytest.raises(guided.StructuralTagError, match=message):
        guided.ToolCalls(**kwargs)
