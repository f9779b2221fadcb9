"""Pause Python's cyclic garbage collector while automata are built.

Compiling a schema allocates hundreds of thousands of small containers that live
on (NFA edge lists, subset-construction state sets, closures). CPython runs a
young-generation pass every few hundred net allocations and a full pass each time
the long-lived heap grows by a quarter, and each pass traverses these objects
again. Measured on 80 MaskBench schemas in one process (compile, first mask, every
instance stepped): time in the collector 1.6 s -> 0.6 s in a process as small as
a benchmark worker; 6.1 s -> 2.7 s (total time to first mask 7.8 s -> 5.2 s) in one
that also holds the 11,305 schemas, as a server holds its own objects.

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
