"""numba, where it is installed (the `fast` extra): whether it is, and compiling a kernel.

Compiled kernels are functions over numpy arrays, compiled on first use and cached on
disk by numba (``cache=True``): the first process pays about a second a kernel, later
ones load it. ``fsm.kernels.narrow`` (the narrow walk's kernels), ``fsm.kernels.subsets``,
``fsm.kernels.partition``, ``fsm.kernels.product`` and ``fsm.kernels.reach``
decorate theirs and are imported only where ``AVAILABLE``, as are
``fsm.kernels.key_trie`` and ``fsm.kernels.units`` (which compiles its
walk with ``compiled``). Without numba the Python code they mirror runs instead.
"""

from __future__ import annotations

from importlib import import_module
from importlib.util import find_spec

#: Whether compiled kernels can be used: numba is installed. It is imported on the
#: first compiled call or JSON Schema compile (``import_now``; importing it costs
#: ~0.3 s), not by ``import guided``.
AVAILABLE = find_spec("numba") is not None

_compiled: dict = {}


def compiled(fn):
    """``fn`` compiled with numba (once per process; ``ImportError`` without numba)."""
    got = _compiled.get(fn)
    if got is None:
        from numba import njit

        got = _compiled[fn] = njit(cache=True, nogil=True)(fn)
    return got


def import_now() -> None:
    """Import numba now, where it is installed. A schema compile recurses deep and
    reaches its first compiled call there: Python's recursion limit could interrupt
    the import of numba's modules, leaving them half-initialised for the rest of the
    process (every later compiled call failing on a missing attribute)."""
    if AVAILABLE:
        import_module("numba")
