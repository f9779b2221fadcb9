"""Masks for a whole batch: ``fill_next_token_bitmasks``.

A serving engine fills one bitmask row per constrained sequence each step. This is
the per-row loop, written once: rows on the host are written in place; for a bitmask
on an accelerator the rows are filled on the host and copied over in one transfer
(not one per row). With ``threads > 1`` the rows are split across a small pool: the
masks' compiled walks release the GIL, so lazily built rows (a new state, the first
pass after a compile) fill side by side; cached rows are a lookup, where one thread
is as fast.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import torch

from .bitmask import host_row

_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


def fill_next_token_bitmasks(matchers, bitmask, indices=None, *, threads: int = 1):
    """Write each matcher's allowed tokens into its row of ``bitmask``.

    Args:
        matchers: one ``Matcher`` per sequence, or None for a sequence without a
            constraint (its row is left as it is).
        bitmask: int32 ``[batch, words]`` (``allocate_token_bitmask``), a CPU or
            accelerator tensor, or a numpy array.
        indices: the bitmask row of each matcher (default: ``0 .. len(matchers) - 1``).
        threads: fill rows on this many threads (1: in the caller's thread).

    Returns:
        ``bitmask``.

    Example::

        >>> bitmask = guided.allocate_token_bitmask(len(batch), vocab_size)
        >>> guided.fill_next_token_bitmasks([seq.matcher for seq in batch], bitmask)
        >>> guided.apply_token_bitmask_(logits, bitmask)
    """
    rows = list(range(len(matchers))) if indices is None else [int(i) for i in indices]
    if len(rows) != len(matchers):
        raise ValueError(f"{len(matchers)} matchers but {len(rows)} indices")
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    work = [(m, r) for m, r in zip(matchers, rows) if m is not None]
    if not work:
        return bitmask
    on_host = host_row(bitmask, work[0][1]) is not None
    target = bitmask if on_host else torch.empty((len(work), bitmask.shape[-1]), dtype=torch.int32,
                                                 pin_memory=bitmask.device.type == "cuda")
    jobs = work if on_host else [(m, k) for k, (m, _) in enumerate(work)]
    if threads == 1 or len(jobs) == 1:
        _fill(jobs, target)
    else:
        chunks = [jobs[k::threads] for k in range(min(threads, len(jobs)))]
        for f in [_executor(threads).submit(_fill, chunk, target) for chunk in chunks]:
            f.result()
    if not on_host:
        index = torch.tensor([r for _, r in work], device=bitmask.device)
        bitmask.index_copy_(0, index, target.to(bitmask.device, non_blocking=True))
    return bitmask


def _fill(jobs, target) -> None:
    for m, r in jobs:
        m.fill_next_token_bitmask(target, r)


def _executor(threads: int) -> ThreadPoolExecutor:
    """The shared pool, grown to ``threads`` workers when asked for more."""
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size < threads:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool, _pool_size = ThreadPoolExecutor(threads, thread_name_prefix="guided-masks"), threads
        return _pool
