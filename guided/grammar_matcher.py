"""The matcher contract for grammars: an Earley parser plus a lexer (longest match for
lark grammars, every lexeme end kept for recursive JSON Schemas).

A matcher's state is ``(Earley set, lexer state, lexeme empty?)``, or several such
readings (``grammars.grammar_index.Readings``); Earley sets are immutable and shared,
so ``fork`` copies a list of references and ``rollback`` pops it. Masks come from
``grammars.grammar_index`` and are cached per state.
"""

from __future__ import annotations

import threading

import numpy as np
import torch

from guided.fsm.trie import vocabulary_bytes
from guided.grammars.completion import Completions, kept_top
from guided.grammars.earley import EarleyParser
from guided.grammars.grammar_index import GrammarIndex, vocabulary_pieces
from guided.grammars.lark_frontend import CompiledGrammar
from guided.grammars.lexer import Lexer

from .bitmask import write_host_row
from .matcher import Guide, StackMatcher

#: Objects a growth measurement visits per mask built (``GrammarGuide._check_growth``):
#: ~0.3-1 ms, where a whole walk of a guide of thousands of parse states takes tens of ms.
MEASURE_SLICE = 2048

_EOS_ACCEPTED = None  # history entry after EOS; nothing may follow it
_START = object()  # min_tokens' default: the grammar's start


class GrammarGuide(Guide):
    """A compiled lark grammar (or recursive JSON Schema) over one vocabulary.

    Internal: ``guided.compile`` returns one for a ``Grammar`` and for a
    ``JsonSchema`` whose ``$ref`` recurses. Masks come from a ``GrammarIndex`` and are
    cached per parser state. Make a ``matcher()`` per sequence.

    Threads: any number of threads may share one guide, each with its own matchers.
    The index builds its lexer, parser and mask caches lazily, so every call into it
    holds the guide's lock; a mask already computed for a state is read without it.

    Args:
        grammar: the ``CompiledGrammar`` (terminal DFAs, CFG, ignored terminals).
        vocab: the ``guided.Vocabulary``.

    Example::

        >>> guide = guided.compile(guided.Grammar.from_name("arithmetic"), tokenizer)
        >>> m = guide.matcher()
    """

    #: Budget-aware masks from checked completions (``guided.grammars.completion``).
    supports_budget = True
    #: ``min_tokens`` is a sound upper bound, the true minimum where the cheapest
    #: derivation is also the one in fewest tokens.
    budget_exact = False

    def __init__(self, grammar: CompiledGrammar, vocab):
        self.grammar = grammar
        self.vocab = vocab
        self.index = GrammarIndex(
            EarleyParser(grammar.cfg), Lexer(grammar.terminal_dfas), grammar.ignore, vocab, grammar.ranks,
            every_end=grammar.every_end,
        )
        self._eos_row = self.index.eos_row
        self.lock = threading.RLock()
        with self.lock:
            self._initial = self.index.initial()
        self._next_check = 256  # cached parse states at which the guide is measured next
        self._measuring = None  # a growth measurement under way (``footprint.Walk``)
        self._completions: Completions | None = None

    def _shared_roots(self) -> tuple:
        return (self.vocab, vocabulary_pieces(self.vocab), vocabulary_bytes(self.vocab))

    def _growth_units(self) -> int:
        return self.index.cached_states

    def _growth_bytes(self) -> int:
        # The lexer states' views (one inside an open string holds MBs) and the terminal
        # tables that grow with the text (a recursive schema's rules), counted as built.
        return self.index.view_bytes + self.index.lexer.built_bytes()

    def matcher(self) -> "GrammarMatcher":
        """A fresh ``GrammarMatcher`` at the grammar's start."""
        return GrammarMatcher(self)

    def row(self, state) -> np.ndarray:
        """The packed mask of a matcher state; EOS alone after EOS or at a dead end."""
        if state is _EOS_ACCEPTED:
            return self._eos_row
        row = self.index.cached_mask(state)
        if row is None:
            with self.lock:
                row = self.index.mask(state)
                self._check_growth()
        return row if row.any() else self._eos_row

    def _check_growth(self) -> None:
        """Measure the guide as its cached parse states double (``_must_measure``), a
        slice of the walk (``MEASURE_SLICE`` objects) per mask built, so that no mask
        waits for a whole walk. Over ``max_bytes``, the caches go (only speed is at
        stake); still over, ``GuideMemoryError``."""
        if self._measuring is None:
            cached = self.index.cached_states
            if cached < self._next_check // 2:  # the caches were dropped since
                self._next_check = 256
            if cached < self._next_check:
                return
            self._next_check = 2 * cached
            if not self._must_measure():
                return
            self._measuring = self.walk()
        if not self._measuring.run(MEASURE_SLICE):
            return
        used, self._measuring = self._measuring.total, None
        self._measured(used)
        if used > self.max_bytes:
            self.index.drop_caches()
            if self._completions is not None:
                self._completions.drop_caches()
            self._next_check = 256
            self.check_memory()

    def completions(self) -> Completions:
        """The bounds on tokens to the end of a sentence (made on first use)."""
        with self.lock:
            if self._completions is None:
                self._completions = Completions(self.index)
            return self._completions

    def min_tokens(self, state=_START) -> int:
        """The tokens that finish a sentence from ``state`` (default: the start), EOS
        included: a checked upper bound on the fewest (INFINITE where none is found)."""
        if state is _EOS_ACCEPTED:
            return 0
        state = self._initial if state is _START else state
        row = self.row(state)
        with self.lock:
            completions = self.completions()
            completions.top(state, row)  # a token ahead: where one token finishes sooner than the witness
            return completions.bound(state)

    def budget_row(self, state, remaining: int) -> np.ndarray | None:
        """The mask at ``state`` with ``remaining`` tokens left (see
        ``Completions.budget_row``), or None where the plain row serves."""
        if state is _EOS_ACCEPTED:
            return None
        row = self.row(state)
        with self.lock:
            return self.completions().budget_row(state, row, remaining)

    def consume_token(self, state, token_id: int):
        """The state after ``token_id`` (not EOS), or None where it is not allowed."""
        with self.lock:
            return self.index.consume_token(state, token_id)

    def can_end(self, state) -> bool:
        """Whether the text read into ``state`` is a sentence of the grammar."""
        with self.lock:
            return self.index.can_end(state)


class GrammarMatcher(StackMatcher):
    """Sequence state under a ``GrammarGuide``: a stack of parse states (for rollback).

    Internal: made by ``GrammarGuide.matcher()``; see ``Matcher`` for the contract.
    """

    __slots__ = ("guide", "_states")

    def __init__(self, guide: GrammarGuide, states=None):
        self.guide = guide
        self._states = list(states) if states is not None else [guide._initial]

    def fill_next_token_bitmask(self, bitmask, index: int = 0, remaining: int | None = None) -> bool:
        """Write the allowed tokens into row ``index`` of ``bitmask`` (computed on the
        CPU, copied to the bitmask's device); returns True (see ``Matcher``)."""
        state, row = self._states[-1], None
        if remaining is not None and remaining - 1 < kept_top(state):
            row = self.guide.budget_row(state, remaining)
        if row is None:
            row = self.guide.row(state)
        if write_host_row(bitmask, index, row):
            return True
        target = bitmask[index]
        target[: len(row)].copy_(torch.from_numpy(row), non_blocking=True)
        target[len(row) :] = 0
        return True

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (state unchanged) if not allowed (see ``Matcher``)."""
        state = self._states[-1]
        if state is _EOS_ACCEPTED:
            return False
        guide = self.guide
        if token_id in guide.vocab.eos_token_ids:
            if not guide.can_end(state):
                return False
            self._states.append(_EOS_ACCEPTED)
            return True
        nxt = guide.consume_token(state, int(token_id))
        if nxt is None:
            return False
        self._states.append(nxt)
        return True

    def is_accepting(self) -> bool:
        """The text so far is a sentence of the grammar, or EOS was accepted."""
        state = self._states[-1]
        return state is _EOS_ACCEPTED or self.guide.can_end(state)

    def is_terminated(self) -> bool:
        """EOS was accepted, or the text is complete and nothing more can follow."""
        state = self._states[-1]
        if state is _EOS_ACCEPTED:
            return True
        if not self.guide.can_end(state):
            return False
        row = self.guide.row(state)
        return not (row & ~self.guide._eos_row).any()

