"""Earley parser cost on long recursive inputs: right, left and ambiguous recursion.

Three one-terminal lark grammars, each a sentence of N ``a``'s for every N >= 1:

* ``right``:     ``start: "a" start | "a"``   (right recursion: Leo's deterministic
  reduction paths keep each Earley set O(1))
* ``left``:      ``start: start "a" | "a"``   (left recursion: O(1) per set in any Earley parser)
* ``ambiguous``: ``start: start start | "a"`` (Catalan-many parses: set k holds O(k)
  items and its completions touch O(k^2); Earley's worst case)

Two ways of stepping N tokens, each timed from a cold guide / parser:

* ``api``: ``guide = guided.compile(guided.Grammar(text), vocab)`` on the SmolLM2
  vocabulary (49,152 tokens), then per token ``matcher.fill_next_token_bitmask`` (the
  mask: trial scans of every all-``a`` token, memoised on the parse states) and
  ``matcher.accept_token`` of the token ``--piece`` (``a``; ``aaaa`` is SmolLM2's
  longest all-``a`` token); at the end the mask once more, and EOS must be allowed.
  Checks that the token's and EOS's bits are right at every step.
* ``parser``: ``EarleyParser(compile_lark(text).cfg)``, then per token, per byte of
  the piece, ``parser.advance(state, {a})`` and reading ``expected`` / ``accepts``.

Each run stops at ``--budget`` seconds; the table gives the cumulative time at each
checkpoint reached and the mean time per token over the last tenth of the tokens
stepped (how per-token cost grows with the input's length).

Usage::

    .venv/bin/python benchmarks/earley_recursion.py                       # all, 2,000 tokens
    .venv/bin/python benchmarks/earley_recursion.py --grammars right --modes parser --tokens 20000
    .venv/bin/python benchmarks/earley_recursion.py --grammars right,left --piece aaaa
    .venv/bin/python benchmarks/earley_recursion.py --grammars ambiguous --tokens 2000 --budget 300
"""

from __future__ import annotations

import argparse
import gc
import sys
import time

GRAMMARS = {
    "right": 'start: "a" start | "a"',
    "left": 'start: start "a" | "a"',
    "ambiguous": 'start: start start | "a"',
}
MODES = ("api", "parser")


def checkpoints(n: int) -> list[int]:
    """Token counts at which the cumulative time is reported (n/8, n/4, n/2, n)."""
    return sorted({max(1, n // 8), max(1, n // 4), max(1, n // 2), n})


def run_api(text: str, n: int, budget: float, vocab, a_token: int) -> tuple[list[float], int]:
    """Step ``n`` tokens ``a_token`` through the public API; (cumulative seconds after each token, tokens done)."""
    import guided

    t0 = time.perf_counter()
    guide = guided.compile(guided.Grammar(text), vocab)
    m = guide.matcher()
    bitmask = guided.allocate_token_bitmask(1, vocab.size)
    words = bitmask[0].numpy().view("uint32")
    eos = vocab.eos_token_ids[0]

    def allowed(tok: int) -> bool:
        return bool((int(words[tok >> 5]) >> (tok & 31)) & 1)

    times = []
    for i in range(n):
        m.fill_next_token_bitmask(bitmask)
        if not allowed(a_token) or allowed(eos) != (i > 0):
            raise AssertionError(f"wrong mask before token {i}")
        if not m.accept_token(a_token):
            raise AssertionError(f"token {i} refused")
        times.append(time.perf_counter() - t0)
        if times[-1] > budget:
            break
    else:
        m.fill_next_token_bitmask(bitmask)
        if not allowed(eos) or not m.accept_token(eos):
            raise AssertionError("EOS refused at the end")
        times[-1] = time.perf_counter() - t0
    return times, len(times)


def run_parser(text: str, n: int, budget: float, width: int) -> tuple[list[float], int]:
    """Step ``n`` tokens of ``width`` terminals ``a`` through ``EarleyParser.advance``; as ``run_api``."""
    from guided.grammars.earley import EarleyParser
    from guided.grammars.lark_frontend import compile_lark

    t0 = time.perf_counter()
    g = compile_lark(text)
    assert g.terminal_names == ["A"], g.terminal_names
    parser = EarleyParser(g.cfg)
    state, a = parser.root(), frozenset([0])
    times = []
    for i in range(n):
        for _ in range(width):
            state = parser.advance(state, a)
            if state is None or state.expected != a or not state.accepts:
                raise AssertionError(f"wrong set in token {i}")
        times.append(time.perf_counter() - t0)
        if times[-1] > budget:
            break
    return times, len(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog="Grammars: " + "; ".join(f"{k}: {v}" for k, v in GRAMMARS.items()))
    ap.add_argument("--grammars", default=",".join(GRAMMARS), help="comma-separated, of: " + ", ".join(GRAMMARS))
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated, of: api (guided.compile + "
                    "matcher), parser (EarleyParser.advance)")
    ap.add_argument("--tokens", type=int, default=2000, help="tokens per run, each of len(--piece) terminals "
                    "(default 2000)")
    ap.add_argument("--piece", default="a", help="each token's text, a run of a's that is one SmolLM2 token: "
                    "a, aa or aaaa (default a)")
    ap.add_argument("--budget", type=float, default=600.0,
                    help="stop a run after this many seconds and report how far it got (default 600)")
    args = ap.parse_args(argv)
    grammars = [g.strip() for g in args.grammars.split(",") if g.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for g in grammars:
        if g not in GRAMMARS:
            ap.error(f"unknown grammar {g!r}")
    for m in modes:
        if m not in MODES:
            ap.error(f"unknown mode {m!r}")
    if not args.piece or set(args.piece) != {"a"}:
        ap.error("--piece must be a run of a's")

    vocab = a_token = None
    if "api" in modes:
        import guided
        from guided.models import load_tokenizer

        hf = load_tokenizer()
        vocab = guided.Vocabulary.from_tokenizer(hf)
        ids = hf.encode(args.piece, add_special_tokens=False)
        assert len(ids) == 1, ids
        a_token = ids[0]
        # One-time per-vocabulary set-up (pieces tables), left out of the times.
        g = guided.compile(guided.Grammar('start: "b"+'), vocab)
        g.matcher().fill_next_token_bitmask(guided.allocate_token_bitmask(1, vocab.size))

    cps = checkpoints(args.tokens)
    print(f"## `python benchmarks/earley_recursion.py {' '.join(sys.argv[1:])}`".rstrip())
    print()
    print("| grammar | mode | " + " | ".join(f"{c:,} tokens (s)" for c in cps) + " | per token, last tenth (ms) |")
    print("|---|---|" + "---|" * len(cps) + "---|")
    for name in grammars:
        for mode in modes:
            gc.collect()
            if mode == "api":
                times, done = run_api(GRAMMARS[name], args.tokens, args.budget, vocab, a_token)
            else:
                times, done = run_parser(GRAMMARS[name], args.tokens, args.budget, len(args.piece))
            cells = [f"{times[c - 1]:.3f}" if c <= done else "—" for c in cps]
            tail = max(1, done // 10)
            per = (times[done - 1] - times[done - 1 - tail]) / tail * 1e3 if done > tail else times[0] * 1e3
            note = "" if done == args.tokens else f" (stopped at {done:,} tokens, {times[-1]:.1f} s)"
            print(f"| {name} | {mode} | " + " | ".join(cells) + f" | {per:.3f}{note} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
