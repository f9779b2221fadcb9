"""A byte-level Thompson NFA, the intermediate form between a regex and its DFA.

States are integers; each has epsilon moves and byte-range moves ``(lo, hi, target)``.
Builders return fragments ``(start, end)`` that are glued together by the regex
compiler; nothing here knows about regex syntax.
"""

from __future__ import annotations

from .errors import RegexTooLargeError
from .utf8 import utf8_sequences

#: Past this many NFA states the pattern is refused rather than exhausting memory.
MAX_NFA_STATES = 400_000


class NFA:
    def __init__(self) -> None:
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []

    def __len__(self) -> int:
        return len(self.eps)

    def state(self) -> int:
        if len(self.eps) >= MAX_NFA_STATES:
            raise RegexTooLargeError(
                f"pattern expands to more than {MAX_NFA_STATES} automaton states "
                "(large counted repetitions multiply the pattern)"
            )
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def epsilon(self, a: int, b: int) -> None:
        self.eps[a].append(b)

    def edge(self, a: int, lo: int, hi: int, b: int) -> None:
        self.edges[a].append((lo, hi, b))

    # -- fragments -------------------------------------------------------------

    def empty(self) -> tuple[int, int]:
        s = self.state()
        return s, s

    def byte_string(self, data: bytes) -> tuple[int, int]:
        start = cur = self.state()
        for b in data:
            nxt = self.state()
            self.edge(cur, b, b, nxt)
            cur = nxt
        return start, cur

    def code_points(self, ranges) -> tuple[int, int]:
        """One character from a code point set, as UTF-8, with shared byte prefixes."""
        start, end = self.state(), self.state()
        prefix: dict[tuple[int, int, int], int] = {}
        for seq in utf8_sequences(ranges):
            cur = start
            for i, (lo, hi) in enumerate(seq):
                if i == len(seq) - 1:
                    self.edge(cur, lo, hi, end)
                else:
                    key = (cur, lo, hi)
                    if key not in prefix:
                        prefix[key] = self.state()
                        self.edge(cur, lo, hi, prefix[key])
                    cur = prefix[key]
        return start, end

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

    def repeat(self, make, lo: int, hi: int | None) -> tuple[int, int]:
        """``make()`` builds a fresh copy of the item; ``hi=None`` means unbounded."""
        parts = [make() for _ in range(lo)]
        if hi is None:
            s, e = make()
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
                s, e = make()
                self.epsilon(cur, s)
                self.epsilon(e, end)
                cur = e
            parts.append((opt_start, end))
        return self.concat(parts)
