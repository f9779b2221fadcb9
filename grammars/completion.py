"""Shortest completions of grammar matcher states, in tokens: what budget-aware masks
over a lark grammar or a recursive JSON Schema need.

::

    matcher state (P, lexer state q, lexeme empty?)

      fresh (lexeme empty)  P's cheapest completion: its cheapest waiting item
                            A -> x . y (origin O): y's cheapest derivation, then A
                            completed at O (O's cheapest item waiting on A, and so on
                            back to the root, ``_after``); the terminals' shortest
                            texts joined, split into the fewest tokens
      inside a lexeme       the nearest accepting lexer states (breadth-first), each
                            then the fresh witness of the Earley set its terminals
                            lead to; the one in fewest tokens

    bound(state) = the witness's tokens + 1 (EOS)
    budget mask at (state, remaining): the tokens whose successor's bound <= remaining - 1

Symbols are weighed in tokens: a terminal by the fewest tokens of its shortest text,
a nonterminal by its cheapest derivation (a fixpoint over the rules; lazy
nonterminals, one per set of keys an object has written, by a cheapest-first search
over their rules, capped at ``LAZY_MAX_NODES``).

A bound is **sound**: its witness reads from the state to a complete text, so a token
allowed because its successor's bound fits always leaves room to finish. A derivation's
text reads as derived where every lexeme end is kept (recursive schemas: ``every_end``)
or where longest match cannot merge two adjacent texts (checked per pair of terminals
against a lexer of all of them, ``_reads_apart``); elsewhere the witness is read back
from the state token by token, and tried again with the shortest ignored text between
terminals; where that fails too the state has no bound (INFINITE) and the tokens that
lead to it are not allowed while the budget binds. The mask at a state whose bound fits
is never empty: its witness's next token is always allowed, and the state it leads to
keeps the rest of the witness. A bound is the true minimum where the cheapest
derivation's text is also the one in fewest tokens; a state whose successors are known
takes one more than the lowest of theirs where that is smaller.

Cost notes: per Earley set, one pass over its items and a shortest path over the
nonterminals its predictions wait on (kept on the set, shared by every state after
it); per matcher state, a lexer search of a few states and a tokenisation of a few
dozen bytes. A budget mask needs the bounds of every state the allowed tokens lead to
(kept per parse state, with the largest of them: a budget above it takes the plain
row): the tokens are read in bulk, a numpy walk of the whole vocabulary per lexer
state (kept), the ones that leave the lexeme grouped by the terminals it ends with
and read on from the next lexeme (small groups in Python); a parse state met for the
first time pays the Earley steps of its successors, as its plain mask does.
"""

from __future__ import annotations

import bisect
import heapq
import weakref
from collections import deque
from itertools import count, pairwise

import numpy as np

from guided.fsm.distance import INFINITE, fewest_tokens, token_strings
from guided.fsm.trie import set_bits, vocabulary_bytes

from .grammar_index import GrammarIndex, Readings

#: A lazy nonterminal's cheapest derivation is searched over at most this many of its
#: nodes (an object with k required keys left has 2^k cheaper subsets to pass), then
#: found greedily.
LAZY_MAX_NODES = 200
#: A lexeme is finished by a search over at most this many lexer states.
LEXER_MAX_STATES = 500
#: A terminal's shortest text is searched over at most this many (a recursive
#: schema's terminal may span a whole object of required keys, each with its
#: whitespace choices).
TERMINAL_MAX_STATES = 50_000

#: Lexer states whose whole-vocabulary reads are kept (~0.5 MB each for 49k tokens).
KEPT_READS = 64
#: Witness texts are split into tokens of at most this many bytes (a longer token
#: rarely shortens a completion; the split's cost grows with it).
SPLIT_LONGEST = 32
#: Splits kept (the kept ones are dropped together past this many).
KEPT_SPLITS = 50_000
#: Rests of tokens past a lexeme's end read on one by one (in Python) where a group
#: has at most this many; bigger groups are read in bulk (numpy's fixed cost).
FEW_RESTS = 48
#: States whose tokens' successor bounds are kept (``budget_groups``), the latest.
KEPT_GROUPS = 16
#: The nearest accepting lexer states a lexeme may be finished at, each tried, none
#: more than FINISH_SLACK bytes further than the nearest.
FINISHES = 8
FINISH_SLACK = 16

_MISSING = object()
_TOP = ("completion", "top")  # the key of a state's top, with its lexer state and emptiness
LEFT, SPLIT = -1, -2  # _read's ends: the token left the lexeme; it passes a lexeme end (every_end)

_DONE = -1  # the end of a lazy derivation (a rule that names no lazy symbol)


def _token_ids(vocab) -> dict[bytes, int]:
    """A token id for each text (the first such token that is not EOS); per vocabulary."""
    got = _IDS.get(vocab)
    if got is None:
        got = {}
        eos = set(vocab.eos_token_ids)
        for t, data in enumerate(vocab.token_bytes):
            if data and t not in eos:
                got.setdefault(data, t)
        _IDS[vocab] = got
    return got


_IDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class Completions:
    """Bounds on the tokens that finish each matcher state of a ``GrammarIndex``.

    Args:
        index: the guide's ``GrammarIndex``.

    Example::

        >>> c = Completions(guide.index)
        >>> c.bound(guide.index.initial())      # tokens of the shortest output, EOS included
        4
    """

    def __init__(self, index: GrammarIndex):
        self.index = index
        self.parser = index.parser
        self.lexer = index.lexer
        self.vocab = index.vocab
        self._strings, self._longest = token_strings(index.vocab)
        self._ids = _token_ids(index.vocab)
        self._splits: dict[bytes, list[int] | None] = {}  # text -> its fewest tokens
        self._reps = self._class_bytes()
        cfg = self.parser.cfg
        self._nt = cfg.num_terminals
        self._lazy = cfg.lazy
        self._texts = [self._terminal_text(a) for a in range(self._nt)]
        self._cost = {}    # symbol -> tokens of its cheapest derivation
        self._best = {}    # static nonterminal -> the rule giving it
        self._derived = {}  # symbol -> the terminals of its cheapest derivation
        self._lazy_paths = {}  # lazy symbol -> (cost, its rules' rhs along the path)
        for a, text in enumerate(self._texts):
            self._cost[a] = INFINITE if text is None else self._tokens(text)
        self._static_costs()
        self._rests = {}  # rule-dot -> (cost, terminals) of the symbols from it to the rule's end
        self._edges: dict[int, tuple] = {}  # id(prediction table) -> (table, its edges)
        self._junctions: dict[tuple[int, int], bool] = {}  # (terminal, next terminal) -> reads apart
        self._all = None  # the lexer state that begins a lexeme of any terminal
        ignored = [self._texts[a] for a in index.ignore if self._texts[a]]
        self._separator = min(ignored, key=len) if ignored else None
        self._whole: dict[int, tuple] = {}  # lexer state -> _read of every whole token
        self._classes = None  # the lexer's byte class of each byte of the vocabulary's matrix
        self._row_of = None   # token id -> its row in that matrix
        self._finish: dict[int, list] = {}  # lexer state -> its nearest accepting states
        self._groups: dict = {}  # state key -> (row, budget_groups), the last few

    def drop_caches(self) -> None:
        """Forget the per-lexer-state reads, the splits and the successor groups kept
        (the guide's memory limit; bounds kept on parse states go with them)."""
        self._whole.clear()
        self._splits.clear()
        self._groups.clear()
        self._finish.clear()

    # -- symbols ------------------------------------------------------------------------

    def _class_bytes(self) -> list[int]:
        """A byte for each lexer byte class: printable ASCII first (letters and digits
        before punctuation), so witnesses read as text and split into few tokens."""
        order = sorted(range(256), key=lambda b: (not (48 <= b < 58 or 65 <= b < 91 or 97 <= b < 123),
                                                  not 32 <= b < 127, b))
        reps: dict[int, int] = {}
        for b in order:
            reps.setdefault(int(self.lexer.byte_to_class[b]), b)
        return [reps.get(c, 0) for c in range(self.lexer.num_classes)]

    def _tokens(self, data: bytes) -> int:
        tokens = self._split(data)
        return INFINITE if tokens is None else len(tokens)

    def _terminal_text(self, a: int) -> bytes | None:
        """The shortest text of terminal ``a`` (breadth-first over its lexer states)."""
        start = self.lexer.start(frozenset([a]))
        found = self._search(start, lambda s: a in self.lexer.accepting_terminals(s), 1, TERMINAL_MAX_STATES)
        return found[0][1] if found else None

    def _search(self, start: int, accepts, limit: int, most: int = LEXER_MAX_STATES) -> list[tuple[int, bytes]]:
        """Breadth-first from lexer state ``start``: ``(state, text)`` of the first
        ``limit`` accepting states reached, none more than ``FINISH_SLACK`` bytes
        beyond the first (at most ``most`` states visited)."""
        lexer, reps = self.lexer, self._reps
        seen = {start: b""}
        queue = deque([start])
        out = []
        while queue and len(seen) <= most:
            s = queue.popleft()
            text = seen[s]
            if out and len(text) > len(out[0][1]) + FINISH_SLACK:
                break
            if accepts(s):
                out.append((s, text))
                if len(out) >= limit:
                    break
            for c in lexer.live_classes(s):
                nxt = lexer.row(s)[c]
                if nxt not in seen:
                    seen[nxt] = text + bytes([reps[c]])
                    queue.append(nxt)
        return out

    def _static_costs(self) -> None:
        """Cheapest derivations of the static nonterminals (Bellman-Ford over the
        rules; lazy symbols weighed with the costs known so far)."""
        rules = self.parser.cfg.rules
        changed = True
        while changed:
            changed = False
            self._lazy_paths.clear()
            for lhs, rhs in rules:
                c = 0
                for x in rhs:
                    c += self.cost(x)
                    if c >= INFINITE:
                        break
                if c < self._cost.get(lhs, INFINITE):
                    self._cost[lhs], self._best[lhs] = c, rhs
                    changed = True
        self._lazy_paths.clear()

    def cost(self, sym: int) -> int:
        """Tokens of ``sym``'s cheapest derivation (INFINITE where none is known)."""
        got = self._cost.get(sym)
        if got is not None:
            return got
        if self._lazy is not None and self._lazy.owns(sym):
            return self._lazy_path(sym)[0]
        return INFINITE

    def _lazy_path(self, sym: int):
        """``(cost, rules)``: a lazy symbol's cheapest derivation, a cheapest-first
        search over its rules (each names at most one lazy symbol last, the next node)."""
        got = self._lazy_paths.get(sym)
        if got is not None:
            return got
        self._lazy_paths[sym] = (INFINITE, ())  # a node met again on the way is no cheaper
        lazy, tie = self._lazy, count()
        heap = [(0, next(tie), sym, ())]
        seen = set()
        got = (INFINITE, ())
        while heap and len(seen) <= LAZY_MAX_NODES:
            acc, _, node, path = heapq.heappop(heap)
            if node == _DONE:
                got = (acc, path)
                break
            if node in seen:
                continue
            seen.add(node)
            for rhs in lazy.rules(node):
                rhs = tuple(rhs)
                last = rhs[-1] if rhs and lazy.owns(rhs[-1]) and rhs[-1] != sym else None
                c = acc + sum(self.cost(x) for x in (rhs[:-1] if last is not None else rhs))
                if c < INFINITE:
                    heapq.heappush(heap, (c, next(tie), _DONE if last is None else last, path + (rhs,)))
        if got[0] >= INFINITE and heap:  # the search gave up (many required keys): go greedy
            got = self._lazy_greedy(sym)
        self._lazy_paths[sym] = got
        self._lazy_suffixes(got)
        return got

    def _lazy_suffixes(self, found) -> None:
        """Keep, for each lazy node a derivation passes, the rest of it from there
        (the rest of a cheapest path is a cheapest path; of a greedy one, what the
        greedy search would find again)."""
        cost, path = found
        if cost >= INFINITE:
            return
        for i, rhs in enumerate(path[:-1]):
            cost -= sum(self.cost(x) for x in rhs[:-1])
            self._lazy_paths.setdefault(rhs[-1], (cost, path[i + 1:]))

    def _lazy_greedy(self, sym: int):
        """``(cost, rules)`` of a derivation of lazy ``sym`` found depth first, the
        locally cheapest rule first, no node twice: an upper bound on the cheapest
        (an object writes its cheapest keys until it may close)."""
        lazy, seen, path, cost = self._lazy, {sym}, [], 0
        stack = [(sym, None)]
        while stack:
            node, options = stack[-1]
            if options is None:
                options = []
                for rhs in lazy.rules(node):
                    rhs = tuple(rhs)
                    last = rhs[-1] if rhs and lazy.owns(rhs[-1]) else None
                    c = sum(self.cost(x) for x in (rhs[:-1] if last is not None else rhs))
                    if c < INFINITE:
                        options.append((last is not None, c, rhs, last))
                options.sort(key=lambda o: o[:2], reverse=True)  # popped: closing rules, then cheapest
                stack[-1] = (node, options)
            while options and options[-1][3] in seen:
                options.pop()
            if not options:
                stack.pop()
                if path:
                    cost -= path.pop()[0]
                continue
            _, c, rhs, last = options.pop()
            path.append((c, rhs))
            cost += c
            if last is None:
                return (cost, tuple(r for _, r in path))
            seen.add(last)
            stack.append((last, None))
        return (INFINITE, ())

    def derive(self, sym: int) -> tuple[int, ...]:
        """The terminals of ``sym``'s cheapest derivation."""
        got = self._derived.get(sym)
        if got is not None:
            return got
        if sym < self._nt:
            got = (sym,)
        elif sym in self._best:
            got = tuple(a for x in self._best[sym] for a in self.derive(x))
        else:
            path, out = self._lazy_path(sym)[1], []
            for i, rhs in enumerate(path):
                tail = rhs[:-1] if i + 1 < len(path) else rhs
                for x in tail:
                    out.extend(self.derive(x))
            got = tuple(out)
        self._derived[sym] = got
        return got

    def _rest(self, rd: int) -> tuple[int, tuple[int, ...]]:
        """Cost and terminals of the symbols from rule-dot ``rd`` to its rule's end."""
        got = self._rests.get(rd)
        if got is None:
            rd_next, c, terms = self.parser.rd_next, 0, []
            r = rd
            while rd_next[r] >= 0:
                x = rd_next[r]
                c = min(INFINITE, c + self.cost(x))
                terms.extend(self.derive(x) if c < INFINITE else ())
                r += 1
            got = self._rests[rd] = (c, tuple(terms))
        return got

    # -- Earley sets ----------------------------------------------------------------------

    def _after(self, s) -> dict:
        """For each nonterminal X waiting in set ``s``: ``(cost, back)``, the cheapest
        completion of the parse once X is complete from ``s`` on (kept on the set)."""
        key = ("completion", "after")
        got = s.cache.get(key)
        if got is not None:
            return got
        todo = [s]  # older sets first, without recursion (origin chains run deep)
        while todo:
            cur = todo[-1]
            if key in cur.cache:
                todo.pop()
                continue
            missing = {id(o): o for items in cur.after.values() for _, o in items if key not in o.cache}
            if missing:
                todo.extend(missing.values())
                continue
            cur.cache[key] = self._after_of(cur)
            todo.pop()
        return s.cache[key]

    def _after_of(self, s) -> dict:
        parser, key = self.parser, ("completion", "after")
        rd_lhs = parser.rd_lhs
        best: dict[int, tuple[int, tuple]] = {}

        def offer(x, c, back):
            if c < best.get(x, (INFINITE,))[0]:
                best[x] = (c, back)

        if s is parser.root():
            offer(parser.cfg.start, 0, ())
        for x, items in s.after.items():
            if x < self._nt:
                continue
            for rd, o in items:
                rest = self._rest(rd)[0]
                if rest < INFINITE:
                    up = o.cache[key].get(rd_lhs[rd])
                    if up is not None and up[0] < INFINITE:
                        offer(x, rest + up[0], ("item", rd, o))
        # Predicted items (origin s) wait on X for their own left-hand side: a shortest
        # path over nonterminals, from the ones settled above.
        edges = self._edges_of(s.predicted)
        heap = [(c, b) for b, (c, _) in best.items()]
        heapq.heapify(heap)
        done = set()
        while heap:
            c, b = heapq.heappop(heap)
            if b in done or c > best[b][0]:
                continue
            done.add(b)
            for x, rd, rest in edges.get(b, ()):
                if c + rest < best.get(x, (INFINITE,))[0]:
                    best[x] = (c + rest, ("item", rd, s))
                    heapq.heappush(heap, (c + rest, x))
        return best

    def _edges_of(self, predicted: dict) -> dict:
        """Per nonterminal B, the ``(X, rule-dot, rest cost)`` of each predicted item
        ``B -> . X rest``: kept per prediction table (sets predicting alike share one)."""
        got = self._edges.get(id(predicted))
        if got is None or got[0] is not predicted:
            rd_lhs, edges = self.parser.rd_lhs, {}
            for x, rds in predicted.items():
                if x < self._nt:
                    continue
                for rd in rds:
                    rest = self._rest(rd)[0]
                    if rest < INFINITE:
                        edges.setdefault(rd_lhs[rd], []).append((x, rd, rest))
            got = self._edges[id(predicted)] = (predicted, edges)
        return got[1]

    def _tail(self, s, x: int) -> tuple[int, ...]:
        """The terminals completing the parse once nonterminal ``x`` completes at set
        ``s`` (``_after(s)[x]``'s), kept per set and nonterminal: sets share their
        origins' tails."""
        rd_lhs, chain = self.parser.rd_lhs, []
        while True:
            key = ("completion", "tail", x)
            got = s.cache.get(key)
            if got is not None:
                break
            back = self._after(s)[x][1]
            if not back:
                got = s.cache[key] = ()
                break
            _, rd, o = back
            chain.append((s, key, rd))
            s, x = o, rd_lhs[rd]
        for s, key, rd in reversed(chain):
            got = s.cache[key] = self._rest(rd)[1] + got
        return got

    def set_completion(self, s) -> tuple[int, tuple[int, ...]] | None:
        """``(cost, terminals)``: the cheapest completion of Earley set ``s`` (empty
        where it accepts); None where none is known."""
        key = ("completion", "set")
        got = s.cache.get(key)
        if got is not None:
            return got if got[0] < INFINITE else None
        if s.accepts:
            got = (0, ())
        else:
            got = (INFINITE, ())
            parser = self.parser
            if s is parser.root():
                c = self.cost(parser.cfg.start)
                if c < INFINITE:
                    got = (c, self.derive(parser.cfg.start))
            rd_lhs, pick = parser.rd_lhs, None
            for x, items in s.after.items():
                cx = self.cost(x)
                if cx >= INFINITE:
                    continue
                for rd, o in items:
                    rest = self._rest(rd)[0]
                    if rest >= INFINITE:
                        continue
                    up = self._after(o).get(rd_lhs[rd])
                    if up is not None and cx + rest + up[0] < got[0]:
                        got, pick = (cx + rest + up[0], ()), (x, rd, o)
            if pick is not None:
                x, rd, o = pick
                lhs = rd_lhs[rd]
                terms = list(self.derive(x)) + list(self._rest(rd)[1])
                terms += self._tail(o, lhs)
                got = (got[0], tuple(terms))
        s.cache[key] = got
        return got if got[0] < INFINITE else None

    # -- matcher states -----------------------------------------------------------------

    def _texts_of(self, state) -> list[tuple]:
        """Candidate completions of a plain state, cheapest first: ``(terminals,
        texts)``, the texts of the terminals (a fresh state's; terminals None where
        the lexeme's finishing bytes come first)."""
        p, lx, fresh = state
        index = self.index
        out = []
        if fresh:
            got = self.set_completion(p)
            if got is not None:
                out.append((got[0], got[1], [self._texts[a] for a in got[1]]))
        else:
            for s, text in self._finishes(lx):
                p2 = index.scan(p, self.lexer.accept_id(s))
                got = None if p2 is None else self.set_completion(p2)
                if got is not None:
                    cost = (self._tokens(text) if text else 0) + got[0]
                    out.append((cost, None, [text] + [self._texts[a] for a in got[1]]))
        out.sort(key=lambda c: c[0])
        return [(terms, texts) for _, terms, texts in out]

    def _reads_apart(self, terms: tuple[int, ...]) -> bool:
        """Whether the shortest texts of ``terms``, joined, surely lex back as those
        terminals under longest match, checked against a lexer of every terminal
        (what the parser allows is a subset): each text is read as its terminal
        (no terminal ranked above it accepts the text too), and the next text's
        first byte cannot extend it."""
        for a, b in zip(terms, terms[1:] + (-1,)):
            got = self._junctions.get((a, b))
            if got is None:
                got = self._junctions[(a, b)] = self._junction(a, b)
            if not got:
                return False
        return True

    def _junction(self, a: int, b: int) -> bool:
        lexer, index = self.lexer, self.index
        if self._all is None:
            self._all = lexer.start(frozenset(range(self._nt)))
        end = lexer.step(self._all, self._texts[a])
        if end < 0:
            return False
        accepting = lexer.accepting_terminals(end) - index.ignore
        ranks = index.ranks
        if a not in accepting or (ranks is not None and any(ranks[c] > ranks[a] for c in accepting)):
            return False
        return b < 0 or lexer.step_byte(end, self._texts[b][0]) < 0

    def _finishes(self, lx: int) -> list[tuple[int, bytes]]:
        """The accepting lexer states nearest ``lx`` (up to ``FINISHES``), with the
        bytes that reach each (kept per lexer state)."""
        got = self._finish.get(lx)
        if got is None:
            lexer = self.lexer
            got = self._finish[lx] = self._search(lx, lambda s: lexer.accept_id(s) != 0, FINISHES)
        return got

    def _follow(self, state, tokens: list[int]):
        """The states after each of ``tokens`` from ``state``; None where one is refused."""
        states = []
        for t in tokens:
            state = self.index.consume_token(state, t)
            if state is None:
                return None
            states.append(state)
        return states

    def _split(self, data: bytes) -> list[int] | None:
        """``data`` in the fewest tokens (tokens of at most ``SPLIT_LONGEST`` bytes), or
        None where no split exists; the latest splits kept."""
        got = self._splits.get(data, _MISSING)
        if got is _MISSING:
            cuts = fewest_tokens(data, self._strings, min(self._longest, SPLIT_LONGEST))
            got = None if cuts is None else [self._ids[data[i:j]] for i, j in pairwise(cuts)]
            if len(self._splits) >= KEPT_SPLITS:
                self._splits.clear()
            self._splits[data] = got
        return got

    def _compose(self, state):
        """A witness ``(bound, tokens, bytes)`` of a state from checked parts, or None:
        a lexeme's end, then the witness of the fresh state of the Earley set its
        terminals lead to, where the next byte cannot extend the lexeme (longest
        match); the fewest tokens among the nearest ends. A state of several readings
        takes its best reading's (reading on, the state keeps that reading)."""
        index, lexer = self.index, self.lexer
        if index.can_end(state):
            return (1, [], b"")
        if isinstance(state, Readings):
            return min((self._entry(r) for r in state.readings), key=lambda e: e[0])
        p, lx, fresh = state
        if fresh:
            return None
        best = None
        for s, text in self._finishes(lx):
            p2 = index.scan(p, lexer.accept_id(s))
            if p2 is None:
                continue
            sub = self._entry((p2, index.start_state(p2), True))
            rest = sub[2]
            if sub[0] >= INFINITE or (rest and not index.every_end and lexer.step_byte(s, rest[0]) >= 0):
                continue
            tokens = self._split(text + rest)
            if tokens is not None and (best is None or len(tokens) + 1 < best[0]):
                best = (len(tokens) + 1, tokens, text + rest)
        return best

    def _checked(self, state):
        """A witness ``(bound, tokens, bytes)`` of a state from its candidate texts
        (``_texts_of``), read back from the state before it counts (where longest
        match could merge two terminals; with every lexeme end kept and every tied
        terminal scanned, a derivation's text always reads as it was derived), with
        the shortest ignored text between terminals where the plain join fails; None
        where no candidate reads."""
        index = self.index
        verify = not (index.every_end and index.ranks is None)
        readings = state.readings if isinstance(state, Readings) else (state,)
        tried = 0
        for reading in readings:
            for terms, texts in self._texts_of(reading):
                if verify and terms is not None and self._reads_apart(terms):
                    tokens = self._split(b"".join(texts))
                    if tokens is not None:
                        return (len(tokens) + 1, tokens, b"".join(texts))
                for sep in (b"", self._separator):
                    if sep is None or (sep and not verify):
                        continue
                    data = sep.join(t for t in texts if t) if sep else b"".join(texts)
                    if sep and texts and not texts[0]:
                        data = sep + data
                    tokens = self._split(data)
                    if tokens is None:
                        continue
                    if not verify:
                        return (len(tokens) + 1, tokens, data)
                    states = self._follow(state, tokens)
                    if states is not None and index.can_end(states[-1] if states else state):
                        self._record(states, tokens)
                        return (len(tokens) + 1, tokens, data)
                tried += 1
                if tried >= 4:
                    return None
        return None

    def _record(self, states, tokens) -> None:
        """Give every state on a witness's path the rest of it, where shorter."""
        for i, s in enumerate(states):
            self._offer(s, tokens[i + 1:])

    def _offer(self, state, tokens: list[int]) -> None:
        """Make ``tokens`` (a completion of ``state``) its witness, where shorter."""
        key, cache = self._key(state)
        had = cache.get(key)
        if had is None or len(tokens) + 1 < had[0]:
            data = b"".join(self.vocab.token_bytes[t] for t in tokens)
            cache[key] = (len(tokens) + 1, tokens, data)

    @staticmethod
    def _key(state):
        if isinstance(state, Readings):
            return ("completion", "bound", state.readings), state.readings[0][0].cache
        p, lx, fresh = state
        return ("completion", "bound", lx, fresh), p.cache

    def bound(self, state) -> int:
        """Tokens that finish ``state``, EOS included: a checked upper bound on the
        fewest (INFINITE where no completion was found)."""
        return self._entry(state)[0]

    def witness(self, state) -> list[int]:
        """The tokens (EOS not included) of the completion ``bound`` counts."""
        return self._entry(state)[1]

    def _entry(self, state):
        """``(bound, witness tokens, witness bytes)`` of a state (kept on its Earley set)."""
        key, cache = self._key(state)
        got = cache.get(key)
        if got is None:
            got = self._compose(state) or self._checked(state) or (INFINITE, [], b"")
            had = cache.get(key)  # reading a witness may have recorded a shorter one
            if had is None or got[0] < had[0]:
                cache[key] = got
            else:
                got = had
        return got

    # -- successors ---------------------------------------------------------------------

    def successors(self, state, row: np.ndarray) -> list[tuple[np.ndarray, object]]:
        """The allowed tokens of ``row`` (EOS aside) grouped by the state each leads
        to: ``[(token ids, state)]``. Tokens are read in bulk, lexeme by lexeme
        (``_bulk``); a state of several readings reads each in bulk, and of the tokens
        that several of them read alike (whose readings merge) one is read, through
        ``GrammarIndex.consume_token``, for them all; the tokens ``_bulk`` leaves are
        read one by one."""
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")[: self.vocab.size]
        allowed = np.flatnonzero(bits)
        allowed = allowed[~np.isin(allowed, np.array(self.vocab.eos_token_ids, dtype=np.int64))]
        consume = self.index.consume_token
        if isinstance(state, Readings):
            # Per token, which group of each reading's bulk read it falls in (-1:
            # refused there; -2: left to be read alone). Tokens in the same groups
            # of every reading reach one state: one of them is read, for them all.
            keys, nexts = [], []
            for reading in state.readings:
                got, left = self._bulk(reading, allowed)
                gid = np.full(self.vocab.size, -1, dtype=np.int64)
                for k, tokens in enumerate(got.values()):
                    gid[np.concatenate(tokens)] = k
                for tokens in left:
                    gid[tokens] = -2
                keys.append(gid[allowed])
                nexts.append(list(got))
            keys = np.stack(keys, axis=1)
            alone = (keys == -2).any(axis=1)
            read = (keys >= 0).any(axis=1) & ~alone
            groups: dict = {}
            combos, which = np.unique(keys[read], axis=0, return_inverse=True)
            for j, combo in enumerate(combos.tolist()):
                tokens = allowed[read][which.ravel() == j]
                readers = [(i, k) for i, k in enumerate(combo) if k >= 0]
                nxt = nexts[readers[0][0]][readers[0][1]] if len(readers) == 1 else consume(state, int(tokens[0]))
                if nxt is not None:
                    groups.setdefault(nxt, []).append(tokens)
            slow = [allowed[alone]]
        else:
            groups, slow = self._bulk(state, allowed)
        for t in np.concatenate(slow).tolist() if slow else ():
            nxt = consume(state, t)
            if nxt is not None:
                groups.setdefault(nxt, []).append(np.array([t], dtype=np.int64))
        return [(np.concatenate(parts), nxt) for nxt, parts in groups.items()]

    def _bulk(self, state, allowed: np.ndarray):
        """``({state: [token arrays]}, [token arrays left])``: the tokens ``allowed`` at
        plain state ``state`` read in bulk, lexeme by lexeme (``_read``), grouped by
        the terminals each lexeme ends with; left to be read alone, where every
        lexeme end is kept, the tokens that pass one (where the reading splits)."""
        index, lexer = self.index, self.lexer
        groups: dict = {}
        slow = []
        pending = [(state, allowed, None)]
        token_bytes = self.vocab.token_bytes
        while pending:
            (p, lx, fresh), tokens, offsets = pending.pop()
            if index.every_end and not fresh and lexer.accept_id(lx):
                slow.append(tokens)  # the lexeme may end here or go on: two readings
                continue
            if offsets is not None and len(tokens) <= FEW_RESTS:  # read on in Python
                here = (p, lx, fresh)
                for t, k in zip(tokens.tolist(), offsets.tolist()):
                    nxt = index.consume(here, token_bytes[t][k:])
                    if nxt is not None:
                        groups.setdefault(nxt, []).append(np.array([t], dtype=np.int64))
                continue
            end, at, accept = self._read(lx, tokens, offsets)
            inside = end >= 0
            for part, tgt in _grouped(tokens[inside], end[inside]):
                nxt = index._normalize(p, tgt, False)
                if nxt is not None:
                    groups.setdefault(nxt, []).append(part)
            slow.append(tokens[end == SPLIT])
            leaving = (end == LEFT) & (accept > 0)
            if fresh and offsets is not None:  # a lexeme that begins here cannot end empty
                leaving &= at > offsets
            elif fresh:
                leaving &= at > 0
            for (part, rest), a in _grouped((tokens[leaving], at[leaving]), accept[leaving]):
                p2 = index.scan(p, a)
                if p2 is not None:
                    pending.append(((p2, index.start_state(p2), True), part, rest))
        return groups, slow

    def _read(self, lx: int, tokens: np.ndarray, offsets: np.ndarray | None):
        """Read ``tokens`` (from byte ``offsets``, or whole) in one lexeme from lexer
        state ``lx``, in bulk. Returns ``(end, at, accept)`` per token: ``end`` the
        lexer state its last byte reaches inside the lexeme, or ``LEFT`` where a
        byte (at offset ``at``) cannot extend it, the lexeme having been accepted by
        ``accept_sets[accept]`` (0: by none) before it, or ``SPLIT`` where every
        lexeme end is kept and the token passes one. Whole tokens are read once per
        lexer state, over the whole vocabulary (kept)."""
        if offsets is None:
            got = self._whole.pop(lx, None)
            if got is None:
                vb = vocabulary_bytes(self.vocab)
                n = len(vb.token_ids)
                self._rows_of(tokens[:0])
                end, at, accept = self._read_rows(lx, np.arange(n), np.zeros(n, dtype=np.int64))
                got = (end.astype(np.int32), at.astype(np.int16), accept.astype(np.int32))
                while len(self._whole) >= KEPT_READS:
                    del self._whole[next(iter(self._whole))]
            self._whole[lx] = got  # the latest last
            rows = self._rows_of(tokens)
            return (got[0][rows].astype(np.int64), got[1][rows].astype(np.int64),
                    got[2][rows].astype(np.int64))
        return self._read_rows(lx, self._rows_of(tokens), offsets)

    def _rows_of(self, tokens: np.ndarray) -> np.ndarray:
        """Each token's row in the vocabulary's byte matrix (``vocabulary_bytes``)."""
        if self._row_of is None:
            vb = vocabulary_bytes(self.vocab)
            self._classes = self.lexer.byte_to_class.astype(np.uint8)[vb.matrix]
            row_of = np.full(self.vocab.size, -1, dtype=np.int64)
            row_of[vb.token_ids] = np.arange(len(vb.token_ids))
            self._row_of = row_of
        return self._row_of[tokens]

    def _read_rows(self, lx: int, rows: np.ndarray, offsets: np.ndarray):
        """``_read`` over rows of the vocabulary's byte matrix."""
        vb, lexer = vocabulary_bytes(self.vocab), self.lexer
        n = len(rows)
        lengths = vb.lengths[rows]
        pos = offsets.copy()
        cur = np.full(n, lx, dtype=np.int64)
        end = np.full(n, LEFT, dtype=np.int64)
        at = np.zeros(n, dtype=np.int64)
        accept = np.zeros(n, dtype=np.int64)
        live = np.ones(n, dtype=bool)
        every_end = self.index.every_end
        while True:
            done = live & (pos >= lengths)
            end[done] = cur[done]
            live &= ~done
            on = np.flatnonzero(live)
            if not len(on):
                break
            states = cur[on]
            uniq, where = np.unique(states, return_inverse=True)
            table = np.array([lexer.row(x) for x in uniq.tolist()], dtype=np.int64).reshape(len(uniq), -1)
            accepts = lexer.accept_id_array()  # (after the rows: building them adds states)
            if every_end:
                passing = (accepts[states] != 0) & (pos[on] > offsets[on])
                end[on[passing]] = SPLIT
                live[on[passing]] = False
                on, states, where = on[~passing], states[~passing], where[~passing]
            nxt = table[where, self._classes[rows[on], pos[on]]]
            dead = nxt < 0
            stop = on[dead]
            at[stop] = pos[stop]
            accept[stop] = accepts[states[dead]]
            live[stop] = False
            cur[on[~dead]] = nxt[~dead]
            pos[on] += 1
        return end, at, accept

    def budget_groups(self, state, row: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """``[(bound, token ids)]`` for the allowed tokens of ``row``, by the bound of
        the state each leads to, lowest first (the last few states' kept). The
        state's own bound becomes one more than the lowest, where that is smaller
        (a witness found one token ahead)."""
        key = self._key(state)[0]
        got = self._groups.get(key)
        if got is not None and got[0] is row:
            return got[1]
        by_bound: dict[int, list[np.ndarray]] = {}
        best = None
        for tokens, nxt in self.successors(state, row):
            b = self.bound(nxt)
            by_bound.setdefault(b, []).append(tokens)
            if best is None or b < best[0]:
                best = (b, int(tokens[0]), nxt)
        got = sorted((b, np.concatenate(parts)) for b, parts in by_bound.items())
        self._groups[key] = (row, got)
        while len(self._groups) > KEPT_GROUPS:
            del self._groups[next(iter(self._groups))]
        if best is not None and best[0] + 1 < self.bound(state):
            b, token, nxt = best
            self._offer(state, [token] + self.witness(nxt))
        return got

    def top(self, state, row: np.ndarray) -> int:
        """The largest bound among the states ``row``'s tokens lead to (kept per state,
        ``kept_top``): a budget at least one more than it allows every token. 0 where
        the state has no bound (no budget can be kept: the plain row serves)."""
        return self._bounds(state, row)[-1]

    def _bounds(self, state, row: np.ndarray) -> tuple[int, ...]:
        """The distinct bounds of the states ``row``'s tokens lead to, ascending (kept
        per state: what picks a kept budget row without the successors), ending with
        ``top``."""
        key, cache = self._key(state)
        key = ("completion", "bounds", *key[2:])
        got = cache.get(key)
        if got is None:
            got = self._keep_bounds(state, self.budget_groups(state, row) if self.bound(state) < INFINITE else [])
        return got

    def _keep_bounds(self, state, groups) -> tuple[int, ...]:
        key, cache = self._key(state)
        got = tuple(b for b, _ in groups) or (0,)
        cache[("completion", "bounds", *key[2:])] = got
        cache[(*_TOP, *key[2:])] = got[-1]
        return got

    def budget_row(self, state, row: np.ndarray, remaining: int) -> np.ndarray | None:
        """The mask at ``state`` with ``remaining`` tokens left, EOS included: the
        tokens of ``row`` after which ``remaining - 1`` tokens finish the text (and
        EOS where ``row`` allows it); None where that is all of ``row``.

        Where even the state's own bound exceeds ``remaining`` (a budget the caller
        did not check), the tokens of its witness's path are the way to finish
        soonest: its next token alone is allowed. Rows are kept per state and number
        of successor bounds that fit."""
        bounds = self._bounds(state, row)
        if remaining - 1 >= bounds[-1]:
            return None
        bound, witness = self.bound(state), self.witness(state)
        key, cache = self._key(state)
        fit = bisect.bisect_right(bounds, remaining - 1)
        key = ("completion", "row", *key[2:], fit, bound <= remaining)
        out = cache.get(key)
        if out is not None:
            return out
        groups = self.budget_groups(state, row)
        if tuple(b for b, _ in groups) != bounds:  # recomputed, some bounds lower since
            bounds = self._keep_bounds(state, groups)
            fit = bisect.bisect_right(bounds, remaining - 1)
            key = (*key[:-2], fit, bound <= remaining)
        out = row & self.index.eos_row
        words = out.view(np.uint32)
        if fit:
            set_bits(words, np.concatenate([tokens for _, tokens in groups[:fit]]))
        if witness and (bound <= remaining or not out.any()):
            # The witness's next token always fits, and the state it leads to keeps
            # the rest of the witness (a successor's own witness may be longer).
            set_bits(words, np.array(witness[:1], dtype=np.int64))
            nxt = self.index.consume_token(state, witness[0])
            if nxt is not None:
                self._offer(nxt, witness[1:])
        cache[key] = out
        return out


def kept_top(state) -> int:
    """``Completions.top`` of a plain state where it is kept, else INFINITE: the
    lock-free lookup a budget-aware fill makes first."""
    if type(state) is tuple:
        return state[0].cache.get((*_TOP, state[1], state[2]), INFINITE)
    return INFINITE


def _grouped(values, keys: np.ndarray):
    """``values`` (an array, or a tuple of arrays) split by equal ``keys``:
    ``[(part, key)]``."""
    if not len(keys):
        return []
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    cut = np.flatnonzero(np.diff(keys)) + 1
    firsts = keys[np.r_[0, cut]].tolist()
    if isinstance(values, tuple):
        parts = zip(*(np.split(v[order], cut) for v in values))
    else:
        parts = np.split(values[order], cut)
    return list(zip(parts, firsts))
