"""A serving request's constraint, read from its ``extra_args`` (HTTP: ``vllm_xargs``).

Serving engines pass per-request data as flat key/value pairs whose values are
strings, numbers or lists, so a JSON Schema travels as JSON text. The keys
(the names vLLM's own guided decoding used before ``structured_outputs``)::

    guided_json        a JSON Schema, as JSON text (or a dict, offline)
    guided_regex       a regular expression the whole output must match
    guided_grammar     lark grammar text, or a shipped grammar's name ("json", "sql", ...)
    guided_choice      a list of strings: the output is exactly one of them
    guided_structural_tag  a structural tag (XGrammar's format), as JSON text
    guided_tools       OpenAI-style tools, as JSON text: tool calls (``guided.ToolCalls``)
    guided_whitespace  JSON, structural tags and tools: "flexible" (default), "compact",
                       "indent=N" or N, "max=N" (flexible, at most N characters per run)
    guided_key_order   JSON only: "schema" (default) or "any"
    guided_start       grammar only: the start rule (default "start")
    guided_tool_choice tools only: "auto" (default), "none", "required", or a function's
                       name (that function only)
    guided_tool_format tools only: "hermes" (default), "llama3", "mistral" or "json"
    guided_parallel_tool_calls  tools only: true (default) or false (one call at most)
    guided_thinking    true: a thinking block first (``guided.AfterThinking``), then the
                       constraint (or free text without one)
    guided_thinking_start / guided_thinking_end  the block's strings ("<think>", "</think>")
    guided_max_thinking_tokens   the thinking budget; the end is forced once it is spent
    guided_budget_aware  true (default): regex and JSON Schema outputs finish within the
                       request's max_tokens (``docs/budget.md``); false: masks ignore it
    watermark          true: watermark the output with the server's key

At most one constraint (``guided_json`` ... ``guided_tools``); a key starting with
``guided_`` that is not listed is an error (a typo must not silently drop a constraint).
"""

from __future__ import annotations

import json
import re

from guided.specs import Grammar, JsonSchema, Regex, StructuralTag
from guided.thinking import AfterThinking
from guided.tool_calls import ToolCalls

SPEC_KEYS = ("guided_json", "guided_regex", "guided_grammar", "guided_choice", "guided_structural_tag",
             "guided_tools")
OPTION_KEYS = ("guided_whitespace", "guided_key_order", "guided_start", "guided_tool_choice", "guided_tool_format",
               "guided_parallel_tool_calls")
#: Keys of the thinking block, around any constraint.
THINKING_KEYS = ("guided_thinking", "guided_thinking_start", "guided_thinking_end", "guided_max_thinking_tokens")
BUDGET_KEY = "guided_budget_aware"
#: Which constraint each option belongs to.
_OPTION_OF = {"guided_whitespace": ("guided_json", "guided_structural_tag", "guided_tools"),
              "guided_key_order": ("guided_json",), "guided_start": ("guided_grammar",),
              "guided_tool_choice": ("guided_tools",), "guided_tool_format": ("guided_tools",),
              "guided_parallel_tool_calls": ("guided_tools",)}
WATERMARK_KEY = "watermark"


def spec_from_extra_args(extra_args):
    """The spec a request asks for, or None when it asks for none.

    Args:
        extra_args: the request's ``SamplingParams.extra_args`` (a dict or None).

    Returns:
        A ``guided.JsonSchema``, ``Regex``, ``Grammar``, ``StructuralTag``,
        ``ToolCalls`` or ``AfterThinking`` (around one of them), or None.

    Raises:
        ValueError: an unknown ``guided_*`` key, two constraints at once, an option
            without its constraint, or a value of the wrong type (the message names
            the key). A spec's own errors (``SchemaError``, ...) come from its compile.

    Example::

        >>> spec_from_extra_args({"guided_regex": "[0-9]{3}"})
        Regex(pattern='[0-9]{3}', flags=0)
        >>> spec_from_extra_args({"guided_choice": ["yes", "no"]}).pattern
        '(?:yes|no)'
    """
    if not extra_args:
        return None
    if not isinstance(extra_args, dict):
        raise ValueError(f"extra_args must be a mapping, not {type(extra_args).__name__}")
    known = SPEC_KEYS + OPTION_KEYS + THINKING_KEYS + (BUDGET_KEY,)
    unknown = sorted(k for k in extra_args if isinstance(k, str) and k.startswith("guided_") and k not in known)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r}; guided reads {', '.join(known)}")
    spec = _constraint(extra_args)
    thinking = {k: extra_args[k] for k in THINKING_KEYS if extra_args.get(k) is not None}
    if not thinking or not _flag("guided_thinking", thinking.get("guided_thinking", False)):
        others = [k for k in thinking if k != "guided_thinking"]
        if others:
            raise ValueError(f"{others[0]} needs guided_thinking: true")
        return spec
    budget = thinking.get("guided_max_thinking_tokens")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 0):
        raise ValueError(f"guided_max_thinking_tokens must be a non-negative integer, not {budget!r}")
    return AfterThinking(spec if spec is not None else StructuralTag({"type": "any_text"}),
                         start=_text("guided_thinking_start", thinking.get("guided_thinking_start", "<think>")),
                         end=_text("guided_thinking_end", thinking.get("guided_thinking_end", "</think>")),
                         max_thinking_tokens=budget)


def _constraint(extra_args):
    """The constraint keys' spec, or None (thinking keys aside)."""
    asked = [k for k in SPEC_KEYS if extra_args.get(k) is not None]
    if len(asked) > 1:
        raise ValueError(f"one constraint per request: got {' and '.join(asked)}")
    options = {k: extra_args[k] for k in OPTION_KEYS if extra_args.get(k) is not None}
    if not asked:
        if options:
            raise ValueError(f"{next(iter(options))} needs a constraint ({', '.join(SPEC_KEYS)})")
        return None
    key = asked[0]
    value = extra_args[key]
    for option in options:
        if key not in _OPTION_OF[option]:
            raise ValueError(f"{option} applies to {' / '.join(_OPTION_OF[option])}, not {key}")
    whitespace = parse_whitespace(options.get("guided_whitespace", "flexible"))
    if key == "guided_json":
        if not isinstance(value, (str, dict, bool)):
            raise ValueError(f"guided_json must be a JSON Schema as JSON text, not {type(value).__name__}")
        return JsonSchema(value, whitespace=whitespace,
                          key_order=_text("guided_key_order", options.get("guided_key_order", "schema")))
    if key == "guided_regex":
        return Regex(_text(key, value))
    if key == "guided_grammar":
        text = _text(key, value)
        start = _text("guided_start", options.get("guided_start", "start"))
        if "\n" not in text and ":" not in text and text.strip() in Grammar.names():
            return Grammar.from_name(text.strip(), start=start)
        return Grammar(text, start=start)
    if key == "guided_structural_tag":
        if not isinstance(value, (str, dict)):
            raise ValueError(f"guided_structural_tag must be JSON text, not {type(value).__name__}")
        return StructuralTag(value, whitespace=whitespace)
    if key == "guided_tools":
        choice = options.get("guided_tool_choice", "auto")
        if _text("guided_tool_choice", choice) not in ("auto", "none", "required"):
            choice = {"type": "function", "function": {"name": choice}}
        return ToolCalls(_json_list(key, value), tool_choice=choice,
                         parallel=_flag("guided_parallel_tool_calls", options.get("guided_parallel_tool_calls", True)),
                         format=_text("guided_tool_format", options.get("guided_tool_format", "hermes")),
                         whitespace=whitespace)
    return Regex(choice_pattern(value))


def watermark_requested(extra_args) -> bool:
    """Whether a request asks for the watermark (``"watermark": true``).

    Raises:
        ValueError: the value is not a boolean (or 0 / 1, "true" / "false").
    """
    if not extra_args or extra_args.get(WATERMARK_KEY) is None:
        return False
    return _flag(WATERMARK_KEY, extra_args[WATERMARK_KEY])


def budget_aware_requested(extra_args) -> bool:
    """Whether a request's masks keep its output finishable within ``max_tokens``
    (``"guided_budget_aware"``, default true).

    Raises:
        ValueError: the value is not a boolean (or 0 / 1, "true" / "false").
    """
    if not extra_args or extra_args.get(BUDGET_KEY) is None:
        return True
    return _flag(BUDGET_KEY, extra_args[BUDGET_KEY])


def choice_pattern(choices) -> str:
    """The regex matching exactly one of ``choices`` (a list of strings)."""
    if not isinstance(choices, (list, tuple)) or not choices:
        raise ValueError("guided_choice must be a non-empty list of strings")
    for i, c in enumerate(choices):
        if not isinstance(c, str):
            raise ValueError(f"guided_choice[{i}] must be a string, not {type(c).__name__}")
    return "(?:" + "|".join(re.escape(c) for c in choices) + ")"


def parse_whitespace(value, key: str = "guided_whitespace"):
    """A JSON whitespace setting written as text (requests, the CLI) as the specs take it.

    Args:
        value: "flexible", "compact", "indent=N" or N (``{"indent": N}``), "max=N"
            (``{"max_whitespace": N}``).
        key: the setting's name in the error message.

    Raises:
        ValueError: any other value.

    Example::

        >>> parse_whitespace("max=4")
        {'max_whitespace': 4}
    """
    if isinstance(value, bool):
        raise ValueError(f"{key} must be flexible, compact, indent=N, N or max=N, not {value!r}")
    if isinstance(value, int):
        return {"indent": value}
    text = _text(key, value)
    if text in ("flexible", "compact"):
        return text
    m = re.fullmatch(r"(indent|max)=(\d+)", text)
    if m:
        return {"indent" if m.group(1) == "indent" else "max_whitespace": int(m.group(2))}
    raise ValueError(f"{key} must be flexible, compact, indent=N, N or max=N, not {value!r}")


def _flag(key: str, value) -> bool:
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if isinstance(value, (bool, int)) and value in (0, 1):
        return bool(value)
    raise ValueError(f"{key} must be true or false, not {value!r}")


def _json_list(key: str, value) -> list:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise ValueError(f"{key} is not valid JSON: {e}") from None
    if not isinstance(value, list):
        raise ValueError(f"{key} must be a JSON list of tools")
    return value


def _text(key: str, value) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string, not {type(value).__name__}")
    return value
