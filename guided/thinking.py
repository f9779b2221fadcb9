"""Think, then answer: free reasoning text, its end string, then any spec.

``AfterThinking(spec)`` lets a reasoning model write ``<think>`` free text
``</think>`` before an answer that ``spec`` constrains. Two guides, one matcher::

    start · text without the end string · end       the think guide (a structural tag)
    then spec                                        the answer guide (any spec kind)

    mask: think phase  ── budget left ──> the think guide's row
                       ── budget spent ─> the think row ∩ tokens that spell the rest of
                                          the end string (the end is forced)
          answer phase ─────────────────> the answer matcher's mask

With the tokens left known (``remaining``, budget-aware masks) and an answer guide
that supports them, the end is also forced once closing the block (at most
``close_max`` tokens) and the shortest answer no longer fit after one more token of
thought; the forced tokens are then those that still close in time.

A token may not run past the end string into the answer (its bytes would leave the
think guide): the answer starts on a token boundary, which costs a tokenizer that
merges the end with what follows one more token, and keeps the two guides apart so
that any spec (grammars too) can follow.
"""

from __future__ import annotations

import re

import numpy as np
import torch

from guided.fsm.distance import INFINITE, fewest_tokens, token_strings
from guided.fsm.regex import compile_regex

from .bitmask import write_host_row
from .matcher import FSMGuide, Guide, Matcher, refuse_budget


class AfterThinking:
    """Output: free reasoning text between ``start`` and ``end``, then ``spec``.

    The thinking text may be anything but the end string; ``end`` closes it, and the
    rest of the output satisfies ``spec``. With ``max_thinking_tokens``, once that many
    tokens have been spent thinking, only tokens that spell the rest of ``end`` are
    allowed, so the answer always comes.

    Args:
        spec: what the answer must satisfy (any spec, or a JSON Schema dict).
        start: what the output starts with (``""`` when the chat template already
            opened the thinking block).
        end: what closes it; must not be empty.
        max_thinking_tokens: the most tokens for ``start`` and the thinking text
            before ``end`` is forced (None: no limit).

    Raises:
        ValueError: an empty ``end``, or a negative ``max_thinking_tokens``.

    Example::

        >>> spec = guided.AfterThinking({"type": "integer"}, max_thinking_tokens=64)
        >>> guided.generate(model, tokenizer, "How many legs have 3 spiders?", spec).text
        '<think>Each spider has 8 legs ...</think>24'
    """

    def __init__(self, spec, start: str = "<think>", end: str = "</think>", max_thinking_tokens: int | None = None):
        from .specs import as_spec

        if not isinstance(end, str) or not end:
            raise ValueError("end must be a non-empty string")
        if not isinstance(start, str):
            raise TypeError("start must be a string")
        if max_thinking_tokens is not None and max_thinking_tokens < 0:
            raise ValueError(f"max_thinking_tokens must be >= 0, got {max_thinking_tokens}")
        self.spec = as_spec(spec)
        self.start = start
        self.end = end
        self.max_thinking_tokens = max_thinking_tokens

    def split(self, text: str) -> tuple[str, str]:
        """``(thinking text, answer text)`` of an output (an unclosed block is all
        thinking, with an empty answer)."""
        body = text.removeprefix(self.start)
        at = body.find(self.end)
        if at < 0:
            return body, ""
        return body[:at], body[at + len(self.end):]

    def think_tag(self) -> dict:
        """The thinking block as a structural tag."""
        return {"type": "tag", "begin": self.start, "content": {"type": "any_text"}, "end": self.end}

    def key(self, answer_key) -> tuple:
        """The compile cache's key, given the answer spec's key."""
        return ("after_thinking", self.start, self.end, self.max_thinking_tokens, answer_key)

    def __repr__(self) -> str:
        return (f"AfterThinking({self.spec!r}, start={self.start!r}, end={self.end!r}, "
                f"max_thinking_tokens={self.max_thinking_tokens})")


class ThinkingGuide(Guide):
    """The guide of an ``AfterThinking`` spec: the think guide, then the answer's.

    Internal: ``guided.compile`` returns one for an ``AfterThinking`` spec.

    Args:
        think: the ``FSMGuide`` of the thinking block.
        answer: the answer spec's guide.
        spec: the ``AfterThinking`` spec.

    Example::

        >>> guide = guided.compile(guided.AfterThinking(guided.Regex("yes|no")), tokenizer)
        >>> m = guide.matcher()
    """

    def __init__(self, think: FSMGuide, answer: Guide, spec: AfterThinking):
        self.think = think
        self.answer = answer
        self.vocab = answer.vocab
        self.budget = spec.max_thinking_tokens
        self._start = spec.start.encode()
        self._end = spec.end.encode()
        self._forced: dict[bytes, FSMGuide] = {}  # the rest of the end string -> its literal guide
        self._close_max: int | None = None

    @property
    def max_bytes(self) -> int | None:
        """The growth limit, which both guides check as they grow (the thinking
        block's automaton and the answer's are built as decoding reaches them)."""
        return self.answer.max_bytes

    @max_bytes.setter
    def max_bytes(self, value: int | None) -> None:
        self.think.max_bytes = self.answer.max_bytes = value

    @property
    def supports_budget(self) -> bool:
        """Budget-aware where the answer's guide is."""
        return self.answer.supports_budget

    @property
    def budget_exact(self) -> bool:
        """Whether ``min_tokens`` is the true minimum (else a sound upper bound)."""
        return self.think.budget_exact and self.answer.budget_exact

    def min_tokens(self) -> int:
        """The fewest tokens of an output: the empty block, then the shortest
        answer, EOS included."""
        think, answer = self.think.min_tokens(), self.answer.min_tokens()
        return INFINITE if INFINITE in (think, answer) else think - 1 + answer

    @property
    def close_max(self) -> int:
        """The most tokens closing the block can take from any point of it (the
        fewest tokens spelling the longest rest of ``start`` + ``end``)."""
        if self._close_max is None:
            strings, longest = token_strings(self.vocab)
            rests = [self._start[j:] + self._end for j in range(len(self._start) + 1)]
            rests += [self._end[k:] for k in range(1, len(self._end))]
            cuts = [fewest_tokens(rest, strings, longest) for rest in rests]
            self._close_max = max(INFINITE if c is None else len(c) - 1 for c in cuts)
        return self._close_max

    def matcher(self) -> ThinkingMatcher:
        return ThinkingMatcher(self)

    def _shared_roots(self) -> tuple:
        return self.think._shared_roots() + self.answer._shared_roots()

    def _growth_units(self) -> int:
        return self.think._growth_units() + self.answer._growth_units()

    def _growth_bytes(self) -> int:
        return self.think._growth_bytes() + self.answer._growth_bytes()

    def unit_bytes(self) -> int:
        return max(self.think.unit_bytes(), self.answer.unit_bytes())

    def forced_row(self, think_text: bytes, close_within: int | None = None) -> np.ndarray | None:
        """The tokens that spell a non-empty prefix of what is left of the end string
        after ``think_text`` (the shortest way to close the block); None where that
        rest starts inside a character (``start`` cut mid-character: it is finished
        first). ``close_within``: only those after which the rest takes at most that
        many tokens more (the closest where none does)."""
        rest = self._rest(think_text)
        guide = self._forced.get(rest)
        if guide is None:
            try:
                pattern = re.escape(rest.decode("utf-8"))
            except UnicodeDecodeError:
                return None
            guide = self._forced[rest] = FSMGuide(compile_regex(pattern), self.vocab, eager=False)
        if close_within is not None:
            # The literal's own budget rows: "remaining" counts its EOS, standing in
            # for the answer's first token here.
            row = guide.budget_row(guide.dfa.start, close_within + 2)
            if row is not None:
                return row
        return guide.row(guide.dfa.start)

    def _rest(self, text: bytes) -> bytes:
        start, end = self._start, self._end
        if len(text) < len(start):
            return start[len(text):] + end
        body = text[len(start):]
        for k in range(min(len(end) - 1, len(body)), 0, -1):  # the end string's part written already
            if body.endswith(end[:k]):
                return end[k:]
        return end


class ThinkingMatcher(Matcher):
    """The state of one sequence under a ``ThinkingGuide``: a think matcher, an answer
    matcher, and the tokens the think matcher took (the thinking text, for the
    forced end; and what ``rollback`` undoes where)."""

    __slots__ = ("_answer", "_phases", "_think", "_thought", "guide")

    def __init__(self, guide: ThinkingGuide, think=None, answer=None, phases=(), thought=()):
        self.guide = guide
        self._think = think if think is not None else guide.think.matcher()
        self._answer = answer if answer is not None else guide.answer.matcher()
        self._phases: list[bool] = list(phases)  # per accepted token: whether the answer took it
        self._thought: list[int] = list(thought)  # the tokens the think matcher took

    @property
    def num_tokens(self) -> int:
        return len(self._phases)

    @property
    def answering(self) -> bool:
        """Whether the thinking block is closed (tokens now go to the answer)."""
        return self._think.is_accepting()

    def fill_next_token_bitmask(self, bitmask, index: int = 0, remaining: int | None = None) -> bool:
        guide = self.guide
        refuse_budget(guide, remaining)
        if self.answering:
            return self._answer.fill_next_token_bitmask(bitmask, index, remaining)
        spent = guide.budget is not None and len(self._thought) >= guide.budget
        close_within = None
        if remaining is not None:
            # After this token: the block closed in close_max tokens at most, then the answer.
            left = remaining - 1 - guide.answer.min_tokens()
            if left < guide.close_max:
                close_within = left
        if not spent and close_within is None:
            return self._think.fill_next_token_bitmask(bitmask, index)
        row = guide.think.row(self._think.state)
        allowed = guide.forced_row(guide.vocab.decode(self._thought), close_within)
        forced = row & allowed if allowed is not None else None
        if forced is not None and forced.any():  # (none where the text stops inside a character)
            row = forced
        if not write_host_row(bitmask, index, row):  # on an accelerator
            bitmask[index, : len(row)].copy_(torch.from_numpy(row))
            bitmask[index, len(row):] = 0
        return True

    def accept_token(self, token_id: int) -> bool:
        answering = self.answering
        if not (self._answer if answering else self._think).accept_token(token_id):
            return False
        self._phases.append(answering)
        if not answering:
            self._thought.append(int(token_id))
        return True

    def is_accepting(self) -> bool:
        return self.answering and self._answer.is_accepting()

    def is_terminated(self) -> bool:
        return self.answering and self._answer.is_terminated()

    def rollback(self, num_tokens: int = 1) -> None:
        if not 0 <= num_tokens <= self.num_tokens:
            raise ValueError(f"cannot roll back {num_tokens} tokens: {self.num_tokens} accepted")
        if not num_tokens:
            return
        in_answer = sum(self._phases[-num_tokens:])
        del self._phases[-num_tokens:]
        self._answer.rollback(in_answer)
        self._think.rollback(num_tokens - in_answer)
        if num_tokens > in_answer:
            del self._thought[-(num_tokens - in_answer):]

    def fork(self) -> ThinkingMatcher:
        return ThinkingMatcher(self.guide, self._think.fork(), self._answer.fork(), self._phases, self._thought)

    def reset(self) -> None:
        self.rollback(self.num_tokens)
