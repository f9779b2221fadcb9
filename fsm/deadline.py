"""The compile time limit: a deadline per thread, checked where compiles loop.

``guided.compile(..., timeout=s)`` runs the compile inside ``time_limit(s)``; the
loops that dominate a compile (NFA growth, subset construction, products,
minimisation, an eager mask table) call ``check()``, which raises
``CompileTimeoutError`` once the deadline has passed. The exception unwinds the
compile, and everything it built is garbage: caches are filled only with finished
values. Work outside a ``time_limit`` (a lazy guide growing while decoding) is not
limited.

Time numba spends compiling a kernel (the first call of each, once per install:
~20 s for all of them) is the install's, not the spec's: the deadline moves by it.

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

from .kernels import on_numba_import

_local = threading.local()
_listening = False
_listen_lock = threading.Lock()


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


def jit_seconds() -> float:
    """Seconds numba has spent compiling kernels in this thread, under time limits
    (what they leave out: a timing comparable with a limit subtracts it)."""
    return getattr(_local, "jit_total", 0.0)


def check() -> None:
    """Raise ``CompileTimeoutError`` if this thread's deadline has passed."""
    limit = getattr(_local, "limit", None)
    if limit is not None and time.monotonic() > limit[0]:
        raise CompileTimeoutError(limit[1])


def _listen_to_numba() -> None:
    """Move this thread's deadline by the time numba spends compiling kernels (the
    outermost of nested compile events counts)."""
    global _listening
    with _listen_lock:
        if _listening:
            return
        _listening = True
    from numba.core import event

    class _JitTime(event.Listener):
        def on_start(self, ev):
            depth = getattr(_local, "jit_depth", 0)
            if depth == 0:
                _local.jit_start = time.monotonic()
            _local.jit_depth = depth + 1

        def on_end(self, ev):
            _local.jit_depth = depth = getattr(_local, "jit_depth", 1) - 1
            limit = getattr(_local, "limit", None)
            if depth == 0 and limit is not None:
                spent = time.monotonic() - _local.jit_start
                _local.limit = (limit[0] + spent, limit[1])
                _local.jit_total = jit_seconds() + spent

    event.register("numba:compile", _JitTime())


on_numba_import(_listen_to_numba)
