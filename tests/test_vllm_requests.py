"""A serving request's constraint from its extra_args (no engine needed)."""

import json
import re

import pytest

import guided
from guided.integrations.requests import (
    budget_aware_requested,
    choice_pattern,
    spec_from_extra_args,
    watermark_requested,
)


def test_no_constraint():
    assert spec_from_extra_args(None) is None
    assert spec_from_extra_args({}) is None
    assert spec_from_extra_args({"other_plugin_key": 1}) is None


def test_json_with_options():
    spec = spec_from_extra_args({"guided_json": '{"type": "object"}', "guided_whitespace": "indent=2",
                                 "guided_key_order": "any"})
    assert isinstance(spec, guided.JsonSchema)
    assert spec.schema == {"type": "object"} and spec.whitespace == {"indent": 2} and spec.key_order == "any"
    assert spec_from_extra_args({"guided_json": "true", "guided_whitespace": 4}).whitespace == {"indent": 4}
    assert spec_from_extra_args({"guided_json": "true", "guided_whitespace": "max=3"}).whitespace == \
        {"max_whitespace": 3}
    assert spec_from_extra_args({"guided_json": {"type": "integer"}}).schema == {"type": "integer"}


def test_regex_grammar_choice():
    assert spec_from_extra_args({"guided_regex": "[0-9]+"}) == guided.Regex("[0-9]+")
    named = spec_from_extra_args({"guided_grammar": "json"})
    assert isinstance(named, guided.Grammar) and named.name == "json"
    text = 'start: "a" | "b"'
    assert spec_from_extra_args({"guided_grammar": text, "guided_start": "start"}).lark_text == text
    choice = spec_from_extra_args({"guided_choice": ["a b", "c.d", "x|y"]})
    for c in ("a b", "c.d", "x|y"):
        assert re.fullmatch(choice.pattern, c)
    assert not re.fullmatch(choice.pattern, "cxd")


TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}]


def test_structural_tags_tools_and_thinking(smollm2_vocab):
    tag = {"type": "structural_tag", "format": {"type": "tag", "begin": "<a>", "content": {"type": "any_text"},
                                                 "end": "</a>"}}
    spec = spec_from_extra_args({"guided_structural_tag": json.dumps(tag), "guided_whitespace": "compact"})
    assert isinstance(spec, guided.StructuralTag) and spec.whitespace == "compact"
    tools = spec_from_extra_args({"guided_tools": json.dumps(TOOLS), "guided_tool_choice": "add",
                                  "guided_parallel_tool_calls": "false", "guided_tool_format": "llama3"})
    assert isinstance(tools, guided.ToolCalls) and tools.call_format == "llama3" and not tools.parallel
    assert tools.tool_choice == {"type": "function", "function": {"name": "add"}}
    dfa = guided.compile(tools, smollm2_vocab).dfa
    assert dfa.matches(b'{"name": "add", "parameters": {"a": 1}}') and not dfa.matches(b"text")
    think = spec_from_extra_args({"guided_regex": "yes|no", "guided_thinking": True,
                                  "guided_max_thinking_tokens": 32, "guided_thinking_end": "</reasoning>"})
    assert isinstance(think, guided.AfterThinking) and think.spec == guided.Regex("yes|no")
    assert think.end == "</reasoning>" and think.max_thinking_tokens == 32
    free = spec_from_extra_args({"guided_thinking": "true"})
    assert isinstance(free, guided.AfterThinking) and isinstance(free.spec, guided.StructuralTag)


@pytest.mark.parametrize("extra, message", [
    ({"guided_jsn": "{}"}, "unknown key 'guided_jsn'"),
    ({"guided_tools": "[]", "guided_regex": "a"}, "one constraint per request"),
    ({"guided_regex": "a", "guided_tool_choice": "auto"}, "guided_tool_choice applies to guided_tools"),
    ({"guided_tools": "{}"}, "guided_tools must be a JSON list"),
    ({"guided_tools": json.dumps(TOOLS), "guided_tool_choice": "sub"}, "'sub', which is not among the tools"),
    ({"guided_structural_tag": '{"type": "grammar", "grammar": "x"}'}, "grammar content is not supported"),
    ({"guided_regex": "a", "guided_max_thinking_tokens": 5}, "needs guided_thinking: true"),
    ({"guided_thinking": True, "guided_max_thinking_tokens": -1}, "non-negative integer"),
    ({"guided_thinking": "maybe"}, "guided_thinking must be true or false"),
    ({"guided_json": "{}", "guided_regex": "a"}, "one constraint per request"),
    ({"guided_whitespace": "compact"}, "needs a constraint"),
    ({"guided_regex": "a", "guided_key_order": "any"}, "guided_key_order applies to guided_json"),
    ({"guided_json": "{}", "guided_whitespace": "wide"}, "guided_whitespace must be"),
    ({"guided_json": 3}, "guided_json must be a JSON Schema"),
    ({"guided_regex": 3}, "guided_regex must be a string"),
    ({"guided_choice": []}, "non-empty list"),
    ({"guided_choice": ["a", 2]}, r"guided_choice\[1\] must be a string"),
    ({"guided_json": "{not json"}, "JSON"),
    ({"guided_json": "{}", "guided_key_order": "sorted"}, "key_order"),
])
def test_bad_arguments_name_the_problem(extra, message):
    with pytest.raises(ValueError, match=message):
        spec_from_extra_args(extra)


def test_budget_aware_flag():
    assert budget_aware_requested(None) and budget_aware_requested({"guided_regex": "a"})
    assert not budget_aware_requested({"guided_regex": "a", "guided_budget_aware": False})
    assert spec_from_extra_args({"guided_regex": "a", "guided_budget_aware": "false"}) == guided.Regex("a")
    with pytest.raises(ValueError, match="guided_budget_aware must be true or false"):
        budget_aware_requested({"guided_budget_aware": "sometimes"})


def test_watermark_flag():
    assert watermark_requested({"watermark": True}) and watermark_requested({"watermark": "true"})
    assert not watermark_requested({"watermark": False}) and not watermark_requested({})
    with pytest.raises(ValueError, match="watermark must be true or false"):
        watermark_requested({"watermark": "yes please"})


def test_choice_pattern_escapes():
    assert choice_pattern(["(a)"]) == r"(?:\(a\))"
