"""Tool calls: OpenAI-style tool definitions in, the call syntax of a chat format enforced.

``ToolCalls`` is a ``StructuralTag`` built from the tools, the ``tool_choice`` and the
call syntax of a chat template family; ``parse`` reads calls back out of the text and
``system_prompt`` renders the tools for models whose chat template has none::

    format    one call                                                 between calls
    hermes    <tool_call>\\n{"name": "f", "arguments": {...}}\\n</tool_call>   "\\n"
    llama3    {"name": "f", "parameters": {...}}                        "; "
    mistral   [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]      ", " (inside the list)
    json      [{"name": "f", "arguments": {...}}, ...]                  ", " (the whole output)

    tool_choice   "auto": text, calls or both   "none": text that writes no call
                  "required" / {"type": "function", "function": {"name": f}}:
                  calls only (of that function), at least one

Every call's name is one of the tools and its arguments satisfy that tool's
``parameters`` schema; ``parallel=False`` allows one call at most. With ``strict`` (the
default, as OpenAI's strict function calling and XGrammar do) an object that does not
say which other keys it allows takes only its declared ones.
"""

from __future__ import annotations

import json
import re
import uuid

from guided.errors import StructuralTagError

from .specs import StructuralTag

#: Per format: (the text a call starts with, call head before the arguments (``{name}``
#: is the JSON-quoted name), the key of the arguments, what closes a call, the
#: separator between calls, the wrapper around a list of calls or None).
_FORMATS = {
    "hermes": ("<tool_call>", '<tool_call>\n{{"name": {name}, "arguments": ', "}\n</tool_call>", "\n", None),
    "llama3": ('{"name": ', '{{"name": {name}, "parameters": ', "}", "; ", None),
    "mistral": ("[TOOL_CALLS]", '{{"name": {name}, "arguments": ', "}", ", ", ("[TOOL_CALLS][", "]")),
    "json": ('[{"name": ', '{{"name": {name}, "arguments": ', "}", ", ", ("[", "]")),
}
FORMATS = tuple(_FORMATS)


class ToolCalls(StructuralTag):
    """Output: free text and tool calls in a chat format's syntax, arguments valid.

    Args:
        tools: OpenAI-style tools: ``{"type": "function", "function": {"name",
            "description", "parameters"}}`` (or the inner ``function`` objects).
        tool_choice: ``"auto"`` (text, calls, or both), ``"none"`` (text only, never
            the start of a call), ``"required"`` (calls only, at least one), or
            ``{"type": "function", "function": {"name": ...}}`` (calls of that tool
            only, at least one).
        parallel: whether several calls may be made (``False``: one at most).
        format: ``"hermes"`` (Qwen, Hermes and many others), ``"llama3"``,
            ``"mistral"`` or ``"json"`` (a bare JSON array of calls).
        whitespace: whitespace inside the arguments' JSON (``JsonSchema``'s).
        strict: objects in ``parameters`` without ``additionalProperties`` (or
            ``patternProperties`` / ``unevaluatedProperties``) take only their declared
            keys; ``False`` reads the schemas as JSON Schema does (other keys allowed).

    Raises:
        StructuralTagError: a malformed tool, duplicate tool names, an unknown format
            or ``tool_choice``, or a named tool that is not among the tools.

    Example::

        >>> spec = guided.ToolCalls([{"type": "function", "function": {"name": "get_weather",
        ...     "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
        ...                    "required": ["city"]}}}], tool_choice="required")
        >>> result = guided.generate(model, tokenizer, "Weather in Paris?", spec, system=spec.system_prompt())
        >>> result.tool_calls[0]["function"]
        {'name': 'get_weather', 'arguments': '{"city": "Paris"}'}
    """

    def __init__(self, tools, tool_choice="auto", parallel: bool = True, format: str = "hermes",
                 whitespace="flexible", strict: bool = True):
        if format not in _FORMATS:
            raise StructuralTagError(f"unknown tool-call format {format!r} (known: {', '.join(FORMATS)})")
        self.tools = _functions(tools)
        self.strict = strict
        self.tool_choice = tool_choice
        self.parallel = parallel
        self.call_format = format
        chosen = _chosen(self.tools, tool_choice)
        if strict:
            chosen = [{**f, "parameters": closed_objects(f["parameters"])} for f in chosen]
        super().__init__(_structural_tag(chosen, tool_choice, parallel, format), whitespace=whitespace)

    def parse(self, text: str) -> tuple[str, list[dict]]:
        """The free text and the calls in ``text`` (output this spec accepts).

        Returns:
            ``(content, tool_calls)``: the text outside the calls (stripped), and the
            calls, OpenAI-shaped: ``{"id", "type": "function", "function": {"name",
            "arguments"}}`` with ``arguments`` as JSON text.

        Example::

            >>> spec.parse('Sure.<tool_call>\\n{"name": "f", "arguments": {}}\\n</tool_call>')
            ('Sure.', [{'id': 'call_...', 'type': 'function', 'function': {'name': 'f', 'arguments': '{}'}}])
        """
        _, head, end, sep, wrapper = _FORMATS[self.call_format]
        before, after = (part.replace("{{", "{").replace("}}", "}") for part in head.split("{name}"))
        names = "|".join(re.escape(json.dumps(f["name"])) for f in self.tools)
        call = re.compile(re.escape(before) + f"({names})" + re.escape(after))
        decoder = json.JSONDecoder()
        spans, calls, at = [], [], 0
        while (m := call.search(text, at)) is not None:
            try:
                args, stop = decoder.raw_decode(text, m.end())
            except json.JSONDecodeError:
                break
            if not text.startswith(end, stop):
                break
            at = stop + len(end)
            spans.append([m.start(), at])
            calls.append({"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                          "function": {"name": json.loads(m.group(1)), "arguments": json.dumps(args)}})
        for k in range(len(spans) - 1, 0, -1):  # the separator between two calls is not text
            if text[spans[k - 1][1]:spans[k][0]] == sep:
                spans[k - 1][1] = spans.pop(k)[1]
        if wrapper is not None and spans:  # nor are the list's brackets
            first, last = spans[0], spans[-1]
            if text[:first[0]].endswith(wrapper[0]) and text.startswith(wrapper[1], last[1]):
                first[0] -= len(wrapper[0])
                last[1] += len(wrapper[1])
        content, at = [], 0
        for start, stop in spans:
            content.append(text[at:start])
            at = stop
        content.append(text[at:])
        return "".join(content).strip(), calls

    def system_prompt(self) -> str:
        """The tools and the call syntax as a system prompt, for models whose chat
        template cannot render tools (the default model's cannot)."""
        _, head, end, _, wrapper = _FORMATS[self.call_format]
        key = "parameters" if self.call_format == "llama3" else "arguments"
        listed = "\n".join(json.dumps({"type": "function", "function": f}) for f in self.tools)
        one = head.format(name='"<function-name>"') + f"<{key}-json-object>" + end
        if wrapper is not None:
            one = wrapper[0] + one + wrapper[1]
        rule = {"none": "Do not call any function; answer in text.",
                "required": "You must call at least one function.",
                "auto": "Call functions only when they help; otherwise answer in text."}
        choice = rule.get(self.tool_choice) if isinstance(self.tool_choice, str) else \
            f"You must call the function {self.tool_choice['function']['name']}."
        many = "You may call several functions." if self.parallel else "Call at most one function."
        return (f"You are a helpful assistant with access to these functions:\n{listed}\n\n"
                f"To call a function, write:\n{one}\n{choice} {many}")

    def __repr__(self) -> str:
        names = [f["name"] for f in self.tools]
        return (f"ToolCalls({names}, tool_choice={self.tool_choice!r}, parallel={self.parallel}, "
                f"format={self.call_format!r})")


def _functions(tools) -> list[dict]:
    """The tools' ``function`` objects, checked."""
    if not isinstance(tools, (list, tuple)):
        raise StructuralTagError("tools must be a list of tool definitions")
    out, seen = [], set()
    for i, tool in enumerate(tools):
        fn = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise StructuralTagError('a tool is {"type": "function", "function": {"name": ..., "parameters": ...}}',
                                     f"/tools/{i}")
        if fn["name"] in seen:
            raise StructuralTagError(f"two tools are named {fn['name']!r}", f"/tools/{i}")
        seen.add(fn["name"])
        params = fn.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(params, (dict, bool)):
            raise StructuralTagError("parameters must be a JSON Schema object", f"/tools/{i}/function/parameters")
        out.append({**fn, "parameters": params})
    return out


#: Keywords that say which keys an object takes besides its declared ones.
_OPEN_KEYWORDS = ("additionalProperties", "patternProperties", "unevaluatedProperties")
#: Keywords whose value is one sub-schema, and those whose value maps names to sub-schemas.
_SUBSCHEMA = ("items", "additionalItems", "contains", "not", "if", "then", "else", "propertyNames")
_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "dependentSchemas")


def closed_objects(schema, in_all_of: bool = False):
    """``schema`` with ``"additionalProperties": false`` on each object schema that
    declares ``properties`` and says nothing of other keys (a copy; the input is left
    as it is). ``allOf`` parts are left open: closing each part would refuse the keys
    the other parts declare.

    Example::

        >>> closed_objects({"type": "object", "properties": {"a": {"type": "integer"}}})
        {'type': 'object', 'properties': {'a': {'type': 'integer'}}, 'additionalProperties': False}
    """
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in _SUBSCHEMA:
        if key in out:
            out[key] = (closed_objects(out[key]) if not isinstance(out[key], list)
                        else [closed_objects(s) for s in out[key]])
    for key in _SUBSCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {k: closed_objects(v) for k, v in out[key].items()}
    for key in ("anyOf", "oneOf", "prefixItems"):
        if isinstance(out.get(key), list):
            out[key] = [closed_objects(s) for s in out[key]]
    if isinstance(out.get("allOf"), list):
        out["allOf"] = [closed_objects(s, in_all_of=True) for s in out["allOf"]]
    if (not in_all_of and "allOf" not in out and isinstance(out.get("properties"), dict)
            and not any(k in out for k in _OPEN_KEYWORDS)):
        out["additionalProperties"] = False
    return out


def _chosen(tools: list[dict], tool_choice) -> list[dict]:
    """The tools a call may name under ``tool_choice``."""
    if tool_choice in ("auto", "none", "required"):
        return tools
    if isinstance(tool_choice, dict) and tool_choice.get("type") == "function":
        name = (tool_choice.get("function") or {}).get("name")
        picked = [f for f in tools if f["name"] == name]
        if not picked:
            raise StructuralTagError(f"tool_choice names {name!r}, which is not among the tools")
        return picked
    raise StructuralTagError(f'tool_choice must be "auto", "none", "required" or {{"type": "function", '
                             f'"function": {{"name": ...}}}}, not {tool_choice!r}')


def _structural_tag(tools: list[dict], tool_choice, parallel: bool, format: str) -> dict:
    trigger, head, end, sep, wrapper = _FORMATS[format]
    calls = [{"type": "tag", "begin": head.format(name=json.dumps(f["name"])), "end": end,
              "content": {"type": "json_schema", "json_schema": f["parameters"]}} for f in tools]
    if tool_choice == "none" or not calls:
        return {"type": "structural_tag", "format": {"type": "any_text", "excludes": [trigger]}}
    listed = {"type": "tags_with_separator", "tags": calls, "separator": sep, "at_least_one": True,
              "stop_after_first": not parallel}
    if wrapper is not None:
        listed = {"type": "tag", "begin": wrapper[0], "content": listed, "end": wrapper[1]}
    if tool_choice != "auto":  # calls only
        return {"type": "structural_tag", "format": listed}
    if format == "json":  # the whole output is the list, or text that writes no call
        return {"type": "structural_tag", "format": {"type": "or", "elements": [
            listed, {"type": "any_text", "excludes": [trigger]}]}}
    if wrapper is not None:  # one list of calls, triggered from text
        tags = [dict(listed, begin=wrapper[0])]
        return {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": [trigger],
                                                     "tags": tags, "stop_after_first": True}}
    return {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": [trigger], "tags": calls,
                                                 "stop_after_first": not parallel}}
