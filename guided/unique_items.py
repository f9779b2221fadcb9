"""``uniqueItems`` beside the automaton: a matcher that refuses the token completing
an item equal to an earlier one of the same array.

::

    token ──► base matcher (automaton: JSON syntax, every other keyword)
          └─► tracker: where the document stands (a stack of containers, each with
              the schemas that apply there: ``grammars.json_schema.containers.unique.SiteMap``), and
              for each checked array the items seen so far (canonical values)

    mask  = base mask  minus  the allowed tokens that would complete a repeated item

The compiler leaves an array's ``uniqueItems`` to this check only where the
array is conjunctive (``grammars.json_schema.containers.unique``): there the constraint holds whenever
the document reaches it, so base and tracker together accept exactly the valid
documents. Items compare as JSON values: ``1`` equals ``1.0``, ``true`` is not ``1``,
objects are equal whatever their key order, strings whatever their escapes.

Cost: nothing while no checked array is open. Inside one, a mask unpacks the base
row (~30 µs) and steps the tracker over the allowed tokens that could complete an
item there, about 2-5 µs a token in Python. Filters keep that set small: inside a
string item, the tokens that close it and then only close containers or open the
next string are found by a lookup on what they write before the quote
(``_Candidates.closing``), so only the few others are stepped; inside a container
item, only tokens holding enough closing brackets to end it are stepped.
"""

from __future__ import annotations

import json
import re

import numpy as np
import torch

from guided.grammars.json_schema.containers.unique import SiteMap, item_key

from .bitmask import host_row
from .matcher import Guide, Matcher, refuse_budget

# Where the tracker stands between two bytes.
_VALUE, _KEY, _COLON, _AFTER, _STRING, _NUMBER, _LITERAL = range(7)
_WS = frozenset(b" \t\n\r")
_NUMBER_BYTES = frozenset(b"+-.eE0123456789")
_LITERAL_LEN = {ord("t"): 4, ord("f"): 5, ord("n"): 4}
_QUOTE, _BACKSLASH, _COMMA, _COLON_BYTE = 34, 92, 44, 58
_OPEN_OBJECT, _CLOSE_OBJECT, _OPEN_ARRAY, _CLOSE_ARRAY = 123, 125, 91, 93

#: A tracker state: (frames, position, in a key?, after a backslash?, where the
#: string began, literal bytes left). Frames are ("o", node, key) for an object and
#: ("a", node, index, checked?, items seen, where the current item began or -1).
_START = ((), _VALUE, False, False, -1, 0)


class _Tracker:
    """Steps tracker states over bytes (states are tuples, never changed)."""

    def __init__(self, sites: SiteMap):
        self.sites = sites

    def feed(self, state, data: bytes, base: int, text: bytearray):
        """The state after ``data``, which starts at offset ``base`` of the document
        (``text`` holds the bytes before it); None if ``data`` completes an item equal
        to an earlier one of a checked array."""
        frames, lex, is_key, esc, start, left = state
        stack = list(frames)
        sites = self.sites
        i, n = 0, len(data)
        while i < n:
            b = data[i]
            pos = base + i
            if lex == _STRING:
                if esc:
                    esc = False
                elif b == _BACKSLASH:
                    esc = True
                elif b == _QUOTE:
                    if is_key:
                        f = stack[-1]
                        stack[-1] = ("o", f[1], json.loads(_slice(text, data, base, start, pos + 1)))
                        lex = _COLON
                    else:
                        if not _completed(stack, text, data, base, pos + 1):
                            return None
                        lex = _AFTER
                i += 1
                continue
            if lex == _NUMBER:
                if b in _NUMBER_BYTES:
                    i += 1
                    continue
                if not _completed(stack, text, data, base, pos):
                    return None
                lex = _AFTER  # and read this byte again there
                continue
            if lex == _LITERAL:
                left -= 1
                if not left:
                    if not _completed(stack, text, data, base, pos + 1):
                        return None
                    lex = _AFTER
                i += 1
                continue
            i += 1
            if b in _WS:
                continue
            if lex == _VALUE:
                if b == _CLOSE_ARRAY:  # an empty array
                    stack.pop()
                    if not _completed(stack, text, data, base, pos + 1):
                        return None
                    lex = _AFTER
                    continue
                top = stack[-1] if stack else None
                if top is not None and top[0] == "a" and top[3]:
                    stack[-1] = top[:5] + (pos,)  # a checked array's item begins
                if b == _OPEN_OBJECT or b == _OPEN_ARRAY:
                    if top is None:
                        schemas = sites.start()
                    elif top[0] == "a":
                        schemas = sites.index_child(top[1], top[2])
                    else:
                        schemas = sites.key_child(top[1], top[2])
                    if b == _OPEN_OBJECT:
                        stack.append(("o", sites.open(schemas, "object"), None))
                        lex = _KEY
                    else:
                        node = sites.open(schemas, "array")
                        stack.append(("a", node, 0, sites.unique(node), frozenset(), -1))
                elif b == _QUOTE:
                    lex, is_key, esc, start = _STRING, False, False, pos
                elif b in _LITERAL_LEN:
                    lex, left = _LITERAL, _LITERAL_LEN[b] - 1
                else:
                    lex = _NUMBER
            elif lex == _KEY:
                if b == _QUOTE:
                    lex, is_key, esc, start = _STRING, True, False, pos
                else:  # "}": an empty object
                    stack.pop()
                    if not _completed(stack, text, data, base, pos + 1):
                        return None
                    lex = _AFTER
            elif lex == _COLON:
                lex = _VALUE
            elif b == _COMMA:  # _AFTER
                top = stack[-1]
                if top[0] == "a":
                    stack[-1] = ("a", top[1], top[2] + 1, top[3], top[4], -1)
                    lex = _VALUE
                else:
                    lex = _KEY
            else:  # "}" or "]"
                stack.pop()
                if not _completed(stack, text, data, base, pos + 1):
                    return None
        return (tuple(stack), lex, is_key, esc, start, left)


def _slice(text: bytearray, data: bytes, base: int, start: int, end: int) -> bytes:
    """Document bytes ``[start, end)``, of which those from ``base`` on are ``data``'s."""
    if start >= base:
        return data[start - base : end - base]
    return bytes(text[start:]) + data[: end - base]


def _completed(stack: list, text, data, base: int, end: int) -> bool:
    """A value ending at ``end`` is complete: where it is an item of a checked array,
    note it there; False if an earlier item equals it."""
    if not stack:
        return True
    top = stack[-1]
    if top[0] != "a" or not top[3]:
        return True
    key = item_key(_slice(text, data, base, top[5], end))
    if key in top[4]:
        return False
    stack[-1] = ("a", top[1], top[2], True, top[4] | {key}, -1)
    return True


class _Candidates:
    """Per vocabulary: which tokens could complete an item, by what they hold."""

    def __init__(self, vocab):
        tokens = vocab.token_bytes
        n = vocab.size

        def having(test):
            return np.array([bool(t) and test(t) for t in tokens[:n]], dtype=bool)

        self.quote = having(lambda t: b'"' in t)
        self.close = having(lambda t: b"}" in t or b"]" in t)
        self._closers = np.array([t.count(b"}") + t.count(b"]") if t else 0 for t in tokens[:n]], dtype=np.int64)
        self._closing_levels: dict[int, np.ndarray] = {}
        # A closing bracket after a quote: what ends a container from inside one of its strings.
        self.quote_then_close = having(lambda t: b'"' in t and (b"}" in t[t.index(b'"'):] or b"]" in t[t.index(b'"'):]))
        self.delimiter = having(lambda t: any(c in t for c in b",]} \t\n\r"))
        self.literal = having(lambda t: b"true" in t or b"false" in t or b"null" in t)
        self.any = having(lambda t: True)
        self.between = self.quote | self.delimiter | self.close | self.literal
        self._closing: tuple[dict[str, list[int]], np.ndarray] | None = None
        self._tokens = tokens[:n]

    def closing_levels(self, levels: int) -> np.ndarray:
        """The tokens holding at least ``levels`` closing brackets."""
        got = self._closing_levels.get(levels)
        if got is None:
            got = self._closing_levels[levels] = self._closers >= levels
        return got

    def closing(self) -> tuple[dict[str, list[int]], np.ndarray]:
        """``(by_content, other)`` for the tokens read inside a string from a clean
        point (no escape or UTF-8 character half read): ``by_content`` maps what a
        token writes before the quote that closes the string, decoded, to the tokens
        that then only close containers or open the next string (so complete no other
        item); ``other`` (bool per token) marks the other tokens holding a quote."""
        if self._closing is None:
            by_content: dict[str, list[int]] = {}
            other = self.quote.copy()
            for t in np.flatnonzero(self.quote).tolist():
                content, tail = _split_at_closing_quote(self._tokens[t])
                if content is not None and _SIMPLE_TAIL.fullmatch(tail):
                    try:
                        text = json.loads(b'"' + content + b'"')
                    except ValueError:
                        continue
                    by_content.setdefault(text, []).append(t)
                    other[t] = False
            self._closing = by_content, other
        return self._closing


#: What may follow a string item's closing quote in a token without completing
#: another item: commas, closing brackets, whitespace, the quote opening the next string.
_SIMPLE_TAIL = re.compile(rb'[\s,\]}]*"?')


def _split_at_closing_quote(token: bytes) -> tuple[bytes | None, bytes]:
    """``(content, tail)`` around the first quote of ``token`` that no backslash
    escapes, read from a clean point inside a string; ``(None, b"")`` if none."""
    esc = False
    for i, b in enumerate(token):
        if esc:
            esc = False
        elif b == _BACKSLASH:
            esc = True
        elif b == _QUOTE:
            return token[:i], token[i + 1 :]
    return None, b""


_CANDIDATES: dict[str, _Candidates] = {}


def _candidates(vocab) -> _Candidates:
    got = _CANDIDATES.get(vocab.fingerprint)
    if got is None:
        got = _CANDIDATES[vocab.fingerprint] = _Candidates(vocab)
    return got


class UniqueItemsGuide(Guide):
    """A JSON Schema guide whose ``uniqueItems`` on open kinds of items is checked
    beside the automaton (see the module docstring).

    Internal: ``guided.compile`` wraps the schema's guide in one where the schema
    needs it.

    Args:
        base: the guide of everything but those ``uniqueItems`` (an ``FSMGuide`` or a
            ``GrammarGuide``).
        sites: where the checked arrays stand in a document (``SiteMap``).

    Example::

        >>> guide = guided.compile({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, tok)
        >>> m = guide.matcher()
        >>> m.accept_tokens(tok.encode('["a","a"]', add_special_tokens=False))   # '"]' completes a repeat
        False
    """

    def __init__(self, base: Guide, sites: SiteMap):
        self.base = base
        self.vocab = base.vocab
        self.tracker = _Tracker(sites)
        self.candidates = _candidates(base.vocab)

    def matcher(self) -> "UniqueItemsMatcher":
        """A fresh ``UniqueItemsMatcher`` at the start of the document."""
        return UniqueItemsMatcher(self, self.base.matcher())

    def _growth_units(self) -> int:
        return self.base._growth_units()

    def _growth_bytes(self) -> int:
        return self.base._growth_bytes()

    def unit_bytes(self) -> int:
        return self.base.unit_bytes()

    @property
    def max_bytes(self) -> int | None:
        """The base guide's growth limit (the base is what grows)."""
        return self.base.max_bytes

    @max_bytes.setter
    def max_bytes(self, value: int | None) -> None:
        self.base.max_bytes = value

    def _shared_roots(self) -> tuple:
        return (*self.base._shared_roots(), self.candidates)

    def needs(self, state) -> np.ndarray | None:
        """Which tokens (bool per token) could complete an item of a checked array
        from tracker ``state``; None when no checked array is open."""
        frames, lex = state[0], state[1]
        inner = next((j for j in range(len(frames) - 1, -1, -1) if frames[j][0] == "a" and frames[j][3]), None)
        if inner is None:
            return None
        c = self.candidates
        if inner < len(frames) - 1:  # inside a container item: only closing its brackets ends it
            need = c.closing_levels(len(frames) - 1 - inner)
            return need & c.quote_then_close if lex == _STRING else need
        several = any(f[0] == "a" and f[3] for f in frames[:inner])
        if lex == _STRING and not state[2]:
            need = c.quote
        elif lex == _NUMBER:
            need = c.delimiter
        elif lex == _LITERAL:
            need = c.any
        else:
            need = c.between
        return need | c.close if several else need

    def closing_repeats(self, state, pos: int, text: bytearray) -> list[int] | None:
        """Inside a string item of the only checked array open, from a clean point:
        the tokens of ``_Candidates.closing``'s ``by_content`` that would close it as
        a repeat (its written part plus theirs equal to an earlier item), found by
        lookup rather than stepping the tracker over each; None elsewhere."""
        frames, lex, is_key, esc = state[:4]
        if lex != _STRING or is_key or esc or not frames:
            return None
        top = frames[-1]
        if top[0] != "a" or not top[3] or any(f[0] == "a" and f[3] for f in frames[:-1]):
            return None
        try:
            written = json.loads(bytes(text[top[5] : pos]) + b'"')
        except ValueError:  # an escape or a UTF-8 character half written
            return None
        by_content = self.candidates.closing()[0]
        refused: list[int] = []
        for key in top[4]:  # (canonical keys: ("s", text) for a string; ("z",) for null)
            if key[0] == "s" and key[1].startswith(written):
                refused += by_content.get(key[1][len(written):], ())
        return refused


class UniqueItemsMatcher(Matcher):
    """A base matcher and the tracker's state after each token (for ``rollback``).

    Internal: made by ``UniqueItemsGuide.matcher()``; see ``Matcher`` for the contract.
    """

    __slots__ = ("guide", "base", "_states", "_text")

    def __init__(self, guide: UniqueItemsGuide, base: Matcher, states=None, text=b""):
        self.guide = guide
        self.base = base
        self._states = list(states) if states is not None else [(_START, 0)]
        self._text = bytearray(text)

    def fill_next_token_bitmask(self, bitmask, index: int = 0, remaining: int | None = None) -> bool:
        """The base mask less the tokens that would complete a repeated item; returns True."""
        refuse_budget(self.guide, remaining)
        self.base.fill_next_token_bitmask(bitmask, index)
        state, pos = self._states[-1]
        need = self.guide.needs(state)
        if need is None:
            return True
        row = host_row(bitmask, index)
        on_host = row is not None
        if not on_host:
            row = bitmask[index].cpu().numpy()
        size = len(need)
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:size].astype(bool)
        tokens, feed, text = self.guide.vocab.token_bytes, self.guide.tracker.feed, self._text
        refused = self.guide.closing_repeats(state, pos, text)
        if refused is None:
            refused = []
        else:  # the tokens closing a repeat are known; step the others holding a quote
            need = self.guide.candidates.closing()[1]
        refused += [t for t in np.flatnonzero(bits & need).tolist() if feed(state, tokens[t], pos, text) is None]
        if refused:
            words = row.view(np.uint32)
            ids = np.array(refused, dtype=np.int64)
            np.bitwise_and.at(words, ids >> 5, ~(np.uint32(1) << (ids & 31).astype(np.uint32)))
            if not words.any():
                # Every way on completes a repeat (the check sees an item only once it
                # is complete, so the text may have entered such a dead end): EOS
                # alone, as at any dead end, and accept_token(EOS) refuses it.
                for e in self.guide.vocab.eos_token_ids:
                    words[e >> 5] |= np.uint32(1) << np.uint32(e & 31)
            if not on_host:
                bitmask[index, : len(row)] = torch.from_numpy(row).to(bitmask.device)
        return True

    def accept_token(self, token_id: int) -> bool:
        """Advance base and tracker; False (state unchanged) if either refuses the token."""
        if not self.base.accept_token(token_id):
            return False
        state, pos = self._states[-1]
        data = self.guide.vocab.token_bytes[token_id] if token_id not in self.guide.vocab.eos_token_ids else b""
        data = data or b""
        nxt = self.guide.tracker.feed(state, data, pos, self._text) if data else state
        if nxt is None:
            self.base.rollback(1)
            return False
        self._text += data
        self._states.append((nxt, pos + len(data)))
        return True

    def is_accepting(self) -> bool:
        return self.base.is_accepting()

    def is_terminated(self) -> bool:
        return self.base.is_terminated()

    @property
    def num_tokens(self) -> int:
        """How many tokens were accepted (EOS included)."""
        return len(self._states) - 1

    def rollback(self, num_tokens: int = 1) -> None:
        """Undo the last ``num_tokens`` tokens in both (see ``Matcher``)."""
        self.base.rollback(num_tokens)  # (checks the count)
        if num_tokens:
            del self._states[-num_tokens:]
            del self._text[self._states[-1][1] :]

    def fork(self) -> "UniqueItemsMatcher":
        """An independent copy: the base forked, the tracker states and text copied."""
        return UniqueItemsMatcher(self.guide, self.base.fork(), self._states, self._text)

    def reset(self) -> None:
        """Back to the start of the document."""
        self.base.reset()
        del self._states[1:]
        self._text.clear()
