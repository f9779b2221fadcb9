"""The numba kernels, and the gate to them: whether numba can be imported, compiling
a function, and the notice printed while the first run compiles them.

numba is a dependency; where it cannot be imported the Python twins run instead, so
every kernel has one, and a test holds the two equal. Kernels are leaves: a kernel
module imports only the standard library, numpy, numba and other kernel modules.
The Python that drives a kernel (its arrays, their growth, the rounds of a walk)
lives beside its twin, outside this package.

===================  ==============================================  ===========================================
kernel module        Python twin                                     driven by
===================  ==============================================  ===========================================
``subsets``          ``fsm.dfa.subset_table`` / ``sweep_row``,       ``fsm.subset_arrays`` (``subset_table``,
                     ``fsm.lazy.LazyDFA``'s own construction         ``LazySubsets``)
``partition``        ``fsm.dfa._hopcroft`` / ``_moore``,             ``fsm.dfa.coarsest_partition``,
                     ``_quotient``'s order                           ``fsm.dfa._quotient``
``product``          ``fsm.ops._product_by_pair``                    ``fsm.ops._product_compiled``
``reach``            ``fsm.dfa.co_reachable``, ``live_states``,      ``fsm.dfa``, ``fsm.lazy``, ``fsm.nfa``
                     ``fsm.nfa.NFA.reach_bits``
``narrow``           ``fsm.narrow.narrow_walk`` and the facts of     ``fsm.compiled_walk.CompiledWalk``
                     ``fsm.index.TokenIndex``
``units``            ``grammars.grammar_index._walk_units``, the     ``grammars.unit_walk.CompiledUnitWalk``
                     piece view, ``grammars.lexer.Lexer.live_classes``
``key_trie``         ``grammars.json_schema.text``'s other-key       ``grammars.json_schema.text``
                     builder (``_key_excluding_by_byte``)
``successors``       the numpy walk of                               ``fsm.index.TokenIndex.successors``
                     ``fsm.index.TokenIndex.successors``
``chains``           ``fsm.trie.RunTrie._chain_rows_numpy``          ``fsm.trie.RunTrie.chain_rows``
===================  ==============================================  ===========================================

Importing a kernel module imports numba (~0.3 s), so kernel modules are imported
where they are first needed (inside functions, or in modules that are), never by
``import guided``. Kernels are compiled on first use and cached on disk by numba
(``cache=True``, in ``__pycache__`` beside the source, or under ``NUMBA_CACHE_DIR``):
the first process after an install compiles them all (~20 s; ``NOTICE`` is printed
then), later ones load them.
"""

from __future__ import annotations

import os
import sys
import threading
from importlib.util import find_spec

#: Whether compiled kernels can be used: numba is installed. It is loaded (~0.25 s)
#: by the first call whose work pays for it, or in the background after a first
#: compile that ran without it (``use``, ``warm_up``), never by ``import guided``.
AVAILABLE = find_spec("numba") is not None

#: Past this many NFA states a pattern is refused rather than exhausting memory
#: (``fsm.nfa`` reads it; defined here because ``subsets.paste_here`` compiles it in).
MAX_NFA_STATES = 400_000

#: Printed to stderr, once per process, when a kernel is about to be compiled while
#: numba's cache holds none of them (``watch_first_compile``).
NOTICE = "guided: compiling the numba kernels (first run after install only, ~20 s)"

_compiled: dict = {}


def compiled(fn):
    """``fn`` compiled with numba, once per process (``njit(cache=True, nogil=True)``).

    Args:
        fn: a Python function numba can compile (a kernel kept undecorated).

    Returns:
        The numba dispatcher; the same one for every call with ``fn``.

    Raises:
        ImportError: numba is not installed.

    Example::

        >>> from guided.fsm.kernels.units import walk_py
        >>> walk = compiled(walk_py)
    """
    got = _compiled.get(fn)
    if got is None:
        from numba import njit

        got = _compiled[fn] = njit(cache=True, nogil=True)(fn)
    return got


#: Work (NFA states, table cells / 16, product pairs: ``use``) at which a kernel is
#: worth loading numba for (~0.25 s in a fresh process); below it, until numba is
#: loaded, the Python twin runs.
LOAD_FOR_WORK = 5_000

_ready = False  # numba imported and initialised (``load`` or the warm-up done)
_warm_lock = threading.Lock()
_warm_thread: threading.Thread | None = None
_warm_error: BaseException | None = None


def ready() -> bool:
    """Whether numba is loaded and initialised, so kernels cost no start-up."""
    return _ready


def use(work: int) -> bool:
    """Whether a call doing ``work`` units should run its kernel (numba installed).

    Once numba is loaded: always. Before: only work that pays for loading it (~0.25
    s: the import, its type registries, the cached kernel), which happens then and
    there (``load``); smaller work runs the Python twin, and ``warm_up`` loads numba
    behind it. So a fresh process's first small compile reaches its first mask
    without waiting for numba.

    Args:
        work: the call's size, in what ``LOAD_FOR_WORK`` counts (NFA states, table
            cells / 16, product pairs).

    Returns:
        True to run the kernel.

    Example::

        >>> if use(len(nfa)):
        ...     from guided.fsm.kernels.subsets import build_rows   # imports numba
    """
    if not AVAILABLE:
        return False
    if _ready:
        return True
    if work >= LOAD_FOR_WORK:
        load()
        return True
    return False


def load() -> None:
    """Load numba now (or wait for the warm-up under way), where it is installed.

    It is imported in a thread of its own: a compile that recurses deep may be the
    first to need it, and Python's recursion limit could interrupt the import of
    numba's modules there, leaving them half-initialised for the rest of the process.

    Raises:
        ImportError (or what numba raised): numba could not be loaded.
    """
    if not AVAILABLE or _ready:
        return
    warm_up().join()
    if not _ready:
        raise _warm_error if _warm_error is not None else ImportError("numba could not be loaded")


def warm_up() -> threading.Thread:
    """Start loading numba in a background thread (once per process; a later call
    returns the same thread). ``guided.compile`` calls it after a compile that ran
    without numba, so that the model's first passes, which free the interpreter,
    cover the load.

    Returns:
        The loading thread (``join`` it to wait).
    """
    global _warm_thread
    with _warm_lock:
        if _warm_thread is None:
            # Not a daemon: a process that exits during the load waits for it, rather
            # than tearing numba's native state down under it.
            _warm_thread = threading.Thread(target=_warm, name="guided-load-numba")
            _warm_thread.start()
            # A fork mid-load would copy numba's import locks held by a thread the
            # child does not have: the parent waits for the load first.
            os.register_at_fork(before=_warm_thread.join)
        return _warm_thread


def _touch(x):
    return x + 1


def _warm() -> None:
    global _ready, _warm_error
    try:
        # One compiled call loads numba's type registries (~0.1 s of the load).
        compiled(_touch)(1)
        _ready = True
    except BaseException as e:  # re-raised by load(), where a caller needs numba
        _warm_error = e


_watch_lock = threading.Lock()
_watching = False
_decided = False  # whether the first compile of a kernel was seen (and the notice printed or not)


def watch_first_compile() -> None:
    """Print ``NOTICE`` to stderr, once per process, when numba is about to compile a
    kernel of this package while its cache holds none of them yet (the first run
    after an install); say nothing when the cache is warm. Each kernel module calls
    this as it is imported (it imports numba then); the listener is installed once.

    numba announces each compile that its cache could not serve (a ``numba:compile``
    event): the first one for a kernel here decides, by ``cache_is_cold``.

    Example::

        >>> from guided.fsm.kernels import watch_first_compile
        >>> watch_first_compile()       # in a kernel module, after importing numba
    """
    global _watching
    with _watch_lock:
        if _watching:
            return
        _watching = True
        hooks = list(_on_import)
    from numba.core import event

    class _FirstCompile(event.Listener):
        def on_start(self, ev):
            try:
                _first_compile(ev.data.get("dispatcher") if isinstance(ev.data, dict) else None)
            except Exception:  # a notice must never break a compile
                pass

        def on_end(self, ev):
            pass

    event.register("numba:compile", _FirstCompile())
    for hook in hooks:
        hook()


_on_import: list = []  # on_numba_import's hooks


def on_numba_import(hook) -> None:
    """Call ``hook()`` when the first kernel module is imported (numba with it),
    before any kernel is compiled; now, if one is already.

    Example::

        >>> on_numba_import(lambda: event.register("numba:compile", listener))
    """
    with _watch_lock:
        if not _watching:
            _on_import.append(hook)
            return
    hook()


def _first_compile(dispatcher) -> None:
    """At numba's compile of ``dispatcher``: the notice, if it is the first kernel
    of this package compiled in this process and the cache is cold."""
    global _decided
    py_func = getattr(dispatcher, "py_func", None)
    if _decided or py_func is None or not getattr(py_func, "__module__", "").startswith(__name__ + "."):
        return
    _decided = True
    if cache_is_cold(dispatcher):
        print(NOTICE, file=sys.stderr, flush=True)


def cache_is_cold(dispatcher) -> bool:
    """Whether numba's cache holds no kernel of this package for this Python: no index
    file (``*.pyXY.nbi``) in the cache directory numba chose for ``dispatcher`` (in
    ``__pycache__`` beside the kernels, under ``NUMBA_CACHE_DIR``, or a user-wide
    one) that is at least as new as the source of the kernel it indexes (an older
    one is stale: numba drops it when the source changes).

    Args:
        dispatcher: a numba dispatcher of a kernel here, compiled with ``cache=True``.

    Returns:
        True where the cache is cold; False where it is warm, or caching is off.
    """
    cache = getattr(dispatcher, "_cache", None)
    path = getattr(cache, "cache_path", None)
    if not path:
        return False
    sources = os.path.dirname(os.path.abspath(dispatcher.py_func.__code__.co_filename))
    suffix = f".py{sys.version_info[0]}{sys.version_info[1]}.nbi"
    try:
        names = os.listdir(path)
    except OSError:  # (numba makes the directory when it first saves)
        return True
    for name in names:
        if not name.endswith(suffix) or name.startswith("__init__."):  # (_warm's call, not a kernel)
            continue
        try:
            indexed = os.stat(os.path.join(path, name)).st_mtime
            source = os.stat(os.path.join(sources, name.split(".", 1)[0] + ".py")).st_mtime
        except OSError:
            continue
        if indexed >= source:
            return False
    return True
