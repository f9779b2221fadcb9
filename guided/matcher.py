"""The matcher contract and its automaton implementation.

A ``Guide`` is a spec compiled for one vocabulary (shared, read-only); a ``Matcher``
is the state of one sequence under it (cheap; one per sequence)::

    guide = guided.compile(spec, tokenizer)
    m = guide.matcher()
    m.fill_next_token_bitmask(bitmask, index=0)   # which tokens may come next
    m.accept_token(token_id)                       # False (state unchanged) if not allowed
    m.is_accepting(); m.is_terminated(); m.rollback(n); m.fork()

Every decoding loop here (``guided.generate``, beam search, speculative decoding, the
Hugging Face ``LogitsProcessor``) uses only this contract, so an inference engine can
too. ``FSMGuide`` / ``FSMMatcher`` (regex, JSON Schema), ``GrammarGuide`` /
``GrammarMatcher`` (lark grammars, recursive schemas, in ``grammar_matcher``) and
``UniqueItemsGuide`` (in ``unique_items``) implement it; they are internal:
``guided.compile`` returns the one a spec needs.
"""

from __future__ import annotations

import numpy as np
import torch

from guided.errors import GuideMemoryError
from guided.fsm import footprint
from guided.fsm.dfa import DFA
from guided.fsm.distance import INFINITE, TokenDistances
from guided.fsm.index import TokenIndex
from guided.fsm.trie import split_vocabulary

from .bitmask import bitmask_words, write_host_row

_EOS_ACCEPTED = -2  # history entry after EOS; nothing may follow it


class Guide:
    """A spec compiled against one vocabulary: shared and read-only, one per spec.

    Made by ``guided.compile``; make a ``matcher()`` for each sequence.

    Attributes:
        vocab: the ``guided.Vocabulary`` it was compiled for.
        spec: the spec it was compiled from (set by ``guided.compile``).

    Example::

        >>> guide = guided.compile(guided.Regex(r"(yes|no)"), tokenizer)
        >>> guide.vocab_size, guide.eos_token_ids
        (49152, (2,))
        >>> m = guide.matcher()
    """

    vocab = None
    spec = None  # the spec it was compiled from (set by guided.compile)
    #: Whether its matchers take ``remaining`` (budget-aware masks, ``guided.fsm.distance``).
    supports_budget = False
    #: The most bytes the guide may hold as it grows while decoding (None: no limit);
    #: ``guided.compile`` sets it from ``max_guide_bytes``.
    max_bytes: int | None = None
    #: The last measurement: (bytes, growth units, bytes per unit assumed since,
    #: growth bytes counted).
    _last_measured: tuple[int, int, float, int] | None = None

    def matcher(self) -> "Matcher":
        """A fresh ``Matcher`` at the start of the spec (one per sequence)."""
        raise NotImplementedError

    def nbytes(self) -> int:
        """Approximate bytes the guide holds, leaving out what every guide over its
        vocabulary shares (see ``guided.fsm.footprint``) and the spec it was compiled
        from (the caller's schema or text: its objects are the caller's, a few KB
        that the compile cache's key holds as text anyway; walking them one by one
        would add about a quarter to a small guide's measurement)."""
        walk = self.walk()
        walk.run()
        return walk.total

    def walk(self) -> footprint.Walk:
        """A measurement of the guide (what ``nbytes`` returns) to take in slices."""
        return footprint.Walk([self], footprint.shared_ids(self._shared_roots()),
                              left_out=() if self.spec is None else (self.spec,))

    def _shared_roots(self) -> tuple:
        """Per-vocabulary objects the guide refers to but does not own."""
        return (self.vocab,)

    def check_memory(self) -> int:
        """Measure the guide; ``GuideMemoryError`` if it holds more than ``max_bytes``.

        Returns:
            The guide's ``nbytes()``.
        """
        used = self.measure()
        if self.max_bytes is not None and used > self.max_bytes:
            raise GuideMemoryError(used, self.max_bytes)
        return used

    def _growth_units(self) -> int:
        """What the guide has built so far, in units its memory grows with (rows,
        states); 0 for a guide that does not grow."""
        return 0

    def _growth_bytes(self) -> int:
        """Bytes of growth the guide counts itself as it builds (arrays of known
        size), outside ``_growth_units``; 0 where it counts none."""
        return 0

    def unit_bytes(self) -> int:
        """Bytes a unit of growth (a row or state built: ``_growth_units``) is taken
        to hold until the guide's measured growth says otherwise: a mask row (4 bytes
        per 32 tokens: 6 KiB for 49k tokens, 16 KiB for 128k) plus ``STATE_BYTES``."""
        return bitmask_words(self.vocab_size) * 4 + STATE_BYTES

    def size_estimate(self) -> int:
        """The bytes last measured plus the growth since: units built at the rate
        ``_measured`` keeps, and the bytes the guide counts itself. No walk, so the
        compile cache reads it for every guide it holds; a guide never measured is
        measured now.

        Returns:
            The estimate in bytes (the measurement itself where nothing grew since).
        """
        last = self._last_measured
        if last is None:
            return self.measure()
        used, units, rate, counted = last
        return int(used + max(0, self._growth_units() - units) * rate + max(0, self._growth_bytes() - counted))

    def grew_since_measured(self) -> bool:
        """Whether the guide built rows or states since it was last measured (its
        ``size_estimate`` is then an estimate, not a measurement)."""
        last = self._last_measured
        return last is None or self._growth_units() > last[1] or self._growth_bytes() > last[3]

    def measure(self) -> int:
        """Measure the guide now (a walk of its objects) and keep the figure for
        ``size_estimate``; no limit is checked.

        Returns:
            The guide's ``nbytes()``.
        """
        used = self.nbytes()
        self._measured(used)
        return used

    def _measured(self, used: int) -> None:
        """Keep a measurement (``used`` bytes now) for ``_must_measure`` and
        ``size_estimate``, with the rate units are assumed to go on growing at: what
        the last measurement and this one say a unit held, where at least
        ``RATE_SAMPLE_UNITS`` units were built between them (and at least
        ``MIN_UNIT_BYTES``), else the rate assumed before (``unit_bytes`` at first)."""
        units, counted, last = self._growth_units(), self._growth_bytes(), self._last_measured
        rate = self.unit_bytes() if last is None else last[2]
        if last is not None and units - last[1] >= RATE_SAMPLE_UNITS:
            rate = max(MIN_UNIT_BYTES, (used - last[0] - (counted - last[3])) / (units - last[1]))
        self._last_measured = (used, units, rate, counted)

    def _must_measure(self) -> bool:
        """Whether the guide must be measured now that it grew. A measurement walks
        the guide's objects (ms for a large one), so it is left out while its
        ``size_estimate`` stays under a quarter of ``max_bytes``: the margin for a
        guide that grows faster than it did."""
        if self.max_bytes is None:
            return False
        return self._last_measured is None or self.size_estimate() >= self.max_bytes / 4

    @property
    def vocab_size(self) -> int:
        """The vocabulary's size: the tokens a mask has a bit for (a model may have
        more logits, padding, which masks never allow)."""
        return self.vocab.size

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        """The tokens that end a sequence; allowed where the text so far is complete."""
        return self.vocab.eos_token_ids


#: What a unit of growth is taken to hold besides a mask row (``Guide.unit_bytes``):
#: a DFA state's transitions and bookkeeping, or a parse state's Earley set and memos
#: (a grammar's lexer views and tables are counted apart, ``_growth_bytes``). Whole
#: units measure 0.5-3.5 KB (p10-p90) on MaskBench's lazy automata, 2-4 KB on the
#: lark grammars' parse states.
STATE_BYTES = 4 << 10
#: The growth (units) a measured rate needs, and the least rate taken from one.
RATE_SAMPLE_UNITS = 64
MIN_UNIT_BYTES = 1 << 10


def refuse_budget(guide: Guide, remaining) -> None:
    """``ValueError`` where ``remaining`` is given to a guide without ``supports_budget``."""
    if remaining is not None and not guide.supports_budget:
        raise ValueError(f"budget-aware masks (remaining=...) are available for regex, JSON Schema and grammar "
                         f"guides and thinking blocks before them, not for {type(guide).__name__}")


class Matcher:
    """The state of one sequence under a ``Guide``; made by ``guide.matcher()``.

    A decoding step asks for the mask of the next token, picks a token the mask
    allows, and accepts it. EOS is allowed exactly where the text so far is a
    complete match; where nothing else may follow (a dead end, or after EOS) the mask
    holds EOS alone, so a row of logits is never all ``-inf``. Every state change can
    be undone (``rollback``) or branched (``fork``), as speculative decoding and beam
    search need.

    Attributes:
        guide: the ``Guide`` it runs under.

    Example::

        >>> m = guided.compile(guided.Regex(r"(yes|no)"), tokenizer).matcher()
        >>> bitmask = guided.allocate_token_bitmask(1, m.guide.vocab_size)
        >>> m.fill_next_token_bitmask(bitmask, 0)
        True
        >>> m.accept_token(tokenizer.encode("yes", add_special_tokens=False)[0])
        True
        >>> m.is_accepting(), m.is_terminated()
        (True, True)
        >>> m.rollback(1)
    """

    guide: Guide

    def fill_next_token_bitmask(self, bitmask, index: int = 0, remaining: int | None = None) -> bool:
        """Write the tokens allowed next into row ``index`` of ``bitmask``.

        Bit ``t % 32`` of word ``t // 32`` is set for each allowed token ``t``; words
        past the vocabulary (a model's padded rows) are cleared, so padding ids are
        never allowed. The matcher's state does not change.

        Args:
            bitmask: int32 ``[batch, words]`` from ``allocate_token_bitmask`` (a
                tensor on any device, or a numpy array), at least
                ``ceil(vocab_size / 32)`` words wide.
            index: the row to write.
            remaining: tokens that may still be generated, this one and EOS
                included: only tokens after which the spec can be completed, and
                EOS written, within the rest are allowed (where the guide's
                ``supports_budget``; see ``docs/budget.md``). None: no limit.

        Returns:
            True (the row was written).

        Raises:
            ValueError: ``remaining`` given to a guide without ``supports_budget``.
        """
        raise NotImplementedError

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token, if the spec allows it here.

        EOS is accepted where the text so far is a complete match; after it, nothing
        more is.

        Args:
            token_id: the token chosen.

        Returns:
            True if accepted; False, with the state unchanged, if not allowed.
        """
        raise NotImplementedError

    def accept_tokens(self, token_ids) -> bool:
        """Accept tokens in order, all or none.

        Args:
            token_ids: an iterable of token ids.

        Returns:
            True if every token was accepted; False after the first refusal, with the
            tokens accepted before it undone (the state as before the call).
        """
        for n, t in enumerate(token_ids):
            if not self.accept_token(int(t)):
                self.rollback(n)
                return False
        return True

    def is_accepting(self) -> bool:
        """Whether the text so far is a complete match (EOS may come next), or EOS
        was accepted."""
        raise NotImplementedError

    def is_terminated(self) -> bool:
        """Whether the sequence is over: EOS was accepted, or the text is a complete
        match that nothing can extend. Decoding stops here, EOS implied."""
        raise NotImplementedError

    def rollback(self, num_tokens: int = 1) -> None:
        """Undo the last ``num_tokens`` accepted tokens (an accepted EOS counts as one).

        Args:
            num_tokens: how many; 0 does nothing.

        Raises:
            ValueError: more tokens than were accepted (or a negative count).
        """
        raise NotImplementedError

    def fork(self) -> "Matcher":
        """An independent copy in the same state, under the same guide: advancing or
        rolling back one leaves the other as it is (beam search, draft proposals)."""
        raise NotImplementedError

    def allowed_token_ids(self) -> list[int]:
        """The tokens allowed next, as a sorted list (convenience; masks are faster).

        Example::

            >>> ids = matcher.allowed_token_ids()
            >>> [tokenizer.decode([t]) for t in ids[:3]]
        """
        bm = torch.zeros(1, bitmask_words(self.guide.vocab_size), dtype=torch.int32)
        self.fill_next_token_bitmask(bm)
        bits = np.unpackbits(bm.numpy().view(np.uint8), bitorder="little")
        return np.nonzero(bits[: self.guide.vocab_size])[0].tolist()


class StackMatcher(Matcher):
    """A matcher whose state is a stack of per-token states (the first is the start):
    ``rollback`` pops, ``fork`` copies the stack (the states themselves are shared and
    never modified). Internal: the base of ``FSMMatcher`` and ``GrammarMatcher``."""

    __slots__ = ()

    @property
    def num_tokens(self) -> int:
        """How many tokens were accepted (EOS included)."""
        return len(self._states) - 1

    def rollback(self, num_tokens: int = 1) -> None:
        """Pop ``num_tokens`` states; a ``ValueError`` past the start (see ``Matcher``)."""
        if not 0 <= num_tokens <= self.num_tokens:
            raise ValueError(f"cannot roll back {num_tokens} tokens: {self.num_tokens} accepted")
        if num_tokens:
            del self._states[-num_tokens:]

    def fork(self):
        """A copy of the stack under the same guide (see ``Matcher``)."""
        return type(self)(self.guide, self._states)

    def reset(self) -> None:
        """Back to the start: every accepted token undone."""
        del self._states[1:]


class FSMGuide(Guide):
    """A guide backed by a byte-level DFA and its token index (regex, JSON Schema).

    Internal: ``guided.compile`` returns one for a ``Regex`` or a non-recursive
    ``JsonSchema``. Each DFA state's mask is a packed row of the ``TokenIndex``,
    computed on first visit (or all at once with ``eager=True``) and shared by every
    state with the same allowed tokens.

    Args:
        dfa: the byte-level DFA (eager or lazy).
        vocab: the ``guided.Vocabulary``.
        eager: as for ``guided.compile``.

    Example::

        >>> from guided.fsm.regex import compile_regex
        >>> guide = FSMGuide(compile_regex(r"[0-9]+"), guided.Vocabulary.from_tokenizer(tokenizer))
        >>> m = guide.matcher()
    """

    supports_budget = True

    def __init__(self, dfa: DFA, vocab, eager: bool | None = None):
        self.dfa = dfa
        self.vocab = vocab
        self.index = TokenIndex(dfa, vocab, eager=eager)
        self._distances: TokenDistances | None = None
        #: Per state, the largest distance its tokens lead to (``TokenDistances.tops``).
        self.budget_tops: dict[int, int] = {}
        self._eos_row = self.index.eos_row
        self._empty_rows: dict[int, bool] = {}
        self._device_rows: dict[torch.device, torch.Tensor] = {}
        # Growth (rows + DFA states) at which the guide is measured next (check_memory).
        self._next_check = 2 * self._growth_units() + 256

    def _shared_roots(self) -> tuple:
        return (self.vocab, split_vocabulary(self.vocab))

    def _growth_units(self) -> int:
        return self.index.num_rows + self.dfa.num_states

    def matcher(self) -> "FSMMatcher":
        """A fresh ``FSMMatcher`` at the DFA's start state."""
        return FSMMatcher(self)

    def row_number(self, state: int) -> int:
        """Which mask a state uses: 0 is "EOS only", ``n > 0`` is index row ``n - 1``.

        EOS only after EOS, and at dead ends: where no token continues and the state
        does not accept, ending is the only way out, so EOS is forced rather than
        leaving every logit at -inf.
        """
        if state == _EOS_ACCEPTED:
            return 0
        index = self.index
        rid = index.row_id(state)
        empty = self._empty_rows.get(rid)
        if empty is None:
            empty = self._empty_rows[rid] = not index.rows()[rid].any()
        grown = self._growth_units()
        if grown >= self._next_check:  # a lazy guide grew: measured as it doubles
            self._next_check = 2 * grown
            if self._must_measure():
                self.check_memory()
        return 0 if empty else rid + 1

    def built_row(self, state: int) -> np.ndarray | None:
        """A state's mask if it is built already (what ``row`` gives), else None.

        Nothing is built or measured: the lock-free lookup a batch fill makes for
        each row before it asks the matcher for the rows still to build."""
        if state == _EOS_ACCEPTED:
            return self._eos_row
        rid = self.index.known_row_id(state)
        empty = self._empty_rows.get(rid) if rid >= 0 else None
        if empty is None:
            return None
        return self._eos_row if empty else self.index.rows()[rid]

    def distances(self) -> TokenDistances:
        """Tokens from each state to the end of a match (made on first use)."""
        if self._distances is None:
            with self.index._lock:
                if self._distances is None:
                    self._distances = TokenDistances(self.index, self.budget_tops)
        return self._distances

    @property
    def budget_exact(self) -> bool:
        """Whether ``min_tokens`` is the true minimum (else a sound upper bound)."""
        return self.distances().exact

    def min_tokens(self, state: int | None = None) -> int:
        """The fewest tokens that finish a match from ``state`` (default: the
        start), EOS included: the smallest budget that fits (exact or a sound upper
        bound, see ``guided.fsm.distance``)."""
        if state == _EOS_ACCEPTED:
            return 0
        d = self.distances().distance(self.dfa.start if state is None else state)
        return d + 1 if d < INFINITE else INFINITE

    def budget_row(self, state: int, remaining: int, build: bool = True):
        """The mask at ``state`` with ``remaining`` tokens left (see
        ``TokenDistances.within``): a row, None where the plain row serves, or
        False when not known without building (``build=False``)."""
        if state == _EOS_ACCEPTED:
            return None
        if self._distances is None and not build:
            return False
        return self.distances().within(state, remaining, build)

    def row(self, state: int) -> np.ndarray:
        """A state's mask, packed int32 words (see ``row_number``)."""
        n = self.row_number(state)
        return self._eos_row if n == 0 else self.index.rows()[n - 1]

    def device_rows(self, device: torch.device) -> torch.Tensor:
        """Every mask computed so far, numbered as ``row_number``, on ``device``."""
        rows = self.index.rows()
        table = self._device_rows.get(device)
        if table is None or table.shape[0] < len(rows) + 1:
            table = torch.from_numpy(np.stack([self._eos_row] + rows)).to(device)
            self._device_rows[device] = table
        return table


class FSMMatcher(StackMatcher):
    """Sequence state under an ``FSMGuide``: a stack of DFA states (for rollback).

    Internal: made by ``FSMGuide.matcher()``; see ``Matcher`` for the contract. A
    mask is a row lookup; on an accelerator it is copied from a device-resident
    table of the rows, with no host synchronisation.
    """

    __slots__ = ("guide", "_states")

    def __init__(self, guide: FSMGuide, states=None):
        self.guide = guide
        self._states = list(states) if states is not None else [guide.dfa.start]

    @property
    def state(self) -> int:
        """The current DFA state (``-2`` once EOS has been accepted)."""
        return self._states[-1]

    def fill_next_token_bitmask(self, bitmask, index: int = 0, remaining: int | None = None) -> bool:
        """Write the allowed tokens into row ``index`` of ``bitmask``; returns True
        (see ``Matcher``)."""
        if remaining is not None and remaining - 2 < self.guide.budget_tops.get(self.state, INFINITE):
            row = self.guide.budget_row(self.state, remaining)
            if row is not None:
                if isinstance(bitmask, np.ndarray) or bitmask.device.type == "cpu":
                    return write_host_row(bitmask, index, row)
                words = len(row)
                bitmask[index, :words].copy_(torch.from_numpy(row), non_blocking=False)
                bitmask[index, words:] = 0
                return True
        if isinstance(bitmask, np.ndarray) or bitmask.device.type == "cpu":
            return write_host_row(bitmask, index, self.guide.row(self.state))
        # On an accelerator: copy one row of the device-resident table, no host sync.
        n = self.guide.row_number(self.state)
        table = self.guide.device_rows(bitmask.device)
        words = table.shape[1]
        bitmask[index, :words].copy_(table[n], non_blocking=True)
        bitmask[index, words:] = 0
        return True

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (state unchanged) if not allowed (see ``Matcher``)."""
        state = self.state
        if state == _EOS_ACCEPTED:
            return False
        if token_id in self.guide.vocab.eos_token_ids:
            if not self.guide.dfa.is_accepting(state):
                return False
            self._states.append(_EOS_ACCEPTED)
            return True
        nxt = self.guide.index.next_state(state, int(token_id))
        if nxt < 0:
            return False
        self._states.append(nxt)
        return True

    def is_accepting(self) -> bool:
        """The DFA state accepts, or EOS was accepted."""
        s = self.state
        return s == _EOS_ACCEPTED or self.guide.dfa.is_accepting(s)

    def is_terminated(self) -> bool:
        """EOS was accepted, or the match is complete and nothing more can follow."""
        s = self.state
        if s == _EOS_ACCEPTED:
            return True
        return self.guide.dfa.is_accepting(s) and not self.guide.dfa.has_successors(s)

