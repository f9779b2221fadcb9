"""MaskBench: JSON-Schema correctness and mask speed, ours vs llguidance (and XGrammar) in one run.

Data: ``../shared/bench/maskbench.jsonl.gz`` (relative to the repository root; JSON
lines with ``id``, ``schema`` and ``tests``: each test has ``data``, ``valid`` and
``description``).  11,305 real schemas with valid and invalid instances.

For each schema, in a worker process (one engine per worker):

1. **TTFM** (time to first mask): from the start of compile until the first mask is
   filled (compile + ``matcher()`` + first ``fill_next_token_bitmask``).
2. Every test instance is serialised compactly
   (``json.dumps(data, separators=(",", ":"), ensure_ascii=False)``), tokenised with
   the SmolLM2 tokenizer (no special tokens) and stepped token by token from a fresh
   matcher: before each token the mask is filled (each fill is a **TBM** sample, time
   between masks) and the token's bit is checked, then the token is accepted.  The
   instance is accepted iff every token was allowed and accepted and, at the end,
   the EOS bit is set.  A rejected valid instance is a *validation error*, an
   accepted invalid one an *invalidation error*.
3. A schema *passes* if it compiled and every instance was judged correctly.

Every schema lands in exactly one class: passing, compile error, timeout (compile +
all instances took more than ``--timeout`` s: the worker is killed), crash (the worker
died, or the engine raised while stepping an instance), validation error, invalidation
error (if both, it counts as invalidation error and the message says so).

TTFM is over schemas that produced a first mask; TBM over every mask fill while
stepping instances (valid and invalid, up to the first rejected token, plus the final
EOS check).  Percentiles are nearest-rank.  Each worker warms its engine up on a tiny
schema first, so one-time per-process costs (vocabulary trie, Unicode tables) are not
charged to the first schema; before each schema (outside the timing) guided's
compiled-spec caches are cleared, so every schema compiles cold, as llguidance does.
guided is called per the contract, ``guided.compile(schema_dict, vocab, timeout=None)``
(its default whitespace; ``--timeout`` limits every engine alike); ``--guided-whitespace compact`` compiles
``guided.JsonSchema(schema, whitespace="compact")`` instead, matching llguidance's setup;
``--guided-key-order any`` lets object keys come in any order (llguidance, like guided's
default, wants them in ``properties`` order); ``--recheck-key-order`` reruns guided's
validation errors with keys in any order and reports how many were refused for key
order alone.

llguidance (``pip install llguidance``; a benchmark-only dependency) is set up as::

    tok = llguidance.hf.from_tokenizer(hf_tokenizer, eos_token=hf_tokenizer.eos_token_id)
    grammar = llguidance.LLMatcher.grammar_from_json_schema(
        schema, defaults={"whitespace_flexible": False})    # compact, otherwise default options
    m = llguidance.LLMatcher(tok, grammar, log_level=0)     # m.is_error() -> compile error
    llguidance.torch.fill_next_token_bitmask(m, bitmask, 0) # m.is_error() after it -> compile error
    m.deep_copy() per instance; m.consume_token(tok)

XGrammar (``pip install --no-deps xgrammar apache-tvm-ffi``; also benchmark-only) as::

    info = xgrammar.TokenizerInfo.from_huggingface(hf_tokenizer, stop_token_ids=[eos])
    compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    compiled = compiler.compile_json_schema(schema, any_whitespace=False, separators=(",", ":"))
    m = xgrammar.GrammarMatcher(compiled) per instance; m.fill_next_token_bitmask; m.accept_token

Usage::

    python benchmarks/maskbench.py [--engine guided|llguidance|xgrammar|both|all] [--sample N --seed S]
        [--workers N] [--timeout 60] [--limit-tests K] [--only ID_SUBSTRING]
        [--data PATH] [--json-out FILE] [--guided-whitespace compact|flexible]
        [--guided-key-order schema|any] [--recheck-key-order] [--ids FILE] [--results LOG.jsonl]

The whole data set with ``--engine both`` and one worker takes about ten minutes on a
2-core machine (guided ~6, llguidance ~4). With ``--results LOG.jsonl`` every schema's
result is appended to the log as it finishes, and a later run with the same log skips
what is already there, so a long run can be stopped and resumed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import multiprocessing
import os
import random
import re
import sys
import time
import traceback
from collections import Counter, defaultdict
from multiprocessing.connection import wait as mp_wait

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

DEFAULT_DATA = os.path.join(ROOT, "..", "shared", "bench", "maskbench.jsonl.gz")

PASSING = "passing"
COMPILE_ERROR = "compile error"
TIMEOUT = "timeout"
CRASH = "crash"
VALIDATION_ERROR = "validation error"
INVALIDATION_ERROR = "invalidation error"
STATUSES = (PASSING, COMPILE_ERROR, TIMEOUT, CRASH, VALIDATION_ERROR, INVALIDATION_ERROR)

PERCENTILES = (50, 75, 90, 95, 99)

#: Compiled in each worker before the timed schemas: it loads what a process loads
#: once (every compiled kernel where numba is installed: the pattern with a length makes
#: a product, the open value ``e`` builds deferred parts while stepping), so no
#: schema's TTFM pays for it.
WARMUP_SCHEMA = {
    "type": "object",
    "properties": {
        "a": {"type": "string", "pattern": "^\\w+\\d*$"},
        "b": {"type": "integer", "minimum": 0},
        "c": {"type": "array", "items": {"type": "number"}},
        "d": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8},
        "e": {},
    },
    "required": ["a"],
}
WARMUP_TESTS = [{"data": {"a": "x1", "b": 2, "c": [1.5], "e": [{"f": [1, "g"]}]}, "valid": True}]
#: ... and a recursive one: grammar schemas share the vocabulary's pieces (~0.7 s to
#: build, once per process).
WARMUP_RECURSIVE_SCHEMA = {
    "$defs": {"node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
    "$ref": "#/$defs/node",
}
WARMUP_RECURSIVE_TESTS = [{"data": {"kids": [{"kids": []}]}, "valid": True}]


# --------------------------------------------------------------------------- data


def category(schema_id: str) -> str:
    """``Github_medium---o123.json`` -> ``Github_medium``; ``BFCL_java_12.json`` -> ``BFCL_java``."""
    if "---" in schema_id:
        return schema_id.split("---", 1)[0]
    return re.sub(r"(_\d+)?\.json$", "", schema_id)


def load_records(path: str) -> list[dict]:
    opener = gzip.open if path.endswith(".gz") else open
    out = []
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                out.append(json.loads(line))
    return out


def stratified_sample(ids: list[str], n: int | None, seed: int = 0) -> list[int]:
    """Indices of a proportional, deterministic stratified sample of ``ids`` by category.

    Each category gets ``n * size / total`` rounded by largest remainder (ties broken
    by category name); members are drawn with a RNG seeded by ``(seed, category)``, so
    a category's draw does not depend on the others.  Returned in input order.
    """
    total = len(ids)
    if n is None or n >= total:
        return list(range(total))
    if n <= 0:
        return []
    groups: dict[str, list[int]] = defaultdict(list)
    for i, sid in enumerate(ids):
        groups[category(sid)].append(i)
    cats = sorted(groups)
    exact = {c: n * len(groups[c]) / total for c in cats}
    quota = {c: int(math.floor(exact[c])) for c in cats}
    left = n - sum(quota.values())
    for c in sorted(cats, key=lambda c: (-(exact[c] - quota[c]), -len(groups[c]), c))[:left]:
        quota[c] += 1
    chosen: list[int] = []
    for c in cats:
        rng = random.Random(f"maskbench:{seed}:{c}")
        chosen.extend(rng.sample(groups[c], quota[c]))
    return sorted(chosen)


def serialise(data) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


# --------------------------------------------------------------------------- classification


def first_line(text: str, limit: int = 300) -> str:
    text = str(text).strip()
    line = text.splitlines()[0] if text else ""
    return line[:limit]


def exception_message(exc: BaseException) -> str:
    return first_line(f"{type(exc).__name__}: {exc}")


# Quoted words kept by normalise_message: JSON-Schema keywords and engine option names
# name the cause; anything else quoted is a value (a property name, a pattern, ...).
KEEP_QUOTED = frozenset("""
$ref $defs $id $schema $anchor $dynamicRef $dynamicAnchor $recursiveRef $recursiveAnchor $comment
$vocabulary definitions type enum const format pattern patternProperties properties required
additionalProperties unevaluatedProperties unevaluatedItems propertyNames minProperties maxProperties
items prefixItems additionalItems contains minContains maxContains minItems maxItems uniqueItems
minLength maxLength minimum maximum exclusiveMinimum exclusiveMaximum multipleOf allOf anyOf oneOf
not if then else dependentRequired dependentSchemas dependencies contentEncoding contentMediaType
contentSchema default examples title description readOnly writeOnly deprecated nullable
string number integer boolean object array null coerce_one_of lenient whitespace_flexible
""".split())

_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`")
_KEEP_LIST = re.compile(r"^\s*(?:\"[^\"…]*\"|'[^'…]*'|`[^`…]*`)(?:\s*,\s*(?:\"[^\"…]*\"|'[^'…]*'|`[^`…]*`))*\s*$")


def _quoted(m: "re.Match") -> str:
    text = m.group(0)
    return text if text[1:-1] in KEEP_QUOTED else text[0] + "…" + text[-1]


def _bracketed(m: "re.Match") -> str:
    inner = m.group(0)[1:-1]
    return m.group(0) if _KEEP_LIST.match(inner) else "[…]"


_NORMALISERS = [
    (re.compile(r"#/[^\s,;:'\"()\]\[}{]*"), "#/<ptr>"),  # JSON pointers with fragment
    (re.compile(r"(?<![\w#<])/(?:[\w$.~%-]+/)+[\w$.~%-]*"), "/<ptr>"),  # /properties/foo/...
    (_QUOTED, _quoted),
    (re.compile(r"\{[^{}]*\}"), "{…}"),
    (re.compile(r"\[[^\[\]]*\]"), _bracketed),
    (re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.])"), "N"),
    (re.compile(r"\s+"), " "),
]


def normalise_message(message: str, limit: int = 120) -> str:
    """Strip JSON pointers, quoted values and numbers so that identical causes group.

    Quoted JSON-Schema keywords (``"not"``, ``'oneOf'``) and lists of them are kept.
    """
    msg = first_line(message, 2000)
    for pat, rep in _NORMALISERS:
        msg = pat.sub(rep, msg)
    msg = msg.strip()
    return msg if len(msg) <= limit else msg[: limit - 1] + "…"


def classify(instances: list[tuple[bool, bool]]) -> tuple[str, str]:
    """(status, message) from ``(valid, accepted)`` per instance of a compiled schema."""
    valid_rejected = [i for i, (valid, acc) in enumerate(instances) if valid and not acc]
    invalid_accepted = [i for i, (valid, acc) in enumerate(instances) if not valid and acc]
    if invalid_accepted and valid_rejected:
        return INVALIDATION_ERROR, (
            f"invalid instances accepted: {invalid_accepted}; "
            f"also valid instances rejected: {valid_rejected}"
        )
    if invalid_accepted:
        return INVALIDATION_ERROR, f"invalid instances accepted: {invalid_accepted}"
    if valid_rejected:
        return VALIDATION_ERROR, f"valid instances rejected: {valid_rejected}"
    return PASSING, ""


def bit_is_set(words, token: int) -> bool:
    """Bit ``token`` of a flat int32 word array (numpy view of one bitmask row)."""
    w = token >> 5
    if token < 0 or w >= len(words):
        return False
    return (int(words[w]) >> (token & 31)) & 1 == 1


def judge_instance(engine, compiled, tokens: list[int], bitmask, words, samples: list[int],
                   clock=time.perf_counter_ns) -> tuple[bool, int]:
    """Step ``tokens`` through a fresh matcher; (accepted, index of the first bad token or -1).

    Every mask fill's duration (ns) is appended to ``samples``.  ``len(tokens)`` as the
    index means the text was consumed but EOS was not allowed at the end.
    """
    m = engine.new_matcher(compiled)
    for pos, tok in enumerate(tokens):
        t0 = clock()
        engine.fill(m, bitmask)
        samples.append(clock() - t0)
        if not bit_is_set(words, tok):
            return False, pos
        if not engine.accept(m, tok):
            return False, pos
    t0 = clock()
    engine.fill(m, bitmask)
    samples.append(clock() - t0)
    if not bit_is_set(words, engine.eos):
        return False, len(tokens)
    return True, -1


def run_schema(engine, schema, tests: list[dict], tokenize, clock=time.perf_counter_ns) -> dict:
    """Compile ``schema``, time the first mask, judge every test instance.

    Returns a dict with ``status`` (never timeout; crash only when the engine raised
    while stepping), ``message``, ``ttfm_us`` (None when it did not compile),
    ``tbm_ns`` (list of mask-fill durations) and per-instance ``instances``.
    """
    bitmask = engine.allocate()
    words = bitmask.numpy()[0] if hasattr(bitmask, "numpy") else bitmask[0]
    reset = getattr(engine, "reset", None)
    if reset is not None:
        reset()
    t0 = clock()
    try:
        compiled = engine.compile(schema)
        m = engine.new_matcher(compiled)
        engine.fill(m, bitmask)
        err = engine.error(m)
    except Exception as exc:  # noqa: BLE001 - any compile-time failure is a compile error
        return _result(COMPILE_ERROR, exception_message(exc))
    ttfm_ns = clock() - t0
    if err:
        return _result(COMPILE_ERROR, first_line(err))
    samples: list[int] = []
    judged: list[tuple[bool, bool]] = []
    details = []
    for k, test in enumerate(tests):
        valid = bool(test["valid"])
        tokens = tokenize(serialise(test["data"]))
        try:
            accepted, bad = judge_instance(engine, compiled, tokens, bitmask, words, samples, clock)
        except Exception as exc:  # noqa: BLE001
            res = _result(CRASH, f"instance {k}: {exception_message(exc)}", ttfm_ns / 1000.0, samples)
            res["instances"] = details
            return res
        judged.append((valid, accepted))
        details.append({"valid": valid, "accepted": accepted, "tokens": len(tokens), "stop": bad})
    status, message = classify(judged)
    res = _result(status, message, ttfm_ns / 1000.0, samples)
    res["instances"] = details
    return res


def _result(status, message="", ttfm_us=None, tbm_ns=None) -> dict:
    return {"status": status, "message": message, "ttfm_us": ttfm_us, "tbm_ns": list(tbm_ns or []),
            "instances": []}


# --------------------------------------------------------------------------- statistics / tables


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an already sorted, non-empty list."""
    n = len(sorted_values)
    k = max(0, min(n - 1, int(math.ceil(p / 100.0 * n)) - 1))
    return sorted_values[k]


def summarise(values) -> dict | None:
    vals = sorted(values)
    if not vals:
        return None
    out = {"n": len(vals), "avg": sum(vals) / len(vals)}
    for p in PERCENTILES:
        out[f"p{p}"] = percentile(vals, p)
    out["max"] = vals[-1]
    return out


STAT_COLUMNS = ["avg"] + [f"p{p}" for p in PERCENTILES] + ["max"]


def _fmt_num(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def format_stats_table(rows: list[tuple[str, dict | None]]) -> str:
    """Rows like ``TTFM us  avg p50 ... max`` (right-aligned columns) plus sample counts."""
    header = ["", *STAT_COLUMNS, "n"]
    body = []
    for label, st in rows:
        if st is None:
            body.append([label] + ["-"] * len(STAT_COLUMNS) + ["0"])
        else:
            body.append([label] + [_fmt_num(st[c]) for c in STAT_COLUMNS] + [f"{st['n']:,}"])
    table = [header] + body
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = []
    for r in table:
        cells = [r[0].ljust(widths[0])] + [r[i].rjust(widths[i]) for i in range(1, len(r))]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def format_status_line(counts: Counter, total: int) -> str:
    """``passing | compile error | ...`` over ``count (pct%)`` cells, columns aligned."""
    heads, cells = [], []
    for s in STATUSES:
        c = counts.get(s, 0)
        pct = 100.0 * c / total if total else 0.0
        cell = f"{c} ({pct:.1f}%)"
        w = max(len(s), len(cell))
        heads.append(s.ljust(w))
        cells.append(cell.ljust(w))
    return " | ".join(heads).rstrip() + "\n" + " | ".join(cells).rstrip()


def engine_report(engine: str, results: list[dict], top: int = 15, list_ids: int = 20, config: str = "") -> str:
    counts = Counter(r["status"] for r in results)
    ttfm = summarise(r["ttfm_us"] for r in results if r.get("ttfm_us") is not None)
    tbm = summarise(x / 1000.0 for r in results for x in r.get("tbm_ns") or [])
    out = [f"engine: {engine}    schemas: {len(results)}" + (f"    ({config})" if config else ""),
           format_stats_table([("TTFM us", ttfm), ("TBM  us", tbm)]),
           "",
           format_status_line(counts, len(results))]
    errs = Counter(normalise_message(r["message"]) for r in results if r["status"] == COMPILE_ERROR)
    if errs:
        out.append("")
        out.append(f"top compile errors ({sum(errs.values())} schemas, {len(errs)} distinct causes):")
        for msg, c in errs.most_common(top):
            out.append(f"  {c:5d}  {msg}")
    tail = tbm_tail(results)
    if tail:
        out.append("")
        out.append(tail)
    for status in (TIMEOUT, CRASH, VALIDATION_ERROR, INVALIDATION_ERROR):
        bad = [r for r in results if r["status"] == status]
        if not bad:
            continue
        out.append("")
        more = f" (first {list_ids})" if len(bad) > list_ids else ""
        out.append(f"{status} ({len(bad)}){more}:")
        rechecked = [r["key_order_only"] for r in bad if "key_order_only" in r]
        if rechecked:
            out.append(f"  ({sum(rechecked)} refused only for key order: accepted with key_order=\"any\"; "
                       f"{len(bad) - sum(rechecked)} for other reasons)")
        for r in bad[:list_ids]:
            out.append(f"  {r['id']}  {first_line(r['message'], 160)}")
    by_cat: dict[str, Counter] = defaultdict(Counter)
    for r in results:
        by_cat[r["category"]][r["status"]] += 1
    out.append("")
    out.append("passing by category:")
    for cat in sorted(by_cat, key=lambda c: (-sum(by_cat[c].values()), c)):
        n = sum(by_cat[cat].values())
        out.append(f"  {cat:<24} {by_cat[cat][PASSING]:5d} / {n:<5d} ({100.0 * by_cat[cat][PASSING] / n:5.1f}%)")
    return "\n".join(out)


def tbm_tail(results: list[dict], p: float = 99, top: int = 10) -> str:
    """Where the TBM tail sits: the schemas holding the most masks slower than the
    whole run's ``p``-th percentile, each with its share of those masks. A tail that
    a few schemas hold is a different problem from one spread thin."""
    everything = sorted(x for r in results for x in r.get("tbm_ns") or [])
    if len(everything) < 100:
        return ""
    cut = percentile(everything, p)
    over = Counter({r["id"]: n for r in results if (n := sum(1 for x in r.get("tbm_ns") or [] if x > cut))})
    total = sum(over.values())
    if not total:
        return ""
    lines = [f"TBM tail: {total:,} masks over p{p:g} ({cut / 1000.0:,.0f} us) in {len(over):,} schemas; "
             f"the {min(top, len(over))} with the most:"]
    for sid, n in over.most_common(top):
        lines.append(f"  {n:7,d} ({100.0 * n / total:4.1f}%)  {sid}")
    return "\n".join(lines)


def side_by_side(all_results: dict[str, list[dict]]) -> str:
    engines = list(all_results)
    rows = [["", *engines]]
    for s in STATUSES:
        rows.append([s] + [str(sum(1 for r in all_results[e] if r["status"] == s)) for e in engines])
    stats = {}
    for e in engines:
        stats[e] = (summarise(r["ttfm_us"] for r in all_results[e] if r.get("ttfm_us") is not None),
                    summarise(x / 1000.0 for r in all_results[e] for x in r.get("tbm_ns") or []))
    for which, name in ((0, "TTFM"), (1, "TBM")):
        for col in ("p50", "p95", "max"):
            rows.append([f"{name} {col} us"] + [
                _fmt_num(stats[e][which][col]) if stats[e][which] else "-" for e in engines])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["side by side (same sample):"]
    for r in rows:
        lines.append("  " + "  ".join([r[0].ljust(widths[0])] + [r[i].rjust(widths[i]) for i in range(1, len(r))]))
    if len(engines) == 2:
        a, b = engines
        for which, name in ((0, "TTFM"), (1, "TBM")):
            sa, sb = stats[a][which], stats[b][which]
            if sa and sb and sb["p50"] > 0:
                lines.append(f"  {name} p50 ratio {a}/{b}: {sa['p50'] / sb['p50']:.2f}x")
        by_id = {e: {r["id"]: r["status"] for r in all_results[e]} for e in engines}
        only_b = [i for i in by_id[b] if by_id[b][i] == PASSING and by_id[a].get(i) != PASSING]
        only_a = [i for i in by_id[a] if by_id[a][i] == PASSING and by_id[b].get(i) != PASSING]
        lines.append(f"  passing only with {b}: {len(only_b)}; only with {a}: {len(only_a)}")
        for label, ids in ((f"only {b}", only_b), (f"only {a}", only_a)):
            if ids:
                lines.append(f"    {label} (first 20): " + ", ".join(ids[:20]))
    return "\n".join(lines)


# --------------------------------------------------------------------------- engines


class MatcherContract:
    """Steps a matcher with ``fill_next_token_bitmask`` / ``accept_token``: guided's
    contract, which XGrammar's ``GrammarMatcher`` shares."""

    def fill(self, m, bitmask):
        m.fill_next_token_bitmask(bitmask, 0)

    def accept(self, m, tok: int) -> bool:
        return bool(m.accept_token(tok))

    def error(self, m) -> str:
        return ""


class GuidedEngine(MatcherContract):
    """Our engine, through the public matcher contract."""

    name = "guided"

    def __init__(self, hf_tokenizer, whitespace: str | None = None, key_order: str | None = None):
        import guided

        self._guided = guided
        self.whitespace = whitespace
        self.key_order = key_order
        self.vocab = guided.Vocabulary.from_tokenizer(hf_tokenizer)
        self.vocab_size = self.vocab.size
        self.eos = self.vocab.eos_token_ids[0]

    def reset(self) -> None:
        """Drop compiled-spec caches (outside the timing), so every schema compiles cold."""
        import guided.fsm.regex

        self._guided.clear_cache()
        for fn in (getattr(guided.fsm.regex, "compile_regex", None),):
            if hasattr(fn, "cache_clear"):
                fn.cache_clear()
        import guided.fsm.memo

        # Minimised automata are memoised by content; similar schemas (MaskBench has
        # families of near-copies) would otherwise share whole sub-automata.
        guided.fsm.memo.clear()

    def allocate(self):
        return self._guided.allocate_token_bitmask(1, self.vocab_size)

    def compile(self, schema):
        if self.whitespace is not None or self.key_order is not None:
            schema = self._guided.JsonSchema(schema, whitespace=self.whitespace or "flexible",
                                             key_order=self.key_order or "schema")
        # No compile time limit of guided's own: --timeout bounds every engine alike.
        return self._guided.compile(schema, self.vocab, timeout=None)

    def new_matcher(self, compiled):
        return compiled.matcher()


class LLGuidanceCompileError(ValueError):
    pass


class LLGuidanceEngine:
    """llguidance 1.x: compact JSON (no flexible whitespace), default options otherwise."""

    name = "llguidance"

    def __init__(self, hf_tokenizer):
        import llguidance
        import llguidance.hf
        import llguidance.torch

        self._ll = llguidance
        self.tok = llguidance.hf.from_tokenizer(hf_tokenizer, eos_token=hf_tokenizer.eos_token_id)
        self.vocab_size = self.tok.vocab_size
        self.eos = self.tok.eos_token

    def allocate(self):
        return self._ll.torch.allocate_token_bitmask(1, self.vocab_size)

    def compile(self, schema):
        grammar = self._ll.LLMatcher.grammar_from_json_schema(
            schema, defaults={"whitespace_flexible": False})
        m = self._ll.LLMatcher(self.tok, grammar, log_level=0)
        if m.is_error():
            raise LLGuidanceCompileError(m.get_error())
        return m

    def new_matcher(self, compiled):
        return compiled.deep_copy()

    def fill(self, m, bitmask):
        self._ll.torch.fill_next_token_bitmask(m, bitmask, 0)

    def accept(self, m, tok: int) -> bool:
        return bool(m.consume_token(tok))

    def error(self, m) -> str:
        return m.get_error() if m.is_error() else ""


class XGrammarEngine(MatcherContract):
    """XGrammar 0.2.x: compact JSON (``any_whitespace=False``, separators ``,`` and ``:``),
    schema key order, strict mode, no compile cache (every schema compiles cold)."""

    name = "xgrammar"

    def __init__(self, hf_tokenizer):
        import xgrammar

        self._xgr = xgrammar
        self.eos = hf_tokenizer.eos_token_id
        info = xgrammar.TokenizerInfo.from_huggingface(hf_tokenizer, stop_token_ids=[self.eos])
        self.vocab_size = info.vocab_size
        self._compiler = xgrammar.GrammarCompiler(info, max_threads=1, cache_enabled=False)

    def allocate(self):
        return self._xgr.allocate_token_bitmask(1, self.vocab_size)

    def compile(self, schema):
        text = schema if isinstance(schema, str) else json.dumps(schema)
        return self._compiler.compile_json_schema(text, any_whitespace=False, separators=(",", ":"))

    def new_matcher(self, compiled):
        return self._xgr.GrammarMatcher(compiled)


def smollm2_tokenizer():
    from tests.tokenizer_zoo import smollm2

    return smollm2()


def make_engine(spec: str, options: dict | None = None):
    """(engine, tokenize) for ``guided``, ``llguidance`` or ``module:factory`` (tests)."""
    options = options or {}
    if ":" in spec:
        mod, attr = spec.split(":", 1)
        import importlib

        return getattr(importlib.import_module(mod), attr)()
    import torch

    torch.set_num_threads(1)
    hf = smollm2_tokenizer()

    def tokenize(text: str) -> list[int]:
        return hf.encode(text, add_special_tokens=False)

    if spec == "guided":
        return GuidedEngine(hf, whitespace=options.get("guided_whitespace"),
                            key_order=options.get("guided_key_order")), tokenize
    if spec == "llguidance":
        return LLGuidanceEngine(hf), tokenize
    if spec == "xgrammar":
        return XGrammarEngine(hf), tokenize
    raise ValueError(f"unknown engine {spec!r}")


# --------------------------------------------------------------------------- worker processes


def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none."""
    import ctypes
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def warm_up(engine, tokenize) -> None:
    """Run the warm-up schemas (untimed): compiled kernels are loaded from numba's
    cache at their first call (up to ~0.2 s), which would otherwise land in some
    schema's mask."""
    for schema, tests in ((WARMUP_SCHEMA, WARMUP_TESTS), (WARMUP_RECURSIVE_SCHEMA, WARMUP_RECURSIVE_TESTS)):
        try:
            run_schema(engine, schema, tests, tokenize)
        except Exception:  # noqa: BLE001 - warm-up is best effort
            pass


def _worker_main(conn, engine_spec: str, options: dict | None = None) -> None:
    # Between schemas (outside the timed parts) the worker hands the heap pages the
    # last schema freed back to the system. glibc keeps them otherwise: a worker grew
    # to 8.2 GB resident over a whole-set run, while a replay of the same schemas
    # held under 1 GB once trimmed (live objects did not grow).
    trim = _malloc_trim()
    try:
        engine, tokenize = make_engine(engine_spec, options)
        warm_up(engine, tokenize)
    except BaseException as exc:  # noqa: BLE001 - includes pytest.skip's Skipped
        conn.send(("init_error", f"{exception_message(exc)}\n{traceback.format_exc()}"))
        return
    conn.send(("ready", os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        idx, schema, tests = msg
        try:
            res = run_schema(engine, schema, tests, tokenize)
        except Exception as exc:  # noqa: BLE001 - e.g. the tokenizer or serialisation failed
            res = _result(CRASH, f"harness: {exception_message(exc)}")
        conn.send(("result", idx, res))
        if trim is not None:
            trim(0)


class WorkerInitError(RuntimeError):
    pass


class _Worker:
    def __init__(self, ctx, engine_spec: str, options: dict | None = None):
        self.parent, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_worker_main, args=(child, engine_spec, options), daemon=True)
        self.proc.start()
        child.close()
        self.ready = False
        self.task: int | None = None
        self.deadline = 0.0
        self.started = time.monotonic()

    def stop(self, kill: bool) -> None:
        if kill:
            self.proc.kill()
        else:
            try:
                self.parent.send(None)
            except (OSError, BrokenPipeError):
                pass
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.parent.close()


def run_pool(engine_spec: str, tasks: list[tuple], workers: int = 1, timeout: float = 60.0,
             on_result=None, startup_timeout: float = 600.0, options: dict | None = None) -> list[dict]:
    """Run ``tasks`` = [(schema, tests), ...] in ``workers`` processes; results in order.

    A task that is not answered within ``timeout`` seconds of being sent is a timeout
    (its worker is killed and replaced); a worker that dies mid-task is a crash.
    """
    ctx = multiprocessing.get_context("spawn")
    results: list[dict | None] = [None] * len(tasks)
    pending = list(range(len(tasks) - 1, -1, -1))  # a stack, popped from the end
    pool = [_Worker(ctx, engine_spec, options) for _ in range(max(1, min(workers, len(tasks) or 1)))]
    done = 0

    def finish(idx: int, res: dict) -> None:
        nonlocal done
        results[idx] = res
        done += 1
        if on_result is not None:
            on_result(idx, res)

    try:
        while done < len(tasks):
            for w in pool:
                if w.ready and w.task is None and pending:
                    idx = pending.pop()
                    schema, tests = tasks[idx]
                    w.task = idx
                    w.deadline = time.monotonic() + timeout
                    w.parent.send((idx, schema, tests))
            now = time.monotonic()
            waits = [w.deadline - now for w in pool if w.task is not None]
            waits += [w.started + startup_timeout - now for w in pool if not w.ready]
            wait_s = max(0.0, min(waits)) if waits else None
            objs = {}
            for w in pool:
                objs[w.parent] = w
                objs[w.proc.sentinel] = w
            ready_objs = mp_wait(list(objs), timeout=wait_s)
            replace: list[tuple[_Worker, bool]] = []
            seen = set()
            for obj in ready_objs:
                w = objs[obj]
                if id(w) in seen:
                    continue
                seen.add(id(w))
                msg = None
                try:
                    if w.parent.poll():
                        msg = w.parent.recv()
                except (EOFError, OSError):
                    msg = None
                if msg is None:
                    # the process died (sentinel) or the pipe closed
                    if w.proc.is_alive() and obj is w.proc.sentinel:
                        continue
                    w.proc.join(timeout=1)
                    code = w.proc.exitcode
                    if not w.ready:
                        raise WorkerInitError(f"worker for {engine_spec!r} died during start-up (exit code {code})")
                    if w.task is not None:
                        finish(w.task, _result(CRASH, f"worker died (exit code {code})"))
                        w.task = None
                    replace.append((w, True))
                elif msg[0] == "ready":
                    w.ready = True
                elif msg[0] == "init_error":
                    raise WorkerInitError(f"engine {engine_spec!r} failed to start: {msg[1]}")
                elif msg[0] == "result":
                    _, idx, res = msg
                    if w.task == idx:
                        w.task = None
                        finish(idx, res)
            now = time.monotonic()
            for w in pool:
                if any(w is r for r, _ in replace):
                    continue
                if w.task is not None and now >= w.deadline:
                    finish(w.task, _result(TIMEOUT, f"no result after {timeout:g} s"))
                    w.task = None
                    replace.append((w, True))
                elif not w.ready and now >= w.started + startup_timeout:
                    raise WorkerInitError(f"worker for {engine_spec!r} did not start within {startup_timeout:g} s")
            for w, kill in replace:
                w.stop(kill)
                if pending:
                    pool[pool.index(w)] = _Worker(ctx, engine_spec, options)
                else:
                    pool.remove(w)
    finally:
        for w in pool:
            w.stop(kill=w.task is not None or not w.ready)
    return results  # type: ignore[return-value]


# --------------------------------------------------------------------------- CLI


def load_results_log(path: str | None, engine: str) -> dict[str, dict]:
    """Results already in a ``--results`` log for ``engine``, by schema id."""
    done: dict[str, dict] = {}
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue  # a line cut short when an earlier run was stopped
                if row.get("engine") == engine:
                    done[row["id"]] = row["result"]
    return done


def record_tests(record: dict, args) -> list[dict]:
    tests = record.get("tests") or []
    return tests if args.limit_tests is None else tests[: args.limit_tests]


def run_engine(engine: str, records: list[dict], args, progress=sys.stderr, label: str | None = None,
               options: dict | None = None, tests_of=None) -> list[dict]:
    """Run ``engine`` over ``records``. With ``args.results`` each result is appended
    to that JSON-lines log as it comes (under ``label``, default the engine's name), and
    schemas already in it are not run again, so a stopped run resumes where it was.
    ``options`` default to the command line's; ``tests_of(record)`` picks the instances."""
    label = label or engine
    if options is None:
        options = {"guided_whitespace": args.guided_whitespace, "guided_key_order": args.guided_key_order}
    tests_of = tests_of or (lambda r: record_tests(r, args))
    done = load_results_log(args.results, label)
    todo = [r for r in records if r["id"] not in done]
    if done:
        print(f"[{label}] {len(records) - len(todo)} schemas already in {args.results}; running {len(todo)}",
              file=progress, flush=True)
    tasks = [(r["schema"], [{"data": t["data"], "valid": t["valid"]} for t in tests_of(r)]) for r in todo]
    counts: Counter = Counter()
    t_start = time.monotonic()
    every = max(1, args.progress_every)
    log = open(args.results, "a", encoding="utf-8") if args.results else None

    def on_result(idx, res):
        if log is not None:
            log.write(json.dumps({"engine": label, "id": todo[idx]["id"], "result": res}) + "\n")
            log.flush()
        counts[res["status"]] += 1
        n = sum(counts.values())
        if n % every == 0 or n == len(tasks):
            parts = ", ".join(f"{s}={counts[s]}" for s in STATUSES)
            print(f"[{label}] {n}/{len(tasks)}  {parts}  {time.monotonic() - t_start:.1f}s",
                  file=progress, flush=True)

    try:
        raw = run_pool(engine, tasks, workers=args.workers, timeout=args.timeout, on_result=on_result,
                       options=options) if tasks else []
    finally:
        if log is not None:
            log.close()
    fresh = {r["id"]: res for r, res in zip(todo, raw)}
    out = []
    for r in records:
        res = dict(fresh[r["id"]] if r["id"] in fresh else done[r["id"]])
        res["id"] = r["id"]
        res["category"] = category(r["id"])
        out.append(res)
    return out


KEY_ORDER_RECHECK = "guided, key order recheck"


def recheck_key_order(records: list[dict], results: list[dict], args) -> None:
    """Set ``key_order_only`` on each guided validation error: True when every valid
    instance it refused is accepted once keys may come in any order (``key_order="any"``,
    same whitespace), i.e. the instance was refused only for writing its keys out of
    ``properties`` order. A False may still be key order inside ``oneOf`` / ``not`` /
    ``if``, where objects keep schema order even then."""
    refused = {r["id"]: [i for i, inst in enumerate(r["instances"]) if inst["valid"] and not inst["accepted"]]
               for r in results if r["status"] == VALIDATION_ERROR}
    again = run_engine("guided", [r for r in records if r["id"] in refused], args, label=KEY_ORDER_RECHECK,
                       options={"guided_whitespace": args.guided_whitespace, "guided_key_order": "any"},
                       tests_of=lambda r: [record_tests(r, args)[i] for i in refused[r["id"]]])
    only_order = {r["id"]: r["status"] == PASSING for r in again}
    for r in results:
        if r["id"] in only_order:
            r["key_order_only"] = only_order[r["id"]]


def write_json(path: str, all_results: dict[str, list[dict]]) -> None:
    rows = []
    for engine, results in all_results.items():
        for r in results:
            tbm = r.get("tbm_ns") or []
            rows.append({
                "engine": engine, "id": r["id"], "category": r["category"], "status": r["status"],
                "ttfm_us": r.get("ttfm_us"), "tbm_count": len(tbm),
                "tbm_p50_us": (percentile(sorted(tbm), 50) / 1000.0) if tbm else None,
                "tbm_max_us": (max(tbm) / 1000.0) if tbm else None,
                "tbm_over_200_us": sum(1 for x in tbm if x > 200_000),
                "message": r.get("message", ""), "instances": r.get("instances", []),
                "key_order_only": r.get("key_order_only"),
            })
    with open(path, "w", encoding="utf-8") as f:
        json.dump(rows, f, ensure_ascii=False, indent=0)


def engine_config(engine: str, args) -> str:
    if engine == "guided":
        if args.guided_whitespace or args.guided_key_order:
            return (f"guided.compile(guided.JsonSchema(schema, whitespace={args.guided_whitespace or 'flexible'!r}, "
                    f"key_order={args.guided_key_order or 'schema'!r}), vocab)")
        return "guided.compile(schema_dict, vocab)"
    if engine in ("llguidance", "xgrammar"):
        try:
            from importlib.metadata import version

            v = version(engine)
        except Exception:  # noqa: BLE001
            v = "?"
        if engine == "xgrammar":
            return f"xgrammar {v}, any_whitespace=False, separators (',', ':'), other options default"
        return f"llguidance {v}, whitespace_flexible=False, other JSON options default"
    return ""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engine", choices=("guided", "llguidance", "xgrammar", "both", "all"), default="guided",
                   help="both: guided and llguidance; all: guided, llguidance and xgrammar")
    p.add_argument("--data", default=DEFAULT_DATA, help="maskbench.jsonl.gz (default: %(default)s)")
    p.add_argument("--sample", type=int, default=None, help="stratified sample of N schemas (default: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per schema (compile + all instances)")
    p.add_argument("--limit-tests", type=int, default=None, help="at most K test instances per schema")
    p.add_argument("--only", default=None, help="only schemas whose id contains this substring")
    p.add_argument("--json-out", default=None, help="write per-schema results to this JSON file")
    p.add_argument("--results", default=None, metavar="LOG.jsonl",
                   help="append each schema's result to this log as it finishes, and skip schemas "
                        "already in it (resume a stopped run; use one log per configuration)")
    p.add_argument("--progress-every", type=int, default=50)
    p.add_argument("--guided-whitespace", choices=("compact", "flexible"), default=None,
                   help="compile guided.JsonSchema(schema, whitespace=...) instead of the plain dict "
                        "(default: the plain dict, i.e. guided's default whitespace)")
    p.add_argument("--guided-key-order", choices=("schema", "any"), default=None,
                   help="compile guided.JsonSchema(schema, key_order=...): object keys in properties "
                        "order (guided's default, as in llguidance) or in any order")
    p.add_argument("--recheck-key-order", action="store_true",
                   help="rerun guided's validation errors with key_order='any' and report how many "
                        "were refused only for the order of their keys")
    p.add_argument("--ids", default=None, metavar="FILE",
                   help="only the schemas whose ids are listed in FILE, one per line")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    import guided

    guided.load_kernels()  # numba loaded before anything is timed, as a server loads it at start-up
    if not os.path.exists(args.data):
        print(f"maskbench: data file not found: {os.path.normpath(args.data)} "
              f"(pass --data PATH); nothing to do", file=sys.stderr)
        return 0
    records = load_records(args.data)
    if args.only:
        records = [r for r in records if args.only in r["id"]]
    if args.ids:
        with open(args.ids, encoding="utf-8") as f:
            wanted = {line.strip() for line in f if line.strip()}
        records = [r for r in records if r["id"] in wanted]
    picked = stratified_sample([r["id"] for r in records], args.sample, args.seed)
    records = [records[i] for i in picked]
    if not records:
        print("maskbench: no schemas selected", file=sys.stderr)
        return 0
    n_tests = sum(len(r.get("tests") or []) if args.limit_tests is None
                  else min(args.limit_tests, len(r.get("tests") or [])) for r in records)
    print(f"maskbench: {len(records)} schemas, {n_tests} test instances, workers={args.workers}, "
          f"timeout={args.timeout:g}s, seed={args.seed}", file=sys.stderr)
    engines = {"both": ["guided", "llguidance"], "all": ["guided", "llguidance", "xgrammar"]}.get(
        args.engine, [args.engine])
    all_results: dict[str, list[dict]] = {}
    failed = []
    for engine in engines:
        t0 = time.monotonic()
        try:
            all_results[engine] = run_engine(engine, records, args)
        except WorkerInitError as exc:
            print(f"maskbench: {exc}", file=sys.stderr)
            print(f"engine: {engine}    FAILED TO START: {first_line(str(exc))}\n")
            failed.append(engine)
            continue
        if engine == "guided" and args.recheck_key_order and args.guided_key_order != "any":
            recheck_key_order(records, all_results[engine], args)
        print(f"[{engine}] done in {time.monotonic() - t0:.1f}s", file=sys.stderr)
        print(engine_report(engine, all_results[engine], config=engine_config(engine, args)))
        print()
        sys.stdout.flush()
    if len(all_results) > 1:
        print(side_by_side(all_results))
    if args.json_out and all_results:
        write_json(args.json_out, all_results)
        print(f"maskbench: wrote {args.json_out}", file=sys.stderr)
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
