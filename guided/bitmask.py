"""Token bitmasks: int32 ``[batch, ceil(V/32)]``, bit set = token allowed.

Token ``t`` is bit ``t % 32`` of word ``t // 32`` (the layout XGrammar and llguidance
use, so bitmasks can be exchanged with code written for them).

``apply_token_bitmask_`` works on the logits' own device with tensor operations
only: no ``.item()``, no ``.tolist()``, nothing that waits for the GPU.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import torch

_SHIFTS: dict[torch.device, torch.Tensor] = {}


def bitmask_words(vocab_size: int) -> int:
    """The int32 words a bitmask row needs for ``vocab_size`` tokens."""
    return (vocab_size + 31) // 32


def allocate_token_bitmask(batch_size: int, vocab_size: int, device="cpu") -> torch.Tensor:
    """A bitmask with every token allowed (all bits set), ready for ``fill_next_token_bitmask``.

    Allocate it once and refill it every step. For decoding on an accelerator, a
    host bitmask (the default) is filled by the matchers and copied by
    ``apply_token_bitmask_``; pinning it (``.pin_memory()``) makes that copy
    asynchronous.

    Args:
        batch_size: rows, one per sequence.
        vocab_size: tokens to cover: the guide's ``vocab_size`` or the model's logits
            width (bits past the vocabulary are cleared when a row is filled).
        device: where the tensor lives.

    Returns:
        An int32 tensor ``[batch_size, ceil(vocab_size / 32)]`` of ``-1`` (all ones).

    Example::

        >>> bm = allocate_token_bitmask(2, 49152)
        >>> bm.shape, bm.dtype
        (torch.Size([2, 1536]), torch.int32)
    """
    return torch.full((batch_size, bitmask_words(vocab_size)), -1, dtype=torch.int32, device=device)


class _HostView:
    """The numpy views of the last few CPU bitmask tensors written.

    ``Tensor.numpy()`` costs ~1 µs warm, but right after a mask has walked a large
    automaton (a first visit) it often costs 10-160 µs: the call goes through torch's
    dispatcher (a ``detach`` and a new tensor), cold after the walk. A generation
    loop fills the same bitmask every step, so its view is kept; so are a few
    others' (several loops in one process, a server's bitmasks per batch shape),
    the least recently written dropped first. A view is taken again when the
    tensor, its storage or its shape is not the one seen last. The slots (one
    tuple, replaced whole, so threads filling rows at once never see half of one)
    keep those few tensors alive until others are written.

    Args:
        size: how many tensors' views are kept.

    Example::

        >>> views = _HostView()
        >>> views.of(bitmask)   # bitmask.numpy(), kept for the next call
    """

    __slots__ = ("size", "slots")

    def __init__(self, size: int = 8):
        self.slots: tuple = ()  # ((tensor, its data_ptr, its numpy view), ...), latest first
        self.size = size

    def holds(self, bitmask) -> bool:
        """Whether ``bitmask`` is one of the tensors whose view is kept."""
        for slot in self.slots:
            if slot[0] is bitmask:
                return True
        return False

    def of(self, bitmask: torch.Tensor) -> np.ndarray:
        slots = self.slots
        for i, (tensor, ptr, view) in enumerate(slots):
            if tensor is bitmask:
                if bitmask.data_ptr() != ptr or bitmask.shape != view.shape:
                    view = bitmask.numpy()
                elif i == 0:  # the common case: one loop's bitmask, written last
                    return view
                break
        else:
            view = bitmask.numpy()
        others = tuple(slot for slot in slots if slot[0] is not bitmask)
        self.slots = ((bitmask, bitmask.data_ptr(), view),) + others[: self.size - 1]
        return view


_HOST_VIEW = _HostView()


def write_host_row(bitmask, index: int, row: np.ndarray) -> bool:
    """Write ``row`` (int32 words) into row ``index`` of a bitmask in host memory (a
    numpy array or a CPU tensor), clearing the words past it; False (nothing
    written) for a bitmask on an accelerator. Through numpy: indexing a tensor and
    copying into it cost several µs a mask, more than a cached mask's whole lookup.
    """
    target = host_row(bitmask, index)
    if target is None:
        return False
    copy_row(target, row)
    return True


def copy_row(target: np.ndarray, row: np.ndarray) -> None:
    """Copy ``row`` into the start of ``target`` (a bitmask row's numpy view), clearing
    the words past it. (``target[...] = row`` copies in a quarter of the time a
    sliced assignment takes.)"""
    n = len(row)
    if n == len(target):
        target[...] = row
    else:
        target[:n] = row
        target[n:] = 0


def host_row(bitmask, index: int) -> np.ndarray | None:
    """Row ``index`` of a bitmask in host memory as a numpy view (int32 words); None
    for a bitmask on an accelerator."""
    view = host_array(bitmask)
    return None if view is None else view[index]


def host_array(bitmask) -> np.ndarray | None:
    """A bitmask in host memory as a numpy view (a numpy array as it is); None for a
    bitmask on an accelerator."""
    if isinstance(bitmask, np.ndarray):
        return bitmask
    if _HOST_VIEW.holds(bitmask) or bitmask.device.type == "cpu":
        return _HOST_VIEW.of(bitmask)
    return None


def unpack_token_bitmask(bitmask: torch.Tensor, vocab_size: int, *, invert: bool = False) -> torch.Tensor:
    """A bitmask as booleans, one per token.

    Args:
        bitmask: int32 ``[..., words]``, on any device.
        vocab_size: the width of the result; tokens past the bitmask's width are
            disallowed.
        invert: True marks the disallowed tokens instead.

    Returns:
        bool ``[..., vocab_size]`` on the bitmask's device: True = allowed (or, with
        ``invert``, disallowed).

    Example::

        >>> unpack_token_bitmask(torch.tensor([[0b101]], dtype=torch.int32), 4)
        tensor([[ True, False,  True, False]])
    """
    device = bitmask.device
    if device.type == "cpu":
        words = bitmask.contiguous().numpy()
        if invert:
            words = ~words
        bits = np.unpackbits(words.view(np.uint8), axis=-1, bitorder="little").view(bool)
        bits = torch.from_numpy(bits)
    else:
        shifts = _SHIFTS.get(device)
        if shifts is None:
            shifts = _SHIFTS[device] = torch.arange(32, dtype=torch.int32, device=device)
        bits = ((bitmask.unsqueeze(-1) >> shifts) & 1).bool().flatten(-2)
        if invert:
            bits = ~bits
    width = bits.shape[-1]
    if width >= vocab_size:
        return bits[..., :vocab_size]
    pad = torch.full((*bits.shape[:-1], vocab_size - width), invert, dtype=torch.bool, device=device)
    return torch.cat([bits, pad], dim=-1)


def apply_token_bitmask_(logits: torch.Tensor, bitmask: torch.Tensor, indices=None) -> torch.Tensor:
    """Set disallowed logits to ``-inf`` in place; returns ``logits``.

    Runs on the logits' device with tensor operations only (no host synchronisation).
    Logits past the bitmask's width (a model's padded vocabulary) are disallowed.

    Args:
        logits: ``[batch, V]`` or ``[V]``, any float dtype and device.
        bitmask: the matching int32 ``[batch, W]`` or ``[W]`` (moved to the logits'
            device if needed, asynchronously).
        indices: optional, the rows to mask, as in XGrammar: bitmask row ``r`` masks
            logits row ``r``; other rows are left as they are.

    Returns:
        ``logits``, masked.

    Example::

        >>> logits = torch.zeros(1, 40)
        >>> bm = torch.tensor([[0b101, 0]], dtype=torch.int32)   # tokens 0 and 2
        >>> apply_token_bitmask_(logits, bm)[0, :4]
        tensor([0., -inf, 0., -inf])
    """
    if bitmask.device != logits.device:
        bitmask = bitmask.to(logits.device, non_blocking=True)
    vocab_size = logits.shape[-1]
    if logits.device.type == "cpu" and logits.dtype == torch.float32:
        return _apply_cpu_(logits, bitmask, indices)
    if indices is None:
        logits.masked_fill_(unpack_token_bitmask(bitmask, vocab_size, invert=True), float("-inf"))
        return logits
    rows = torch.as_tensor(indices, dtype=torch.long, device=logits.device)
    disallowed = unpack_token_bitmask(bitmask[rows], vocab_size, invert=True)
    logits[rows] = logits[rows].masked_fill(disallowed, float("-inf"))
    return logits


class _AdditiveMasks:
    """CPU masks as float rows of 0 / -inf, cached by the bitmask row's bytes.

    On one CPU thread ``masked_fill_`` over 49k logits costs ~40 us and unpacking the
    bits ~20 us, while ``add_`` of a ready row costs ~4 us. Decoding revisits few
    distinct masks, so a small cache turns each step into a hash and an add.
    """

    def __init__(self, capacity: int = 256):
        self.capacity = capacity
        self._rows: "OrderedDict[tuple, torch.Tensor]" = OrderedDict()

    def get(self, words: np.ndarray, vocab_size: int) -> torch.Tensor:
        key = (words.tobytes(), vocab_size)
        row = self._rows.get(key)
        if row is None:
            disallowed = unpack_token_bitmask(torch.from_numpy(words), vocab_size, invert=True)
            row = torch.zeros(vocab_size, dtype=torch.float32).masked_fill_(disallowed, float("-inf"))
            self._rows[key] = row
            if len(self._rows) > self.capacity:
                self._rows.popitem(last=False)
        else:
            self._rows.move_to_end(key)
        return row


_additive = _AdditiveMasks()


#: Up to this many rows the CPU path adds cached 0/-inf rows; beyond it, the cache
#: would thrash and one vectorised unpack + masked_fill_ is cheaper.
_ADDITIVE_MAX_ROWS = 16


def _apply_cpu_(logits: torch.Tensor, bitmask: torch.Tensor, indices) -> torch.Tensor:
    vocab_size = logits.shape[-1]
    host = bitmask.numpy()
    if logits.dim() == 1:
        return logits.add_(_additive.get(host.reshape(-1), vocab_size))
    rows = range(logits.shape[0]) if indices is None else [int(i) for i in indices]
    if len(rows) > _ADDITIVE_MAX_ROWS:
        if indices is None:
            return logits.masked_fill_(unpack_token_bitmask(bitmask, vocab_size, invert=True), float("-inf"))
        idx = torch.as_tensor(rows, dtype=torch.long)
        disallowed = unpack_token_bitmask(bitmask[idx], vocab_size, invert=True)
        logits[idx] = logits[idx].masked_fill(disallowed, float("-inf"))
        return logits
    for r in rows:
        logits[r].add_(_additive.get(host[r], vocab_size))
    return logits
