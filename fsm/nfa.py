"""A byte-level Thompson NFA, the intermediate form between a regex and its DFA.

States are integers; each has epsilon moves and byte-range moves ``(lo, hi, target)``.
Builders return fragments ``(start, end)`` that are glued together by the regex
compiler; nothing here knows about regex syntax.
"""

from __future__ import annotations

import functools
import itertools
import sys
from itertools import chain, repeat
from operator import is_not, itemgetter

import numpy as np

from guided.errors import RegexTooLargeError

from . import footprint
from .deadline import check as check_deadline
from .kernels import AVAILABLE as COMPILED_AVAILABLE
from .kernels import use as use_kernels
from .kernels import MAX_NFA_STATES  # (defined with the kernels: ``paste_here`` compiles it in)
from .utf8 import utf8_sequences

#: A lazy NFA may grow to this many states while decoding builds its deferred
#: fragments (a schema with thousands of open values reaches a few hundred thousand).
MAX_GROWN_NFA_STATES = 1_500_000


@functools.lru_cache(maxsize=4096)
def charset_automaton(ranges: tuple) -> tuple[int, list[tuple[int, int, int, int]]]:
    """The minimal acyclic DFA of a code point set's UTF-8 encodings.

    Returns ``(n_states, edges)``; state 0 is the start and ``n_states - 1`` the only
    final state. Built as a trie of byte-range sequences, then equal suffixes are
    merged bottom-up. ``\\d`` alone is 62 ranges whose trie has ~100 nodes but whose
    minimal DFA has 23; copying the small one keeps subset construction from
    re-discovering the same suffixes in every repetition.
    """
    children: list[dict[tuple[int, int], int]] = [{}]
    final = -1
    for seq in utf8_sequences(list(ranges)):
        node = 0
        for i, (lo, hi) in enumerate(seq):
            if i == len(seq) - 1:
                children[node][(lo, hi)] = final
            else:
                nxt = children[node].get((lo, hi))
                if nxt is None:
                    nxt = children[node][(lo, hi)] = len(children)
                    children.append({})
                node = nxt
    # Canonical id per node, children first (trie nodes are numbered parent-first).
    canon: dict[int, int] = {final: 0}
    ids: dict[tuple, int] = {}
    for node in range(len(children) - 1, -1, -1):
        sig = []
        for (lo, hi), child in sorted(children[node].items()):
            c = canon[child]
            if sig and sig[-1][2] == c and sig[-1][1] + 1 == lo:
                sig[-1] = (sig[-1][0], hi, c)  # adjacent ranges to the same place
            else:
                sig.append((lo, hi, c))
        canon[node] = ids.setdefault(tuple(sig), len(ids) + 1)
    # Renumber: root 0, final last.
    n = len(ids) + 1
    order = {canon[0]: 0}
    for cid in ids.values():
        order.setdefault(cid, len(order))
    order[0] = n - 1
    edges = [(order[cid], lo, hi, order[c]) for sig, cid in ids.items() for lo, hi, c in sig]
    return n, edges


#: On a lazy NFA, counted repetitions with more copies than this are built as reached
#: (past the first copy) ...
LAZY_REPEAT_ABOVE = 64
#: ... and so are those whose further copies would add more states than this (an array
#: of up to 20 large objects).
LAZY_REPEAT_STATES = 4096
#: Most copies built per deferred step of a lazy repetition (fewer for large items).
LAZY_REPEAT_CHUNK = 16
#: ``NFA.rooms`` of the copies of an unbounded repetition: more than any cap.
UNBOUNDED_ROOM = 1 << 30

_WORD = (1 << 64) - 1  # one 64-bit word of a bit set (``reach_bits`` compiled)


@footprint.self_measured
class Template:
    """A fragment's states as built (``NFA.template``), to copy with ``NFA.paste``;
    or made as arrays by a compiled builder (``Template.of_packed``), whose lists
    are made only if a copy needs them.

    Args:
        eps, edges: the states' epsilon moves and byte moves ``(lo, hi, target)``,
            targets counted from ``first``.
        first: the number of the fragment's first state where it was built.
        start, end: the fragment's start and end, counted from ``first``.
        rooms: ``(state, room)`` pairs (``NFA.rooms``), counted from ``first``.
        holes: the deferred fragments inside it, ``(start, end, build)``.

    Example::

        >>> first = len(nfa); s, e = nfa.byte_string(b"ab")
        >>> template = nfa.template(first, s, e)
        >>> s2, e2 = nfa.paste(template)      # a fresh copy"""

    __slots__ = ("_eps", "_edges", "first", "n", "start", "end", "rooms", "holes", "_packed", "_hole_moves")

    def __init__(self, eps, edges, first: int, start: int, end: int, rooms=(), holes=()):
        self._eps, self._edges, self.first, self.start, self.end = eps, edges, first, start, end
        self.n = len(eps)
        self.rooms = rooms  # (state - first, room) for ``NFA.rooms``
        self.holes = holes  # (start - first, end - first, build) of deferred fragments
        self._packed = None
        self._hole_moves = None

    def footprint_parts(self) -> tuple[int, list, tuple]:
        """Its size for ``fsm.footprint``: the per-state lists sized in bulk, as
        ``NFA.footprint_parts`` sizes them; the rest walked. Returns ``(bytes, to
        walk, covered)``."""
        walk = [self.rooms, self.holes, self._packed, self._hole_moves]
        for lists, item_bytes in ((self._eps, _INT_BYTES), (self._edges, _MOVE_BYTES)):
            if lists is not None:  # (shared by ``with_holes`` copies: counted once)
                walk.append(footprint.Bulk(lists, _state_lists_nbytes(lists, lists, item_bytes)))
        return sys.getsizeof(self), walk, ()

    @classmethod
    def of_packed(cls, packed: np.ndarray, n: int, start: int, end: int, rooms=(), holes=()) -> "Template":
        """A template of ``n`` states given in ``packed``'s layout (see ``packed``),
        with its ``rooms`` and ``holes`` (as the constructor takes them)."""
        template = cls([], [], 0, start, end, rooms, holes)
        template.n, template._eps, template._edges = n, None, None
        template._packed = (packed, _holes_array(holes))
        return template

    @property
    def eps(self) -> list[list[int]]:
        if self._eps is None:
            self._unpack()
        return self._eps

    @property
    def edges(self) -> list[list[tuple[int, int, int]]]:
        if self._edges is None:
            self._unpack()
        return self._edges

    def moves_of(self, i: int) -> tuple[list[int], list[tuple[int, int, int]]]:
        """``(eps[i], edges[i])`` without turning every state of a template made as
        arrays into lists: ``NFA.paste_pending`` needs only its holes' starts, and
        unpacking a long string's chunk (600 states) costs ~200 µs in its mask."""
        if self._eps is not None:
            return self._eps[i], self._edges[i]
        packed, n = self._packed[0], self.n
        at_eps = 2 * n + int(packed[:i].sum())
        at_moves = 2 * n + int(packed[:n].sum()) + 3 * int(packed[n : n + i].sum())
        eps = packed[at_eps : at_eps + packed[i]].tolist()
        flat = packed[at_moves : at_moves + 3 * packed[n + i]].tolist()
        return eps, list(zip(flat[::3], flat[1::3], flat[2::3]))

    def hole_moves(self) -> list[tuple[list[int], list[tuple[int, int, int]]]]:
        """``moves_of`` each hole's start, made once: every copy ``NFA.paste_pending``
        makes needs them (~5 µs a hole to read from the arrays each time, in the
        masks that paste)."""
        if self._hole_moves is None:
            self._hole_moves = [self.moves_of(i) for i, _, _ in self.holes]
        return self._hole_moves

    def _unpack(self) -> None:
        flat, n = self._packed[0].tolist(), self.n
        at = 2 * n
        self._eps = []
        for c in flat[:n]:
            self._eps.append(flat[at : at + c])
            at += c
        self._edges = []
        for c in flat[n : 2 * n]:
            self._edges.append(list(zip(flat[at : at + 3 * c : 3], flat[at + 1 : at + 3 * c : 3],
                                        flat[at + 2 : at + 3 * c : 3])))
            at += 3 * c

    def with_holes(self, build) -> "Template":
        """This template with every hole built by ``build`` (states and arrays
        shared, not copied)."""
        other = Template.__new__(Template)
        for name in Template.__slots__:
            setattr(other, name, getattr(self, name))
        other.holes = tuple((i, j, build) for i, j, _ in self.holes)
        return other

    def packed(self) -> tuple[np.ndarray, np.ndarray]:
        """The states as arrays, made once: per state its epsilon-move count, then
        its byte-move count, then the epsilon targets and the byte moves ``(lo, hi,
        target)``, targets counted from the fragment's first state (the layout of
        ``LazySubsets.add_states``); and the holes' ``(start, end)``, likewise."""
        if self._packed is None:
            n, eps, edges = self.n, self._eps, self._edges
            packed = np.fromiter(chain(map(len, eps), map(len, edges), chain.from_iterable(eps),
                                       chain.from_iterable(chain.from_iterable(edges))), dtype=np.int64)
            n_e = int(packed[:n].sum())
            packed[2 * n : 2 * n + n_e] -= self.first
            packed[2 * n + n_e + 2 :: 3] -= self.first
            self._packed = (packed, _holes_array(self.holes))
        return self._packed


_NO_HOLES = np.zeros((0, 2), dtype=np.int64)  # (writeable: numba types read-only arrays apart)


def _holes_array(holes) -> np.ndarray:
    """Holes' ``(start, end)`` as int64 [k, 2]; one shared array for none (most
    templates, made in the masks that first reach them)."""
    if not holes:
        return _NO_HOLES
    return np.array([(i, j) for i, j, _ in holes], dtype=np.int64)


class _InArrays:
    """The moves of a state that ``NFA.paste_pending`` pasted straight into a
    compiled construction's arrays: it has no Python lists, and reading them is a
    mistake that must not pass for "no moves"."""

    __slots__ = ()

    def _refuse(self, *args):
        raise RuntimeError("this NFA state was pasted into a compiled construction's arrays only: "
                           "its moves have no Python lists")

    __iter__ = __len__ = __getitem__ = append = _refuse


#: The lists of every state pasted by ``NFA.paste_pending`` (one shared object).
IN_ARRAYS = _InArrays()


class PastedOnce:
    """A deferred fragment's builder that builds ``build()`` once per ``templates``
    and ``key`` and pastes copies after that (``NFA.built_once``; made by
    ``NFA.deferred_once``). Once its template exists, a compiled construction may
    take a copy in from the template's arrays (``NFA.paste_pending``).

    Args:
        nfa: the lazy ``NFA`` it builds into.
        templates: the templates kept, by key (shared by the builders of one NFA).
        key: this fragment's key in ``templates``.
        build: builds the fragment into ``nfa``: ``build() -> (start, end)``.
        holes: whether the fragment may hold deferred fragments of its own.
        make: makes the template as arrays, without building (or None).

    Example::

        >>> s, e = nfa.deferred_once(nfa.templates, "value", lambda: nfa.byte_string(b"null"), cuts)"""

    __slots__ = ("nfa", "templates", "key", "build", "holes", "make")

    def __init__(self, nfa: "NFA", templates: dict, key, build, holes: bool, make=None):
        self.nfa, self.templates, self.key, self.build, self.holes = nfa, templates, key, build, holes
        self.make = make

    def __call__(self) -> tuple[int, int]:
        return self.nfa.built_once(self.templates, self.key, self.build, self.holes)

    @property
    def template(self) -> "Template | None":
        """The template kept, or else the one ``make()`` makes as arrays (kept
        from then on; None where it cannot)."""
        got = self.templates.get(self.key)
        if got is None and self.make is not None:
            got = self.make()
            if got is not None:
                self.templates[self.key] = got
            else:  # it cannot: built in Python, from now on
                self.make = None
        return got

    def extras(self, base: int, template: "Template") -> tuple[list, list]:
        """The ``NFA.rooms`` and deferred fragments ``(start, end, build)`` of the
        copy of ``template`` at ``base`` (as ``NFA.paste`` gives them)."""
        return ([(base + i, room) for i, room in template.rooms],
                [(base + i, base + j, build) for i, j, build in template.holes])


def pastable(build, ahead: bool = False) -> "Template | None":
    """The template a compiled walk may paste a copy of for a fragment deferred
    with ``build`` (``fsm.subset_arrays.LazySubsets.allow_paste``), where it is
    made already, or (``ahead``) its builder makes it as arrays now (``PastedOnce.
    make``: an open value from the process's shape, a few µs); else None. Not a
    ``ChunkCopy``'s: its copies' rooms differ."""
    if type(build) is not PastedOnce:
        return None
    made = build.templates.get(build.key)
    if made is None and ahead and build.make is not None:
        made = build.make()  # (where it cannot yet, it stays free to later, unlike PastedOnce.template)
        if made is not None:
            build.templates[build.key] = made
    return made


class ChunkCopy(PastedOnce):
    """The builder of a middle chunk of a lazy repetition (``NFA._lazy_repeat``:
    copies ``done`` on, each optional, the next chunk deferred). Every middle
    chunk has the states of the first one built but for its copies' rooms and the
    next chunk's builder: the first is built and kept (``templates``), and a
    compiled construction takes the others from its arrays (``NFA.paste_pending``).
    Built as lists, a chunk is always built (``rest``): a list copy would share
    the first chunk's next builder.

    Args:
        nfa, templates, make: as for ``PastedOnce``.
        done: the copies before this chunk; ``chunk``: the copies in it.
        rest: builds the chunk as lists: ``rest(done) -> (start, end)``.
        next_build: the builder of the chunk after it."""

    __slots__ = ("done", "chunk", "rest", "next_build")

    def __init__(self, nfa: "NFA", templates: dict, done: int, chunk: int, rest, next_build, make=None):
        super().__init__(nfa, templates, "chunk", None, True, make)
        self.done, self.chunk, self.rest, self.next_build = done, chunk, rest, next_build

    def __call__(self) -> tuple[int, int]:
        nfa = self.nfa
        first = len(nfa)
        s, e = self.rest(self.done)
        if "chunk" not in self.templates:
            template = nfa.template(first, s, e, holes=True)
            # only the next chunk deferred (items with deferred parts of their own
            # would share their builders between copies)
            if template is not None and len(template.holes) == 1:
                self.templates["chunk"] = (template, self.done)
        return s, e

    @property
    def template(self) -> "Template | None":
        """The first middle chunk kept, or else made as arrays (``_chunk_template``)."""
        got = self.templates.get("chunk")
        if got is None and self.make is not None:
            made = self.make()
            if made is not None:
                got = self.templates["chunk"] = (made, self.done)
            else:
                self.make = None
        return got[0] if got is not None else None

    def extras(self, base: int, template: "Template") -> tuple[list, list]:
        shift = self.done - self.templates["chunk"][1]  # copies later by this much: rooms less
        rooms = [(base + i, room if room == UNBOUNDED_ROOM else room - shift) for i, room in template.rooms]
        ((i, j, _),) = template.holes
        return rooms, [(base + i, base + j, self.next_build(self.done + self.chunk))]


#: ``NFA.footprint_parts``: the bytes of a state number (an int past the cached
#: small ones), and of a byte move (its 3-tuple and target).
_INT_BYTES = sys.getsizeof(1 << 20)
_MOVE_BYTES = sys.getsizeof((0, 0, 0)) + _INT_BYTES


def _state_lists_nbytes(lists: list, own: list, item_bytes: int) -> int:
    """The bytes of a list of per-state lists (``own``: those of them that are lists)
    with their items, each ``item_bytes``: an int, or a move tuple with its target."""
    return sys.getsizeof(lists) + footprint.lists_nbytes(own) + item_bytes * sum(map(len, own))


@footprint.self_measured
class NFA:
    """Byte-level Thompson NFA.

    ``NFA(lazy=True)`` is for automata determinised by ``LazyDFA``: it may hold
    *deferred* fragments (``deferred``), built only when the subset construction first
    reaches them. That is what lets unbounded nesting (open JSON values) and very large
    counted repetitions (``x{0,65535}``) cost only what decoding actually visits.

    Args:
        lazy: whether it may hold deferred fragments (only ``LazyDFA`` determinises
            such an NFA).

    Raises:
        RegexTooLargeError: (from the builders) the NFA would pass ``MAX_NFA_STATES``.

    Example::

        >>> nfa = NFA(); s, e = nfa.concat([nfa.byte_string(b"a"), nfa.byte_string(b"b")])
        >>> len(nfa)
        5
    """

    def __init__(self, lazy: bool = False) -> None:
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []
        self.lazy = lazy
        #: deferred start state -> (build() -> fragment, the end state it links to)
        self.pending: dict[int, tuple] = {}
        #: byte-class boundaries that deferred fragments will need (see ``deferred``)
        self.cuts: set[int] = set()
        #: set once a deferred fragment has been built: the NFA now grows with decoding
        self.pending_built = False
        #: fragments a builder keeps to ``paste`` again, under a key of its choosing
        self.templates: dict = {}
        #: state -> how many characters (plain bytes or whole non-ASCII characters,
        #: whichever) it takes one after another and stays alive, at least: the copies
        #: of a counted string (``repeat(..., any_char=True)``), numbered as made, and
        #: the unanchored ends of a pattern's search (``fsm.ops.free_states``). The
        #: token index reads it so that it need not build a long string's states
        #: ahead of the text to learn that every token fits.
        self.rooms: dict[int, int] = {}
        #: state -> ``(levels.Instance, DFA state, level)`` for the states of counted
        #: levels (``fsm.levels``): far from the bounds they take the tokens of their
        #: instance's shadow (``LazyDFA.mask_twin``)
        self.levelled: dict[int, tuple] = {}
        #: the marks of ``truncate`` calls, in order (a builder that keeps state
        #: numbers checks that they were not dropped)
        self.truncations: list[int] = []

    def __len__(self) -> int:
        return len(self.eps)

    def footprint_parts(self) -> tuple[int, list, tuple]:
        """Its size for ``fsm.footprint``: the per-state lists (most of a large
        NFA's objects) sized in bulk, each list by its own size plus its items,
        what else it holds walked. Returns ``(bytes, to walk, covered)``."""
        size = sys.getsizeof(self) + sys.getsizeof(self.__dict__)
        for lists, item_bytes in ((self.eps, _INT_BYTES), (self.edges, _MOVE_BYTES)):
            try:
                size += _state_lists_nbytes(lists, lists, item_bytes)
            except TypeError:  # states pasted into arrays (IN_ARRAYS) have no lists
                size += _state_lists_nbytes(lists, list(filter(functools.partial(is_not, IN_ARRAYS), lists)),
                                            item_bytes)
        rest = [v for k, v in vars(self).items() if k not in ("eps", "edges")]
        return size, rest, (self.eps, self.edges)

    def state(self) -> int:
        base = len(self.eps)
        if base >= MAX_NFA_STATES:
            self._check_size(1)
        self.eps.append([])
        self.edges.append([])
        return base

    def add_states(self, n: int, edges: list | None = None) -> int:
        """``n`` new states, with ``edges`` (a list per state) if given; returns the
        first one's number."""
        base = len(self.eps)
        if base + n > MAX_NFA_STATES:
            self._check_size(n)
        check_deadline()
        self.eps.extend([] for _ in range(n))
        self.edges.extend(edges if edges is not None else ([] for _ in range(n)))
        return base

    def _check_size(self, n: int) -> None:
        if self.pending_built:
            if len(self.eps) + n > MAX_GROWN_NFA_STATES:
                raise RegexTooLargeError(
                    f"the automaton grew past {MAX_GROWN_NFA_STATES} states while decoding: the parts "
                    "built as the text reached them (long counted repetitions, objects with many "
                    "keys in any order) outgrew the limit"
                )
        elif len(self.eps) + n > MAX_NFA_STATES:
            raise RegexTooLargeError(
                f"pattern expands to more than {MAX_NFA_STATES} automaton states "
                "(large counted repetitions multiply the pattern)"
            )

    def predecessors(self) -> list[list[int]]:
        """Per state, the states with an epsilon or byte move into it (a deferred
        fragment counts as a move from its start to its end)."""
        back: list[list[int]] = [[] for _ in range(len(self.eps))]
        for s, (targets, moves) in enumerate(zip(self.eps, self.edges)):
            for t in targets:
                back[t].append(s)
            for move in moves:
                back[move[2]].append(s)
        for s, (_, e) in self.pending.items():
            back[e].append(s)
        return back

    def flat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The NFA in arrays: per state ``(epsilon moves, byte moves)`` counted, the
        epsilon targets one state after another, the byte moves ``(lo, hi, target)``
        likewise. C-level iteration over the lists (a Python loop costs several
        times more), one pass over each."""
        n = len(self.eps)
        counts = np.empty((n, 2), dtype=np.int64)
        counts[:, 0] = np.fromiter(map(len, self.eps), dtype=np.int64, count=n)
        counts[:, 1] = np.fromiter(map(len, self.edges), dtype=np.int64, count=n)
        eps = np.fromiter(chain.from_iterable(self.eps), dtype=np.int64, count=int(counts[:, 0].sum()))
        moves = np.fromiter(chain.from_iterable(chain.from_iterable(self.edges)), dtype=np.int64,
                            count=3 * int(counts[:, 1].sum())).reshape(-1, 3)
        return counts, eps, moves

    def pending_moves(self) -> np.ndarray:
        """``[start, end]`` of each deferred fragment, as ``[k, 2]`` integers: the
        move ``flat`` leaves out (searches count a fragment as leading to its end)."""
        return np.array([(s, e) for s, (_, e) in self.pending.items()], dtype=np.int64).reshape(-1, 2)

    def successors(self, first: int = 0) -> list[list[int]]:
        """Per state from ``first`` on, the states an epsilon or byte move leads to
        (a deferred fragment counts as a move from its start to its end)."""
        out = [[*ts, *[m[2] for m in ms]] if ms else list(ts) for ts, ms in zip(self.eps[first:], self.edges[first:])]
        for s, (_, e) in self.pending.items():
            if s >= first:
                out[s - first].append(e)
        return out

    def reach_bits(self, seeds: dict[int, int], known: list[int] | None = None, flat: tuple | None = None,
                   compiled: bool | None = None) -> list[int]:
        """Per state, the OR of the ``seeds`` bits (state -> int bit set) of every
        state it reaches by moves (itself included). With ``known``, the bits of the
        states numbered below ``len(known)`` (final, e.g. before a deferred fragment
        was built), ``known`` is extended in place to the newer states. Without it,
        the search runs compiled where numba is installed (``fsm.kernels.reach``;
        ``flat``: ``self.flat()`` where the caller has it), unless ``compiled=False``.

        One pass of Tarjan's strongly connected components: a component is finished
        only after every component it reaches, so its bits are the OR of its members'
        seeds and of its successors' finished bits. Each state and move is visited
        once; the worklist propagation this replaces re-pushed a state each time its
        set grew (~10 times a state on 84k-state recursive-schema rules, 0.4 s)."""
        if known is None and ((COMPILED_AVAILABLE and use_kernels(len(self.eps))) if compiled is None else compiled):
            return self._reach_bits_compiled(seeds, flat if flat is not None else self.flat())
        bits = known if known is not None else []
        first, n = len(bits), len(self.eps)
        # The per-state lists cover only the states from ``first`` on (``v - first``):
        # an older state is finished, and lists over the whole NFA would make each
        # fragment built in a large rule cost ~1 ms however small it is.
        succ = self.successors(first)
        finished = n  # the index of a state whose component is done: above any low
        index, low = [-1] * (n - first), [0] * (n - first)
        bits.extend([0] * (n - first))
        for s, b in seeds.items():
            if s >= first:
                bits[s] |= b
        stack: list[int] = []
        counter = 0
        for root in range(first, n):
            if index[root - first] >= 0:
                continue
            index[root - first] = low[root - first] = counter
            counter += 1
            stack.append(root)
            work = [(root, iter(succ[root - first]))]
            while work:
                v, moves = work[-1]
                for w in moves:
                    if w < first:
                        continue  # finished, its bits known
                    if index[w - first] < 0:
                        index[w - first] = low[w - first] = counter
                        counter += 1
                        stack.append(w)
                        work.append((w, iter(succ[w - first])))
                        break
                    if index[w - first] < low[v - first]:
                        low[v - first] = index[w - first]
                else:
                    work.pop()
                    if work and low[v - first] < low[work[-1][0] - first]:
                        low[work[-1][0] - first] = low[v - first]
                    if low[v - first] == index[v - first]:
                        # v roots a component: the states above it on the stack.
                        i, b = len(stack), 0
                        while True:
                            i -= 1
                            w = stack[i]
                            b |= bits[w]
                            for x in succ[w - first]:
                                b |= bits[x]
                            if w == v:
                                break
                        for w in stack[i:]:
                            bits[w] = b
                            index[w - first] = finished
                        del stack[i:]
        return bits

    def _reach_bits_compiled(self, seeds: dict[int, int], flat: tuple) -> list[int]:
        """``reach_bits`` by ``fsm.kernels.reach``: the bit sets as rows of 64-bit words."""
        from guided.fsm.kernels.reach import reach_bits  # imports numba

        words = max(1, (max(seeds.values(), default=0).bit_length() + 63) // 64)
        bits = np.zeros((len(self.eps), words), dtype=np.uint64)
        for s, b in seeds.items():
            for k in range(words):
                bits[s, k] = (b >> (64 * k)) & _WORD
        bits = reach_bits(*flat, self.pending_moves(), bits)
        out = bits[:, 0].tolist()
        for k in range(1, words):
            out = [b | w << (64 * k) if w else b for b, w in zip(out, bits[:, k].tolist())]
        return out

    def _rooms_from(self, first: int) -> list[tuple[int, int]]:
        """The ``rooms`` of the states numbered from ``first`` on, newest first. A
        room is noted once its copy is made, so the rooms of the states made since
        ``first`` (a fragment being built) were all noted after every older one:
        the search from the newest stops at the first older state."""
        out = []
        for s in reversed(self.rooms):
            if s < first:
                break
            out.append((s, self.rooms[s]))
        return out

    def template(self, first: int, start: int, end: int, holes: bool = False) -> "Template | None":
        """The fragment ``(start, end)`` that was just built as the states numbered
        from ``first`` on, kept for ``paste``: a copy of their moves as they are now
        (a caller links the end onward afterwards). None when it cannot be copied: it
        moves to a state outside it, or it holds a deferred fragment and ``holes`` is
        false. With ``holes``, each copy gets deferred fragments of its own with the
        same builders: the caller vouches that those builders make a fresh fragment
        at every call, whichever copy they serve (no count or state shared between
        calls, as ``repeat``'s rooms and lazy chunks have)."""
        n = len(self.eps)
        kept = []
        # Deferred starts are new states when added (and pasted in order), so the
        # pending fragments are in state order: the search from the newest stops at
        # the first older one.
        for s in reversed(self.pending):
            if s < first:
                break
            if not holes:
                return None
            build, e = self.pending[s]
            kept.append((s - first, e - first, build))
        eps = [t[:] for t in self.eps[first:]]
        edges = [m[:] for m in self.edges[first:]]
        for targets in (list(chain.from_iterable(eps)), [m[2] for ms in edges for m in ms]):
            if targets and (min(targets) < first or max(targets) >= n):
                return None
        rooms = [(s - first, r) for s, r in reversed(self._rooms_from(first))]
        return Template(eps, edges, first, start - first, end - first, rooms, kept[::-1])

    def built_once(self, templates: dict, key, build, holes: bool = False) -> tuple[int, int]:
        """``build()``'s fragment, pasted from ``templates[key]`` when an earlier call
        kept it there (copying is several times cheaper than building again), else
        built now and kept where it can be (``template``; ``holes`` as there).
        ``templates``: the caller's cache (per compile, or this NFA's ``templates``)."""
        template = templates.get(key)
        if template is not None:
            return self.paste(template)
        first = len(self.eps)
        s, e = build()
        template = self.template(first, s, e, holes)
        if template is not None:
            templates[key] = template
        return s, e

    def paste(self, template: "Template") -> tuple[int, int]:
        """A fresh copy of a ``template`` fragment: ``(start, end)``."""
        shift = len(self.eps) - template.first
        base = self.add_states(template.n, [[(lo, hi, t + shift) for lo, hi, t in moves]
                                                   for moves in template.edges])
        eps = self.eps
        for i, targets in enumerate(template.eps):
            if targets:
                eps[base + i] = [t + shift for t in targets]
        for i, room in template.rooms:
            self.rooms[base + i] = room
        for i, j, build in template.holes:
            self.pending[base + i] = (build, base + j)
        return base + template.start, base + template.end

    def paste_pending(self, s: int):
        """Build the deferred fragment that starts at ``s`` as a copy of its kept
        template (its builder a ``PastedOnce`` whose template exists), without
        Python lists: the new states' lists are ``IN_ARRAYS`` but those of the
        holes' starts (their builds link there), and the fragment's end is not
        linked onward here. For a compiled construction, which takes the copy in
        from ``Template.packed`` (``LazySubsets.paste``) with that link.

        Returns ``(template, first new state, the end to link to, the copy's rooms
        as (state, room))``, or None (the builder cannot paste yet: ``materialize``
        it)."""
        build, e = self.pending[s]
        template = build.template if isinstance(build, PastedOnce) else None
        if template is None:
            return None
        n = template.n
        base = len(self.eps)
        if base + n > MAX_NFA_STATES:
            self._check_size(n)
        del self.pending[s]
        self.pending_built = True
        self.eps.extend(repeat(IN_ARRAYS, n))
        self.edges.extend(repeat(IN_ARRAYS, n))
        rooms, holes = build.extras(base, template)
        for state, room in rooms:
            self.rooms[state] = room
        shift = base - template.first
        for (start, end, hole), (eps, edges) in zip(holes, template.hole_moves()):
            self.pending[start] = (hole, end)
            self.eps[start] = [t + shift for t in eps]
            self.edges[start] = [(lo, hi, t + shift) for lo, hi, t in edges]
        self.eps[s].append(base + template.start)
        return template, base, e, rooms

    def epsilon(self, a: int, b: int) -> None:
        self.eps[a].append(b)

    def edge(self, a: int, lo: int, hi: int, b: int) -> None:
        self.edges[a].append((lo, hi, b))

    # -- deferred fragments (lazy NFAs only) -------------------------------------

    def deferred(self, build, cuts) -> tuple[int, int]:
        """A fragment ``build()`` added only when an automaton first reaches it.

        Byte classes are fixed before deferred fragments exist, so ``cuts`` must hold
        every boundary (``lo`` and ``hi + 1``) of the byte ranges ``build`` will use
        (``edge_cuts`` of a sample copy), but those of ranges the NFA already has.
        The automaton counts the fragment as able to reach its end before building
        it, so every state ``build`` makes must be.
        """
        if not self.lazy:
            raise ValueError("deferred fragments need NFA(lazy=True) and a LazyDFA")
        s, e = self.state(), self.state()
        self.pending[s] = (build, e)
        self.cuts.update(cuts)
        return s, e

    def deferred_once(self, templates: dict, key, build, cuts, holes: bool = False, make=None) -> tuple[int, int]:
        """``deferred`` of ``built_once(templates, key, build, holes)``: built at
        its first use, pasted at the others (straight into a compiled construction's
        arrays: ``paste_pending``). ``make``: a compiled builder of the same states
        as a ``Template.of_packed`` (or None), which ``paste_pending`` uses for the
        first copy too."""
        return self.deferred(PastedOnce(self, templates, key, build, holes, make), cuts)

    def deferrable(self, first_state: int) -> bool:
        """Whether copies of the fragment just built as the states numbered from
        ``first_state`` on may be deferred (subclasses with moves that are not plain
        NFA moves, such as a grammar's calls, say no for fragments holding them)."""
        return True

    def truncate(self, mark: int) -> None:
        """Drop the states numbered from ``mark`` on: a fragment that was abandoned
        while being built (nothing older may point into it)."""
        del self.eps[mark:], self.edges[mark:]
        self.truncations.append(mark)
        for s in [s for s in self.pending if s >= mark]:
            del self.pending[s]
        for s in [s for s in self.rooms if s >= mark]:  # every one: a stale room would be wrong
            del self.rooms[s]

    def release(self) -> None:
        """Drop every state and deferred builder: the automaton determinised from
        this NFA is gone. Builders close over the NFA (and over each other), a
        reference cycle that would keep every state's lists alive until a full
        garbage collection, which then has to traverse them."""
        self.eps, self.edges, self.pending, self.templates, self.rooms = [], [], {}, {}, {}

    def materialize(self, s: int) -> None:
        """Build the deferred fragment that starts at ``s`` and link it in."""
        build, e = self.pending.pop(s)
        self.pending_built = True
        fs, fe = build()
        self.epsilon(s, fs)
        self.epsilon(fe, e)

    def edge_cuts(self, first_state: int) -> set[int]:
        """Byte-range boundaries used by the states numbered from ``first_state`` on."""
        cuts = set()
        for edges in self.edges[first_state:]:
            for lo, hi, _ in edges:
                cuts.add(lo)
                cuts.add(hi + 1)
        return cuts

    # -- fragments -------------------------------------------------------------

    def empty(self) -> tuple[int, int]:
        s = self.state()
        return s, s

    def any_bytes(self) -> tuple[int, int]:
        """Any byte string, the empty one included."""
        s = self.state()
        self.edge(s, 0, 255, s)
        return s, s

    def byte_string(self, data: bytes) -> tuple[int, int]:
        start = cur = self.state()
        for b in data:
            nxt = self.state()
            self.edge(cur, b, b, nxt)
            cur = nxt
        return start, cur

    def code_points(self, ranges) -> tuple[int, int]:
        """One character from a code point set, as UTF-8 (a copy of its minimal DFA)."""
        n_states, edges = charset_automaton(tuple(ranges))
        base = len(self.eps)
        for _ in range(n_states):
            self.state()
        for src, lo, hi, dst in edges:
            self.edge(base + src, lo, hi, base + dst)
        return base, base + n_states - 1

    def concat(self, frags) -> tuple[int, int]:
        frags = list(frags)
        if not frags:
            return self.empty()
        for (_, e1), (s2, _) in zip(frags, frags[1:]):
            self.epsilon(e1, s2)
        return frags[0][0], frags[-1][1]

    def union(self, frags) -> tuple[int, int]:
        start, end = self.state(), self.state()
        for s, e in frags:
            self.epsilon(start, s)
            self.epsilon(e, end)
        return start, end

    def repeat(self, make, lo: int, hi: int | None, any_char: bool = False) -> tuple[int, int]:
        """``make()`` builds a fresh copy of the item; ``hi=None`` means unbounded.
        ``any_char``: each copy takes any one character (a plain byte or a whole
        non-ASCII character) from its start state, as an unconstrained JSON string
        character does; the copies' starts get their ``rooms``."""
        note, room = self._room_of_copies(hi) if any_char else ((lambda frag, i: frag), None)
        built = []  # a first copy already made (to measure it), used before new ones
        count = max(lo, hi or 0)
        if self.lazy and count > 1:
            n0 = len(self)
            first = make()
            size = len(self) - n0
            if self.deferrable(n0) and (count > LAZY_REPEAT_ABOVE or size * (count - 1) > LAZY_REPEAT_STATES):
                chunk = max(1, min(LAZY_REPEAT_CHUNK, LAZY_REPEAT_STATES // max(size, 1)))
                # Later copies are pasted from the first one (2-4x cheaper than
                # making each again), kept before its room is noted.
                item = self.template(n0, *first)
                make_once = functools.partial(self.built_once, {} if item is None else {None: item}, None, make)
                return self._lazy_repeat(lambda i: note(make_once(), i), lo, hi, note(first, 0), self.edge_cuts(n0),
                                         chunk, item, room)
            built.append(note(first, 0))
        made = itertools.count()

        def copy():
            i = next(made)
            return built.pop() if built else note(make(), i)

        parts = [copy() for _ in range(lo)]
        if hi is None:
            s, e = copy()
            loop_start, loop_end = self.state(), self.state()
            self.epsilon(loop_start, s)
            self.epsilon(loop_start, loop_end)
            self.epsilon(e, s)
            self.epsilon(e, loop_end)
            parts.append((loop_start, loop_end))
        elif hi > lo:
            # Nested optionals: x{0,3} = (x(x(x)?)?)?, so each copy may skip to the end.
            end = self.state()
            opt_start = self.state()
            self.epsilon(opt_start, end)
            cur = opt_start
            for _ in range(hi - lo):
                s, e = copy()
                self.epsilon(cur, s)
                self.epsilon(e, end)
                cur = e
            parts.append((opt_start, end))
        return self.concat(parts)

    def _room_of_copies(self, hi: int | None):
        """``(note, room)``: ``room(i)`` is the room of the start of the i-th copy
        (from 0), the characters the copies from there on take (``hi - i``), and
        ``note(copy, i)`` gives it that room. Called on each copy as made or pasted,
        after it is made: a template kept while making a copy must not hold that
        copy's room."""

        def room(i: int) -> int:
            return UNBOUNDED_ROOM if hi is None else hi - i

        def note(frag: tuple[int, int], i: int) -> tuple[int, int]:
            self.rooms[frag[0]] = room(i)
            return frag

        return note, room

    def _lazy_repeat(self, make, lo: int, hi: int | None, first, cuts, chunk: int, item, rooms) -> tuple[int, int]:
        """``repeat`` whose copies past ``first`` (made already; ``cuts`` are its byte
        ranges' boundaries) are built ``chunk`` at a time, when the automaton reaches
        them. ``make(i)`` makes the i-th copy: a paste of ``item`` (a ``Template``,
        or None) with ``rooms(i)`` noted at its start (None: no room)."""
        kept: dict = {}  # the first middle chunk, for ``ChunkCopy``

        def builder(done: int):
            """The builder of the chunk of the copies from ``done`` on: a middle
            one (each copy optional, more to come) may be copied from the first,
            and the first made as arrays from ``item``."""
            if hi is not None and lo <= done and done + chunk < hi:
                made = None if item is None else functools.partial(_chunk_template, item, done, chunk, rooms)
                return ChunkCopy(self, kept, done, chunk, rest, builder, made)
            return lambda: rest(done)

        def rest(done: int) -> tuple[int, int]:
            # Copies number done, done + 1, ...: optional once lo are written.
            start = cur = self.state()
            end = self.state()
            n = done
            while n < done + chunk and (hi is None or n < hi):
                if n >= lo:
                    if hi is None:  # past the minimum of an unbounded run: a plain loop
                        s, e = make(n)
                        self.epsilon(cur, s)
                        self.epsilon(e, s)
                        self.epsilon(e, end)
                        self.epsilon(cur, end)
                        return start, end
                    self.epsilon(cur, end)
                s, e = make(n)
                self.epsilon(cur, s)
                cur = e
                n += 1
            if hi is not None and n >= hi:
                self.epsilon(cur, end)
            else:
                ds, de = self.deferred(builder(n), cuts)
                self.epsilon(cur, ds)
                self.epsilon(de, end)
            return start, end

        start, end = self.state(), self.state()
        if lo == 0:
            self.epsilon(start, end)
        self.epsilon(start, first[0])
        tail = self.deferred(builder(1), cuts)
        self.epsilon(first[1], tail[0])
        self.epsilon(tail[1], end)
        return start, end


def _chunk_template(item: Template, done: int, chunk: int, rooms) -> Template | None:
    """The states ``NFA._lazy_repeat``'s ``rest(done)`` builds for a middle chunk,
    as arrays (``Template.of_packed``), numbered alike: its start and end, ``chunk``
    copies of ``item`` (each optional: its start may go to the end), then the next
    chunk deferred (the one hole). ``rooms(i)``: the room of copy i's start (None:
    none). For a compiled construction only (``NFA.paste_pending``): the states come
    from a kernel (``fsm.kernels.subsets.chunk_packed``). Building them in Python
    pastes each copy's lists and reads them back, ~450 µs in a mask for a chunk of
    JSON string characters; this costs ~70 µs there (~50 µs warm; in numpy, ~190).
    None where ``item`` has holes."""
    from guided.fsm.kernels.subsets import chunk_packed  # imports numba

    if item.holes:
        return None
    m, (rel, _) = item.n, item.packed()
    packed = chunk_packed(rel, m, item.start, item.end, chunk)
    n = 2 + chunk * m + 2
    hole = n - 2  # the next chunk's start (its end: hole + 1)
    copy_rooms = {}
    for k in range(chunk):
        b = 2 + k * m
        for i, room in item.rooms:
            copy_rooms[b + i] = room
        if rooms is not None:
            copy_rooms[b + item.start] = rooms(done + k)
    return Template.of_packed(packed, n, 0, 1, sorted(copy_rooms.items()), ((hole, hole + 1, None),))


def nfa_byte_classes(nfa: NFA, moves: np.ndarray | None = None) -> np.ndarray:
    """Bytes that no NFA edge tells apart share a class. ``moves``: the NFA's byte
    moves from ``NFA.flat``, where the caller has them."""
    cuts = np.zeros(257, dtype=bool)
    cuts[0] = True
    cuts[list(nfa.cuts)] = True  # what deferred fragments will need
    if moves is not None:
        cuts[moves[:, 0]] = True
        cuts[moves[:, 1] + 1] = True
    else:  # C-level iteration over the edge tuples (a Python loop: ~50 ms per 100k edges)
        cuts[np.fromiter(map(itemgetter(0), chain.from_iterable(nfa.edges)), dtype=np.int64)] = True
        cuts[np.fromiter(map(itemgetter(1), chain.from_iterable(nfa.edges)), dtype=np.int64) + 1] = True
    return (np.cumsum(cuts[:256]) - 1).astype(np.int32)
