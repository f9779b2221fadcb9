"""How many bytes a guide (or a memoised automaton) holds: a walk over its objects.

A guide's memory is mostly numpy arrays (transition tables, mask rows, subset
buffers) and, for grammars, parse states with their cached masks. ``nbytes`` walks
the objects reachable from a guide and adds ``sys.getsizeof`` of each Python object
and ``nbytes`` of each array, skipping what the guide shares with every other guide
over its vocabulary (the vocabulary itself, its tries and byte tables: built once
per vocabulary and kept as long as it is in use), the attribute names in objects'
``__dict__`` (interned strings every instance shares) and what the caller says it
owns (a guide's spec). The compile cache evicts by this
figure and a guide's growth limit is checked against it.

Cost: one visit per object, ~1 µs: ~1 ms for an automaton guide (a few hundred
objects, mostly arrays), up to a few hundred ms for a grammar guide holding tens of
thousands of parse states; so it is measured when a guide is cached and as its
growth doubles, never per token, and a guide measuring itself while decoding takes
the walk in slices (``Walk``). A type holding many small objects of a known
shape measures them in bulk instead (``self_measured``): a lazy NFA's per-state
lists (tens of thousands of lists and tuples) are sized by C-level passes over
them, ~50x faster than visiting each; lists that several such objects share (an
NFA template's states, shared by its copies) are handed to the walk as ``Bulk``
parts, counted once.
"""

from __future__ import annotations

import sys
import threading
import types
from itertools import repeat

import numpy as np

#: Objects walked past without counting or following: code and the interpreter's own.
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
           types.CodeType, type(threading.Lock()), type(threading.RLock()), threading.Thread)
_SCALARS = frozenset((int, float, bool, str, bytes, type(None), complex))

#: Per tuple of shared roots (by id): the roots, kept alive so their ids stay theirs,
#: and the ids of what they reach.
_shared_ids: dict[tuple, tuple[tuple, frozenset[int]]] = {}
_shared_lock = threading.Lock()

#: Types that measure their own bulk: type -> its ``footprint_parts`` method.
_SELF_MEASURED: dict[type, object] = {}


def self_measured(cls):
    """Class decorator: ``nbytes`` asks the class's instances for their size
    instead of walking everything they hold.

    The class defines ``footprint_parts(self) -> (nbytes, to_walk, covered)``: the
    bytes of the object and of what it measured itself, the objects the walk should
    still follow, and the containers its figure covers (never walked, even when
    reached another way).

    Example::

        >>> @self_measured
        ... class Table:
        ...     def footprint_parts(self):
        ...         return sys.getsizeof(self) + 8 * len(self.rows), [self.meta], [self.rows]
    """
    _SELF_MEASURED[cls] = cls.footprint_parts
    _kinds.pop(cls, None)
    return cls


#: What ``sys.getsizeof`` adds to a list's ``__sizeof__`` (its garbage-collector header).
_LIST_HEADER = sys.getsizeof([]) - [].__sizeof__()


def lists_nbytes(lists) -> int:
    """``sum(map(sys.getsizeof, lists))`` for a sequence of lists, ~7x faster: the
    list type's own ``__sizeof__`` is called directly, where ``getsizeof`` looks the
    method up on each object. A TypeError if an item is not a list.

    Example::

        >>> lists_nbytes([[], [1, 2]]) == sys.getsizeof([]) + sys.getsizeof([1, 2])
        True
    """
    return sum(map(list.__sizeof__, lists)) + _LIST_HEADER * len(lists)


class Bulk:
    """A container a ``self_measured`` object has sized itself, put among the objects
    its ``footprint_parts`` says to walk: counted once in a walk however many objects
    share it, and never walked into.

    Args:
        obj: the container (a list of per-state lists).
        nbytes: its size with everything it holds.

    Example::

        >>> def footprint_parts(self):
        ...     return sys.getsizeof(self), [Bulk(self.rows, 8 * len(self.rows))], ()
    """

    __slots__ = ("obj", "nbytes")

    def __init__(self, obj, nbytes: int):
        self.obj, self.nbytes = obj, nbytes


def nbytes(root, shared_roots=(), leave_out=()) -> int:
    """Bytes held by the objects reachable from ``root`` but not from ``shared_roots``.

    Args:
        root: the object to measure (a guide).
        shared_roots: objects whose reachable objects are not counted (what the
            guide shares with other guides).
        leave_out: objects neither counted nor walked into (what the guide keeps a
            reference to but the caller owns: its spec); what they hold is counted
            where the guide reaches it another way.

    Returns:
        The approximate size in bytes (arrays by their data, other objects by
        ``sys.getsizeof``; each object counted once).

    Example::

        >>> nbytes(guide, shared_roots=(guide.vocab,))
        1523712
    """
    return _walk([root], shared_ids(shared_roots), left_out=leave_out)[0]


def shared_ids(roots) -> frozenset[int]:
    """The ids of every object reachable from ``roots``, memoised by their ids (the
    roots are per-vocabulary objects that live as long as their vocabulary)."""
    roots = tuple(roots)
    key = tuple(id(r) for r in roots)
    with _shared_lock:
        got = _shared_ids.get(key)
    if got is None:
        # Scalars held in containers are left out: a guide reaches those only through
        # their shared container, whose id is kept (the vocabulary's 49k token strings
        # are checked by type in C, not visited one by one: ~50x faster).
        got = (roots, frozenset(_walk(roots, frozenset(), held_scalars=False)[1]))
        with _shared_lock:
            _shared_ids[key] = got
            while len(_shared_ids) > 16:
                _shared_ids.pop(next(iter(_shared_ids)))
    return got[1]


def also_shared(parent, obj) -> None:
    """Count ``obj`` as shared wherever ``parent`` is: for an object made after the
    shared ids were collected and attached to a shared one (a vocabulary trie's
    compiled table, made on a guide's first compiled walk), which guides may also
    refer to directly. Without this, every guide measured after it was made would
    count it (10 MB for SmolLM2's byte trie table).

    Example::

        >>> split.table = TrieTable(split)
        >>> also_shared(split, split.table)
    """
    with _shared_lock:
        holding = [(k, v) for k, v in _shared_ids.items() if id(parent) in v[1]]
    for key, (roots, ids) in holding:
        more = _walk([obj], ids, held_scalars=False)[1]
        if more:
            with _shared_lock:
                if key in _shared_ids:
                    _shared_ids[key] = (roots, _shared_ids[key][1] | more)


def _slot_values(o) -> list:
    """The objects an instance's slots refer to."""
    out = []
    for cls in type(o).__mro__:
        for name in getattr(cls, "__slots__", ()):
            v = getattr(o, name, None)
            if v is not None:
                out.append(v)
    return out


_SCALAR, _ARRAY, _SKIP, _TENSOR, _OWN, _SEQUENCE, _DICT, _OBJECT, _BULK = range(9)
#: How the walk treats each type it meets, decided once per type (``_kind``).
_kinds: dict[type, int] = {}


def _kind(t: type) -> int:
    if t is Bulk:
        return _BULK
    if t in _SCALARS:
        return _SCALAR
    if t is np.ndarray:
        return _ARRAY
    if issubclass(t, _OPAQUE) or t.__module__.startswith("numba."):
        return _SKIP  # code; numba's dispatchers reach its whole type system
    if t is Walk:
        return _SKIP  # a measurement under way (its ids seen, its stack): not the guide's
    if t.__module__ == "torch" and hasattr(t, "element_size"):  # a tensor (a device table)
        return _TENSOR
    if t in _SELF_MEASURED:
        return _OWN
    if issubclass(t, (list, tuple, set, frozenset)):
        return _SEQUENCE
    if issubclass(t, dict):
        return _DICT
    return _OBJECT


def _walk(roots, skip: frozenset[int], held_scalars: bool = True, left_out=()) -> tuple[int, set[int]]:
    """The bytes of the objects reachable from ``roots`` outside ``skip``, and their ids
    (without ``held_scalars``, scalars held in lists, tuples, sets and dicts are
    neither counted nor listed; ``left_out`` objects are taken as seen)."""
    walk = Walk(roots, skip, held_scalars, left_out)
    walk.run()
    return walk.total, walk.seen


class Walk:
    """A measurement that can be taken in slices: ``run(budget)`` visits up to
    ``budget`` objects and says whether the walk is done, ``total`` is then the
    bytes (what ``nbytes`` returns for the same arguments).

    A guide measures itself this way while decoding, a slice per mask it builds, so
    that no mask waits for a whole walk (tens of ms for a guide of thousands of parse
    states). Objects added between slices to containers already walked are left out
    (the next measurement counts them): the figure is as approximate as the growth
    during the walk.

    Args:
        roots: the objects to measure.
        skip: ids of objects neither counted nor followed (``shared_ids``).
        held_scalars: count scalars held in containers (as ``nbytes`` does).
        left_out: objects taken as seen (not counted, not followed).

    Example::

        >>> walk = Walk([guide], shared_ids((guide.vocab,)))
        >>> while not walk.run(2048):
        ...     pass   # (another mask between slices)
        >>> walk.total
        1523712
    """

    __slots__ = ("held_scalars", "made", "seen", "skip", "stack", "total")

    def __init__(self, roots, skip: frozenset[int], held_scalars: bool = True, left_out=()):
        self.total = 0
        self.seen: set[int] = {id(o) for o in left_out}
        self.stack = list(roots)
        self.made = []  # the lists ``footprint_parts`` made (their ``Bulk``s' ids stay theirs)
        self.skip = skip
        self.held_scalars = held_scalars

    def run(self, budget: int | None = None) -> bool:
        """Visit up to ``budget`` objects (every one left: None); True once done."""
        total, seen, stack, skip, held_scalars = self.total, self.seen, self.stack, self.skip, self.held_scalars
        getsizeof = sys.getsizeof
        kinds = _kinds
        scalars = _SCALARS
        for _ in repeat(None) if budget is None else repeat(None, budget):
            if not stack:
                break
            o = stack.pop()
            i = id(o)
            if i in seen or i in skip:
                continue
            seen.add(i)
            t = type(o)
            k = kinds.get(t)
            if k is None:
                k = kinds[t] = _kind(t)
            if k == _SCALAR:
                total += getsizeof(o)
            elif k == _SEQUENCE:
                total += getsizeof(o)
                stack.extend(o if held_scalars else (x for x in o if type(x) not in scalars))
            elif k == _ARRAY:
                base = o.base
                if isinstance(base, np.ndarray):
                    stack.append(base)
                else:  # its own data, or data another owner keeps for it alone (numba's MemInfo)
                    total += o.nbytes
            elif k == _DICT:
                total += getsizeof(o)
                if held_scalars:
                    stack.extend(o.keys())
                    stack.extend(o.values())
                else:
                    stack.extend(x for x in o if type(x) not in scalars)
                    stack.extend(x for x in o.values() if type(x) not in scalars)
            elif k == _OBJECT:
                total += getsizeof(o)
                # Its ``__dict__``: the values only; the keys are attribute names, interned
                # strings that every instance of the class shares.
                d = getattr(o, "__dict__", None)
                if type(d) is dict and id(d) not in seen and id(d) not in skip:
                    seen.add(id(d))
                    total += getsizeof(d)
                    stack.extend(d.values())
                stack.extend(_slot_values(o))
            elif k == _TENSOR:
                total += o.element_size() * o.nelement()
            elif k == _OWN:
                size, to_walk, covered = _SELF_MEASURED[t](o)
                total += size
                seen.update(map(id, covered))
                stack.extend(to_walk)
                self.made.append(to_walk)
            elif k == _BULK:
                b = id(o.obj)
                if b not in seen and b not in skip:
                    seen.add(b)
                    total += o.nbytes
        self.total = total
        return not stack
