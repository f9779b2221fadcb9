"""Pause Python's cyclic garbage collector while automata are built.

Compiling a schema allocates hundreds of thousands of small containers that live
on (NFA edge lists, subset-construction state sets, closures). CPython runs a
collection every few hundred net allocations, and its full passes traverse all of
them again as the heap grows, so the collector's share of a compile is large:
on 80 MaskBench schemas (``benchmarks/maskbench.py`` loop, one process) the total
time to first mask was 7.8 s with the collector running and 3.4 s paused.

Nothing here needs cycles freed promptly (plain reference counting frees the
temporaries), so the collector is paused for the duration and resumed afterwards,
when it collects whatever cycles were left. Paused-by-us is not nested: an inner
pause sees the collector off and leaves it to the outer one, and a collector the
caller had disabled stays disabled.

Example::

    >>> with gc_paused():
    ...     dfa = compile_regex(r"[a-z]{3,40}")
"""

from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def gc_paused():
    """Disable the cyclic collector inside the block if it is running now."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
