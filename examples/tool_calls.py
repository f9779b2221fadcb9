"""Tool calls and think-then-answer with the default model (SmolLM2-135M, CPU, offline).

    python examples/tool_calls.py

1. ``guided.ToolCalls``: OpenAI-style tools; the model answers in text or calls them in
   the Hermes syntax (``<tool_call>{...}</tool_call>``), each call's arguments valid.
   SmolLM2's chat template has no tool support, so the tools go in the system prompt.
2. ``guided.AfterThinking``: a ``<think>`` block of at most 40 tokens, then a JSON answer.
3. ``guided.StructuralTag``: the same tool calls written as an XGrammar structural tag.
"""

import json

import guided

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "maxLength": 30}, "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "add", "description": "Add two integers",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                       "required": ["a", "b"], "additionalProperties": False}}},
]


def main() -> None:
    model, tokenizer = guided.models.load_default_model()

    print("== tool calls (tool_choice='required') ==")
    spec = guided.ToolCalls(TOOLS, tool_choice="required", parallel=False)
    result = guided.generate(model, tokenizer, "What is the weather in Paris?", spec,
                             system=spec.system_prompt(), max_new_tokens=80)
    print(result.text)
    for call in result.tool_calls:
        print("call:", call["function"]["name"], json.loads(call["function"]["arguments"]))

    print("\n== tool calls (tool_choice='auto': text, calls or both) ==")
    spec = guided.ToolCalls(TOOLS, tool_choice="auto")
    result = guided.generate(model, tokenizer, "Add 2 and 40, please.", spec, system=spec.system_prompt(),
                             max_new_tokens=80)
    print("text:", repr(result.value))
    print("calls:", [(c["function"]["name"], c["function"]["arguments"]) for c in result.tool_calls])

    print("\n== think, then answer (at most 40 thinking tokens) ==")
    answer = {"type": "object", "properties": {"legs": {"type": "integer"}}, "required": ["legs"]}
    spec = guided.AfterThinking(guided.JsonSchema(answer, whitespace="compact"), max_thinking_tokens=40)
    result = guided.generate(model, tokenizer, "How many legs do three spiders have? Answer as JSON.", spec,
                             max_new_tokens=80)
    print("reasoning:", repr(result.reasoning))
    print("answer:", result.value)

    print("\n== the same tool calls as an XGrammar structural tag ==")
    tag = {"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<tool_call>"], "at_least_one": True, "stop_after_first": True,
        "tags": [{"begin": f'<tool_call>\n{{"name": "{t["function"]["name"]}", "arguments": ',
                  "content": {"type": "json_schema", "json_schema": t["function"]["parameters"]},
                  "end": "}\n</tool_call>"} for t in TOOLS]}}
    result = guided.generate(model, tokenizer, "Weather in Oslo?", guided.StructuralTag(tag),
                             system=guided.ToolCalls(TOOLS).system_prompt(), max_new_tokens=80)
    print(result.text)


if __name__ == "__main__":
    main()
