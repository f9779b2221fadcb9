"""Pause Python's cyclic garbage collector while automata are built.

Compiling a schema allocates hundreds of thousands of small containers that live
on (NFA edge lists, subset-construction state sets, closures). CPython runs a
young-generation pass every few hundred net allocations and a full pass each time
the long-lived heap grows by a quarter, and each pass traverses these objects
again: with the collector running, a process that compiles many schemas spends
a large share of its compile time in it, the more so the more long-lived objects
it holds (a server holds its own).

Nothing here needs cycles freed promptly (plain reference counting frees the
temporaries), so the collector is paused for the duration. Pauses are counted across threads
(guides are shared by threads): the first block to start turns the collector off
if it is on, the last to end turns it back on, and a collector the caller had
disabled stays disabled.

When the block ends normally, what it allocated is moved straight to the oldest
generation (``gc.freeze()`` then ``gc.unfreeze()``: two list splices) before the
collector resumes. Otherwise the first allocation after the pause runs a young
pass over everything the block built (all of it still alive: the automaton just
compiled), and a middle pass later does it again: that pass alone costs ~15% of
the compile time of schemas that take 0.2-3 s to their first mask, and the passes
slow the masks that follow. A successful build leaves
almost no cyclic garbage (30 schemas: ~3k objects), so nothing waits long for the
next full pass. A block that raises is left to the young pass as usual: a failed
compile's traceback holds its half-built NFA in a cycle (1.3M objects on one
schema) that should be freed soon. Skipped when the process has frozen objects of
its own (``gc.get_freeze_count()``), which ``unfreeze`` would release. That count
walks the frozen objects (vLLM freezes its whole start-up heap: ~65 ms a call), so
a process seen to hold some is taken to hold them for a minute before it is asked
again; a process that holds none answers at no cost.

Example::

    >>> with gc_paused():
    ...     dfa = compile_regex(r"[a-z]{3,40}")
"""

from __future__ import annotations

import gc
import threading
import time

_lock = threading.Lock()
_depth = 0  # blocks inside a pause, in every thread
_resume = False  # whether the last block to end turns the collector back on
_frozen_until = 0.0  # until then (time.monotonic) the process is known to hold frozen objects
FROZEN_RECHECK_S = 60.0


class gc_paused:
    """Disable the cyclic collector inside the block if it is running now. A class,
    not a generator: it is entered at every mask a lazy automaton computes, where
    ``contextlib``'s generator machinery cost a few µs."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _depth, _resume
        with _lock:
            if _depth == 0:
                _resume = gc.isenabled()
                if _resume:
                    gc.disable()
            _depth += 1

    def __exit__(self, kind, value, traceback) -> None:
        global _depth
        with _lock:
            _depth -= 1
            if _depth or not _resume:
                return
            if kind is None and not _holds_frozen():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def _holds_frozen() -> bool:
    """Whether the process has frozen objects of its own (called under ``_lock``)."""
    global _frozen_until
    now = time.monotonic()
    if now < _frozen_until:
        return True
    if gc.get_freeze_count():
        _frozen_until = now + FROZEN_RECHECK_S
        return True
    return False
