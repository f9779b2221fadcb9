"""The Python side of the compiled subset construction (kernels: ``fsm.kernels.subsets``):
the NFA as arrays, the construction's buffers and their growth, the eager table and
``LazyDFA``'s rows one at a time. Imported only where numba is installed (it imports
the kernels, and so numba); without numba the Python twins run (``fsm.dfa.subset_table``,
``fsm.lazy.LazyDFA``'s own construction).

::

    NFA.flat() --nfa_arrays--> nf, ep, mv --Buffers (grown when a kernel says one is full)-->
        subset_table         every row at once (``build_rows``)            fsm.dfa.determinize
        LazySubsets.row      one row, deferred fragments built as met      fsm.lazy.LazyDFA

``LazySubsets`` also takes in the states a deferred fragment adds (``add_states``,
``paste``) and keeps the templates a compiled walk may paste itself (``allow_paste``,
``paste_here``'s arrays: ``Buffers.px``).
"""

from __future__ import annotations

from itertools import chain

import numpy as np

from guided.errors import RegexTooLargeError
from guided.fsm.deadline import check as check_deadline
from guided.fsm.kernels.subsets import (
    ACCEPT,
    DONE,
    EP_HI,
    EP_LO,
    FINAL,
    FULL_CL,
    FULL_DFA,
    FULL_SCRATCH,
    FULL_SUB,
    FULL_T,
    FULL_TABLE,
    FULL_TITEMS,
    GROWTH,
    LINK,
    MAX,
    MEETS_PENDING,
    MOVES,
    MV_HI,
    MV_LO,
    N_DFA,
    N_EP,
    N_MV,
    N_NFA,
    N_PASTED,
    N_T,
    NEED,
    PENDING,
    ROOM,
    SUB_HI,
    SUB_LO,
    TOO_LARGE,
    TPL,
    build_row,
    build_rows,
    member_room,
    members_or,
    paste_in,
    rehash,
    state_of,
    take_in,
)
from guided.fsm.nfa import MAX_NFA_STATES, PastedOnce, nfa_byte_classes, pastable

#: The most copies walks paste before Python follows (``LazySubsets.pasted``).
PASTE_LOG = 256
#: DFA rows ``subset_table`` builds per kernel call, between deadline checks (~10-50 ms).
ROWS_PER_CALL = 4096
#: A lazy construction's buffers start with room for this many DFA states, and
#: this many subset (closure, scratch) entries. Each growth while decoding is a
#: round trip from a walk to Python and back (~40-80 µs); with room for 64 states
#: and 1,024 entries, a third of the masks over 200 µs on MaskBench grow a buffer.
#: The room costs a fill of states x classes int32 once (~0.2 MB at 100 classes)
#: and the zeroed entries, which are mapped only as they are touched.
LAZY_STATES = 512
LAZY_ITEMS = 16_384


def subset_table(nfa, start: int, final: int, classes: np.ndarray | None, limit: int):
    """``fsm.dfa.subset_table`` compiled, for one final state: the same states, numbered
    alike, the same byte classes.

    Args:
        nfa: an ``NFA`` with no deferred fragments.
        start: the NFA state the DFA starts from.
        final: the NFA's final state.
        classes: the NFA's byte classes (``fsm.nfa.nfa_byte_classes``), or None to
            compute them from the same copy of the NFA.
        limit: the most DFA states.

    Returns:
        ``(transitions, byte classes, accepting)``: an int32 table (-1: no move; dead
        states not removed), the class of each byte, a bool per DFA state.

    Raises:
        RegexTooLargeError: the construction needs more than ``limit`` states.

    Example::

        >>> trans, classes, accepting = subset_table(nfa, start, final, None, 200_000)
    """
    counts, eps, moves = nfa.flat()
    if classes is None:
        classes = nfa_byte_classes(nfa, moves)
    n_classes = int(classes[-1]) + 1
    nf, ep, mv = nfa_arrays(counts, eps, moves, classes)
    b = Buffers(nf, ep, mv, n_classes, final, limit, -1, f"pattern needs more than {limit} DFA states")
    d = 0
    while True:
        outcome, d = build_rows(d, d + ROWS_PER_CALL, start, *b.kernel_args())
        if outcome != DONE:
            b.grow(outcome)
        elif d >= b.num_states:
            break
        check_deadline()
    n_dfa = b.num_states
    return b.trans[:n_dfa], classes, b.df[:n_dfa, ACCEPT].astype(bool)


def nfa_arrays(counts, eps, moves, classes, live=None, room: int = 0):
    """The per-state table ``nf`` and the epsilon and move arrays of ``NFA.flat``'s
    states, for the kernels (``nf`` with ``room`` rows more, for states to come).

    Args:
        counts, eps, moves: ``NFA.flat()``.
        classes: the class of each byte; moves are kept as class intervals.
        live: a bool per NFA state, or None: moves into dead states are left out
            (``LazyDFA`` works on the NFA pruned of them); a state keeps counting as
            having byte moves, as ``LazyDFA._closure`` counts it.
        room: rows of ``nf`` to leave for states to come (zeroed, untouched till used).

    Returns:
        ``(nf, ep, mv)``: ``nf`` with the columns of ``fsm.kernels.subsets``
        (``CL_LO`` ...), the epsilon targets, and ``(class lo, class hi, target)`` rows.
    """
    n = len(counts)
    if live is not None:
        own = np.arange(n)
        keep = live[eps]
        e_counts = np.bincount(np.repeat(own, counts[:, 0])[keep], minlength=n)
        eps = eps[keep]
        keep = live[moves[:, 2]]
        m_counts = np.bincount(np.repeat(own, counts[:, 1])[keep], minlength=n)
        moves = moves[keep]
    else:
        e_counts, m_counts = counts[:, 0], counts[:, 1]
    nf = np.zeros((n + room, 12), dtype=np.int64)  # (the room's pages stay untouched until used)
    nf[:n, :PENDING] = -1
    nf[:n, EP_HI] = np.cumsum(e_counts)
    nf[:n, EP_LO] = nf[:n, EP_HI] - e_counts
    nf[:n, MV_HI] = np.cumsum(m_counts)
    nf[:n, MV_LO] = nf[:n, MV_HI] - m_counts
    nf[:n, MOVES] = counts[:, 1] > 0
    mv = np.stack([classes[moves[:, 0]], classes[moves[:, 1]], moves[:, 2]], axis=1).astype(np.int64)
    return nf, eps.astype(np.int64, copy=False), mv


#: ``Buffers.builder_args``' arrays, in order.
_BUILDER_FIELDS = ("nf", "ep", "cl", "mv", "df", "sub", "table", "counts", "scratch", "cnt", "seen", "mark", "tsets",
                   "titems", "ttable")


class Buffers:
    """The construction's arrays (the NFA's, the DFA's so far, scratch), grown when a
    kernel says one is full.

    Args:
        nf, ep, mv: the NFA as arrays (``nfa_arrays``).
        n_classes: the byte classes (columns of ``trans``).
        final: the NFA's final state.
        limit: the most DFA states (past it ``grow`` raises).
        empty_row: what a row of ``trans`` holds before it is built (-1 eagerly,
            ``fsm.lazy.UNKNOWN`` lazily).
        too_large: the message of the ``RegexTooLargeError`` past ``limit``.
        size, items: the room to start with, in DFA states (a power of two: the
            hash tables, twice as long, are probed by masking) and in subset entries.

    Example::

        >>> b = Buffers(nf, ep, mv, n_classes, final, limit, -1, "too large")
        >>> outcome, d = build_rows(0, start, *b.kernel_args())
        >>> if outcome != DONE:
        ...     b.grow(outcome)           # then call build_rows again from d
    """

    def __init__(self, nf, ep, mv, n_classes: int, final: int, limit: int, empty_row: int, too_large: str,
                 size: int = 64, items: int = 1024):
        if size & (size - 1):
            raise ValueError(f"size must be a power of two, not {size}")
        self.nf, self.ep, self.mv = nf, ep, mv
        self.empty_row, self.too_large = empty_row, too_large
        self.df = np.zeros((size, 3), dtype=np.int64)
        self.trans = np.full((size, n_classes), empty_row, dtype=np.int32)
        self.table = np.full(2 * size, -1, dtype=np.int64)
        self.cl, self.sub, self.scratch, self.titems = (np.zeros(items, dtype=np.int64) for _ in range(4))
        self.tsets = np.zeros((size, 3), dtype=np.int64)
        self.ttable = np.full(2 * size, -1, dtype=np.int64)
        n = max(len(nf), 1)
        self.cnt, self.seen, self.mark = (np.zeros(n, dtype=np.int64) for _ in range(3))
        self.counts = np.zeros(14, dtype=np.int64)
        self.counts[FINAL], self.counts[MAX] = final, limit
        self.px = None  # what paste_here reads: a LazySubsets' (``_set_px``)

    @property
    def num_states(self) -> int:
        """The DFA states made so far."""
        return int(self.counts[N_DFA])

    def kernel_args(self) -> tuple:
        """``build_rows``' and ``build_row``'s arguments after the first (the state)."""
        return (self.nf, self.ep, self.cl, self.mv, self.df, self.sub, self.table, self.trans, self.counts,
                self.scratch, self.cnt, self.seen, self.mark, self.tsets, self.titems, self.ttable)

    def builder_args(self) -> tuple:
        """``kernel_args`` but ``trans``, as one tuple (``fsm.kernels.narrow`` builds
        rows with them; ``px`` is passed apart: a tuple passed to a kernel's helpers
        has each of its arrays reference-counted at each call). Kept until one of
        its arrays is replaced (``__setattr__``): a walk asks for it every round."""
        args = self._builder_args
        if args is None:
            args = self._builder_args = tuple(getattr(self, name) for name in _BUILDER_FIELDS)
        return args

    def __setattr__(self, name: str, value) -> None:
        object.__setattr__(self, name, value)
        if name in _BUILDER_FIELDS:
            object.__setattr__(self, "_builder_args", None)

    def nbytes(self) -> int:
        """The bytes of the buffers' arrays."""
        return sum(v.nbytes for v in vars(self).values() if isinstance(v, np.ndarray))

    def grow(self, outcome: int) -> None:
        """Make room for what ``outcome`` (``FULL_*``) says is missing.

        Raises:
            RegexTooLargeError: ``outcome`` is ``TOO_LARGE`` (past ``limit``).
        """
        if outcome == TOO_LARGE:
            raise RegexTooLargeError(self.too_large)
        if outcome == FULL_DFA:
            self.df = _grown(self.df, 2 * len(self.df), 0)
            self.trans = _grown(self.trans, 2 * len(self.trans), self.empty_row)
            # The hash table would be full at the next state: grown now, not after
            # one more kernel call that says so (a round trip from a walk).
            if 2 * (self.num_states + 1) <= len(self.table):
                return
            outcome = FULL_TABLE
        if outcome == FULL_TABLE:
            self.table = np.full(2 * len(self.table), -1, dtype=np.int64)
            rehash(self.df, self.sub, self.num_states, self.table)
        elif outcome == FULL_T:
            self.tsets = _grown(self.tsets, 2 * len(self.tsets), 0)
            self.ttable = np.full(2 * len(self.ttable), -1, dtype=np.int64)
            rehash(self.tsets, self.titems, int(self.counts[N_T]), self.ttable)
        else:
            need = int(self.counts[NEED])
            if outcome == FULL_SUB:
                self.sub = _grown(self.sub, max(2 * len(self.sub), need), 0)
            elif outcome == FULL_CL:
                self.cl = _grown(self.cl, max(2 * len(self.cl), need), 0)
            elif outcome == FULL_TITEMS:
                self.titems = _grown(self.titems, max(2 * len(self.titems), need), 0)
            elif outcome == FULL_SCRATCH:
                self.scratch = np.zeros(max(2 * len(self.scratch), need), dtype=np.int64)
            else:
                raise AssertionError(f"unexpected outcome {outcome}")


class LazySubsets:
    """``fsm.lazy.LazyDFA``'s subset construction, one row at a time, with the
    kernels of ``fsm.kernels.subsets``: the NFA's arrays grow as its deferred
    fragments are built.

    ``row(d)`` builds DFA state ``d``'s row into ``trans`` (``d = -1``: makes the
    start state, DFA state 0) and returns -1, or the start of a deferred fragment a
    closure met: the caller builds it (``NFA.materialize``, extending ``live``),
    calls ``add_states`` and asks again. The states are those ``LazyDFA``'s Python
    construction makes, numbered alike (tests compare the two).

    Args:
        nfa: the lazy ``NFA`` (its deferred fragments and rooms are read).
        start, final: its start and final states.
        live: per NFA state, whether it reaches the final state (or a deferred fragment).
        classes: the class of each byte; ``class_starts``: per byte 0..256, whether
            it opens a class (ranges built later must keep to them).
        flat: ``nfa.flat()``.
        limit: the most DFA states.

    Example::

        >>> fast = LazySubsets(nfa, start, final, live, classes, class_starts, nfa.flat(), limit)
        >>> fast.row(-1), fast.row(0)       # the start state, then its row
        (-1, -1)
    """

    def __init__(self, nfa, start: int, final: int, live: list[bool], classes: np.ndarray, class_starts: list[bool],
                 flat, limit: int):
        counts, eps, moves = flat
        self.start = start
        self.classes = classes.astype(np.int64)
        # Room for the states deferred fragments will add: as many again (a growth
        # copies every array while decoding, ~0.2 ms a time on 1,000 MaskBench
        # schemas, where room for an eighth more grows ~550 times). The arrays are
        # zeroed, and zeroed pages are mapped only as they are touched: the room
        # costs address space, not memory.
        # An NFA that is not lazy never grows, and its construction is mostly small
        # (a lark grammar's terminals): room for about as many DFA states as NFA states.
        room = max(4096, len(live)) if nfa.lazy else 0
        states, items = LAZY_STATES, LAZY_ITEMS
        if not nfa.lazy:
            states = min(LAZY_STATES, 1 << max(6, (len(live) - 1).bit_length()))
            items = min(LAZY_ITEMS, 16 * states)
        self.live = np.zeros(len(live) + room, dtype=bool)
        self.live[: len(live)] = live
        # byte b opens a class (256 counts as one): ranges built later must keep to them
        self.class_starts = np.array(class_starts, dtype=bool)
        nf, ep, mv = nfa_arrays(counts, eps, moves, self.classes, self.live[: len(live)], room)
        nf[list(nfa.pending), PENDING] = 1
        if nfa.rooms:
            nf[list(nfa.rooms), ROOM] = list(nfa.rooms.values())
        n_ep, n_mv = len(ep), len(mv)
        ep, mv = _grown(ep, len(ep) + 4 * room, 0), _grown(mv, len(mv) + 2 * room, 0)
        self.b = Buffers(nf, ep, mv, int(classes[-1]) + 1, final, limit, -2,
                         f"automaton needs more than {limit} states", states, items)
        counts = self.b.counts
        counts[N_NFA], counts[N_EP], counts[N_MV] = len(live), n_ep, n_mv
        # Templates a walk may paste copies of (``allow_paste``): per template its
        # entry (``_P_LO`` ...), and its states, holes and rooms in shared arrays.
        self._tpl_ids: dict[int, int] = {}
        self._tpl_kept: list = []  # (the ids above stay theirs)
        self._meta = np.zeros((4, 9), dtype=np.int64)
        self._data = np.zeros(1024, dtype=np.int64)
        self._holes = np.zeros((16, 3), dtype=np.int64)  # (start, end, its slot or -1)
        self._slot_ids: dict[tuple[int, object], int] = {}  # (id(templates), key): _slot
        self._slot_tid = np.full(16, -1, dtype=np.int64)
        self._rooms = np.zeros((16, 2), dtype=np.int64)
        self._used = [0, 0, 0]  # of _data, _holes, _rooms
        self._data_at: dict[int, list[int]] = {}  # id(packed states): their slice of _data
        # paste_here's: (deferred start, first state), till Python follows (a full
        # log stops walks' pastes: they go to Python, which follows first)
        self._log = np.zeros((PASTE_LOG, 2), dtype=np.int64)
        self._growth_limit: int | None = -1  # limit_pastes' last (-1: none yet: walks may not paste)
        self._set_px()

    def accepting(self) -> np.ndarray:
        """Whether each DFA state made so far accepts."""
        return self.b.df[: self.b.num_states, ACCEPT].astype(bool)

    def is_accepting(self, d: int) -> bool:
        """Whether DFA state ``d`` accepts."""
        return bool(self.b.df[d, ACCEPT])

    def row(self, d: int) -> int:
        """Build DFA state ``d``'s row (``d = -1``: make the start state, DFA state 0):
        -1, or the start of a deferred fragment a closure met (the caller builds it,
        calls ``add_states`` and asks again)."""
        b = self.b
        while True:
            if d < 0:
                j = state_of(self.start, b.nf, b.ep, b.cl, b.df, b.sub, b.table, b.counts, b.seen, b.mark)
                outcome = DONE if j >= 0 else -j
            else:
                outcome = build_row(d, *b.kernel_args())
            if outcome == DONE:
                return -1
            if outcome == MEETS_PENDING:
                return int(b.counts[NEED])
            b.grow(outcome)

    def closure_state(self, t: int) -> tuple[int, int]:
        """``(the DFA state of NFA state t's closure, -1)``, made if new; or ``(-1,
        the start of a deferred fragment the closure meets)``: the caller builds it,
        calls ``add_states`` and asks again (as for ``row``). Several starts may share
        one construction (a grammar rule's points)."""
        b = self.b
        while True:
            j = state_of(t, b.nf, b.ep, b.cl, b.df, b.sub, b.table, b.counts, b.seen, b.mark)
            if j >= 0:
                return j, -1
            if -j == MEETS_PENDING:
                return -1, int(b.counts[NEED])
            b.grow(-j)

    def members(self, d: int) -> np.ndarray:
        """DFA state ``d``'s NFA states."""
        b = self.b
        return b.sub[b.df[d, SUB_LO] : b.df[d, SUB_HI]]

    def members_or(self, values: np.ndarray, out: np.ndarray, first: int) -> None:
        """``members_or`` of the DFA states from ``first`` on (``out`` holds them all)."""
        b = self.b
        members_or(b.df, b.sub, values, first, b.num_states, out)

    def keep_in_closures(self, states) -> None:
        """Keep ``states`` in the closures that reach them, as states with byte moves
        and the final state are (a grammar rule's ends)."""
        self.b.nf[list(states), MOVES] = 1

    def add_states(self, nfa, first: int, built: int) -> None:
        """Take in the NFA states numbered from ``first`` on, made by building the
        deferred fragment that starts at ``built`` (which now has an epsilon move
        into them): their liveness, then their arrays, in one kernel call.

        Their lists are read into one array by one ``fromiter`` over C-level
        iterators (``take_in`` unpacks it): a fragment is ~100 states, where the
        fixed cost of each numpy call, cold between decoding steps, is what counts
        (``NFA.flat`` and a few small arrays cost ~130 µs a fragment)."""
        n = len(nfa)
        eps, edges = nfa.eps[first:], nfa.edges[first:]
        new_pending = []  # deferred fragments the build made: the newest starts
        for s in reversed(nfa.pending):
            if s < first:
                break
            new_pending.append((s, nfa.pending[s][1]))
        built_eps = nfa.eps[built]
        packed = np.fromiter(chain(map(len, eps), map(len, edges), chain.from_iterable(eps),
                                   chain.from_iterable(chain.from_iterable(edges)), built_eps,
                                   chain.from_iterable(new_pending)), dtype=np.int64)
        self._take(first, n - first, packed, len(built_eps), len(new_pending), built, nfa._rooms_from(first))

    def paste(self, template, first: int, built: int, built_eps: list[int], end: int, rooms) -> None:
        """``add_states`` for a copy of ``template`` numbered from ``first`` on that
        ``NFA.paste_pending`` made without Python lists: its states from the
        template's arrays, its end linked to ``end``, its ``rooms`` ``(state,
        room)``; ``built``'s epsilon moves are ``built_eps``. About a quarter of the
        cost of pasting lists and reading them."""
        rel, holes = template.packed()
        n = template.n
        built_eps = np.array(built_eps, dtype=np.int64)
        self._make_room(first + n, len(rel) + 1 + len(built_eps) + 2 * len(holes))
        b = self.b
        # One kernel call (``_pasted`` then ``take_in``): in the masks that paste,
        # each call from Python costs ~5-10 µs more than its work.
        got = paste_in(rel, n, first, template.end, end, built_eps, holes, built, self.classes, self.class_starts,
                       self.live, b.nf, b.ep, b.counts[N_EP], b.mv, b.counts[N_MV])
        self._took(got, first + n, rooms)

    def _take(self, first: int, n_new: int, packed: np.ndarray, n_built: int, n_pending: int, built: int,
              rooms) -> None:
        """Make room for ``n_new`` states from ``first`` on, take them in (``take_in``)
        and note their ``rooms`` (``(state, room)`` pairs)."""
        self._make_room(first + n_new, len(packed))
        b = self.b
        got = take_in(first, n_new, packed, n_built, n_pending, built, self.classes, self.class_starts, self.live,
                      b.nf, b.ep, b.counts[N_EP], b.mv, b.counts[N_MV])
        self._took(got, first + n_new, rooms)

    def _make_room(self, n: int, packed_size: int) -> None:
        """Room for NFA states up to ``n`` and for the moves of a ``take_in``
        ``packed`` of ``packed_size`` entries (at most that many of each kind)."""
        b = self.b
        if n > len(b.nf):
            size = max(n, 2 * len(b.nf))
            b.nf = _grown(b.nf, size, 0)
            self.live = _grown(self.live, size, False)
            b.cnt, b.seen, b.mark = (_grown(a, size, 0) for a in (b.cnt, b.seen, b.mark))
            self._set_px()
        n_ep, n_mv = int(b.counts[N_EP]), int(b.counts[N_MV])
        if n_ep + packed_size > len(b.ep):
            b.ep = _grown(b.ep, max(2 * len(b.ep), n_ep + packed_size), 0)
        if n_mv + packed_size // 3 > len(b.mv):
            b.mv = _grown(b.mv, max(2 * len(b.mv), n_mv + packed_size // 3), 0)

    def _took(self, got: np.ndarray, n: int, rooms) -> None:
        """After ``take_in``: its new move counts, or its error; the NFA's size
        ``n``; the ``rooms``."""
        if got[0] < 0:
            raise AssertionError(f"deferred fragment uses byte range {got[1]}-{got[2]} missing from its cuts")
        b = self.b
        b.counts[N_EP], b.counts[N_MV], b.counts[N_NFA] = got[0], got[1], n
        for s, room in rooms:
            b.nf[s, ROOM] = room

    # -- pastes made by a walk ----------------------------------------------------------

    def allow_paste(self, s: int, template, end: int) -> None:
        """Let a walk paste the copy of ``template`` that deferred start ``s`` (its
        fragment's end ``end``) is to be, itself (``paste_here``), as ``paste`` would."""
        if self.b.nf[s, TPL]:  # (a walk's copy's hole: the walk allowed it)
            return
        self.b.nf[s, TPL], self.b.nf[s, LINK] = self._template_id(template) + 1, end

    def template_made(self, build) -> None:
        """``build``'s template was just made: the holes of copies pasted from now
        on that it builds may be pasted too."""
        slot = self._slot_ids.get((id(build.templates), build.key))
        if slot is not None and self._slot_tid[slot] < 0:
            self._slot_tid[slot] = self._template_id(build.templates[build.key])

    def limit_pastes(self, growth_limit: int | None) -> None:
        """Let walks paste while the NFA has fewer than ``growth_limit`` states
        (``LazyDFA.growth_limit``; called before each round of a walk)."""
        if growth_limit != self._growth_limit:
            self._growth_limit = growth_limit
            self.b.counts[GROWTH] = MAX_NFA_STATES if growth_limit is None else growth_limit

    @property
    def num_nfa_states(self) -> int:
        """The NFA's states, those walks pasted included (``pasted``)."""
        return int(self.b.counts[N_NFA])

    def pasted(self) -> list[tuple[int, int]]:
        """The pastes walks made since the last call, in order: ``(deferred start,
        first state of the copy)``; the NFA's lists must follow (``NFA.paste_pending``)
        before it is built on."""
        counts = self.b.counts
        k = int(counts[N_PASTED])
        if not k:
            return []
        counts[N_PASTED] = 0
        return [tuple(x) for x in self._log[:k].tolist()]

    def _template_id(self, template, ahead: bool = True) -> int:
        tid = self._tpl_ids.get(id(template))
        return self._add_template(template, ahead) if tid is None else tid

    def _slot(self, build, ahead: bool) -> int:
        """The slot that holds the number of ``build``'s template once it is made
        (-1 in the slot till then; a slot of -1: never pasted by a walk). With
        ``ahead``, a template its builder makes as arrays (``PastedOnce.make``: an
        open value one level deeper, a few µs) is made now."""
        if type(build) is not PastedOnce:
            return -1
        key = (id(build.templates), build.key)
        slot = self._slot_ids.get(key)
        if slot is None:
            slot = self._slot_ids[key] = len(self._slot_ids)
            if slot == len(self._slot_tid):
                self._slot_tid = np.concatenate([self._slot_tid, np.full(slot, -1, dtype=np.int64)])
                self._set_px()
        if self._slot_tid[slot] < 0:
            made = pastable(build, ahead)
            if made is not None:
                self._slot_tid[slot] = self._template_id(made, False)
        return slot

    def _add_template(self, template, ahead: bool) -> int:
        """Enter ``template`` for ``paste_here``, and the slots of its holes'
        templates (a copy's holes may be pasted in the same walk; with ``ahead``,
        those made as arrays are made now, one level down); its number."""
        tid = len(self._tpl_kept)
        self._tpl_ids[id(template)] = tid
        self._tpl_kept.append(template)
        if tid == len(self._meta):
            self._meta = _grown(self._meta, 2 * tid, 0)
        rel, holes = template.packed()
        rooms = np.array(template.rooms, dtype=np.int64).reshape(-1, 2)
        slots = [self._slot(build, ahead) for _, _, build in template.holes]
        holes = np.concatenate([holes, np.array(slots, dtype=np.int64).reshape(-1, 1)], axis=1)
        entry = []
        for i, (part, name) in enumerate(((rel, "_data"), (holes, "_holes"), (rooms, "_rooms"))):
            if i == 0 and id(rel) in self._data_at:  # (open values' levels share their states)
                entry += self._data_at[id(rel)]
                continue
            lo = self._used[i]
            hi = self._used[i] = lo + len(part)
            kept = getattr(self, name)
            if hi > len(kept):
                kept = _grown(kept, max(hi, 2 * len(kept)), 0)
                setattr(self, name, kept)
            kept[lo:hi] = part
            entry += [lo, hi]
            if i == 0:
                self._data_at[id(rel)] = [lo, hi]
        self._meta[tid] = entry + [template.n, template.start, template.end]
        self._set_px()
        return tid

    def _set_px(self) -> None:
        """``Buffers.px``, after one of its arrays was replaced."""
        self.b.px = (self._meta, self._data, self._holes, self._rooms, self._slot_tid, self.live, self.classes,
                     self.class_starts, self._log)

    def member_room(self, d: int) -> int:
        """The largest ``NFA.rooms`` among DFA state ``d``'s NFA states (0: none)."""
        b = self.b
        return int(member_room(d, b.nf, b.df, b.sub))


def _grown(a: np.ndarray, size: int, fill: int) -> np.ndarray:
    """``a`` with room for ``size`` rows (the new ones ``fill``)."""
    if size <= len(a):
        return a
    if fill == 0:  # zeroed pages are mapped as they are touched
        grown = np.zeros((size, *a.shape[1:]), dtype=a.dtype)
    else:  # each element written once (np.full, then the copy, would write the old part twice)
        grown = np.empty((size, *a.shape[1:]), dtype=a.dtype)
        grown[len(a) :] = fill
    grown[: len(a)] = a
    return grown
