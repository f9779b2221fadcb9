"""The compile time limit: a deadline per thread, checked where compiles loop.

``guided.compile(..., timeout=s)`` runs the compile inside ``time_limit(s)``; the
loops that dominate a compile (NFA growth, subset construction, products,
minimisation, an eager mask table) call ``check()``, which raises
``CompileTimeoutError`` once the deadline has passed. The exception unwinds the
compile, and everything it built is garbage: caches are filled only with finished
values. Work outside a ``time_limit`` (a lazy guide growing while decoding) is not
limited.

Granularity: the checks stand between steps, so a compile stops within one step of
its deadline (a numba kernel or one numpy operation runs to its end; at the sizes
the automata are capped at, a step is well under a second).

Cost: ``check()`` is one thread-local read (~50 ns) where no limit is set, and a
clock read more where one is.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from guided.errors import CompileTimeoutError

_local = threading.local()


@contextmanager
def time_limit(seconds: float | None):
    """Run the block under a deadline ``seconds`` from now (None: no limit). Nested
    limits keep the earlier deadline.

    Example::

        >>> with time_limit(10.0):
        ...     dfa = compile_regex(pattern)   # CompileTimeoutError after ~10 s
    """
    outer = getattr(_local, "limit", None)
    if seconds is None:
        yield
        return
    if seconds <= 0:
        raise ValueError(f"a time limit must be positive, got {seconds}")
    deadline = time.monotonic() + seconds
    if outer is None or deadline < outer[0]:
        _local.limit = (deadline, seconds)
    try:
        yield
    finally:
        _local.limit = outer


def check() -> None:
    """Raise ``CompileTimeoutError`` if this thread's deadline has passed."""
    limit = getattr(_local, "limit", None)
    if limit is not None and time.monotonic() > limit[0]:
        raise CompileTimeoutError(limit[1])
