"""Regex compile + token-index cost on the SmolLM2 vocabulary (49,152 tokens).

For each regex this prints the DFA size (states, byte classes) and three timings,
each the median over ``--repeats`` runs with ``compile_regex``'s cache cleared
before every run:

* ``compile``     regex -> minimal byte-level DFA (``guided.fsm.regex.compile_regex``);
* ``first mask``  fresh compile + ``TokenIndex(dfa, vocab, eager=False)`` + ``.mask(start)``:
  what a request waits for before its first decoding step;
* ``complete``    fresh compile + lazy index + ``.mask(start)`` + ``.build_all()``:
  every state's mask (what ``eager=True`` would cost).

plus the distinct mask rows and ``TokenIndex.memory_bytes()`` of the complete index.

One-time, per-process costs are measured first and reported separately, then warmed
so that they are *not* inside the per-regex timings: the vocabulary (token -> bytes),
its byte trie (``guided.fsm.trie.vocabulary_bytes``) and the Unicode tables behind ``\\d``,
``\\w``, ``\\s`` (``guided.fsm.utf8.ranges_matching``; the first call builds a table of every
code point).

Usage::

    python benchmarks/regex_compile.py [--repeats 5] [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

torch.set_num_threads(1)

TARGET_FIRST_P50_MS = 5.0
TARGET_COMPLETE_P50_MS = 100.0
TARGET_COMPLETE_MAX_S = 5.0


def words(n: int = 500, seed: int = 0) -> list[str]:
    """``n`` distinct English-ish words from a seeded RNG over syllables."""
    rng = random.Random(seed)
    onsets = ["b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v",
              "w", "br", "ch", "cl", "dr", "fl", "gr", "pl", "sh", "sl", "st", "th", "tr", ""]
    vowels = ["a", "e", "i", "o", "u", "ai", "ea", "ee", "oo", "ou"]
    codas = ["", "", "", "n", "r", "s", "t", "l", "nd", "st", "ng", "ck"]
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        w = "".join(rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas)
                    for _ in range(rng.randint(1, 3)))
        if len(w) >= 3 and w not in seen:
            seen.add(w)
            out.append(w)
    return out


_OCTET = r"(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_DATE = r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"
_TIME = r"([01]\d|2[0-3]):[0-5]\d:[0-5]\d"

REGEXES: list[tuple[str, str]] = [
    ("us_phone", r"\(\d{3}\) \d{3}-\d{4}"),
    ("intl_phone", r"\+[1-9]\d{0,2}[ -]?(\(\d{1,4}\)[ -]?)?\d{2,4}([ -]?\d{2,4}){1,3}"),
    ("ipv4", rf"({_OCTET}\.){{3}}{_OCTET}"),
    ("iso_date", _DATE),
    ("iso_datetime", _DATE + "T" + _TIME + r"(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)"),
    ("time_hms", _TIME),
    ("email", r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,24}"),
    ("url", r"https?://[a-z0-9-]+(\.[a-z0-9-]+)+(:\d{1,5})?(/[A-Za-z0-9._~%-]*)*(\?[A-Za-z0-9=&_%.-]*)?"),
    ("uuid", r"[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"),
    ("hex_colour", r"#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})"),
    ("semver", r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
               r"(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?"),
    ("json_small", r'\{"name": "[^"]{1,20}", "age": \d{1,3}\}'),
    ("json_big", r'\{\s*"id": \d{1,10},\s*"name": "[^"\\]{1,50}",\s*'
                 r'"email": "[a-z0-9._+-]{1,30}@[a-z0-9-]{1,20}\.[a-z]{2,6}",\s*'
                 r'"active": (true|false),\s*"score": -?\d{1,6}(\.\d{1,4})?,\s*'
                 r'"tags": \[("[a-z]{1,12}"(, "[a-z]{1,12}"){0,4})?\],\s*'
                 r'"created": "' + _DATE + r'"\s*\}'),
    ("words_500", "(" + "|".join(words()) + ")"),
    ("cyrillic", r"[\u0400-\u04FF]+"),
    ("cjk_1_10", r"[\u4e00-\u9fff]{1,10}"),
    ("word_w+", r"\w+"),
    ("emoji", r"[\U0001F300-\U0001FAFF\u2600-\u27BF]+"),
    ("dot_0_200", r".{0,200}"),
    ("lower_1_64", r"[a-z]{1,64}"),
    ("float", r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d{1,3})?"),
    ("credit_card", r"\d{4}([ -]?\d{4}){3}"),
    ("yes_no_maybe", r"(yes|no|maybe)"),
    ("py_identifier", r"[A-Za-z_][A-Za-z0-9_]*"),
    ("integer", r"-?(0|[1-9]\d{0,18})"),
    ("sentence", r"[A-Z][a-z]*( [a-z]+){3,30}[.!?]"),
    ("json_string", r'"([^"\\]|\\["\\/bfnrt])*"'),
    # ASCII-digit twins: Python's \d (Unicode mode) is 660 code points in 62 ranges,
    # most of them multi-byte, so \d-heavy patterns get many more DFA states.
    ("us_phone_09", r"\([0-9]{3}\) [0-9]{3}-[0-9]{4}"),
    ("ipv4_09", _OCTET.replace(r"\d", "[0-9]").join([r"(", r"\.){3}", ""])),
    ("integer_09", r"-?(0|[1-9][0-9]{0,18})"),
]


def ms(seconds: float) -> str:
    v = seconds * 1e3
    return f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 1000 else f"{v:.0f}"


def pct(values: list[float], q: float) -> float:
    """Percentile by linear interpolation (q in [0, 100])."""
    s = sorted(values)
    if len(s) == 1:
        return s[0]
    pos = (len(s) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5, help="runs per timing (median reported)")
    ap.add_argument("--only", default=None, help="only regexes whose name contains this")
    ap.add_argument("--complete-budget", type=float, default=10.0,
                    help="stop repeating the complete-index timing of one regex after this many seconds")
    args = ap.parse_args()
    import guided

    guided.load_kernels()  # numba loaded before anything is timed, as a server loads it at start-up

    t0 = time.perf_counter()
    from guided import Vocabulary
    from guided.fsm import utf8
    from guided.fsm.index import TokenIndex
    from guided.fsm.regex import compile_regex
    from guided.fsm.trie import vocabulary_bytes
    from tests.tokenizer_zoo import smollm2

    t_import = time.perf_counter() - t0
    tok = smollm2()
    t = time.perf_counter()
    vocab = Vocabulary.from_tokenizer(tok)
    t_vocab = time.perf_counter() - t
    t = time.perf_counter()
    vb = vocabulary_bytes(vocab)
    t_trie = time.perf_counter() - t
    t = time.perf_counter()
    utf8._all_scalars()
    t_scalars = time.perf_counter() - t
    cats = {}
    for p in (r"\d", r"\w", r"\s"):
        t = time.perf_counter()
        utf8.ranges_matching(p, 0)
        cats[p] = time.perf_counter() - t

    print(f"SmolLM2 vocabulary: {vocab.size} tokens; byte trie {vb.trie.num_nodes} nodes; "
          f"torch threads {torch.get_num_threads()}; repeats {args.repeats}")
    print("One-time costs (once per process, NOT included below):")
    print(f"  import fsm/guided              {ms(t_import):>8} ms")
    print(f"  Vocabulary.from_tokenizer      {ms(t_vocab):>8} ms")
    print(f"  vocabulary byte trie           {ms(t_trie):>8} ms")
    print(f"  Unicode scalar table           {ms(t_scalars):>8} ms  (first ranges_matching call)")
    print("  ranges_matching per category   " + ", ".join(f"{p} {ms(s)} ms" for p, s in cats.items())
          + "  (after the table)")

    todo = [(n, p) for n, p in REGEXES if args.only is None or args.only in n]
    if not todo:
        sys.exit(f"no regex name contains {args.only!r}; names: {', '.join(n for n, _ in REGEXES)}")

    # Warm-up: one untimed pass over every regex (Unicode tables for any other
    # category, Python's own caches, numpy first-call costs).
    t = time.perf_counter()
    for _, p in todo:
        compile_regex.cache_clear()
        TokenIndex(compile_regex(p), vocab, eager=False).mask(compile_regex(p).start)
    compile_regex.cache_clear()
    print(f"  warm-up pass over the regexes  {ms(time.perf_counter() - t):>8} ms  (untimed below)")
    print()

    hdr = (f"{'regex':<14} {'states':>6} {'cls':>4} {'compile':>9} {'1st mask':>9} "
           f"{'complete':>9} {'n':>2} {'rows':>5} {'memory':>9}  {'ok':<3}")
    print(hdr)
    print(f"{'':<14} {'':>6} {'':>4} {'ms':>9} {'ms':>9} {'ms':>9} {'':>2} {'':>5} {'KiB':>9}")
    print("-" * len(hdr))
    firsts, completes = [], []
    for name, pattern in todo:
        comp, first = [], []
        for _ in range(args.repeats):
            compile_regex.cache_clear()
            a = time.perf_counter()
            dfa = compile_regex(pattern)
            b = time.perf_counter()
            TokenIndex(dfa, vocab, eager=False).mask(dfa.start)
            c = time.perf_counter()
            comp.append(b - a)
            first.append(c - a)
        full = []
        spent = 0.0
        for _ in range(args.repeats):
            compile_regex.cache_clear()
            a = time.perf_counter()
            dfa = compile_regex(pattern)
            index = TokenIndex(dfa, vocab, eager=False)
            index.mask(dfa.start)
            index.build_all()
            full.append(time.perf_counter() - a)
            spent += full[-1]
            if spent > args.complete_budget:
                break
        compile_regex.cache_clear()
        f, c = statistics.median(first), statistics.median(full)
        firsts.append(f)
        completes.append(c)
        ok = "" if f * 1e3 <= TARGET_FIRST_P50_MS else "F"
        ok += "" if c * 1e3 <= TARGET_COMPLETE_P50_MS else "C"
        print(f"{name:<14} {dfa.num_states:>6} {dfa.num_classes:>4} {ms(statistics.median(comp)):>9} "
              f"{ms(f):>9} {ms(c):>9} {len(full):>2} {index.num_rows:>5} "
              f"{index.memory_bytes() / 1024:>9.1f}  {ok or 'ok':<3}")
    print("-" * len(hdr))
    print("ok column: F = first mask over 5 ms, C = complete index over 100 ms (per-regex; "
          "the targets are on the p50 across regexes)")
    print()
    print(f"Summary over {len(todo)} regexes (ms)      p50       p90       max   target")
    p50f, p50c, maxc = pct(firsts, 50), pct(completes, 50), max(completes)
    print(f"  time to first mask          {ms(p50f):>8}  {ms(pct(firsts, 90)):>8}  {ms(max(firsts)):>8}   "
          f"p50 <= {TARGET_FIRST_P50_MS:g} ms: {'MET' if p50f * 1e3 <= TARGET_FIRST_P50_MS else 'MISSED'}")
    print(f"  time to complete index      {ms(p50c):>8}  {ms(pct(completes, 90)):>8}  {ms(maxc):>8}   "
          f"p50 <= {TARGET_COMPLETE_P50_MS:g} ms: {'MET' if p50c * 1e3 <= TARGET_COMPLETE_P50_MS else 'MISSED'}"
          f"; max <= {TARGET_COMPLETE_MAX_S:g} s: {'MET' if maxc <= TARGET_COMPLETE_MAX_S else 'MISSED'}")


if __name__ == "__main__":
    main()
