"""The matcher contract and its automaton implementation.

A ``Guide`` is a spec compiled for one vocabulary (shared, read-only); a ``Matcher``
is the state of one sequence under it (cheap; one per sequence)::

    guide = guided.compile(spec, tokenizer)
    m = guide.matcher()
    m.fill_next_token_bitmask(bitmask, index=0)   # which tokens may come next
    m.accept_token(token_id)                       # False (state unchanged) if not allowed
    m.is_accepting(); m.is_terminated(); m.rollback(n); m.fork()
"""

from __future__ import annotations

import numpy as np
import torch

from guided.fsm.dfa import DFA
from guided.fsm.index import TokenIndex

from .bitmask import bitmask_words, write_host_row

_EOS_ACCEPTED = -2  # history entry after EOS; nothing may follow it


class Guide:
    """A spec compiled against one vocabulary. Make a ``matcher()`` per sequence."""

    vocab = None
    spec = None  # the spec it was compiled from (set by guided.compile)

    def matcher(self) -> "Matcher":
        raise NotImplementedError

    @property
    def vocab_size(self) -> int:
        return self.vocab.size

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        return self.vocab.eos_token_ids


class Matcher:
    """The state of one sequence under a ``Guide``: see the module docstring."""

    guide: Guide

    def fill_next_token_bitmask(self, bitmask, index: int = 0) -> bool:
        raise NotImplementedError

    def accept_token(self, token_id: int) -> bool:
        raise NotImplementedError

    def accept_tokens(self, token_ids) -> bool:
        """Accept tokens in order; on the first refusal undo them all and return False."""
        for n, t in enumerate(token_ids):
            if not self.accept_token(int(t)):
                self.rollback(n)
                return False
        return True

    def is_accepting(self) -> bool:
        raise NotImplementedError

    def is_terminated(self) -> bool:
        raise NotImplementedError

    def rollback(self, num_tokens: int = 1) -> None:
        raise NotImplementedError

    def fork(self) -> "Matcher":
        raise NotImplementedError

    def allowed_token_ids(self) -> list[int]:
        """The tokens allowed next, as a list (convenience; masks are faster)."""
        bm = torch.zeros(1, bitmask_words(self.guide.vocab_size), dtype=torch.int32)
        self.fill_next_token_bitmask(bm)
        bits = np.unpackbits(bm.numpy().view(np.uint8), bitorder="little")
        return np.nonzero(bits[: self.guide.vocab_size])[0].tolist()


class StackMatcher(Matcher):
    """A matcher whose state is a stack of per-token states (the first is the start):
    ``rollback`` pops, ``fork`` copies the stack (the states themselves are shared and
    never modified)."""

    __slots__ = ()

    @property
    def num_tokens(self) -> int:
        return len(self._states) - 1

    def rollback(self, num_tokens: int = 1) -> None:
        if not 0 <= num_tokens <= self.num_tokens:
            raise ValueError(f"cannot roll back {num_tokens} tokens: {self.num_tokens} accepted")
        if num_tokens:
            del self._states[-num_tokens:]

    def fork(self):
        return type(self)(self.guide, self._states)

    def reset(self) -> None:
        del self._states[1:]


class FSMGuide(Guide):
    """A guide backed by a byte-level DFA and its token index (regex, JSON Schema).

    Example::

        >>> guide = FSMGuide(compile_regex(r"[0-9]+"), vocab)
        >>> m = guide.matcher()
    """

    def __init__(self, dfa: DFA, vocab, eager: bool | None = None):
        self.dfa = dfa
        self.vocab = vocab
        self.index = TokenIndex(dfa, vocab, eager=eager)
        self._eos_row = self.index.eos_row
        self._empty_rows: dict[int, bool] = {}
        self._device_rows: dict[torch.device, torch.Tensor] = {}

    def matcher(self) -> "FSMMatcher":
        return FSMMatcher(self)

    def row_number(self, state: int) -> int:
        """Which mask a state uses: 0 is "EOS only", ``n > 0`` is index row ``n - 1``.

        EOS only after EOS, and at dead ends: where no token continues and the state
        does not accept, ending is the only way out, so EOS is forced rather than
        leaving every logit at -inf.
        """
        if state == _EOS_ACCEPTED:
            return 0
        rid = self.index.row_id(state)
        empty = self._empty_rows.get(rid)
        if empty is None:
            empty = self._empty_rows[rid] = not self.index.rows()[rid].any()
        return 0 if empty else rid + 1

    def row(self, state: int) -> np.ndarray:
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
    """Sequence state under an ``FSMGuide``: a stack of DFA states (for rollback)."""

    __slots__ = ("guide", "_states")

    def __init__(self, guide: FSMGuide, states=None):
        self.guide = guide
        self._states = list(states) if states is not None else [guide.dfa.start]

    @property
    def state(self) -> int:
        """The current DFA state (``-2`` once EOS has been accepted)."""
        return self._states[-1]

    def fill_next_token_bitmask(self, bitmask, index: int = 0) -> bool:
        """Write the allowed tokens into row ``index`` of ``bitmask``; returns True.

        Words past the vocabulary (a model's padded vocabulary) are cleared, so
        padding ids are never allowed.
        """
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
        s = self.state
        return s == _EOS_ACCEPTED or self.guide.dfa.is_accepting(s)

    def is_terminated(self) -> bool:
        """EOS was accepted, or the match is complete and nothing more can follow."""
        s = self.state
        if s == _EOS_ACCEPTED:
            return True
        return self.guide.dfa.is_accepting(s) and not self.guide.dfa.has_successors(s)

