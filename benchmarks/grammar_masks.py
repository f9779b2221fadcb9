"""Per-token mask time and compile time for the shipped lark grammars, ours vs llguidance.

For each grammar in ``grammars/lark/`` (arithmetic, csv, json, python_expr, sql) both
engines compile the same grammar text and step through the same real documents on
the SmolLM2 vocabulary (49,152 tokens), in one process, one thread
(``torch.set_num_threads(1)``, OMP / MKL threads set to 1 before numpy and torch are
imported).

Documents:

* ``benchmarks/grammar_docs/<name>.txt`` and ``benchmarks/grammar_docs/<name>/``
  (one file per document); the header comment of each file says its format, see
  ``load_documents``.
* JSON: the first 50 valid MaskBench instances (``../shared/bench/maskbench.jsonl.gz``
  relative to the repository root) whose value is an object or an array, in file
  order, written with ``json.dumps(data, indent=2)`` (so whitespace is exercised).
  Skipped with a message when the file is absent.

Each document is tokenised with the SmolLM2 tokenizer
(``tok.encode(doc, add_special_tokens=False)``) and stepped token by token: fill the
mask (timed with ``perf_counter_ns``: that is one **mask** sample), check the token's
bit, consume the token; at the end fill the mask once more (timed), check the EOS bit
and consume EOS. A document is *accepted* by an engine iff every token was allowed
and consumed and EOS was allowed and consumed. A rejected document stops at its first
refused token (its later tokens are not timed).

Per grammar and engine:

* **compile**: grammar text -> ready matcher (guided: ``_compile_uncached(spec, vocab,
  None)``, the uncached path of ``guided.compile``, with ``compile_regex``'s cache
  cleared first; llguidance: ``LLMatcher.grammar_from_lark(text)`` +
  ``LLMatcher(tok, grammar)``). **TTFM** = compile + ``matcher()`` + the first mask
  (as in MaskBench); for guided through ``guided.compile`` itself, what a user waits
  for, with its compiled-spec cache and ``compile_regex``'s cleared first: that adds
  what it does besides the uncached path (it fills the first mask itself, to refuse
  a grammar whose first mask allows nothing, and measures the guide for its cache),
  and the fill after it reads the row made. Both are medians over
  ``--compile-repeats`` cold compiles; the guide of the last uncached compile steps
  the documents, so the first document starts from a cold guide (its first mask
  sample is that guide's first mask). Before it does, guided's guide gets the memory
  limit and the measurement ``guided.compile`` gives it, so the mask samples include
  the growth checks (a walk of the guide's objects now and then) a user's fills make.
* **mask** percentiles (nearest rank, µs) over every mask fill, three ways: *first
  document* only; *all documents*; *warm* = documents after the first 5 (our engine
  caches work per lexer / parser state in the guide, which every document of a
  grammar shares, so the first documents pay for building it; llguidance likewise
  caches its lexer states).
* "max at": where the slowest mask was (document index from 0, token position;
  position = the document's length is the final EOS check). Python's garbage
  collector stays on, as in use; a full (generation-2) collection that runs inside
  a mask fill is counted in that fill, and the tables give how many fills had one
  and the collections' total time.
* agreement: whether guided, llguidance and lark itself (``lark.Lark(text,
  parser="lalr")``, the grammar as shipped) accept each document.

One-time per-process costs are measured first and left out of the per-grammar times:
for guided, ``Vocabulary.from_tokenizer`` and the per-vocabulary "pieces" table (built
on a Vocabulary's first grammar compile, ~0.5 s) together with the case-folding
tables, by compiling a throwaway grammar and filling its first mask ("vocabulary
set-up"); for llguidance, ``llguidance.hf.from_tokenizer`` and the same throwaway
grammar.

llguidance 1.9.1 (``pip install llguidance``, a benchmark-only dependency) is set up
as in ``benchmarks/maskbench.py``::

    tok = llguidance.hf.from_tokenizer(hf_tokenizer, eos_token=hf_tokenizer.eos_token_id)
    m = llguidance.LLMatcher(tok, llguidance.LLMatcher.grammar_from_lark(text), log_level=0)
    llguidance.torch.fill_next_token_bitmask(m, bitmask, 0); m.consume_token(t)

llguidance's lark dialect refuses terminal priorities (``NOT.2: "not"``: "priority not
supported yet"). The shipped grammars use them only so that lark's LALR lexer tries a
keyword before NAME, and their NAME regexes already exclude those keywords, so the
language is the same without them: for llguidance the priority suffix is removed (the
table says so, per grammar). Any other refusal is reported as "refused: <error>".

With both engines, their masks are also compared at every step (same document, same
position, while both accept), and the differing steps are grouped by kind. Known
differences between llguidance's lark dialect and lark (which guided follows):
llguidance allows no ``%ignore`` text before the first token (guidance-ai/llguidance
issues 123 and 233) nor after a final token that nothing can follow, and its ``"..."i``
folds case in ASCII only, where lark's Python ``re`` also matches "ı" (U+0131), "ſ"
(U+017F) and the Kelvin sign with i, s and k. No document here has such text, so the
verdicts are not affected; the mask comparison shows them.

Usage::

    python benchmarks/grammar_masks.py [--engine guided|llguidance|both]
        [--grammars sql,json,...] [--docs N] [--compile-repeats 5]

Progress goes to stderr (one line per grammar and engine), the tables to stdout
(markdown).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
             "RAYON_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import gc  # noqa: E402
import glob  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

DOCS_DIR = os.path.join(ROOT, "benchmarks", "grammar_docs")
GRAMMAR_DIR = os.path.join(ROOT, "grammars", "lark")
MASKBENCH = os.path.join(ROOT, "..", "shared", "bench", "maskbench.jsonl.gz")
JSON_DOCS = 50
WARM_AFTER = 5  # "warm" = documents after the first WARM_AFTER

# Warms one-time per-process tables (the vocabulary's pieces, case folding, a regex).
THROWAWAY_GRAMMAR = 'start: "a"i WORD ("," WORD)*\nWORD: /[a-z0-9]+/\n'

clock = time.perf_counter_ns


class FullGCWatch:
    """Counts Python's full (generation 2) garbage collections and their time, so that
    a mask fill during which one ran can be told apart (GC stays on, as in use)."""

    def __init__(self):
        self.count = 0
        self.ns = 0
        self._t0 = 0
        gc.callbacks.append(self._callback)

    def _callback(self, phase, info):
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._t0 = clock()
        else:
            self.count += 1
            self.ns += clock() - self._t0


GC = FullGCWatch()


# --------------------------------------------------------------------------- documents


_COMMENT = ("#", "//", "--")


def split_text_documents(text: str) -> list[str]:
    """Documents of a ``<name>.txt`` file.

    The file opens with header comment lines (``#``, ``//`` or ``--``) that are not
    part of any document. If the header says documents are "separated by blank
    lines", they are split there (a document may span lines; its line breaks are
    kept); otherwise there is one document per non-blank line. Line endings around a
    document are not part of it.
    """
    lines = text.replace("\r\n", "\n").split("\n")
    header = []
    while lines and lines[0].lstrip().startswith(_COMMENT):
        header.append(lines.pop(0))
    if "blank line" in " ".join(header).lower():
        docs, cur = [], []
        for line in lines + [""]:
            if line.strip():
                cur.append(line)
            elif cur:
                docs.append("\n".join(cur))
                cur = []
        return docs
    return [line for line in lines if line.strip()]


def load_documents(name: str) -> tuple[list[tuple[str, str]], str]:
    """[(label, text)] for grammar ``name``, and a note ('' or why there are none).

    ``json``: MaskBench instances (``load_json_documents``). Otherwise
    ``benchmarks/grammar_docs/<name>.txt`` (``split_text_documents``) and/or every
    file of ``benchmarks/grammar_docs/<name>/`` (one document per file, read as
    UTF-8 with its line endings kept, CRLF included), in name order.
    """
    if name == "json":
        return load_json_documents()
    docs: list[tuple[str, str]] = []
    path = os.path.join(DOCS_DIR, f"{name}.txt")
    if os.path.isfile(path):
        with open(path, encoding="utf-8", newline="") as f:
            docs += [(f"{name}.txt:{i + 1}", d) for i, d in enumerate(split_text_documents(f.read()))]
    folder = os.path.join(DOCS_DIR, name)
    if os.path.isdir(folder):
        for fp in sorted(glob.glob(os.path.join(folder, "*"))):
            base = os.path.basename(fp)
            if not os.path.isfile(fp) or base.startswith(".") or base.lower().startswith("readme"):
                continue
            with open(fp, encoding="utf-8", newline="") as f:
                docs.append((f"{name}/{base}", f.read()))
    if not docs:
        return [], f"no documents in {os.path.relpath(DOCS_DIR, ROOT)}/{name}.txt or {name}/"
    return docs, ""


def load_json_documents(path: str = MASKBENCH, n: int = JSON_DOCS) -> tuple[list[tuple[str, str]], str]:
    if not os.path.exists(path):
        return [], f"skipped: {os.path.relpath(path, ROOT)} not found"
    docs: list[tuple[str, str]] = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            rec = json.loads(line)
            for k, test in enumerate(rec.get("tests", [])):
                if test.get("valid") and isinstance(test.get("data"), (dict, list)):
                    docs.append((f"{rec.get('id', '?')}#{k}", json.dumps(test["data"], indent=2)))
                    if len(docs) >= n:
                        return docs, ""
    return docs, ""


# --------------------------------------------------------------------------- statistics


def percentile(sorted_values: list, p: float):
    """Nearest-rank percentile of an ascending list (None when empty)."""
    if not sorted_values:
        return None
    k = max(1, -(-len(sorted_values) * p // 100))  # ceil(n * p / 100), at least 1
    return sorted_values[int(min(k, len(sorted_values))) - 1]


def summary(samples_ns: list[int]) -> dict | None:
    if not samples_ns:
        return None
    s = sorted(samples_ns)
    return {
        "n": len(s),
        "p50": percentile(s, 50) / 1e3,
        "p90": percentile(s, 90) / 1e3,
        "p99": percentile(s, 99) / 1e3,
        "avg": sum(s) / len(s) / 1e3,
        "max": s[-1] / 1e3,
    }


def median(values: list[float]) -> float:
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


# --------------------------------------------------------------------------- engines


def bit_is_set(words, token: int) -> bool:
    w = token >> 5
    if token < 0 or w >= len(words):
        return False
    return (int(words[w]) >> (token & 31)) & 1 == 1


class GuidedEngine:
    name = "guided"

    def __init__(self, hf_tokenizer):
        import guided

        self._guided = guided
        t0 = clock()
        self.vocab = guided.Vocabulary.from_tokenizer(hf_tokenizer)
        t1 = clock()
        self.vocab_size = self.vocab.size
        self.eos = sorted(self.vocab.eos_token_ids)[0]
        # The per-vocabulary pieces table and other one-time tables: a throwaway grammar.
        guide, _ = self.compile(THROWAWAY_GRAMMAR)
        m = guide.matcher()
        m.fill_next_token_bitmask(self.allocate(), 0)
        t2 = clock()
        self.setup_ms = {"Vocabulary.from_tokenizer": (t1 - t0) / 1e6,
                         "throwaway grammar (pieces table, ...)": (t2 - t1) / 1e6}

    def adapt(self, text: str) -> tuple[str, str]:
        return text, ""

    def allocate(self):
        return self._guided.allocate_token_bitmask(1, self.vocab_size)

    def compile(self, text: str):
        """(compiled, ready matcher)."""
        import guided.fsm.regex
        from guided.compiler import _compile_uncached

        guided.fsm.regex.compile_regex.cache_clear()
        guide = _compile_uncached(self._guided.Grammar(text), self.vocab, None)
        return guide, guide.matcher()

    def public_ttfm(self, text: str, bitmask) -> int:
        """ns from ``guided.compile`` (caches cleared) to the first mask filled."""
        import guided.fsm.regex

        self._guided.clear_cache()
        guided.fsm.regex.compile_regex.cache_clear()
        t0 = clock()
        guide = self._guided.compile(self._guided.Grammar(text), self.vocab)
        self.fill(guide.matcher(), bitmask)
        return clock() - t0

    def pristine(self, compiled, m):
        """The guide as ``guided.compile`` hands it out: with its default memory limit
        and measured, so that decoding meets the growth checks users meet."""
        from guided.compiler import DEFAULT_MAX_GUIDE_BYTES

        compiled.max_bytes = DEFAULT_MAX_GUIDE_BYTES
        compiled.check_memory()
        return compiled

    def new_matcher(self, compiled):
        return compiled.matcher()

    def fill(self, m, bitmask) -> None:
        m.fill_next_token_bitmask(bitmask, 0)

    def accept(self, m, tok: int) -> bool:
        return bool(m.accept_token(tok))


class LLGuidanceEngine:
    name = "llguidance"

    def __init__(self, hf_tokenizer):
        import llguidance
        import llguidance.hf
        import llguidance.torch

        self._ll = llguidance
        self.version = getattr(llguidance, "__version__", "?")
        t0 = clock()
        self.tok = llguidance.hf.from_tokenizer(hf_tokenizer, eos_token=hf_tokenizer.eos_token_id)
        t1 = clock()
        self.vocab_size = self.tok.vocab_size
        self.eos = self.tok.eos_token
        _, m = self.compile(THROWAWAY_GRAMMAR)
        self.fill(m, self.allocate())
        t2 = clock()
        self.setup_ms = {"llguidance.hf.from_tokenizer": (t1 - t0) / 1e6,
                         "throwaway grammar": (t2 - t1) / 1e6}

    _PRIORITY = re.compile(r"(?m)^(\s*[A-Z_][A-Z_0-9]*)\.-?\d+(\s*:)")

    def adapt(self, text: str) -> tuple[str, str]:
        """llguidance refuses terminal priorities; drop them (same language, see the
        module docstring). Returns (text, note)."""
        names = [m.group(1).strip() for m in self._PRIORITY.finditer(text)]
        if not names:
            return text, ""
        return self._PRIORITY.sub(r"\1\2", text), "priorities dropped: " + ", ".join(names)

    def allocate(self):
        return self._ll.torch.allocate_token_bitmask(1, self.vocab_size)

    def compile(self, text: str):
        grammar = self._ll.LLMatcher.grammar_from_lark(text)
        m = self._ll.LLMatcher(self.tok, grammar, log_level=0)
        if m.is_error():
            raise ValueError(m.get_error())
        return m, m

    def pristine(self, compiled, m):
        """A copy of the fresh matcher for the later documents (copies share the
        grammar and its lexer caches)."""
        return m.deep_copy()

    def new_matcher(self, compiled):
        return compiled.deep_copy()

    def fill(self, m, bitmask) -> None:
        self._ll.torch.fill_next_token_bitmask(m, bitmask, 0)
        if m.is_error():
            raise RuntimeError(m.get_error())

    def accept(self, m, tok: int) -> bool:
        return bool(m.consume_token(tok)) and not m.is_error()


# --------------------------------------------------------------------------- one grammar


def timed_fill(engine, m, bitmask, words, samples: list, gc_ns: list, rows: list | None) -> None:
    """Fill the mask; append its ns to ``samples``, the full-GC ns inside it to
    ``gc_ns`` and (untimed) a copy of the mask to ``rows``."""
    g0 = GC.ns
    t0 = clock()
    engine.fill(m, bitmask)
    samples.append(clock() - t0)
    gc_ns.append(GC.ns - g0)
    if rows is not None:
        rows.append(words.copy())


def step_document(engine, m, tokens: list[int], bitmask, words, samples: list[int], gc_ns: list[int],
                  first: tuple[int, int] | None = None, rows: list | None = None) -> tuple[bool, int]:
    """Step ``tokens`` then EOS through ``m``; (accepted, index of the first refused
    token, ``len(tokens)`` for EOS, -1 when accepted). Appends each fill's ns to
    ``samples`` (and the full-GC ns inside it to ``gc_ns``, a copy of the mask to
    ``rows``). ``first``: the first mask was already filled (the TTFM fill, still in
    ``bitmask``) and took (ns, full-GC ns)."""
    for pos, tok in enumerate(tokens):
        if pos == 0 and first is not None:
            samples.append(first[0])
            gc_ns.append(first[1])
            if rows is not None:
                rows.append(words.copy())
        else:
            timed_fill(engine, m, bitmask, words, samples, gc_ns, rows)
        if not bit_is_set(words, tok) or not engine.accept(m, tok):
            return False, pos
    if tokens or first is None:
        timed_fill(engine, m, bitmask, words, samples, gc_ns, rows)
    else:
        samples.append(first[0])
        gc_ns.append(first[1])
        if rows is not None:
            rows.append(words.copy())
    if not bit_is_set(words, engine.eos) or not engine.accept(m, engine.eos):
        return False, len(tokens)
    return True, -1


def run_grammar(engine, text: str, docs: list[tuple[str, list[int]]], repeats: int,
                keep_masks: bool = False) -> dict:
    """Compile ``text`` (``repeats`` times, cold), then step every document.
    ``keep_masks``: also return every mask (per document, a list of word arrays)."""
    text, note = engine.adapt(text)
    bitmask = engine.allocate()
    words = bitmask.numpy()[0]
    compile_ms, ttfm_ms = [], []
    compiled = m = None
    first = (0, 0)
    gc.collect()
    for _ in range(max(1, repeats)):
        compiled = m = None
        gc.collect()
        t0 = clock()
        try:
            compiled, m = engine.compile(text)
        except Exception as exc:  # noqa: BLE001 - a refused grammar is a result
            msg = " ".join(str(exc).split())
            return {"note": note, "refused": f"{type(exc).__name__}: {msg[:200]}"}
        t1 = clock()
        g0 = GC.ns
        engine.fill(m, bitmask)
        t2 = clock()
        compile_ms.append((t1 - t0) / 1e6)
        ttfm_ms.append((t2 - t0) / 1e6)
        first = (t2 - t1, GC.ns - g0)
    if hasattr(engine, "public_ttfm"):  # (guided: through guided.compile, as users call it)
        ttfm_ms = []
        for _ in range(max(1, repeats)):
            gc.collect()
            ttfm_ms.append(engine.public_ttfm(text, bitmask) / 1e6)
    compiled = engine.pristine(compiled, m)  # untimed; before the first document moves m
    per_doc: list[list[int]] = []
    per_doc_gc: list[list[int]] = []
    masks: list[list] = []
    verdicts: list[tuple[bool, int]] = []
    for i, (_label, tokens) in enumerate(docs):
        samples: list[int] = []
        gc_ns: list[int] = []
        rows: list | None = [] if keep_masks else None
        try:
            if i == 0:
                verdict = step_document(engine, m, tokens, bitmask, words, samples, gc_ns, first, rows)
            else:
                verdict = step_document(engine, engine.new_matcher(compiled), tokens, bitmask, words,
                                        samples, gc_ns, None, rows)
        except Exception as exc:  # noqa: BLE001 - reported per document
            verdict = (False, -2)
            print(f"  {engine.name}: document {i} raised {type(exc).__name__}: {exc}", file=sys.stderr)
        per_doc.append(samples)
        per_doc_gc.append(gc_ns[: len(samples)])
        masks.append(rows or [])
        verdicts.append(verdict)

    def summarise(lo: int, hi: int | None) -> dict | None:
        flat = [(ns, g, i, k) for i in range(lo, len(per_doc) if hi is None else min(hi, len(per_doc)))
                for k, (ns, g) in enumerate(zip(per_doc[i], per_doc_gc[i]))]
        out = summary([ns for ns, _g, _i, _k in flat])
        if out is not None:
            slow = max(flat)
            out["slowest"] = (slow[2], slow[3])  # (document, token position; = length: EOS check)
            with_gc = [g for _ns, g, _i, _k in flat if g]
            out["gc_masks"] = len(with_gc)
            out["gc_ms"] = sum(with_gc) / 1e6
        return out

    return {
        "note": note,
        "refused": None,
        "compile_ms": median(compile_ms),
        "ttfm_ms": median(ttfm_ms),
        "first": summarise(0, 1),
        "all": summarise(0, None),
        "warm": summarise(WARM_AFTER, None),
        "verdicts": verdicts,
        "masks": masks,
    }


def lark_verdicts(text: str, docs: list[tuple[str, str]]) -> tuple[list[bool | None], str]:
    """Does lark (LALR, the grammar as shipped) parse each document?"""
    try:
        import lark
    except ImportError:
        return [None] * len(docs), "lark not installed"
    try:
        parser = lark.Lark(text, parser="lalr")
    except Exception as exc:  # noqa: BLE001
        return [None] * len(docs), f"lark refused the grammar: {type(exc).__name__}: {exc}"
    out = []
    for _label, doc in docs:
        try:
            parser.parse(doc)
            out.append(True)
        except lark.exceptions.LarkError:
            out.append(False)
    return out, ""


def unpack(words):
    """A word array's bits as a bool array (bit i of the row = token i)."""
    import numpy as np

    return np.unpackbits(np.ascontiguousarray(words).view(np.uint8), bitorder="little").astype(bool)


def compare_masks(entry: dict, hf, kinds: int = 6) -> dict | None:
    """Compare guided's and llguidance's masks step by step (same document, same
    position, while both engines were still accepting). None if either refused.

    Differing steps are grouped by kind: where (document start, inside, the final EOS
    check) and the first few tokens only one engine allows; each kind is listed once
    with its count and its first occurrence."""
    import numpy as np

    g, ll = entry["engines"]["guided"], entry["engines"]["llguidance"]
    if g.get("refused") or ll.get("refused"):
        return None

    def show(ids):
        return ", ".join(repr(hf.decode([int(t)])) for t in ids[:4]) + (" …" if len(ids) > 4 else "")

    steps = differ = 0
    groups: dict[tuple, list] = {}
    for i, (rows_g, rows_l) in enumerate(zip(g["masks"], ll["masks"])):
        tokens = entry["tokens"][i][1]
        for k, (a, b) in enumerate(zip(rows_g, rows_l)):
            steps += 1
            if np.array_equal(a, b):
                continue
            differ += 1
            ua, ub = unpack(a), unpack(b)
            only_g, only_l = np.flatnonzero(ua & ~ub), np.flatnonzero(ub & ~ua)
            where = "EOS check" if k >= len(tokens) else ("document start" if k == 0 else "inside")
            key = (where, show(only_g), show(only_l))
            if key not in groups:
                ctx = hf.decode(tokens[:k])[-30:]
                groups[key] = [0, f"{entry['docs'][i][0]} token {k}, after …{ctx!r}", len(only_g), len(only_l)]
            groups[key][0] += 1
    listed = []
    for (where, sg, sl), (count, first, ng, nl) in sorted(groups.items(), key=lambda kv: -kv[1][0])[:kinds]:
        listed.append(f"{count} step(s) at {where}, first at {first}: {ng} token(s) allowed only by guided "
                      f"[{sg}], {nl} only by llguidance [{sl}]")
    if len(groups) > kinds:
        listed.append(f"… and {len(groups) - kinds} more kinds")
    return {"steps": steps, "differ": differ, "examples": listed}


# --------------------------------------------------------------------------- output


def fmt(x, digits: int = 1) -> str:
    if x is None:
        return "—"
    if x >= 1000:
        return f"{x:,.0f}"
    if x >= 100:
        return f"{x:.0f}"
    return f"{x:.{digits}f}"


def ratio(a, b) -> str:
    if a is None or b is None or b == 0:
        return "—"
    return f"{a / b:.2f}"


def mark(v) -> str:
    return "—" if v is None else ("yes" if v else "**no**")


def describe_refusal(tokens: list[int], pos: int, hf) -> str:
    if pos == -1:
        return "accepted"
    if pos == -2:
        return "engine raised"
    if pos >= len(tokens):
        return "EOS refused at the end"
    before = hf.decode(tokens[max(0, pos - 6):pos])
    return f"token {pos} {hf.decode([tokens[pos]])!r} refused after …{before[-30:]!r}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engine", choices=("guided", "llguidance", "both"), default="both")
    ap.add_argument("--grammars", default=None, help="comma-separated names (default: all shipped)")
    ap.add_argument("--docs", type=int, default=None, help="at most N documents per grammar")
    ap.add_argument("--compile-repeats", type=int, default=5,
                    help="cold compiles per grammar and engine; compile / TTFM are their median")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    import guided
    from guided.models import load_tokenizer

    guided.load_kernels()  # numba loaded before anything is timed, as a server loads it at start-up

    wall0 = time.perf_counter()
    hf = load_tokenizer()
    names = guided.Grammar.names()
    if args.grammars:
        wanted = [g.strip() for g in args.grammars.split(",") if g.strip()]
        unknown = [g for g in wanted if g not in names]
        if unknown:
            ap.error(f"unknown grammar(s) {unknown}; shipped: {', '.join(names)}")
        names = wanted
    engines = []
    if args.engine in ("guided", "both"):
        engines.append(GuidedEngine(hf))
        print(f"guided set-up: {engines[-1].setup_ms}", file=sys.stderr)
    if args.engine in ("llguidance", "both"):
        engines.append(LLGuidanceEngine(hf))
        print(f"llguidance set-up: {engines[-1].setup_ms}", file=sys.stderr)

    results: dict[str, dict] = {}
    for name in names:
        with open(os.path.join(GRAMMAR_DIR, f"{name}.lark"), encoding="utf-8") as f:
            text = f.read()
        docs, note = load_documents(name)
        if args.docs is not None:
            docs = docs[: args.docs]
        if not docs:
            print(f"{name}: no documents ({note or 'none found'})", file=sys.stderr)
            results[name] = {"skipped": note or "no documents"}
            continue
        tokenised = [(label, hf.encode(doc, add_special_tokens=False)) for label, doc in docs]
        lark_ok, lark_note = lark_verdicts(text, docs)
        entry = {"docs": docs, "tokens": tokenised, "lark": lark_ok, "lark_note": lark_note, "engines": {}}
        for engine in engines:
            t0 = time.perf_counter()
            res = run_grammar(engine, text, tokenised, args.compile_repeats, keep_masks=len(engines) == 2)
            entry["engines"][engine.name] = res
            if res["refused"]:
                line = f"refused: {res['refused']}"
            else:
                acc = sum(v[0] for v in res["verdicts"])
                line = (f"compile {res['compile_ms']:.1f} ms, TTFM {res['ttfm_ms']:.1f} ms, "
                        f"mask p50 {res['all']['p50']:.1f} µs p99 {res['all']['p99']:.1f} µs, "
                        f"accepted {acc}/{len(docs)}")
            print(f"{name:12s} {engine.name:10s} {len(docs)} docs, "
                  f"{sum(len(t) for _, t in tokenised)} tokens: {line} "
                  f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
        if len(engines) == 2:
            entry["mask_diff"] = compare_masks(entry, hf)
            for res in entry["engines"].values():
                res.pop("masks", None)
        results[name] = entry
    wall = time.perf_counter() - wall0

    print_report(args, engines, names, results, hf, wall)
    return 0


def print_report(args, engines, names, results, hf, wall: float) -> None:
    import lark
    import torch

    p = print
    argv = " ".join(sys.argv[1:])
    p(f"## Grammar masks: `python benchmarks/grammar_masks.py {argv}`".rstrip())
    p()
    versions = [f"Python {platform.python_version()}", f"torch {torch.__version__}",
                f"lark {lark.__version__}"]
    for e in engines:
        if e.name == "llguidance":
            versions.append(f"llguidance {e.version}")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    p(f"{os.cpu_count()} CPUs (load average {load:.2f} at the end), 1 thread; "
      + ", ".join(versions) + f"; SmolLM2 vocabulary, {engines[0].vocab_size:,} tokens. "
      f"Wall time {wall:.0f} s.")
    p()
    p("One-time set-up, left out of the per-grammar times:")
    p()
    for e in engines:
        p(f"- {e.name}: " + "; ".join(f"{k} {v:.0f} ms" for k, v in e.setup_ms.items()))
    p()

    def rows(kind: str):
        for name in names:
            r = results[name]
            if "skipped" in r:
                p(f"| {name} | — | {r['skipped']} |" + " |" * 8)
                continue
            for e in engines:
                res = r["engines"][e.name]
                if res["refused"]:
                    p(f"| {name} | {e.name} | refused: {res['refused']} |" + " |" * 8)
                    continue
                s = res[kind]
                if s is None:
                    p(f"| {name} | {e.name} | 0 |" + " — |" * 7 + " |")
                    continue
                d, k = s["slowest"]
                gcs = f"{s['gc_masks']} ({s['gc_ms']:.0f} ms)" if s["gc_masks"] else "0"
                p(f"| {name} | {e.name} | {s['n']:,} | **{fmt(s['p50'])}** | {fmt(s['p90'])} | "
                  f"**{fmt(s['p99'])}** | {fmt(s['avg'])} | {fmt(s['max'])} | doc {d}, token {k} | {gcs} | "
                  f"{res['note']} |")

    p("### Compile time and time to first mask (median of "
      f"{args.compile_repeats} cold compiles)")
    p()
    p("| grammar | docs | tokens | engine | compile ms | TTFM ms | note |")
    p("|---|---|---|---|---|---|---|")
    for name in names:
        r = results[name]
        if "skipped" in r:
            p(f"| {name} | 0 | 0 | — | — | — | {r['skipped']} |")
            continue
        ntok = sum(len(t) for _, t in r["tokens"])
        for e in engines:
            res = r["engines"][e.name]
            if res["refused"]:
                p(f"| {name} | {len(r['docs'])} | {ntok:,} | {e.name} | refused: {res['refused']} | — | {res['note']} |")
            else:
                p(f"| {name} | {len(r['docs'])} | {ntok:,} | {e.name} | {fmt(res['compile_ms'], 2)} | "
                  f"{fmt(res['ttfm_ms'], 2)} | {res['note']} |")
    p()
    header = ("| grammar | engine | masks | p50 µs | p90 µs | p99 µs | avg µs | max µs | max at | "
              "masks with a full GC inside (GC time) | note |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|")
    p("Mask tables: µs per fill, nearest-rank percentiles; every fill counts, including each "
      "document's first mask and the final EOS check. \"max at\": document index from 0, "
      "token position (= the document's length: the EOS check). Python's GC stays on; a full "
      "collection inside a fill is counted in it.")
    p()
    p("### Mask time per token, **all documents**")
    p()
    p(header)
    rows("all")
    p()
    p(f"### Mask time per token, **warm: documents {WARM_AFTER + 1} onwards** (the first "
      f"{WARM_AFTER} documents of each grammar left out)")
    p()
    p(header)
    rows("warm")
    p()
    p("### Mask time per token, **first document only** (starts from a cold guide)")
    p()
    p(header)
    rows("first")
    p()

    if len(engines) == 2:
        p("### Ratio llguidance / guided (> 1: guided is faster)")
        p()
        p("| grammar | p50 all docs | p99 all docs | p50 warm | p99 warm | compile | TTFM |")
        p("|---|---|---|---|---|---|---|")
        for name in names:
            r = results[name]
            if "skipped" in r:
                continue
            g, ll = r["engines"]["guided"], r["engines"]["llguidance"]
            if g["refused"] or ll["refused"]:
                p(f"| {name} | — | — | — | — | — | — |")
                continue

            def get(res, kind, key):
                return res[kind][key] if res[kind] else None

            p(f"| {name} | **{ratio(get(ll, 'all', 'p50'), get(g, 'all', 'p50'))}** | "
              f"{ratio(get(ll, 'all', 'p99'), get(g, 'all', 'p99'))} | "
              f"**{ratio(get(ll, 'warm', 'p50'), get(g, 'warm', 'p50'))}** | "
              f"{ratio(get(ll, 'warm', 'p99'), get(g, 'warm', 'p99'))} | "
              f"{ratio(ll['compile_ms'], g['compile_ms'])} | {ratio(ll['ttfm_ms'], g['ttfm_ms'])} |")
        p()

    p("### Agreement: documents accepted (whole document, then EOS)")
    p()
    cols = ["lark (LALR)"] + [e.name for e in engines]
    two = len(engines) == 2
    p("| grammar | docs | " + " | ".join(cols) + " | all agree |" + (" identical masks guided / llguidance |" if two else ""))
    p("|---|---|" + "---|" * len(cols) + "---|" + ("---|" if two else ""))
    disagreements = []
    for name in names:
        r = results[name]
        if "skipped" in r:
            continue
        n = len(r["docs"])
        counts = [f"{sum(1 for v in r['lark'] if v)}/{n}" if r["lark_note"] == "" else r["lark_note"]]
        agree = 0
        for e in engines:
            res = r["engines"][e.name]
            counts.append("refused grammar" if res["refused"] else f"{sum(v[0] for v in res['verdicts'])}/{n}")
        for i, (label, tokens) in enumerate(r["tokens"]):
            verdicts = {"lark": r["lark"][i]}
            why = {}
            for e in engines:
                res = r["engines"][e.name]
                if res["refused"]:
                    continue
                ok, pos = res["verdicts"][i]
                verdicts[e.name] = ok
                if not ok:
                    why[e.name] = describe_refusal(tokens, pos, hf)
            known = {k: v for k, v in verdicts.items() if v is not None}
            if len(set(known.values())) <= 1:
                agree += 1
            else:
                disagreements.append((name, i, label, known, why))
        md = r.get("mask_diff")
        same = "" if not two else (" — |" if md is None else f" {md['steps'] - md['differ']:,}/{md['steps']:,} steps |")
        p(f"| {name} | {n} | " + " | ".join(counts) + f" | {agree}/{n} |" + same)
    p()
    if disagreements:
        p("Documents on which lark and the engines disagree:")
        p()
        for name, i, label, known, why in disagreements:
            verdict = ", ".join(f"{k} {'accepts' if v else 'rejects'}" for k, v in known.items())
            reasons = "; ".join(f"{k}: {w}" for k, w in why.items())
            p(f"- {name} document {i} ({label}): {verdict}" + (f" — {reasons}" if reasons else ""))
    else:
        p("Every document got the same verdict from lark and the engines.")
    if two:
        diffs = [(name, results[name]["mask_diff"]) for name in names
                 if "skipped" not in results[name] and results[name].get("mask_diff")
                 and results[name]["mask_diff"]["differ"]]
        p()
        if diffs:
            p("Steps where the two engines' masks differ, grouped by kind (where, and the first "
              "tokens only one engine allows, decoded; '�' is a token holding part of a UTF-8 "
              "character):")
            p()
            for name, md in diffs:
                p(f"- {name}: {md['differ']:,} of {md['steps']:,} steps")
                for ex in md["examples"]:
                    p(f"  - {ex}")
        else:
            p("The two engines' masks were identical at every step compared (same document and "
              "position, while both accepted).")
    rejected = []
    for name in names:
        r = results[name]
        if "skipped" in r:
            continue
        for i, (label, tokens) in enumerate(r["tokens"]):
            if r["lark"][i] is False:
                rejected.append(f"{name} document {i} ({label})")
    if rejected:
        p()
        p("Documents lark itself rejects (so they are not valid documents of the grammar): "
          + "; ".join(rejected) + ".")
    p()


if __name__ == "__main__":
    sys.exit(main())
