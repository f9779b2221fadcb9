"""Memoised automata, bounded by the bytes they hold across the whole process.

Compiles repeat sub-automata (a string type used in many places, one pattern in
many schemas), so their builders are memoised (``@memo``). The keys come from the
specs a process is given, so in a server they are chosen by its clients: a memo
bounded only by entries (``functools.lru_cache(256)``) could hold 256 automata of
hundreds of MB each. Every ``@memo`` function shares one budget, ``MAX_BYTES``,
and one least-recently-used order; each value is sized once, when stored
(``fsm.footprint``: arrays by their data).

A value is stored only once it is built, so a build that raises (a compile past
its time limit) leaves nothing behind.

Example::

    >>> @memo
    ... def char_dfa(ranges: tuple) -> DFA: ...
    >>> char_dfa.cache_clear()
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict

from .footprint import nbytes

#: The bytes memoised values may hold together, and the most values kept.
MAX_BYTES = 256 << 20
MAX_ENTRIES = 16_384

_lock = threading.Lock()
_values: "OrderedDict[tuple, tuple[object, int]]" = OrderedDict()  # (function, args) -> (value, bytes)
_total = 0
_MISSING = MISSING = object()


def memo(fn):
    """Memoise ``fn`` (hashable arguments) within the shared budget; the wrapper has
    ``cache_clear()`` (this function's values) like ``lru_cache``."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        key = (args, tuple(sorted(kwargs.items()))) if kwargs else args
        got = lookup(wrapper, key)
        if got is _MISSING:
            got = store(wrapper, key, fn(*args, **kwargs))
        return got

    wrapper.cache_clear = lambda: _clear(wrapper)
    return wrapper


def lookup(owner, key):
    """The value stored under ``(owner, key)``, or ``MISSING``."""
    with _lock:
        got = _values.get((owner, key), _MISSING)
        if got is _MISSING:
            return got
        _values.move_to_end((owner, key))
        return got[0]


def store(owner, key, value):
    """Keep ``value`` under ``(owner, key)`` (sized now); returns it."""
    global _total
    size = nbytes(value)
    with _lock:
        old = _values.pop((owner, key), None)
        if old is not None:  # another thread built it meanwhile
            _total -= old[1]
        _values[(owner, key)] = (value, size)
        _total += size
        _evict()
    return value


def set_max_bytes(max_bytes: int) -> None:
    """Set the shared budget (``guided.configure_cache(max_memo_bytes=)``); evicts now."""
    global MAX_BYTES
    with _lock:
        MAX_BYTES = max_bytes
        _evict()


def info() -> dict:
    """``{"entries", "bytes", "max_bytes"}`` of the shared memo."""
    with _lock:
        return {"entries": len(_values), "bytes": _total, "max_bytes": MAX_BYTES}


def clear() -> None:
    """Drop every memoised value."""
    global _total
    with _lock:
        _values.clear()
        _total = 0


def _evict() -> None:
    global _total
    while _values and (_total > MAX_BYTES or len(_values) > MAX_ENTRIES):
        _, (_, size) = _values.popitem(last=False)
        _total -= size


def _clear(wrapper) -> None:
    global _total
    with _lock:
        for key in [k for k in _values if k[0] is wrapper]:
            _total -= _values.pop(key)[1]
