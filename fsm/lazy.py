"""A DFA determinised on demand: a state's row is built the first time it is needed.

::

    NFA --prune states that cannot reach the end--> LazyDFA
        state 0 = closure(start); row(s) = subset construction for s alone, on first use

Large specs (a JSON Schema with many objects) have DFAs of thousands of states, of
which decoding visits a few dozen; building and minimising all of them up front
costs seconds. A ``LazyDFA`` has the interface of ``DFA`` (``transitions``,
``byte_to_class``, ``accepting``, ``step``, ``matches``, ``next_states``,
``has_successors``) plus ``ensure_rows(states)``, which the token index calls before
reading rows. It is not minimised: equivalent states stay apart, but their mask rows
are deduplicated by the index, so masks cost the same.

Deferred fragments (``NFA.deferred``: open JSON values, huge counted repetitions) are
built into the NFA when a closure first reaches them, so the NFA grows with what
decoding visits; byte classes are fixed in advance from the fragments' ``cuts``.
Those built once and copied after that (``NFA.deferred_once``: open values, the
tries of other keys) are copied by the compiled construction straight from the
kept fragment's arrays (``NFA.paste_pending``, ``LazySubsets.paste``): their
states get no Python lists. A compiled walk pastes them itself where allowed
(``_allow_pastes``), and the NFA's side follows later (``_replay_pastes``).

Cost notes: one row costs the union of its NFA states' moves plus a closure per
target: in Python 7 µs for a one-state subset and 20-30 µs for a few states (JSON
sizes), ~1 µs plus a call's overhead with numba (``fsm.subset_arrays.LazySubsets``,
the same states numbered alike; it reads the NFA as arrays, ~65 ns a state once,
and the states of each deferred fragment as it is built). Every state is live (the
NFA is pruned first), so "alive" still means "a prefix of some match".
"""

from __future__ import annotations

import sys
import threading

import numpy as np

from guided.errors import EmptyLanguageError, RegexTooLargeError

from . import footprint
from .dfa import SMALL_SEARCH_EDGES, class_starts, co_reachable, sweep_row
from .kernels import AVAILABLE as COMPILED_AVAILABLE
from .kernels import use as use_kernels
from .nfa import NFA, PastedOnce, nfa_byte_classes, pastable

UNKNOWN = -2  # a transition not computed yet


class GrowthDeferred(Exception):
    """Raised instead of building a deferred fragment past a ``LazyDFA``'s
    ``growth_limit``."""

#: A lazy DFA grows with the text decoded (a long array of objects with counted
#: strings makes ~60 states per token); past this many states it is refused. A state
#: costs ~2.5 KB with its share of the grown NFA (its row is 4 bytes per byte class).
MAX_LAZY_DFA_STATES = 1_000_000


@footprint.self_measured
class LazyDFA:
    """Subset construction on demand over a pruned NFA; compiled where numba is
    installed, unless ``compiled=False``.

    Args:
        nfa: the ``NFA`` (``NFA(lazy=True)`` where it holds deferred fragments); it
            grows as its deferred fragments are built.
        start: its start state; ``final``: its one final state.
        compiled: build rows with ``fsm.subset_arrays.LazySubsets`` (default: where
            numba is installed).

    Raises:
        EmptyLanguageError: ``start`` reaches no ``final``.

    Example::

        >>> nfa = NFA(); s, e = nfa.byte_string(b"ab")
        >>> dfa = LazyDFA(nfa, s, e)
        >>> dfa.matches(b"ab"), dfa.num_states   # only the states visited exist
        (True, 3)
    """

    start = 0
    lazy = True
    #: When set, a state whose expansion needs a deferred fragment built while the
    #: NFA has this many states or more raises ``GrowthDeferred`` instead (work done
    #: ahead of decoding may grow the NFA only so far).
    growth_limit: int | None = None

    def __init__(self, nfa: NFA, start: int, final: int, compiled: bool | None = None):
        compiled = (COMPILED_AVAILABLE and use_kernels(len(nfa))) if compiled is None else compiled
        # A large NFA is read into arrays once, for its liveness and its byte classes
        # (and any NFA, for the compiled construction).
        flat = nfa.flat() if compiled or len(nfa) > SMALL_SEARCH_EDGES else None
        live = _co_reachable(nfa, final, flat)
        if not live[start]:
            raise EmptyLanguageError("the pattern matches no string at all")
        self.byte_to_class = nfa_byte_classes(nfa, flat[2] if flat is not None else None)
        self._n_classes = int(self.byte_to_class[-1]) + 1
        self._nfa = nfa
        self._live = live if not compiled else None  # compiled: LazySubsets keeps its own
        self._final = final
        self._moves: dict[int, list[tuple[int, int, int]]] = {}
        self._closures: dict[int, frozenset[int]] = {}
        self._ids: dict[frozenset[int], int] = {}
        self._by_targets: dict[frozenset[int], int] = {}  # _target
        self._sets: list[frozenset[int]] = []
        self._accepting: list[bool] = []
        self._num_states = 0  # asked for at every step of a walk: kept as an int
        self._transitions = np.full((64, self._n_classes), UNKNOWN, dtype=np.int32)
        self._classes = self.byte_to_class.tolist()
        self._class_starts = class_starts(self._classes)  # checked on deferred fragments
        #: Held while a row is built (and by a ``TokenIndex`` over this DFA while it
        #: computes rows): one compiled guide may serve several threads.
        self.lock = threading.RLock()
        #: The construction compiled (``fsm.subset_arrays.LazySubsets``), or None:
        #: the Python one below.
        self._fast = None
        if compiled:
            from guided.fsm.subset_arrays import LazySubsets  # imports numba

            self._fast = LazySubsets(nfa, start, final, live, self.byte_to_class, self._class_starts, flat,
                                     MAX_LAZY_DFA_STATES)
            # Deferred starts whose template is not made yet, by (templates, key):
            # allowed to be pasted by walks once it is (``_allow_pastes``).
            self._waiting: dict[tuple[int, object], list[int]] = {}
            self._allow_pastes(list(nfa.pending))
            self._fast_row(-1)
        else:
            self._add(self._closure(start))

    def footprint_parts(self) -> tuple[int, list, tuple]:
        """Its size for ``fsm.footprint``: the per-byte lists of small ints (512
        entries a walk would visit one by one) sized in bulk, the rest walked.
        Returns ``(bytes, to walk, covered)``."""
        size = sys.getsizeof(self) + sys.getsizeof(self.__dict__)
        size += footprint.lists_nbytes((self._classes, self._class_starts))
        rest = [v for k, v in vars(self).items() if k not in ("_classes", "_class_starts")]
        return size, rest, (self._classes, self._class_starts, self.__dict__)

    # -- interface shared with DFA ------------------------------------------------------

    @property
    def num_states(self) -> int:
        return self._num_states

    @property
    def transitions(self) -> np.ndarray:
        """Per state, its target per byte class (-1: dead; ``UNKNOWN``: not built)."""
        return self._fast.b.trans if self._fast is not None else self._transitions

    @property
    def nfa_size(self) -> int:
        """States of the NFA, which grows as deferred fragments are built (those a
        compiled walk pasted counted, their Python side made or not yet)."""
        return self._fast.num_nfa_states if self._fast is not None else len(self._nfa)

    @property
    def num_classes(self) -> int:
        return self._n_classes

    @property
    def accepting(self) -> np.ndarray:
        if self._fast is not None:
            return self._fast.accepting()
        return np.array(self._accepting, dtype=bool)

    def is_accepting(self, state: int) -> bool:
        if self._fast is not None:
            return self._fast.is_accepting(state)
        return self._accepting[state]

    def member_room(self, state: int) -> int:
        """How many characters (plain bytes or whole non-ASCII characters, whichever)
        ``state`` takes one after another and stays alive, at least: the largest
        ``NFA.rooms`` of its NFA states (0: none known). The token index reads it
        instead of building a long string's states ahead of the text."""
        if self._fast is not None:
            return self._fast.member_room(state)
        rooms = self._nfa.rooms
        return max((rooms.get(x, 0) for x in self._sets[state]), default=0) if rooms else 0

    @property
    def has_deferred(self) -> bool:
        """Whether the NFA still holds fragments built only when reached (open JSON
        values, huge counted repetitions): then the states tokens reach are not
        worth enumerating (``fsm.distance``)."""
        return bool(self._nfa.pending)

    @property
    def has_levels(self) -> bool:
        """Whether the NFA holds counted levels (``mask_twin`` may find twins)."""
        return bool(self._nfa.levelled)

    def mask_twin(self, state: int, reach: int) -> int | None:
        """A state that takes the same tokens as ``state``, built from its counted
        level's shadow (``fsm.levels.Instance``), where ``state`` holds one state of
        a level far from the bounds for texts of ``reach`` steps and otherwise what
        that state's twin in the shadow holds; else None."""
        levelled = self._nfa.levelled
        if not levelled:
            return None
        members = self._members(state)
        plain, found = [], None
        for x in members:
            got = levelled.get(x)
            if got is None:
                plain.append(x)
                continue
            here, q, n = got
            if found is not None or not here.levels.far_from_bounds(n, reach):
                return None
            found = (here, q)
        if found is None:
            return None
        here, q = found
        with self.lock:
            if here.shadow_base is None:
                self._build_pending(here.shadow_start)
            t = here.shadow_base + q
            twin = self._closure_state(t)
        return twin if sorted(self._members(twin)) == sorted(plain + [t]) else None

    def _members(self, state: int) -> list[int]:
        return self._fast.members(state).tolist() if self._fast is not None else list(self._sets[state])

    def _build_pending(self, s: int) -> None:
        """Build the deferred fragment that starts at ``s``, which no closure met."""
        if self._fast is None:
            self._materialize(s)
            return
        try:
            self._replay_pastes()
            self._take_in_pending(s)
        finally:
            self.sync_states()

    def _closure_state(self, t: int) -> int:
        """The state of NFA state ``t``'s closure, made if new."""
        if self._fast is None:
            return self._add(self._closure(t))
        return self._until_built(lambda: self._fast.closure_state(t))

    def is_expanded(self, state: int) -> bool:
        """Whether ``state``'s row is built, for a caller holding ``lock`` (rows are
        built under it; compiled walks build them too). Without the lock a row may be
        half written: ``step`` treats any ``UNKNOWN`` entry as not built yet, and
        ``next_states`` checks the whole row."""
        return self.transitions[state, 0] != UNKNOWN

    def next_states(self, state: int) -> list[int]:
        row = self.transitions[state].tolist()
        if UNKNOWN in row:  # not built, or being built (a compiled walk in another thread)
            return self._expand(state)
        return row

    def step(self, state: int, data: bytes) -> int:
        classes, trans = self._classes, self.transitions
        for b in data:
            nxt = int(trans[state, classes[b]])
            if nxt == UNKNOWN:  # the row is not built yet
                self._expand(state)
                trans = self.transitions  # (grown, maybe)
                nxt = int(trans[state, classes[b]])
            if nxt < 0:
                return -1
            state = nxt
        return state

    def matches(self, data: bytes) -> bool:
        s = self.step(0, data)
        return s >= 0 and self.is_accepting(s)

    def has_successors(self, state: int) -> bool:
        return any(t >= 0 for t in self.next_states(state))

    def ensure_rows(self, states) -> None:
        """Compute the rows of ``states`` that are not known yet."""
        missing = states[self.transitions[states, 0] == UNKNOWN]
        if len(missing):
            for s in np.unique(missing).tolist():
                if not self.is_expanded(s):
                    self._expand(s)

    def __del__(self) -> None:
        # The NFA is this automaton's alone (its deferred builders would otherwise
        # keep it alive in a reference cycle): free its states with it.
        nfa = getattr(self, "_nfa", None)
        if nfa is not None:
            nfa.release()

    def __repr__(self) -> str:
        expanded = int((self.transitions[: self.num_states, 0] != UNKNOWN).sum())
        return f"LazyDFA(states={self.num_states}, expanded={expanded}, byte_classes={self._n_classes})"

    # -- subset construction, one state at a time -----------------------------------

    def _intervals_of(self, s: int) -> list[tuple[int, int, int]]:
        """NFA state ``s``'s byte moves as ``(first class, last class, target)``."""
        got = self._moves.get(s)
        if got is None:
            classes, live = self._classes, self._live
            got = self._moves[s] = [(classes[lo], classes[hi], t) for lo, hi, t in self._nfa.edges[s] if live[t]]
        return got

    def _closure(self, s: int) -> frozenset[int]:
        got = self._closures.get(s)
        if got is None:
            nfa = self._nfa
            eps, live, pending, edges = nfa.eps, self._live, nfa.pending, nfa.edges
            if not eps[s] and s not in pending:  # most states: no epsilon move
                got = self._closures[s] = frozenset((s,)) if edges[s] or s == self._final else frozenset()
                return got
            seen = {s}
            stack = [s]
            while stack:
                x = stack.pop()
                if x in pending:
                    if self.growth_limit is not None and len(self._nfa) >= self.growth_limit:
                        raise GrowthDeferred(x)  # nothing cached yet: the state stays unexpanded
                    self._materialize(x)  # extends self._live (the same list) in place
                for t in eps[x]:
                    if t not in seen and live[t]:
                        seen.add(t)
                        stack.append(t)
            # Keep only what matters: states with byte moves, and the end state.
            edges, final = nfa.edges, self._final  # a fragment built above may have grown them
            got = self._closures[s] = frozenset([x for x in seen if edges[x] or x == final])
        return got

    def _materialize(self, s: int) -> None:
        """Build deferred fragment ``s`` and extend liveness to its new states."""
        nfa = self._nfa
        n0 = len(nfa)
        nfa.materialize(s)
        self._live.extend(_co_reachable_new(nfa, n0, self._live, self._class_starts))

    def _add(self, subset: frozenset[int]) -> int:
        j = self._ids.get(subset)
        if j is None:
            if len(self._sets) >= MAX_LAZY_DFA_STATES:
                raise RegexTooLargeError(f"automaton needs more than {MAX_LAZY_DFA_STATES} states")
            j = self._ids[subset] = len(self._sets)
            self._sets.append(subset)
            self._num_states = j + 1
            self._accepting.append(self._final in subset)
            if j >= self._transitions.shape[0]:
                grown = np.full((2 * self._transitions.shape[0], self._n_classes), UNKNOWN, dtype=np.int32)
                grown[: self._transitions.shape[0]] = self._transitions
                self._transitions = grown
        return j

    def _target(self, targets: frozenset[int]) -> int:
        """The state a set of NFA targets leads to (``sweep_row`` memoises it)."""
        if len(targets) == 1:  # most moves: the target's closure is the subset itself
            (t,) = targets
            subset = self._closure(t)
        else:
            subset = frozenset().union(*(self._closure(t) for t in targets))
        j = self._by_targets[targets] = self._add(subset)
        return j

    def _expand(self, state: int) -> list[int]:
        with self.lock:
            if self.is_expanded(state):  # another thread built it meanwhile
                return self.transitions[state].tolist()
            if self._fast is not None:
                self._fast_row(state)
                return self.transitions[state].tolist()
            row = sweep_row([self._intervals_of(s) for s in self._sets[state]], self._n_classes, self._target,
                            self._by_targets)
            self._transitions[state] = row
            return row

    def _fast_row(self, state: int) -> None:
        """``state``'s row by the compiled construction (-1: the start state),
        building the deferred fragments its closures meet."""
        fast = self._fast
        self._until_built(lambda: (None, fast.row(state)))

    def _until_built(self, attempt):
        """``attempt()`` -> ``(result, a deferred start it met or -1)`` by the compiled
        construction, repeated, building each deferred fragment it meets, until it
        meets none: its result."""
        try:
            while True:
                got, pending = attempt()
                if pending < 0:
                    return got
                self._replay_pastes()
                if self.growth_limit is not None and len(self._nfa) >= self.growth_limit:
                    raise GrowthDeferred(pending)  # the state stays unexpanded
                self._take_in_pending(pending)
        finally:  # states made before a buffer had to grow stay made
            self.sync_states()

    def _take_in_pending(self, pending: int) -> None:
        """Build the deferred fragment that starts at ``pending`` into the NFA and
        the compiled construction: a copy of a kept fragment straight from its
        arrays; else built in Python and read once, as its template's arrays where
        it was just kept (its copies come from those), or from the NFA's lists."""
        nfa, fast = self._nfa, self._fast
        n0 = len(nfa)
        build, end = nfa.pending[pending]
        pasted = nfa.paste_pending(pending)
        if pasted is not None:
            template, first, end, rooms = pasted
            fast.paste(template, first, pending, nfa.eps[pending], end, rooms)
        else:
            nfa.materialize(pending)
            made = build.template if isinstance(build, PastedOnce) else None
            if made is not None and made.first == n0 and n0 + made.n == len(nfa):
                rooms = [(n0 + i, room) for i, room in made.rooms]
                fast.paste(made, n0, pending, nfa.eps[pending], end, rooms)
            else:
                fast.add_states(nfa, n0, pending)  # (its liveness too)
        self._allow_pastes(self._pending_from(n0))
        if type(build) is PastedOnce and build.key in build.templates:
            # its template may have been just made: the starts waiting on it may be pasted
            fast.template_made(build)
            if self._waiting:
                self._allow_pastes(self._waiting.pop((id(build.templates), build.key), ()))

    def _pending_from(self, first: int) -> list[int]:
        """The deferred starts numbered from ``first`` on (the newest: last in
        ``NFA.pending``)."""
        got = []
        for s in reversed(self._nfa.pending):
            if s < first:
                break
            got.append(s)
        return got

    def _allow_pastes(self, starts, ahead: bool = True) -> None:
        """Let a compiled walk paste the fragments deferred at ``starts`` (those
        still deferred) itself, where they are copies of a template made already,
        or (``ahead``) made now as arrays (``fsm.nfa.pastable``; ``LazySubsets.
        allow_paste``); the others wait for their template."""
        pending, fast = self._nfa.pending, self._fast
        for s in starts:
            got = pending.get(s)
            if got is None:
                continue
            build, end = got
            template = pastable(build, ahead)
            if template is not None:
                fast.allow_paste(s, template, end)
            elif type(build) is PastedOnce:
                self._waiting.setdefault((id(build.templates), build.key), []).append(s)

    def compiled_builder(self):
        """The compiled construction's buffers (``fsm.subset_arrays.Buffers``),
        for a kernel that builds rows itself (``fsm.kernels.narrow``), or None."""
        fast = self._fast
        if fast is None:
            return None
        fast.limit_pastes(self.growth_limit)
        return fast.b

    def sync_states(self) -> None:
        """Take in the states the compiled construction made (``_fast_row``, or a
        compiled walk that builds rows itself: ``fsm.kernels.narrow``)."""
        self._num_states = self._fast.b.num_states

    def _replay_pastes(self) -> None:
        """Make the NFA's side of the copies compiled walks pasted since the last
        call (``NFA.paste_pending``: the states' places, the deferred holes with
        their lists), in the order pasted, so numbered alike. Done only before the
        NFA is built on in Python: the masks that paste stay free of it (~20 µs a
        copy there, several times its cost in a batch)."""
        for start, first in self._fast.pasted():
            n0 = len(self._nfa)
            got = self._nfa.paste_pending(start)
            if got is None or got[1] != first:
                raise AssertionError(f"a walk's copy at NFA state {first} is not the NFA's ({got and got[1]})")
            self._allow_pastes(self._pending_from(n0))


def _co_reachable(nfa: NFA, final: int, flat: tuple | None = None) -> list[bool]:
    """NFA states from which ``final`` can be reached (a deferred fragment counts as
    leading from its start to its end). ``flat``: ``nfa.flat()``, for a large NFA."""
    n = len(nfa)
    if flat is None:  # small: plain Python beats the numpy set-up
        back = nfa.predecessors()
        live = [False] * n
        live[final] = True
        stack = [final]
        while stack:
            for s in back[stack.pop()]:
                if not live[s]:
                    live[s] = True
                    stack.append(s)
        return live
    # Large: the NFA's arrays (a Python loop costs ~130 ms per large schema), then the
    # search compiled or in numpy.
    counts, eps, moves = flat
    if COMPILED_AVAILABLE and use_kernels(n):
        from guided.fsm.kernels.reach import live_in_nfa  # imports numba

        return live_in_nfa(counts, eps, moves, nfa.pending_moves(), final).tolist()
    states = np.arange(n)
    pending = list(nfa.pending.items())
    src = np.concatenate([np.repeat(states, counts[:, 0]), np.repeat(states, counts[:, 1]),
                          np.array([s for s, _ in pending], dtype=np.int64)])
    dst = np.concatenate([eps, moves[:, 2], np.array([e for _, (_, e) in pending], dtype=np.int64)])
    targets = np.zeros(n, dtype=bool)
    targets[final] = True
    return co_reachable(src, dst, targets).tolist()


def _co_reachable_new(nfa: NFA, n0: int, live: list[bool], class_starts: list[bool]) -> list[bool]:
    """Liveness of the states numbered from ``n0`` on (just built), given the rest.

    Also checks that their byte ranges start and end on class boundaries
    (``class_starts[b]``: byte b opens a class; 256 counts as one): byte classes are
    fixed from the fragment's declared ``cuts``, and a range cutting through a class
    would make the DFA wrong. The check rides on this pass because a pass of its own
    over every new edge costs several percent of all mask time with keys in any order
    (where every set of written keys builds its node's fragments)."""
    n = len(nfa)
    new_live = [False] * (n - n0)
    back: list[list[int]] = [[] for _ in range(n - n0)]
    stack = []
    eps, edges, pending = nfa.eps, nfa.edges, nfa.pending
    for s in range(n0, n):
        found = False
        for lo, hi, t in edges[s]:
            if not (class_starts[lo] and class_starts[hi + 1]):
                raise AssertionError(f"deferred fragment uses byte range {lo}-{hi} missing from its cuts")
            if t >= n0:
                back[t - n0].append(s)
            elif not found and live[t]:
                found = True
        for t in eps[s]:
            if t >= n0:
                back[t - n0].append(s)
            elif not found and live[t]:
                found = True
        if s in pending:
            t = pending[s][1]
            if t >= n0:
                back[t - n0].append(s)
            elif live[t]:
                found = True
        if found:
            new_live[s - n0] = True
            stack.append(s)
    while stack:
        for s in back[stack.pop() - n0]:
            if not new_live[s - n0]:
                new_live[s - n0] = True
                stack.append(s)
    return new_live
