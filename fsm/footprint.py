"""How many bytes a guide (or a memoised automaton) holds: a walk over its objects.

A guide's memory is mostly numpy arrays (transition tables, mask rows, subset
buffers) and, for grammars, parse states with their cached masks. ``nbytes`` walks
the objects reachable from a guide and adds ``sys.getsizeof`` of each Python object
and ``nbytes`` of each array, skipping what the guide shares with every other guide
over its vocabulary (the vocabulary itself, its tries and byte tables: built once
per vocabulary and kept as long as it is in use). The compile cache evicts by this
figure and a guide's growth limit is checked against it.

Cost: one visit per object: ~1 ms for an automaton guide (a few hundred objects,
mostly arrays), up to a few hundred ms for a grammar guide holding tens of
thousands of parse states; so it is measured when a guide is cached and as its
growth doubles, never per token.
"""

from __future__ import annotations

import sys
import threading
import types

import numpy as np

#: Objects walked past without counting or following: code and the interpreter's own.
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
           types.CodeType, type(threading.Lock()), type(threading.RLock()), threading.Thread)
_SCALARS = frozenset((int, float, bool, str, bytes, type(None), complex))

#: Per tuple of shared roots (by id): the roots, kept alive so their ids stay theirs,
#: and the ids of what they reach.
_shared_ids: dict[tuple, tuple[tuple, frozenset[int]]] = {}
_shared_lock = threading.Lock()


def nbytes(root, shared_roots=()) -> int:
    """Bytes held by the objects reachable from ``root`` but not from ``shared_roots``.

    Args:
        root: the object to measure (a guide).
        shared_roots: objects whose reachable objects are not counted (what the
            guide shares with other guides).

    Returns:
        The approximate size in bytes (arrays by their data, other objects by
        ``sys.getsizeof``; each object counted once).

    Example::

        >>> nbytes(guide, shared_roots=(guide.vocab,))
        1523712
    """
    return _walk(root, shared_ids(shared_roots))[0]


def shared_ids(roots) -> frozenset[int]:
    """The ids of every object reachable from ``roots``, memoised by their ids (the
    roots are per-vocabulary objects that live as long as their vocabulary)."""
    roots = tuple(roots)
    key = tuple(id(r) for r in roots)
    with _shared_lock:
        got = _shared_ids.get(key)
    if got is None:
        ids: set[int] = set()
        for r in roots:
            ids |= _walk(r, frozenset(ids))[1]
        got = (roots, frozenset(ids))
        with _shared_lock:
            _shared_ids[key] = got
            while len(_shared_ids) > 16:
                _shared_ids.pop(next(iter(_shared_ids)))
    return got[1]


def _children(o):
    """The objects ``o`` refers to that a walk follows."""
    if isinstance(o, dict):
        return [*o.keys(), *o.values()]
    if isinstance(o, (list, tuple, set, frozenset)):
        return o
    out = []
    d = getattr(o, "__dict__", None)
    if isinstance(d, dict):
        out.append(d)
    for cls in type(o).__mro__:
        for name in getattr(cls, "__slots__", ()):
            v = getattr(o, name, None)
            if v is not None:
                out.append(v)
    return out


def _walk(root, skip: frozenset[int]) -> tuple[int, set[int]]:
    """The bytes of the objects reachable from ``root`` outside ``skip``, and their ids."""
    total = 0
    seen: set[int] = set()
    stack = [root]
    getsizeof = sys.getsizeof
    while stack:
        o = stack.pop()
        i = id(o)
        if i in seen or i in skip:
            continue
        seen.add(i)
        t = type(o)
        if t in _SCALARS:
            total += getsizeof(o)
        elif t is np.ndarray:
            total += o.nbytes if o.base is None else 0
            if o.base is not None:
                stack.append(o.base)
        elif isinstance(o, _OPAQUE) or t.__module__.startswith("numba."):
            continue  # code; numba's dispatchers reach its whole type system
        elif t.__module__ == "torch" and hasattr(o, "element_size"):  # a tensor (a device table)
            total += o.element_size() * o.nelement()
        else:
            total += getsizeof(o)
            stack.extend(_children(o))
    return total, seen
