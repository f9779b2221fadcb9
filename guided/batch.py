"""Masks for a whole batch: ``fill_next_token_bitmasks``.

A serving engine fills one bitmask row per constrained sequence each step. This is
the per-row loop, written once: rows on the host are written in place, through one
numpy view of the bitmask; for a bitmask on an accelerator the rows are filled on
the host and copied over in one transfer (not one per row).

Most rows of a step are a lookup: an automaton guide's mask for a state it has
visited before. Those rows are copied in the caller's thread, a row lookup and one
copy each (~1 µs), with no per-row dispatch through the matcher; with one thread,
so are an automaton's rows for states seen for the first time, built there. What is
left (grammar or ``uniqueItems`` matchers, budget-aware rows, and with threads the
new rows) goes through each matcher's own ``fill_next_token_bitmask``.
With ``threads > 1`` those rows are split across a small pool (each guide's rows in
one share, the caller taking a share itself), but only where at least two of them
are left: building a row runs compiled walks that release the GIL, so new rows of
different guides can build side by side, while lookups are bound to the GIL and a
pool would only add thread hand-offs to them. The Python between the walks still
needs the GIL, so threads pay only with idle cores; on a 2-core machine with other
work running, one thread builds rows as fast or faster.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from guided.fsm.distance import INFINITE

from .bitmask import copy_row, host_array
from .matcher import FSMMatcher

_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


def fill_next_token_bitmasks(matchers, bitmask, indices=None, *, threads: int = 1, remaining=None):
    """Write each matcher's allowed tokens into its row of ``bitmask``.

    Each row gets what ``matcher.fill_next_token_bitmask(bitmask, row)`` writes;
    the batch is filled faster than by that loop (cached rows are copied without a
    per-row dispatch; rows built for the first time can use several threads).

    Args:
        matchers: one ``Matcher`` per sequence, or None for a sequence without a
            constraint (its row is left as it is).
        bitmask: int32 ``[batch, words]`` (``allocate_token_bitmask``), a CPU or
            accelerator tensor, or a numpy array.
        indices: the bitmask row of each matcher (default: ``0 .. len(matchers) - 1``).
        threads: build new rows on up to this many threads (1: all in the caller's
            thread; rows already built are always copied in the caller's thread).
        remaining: budget-aware masks (``Matcher.fill_next_token_bitmask``): the
            tokens each sequence may still generate, one number for all or one per
            matcher (None entries: no limit). None: no limit.

    Returns:
        ``bitmask``.

    Raises:
        ValueError: ``indices`` and ``matchers`` differ in length, or ``threads < 1``.

    Example::

        >>> bitmask = guided.allocate_token_bitmask(len(batch), vocab_size)
        >>> guided.fill_next_token_bitmasks([seq.matcher for seq in batch], bitmask, threads=2)
        >>> guided.apply_token_bitmask_(logits, bitmask)
    """
    rows = range(len(matchers)) if indices is None else [int(i) for i in indices]
    if len(rows) != len(matchers):
        raise ValueError(f"{len(matchers)} matchers but {len(rows)} indices")
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    if remaining is None or isinstance(remaining, int):
        left = [remaining] * len(matchers)
    else:
        left = list(remaining)
        if len(left) != len(matchers):
            raise ValueError(f"{len(matchers)} matchers but {len(left)} remaining counts")
    view = host_array(bitmask)
    if view is not None:
        work = [(m, r, n) for m, r, n in zip(matchers, rows, left) if m is not None]
        staging = None
    else:  # on an accelerator: fill a pinned host copy of the rows, then one transfer
        work = [(m, k, n) for k, (m, n) in enumerate((m, n) for m, n in zip(matchers, left) if m is not None)]
        targets = [r for m, r in zip(matchers, rows) if m is not None]
        staging = torch.empty((len(work), bitmask.shape[-1]), dtype=torch.int32,
                              pin_memory=bitmask.device.type == "cuda")
        view = staging.numpy()
    if not work:
        return bitmask
    rest = _copy_cached(work, view, build=threads == 1)
    chunks = _by_guide(rest, threads) if threads > 1 and len(rest) > 1 else [rest]
    if len(chunks) == 1:
        _fill(rest, view)
    else:  # the caller takes the first share itself: one thread hand-off fewer
        futures = [_executor(threads - 1).submit(_fill, chunk, view) for chunk in chunks[1:]]
        try:
            _fill(chunks[0], view)
        finally:
            for f in futures:
                f.result()
    if staging is not None:
        index = torch.tensor(targets, device=bitmask.device)
        bitmask.index_copy_(0, index, staging.to(bitmask.device, non_blocking=True))
    return bitmask


def _copy_cached(work, view: np.ndarray, build: bool = False) -> list:
    """Copy the rows of automaton matchers whose state's mask is already built, and
    with ``build`` those of the other automaton matchers without a budget too (built
    here: what their ``fill_next_token_bitmask`` does, without its dispatch); the
    other ``(matcher, row, remaining)`` jobs are returned, in order.

    ``FSMGuide.built_row`` answers without building anything; a new state (or a row
    never checked for emptiness) is left to the matcher (or ``FSMGuide.row``), which
    builds it and measures the guide's growth."""
    rest = []
    for m, r, n in work:
        row = None
        if type(m) is FSMMatcher:
            # With a budget: the budget row where it binds, the plain row where it
            # does not, False while not known (the matcher computes it).
            if n is not None and n - 2 < m.guide.budget_tops.get(m.state, INFINITE):
                row = m.guide.budget_row(m.state, n, build=False)
            if row is None:
                row = m.guide.built_row(m.state)
                if row is None and build and n is None:
                    row = m.guide.row(m.state)
        if row is None or row is False:
            rest.append((m, r, n))
            continue
        copy_row(view[r], row)
    return rest


def _by_guide(jobs, threads: int) -> list:
    """``jobs`` in up to ``threads`` shares of about equal size, each guide's rows in
    one share: rows of one guide build under its lock, so splitting them across
    threads would only make the threads wait for each other."""
    groups: dict[int, list] = {}
    for job in jobs:
        groups.setdefault(id(job[0].guide), []).append(job)
    if len(groups) == 1:
        return [jobs]
    shares: list[list] = [[] for _ in range(min(threads, len(groups)))]
    for group in sorted(groups.values(), key=len, reverse=True):
        min(shares, key=len).extend(group)
    return shares


def _fill(jobs, view: np.ndarray) -> None:
    for m, r, n in jobs:
        if n is None:
            m.fill_next_token_bitmask(view, r)
        else:
            m.fill_next_token_bitmask(view, r, n)


def _executor(threads: int) -> ThreadPoolExecutor:
    """The shared pool, grown to ``threads`` workers when asked for more."""
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size < threads:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool, _pool_size = ThreadPoolExecutor(threads, thread_name_prefix="guided-masks"), threads
        return _pool
