"""Boolean operations on DFAs (product construction) and embedding a DFA in an NFA
(with the rooms of its free states, ``free_states``).

Spec compilers use these where a constraint is a conjunction or a difference that
regex syntax cannot say: JSON Schema ``allOf`` that cannot be merged keyword by
keyword, ``oneOf`` (union minus pairwise overlaps), ``not``, a ``pattern`` together
with ``minLength``. Each result is minimised, so sizes stay honest (an intersection
headed for an NFA may ask for the product as it is, dead pairs included).

Cost notes: the product visits only reachable state pairs; byte classes are the
common refinement of the operands' classes (at most 256). Small operands are
combined pair by pair in Python; large ones a breadth-first level at a time in numpy
(per-level overhead, but no Python work per pair: 80k pairs x 100 classes in ~0.4 s).
"""

from __future__ import annotations

import numpy as np

from guided.errors import EmptyLanguageError, RegexTooLargeError

from .deadline import check as check_deadline
from .dfa import DFA, MAX_DFA_STATES, co_reachable, minimize
from .kernels import AVAILABLE as COMPILED_AVAILABLE
from .kernels import use as use_kernels
from .nfa import NFA, UNBOUNDED_ROOM
from .trie import PLAIN_BYTES
from .utf8 import UTF8_SEQUENCES

MAX_PRODUCT_STATES = 200_000
#: Operands with at most this many state pairs are combined pair by pair in Python;
#: larger ones a level at a time in numpy (10x faster on 80k states, 10x slower on 100).
SMALL_PRODUCT = 4096


def _common_classes(a: DFA, b: DFA) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The common refinement of two DFAs' byte classes: per common class, its class
    in ``a`` and in ``b``; and each byte's common class."""
    pair_classes = a.byte_to_class.astype(np.int64) * (b.num_classes + 1) + b.byte_to_class
    uniq, byte_to_class = np.unique(pair_classes, return_inverse=True)
    return uniq // (b.num_classes + 1), uniq % (b.num_classes + 1), byte_to_class.reshape(-1)


def _product(a: DFA, b: DFA, accept, both: bool = False,
             limit: int = MAX_PRODUCT_STATES) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reachable pairs of (a-state, b-state), either side may be dead (-1); with
    ``both`` (an intersection, where such a pair can never accept) neither may.
    Returns the pairs' transition table, byte classes and accepting flags; more
    than ``limit`` pairs raise ``RegexTooLargeError``. Compiled
    (``fsm.kernels.product``) where numba is installed."""
    if COMPILED_AVAILABLE and use_kernels(a.num_states * b.num_states):
        return _product_compiled(a, b, accept, both, limit)
    if a.num_states * b.num_states <= SMALL_PRODUCT:
        return _product_by_pair(a, b, accept, both, limit)
    return _product_by_level(a, b, accept, both, limit)


def _product_compiled(a: DFA, b: DFA, accept, both: bool, limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_product`` by ``fsm.kernels.product`` (the pairs of ``_product_by_pair``)."""
    from guided.fsm.kernels.product import product_pairs  # imports numba

    ca, cb, byte_to_class = _common_classes(a, b)
    ta = np.ascontiguousarray(a.transitions[:, ca], dtype=np.int64)
    tb = np.ascontiguousarray(b.transitions[:, cb], dtype=np.int64)
    table, sa, sb = product_pairs(ta, tb, both, limit)
    if not len(table):
        raise RegexTooLargeError(f"combined automaton exceeds {limit} states")
    # accept() of each pair's sides; index -1: a dead side never accepts.
    outcome = np.array([[accept(x, y) for y in (False, True)] for x in (False, True)], dtype=bool)
    return table, byte_to_class, outcome[np.append(a.accepting, False)[sa].astype(np.int64),
                                         np.append(b.accepting, False)[sb].astype(np.int64)]


def _product_by_level(a: DFA, b: DFA, accept, both: bool, limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Breadth-first, a whole level of pairs per step in numpy: a pair is the key
    ``(sa + 1) * (nb + 1) + (sb + 1)``, and the keys seen so far stay sorted, so
    finding a level's new pairs is a ``searchsorted``. (Pair by pair in Python, a
    Unicode pattern times a length counter, 80k states x 147 classes, takes 4.5 s.)"""
    ca, cb, byte_to_class = _common_classes(a, b)
    # Row -1 of each table is a dead state's: -1 everywhere.
    ta = np.vstack([a.transitions[:, ca], np.full((1, len(ca)), -1, dtype=a.transitions.dtype)]).astype(np.int64)
    tb = np.vstack([b.transitions[:, cb], np.full((1, len(cb)), -1, dtype=b.transitions.dtype)]).astype(np.int64)
    width = b.transitions.shape[0] + 1
    seen_keys = np.array([width + 1], dtype=np.int64)  # the start pair (0, 0)
    seen_ids = np.array([0], dtype=np.int64)
    pair_a, pair_b = [np.array([0])], [np.array([0])]
    rows = []
    frontier_a, frontier_b = pair_a[0], pair_b[0]
    count = 1
    while len(frontier_a):
        check_deadline()
        na, nb = ta[frontier_a], tb[frontier_b]
        dead = ((na < 0) | (nb < 0)) if both else ((na < 0) & (nb < 0))
        keys = (na + 1) * width + (nb + 1)
        fresh = np.unique(keys[~dead])
        at = np.minimum(np.searchsorted(seen_keys, fresh), len(seen_keys) - 1)
        fresh = fresh[seen_keys[at] != fresh]
        if count + len(fresh) > limit:
            raise RegexTooLargeError(f"combined automaton exceeds {limit} states")
        ids = np.arange(count, count + len(fresh))
        count += len(fresh)
        order = np.argsort(np.concatenate([seen_keys, fresh]), kind="stable")
        seen_keys = np.concatenate([seen_keys, fresh])[order]
        seen_ids = np.concatenate([seen_ids, ids])[order]
        row = seen_ids[np.minimum(np.searchsorted(seen_keys, keys), len(seen_keys) - 1)]
        row[dead] = -1
        rows.append(row)
        frontier_a, frontier_b = fresh // width - 1, fresh % width - 1
        pair_a.append(frontier_a)
        pair_b.append(frontier_b)
    sa, sb = np.concatenate(pair_a), np.concatenate(pair_b)
    acc_a = np.append(a.accepting, False)[sa]  # index -1: a dead side never accepts
    acc_b = np.append(b.accepting, False)[sb]
    accepting = np.array([accept(x, y) for x, y in zip(acc_a.tolist(), acc_b.tolist())], dtype=bool)
    table = np.concatenate(rows).astype(np.int32)
    return table, byte_to_class, accepting


def _product_by_pair(a: DFA, b: DFA, accept, both: bool, limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_product`` one pair at a time in Python: for small operands, where numpy's
    per-call overhead on each level of the search would dominate."""
    ca, cb, byte_to_class = _common_classes(a, b)
    ca, cb = ca.tolist(), cb.tolist()
    ta, tb = a.transitions.tolist(), b.transitions.tolist()
    acc_a, acc_b = a.accepting.tolist(), b.accepting.tolist()
    ids = {(0, 0): 0}
    pairs = [(0, 0)]
    table = []
    i = 0
    while i < len(pairs):
        if not i & 255:
            check_deadline()
        sa, sb = pairs[i]
        row = []
        for x, y in zip(ca, cb):
            na = ta[sa][x] if sa >= 0 else -1
            nb = tb[sb][y] if sb >= 0 else -1
            if (na < 0 or nb < 0) if both else (na < 0 and nb < 0):
                row.append(-1)
                continue
            key = (na, nb)
            j = ids.get(key)
            if j is None:
                if len(pairs) >= limit:
                    raise RegexTooLargeError(f"combined automaton exceeds {limit} states")
                j = ids[key] = len(pairs)
                pairs.append(key)
            row.append(j)
        table.append(row)
        i += 1
    accepting = np.array(
        [accept(sa >= 0 and acc_a[sa], sb >= 0 and acc_b[sb]) for sa, sb in pairs], dtype=bool
    )
    return np.array(table, dtype=np.int32).reshape(len(pairs), len(ca)), byte_to_class, accepting


def _combine(a: DFA, b: DFA, accept, both: bool = False, limit: int = MAX_PRODUCT_STATES) -> DFA:
    trans, classes, accepting = _product(a, b, accept, both, limit)
    return minimize(trans, classes, accepting)


def intersect(a: DFA, b: DFA, minimal: bool = True, limit: int = MAX_PRODUCT_STATES) -> DFA:
    """Strings both accept. Raises ``EmptyLanguageError`` when there are none.

    ``minimal=False`` gives the product as it is, dead pairs included: only for a
    product that is embedded in an NFA (``embed``), whose determinisation drops dead
    states anyway (``LazyDFA`` prunes its NFA; ``determinize`` minimises). A Unicode
    pattern times a 255-character counter is 80k pairs: built in ~0.2 s, where
    trimming takes ~0.5 s more and removes two of them."""
    if minimal:
        return _combine(a, b, lambda x, y: x and y, both=True, limit=limit)
    trans, classes, accepting = _product(a, b, lambda x, y: x and y, both=True, limit=limit)
    if not accepting.any():  # every pair is reachable, so no accepting pair: no string
        raise EmptyLanguageError("the automata accept no common string")
    return DFA(trans, classes, accepting)


def union(a: DFA, b: DFA) -> DFA:
    return _combine(a, b, lambda x, y: x or y)


def difference(a: DFA, b: DFA, limit: int = MAX_PRODUCT_STATES) -> DFA:
    """Strings ``a`` accepts and ``b`` does not. Raises ``EmptyLanguageError`` if none.

    Disjoint operands (``oneOf`` branches that cannot overlap, the common case) return
    ``a`` itself after a cheap search, without a product to build and minimise."""
    if is_empty_intersection(a, b):
        return a
    return _combine(a, b, lambda x, y: x and not y, limit=limit)


def is_empty_intersection(a: DFA, b: DFA, limit: int | None = None) -> bool | None:
    """Whether no string is accepted by both: a search over pairs of live states that
    stops at the first pair accepting in both. With a ``limit``, None when the search
    visits more pairs than that without an answer."""
    ca, cb, _ = _common_classes(a, b)
    classes = list(zip(ca.tolist(), cb.tolist()))
    ta, tb = a.transitions.tolist(), b.transitions.tolist()
    acc_a, acc_b = a.accepting.tolist(), b.accepting.tolist()
    seen = {(0, 0)}
    stack = [(0, 0)]
    while stack:
        sa, sb = stack.pop()
        if acc_a[sa] and acc_b[sb]:
            return False
        row_a, row_b = ta[sa], tb[sb]
        for x, y in classes:
            key = (row_a[x], row_b[y])
            if key[0] >= 0 and key[1] >= 0 and key not in seen:
                seen.add(key)
                stack.append(key)
        if limit is not None and len(seen) > limit:
            return None
    return True


# The phase after each byte read at phase 0 (-1: a byte that cannot come there), and
# the continuation bytes.
_UTF8_LEAD_PHASE = np.full(256, -1)
_UTF8_LEAD_PHASE[:0x80], _UTF8_LEAD_PHASE[0xC0:0xE0] = 0, 1
_UTF8_LEAD_PHASE[0xE0:0xF0], _UTF8_LEAD_PHASE[0xF0:0xF8] = 2, 3
_UTF8_CONTINUATION = np.zeros(256, dtype=bool)
_UTF8_CONTINUATION[0x80:0xC0] = True


def product_bound(a: DFA, b: DFA) -> int:
    """An upper bound on the state pairs ``_product`` reaches (so on an intersection's
    size): ``a.num_states * b.num_states``, or less where both read UTF-8 text.

    After the same bytes, both automata are at the same point of a character: as
    many continuation bytes still to come (the *phase*, 0 to 3). So only states of
    equal phase pair up. A Unicode pattern times a 255-character counter is bounded
    by 113k pairs this way (80k are reached), against 1.06M states multiplied."""
    pa, pb = _utf8_phases(a), _utf8_phases(b)
    if pa is None or pb is None:
        return a.num_states * b.num_states
    return int(np.bincount(pa, minlength=4) @ np.bincount(pb, minlength=4))


def _utf8_phases(dfa: DFA) -> np.ndarray | None:
    """Each reachable state's phase (continuation bytes still due), or None when some
    state has none or two (the automaton does not read well-formed UTF-8 only).

    In numpy over the edges, not a search in Python (0.15 s on a 30k-state,
    100-class string automaton): a lead byte sets its target's phase outright, and a
    continuation byte takes one off its source's, so three rounds settle every phase;
    then every edge must agree (a lead byte only at phase 0, a continuation byte only
    after a lead byte)."""
    lead, cont = _UTF8_LEAD_PHASE, _UTF8_CONTINUATION
    n_classes = dfa.transitions.shape[1]
    # Per class: the phase it leads to from phase 0 (-2: its bytes disagree, -1: not
    # a lead byte), and whether it is all continuation bytes.
    from_zero = np.full(n_classes, -2)
    all_cont = np.zeros(n_classes, dtype=bool)
    for c in range(n_classes):
        members = dfa.byte_to_class == c
        kinds = np.unique(lead[members])
        if len(kinds) == 1:
            from_zero[c] = kinds[0]
        all_cont[c] = bool(members.any() and cont[members].all())
    src, cls = np.nonzero(dfa.transitions >= 0)
    dst = dfa.transitions[src, cls]
    reached = co_reachable(dst, src, np.arange(dfa.num_states) == 0)  # forwards from 0
    keep = reached[src]
    src, cls, dst = src[keep], cls[keep], dst[keep]
    by_lead, by_cont = ~all_cont[cls], all_cont[cls]
    if (from_zero[cls[by_lead]] < 0).any():
        return None  # a byte that cannot start a character, read where one starts
    phase = np.full(dfa.num_states, -1)
    phase[0] = 0
    phase[dst[by_lead]] = from_zero[cls[by_lead]]
    cs, cd = src[by_cont], dst[by_cont]
    for _ in range(3):
        known = phase[cs] >= 1
        phase[cd[known]] = phase[cs[known]] - 1
    lead_ok = phase[src[by_lead]] == 0
    cont_ok = (phase[cs] >= 1) & (phase[cd] == phase[cs] - 1)
    lead_target_ok = phase[dst[by_lead]] == from_zero[cls[by_lead]]
    if not (lead_ok.all() and cont_ok.all() and lead_target_ok.all()) or phase[0] != 0 or (phase[reached] < 0).any():
        return None
    return phase[reached]


def repeat_unit(unit: DFA, lo: int, hi: int | None, limit: int = MAX_DFA_STATES) -> DFA | None:
    """The minimal DFA of ``unit{lo,hi}`` (``hi`` None: unbounded), laid out directly,
    for a *unit* automaton: its start does not accept and its accepting states have
    no moves (one character, which ends exactly where it is complete). None for
    other automata.

    Copy k of the unit's non-accepting states reads the (k+1)-th unit; a move into
    an accepting state goes to the next copy's start, which accepts from ``lo`` on.
    Copies differ by how many units may still follow, so the result is minimal when
    the unit is. (A subset construction and minimisation of the same counter takes
    0.34 s for ``maxLength: 1024``.)"""
    t, acc = unit.transitions, unit.accepting
    if acc[0] or (t[acc] >= 0).any() or (hi is not None and hi < lo):
        return None
    inner = np.flatnonzero(~acc)  # state 0 first
    m = len(inner)
    # Unbounded from lo > 0: lo copies, then an accepting start that reads on as the
    # last copy's start does; from 0: one copy that loops back to its own start.
    copies = hi if hi is not None else max(lo, 1)
    end = hi is not None or lo > 0  # a state after the last copy
    n = copies * m + end
    if n > limit:
        raise RegexTooLargeError(f"pattern needs more than {limit} DFA states")
    local = np.full(unit.num_states, -1, dtype=np.int64)
    local[inner] = np.arange(m)
    block = t[inner]  # the moves of one copy, before renumbering
    into_end = (block >= 0) & acc[np.maximum(block, 0)]
    within = (block >= 0) & ~into_end
    trans = np.full((n, t.shape[1]), -1, dtype=np.int32)
    base = (np.arange(copies) * m)[:, None, None]
    nxt = base + m if end else base  # where completing a unit leads: the next start
    trans[: copies * m] = np.where(within, base + local[np.maximum(block, 0)],
                                   np.where(into_end, nxt, -1)).reshape(copies * m, t.shape[1])
    if hi is None and lo > 0:
        trans[-1] = trans[(lo - 1) * m]
    accepting = np.zeros(n, dtype=bool)
    accepting[np.arange(lo, copies + end) * m] = True
    return DFA(trans, unit.byte_to_class, accepting)


def embed(nfa: NFA, dfa: DFA, free_rooms: bool = False) -> tuple[int, int]:
    """Copy ``dfa`` into ``nfa`` as a fragment ``(start, end)``. ``free_rooms``: the
    copies of its ``free_states`` get an unbounded ``NFA.rooms`` (a string body: an
    unanchored pattern's search states, where any text keeps the string alive)."""
    lo, hi, target, spans, accepting = dfa.flat_edges()
    base = len(nfa)
    flat = list(zip(lo, hi, (target + base).tolist()))
    nfa.add_states(len(spans) + 1, [flat[a:b] for a, b in spans] + [[]])
    end = base + len(spans)
    eps = nfa.eps
    for s in accepting:
        eps[base + s].append(end)
    if free_rooms:
        for s in free_states(dfa):
            nfa.rooms[base + s] = UNBOUNDED_ROOM
    return base, end


#: DFAs larger than this are not searched for ``free_states`` (a product of a
#: pattern and a length counter: a counted string has rooms of its own).
FREE_STATES_MAX = 4096


def free_states(dfa: DFA) -> list[int]:
    """The states from which every run of characters (plain bytes, whole non-ASCII
    characters in UTF-8) stays alive: none of their character moves dies or reaches
    a state that is not free. The unanchored ends of a pattern's search are free,
    and so is each state of its search once any text can still hold a match.
    Computed once per DFA, as the complement of the states that reach a dying
    character move."""
    if dfa._free is None:
        dfa._free = [] if dfa.num_states > FREE_STATES_MAX else _free_states(dfa)
    return dfa._free


def _free_states(dfa: DFA) -> list[int]:
    trans, classes = dfa.transitions, dfa.byte_to_class
    n = dfa.num_states
    plain = np.unique(classes[np.frombuffer(PLAIN_BYTES, dtype=np.uint8)])
    src, dst = [np.repeat(np.arange(n), len(plain))], [trans[:, plain].reshape(-1)]
    for seq in UTF8_SEQUENCES:  # where each whole character leads: (origin, state) pairs
        origin, at = np.arange(n), np.arange(n)
        for a, b in seq:
            cls = np.unique(classes[a : b + 1])
            origin, at = np.repeat(origin, len(cls)), trans[at][:, cls].reshape(-1)
            dead = at < 0
            src.append(origin[dead]), dst.append(at[dead])  # a move that dies, mid-character too
            pairs = np.unique(origin[~dead].astype(np.int64) * n + at[~dead])
            origin, at = pairs // n, pairs % n
        src.append(origin), dst.append(at)
    src, dst = np.concatenate(src), np.concatenate(dst)
    dying = np.zeros(n, dtype=bool)
    dying[src[dst < 0]] = True
    keep = dst >= 0
    bad = co_reachable(src[keep], dst[keep], dying)
    return np.nonzero(~bad)[0].tolist()
