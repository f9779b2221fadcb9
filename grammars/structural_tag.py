"""Structural tags: free text with constrained parts (tool calls, reasoning), one automaton.

A structural tag is read in XGrammar's JSON format, so a request written for XGrammar
(or vLLM's ``structural_tag``) compiles unchanged: ``{"type": "structural_tag",
"format": {...}}``, a bare format object, or the older ``{"structures": [{"begin",
"schema", "end"}], "triggers": [...]}``. ``parse_structural_tag`` checks it and names
the JSON pointer of what is wrong; ``compile_structural_tag`` builds one lazy NFA::

    const_string           its bytes
    regex                  the regex's minimal DFA, embedded (fsm.regex)
    json_schema            the JSON Schema compiler's fragment, deferred parts and all
    sequence, or, optional, star, plus, repeat        Thompson constructions
    tag                    begin · content · end
    any_text, and the text around triggered_tags:
                           UTF-8 text × an Aho-Corasick automaton of its strings
                           (what it stops at, what it may not contain)
    ──> LazyDFA (fsm.lazy): rows built as decoding reaches them

Free text is read as XGrammar reads it:

- as the last part of a tag's content it runs up to the first occurrence of one of the
  tag's end strings, which closes the tag;
- elsewhere inside a tag it may not contain the tag's end strings;
- outside any tag it is any text; ``excludes`` are never written in any of these.

``triggered_tags``: free text that may not contain a trigger; writing a trigger starts
one of the tags whose ``begin`` it is a prefix of (each tag's begin has exactly one
trigger as a prefix), the tag's content and end follow, then free text again.
``at_least_one``: the output starts with a tag; ``stop_after_first``: nothing follows
the first tag. ``tags_with_separator``: tags only, separated by the separator.

Not supported (a ``StructuralTagError`` naming the pointer): ``grammar`` content, a
recursive JSON Schema or ``uniqueItems`` (but on a small enum) inside a structural tag,
formats and options that work on token ids or token counts (``token``, ``any_tokens``,
``max_tokens``, ...), JSON styles other than ``"json"``, ``max_whitespace_cnt`` and
``excludes`` on a JSON Schema.

Cost notes: a free-text automaton has at most (bytes of its strings + 1) × 8 states
(the Aho-Corasick nodes times the UTF-8 decoder's states), built in Python in
~1 ms for ten triggers; a JSON Schema costs what it costs alone; the automaton is
determinised lazily, so a tag no output reaches is never built beyond its NFA.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from itertools import pairwise

from guided.errors import (
    EmptyLanguageError,
    RecursiveSchemaError,
    RegexSyntaxError,
    SchemaError,
    StructuralTagError,
    UnsupportedRegexFeature,
)
from guided.fsm.lazy import LazyDFA
from guided.fsm.nfa import NFA
from guided.fsm.ops import embed
from guided.fsm.regex import compile_regex

# -- the format, checked ----------------------------------------------------------------


@dataclass(frozen=True)
class Const:
    text: bytes


@dataclass(frozen=True)
class RegexPart:
    pattern: str
    path: str


@dataclass(frozen=True)
class JsonPart:
    schema: object
    any_order: bool
    path: str


@dataclass(frozen=True)
class AnyText:
    excludes: tuple[bytes, ...]


@dataclass(frozen=True)
class Sequence:
    elements: tuple


@dataclass(frozen=True)
class Or:
    elements: tuple


@dataclass(frozen=True)
class Repeat:
    content: object
    lo: int
    hi: int | None  # None: unbounded


@dataclass(frozen=True)
class Tag:
    begin: bytes
    content: object
    ends: tuple[bytes, ...]
    path: str


@dataclass(frozen=True)
class Triggered:
    triggers: tuple[bytes, ...]
    tags: tuple[Tag, ...]
    trigger_of: tuple[int, ...]  # per tag, the trigger its begin starts with
    at_least_one: bool
    stop_after_first: bool
    excludes: tuple[bytes, ...]


@dataclass(frozen=True)
class Separated:
    tags: tuple[Tag, ...]
    separator: bytes
    at_least_one: bool
    stop_after_first: bool


#: Each format type's keys besides ``type``: required ones, then optional ones.
_KEYS = {
    "const_string": ({"value"}, set()),
    "json_schema": ({"json_schema"}, {"style", "any_order", "max_whitespace_cnt", "excludes"}),
    "any_text": (set(), {"excludes", "max_tokens", "max_chars"}),
    "regex": ({"pattern"}, set()),
    "grammar": ({"grammar"}, {"syntax"}),
    "sequence": ({"elements"}, set()),
    "or": ({"elements"}, set()),
    "tag": ({"begin", "content", "end"}, set()),
    "triggered_tags": ({"triggers", "tags"}, {"at_least_one", "stop_after_first", "excludes"}),
    "tags_with_separator": ({"tags", "separator"}, {"at_least_one", "stop_after_first"}),
    "optional": ({"content"}, set()),
    "star": ({"content"}, set()),
    "plus": ({"content"}, set()),
    "repeat": ({"content", "min", "max"}, set()),
}
#: XGrammar's formats that work on token ids or are another model family's syntax.
_UNSUPPORTED = {
    "token": "it names a token id; guided constrains text",
    "exclude_token": "it names token ids; guided constrains text",
    "any_tokens": "it counts tokens; guided constrains text",
    "token_triggered_tags": "it dispatches on token ids; use triggered_tags with the trigger's text",
    "token_dispatch": "it dispatches on token ids",
    "dispatch": "not supported yet; use triggered_tags",
    "qwen_xml_parameter": "XML parameter styles are not supported; use json_schema",
}


def parse_structural_tag(spec) -> object:
    """Check a structural tag and return its format as this module's nodes.

    Args:
        spec: a dict or its JSON text: ``{"type": "structural_tag", "format": {...}}``,
            a bare format object, or the older ``{"type": "structural_tag",
            "structures": [...], "triggers": [...]}``.

    Returns:
        The root node (``Const``, ``Tag``, ``Triggered``, ...).

    Raises:
        StructuralTagError: malformed, or a format or option that cannot be enforced
            exactly, naming its JSON pointer.

    Example::

        >>> parse_structural_tag({"type": "tag", "begin": "<a>", "content": {"type": "any_text"},
        ...                       "end": "</a>"})
        Tag(begin=b'<a>', content=AnyText(excludes=()), ends=(b'</a>',), path='')
    """
    if isinstance(spec, (bytes, str)):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as e:
            raise StructuralTagError(f"not valid JSON: {e}") from None
    if not isinstance(spec, dict):
        raise StructuralTagError(f"a structural tag is a JSON object, not {type(spec).__name__}")
    if spec.get("type") == "structural_tag" or "structures" in spec:
        if "structures" in spec:
            return _parse(_from_legacy(spec), "")
        extra = set(spec) - {"type", "format"}
        if extra:
            raise StructuralTagError(f"unknown keys {sorted(extra)} beside the format")
        if "format" not in spec:
            raise StructuralTagError('a structural tag needs "format"')
        return _parse(spec["format"], "/format")
    return _parse(spec, "")


def _from_legacy(spec: dict) -> dict:
    """The older form as the triggered_tags format it stands for."""
    extra = set(spec) - {"type", "structures", "triggers"}
    if extra:
        raise StructuralTagError(f"unknown keys {sorted(extra)} in a structural tag")
    structures = spec.get("structures")
    if not isinstance(structures, list):
        raise StructuralTagError("structures must be a list", "/structures")
    tags = []
    for i, item in enumerate(structures):
        if not isinstance(item, dict) or not {"begin", "schema", "end"} <= set(item):
            raise StructuralTagError('each structure needs "begin", "schema" and "end"', f"/structures/{i}")
        schema = item["schema"]
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except json.JSONDecodeError as e:
                raise StructuralTagError(f"schema is not valid JSON: {e}", f"/structures/{i}/schema") from None
        tags.append({"type": "tag", "begin": item["begin"], "end": item["end"],
                     "content": {"type": "json_schema", "json_schema": schema}})
    return {"type": "triggered_tags", "triggers": spec.get("triggers"), "tags": tags}


def _parse(fmt, path: str):
    if not isinstance(fmt, dict):
        raise StructuralTagError(f"a format is a JSON object, not {type(fmt).__name__}", path)
    kind = fmt.get("type")
    if kind is None and "begin" in fmt:
        kind = "tag"  # tags inside triggered_tags / tags_with_separator may leave it out
    if kind in _UNSUPPORTED:
        raise StructuralTagError(f"format {kind!r} is not supported: {_UNSUPPORTED[kind]}", path)
    if kind not in _KEYS:
        known = ", ".join(sorted(_KEYS))
        raise StructuralTagError(f"unknown format type {kind!r} (known: {known})", path)
    required, optional = _KEYS[kind]
    missing = required - set(fmt)
    if missing:
        raise StructuralTagError(f"{kind} needs {', '.join(sorted(missing))}", path)
    extra = set(fmt) - required - optional - {"type"}
    if extra:
        hint = ' (XGrammar names it "excludes")' if "excluded_str" in extra else ""
        raise StructuralTagError(f"unknown keys {sorted(extra)} in {kind}{hint}", path)
    return _PARSERS[kind](fmt, path)


def _text(value, path: str, what: str, empty: bool = True) -> bytes:
    if not isinstance(value, str):
        raise StructuralTagError(f"{what} must be a string, not {type(value).__name__}", path)
    if not empty and not value:
        raise StructuralTagError(f"{what} must not be empty", path)
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        raise StructuralTagError(f"{what} holds a lone surrogate, which no UTF-8 text can", path) from None


def _texts(value, path: str, what: str) -> tuple[bytes, ...]:
    if not isinstance(value, list):
        raise StructuralTagError(f"{what} must be a list of strings", path)
    return tuple(_text(v, f"{path}/{i}", what, empty=False) for i, v in enumerate(value))


def _flag(fmt: dict, key: str, path: str) -> bool:
    value = fmt.get(key, False)
    if not isinstance(value, bool):
        raise StructuralTagError(f"{key} must be true or false", f"{path}/{key}")
    return value


def _elements(fmt: dict, path: str) -> tuple:
    elements = fmt["elements"]
    if not isinstance(elements, list) or not elements:
        raise StructuralTagError("elements must be a non-empty list of formats", f"{path}/elements")
    return tuple(_parse(e, f"{path}/elements/{i}") for i, e in enumerate(elements))


def _const(fmt, path):
    return Const(_text(fmt["value"], f"{path}/value", "value"))


def _json(fmt, path):
    schema = fmt["json_schema"]
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as e:
            raise StructuralTagError(f"json_schema is not valid JSON: {e}", f"{path}/json_schema") from None
    if not isinstance(schema, (dict, bool)):
        raise StructuralTagError("json_schema must be an object or a boolean", f"{path}/json_schema")
    if fmt.get("style", "json") != "json":
        raise StructuralTagError(f"style {fmt['style']!r} is not supported (only \"json\")", f"{path}/style")
    if fmt.get("max_whitespace_cnt") is not None:
        raise StructuralTagError("max_whitespace_cnt is not supported: JSON whitespace follows the spec's "
                                 "whitespace setting", f"{path}/max_whitespace_cnt")
    if fmt.get("excludes"):
        raise StructuralTagError("excludes on a JSON Schema is not supported", f"{path}/excludes")
    return JsonPart(schema, _flag(fmt, "any_order", path), path)


def _any_text(fmt, path):
    for key in ("max_tokens", "max_chars"):
        if fmt.get(key) is not None:
            raise StructuralTagError(f"{key} on any_text is not supported", f"{path}/{key}")
    return AnyText(_texts(fmt.get("excludes", []), f"{path}/excludes", "excludes"))


def _regex(fmt, path):
    if not isinstance(fmt["pattern"], str):
        raise StructuralTagError("pattern must be a string", f"{path}/pattern")
    return RegexPart(fmt["pattern"], f"{path}/pattern")


def _grammar(fmt, path):
    raise StructuralTagError("grammar content is not supported inside a structural tag (a lark grammar "
                             "alone compiles as guided.Grammar)", path)


def _tag(fmt, path):
    begin = fmt["begin"]
    if isinstance(begin, dict):
        raise StructuralTagError("a token as begin is not supported; give the begin string", f"{path}/begin")
    end = fmt["end"]
    if isinstance(end, dict):
        raise StructuralTagError("a token as end is not supported; give the end string", f"{path}/end")
    ends = tuple(_text(e, f"{path}/end/{i}", "end") for i, e in enumerate(end)) if isinstance(end, list) \
        else (_text(end, f"{path}/end", "end"),)
    if not ends:
        raise StructuralTagError("end must be a string or a non-empty list of strings", f"{path}/end")
    return Tag(_text(begin, f"{path}/begin", "begin"), _parse(fmt["content"], f"{path}/content"), ends, path)


def _tags(fmt, path) -> tuple[Tag, ...]:
    tags = fmt["tags"]
    if not isinstance(tags, list):
        raise StructuralTagError("tags must be a list of tag formats", f"{path}/tags")
    out = []
    for i, t in enumerate(tags):
        node = _parse(t, f"{path}/tags/{i}")
        if not isinstance(node, Tag):
            raise StructuralTagError("each of tags must be a tag format", f"{path}/tags/{i}")
        out.append(node)
    return tuple(out)


def _triggered(fmt, path):
    triggers = _texts(fmt["triggers"], f"{path}/triggers", "a trigger")
    if not triggers:
        raise StructuralTagError("triggers must not be empty", f"{path}/triggers")
    tags = _tags(fmt, path)
    trigger_of = []
    for i, tag in enumerate(tags):
        matching = [k for k, t in enumerate(triggers) if tag.begin.startswith(t)]
        if len(matching) != 1:
            raise StructuralTagError(f"a tag's begin must start with exactly one trigger; {tag.begin.decode()!r} "
                                     f"starts with {len(matching)}", f"{path}/tags/{i}/begin")
        trigger_of.append(matching[0])
    at_least_one = _flag(fmt, "at_least_one", path)
    if at_least_one and not tags:
        raise StructuralTagError("at_least_one needs at least one tag", f"{path}/tags")
    return Triggered(triggers, tags, tuple(trigger_of), at_least_one, _flag(fmt, "stop_after_first", path),
                     _texts(fmt.get("excludes", []), f"{path}/excludes", "excludes"))


def _separated(fmt, path):
    tags = _tags(fmt, path)
    at_least_one = _flag(fmt, "at_least_one", path)
    if at_least_one and not tags:
        raise StructuralTagError("at_least_one needs at least one tag", f"{path}/tags")
    return Separated(tags, _text(fmt["separator"], f"{path}/separator", "separator"), at_least_one,
                     _flag(fmt, "stop_after_first", path))


def _counted(fmt, path):
    content = _parse(fmt["content"], f"{path}/content")
    kind = fmt.get("type")
    if kind == "optional":
        return Repeat(content, 0, 1)
    if kind == "star":
        return Repeat(content, 0, None)
    if kind == "plus":
        return Repeat(content, 1, None)
    lo, hi = fmt["min"], fmt["max"]
    for key, v in (("min", lo), ("max", hi)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise StructuralTagError(f"{key} must be an integer", f"{path}/{key}")
    if lo < 0 or (hi != -1 and hi < lo):
        raise StructuralTagError(f"repeat needs 0 <= min <= max (or max -1), got {lo}, {hi}", path)
    if max(lo, hi) > MAX_COPIES:
        raise StructuralTagError(f"repeat counts above {MAX_COPIES} are not supported", path)
    return Repeat(content, lo, None if hi == -1 else hi)


#: The most copies a ``repeat`` may ask for (each is a fresh copy of its content).
MAX_COPIES = 1000

_PARSERS = {
    "const_string": _const, "json_schema": _json, "any_text": _any_text, "regex": _regex, "grammar": _grammar,
    "sequence": lambda f, p: Sequence(_elements(f, p)), "or": lambda f, p: Or(_elements(f, p)),
    "tag": _tag, "triggered_tags": _triggered, "tags_with_separator": _separated,
    "optional": _counted, "star": _counted, "plus": _counted, "repeat": _counted,
}

# -- the automaton ------------------------------------------------------------------------


def compile_structural_tag(root, whitespace="flexible") -> LazyDFA:
    """The automaton of the texts a structural tag accepts (determinised lazily).

    Args:
        root: ``parse_structural_tag``'s result.
        whitespace: the whitespace of every JSON Schema part (``guided.JsonSchema``'s).

    Returns:
        A ``LazyDFA``.

    Raises:
        StructuralTagError: a part that cannot be compiled (naming its pointer), or a
            structure no text satisfies.

    Example::

        >>> dfa = compile_structural_tag(parse_structural_tag(
        ...     {"type": "tag", "begin": "<a>", "content": {"type": "any_text"}, "end": "</a>"}))
        >>> dfa.matches(b"<a>hi</a>"), dfa.matches(b"<a>hi</a>!</a>")
        (True, False)
    """
    nfa = NFA(lazy=True)
    try:
        start, plain, _ = _Builder(nfa, whitespace).build(root, None, False)
        return LazyDFA(nfa, start, plain)
    except EmptyLanguageError:
        nfa.release()
        raise StructuralTagError("no text satisfies the structural tag") from None
    except BaseException:
        nfa.release()  # the JSON parts' deferred builders close over the NFA
        raise


class _Builder:
    """Builds nodes into one NFA. ``build(node, ends, tail)`` gives ``(start, plain,
    eaten)``: where the node's text ends with nothing more read (None if it cannot),
    and where it ends having read one of ``ends`` as well (free text that is the last
    part of a tag's content stops at the tag's end string; None if it does not).

    ``ends``: the end strings of the nearest enclosing tag (None outside tags);
    ``tail``: whether the node is the last part of that tag's content."""

    def __init__(self, nfa: NFA, whitespace):
        self.nfa = nfa
        self.whitespace = whitespace

    def build(self, node, ends, tail: bool) -> tuple[int, int | None, int | None]:
        nfa = self.nfa
        if isinstance(node, Const):
            s, e = nfa.byte_string(node.text)
            return s, e, None
        if isinstance(node, RegexPart):
            return (*self._regex(node), None)
        if isinstance(node, JsonPart):
            return (*self._json(node), None)
        if isinstance(node, AnyText):
            return self._any_text(node, ends, tail)
        if isinstance(node, Sequence):
            return self._sequence(node, ends, tail)
        if isinstance(node, Or):
            return self._or([self.build(e, ends, tail) for e in node.elements])
        if isinstance(node, Repeat):
            return (*self._repeat(node, ends), None)
        if isinstance(node, Tag):
            return (*self._tag(node, node.begin), None)
        if isinstance(node, Triggered):
            return self._triggered(node, ends, tail)
        if isinstance(node, Separated):
            return (*self._separated(node), None)
        raise TypeError(f"not a structural tag node: {node!r}")  # pragma: no cover

    def _regex(self, node: RegexPart) -> tuple[int, int]:
        try:
            return embed(self.nfa, compile_regex(node.pattern))
        except (RegexSyntaxError, UnsupportedRegexFeature, EmptyLanguageError) as e:
            raise StructuralTagError(f"regex: {e}", node.path) from None

    def _json(self, node: JsonPart) -> tuple[int, int]:
        from guided.grammars.json_schema.compiler import SchemaCompiler
        from guided.grammars.json_schema.keywords import is_recursion_panic

        try:
            compiler = SchemaCompiler(node.schema, self.whitespace, True,
                                      key_order="any" if node.any_order else "schema")
            return compiler.value(self.nfa, compiler.root, "#", 0)
        except RecursiveSchemaError as e:
            raise StructuralTagError(f"json_schema: {e} (a recursive schema is not supported inside a structural "
                                     "tag)", node.path) from None
        except EmptyLanguageError:
            raise StructuralTagError("json_schema: no JSON value satisfies the schema", node.path) from None
        except SchemaError as e:
            raise StructuralTagError(f"json_schema: {e}", node.path) from None
        except RecursionError:
            raise StructuralTagError("json_schema: the schema nests too deeply", node.path) from None
        except BaseException as e:
            if is_recursion_panic(e):
                raise StructuralTagError("json_schema: the schema nests too deeply", node.path) from None
            raise

    def _any_text(self, node: AnyText, ends, tail: bool):
        nfa = self.nfa
        stops, excludes, plain, eaten = self._free_text_exits(ends, tail)
        start = free_text(nfa, [(e, eaten) for e in stops], node.excludes + tuple(excludes), plain)
        return start, plain, eaten

    def _free_text_exits(self, ends, tail: bool):
        """For free text under ``ends`` / ``tail``: the end strings it stops at, those
        it may not contain, and its plain and eaten exits (new states, or None)."""
        nfa = self.nfa
        closing = [e for e in ends or () if e]
        if ends is not None and tail:
            if not closing:
                raise StructuralTagError("free text ends a tag whose end strings are all empty: the tag could "
                                         "never be closed (give a non-empty end)")
            plain = nfa.state() if b"" in ends else None
            return closing, [], plain, nfa.state()
        return [], closing, nfa.state(), None

    def _sequence(self, node: Sequence, ends, tail: bool):
        nfa = self.nfa
        first = prev = None
        for i, element in enumerate(node.elements):
            last = i == len(node.elements) - 1
            s, plain, eaten = self.build(element, ends, tail and last)
            if prev is None:
                first = s
            else:
                nfa.epsilon(prev, s)
            if last:
                return first, plain, eaten
            prev = plain
        raise AssertionError("a sequence has elements")  # pragma: no cover

    def _or(self, built) -> tuple[int, int | None, int | None]:
        nfa = self.nfa
        start = nfa.state()
        plain = nfa.state() if any(b[1] is not None for b in built) else None
        eaten = nfa.state() if any(b[2] is not None for b in built) else None
        for s, p, x in built:
            nfa.epsilon(start, s)
            if p is not None:
                nfa.epsilon(p, plain)
            if x is not None:
                nfa.epsilon(x, eaten)
        return start, plain, eaten

    def _repeat(self, node: Repeat, ends) -> tuple[int, int]:
        nfa = self.nfa

        def copy() -> tuple[int, int]:
            s, plain, _ = self.build(node.content, ends, False)
            return s, plain

        return nfa.repeat(copy, node.lo, node.hi)

    def _tag(self, tag: Tag, begin: bytes) -> tuple[int, int]:
        """``begin`` (the tag's, or what follows its trigger), content, an end."""
        nfa = self.nfa
        s, b_end = nfa.byte_string(begin)
        cs, plain, eaten = self.build(tag.content, tag.ends, True)
        nfa.epsilon(b_end, cs)
        after = nfa.state()
        if plain is not None:
            for end in dict.fromkeys(tag.ends):
                es, ee = nfa.byte_string(end)
                nfa.epsilon(plain, es)
                nfa.epsilon(ee, after)
        if eaten is not None:
            nfa.epsilon(eaten, after)
        return s, after

    def _triggered(self, node: Triggered, ends, tail: bool):
        nfa = self.nfa
        stops, excludes, plain, eaten = self._free_text_exits(ends, tail)
        text_done = plain  # where the text may end without a tag's end string
        if node.stop_after_first:  # the structure ends after its first tag
            if plain is None:  # (free text that closes its tag; the tag's end follows this one)
                plain = nfa.state()
            after_tag = plain
        else:
            after_tag = nfa.state()
        dispatch = []
        for k, trigger in enumerate(node.triggers):
            frags = [self._tag(tag, tag.begin[len(trigger):]) for tag, of in zip(node.tags, node.trigger_of)
                     if of == k]
            if frags:
                s, e = nfa.union(frags)
                nfa.epsilon(e, after_tag)
                dispatch.append((trigger, s))
            else:  # a trigger no tag begins with: never written
                excludes.append(trigger)
        hub = free_text(nfa, dispatch + [(e, eaten) for e in stops], node.excludes + tuple(excludes), text_done)
        if not node.stop_after_first:
            nfa.epsilon(after_tag, hub)
        if not node.at_least_one:
            return hub, plain, eaten
        s, e = nfa.union([self._tag(tag, tag.begin) for tag in node.tags])
        nfa.epsilon(e, after_tag)
        return s, plain, eaten

    def _separated(self, node: Separated) -> tuple[int, int]:
        nfa = self.nfa
        start, end = nfa.state(), nfa.state()
        if not node.tags:
            return start, start
        ts, te = nfa.union([self._tag(tag, tag.begin) for tag in node.tags])
        nfa.epsilon(start, ts)
        if not node.at_least_one:
            nfa.epsilon(start, end)
        nfa.epsilon(te, end)
        if not node.stop_after_first:
            ss, se = nfa.byte_string(node.separator)
            nfa.epsilon(te, ss)
            nfa.epsilon(se, ts)
        return start, end


# -- free text ----------------------------------------------------------------------------

#: The UTF-8 decoder: per state, its moves ``(lo, hi, next state)``. 0: between
#: characters; 1-3: that many continuation bytes to go; 4-7: the first continuation
#: byte after E0, ED, F0, F4 (whose ranges exclude overlong forms and surrogates).
_UTF8 = (
    ((0x00, 0x7F, 0), (0xC2, 0xDF, 1), (0xE0, 0xE0, 4), (0xE1, 0xEC, 2), (0xED, 0xED, 5), (0xEE, 0xEF, 2),
     (0xF0, 0xF0, 6), (0xF1, 0xF3, 3), (0xF4, 0xF4, 7)),
    ((0x80, 0xBF, 0),), ((0x80, 0xBF, 1),), ((0x80, 0xBF, 2),),
    ((0xA0, 0xBF, 1),), ((0x80, 0x9F, 1),), ((0x90, 0xBF, 2),), ((0x80, 0x8F, 2),),
)


class _Strings:
    """An Aho-Corasick automaton over bytes: ``step(node, byte)``; ``found[node]``:
    the indices of the strings that end where ``node`` is reached."""

    def __init__(self, strings: list[bytes]):
        goto: list[dict[int, int]] = [{}]
        found: list[set[int]] = [set()]
        for k, text in enumerate(strings):
            node = 0
            for b in text:
                nxt = goto[node].get(b)
                if nxt is None:
                    nxt = goto[node][b] = len(goto)
                    goto.append({})
                    found.append(set())
                node = nxt
            found[node].add(k)
        fail = [0] * len(goto)
        queue = deque(goto[0].values())
        while queue:
            node = queue.popleft()
            for b, child in goto[node].items():
                f = fail[node]
                while f and b not in goto[f]:
                    f = fail[f]
                fail[child] = goto[f][b] if b in goto[f] and goto[f][b] != child else 0
                found[child] |= found[fail[child]]
                queue.append(child)
        self.goto, self.fail, self.found = goto, fail, found
        self.alphabet = sorted({b for text in strings for b in text})

    def step(self, node: int, b: int) -> int:
        goto, fail = self.goto, self.fail
        while node and b not in goto[node]:
            node = fail[node]
        return goto[node].get(b, 0)


def free_text(nfa: NFA, stops: list[tuple[bytes, int]], excludes, done: int | None) -> int:
    """A fragment of UTF-8 text in ``nfa``: it may contain no ``excludes`` and no stop
    string; the first stop string written ends it at that stop's state, and where
    the text may end without one it links to ``done`` (None: it may not).

    Args:
        nfa: the NFA to build in.
        stops: ``(string, state)``: writing ``string`` (its first occurrence) moves
            to ``state``.
        excludes: strings the text may not contain.
        done: where the text may end (at a character boundary), or None.

    Returns:
        The fragment's start state.

    Example::

        >>> nfa = NFA(); end, done = nfa.state(), nfa.state()
        >>> start = free_text(nfa, [(b"</a>", end)], [], None)
    """
    strings = [s for s, _ in stops] + list(excludes)
    machine = _Strings(strings)
    n_stops = len(stops)
    alphabet = machine.alphabet
    ids: dict[tuple[int, int], int] = {}
    todo = deque()

    def state_of(key: tuple[int, int]) -> int:
        got = ids.get(key)
        if got is None:
            got = ids[key] = nfa.state()
            todo.append(key)
        return got

    start = state_of((0, 0))
    while todo:
        node, u = key = todo.popleft()
        me = ids[key]
        if u == 0 and done is not None:
            nfa.epsilon(me, done)
        moves = []
        for lo, hi, u2 in _UTF8[u]:
            cuts = sorted({lo, hi + 1, *(b for b in alphabet if lo <= b <= hi),
                           *(b + 1 for b in alphabet if lo <= b <= hi)})
            for a, z in pairwise(cuts):
                moves.append((a, z - 1, u2))
        edges = []
        for a, z, u2 in moves:
            node2 = machine.step(node, a)
            found = machine.found[node2]
            if any(k >= n_stops for k in found):
                continue  # an excluded string: no way on
            if found:
                targets = {stops[k][1] for k in found}
            else:
                targets = {state_of((node2, u2))}
            for t in targets:
                if edges and edges[-1][1] == a - 1 and edges[-1][2] == t:
                    edges[-1] = (edges[-1][0], z, t)
                else:
                    edges.append((a, z, t))
        for a, z, t in edges:
            nfa.edge(me, a, z, t)
    return start
