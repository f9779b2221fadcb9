"""A serving request's constraint, read from its ``extra_args`` (HTTP: ``vllm_xargs``).

Serving engines pass per-request data as flat key/value pairs whose values are
strings, numbers or lists, so a JSON Schema travels as JSON text. The keys
(the names vLLM's own guided decoding used before ``structured_outputs``)::

    guided_json        a JSON Schema, as JSON text (or a dict, offline)
    guided_regex       a regular expression the whole output must match
    guided_grammar     lark grammar text, or a shipped grammar's name ("json", "sql", ...)
    guided_choice      a list of strings: the output is exactly one of them
    guided_whitespace  JSON only: "flexible" (default), "compact", "indent=N" or N
    guided_key_order   JSON only: "schema" (default) or "any"
    guided_start       grammar only: the start rule (default "start")
    watermark          true: watermark the output with the server's key

At most one of the first four; a key starting with ``guided_`` that is not listed
is an error (a typo must not silently drop a constraint).
"""

from __future__ import annotations

import re

from guided.specs import Grammar, JsonSchema, Regex

SPEC_KEYS = ("guided_json", "guided_regex", "guided_grammar", "guided_choice")
OPTION_KEYS = ("guided_whitespace", "guided_key_order", "guided_start")
WATERMARK_KEY = "watermark"


def spec_from_extra_args(extra_args):
    """The spec a request asks for, or None when it asks for none.

    Args:
        extra_args: the request's ``SamplingParams.extra_args`` (a dict or None).

    Returns:
        A ``guided.JsonSchema``, ``guided.Regex`` or ``guided.Grammar``, or None.

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
    unknown = sorted(k for k in extra_args
                     if isinstance(k, str) and k.startswith("guided_") and k not in SPEC_KEYS + OPTION_KEYS)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r}; guided reads {', '.join(SPEC_KEYS + OPTION_KEYS)}")
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
    for option, allowed_with in (("guided_whitespace", "guided_json"), ("guided_key_order", "guided_json"),
                                 ("guided_start", "guided_grammar")):
        if option in options and key != allowed_with:
            raise ValueError(f"{option} applies to {allowed_with}, not {key}")
    if key == "guided_json":
        if not isinstance(value, (str, dict, bool)):
            raise ValueError(f"guided_json must be a JSON Schema as JSON text, not {type(value).__name__}")
        return JsonSchema(value, whitespace=_whitespace(options.get("guided_whitespace", "flexible")),
                          key_order=_text("guided_key_order", options.get("guided_key_order", "schema")))
    if key == "guided_regex":
        return Regex(_text(key, value))
    if key == "guided_grammar":
        text = _text(key, value)
        start = _text("guided_start", options.get("guided_start", "start"))
        if "\n" not in text and ":" not in text and text.strip() in Grammar.names():
            return Grammar.from_name(text.strip(), start=start)
        return Grammar(text, start=start)
    return Regex(choice_pattern(value))


def watermark_requested(extra_args) -> bool:
    """Whether a request asks for the watermark (``"watermark": true``).

    Raises:
        ValueError: the value is not a boolean (or 0 / 1, "true" / "false").
    """
    if not extra_args or extra_args.get(WATERMARK_KEY) is None:
        return False
    value = extra_args[WATERMARK_KEY]
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if isinstance(value, (bool, int)) and value in (0, 1):
        return bool(value)
    raise ValueError(f"watermark must be true or false, not {value!r}")


def choice_pattern(choices) -> str:
    """The regex matching exactly one of ``choices`` (a list of strings)."""
    if not isinstance(choices, (list, tuple)) or not choices:
        raise ValueError("guided_choice must be a non-empty list of strings")
    for i, c in enumerate(choices):
        if not isinstance(c, str):
            raise ValueError(f"guided_choice[{i}] must be a string, not {type(c).__name__}")
    return "(?:" + "|".join(re.escape(c) for c in choices) + ")"


def _whitespace(value):
    if isinstance(value, bool):
        raise ValueError(f"guided_whitespace must be flexible, compact, indent=N or N, not {value!r}")
    if isinstance(value, int):
        return {"indent": value}
    text = _text("guided_whitespace", value)
    if text in ("flexible", "compact"):
        return text
    m = re.fullmatch(r"indent=(\d+)", text)
    if m:
        return {"indent": int(m.group(1))}
    raise ValueError(f"guided_whitespace must be flexible, compact, indent=N or N, not {value!r}")


def _text(key: str, value) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string, not {type(value).__name__}")
    return value
