"""Property-based fuzzing of the three spec languages: generators, mutators, references.

Shared by ``tests/test_fuzz.py`` (a fast, fixed-seed tier) and ``benchmarks/fuzz.py`` (the
same fuzzer, longer). Each spec is compiled with ``guided.compile`` for a small byte-level
vocabulary (``fuzz_vocab``); the outcome must be one of:

* a guide that agrees with the reference on sampled strings: members drawn from the guide
  (random walks over the tokens its masks allow) and from the reference side (strings a
  regex's parse tree derives, valid JSON instances, sentences a grammar derives), and
  near-misses (one-edit mutations of both);
* a documented error: a ``guided.SpecError`` subclass, within the time budget.

Anything else is *unexpected*: another exception from the compile or from stepping a
matcher, a guide that accepts what the reference refuses (unsound) or refuses what it
accepts where the spec language says it must not (incomplete), a mask that disagrees
with ``accept_token``, a compile past the time budget, or an error that contradicts the
reference (``RegexSyntaxError`` for a pattern ``re`` compiles, ``EmptyLanguageError`` for
a pattern ``re`` matches a UTF-8 string with).

References: ``re.fullmatch`` for regexes (on the UTF-8 decoding; bytes that are not UTF-8
are never members), ``jsonschema`` (``json_helpers.exact_reference_validator``) for JSON
Schemas, and for lark grammars lark's own loader (rules, terminal patterns, ``%ignore``)
with a recognizer that reads every tokenization ``re.fullmatch`` allows (a superset of
lark's Earley parser with ``lexer="dynamic_complete"``): a string the guide accepts must
be in it. Sentences derived from the grammar must be accepted where guided's documented
lexing (longest match among the terminals, no backing up; ties to the higher priority,
then to a string literal) reads them as derived.

Where JSON Schema completeness is documented to stop, a refused valid text is counted
as a note, not failed: keys in another order than ``key_order="schema"`` writes (the text
is judged again with ``key_order="any"``); forms the compiler does not write (spaces,
``1.0``, ``1e5``, escapes other than ``json.dumps``'s); a format written as a regular
subset of what validators accept, or one the reference does not check; a compile that
subtracted a superset (an inexact ``not`` / ``oneOf`` / ``if`` narrows); a sub-schema
declaring a draft of its own; a repeated key. Texts whose numbers a float cannot hold
exactly are not judged (the reference reads them as floats); ``multipleOf`` is judged
on decimal values (``json_helpers.exact_reference_validator``).

Example::

    import random
    from fuzz_specs import fuzz_vocab, check_regex, random_regex

    rng = random.Random(0)
    vocab = fuzz_vocab()
    pattern, flags = random_regex(rng)
    outcome = check_regex(pattern, flags, vocab, rng)
    assert not outcome.unexpected, outcome.report()
"""

from __future__ import annotations

import contextlib
import copy
import gzip
import inspect
import json
import math
import random
import re
import signal
import threading
import time
import traceback
import warnings
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import guided
from guided.fsm.deadline import jit_seconds

try:  # Python >= 3.11
    import re._constants as _C
    import re._parser as _sre
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _C
    import sre_parse as _sre

#: Seconds a compile (with its first mask) may take before it counts as unexpected.
BUDGET_S = 10.0
#: Longest text judged (a MaskBench schema of hundreds of keys samples 200 KB instances,
#: which take seconds to step byte by byte).
MAX_TEXT = 8192
#: How far past its limit a compile may stop (the limit is checked between steps).
GRACE_S = 2.0
#: Past this, a compile or a reference call is interrupted (the outcome is unexpected).
HARD_CAP_S = 60.0

REPO = Path(__file__).resolve().parents[1]
MASKBENCH = REPO.parent / "shared" / "bench" / "maskbench.jsonl.gz"
MASKBENCH_STATUSES = REPO / "benchmarks" / "results" / "maskbench_statuses_2026-12-06.tsv.gz"
SHIPPED_GRAMMARS = REPO / "grammars" / "lark"


# -- the vocabulary -----------------------------------------------------------------------

#: Multi-byte tokens beside the 256 single bytes: JSON punctuation, keywords, pieces of
#: UTF-8 characters (whole, a lead byte after ASCII, continuation bytes before ASCII).
EXTRA_TOKENS = [
    b"ab", b"abc", b"ba", b'":', b'{"', b'"}', b'",', b'":"', b'","', b"true", b"false", b"null",
    b"12", b"00", b"0.", b"-1", b"e+", b"\\u", b"\\n", b'\\"', b"  ", b"\n  ", b" the", b"if", b"select",
    b"\xc3\xa9", b"a\xc3", b"\xa9b", b"\xe6\x97\xa5", b"\xf0\x9f\x98", b"\x80\x80", b"::", b"[]", b"{}",
]


def fuzz_vocab() -> guided.Vocabulary:
    """256 single-byte tokens (token ``b`` is byte ``b``), ``EXTRA_TOKENS``, then EOS."""
    tokens = [bytes([b]) for b in range(256)] + list(EXTRA_TOKENS) + [None]
    return guided.Vocabulary(tokens, [len(tokens) - 1], name="fuzz")


_TOKEN_OF = {t: 256 + i for i, t in enumerate(EXTRA_TOKENS)}
_EXTRA_LENGTHS = sorted({len(t) for t in EXTRA_TOKENS})


def segmentation(data: bytes, rng: random.Random | None) -> list[int]:
    """Token ids spelling ``data``: one per byte, or (with ``rng``) multi-byte tokens
    taken at random where they fit."""
    if rng is None:
        return list(data)
    out, i = [], 0
    while i < len(data):
        fits = [n for n in _EXTRA_LENGTHS if data[i : i + n] in _TOKEN_OF]
        if fits and rng.random() < 0.7:
            n = rng.choice(fits)
            out.append(_TOKEN_OF[data[i : i + n]])
            i += n
        else:
            out.append(data[i])
            i += 1
    return out


# -- outcomes -----------------------------------------------------------------------------


@dataclass
class Outcome:
    """What fuzzing one spec gave.

    Attributes:
        language: ``"regex"``, ``"json"`` or ``"grammar"``.
        source: where the spec came from (``"random"``, ``"mutated"``, ``"maskbench"``).
        spec: the spec as given (a ``(pattern, flags)`` pair, a schema, grammar text).
        kind: ``"guide"`` (compiled and checked) or the documented error's class name.
        unexpected: what went wrong, where something did (``""`` otherwise).
        seconds: the compile's wall time, first mask included.
        checked: strings judged against the reference.
        notes: refusals counted under a documented limit, by kind.
    """

    language: str
    source: str
    spec: object
    kind: str = "guide"
    unexpected: str = ""
    seconds: float = 0.0
    checked: int = 0
    notes: dict = field(default_factory=dict)

    def note(self, what: str) -> None:
        self.notes[what] = self.notes.get(what, 0) + 1

    def report(self) -> str:
        """The spec and what went wrong, for a failure message."""
        spec = self.spec if isinstance(self.spec, str) else json.dumps(self.spec, ensure_ascii=True, default=repr) \
            if not isinstance(self.spec, tuple) else repr(self.spec)
        if len(spec) > 3000:
            spec = spec[:3000] + "..."
        return f"[{self.language}/{self.source}] {self.kind}: {self.unexpected}\n  spec: {spec}"


class _Unexpected(Exception):
    """A finding: raised inside a check, turned into ``Outcome.unexpected``."""


class Hang(BaseException):
    """A call ran past ``HARD_CAP_S`` (a BaseException, so no ``except Exception`` in the
    code under test swallows it)."""


_deadline_depth = 0


@contextlib.contextmanager
def deadline(seconds: float):
    """Raise ``Hang`` in the main thread after ``seconds`` (POSIX; elsewhere, and when
    nested, a no-op). Python's ``re`` checks for signals, so a backtracking reference
    call is interrupted too."""
    global _deadline_depth
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable or _deadline_depth:
        yield
        return

    def on_alarm(signum, frame):
        raise Hang(f"past {seconds:g} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    _deadline_depth += 1
    try:
        yield
    finally:
        _deadline_depth -= 1
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _has_timeout_keyword() -> bool:
    try:
        return "timeout" in inspect.signature(guided.compile).parameters
    except (TypeError, ValueError):  # pragma: no cover
        return False


def _short_traceback(e: BaseException) -> str:
    frames = traceback.extract_tb(e.__traceback__)[-3:]
    where = " <- ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(frames))
    return f"{type(e).__name__}: {str(e)[:300]} ({where})"


#: Findings reported and not fixed yet (in files outside this suite's reach), as (what
#: went wrong, what the spec holds, why): they mark a run expected-to-fail instead of
#: failing it, as long as nothing else went wrong. Drop an entry once its fix lands.
KNOWN = [
    (r"dead end: the mask allows", '"uniqueItems": true',
     "uniqueItems: the check refuses an item once it is complete, so a text may enter a state where "
     "every way on repeats an item (a dead end: EOS alone, refused; docs/json-schema.md)"),
]


def known(o: Outcome) -> list[str]:
    """The known findings ``o``'s unexpected outcome matches (none: a new one)."""
    spec = json.dumps(o.spec, default=repr)
    return [why for pattern, holds, why in KNOWN if re.search(pattern, o.unexpected) and holds in spec]



@contextlib.contextmanager
def _judged(out: "Outcome"):
    """Record how judging a guide's strings ended: an unexpected outcome, a documented
    budget error while decoding (a note), or a hang."""
    try:
        yield
    except _Unexpected as e:
        out.unexpected = str(e)
    except guided.BudgetExceededError as e:  # documented: a guide that grows past its budget while decoding
        out.note(f"{type(e).__name__} while decoding")
    except Hang:
        out.unexpected = "judging ran past the hard cap"
    except Exception as e:
        out.unexpected = f"stepping raised {_short_traceback(e)}"


def compile_spec(spec, vocab, outcome: Outcome, budget: float = BUDGET_S):
    """``guided.compile(spec, vocab, timeout=budget)`` and its first mask, timed: the
    guide, or None with ``outcome.kind`` set to the documented error's name (or
    ``outcome.unexpected``). The compile may overrun its limit by ``GRACE_S`` (the
    limit is checked between steps); the first mask gets a budget of its own."""
    kwargs = {"timeout": budget} if _has_timeout_keyword() else {}
    start = time.perf_counter()
    jit_before = jit_seconds()

    def elapsed() -> float:  # numba compiling kernels (once per process) is not the spec's time
        return time.perf_counter() - start - (jit_seconds() - jit_before)

    stage = "compile"
    try:
        with deadline(HARD_CAP_S), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # re's FutureWarnings ("possible nested set")
            guide = guided.compile(spec, vocab, **kwargs)
            outcome.seconds = elapsed()
            stage = "first mask"
            bitmask = guided.allocate_token_bitmask(1, vocab.size)
            guide.matcher().fill_next_token_bitmask(bitmask, 0)
    except guided.SpecError as e:
        took = elapsed()
        outcome.kind = type(e).__name__
        if stage == "compile":
            outcome.seconds = took
        if stage != "compile":
            outcome.unexpected = f"{type(e).__name__} from the first mask, not the compile: {e}"
        elif took > budget + GRACE_S:
            outcome.unexpected = f"{type(e).__name__} after {took:.1f} s (budget {budget:g} s)"
        elif not str(e).strip():
            outcome.unexpected = f"{type(e).__name__} with an empty message"
        return None
    except Hang:
        outcome.kind = "hang"
        outcome.unexpected = f"{stage} still running after {HARD_CAP_S:g} s"
        return None
    except Exception as e:  # anything else escaping a compile is a bug
        outcome.kind = "crash"
        outcome.unexpected = f"{stage} raised {_short_traceback(e)}"
        return None
    first_mask = elapsed() - outcome.seconds
    if outcome.seconds > budget + GRACE_S:
        outcome.unexpected = f"compile took {outcome.seconds:.1f} s (budget {budget:g} s)"
    elif first_mask > budget:
        outcome.unexpected = f"first mask took {first_mask:.1f} s (budget {budget:g} s)"
    return guide


# -- stepping a guide ---------------------------------------------------------------------


class Stepper:
    """Feeds byte strings to a guide's matchers, checking each mask against
    ``accept_token``: a token the mask allows is accepted, one it refuses is refused."""

    def __init__(self, guide):
        self.guide = guide
        self.vocab = guide.vocab
        self.eos = guide.eos_token_ids[0]
        self.bitmask = guided.allocate_token_bitmask(1, self.vocab.size)

    def _allowed(self, m, token: int) -> bool:
        m.fill_next_token_bitmask(self.bitmask, 0)
        return bool((int(self.bitmask[0, token >> 5]) >> (token & 31)) & 1)

    def accepts(self, data: bytes, rng: random.Random | None = None, check_masks: bool = True) -> bool:
        """Whether the guide accepts ``data`` then EOS (tokens from ``segmentation``)."""
        m = self.guide.matcher()
        for t in segmentation(data, rng) + [self.eos]:
            allowed = self._allowed(m, t) if check_masks else None
            ok = m.accept_token(t)
            if check_masks and ok != allowed:
                raise _Unexpected(f"mask says {'allowed' if allowed else 'refused'} but accept_token "
                                  f"returned {ok} for token {t} ({self.vocab.token_bytes[t]!r}) after a prefix of "
                                  f"{data!r}")
            if not ok:
                return False
        return True

    def judged(self, data: bytes, rng: random.Random) -> bool:
        """``accepts``, byte by byte and again in a random segmentation: both must agree."""
        a = self.accepts(data)
        b = self.accepts(data, rng, check_masks=False)
        if a != b:
            raise _Unexpected(f"{data!r}: accepted={a} byte by byte but {b} in a multi-byte segmentation")
        return a

    def walk(self, rng: random.Random, max_tokens: int = 48, ascii_bias: float = 0.85) -> bytes | None:
        """A random member: tokens the masks allow, EOS more likely as the walk grows;
        None if it did not end within ``max_tokens``."""
        m = self.guide.matcher()
        out = []
        for step in range(max_tokens):
            ids = m.allowed_token_ids()
            can_end = self.eos in ids
            choices = [t for t in ids if t != self.eos]
            if can_end and (not choices or rng.random() < 0.15 + 0.7 * step / max_tokens):
                if not m.accept_token(self.eos):
                    if not choices and not m.is_accepting():
                        raise _Unexpected(f"dead end: the mask allows EOS alone, refused, after {b''.join(out)!r}")
                    raise _Unexpected(f"EOS allowed by the mask but refused after {b''.join(out)!r}")
                return b"".join(out)
            if not choices:
                raise _Unexpected(f"dead end: the mask allows nothing (not even EOS) after {b''.join(out)!r}")
            printable = [t for t in choices if t >= 256 or 32 <= t < 127 or t in (9, 10)]
            t = rng.choice(printable if printable and rng.random() < ascii_bias else choices)
            if not m.accept_token(t):
                raise _Unexpected(f"token {t} ({self.vocab.token_bytes[t]!r}) allowed by the mask but refused "
                                  f"after {b''.join(out)!r}")
            out.append(self.vocab.token_bytes[t])
        return None


def byte_mutations(data: bytes, rng: random.Random, n: int) -> list[bytes]:
    """``n`` one-edit neighbours of ``data``: a byte deleted, inserted, replaced or
    duplicated, two swapped, or the text cut short or extended."""
    pool = b"aZ09 -._\"\\{}[]:,\n\t\x00\x7f" + "é日".encode()
    out = []
    for _ in range(n):
        op = rng.randrange(6) if data else 1
        i = rng.randrange(len(data) + 1)
        if op == 0:
            d = data[:i] + data[i + 1 :]
        elif op == 1:
            ins = bytes([rng.choice(pool)]) if rng.random() < 0.8 else "é".encode()
            d = data[:i] + ins + data[i:]
        elif op == 2:
            d = data[:i] + bytes([rng.choice(pool)]) + data[i + 1 :]
        elif op == 3:
            d = data[:i] + data[i : i + 1] * 2 + data[i + 1 :]
        elif op == 4 and len(data) > 1:
            i = min(i, len(data) - 2)
            d = data[:i] + data[i + 1 : i + 2] + data[i : i + 1] + data[i + 2 :]
        else:
            d = data[:i] if rng.random() < 0.5 else data + data[-1:]
        out.append(d)
    return out


# -- regexes: generation ------------------------------------------------------------------

_LITERALS = list("abcxyz019AZ_ ") + ["é", "ß", "K", "k", "\u212a", "ſ", "s", "S", "Σ", "σ", "ς", "İ", "i", "ı",
                                     "日", "😀", "\u00a0", "-", ",", "/", "@", "#", "'", '"', "~"]
_SPECIALS = list(".*+?()[]{}|^$\\")
_ESCAPES = [r"\n", r"\t", r"\x41", r"\x7f", r"\u00e9", r"\U0001F600", r"\0", r"\101", r"\N{GREEK SMALL LETTER SIGMA}",
            r"\\", r"\.", r"\-", r"\/", r"\ud800"]
_CATEGORIES = [r"\d", r"\w", r"\s", r"\D", r"\W", r"\S"]
_UNSUPPORTED = [r"\b", r"\B", "(?=a)", "(?!b)", "(?<=a)", "(?<!a)", r"(a)\1", "(?P<n>a)(?P=n)", "(?>ab)",
                "(a)?(?(1)b|c)", "a*+", "a++", "a?+", "a{2}+"]
_FORMATS = ["date", "time", "date-time", "email", "ipv4", "ipv6", "uuid", "uri", "hostname", "duration",
            "uri-reference", "regex", "unknown-format", "json-pointer", "idn-email"]


def _literal(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.12:
        return rng.choice(_ESCAPES)
    if r < 0.2:
        return "\\" + rng.choice(_SPECIALS)
    return re.escape(rng.choice(_LITERALS)) if rng.random() < 0.5 else rng.choice(
        [c for c in _LITERALS if c not in "#' \"~"] or ["a"])


def _class(rng: random.Random) -> str:
    items = []
    for _ in range(rng.randint(1, 4)):
        r = rng.random()
        if r < 0.3:
            a, b = sorted(rng.sample("abcdefxyzAZ09", 2))
            items.append(f"{a}-{b}")
        elif r < 0.45:
            items.append(rng.choice(_CATEGORIES))
        elif r < 0.55:
            items.append(rng.choice([r"\u0400-\u04ff", "à-ÿ", "\u4e00-\u9fff", r"\x00-\x1f", "😀-🙏", r"\]", r"\-",
                                     "^", r"\\", r"\ud800-\udfff"]))
        else:
            c = rng.choice(_LITERALS)
            items.append(re.escape(c) if c in "]\\^-[" else c)
    neg = "^" if rng.random() < 0.25 else ""
    body = "".join(items)
    if not neg and body.startswith("^"):
        body = "\\" + body
    return f"[{neg}{body}]"


def _quantifier(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.5:
        q = rng.choice(["*", "+", "?"])
    else:
        big = rng.random() < 0.08
        lo = rng.choice([0, 1, 2, 3]) if not big else rng.choice([20, 100, 300])
        hi = lo + rng.choice([0, 1, 2, 5]) if not big else rng.choice([lo, lo + 50, 1000])
        q = rng.choice([f"{{{lo}}}", f"{{{lo},}}", f"{{{lo},{hi}}}", f"{{,{hi}}}"])
    if rng.random() < 0.15:
        q += "?"
    return q


def _atom(rng: random.Random, depth: int) -> str:
    r = rng.random()
    if r < 0.4:
        return _literal(rng)
    if r < 0.58:
        return _class(rng)
    if r < 0.64:
        return "."
    if r < 0.72:
        return rng.choice(_CATEGORIES)
    if r < 0.92 and depth < 3:
        inner = _alternation(rng, depth + 1)
        opener = rng.choice(["(", "(?:", "(?:", "(?P<g%d>" % rng.randrange(100), "(?i:", "(?-i:", "(?s:", "(?a:",
                             "(?x:", "(?m:"])
        return f"{opener}{inner})"
    if r < 0.96:
        return rng.choice(_UNSUPPORTED)
    return rng.choice([r"\A", r"\Z", "^", "$"])


def _sequence(rng: random.Random, depth: int) -> str:
    parts = []
    for _ in range(rng.randint(1, 4 if depth < 2 else 2)):
        a = _atom(rng, depth)
        if rng.random() < 0.35 and not a.startswith(("\\A", "\\Z", "^", "$", "\\b", "\\B")):
            a += _quantifier(rng)
        parts.append(a)
    return "".join(parts)


def _alternation(rng: random.Random, depth: int) -> str:
    n = 1 if rng.random() < 0.65 else rng.randint(2, 3)
    return "|".join(_sequence(rng, depth) for _ in range(n))


def random_regex(rng: random.Random) -> tuple[str, int]:
    """A random ``(pattern, flags)``: literals (escaped, non-ASCII, case-folding
    specials), classes, categories, groups of every kind, alternation, greedy / lazy /
    counted quantifiers (now and then large ones), anchors, and now and then a feature
    the engine refuses (lookarounds, backreferences, word boundaries, possessive
    quantifiers) or ``re.LOCALE``."""
    pattern = _alternation(rng, 0)
    r = rng.random()
    if r < 0.1:
        pattern = "^" + pattern
    elif r < 0.2:
        pattern = pattern + "$"
    elif r < 0.25:
        pattern = rng.choice(["(?i)", "(?s)", "(?x)", "(?a)", "(?m)"]) + pattern
    flags = 0
    for flag, p in ((re.IGNORECASE, 0.12), (re.DOTALL, 0.08), (re.MULTILINE, 0.05), (re.ASCII, 0.06),
                    (re.VERBOSE, 0.04), (re.LOCALE, 0.01)):
        if rng.random() < p:
            flags |= flag
    return pattern, flags


#: Realistic patterns to mutate (MaskBench's ``pattern`` values join them where the data is there).
SEED_PATTERNS = [
    r"[0-9]+", r"\d{3}-\d{4}", r"^[a-z]+-[0-9]{2}$", r"(yes|no|maybe)", r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}",
    r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?", r"^(?!con$)[a-z]+$", r"(ab|a)(bc|c)*?d??", r"\Aab+\Z",
    r"(?x) a b # verbose\n c", r"[\]\-^]+", r"^\+?[1-9]\d{1,14}$", r"^[A-Z]{2}\d{2}[A-Z0-9]{1,30}$",
    r"^#([A-Fa-f0-9]{6}|[A-Fa-f0-9]{3})$", r"^(\([0-9]{3}\))?[0-9]{3}-[0-9]{4}$", r"^v?\d+\.\d+\.\d+(-[\w.]+)?$",
    r"^https?://[^\s/$.?#].[^\s]*$", r"héllo|wörld|日本語+", r"(?i)straße", r"[^\x00-\x7f]{1,4}", r"a$\n?",
    r"(?m)^a$", r"\w+@\w+\.com", r"^[\p{L}]+$", r"^\S+$", r"(a|b){2,5}c{0,3}?", r"[\u0400-\u04FF]{1,6}",
]


def mutate_text(s: str, rng: random.Random, pool: str = "()[]{}|*+?^$\\.-,:aZ0 é\n") -> str:
    """One character-level edit of ``s``: delete, insert, replace, swap, duplicate."""
    op = rng.randrange(5) if s else 1
    i = rng.randrange(len(s) + 1)
    c = rng.choice(pool)
    if op == 0:
        return s[:i] + s[i + 1 :]
    if op == 1:
        return s[:i] + c + s[i:]
    if op == 2:
        return s[:i] + c + s[i + 1 :]
    if op == 3 and len(s) > 1:
        i = min(i, len(s) - 2)
        return s[:i] + s[i + 1] + s[i] + s[i + 2 :]
    return s[:i] + s[i : i + 3] + s[i:]


def mutated_regex(rng: random.Random, seeds: list[str] | None = None) -> tuple[str, int]:
    """A seed pattern (``SEED_PATTERNS`` or ``seeds``) after one to three edits."""
    pattern = rng.choice(seeds or SEED_PATTERNS)
    for _ in range(rng.randint(1, 3)):
        pattern = mutate_text(pattern, rng)
    flags = re.IGNORECASE if rng.random() < 0.1 else 0
    return pattern, flags


# -- regexes: reference-side members ------------------------------------------------------

_POOL = [chr(c) for c in range(32, 127)] + ["é", "ß", "Ω", "ж", "日", "😀", "\u00a0", "K", "ſ", "\t", "\n"]


def _pool_char(rng: random.Random, ok) -> str | None:
    for _ in range(40):
        c = rng.choice(_POOL) if rng.random() < 0.9 else chr(rng.randrange(0x20, 0x3000))
        if ok(c):
            return c
    return None


def regex_members(pattern: str, flags: int, rng: random.Random, n: int) -> list[str]:
    """Up to ``n`` strings ``re.fullmatch(pattern, s, flags)`` accepts, derived from
    ``re``'s parse tree (one-character items drawn so that ``re`` itself accepts them)."""
    try:
        tree = _sre.parse(pattern, flags)
        compiled = re.compile(pattern, flags)
    except (re.error, ValueError, RecursionError, OverflowError):
        return []
    one_char = {}

    def char_for(op, av, fl) -> str:
        key = (op, repr(av), fl)
        rx = one_char.get(key)
        if rx is None:
            sub = _sre.SubPattern(tree.state, [(op, av)])
            rx = one_char[key] = _CharTest(sub, fl)
        c = _pool_char(rng, rx.ok)
        return c if c is not None else "a"

    out = []
    for _ in range(n * 4):
        if len(out) >= n:
            break
        chars: list[str] = []
        try:
            _sample_tree(tree, tree.state.flags | flags, rng, chars, char_for)
        except (ValueError, RecursionError):
            return out
        s = "".join(chars)
        try:
            with deadline(2.0):
                ok = compiled.fullmatch(s) is not None
        except Hang:
            continue
        if ok and s not in out:
            out.append(s)
    return out


class _CharTest:
    """Whether one character matches a one-character parse item (``re`` decides, via
    the item's own compiled code)."""

    def __init__(self, sub, flags: int):
        try:  # Python >= 3.11
            import re._compiler as _compiler
        except ImportError:  # pragma: no cover - Python 3.10
            import sre_compile as _compiler

        try:
            self.rx = _compiler.compile(sub, flags & ~re.VERBOSE)
        except Exception:  # the item alone is no pattern re compiles: any character, checked later
            self.rx = None

    def ok(self, c: str) -> bool:
        if self.rx is None:
            return True
        return self.rx.fullmatch(c) is not None


def _sample_tree(items, flags: int, rng: random.Random, out: list, char_for) -> None:
    for op, av in items:
        if op is _C.LITERAL:
            c = chr(av)
            if flags & re.IGNORECASE and rng.random() < 0.4 and len(c.swapcase()) == 1:
                c = c.swapcase()
            out.append(c)
        elif op in (_C.NOT_LITERAL, _C.ANY, _C.IN):
            out.append(char_for(op, av, flags))
        elif op is _C.BRANCH:
            _sample_tree(rng.choice(av[1]), flags, rng, out, char_for)
        elif op is _C.SUBPATTERN:
            _sample_tree(av[3], (flags | av[1]) & ~av[2], rng, out, char_for)
        elif op in (_C.MAX_REPEAT, _C.MIN_REPEAT):
            lo, hi, sub = av
            if lo > 60:
                raise ValueError("repeat too long to sample")
            hi = lo + 3 if hi == _C.MAXREPEAT else min(hi, lo + 3)
            for _ in range(rng.randint(lo, rng.randint(lo, hi))):
                _sample_tree(sub, flags, rng, out, char_for)
        elif op is _C.AT:
            if str(av) == "AT_END" and rng.random() < 0.2:
                out.append("\n")
        else:
            raise ValueError(f"cannot sample {op}")


def regex_reference(compiled: re.Pattern, data: bytes) -> bool | None:
    """``re.fullmatch`` on the UTF-8 decoding (False for bytes that are not UTF-8);
    None when ``re`` ran past its deadline."""
    try:
        s = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    try:
        with deadline(2.0):
            return compiled.fullmatch(s) is not None
    except Hang:
        return None


def _utf8(s: str) -> bytes | None:
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError:
        return None


def check_regex(pattern: str, flags: int, vocab, rng: random.Random, source: str = "random",
                samples: int = 6, budget: float = BUDGET_S) -> Outcome:
    """Compile ``guided.Regex(pattern, flags)`` and judge it against ``re``."""
    out = Outcome("regex", source, (pattern, flags))
    try:
        compiled = re.compile(pattern, flags)
        re_error = None
    except (re.error, ValueError, OverflowError, RecursionError) as e:
        compiled, re_error = None, e
    guide = compile_spec(guided.Regex(pattern, flags), vocab, out, budget)
    if out.unexpected:
        return out
    members = regex_members(pattern, flags, rng, samples) if compiled is not None else []
    if guide is None:
        if re_error is None and out.kind == "RegexSyntaxError":
            out.unexpected = "RegexSyntaxError for a pattern re compiles"
        elif out.kind == "EmptyLanguageError":
            for s in members:
                if _utf8(s) is not None:
                    out.unexpected = f"EmptyLanguageError, but re.fullmatch accepts {s!r}"
                    break
        elif out.kind not in ("RegexSyntaxError", "UnsupportedRegexFeature", "EmptyLanguageError",
                              "RegexTooLargeError", "CompileTimeoutError", "GuideMemoryError"):
            out.unexpected = f"{out.kind} is not a RegexError"
        return out
    if re_error is not None:
        out.unexpected = f"compiled a pattern re refuses ({re_error})"
        return out
    stepper = Stepper(guide)
    with _judged(out):
        candidates = []
        for s in members:
            b = _utf8(s)
            if b is not None:
                candidates.append((b, "member of re"))
        for _ in range(samples):
            w = stepper.walk(rng)
            if w is not None:
                candidates.append((w, "walk"))
        base = [c for c, _ in candidates]
        for b in base[:]:
            candidates.extend((m, "mutation") for m in byte_mutations(b, rng, 2))
        if not base:
            candidates.extend((m, "mutation") for m in byte_mutations(b"", rng, 3))
        for data, why in candidates:
            expected = regex_reference(compiled, data)
            if expected is None:
                out.note("re timed out")
                continue
            got = stepper.judged(data, rng)
            out.checked += 1
            if got != expected:
                side = "accepts" if got else "refuses"
                raise _Unexpected(f"guide {side} {data!r} ({why}); re.fullmatch says {expected}")
    return out


# -- JSON Schema: generation --------------------------------------------------------------

_KEYS = ["a", "b", "name", "id", "x-y", "é", "", 'q"uote', "back\\slash", "日本", "tags", "n"]
_VALUES = [0, 1, -7, 2.5, 1e-7, 10**20, 10**400, -1e308, "", "x", "a-12", "é", "\u2028", "\x00", None, True, False,
           [], {}, [1, "a"], {"k": 1}]


def random_value(rng: random.Random, depth: int = 0):
    """A small JSON value."""
    r = rng.random()
    if depth < 2 and r < 0.1:
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if depth < 2 and r < 0.2:
        return {rng.choice(_KEYS): random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    return copy.deepcopy(rng.choice(_VALUES))


def _bogus(rng: random.Random):
    return rng.choice([-1, "3", 2.5, True, None, [], {}, float("inf"), float("nan"), 10**400, -(10**30), "foo",
                       [1, 1], {"type": "string"}, 1e308])


def _number(rng: random.Random, integral: bool):
    r = rng.random()
    if r < 0.6:
        return rng.randint(-100, 1000)
    if r < 0.75 and not integral:
        return round(rng.uniform(-100, 100), rng.choice([1, 2, 3]))
    if r < 0.85:
        return rng.choice([0, -1, 10**15, -(10**18), 2**53 + 1])
    return rng.choice([0.5, 1e-3, 123.456, -0.001, 1e20])


class SchemaGen:
    """Random JSON Schemas: every keyword group the compiler reads, ``$defs`` / ``$ref``
    (recursive ones too), drafts, and now and then a keyword value of the wrong shape.

    Args:
        rng: the random source.
        bogus: how often a keyword gets a value of the wrong type or range.
    """

    def __init__(self, rng: random.Random, bogus: float = 0.03):
        self.rng = rng
        self.bogus = bogus
        self.defs: list[str] = []

    def value(self, v):
        return _bogus(self.rng) if self.rng.random() < self.bogus else v

    def schema(self, depth: int = 0):
        rng = self.rng
        r = rng.random()
        if depth >= 3:
            r *= 0.44
        if r < 0.02:
            return rng.choice([True, False])
        if r < 0.04:
            return {}
        if r < 0.36:
            return self.scalar()
        if r < 0.45:
            return self.enum()
        if r < 0.62:
            return self.object(depth)
        if r < 0.74:
            return self.array(depth)
        if r < 0.9:
            return self.logic(depth)
        if self.defs and r < 0.96:
            return {"$ref": self.value("#/$defs/" + rng.choice(self.defs))}
        return {"type": [t for t in ("string", "integer", "null", "boolean", "number", "array", "object")
                         if rng.random() < 0.35] or ["null"], "maxLength": 3, "maximum": 9}

    def scalar(self):
        rng = self.rng
        t = rng.choice(["integer", "number", "string", "string", "boolean", "null"])
        s: dict = {"type": self.value(t)}
        if t in ("integer", "number"):
            integral = t == "integer"
            if rng.random() < 0.5:
                s[rng.choice(["minimum", "exclusiveMinimum"])] = self.value(_number(rng, integral))
            if rng.random() < 0.5:
                s[rng.choice(["maximum", "exclusiveMaximum"])] = self.value(_number(rng, integral))
            if rng.random() < 0.2:
                s["multipleOf"] = self.value(rng.choice([2, 3, 7, 0.5, 2.5, 0.01, 0.1, 1e-9, 10]))
        elif t == "string":
            if rng.random() < 0.4:
                s["minLength"] = self.value(rng.choice([0, 1, 2, 5]))
            if rng.random() < 0.4:
                s["maxLength"] = self.value(rng.choice([0, 1, 3, 8, 300]))
            if rng.random() < 0.3:
                if rng.random() < 0.5:
                    s["pattern"] = rng.choice(SEED_PATTERNS)
                else:
                    s["pattern"] = random_regex(rng)[0]
            if rng.random() < 0.2:
                s["format"] = rng.choice(_FORMATS)
        return s

    def enum(self):
        rng = self.rng
        if rng.random() < 0.3:
            return {"const": random_value(rng)}
        s = {"enum": self.value([random_value(rng) for _ in range(rng.randint(1, 5))])}
        if rng.random() < 0.3:
            s["type"] = rng.choice(["string", "integer", "number", "array", "object"])
        return s

    def object(self, depth: int):
        rng = self.rng
        keys = rng.sample(_KEYS, rng.randint(0, 4))
        s: dict = {"type": "object"} if rng.random() < 0.8 else {}
        if keys or rng.random() < 0.5:
            s["properties"] = {k: self.schema(depth + 1) for k in keys}
        if keys and rng.random() < 0.6:
            s["required"] = self.value(rng.sample(keys, rng.randint(1, len(keys))))
        r = rng.random()
        if r < 0.35:
            s["additionalProperties"] = False
        elif r < 0.5:
            s["additionalProperties"] = self.schema(depth + 1)
        if rng.random() < 0.12:
            s["patternProperties"] = {rng.choice(["^x-", "^a", "b$", "[0-9]", "^(?!id)"]): self.schema(depth + 1)}
        if rng.random() < 0.08:
            s["propertyNames"] = rng.choice([{"maxLength": 3}, {"pattern": "^[a-z]+$"}, {"enum": ["a", "b"]}, False])
        if rng.random() < 0.12:
            s[rng.choice(["minProperties", "maxProperties"])] = self.value(rng.randint(0, 3))
        if keys and rng.random() < 0.08:
            s["dependentRequired"] = {keys[0]: keys[1:2] or ["zz"]}
        if keys and rng.random() < 0.05:
            s["dependentSchemas"] = {keys[0]: {"required": keys[-1:]}}
        if rng.random() < 0.04:
            s["unevaluatedProperties"] = False
        return s

    def array(self, depth: int):
        rng = self.rng
        s: dict = {"type": "array"} if rng.random() < 0.85 else {}
        if rng.random() < 0.2:
            s["prefixItems"] = [self.schema(depth + 1) for _ in range(rng.randint(1, 3))]
            if rng.random() < 0.5:
                s["items"] = False
        elif rng.random() < 0.85:
            s["items"] = self.schema(depth + 1)
        if rng.random() < 0.4:
            s["minItems"] = self.value(rng.randint(0, 3))
        if rng.random() < 0.4:
            s["maxItems"] = self.value(rng.randint(0, 5))
        if rng.random() < 0.12:
            s["uniqueItems"] = self.value(True)
        if rng.random() < 0.1:
            s["contains"] = self.schema(depth + 1)
            if rng.random() < 0.4:
                s[rng.choice(["minContains", "maxContains"])] = rng.randint(0, 2)
        return s

    def logic(self, depth: int):
        rng = self.rng
        kind = rng.choice(["allOf", "anyOf", "oneOf", "not", "if"])
        base = self.scalar() if rng.random() < 0.3 else {}
        if kind == "not":
            base["not"] = self.schema(depth + 1)
        elif kind == "if":
            base["if"] = self.schema(depth + 1)
            if rng.random() < 0.8:
                base["then"] = self.schema(depth + 1)
            if rng.random() < 0.6:
                base["else"] = self.schema(depth + 1)
        else:
            base[kind] = self.value([self.schema(depth + 1) for _ in range(rng.randint(1, 3))])
        return base

    def root(self):
        """A whole schema: sometimes with ``$defs`` (maybe recursive) and a ``$schema``."""
        rng = self.rng
        defs = {}
        if rng.random() < 0.2:
            self.defs = [f"d{i}" for i in range(rng.randint(1, 2))]
            for name in self.defs:
                defs[name] = self.schema(1)
            if rng.random() < 0.3:  # a recursive definition
                defs[self.defs[0]] = {"type": "object", "properties": {
                    "v": {"type": "integer"}, "next": {"$ref": f"#/$defs/{self.defs[0]}"}}}
        s = self.schema(0)
        self.defs = []
        if defs:
            s = {"$defs": defs, "allOf": [s]} if not isinstance(s, dict) else {"$defs": defs, **s}
            if "$ref" not in json.dumps(s) or rng.random() < 0.5:
                s.setdefault("properties", {})
                if isinstance(s["properties"], dict):
                    s["properties"]["r"] = {"$ref": f"#/$defs/{next(iter(defs))}"}
        if isinstance(s, dict) and rng.random() < 0.08:
            s["$schema"] = rng.choice(["http://json-schema.org/draft-07/schema#",
                                       "http://json-schema.org/draft-04/schema#",
                                       "https://json-schema.org/draft/2019-09/schema"])
        return s


def random_schema(rng: random.Random, bogus: float = 0.03):
    """A random JSON Schema (see ``SchemaGen``)."""
    return SchemaGen(rng, bogus).root()


# -- JSON Schema: keyword-by-keyword mutation ---------------------------------------------

_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_ONE = ("additionalProperties", "items", "contains", "not", "if", "then", "else", "propertyNames",
               "additionalItems", "unevaluatedProperties", "unevaluatedItems")


def subschemas(schema, path=()):
    """Every sub-schema that is a dict, with its path of keys from the root."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for k, v in schema.items():
        if k in _SCHEMA_MAPS and isinstance(v, dict):
            for name, sub in v.items():
                yield from subschemas(sub, path + (k, name))
        elif k in _SCHEMA_LISTS and isinstance(v, list):
            for i, sub in enumerate(v):
                yield from subschemas(sub, path + (k, i))
        elif k in _SCHEMA_ONE or (k == "dependencies" and isinstance(v, dict)):
            if isinstance(v, list):
                for i, sub in enumerate(v):
                    yield from subschemas(sub, path + (k, i))
            elif k == "dependencies":
                for name, sub in v.items():
                    yield from subschemas(sub, path + (k, name))
            else:
                yield from subschemas(v, path + (k,))


def _mutated_keyword_value(key, value, rng: random.Random, gen: SchemaGen):
    """A new value for one keyword, near the old one or of the wrong shape."""
    r = rng.random()
    if r < 0.08:
        return _bogus(rng)
    if isinstance(value, bool):
        return not value if rng.random() < 0.7 else gen.schema(2)
    if isinstance(value, (int, float)):
        try:
            return rng.choice([value + 1, value - 1, -value, value * 10, 0, value / 3, 10**20, 1e300, value + 0.5])
        except (OverflowError, ValueError):
            return 0
    if isinstance(value, str):
        if key == "type":
            return rng.choice(["string", "integer", "number", "object", "array", "boolean", "null",
                               ["string", "null"], ["integer", "string"], "any"])
        if key == "pattern":
            return mutate_text(value, rng)
        if key == "format":
            return rng.choice(_FORMATS)
        if key == "$ref":
            return rng.choice([value + "x", "#", "#/$defs/missing", value.rsplit("/", 1)[0], "other.json#/a"])
        return value + "x" if rng.random() < 0.5 else ""
    if isinstance(value, list):
        v = list(value)
        if key in ("enum", "required", "type") or not all(isinstance(x, dict) for x in v):
            op = rng.randrange(3)
            if op == 0 and v:
                del v[rng.randrange(len(v))]
            elif op == 1:
                v.append(rng.choice(list(v) + ["zz", 3, None, "string"]) if v else "zz")
            else:
                v.insert(0, random_value(rng) if key == "enum" else "a")
            return v
        op = rng.randrange(3)
        if op == 0 and len(v) > 1:
            del v[rng.randrange(len(v))]
        elif op == 1:
            v.append(gen.schema(2))
        elif v:
            v[rng.randrange(len(v))] = gen.schema(2)
        return v
    if isinstance(value, dict):
        v = dict(value)
        if key in _SCHEMA_MAPS or key in ("dependentRequired", "dependencies"):
            op = rng.randrange(3)
            if op == 0 and v:
                del v[rng.choice(list(v))]
            elif op == 1:
                v[rng.choice(_KEYS)] = gen.schema(2)
            elif v:
                k = rng.choice(list(v))
                v[k + "_"] = v.pop(k)
            return v
        return gen.schema(2)
    return gen.schema(2)


def mutate_schema(schema, rng: random.Random, edits: int | None = None):
    """``schema`` with one to three keyword-level edits at random sub-schemas: a keyword
    dropped, its value changed (near the old one, or of the wrong shape), a keyword
    added from a random schema, or a sub-schema replaced by ``true`` / ``false`` / a
    random one."""
    schema = copy.deepcopy(schema)
    gen = SchemaGen(rng, bogus=0.0)
    for _ in range(edits or rng.choice([1, 1, 1, 2, 3])):
        nodes = list(subschemas(schema))
        if not nodes:
            return gen.root()
        path, node = rng.choice(nodes)
        r = rng.random()
        if r < 0.05 and path:
            parent = schema
            for p in path[:-1]:
                parent = parent[p]
            parent[path[-1]] = rng.choice([True, False, {}, gen.schema(2)])
        elif r < 0.3 and node:
            del node[rng.choice(list(node))]
        elif r < 0.8 and node:
            k = rng.choice(list(node))
            node[k] = _mutated_keyword_value(k, node[k], rng, gen)
        else:
            extra = gen.schema(2)
            if isinstance(extra, dict) and extra:
                k = rng.choice(list(extra))
                node[k] = extra[k]
    return schema


# -- JSON Schema: reference-side instances ------------------------------------------------

_FORMAT_EXAMPLES = {
    "date": ["2024-02-29", "1999-12-31"], "time": ["12:34:56Z", "23:59:59+02:00"],
    "date-time": ["2024-01-01T00:00:00Z", "1985-04-12T23:20:50.52Z"], "email": ["a@b.co", "x.y@example.com"],
    "ipv4": ["127.0.0.1", "192.168.0.255"], "ipv6": ["::1", "2001:db8::8a2e:370:7334"],
    "uuid": ["123e4567-e89b-12d3-a456-426614174000"], "uri": ["https://example.com/a?b=c", "urn:isbn:123"],
    "hostname": ["example.com", "a-b.c"], "duration": ["P1D", "PT1H30M"],
}


def _resolve(schema, root, depth=0):
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and depth < 20:
        ref = schema["$ref"]
        if not ref.startswith("#"):
            return {}
        node = root
        try:
            for part in ref[1:].split("/")[1:]:
                node = node[part.replace("~1", "/").replace("~0", "~")]
        except (KeyError, TypeError, IndexError):
            return {}
        schema, depth = node, depth + 1
    return schema


def sample_instance(schema, rng: random.Random, root=None, depth: int = 0):
    """A value meant to satisfy ``schema`` (best effort: check it with the reference)."""
    root = schema if root is None else root
    schema = _resolve(schema, root)
    if schema is True or not isinstance(schema, dict) or depth > 5:
        return random_value(rng, 2)
    if "const" in schema:
        return copy.deepcopy(schema["const"])
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return copy.deepcopy(rng.choice(schema["enum"]))
    for kind in ("anyOf", "oneOf", "allOf"):
        parts = schema.get(kind)
        if isinstance(parts, list) and parts:
            part = _resolve(rng.choice(parts), root)
            if isinstance(part, dict):
                merged = {k: v for k, v in schema.items() if k != kind}
                merged.update(part)
                return sample_instance(merged, rng, root, depth + 1)
    t = schema.get("type")
    if isinstance(t, list):
        t = rng.choice(t) if t else None
    if t is None:
        if "properties" in schema or "required" in schema:
            t = "object"
        elif "items" in schema or "prefixItems" in schema:
            t = "array"
        elif "pattern" in schema or "minLength" in schema or "format" in schema:
            t = "string"
        elif any(k in schema for k in ("minimum", "maximum", "multipleOf")):
            t = "integer"
        else:
            return random_value(rng, 1)
    if t == "null":
        return None
    if t == "boolean":
        return rng.random() < 0.5
    if t in ("integer", "number"):
        lo = schema.get("minimum", schema.get("exclusiveMinimum"))
        hi = schema.get("maximum", schema.get("exclusiveMaximum"))
        lo = lo if isinstance(lo, (int, float)) and math.isfinite(lo) else -50
        hi = hi if isinstance(hi, (int, float)) and math.isfinite(hi) else lo + 100
        step = schema.get("multipleOf")
        if isinstance(step, (int, float)) and step > 0 and math.isfinite(step):
            k = math.ceil(lo / step) if step >= 1e-6 else 0
            v = (k + rng.randint(0, 3)) * step
            return int(v) if t == "integer" or float(v).is_integer() and abs(v) < 2**53 else v
        if t == "integer":
            a, b = math.ceil(lo), math.floor(hi)
            return rng.randint(a, b) if a <= b and b - a < 10**12 else int(a)
        return round(rng.uniform(lo, hi), 3) if lo <= hi else lo
    if t == "string":
        fmt = schema.get("format")
        if fmt in _FORMAT_EXAMPLES:
            return rng.choice(_FORMAT_EXAMPLES[fmt])
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            got = regex_members(pattern, 0, rng, 1)
            if got:
                return got[0]
        lo = schema.get("minLength", 0)
        hi = schema.get("maxLength", lo + 6)
        lo = lo if isinstance(lo, int) and 0 <= lo < 50 else 0
        hi = hi if isinstance(hi, int) and hi >= lo else lo + 6
        n = rng.randint(lo, min(hi, lo + 6))
        return "".join(rng.choice("abcxyz é日\"\\/\n") for _ in range(n))
    if t == "array":
        prefix = schema.get("prefixItems") if isinstance(schema.get("prefixItems"), list) else []
        items = schema.get("items", {})
        lo = schema.get("minItems", 0)
        hi = schema.get("maxItems", 4)
        lo = lo if isinstance(lo, int) and 0 <= lo < 10 else 0
        hi = hi if isinstance(hi, int) and hi >= lo else lo + 3
        n = rng.randint(lo, min(hi, lo + 3))
        out = []
        for i in range(n):
            sub = prefix[i] if i < len(prefix) else items
            if sub is False:
                break
            out.append(sample_instance(sub, rng, root, depth + 1))
        return out
    if t == "object":
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        required = schema.get("required") if isinstance(schema.get("required"), list) else []
        out = {}
        p_optional = min(0.5, 6 / max(1, len(props)))  # (schemas of hundreds of keys: small instances)
        for k, sub in props.items():
            if k in required or rng.random() < p_optional:
                out[k] = sample_instance(sub, rng, root, depth + 1)
        for k in required:
            if isinstance(k, str) and k not in out:
                out[k] = sample_instance(schema.get("additionalProperties", {}), rng, root, depth + 1)
        return out
    return random_value(rng, 1)


# -- JSON Schema: judging -----------------------------------------------------------------


class _Duplicates:
    """An object's members where a key repeats: both readings are judged (a reader may
    keep the first value or the last)."""

    def __init__(self, pairs):
        self.pairs = pairs


def _with_duplicates(pairs):
    keys = [k for k, _ in pairs]
    return _Duplicates(pairs) if len(set(keys)) != len(keys) else dict(pairs)


def _readings(value, first: bool):
    """``value`` with each object that repeats a key read one way (first or last wins)."""
    if isinstance(value, _Duplicates):
        out = {}
        for k, v in value.pairs:
            if not (first and k in out):
                out[k] = _readings(v, first)
        return out
    if isinstance(value, dict):
        return {k: _readings(v, first) for k, v in value.items()}
    if isinstance(value, list):
        return [_readings(v, first) for v in value]
    return value


def _refuse_constant(name):
    raise ValueError(f"{name} is not JSON")


class JsonReference:
    """``jsonschema``'s verdict on a text, with the cases it cannot judge exactly."""

    def __init__(self, schema):
        from json_helpers import exact_reference_validator

        self.validator = exact_reference_validator(schema)
        checked = set(self.validator.FORMAT_CHECKER.checkers)
        #: Formats the schema names that the reference does not check (``hostname``
        #: without the ``fqdn`` package): the guide may enforce what it lets pass.
        self.unchecked_formats = {f for f in _formats(schema) if f not in checked}
        #: Formats the compiler enforces by a regular subset of what validators accept
        #: (``email``, ``uri``, ``regex``, ...: documented), where refusals are allowed.
        from guided.grammars.json_schema.keywords import EXACT_FORMATS

        self.subset_formats = {f for f in _formats(schema) if f in checked and f not in EXACT_FORMATS}
        #: Whether a sub-schema declares a draft of its own: ``jsonschema`` switches to
        #: it there (``$ref`` siblings ignored under draft 4), the compiler keeps the root's.
        self.nested_drafts = any("$schema" in sub for path, sub in subschemas(schema) if path) or (
            isinstance(schema, dict) and '"$schema"' in json.dumps(
                {k: v for k, v in schema.items() if k != "$schema"}, default=repr))

    def parse(self, data: bytes):
        """``(readings, exact)``: the parsed JSON (``ValueError`` if not JSON), one
        reading per way of taking repeated keys (one where none repeats), and whether
        every number in it is held exactly by a float (or an int below 2**53)."""
        text = data.decode("utf-8")  # UnicodeDecodeError is a ValueError
        exact = [True]

        def flt(s):
            v = float(s)
            try:
                if not math.isfinite(v) or Decimal(s) != Decimal(v):
                    exact[0] = False
            except ArithmeticError:  # an exponent past what Decimal compares
                exact[0] = False
            return v

        def integer(s):
            v = int(s)
            if abs(v) > 2**53:
                exact[0] = False
            return v

        value = json.loads(text, object_pairs_hook=_with_duplicates, parse_constant=_refuse_constant,
                           parse_float=flt, parse_int=integer)
        first, last = _readings(value, True), _readings(value, False)
        return ([first] if first == last else [first, last]), exact[0]

    def valid(self, value) -> bool | None:
        """The validator's verdict; None where it raised (an invalid ``pattern`` it
        compiles at validation time, a ``$ref`` it cannot resolve, ...)."""
        try:
            with deadline(5.0):
                return bool(self.validator.is_valid(value))
        except Hang:
            return None
        except Exception:
            return None
        except BaseException as e:  # a Rust panic from the validator's dependencies
            if type(e).__name__ == "PanicException":
                return None
            raise

    def verdict(self, readings) -> bool | None:
        """Valid under every reading (None: the reference could not judge one)."""
        got = [self.valid(v) for v in readings]
        return None if None in got else all(got)


def _formats(schema) -> set:
    out = set()
    stack = [schema]
    while stack:
        s = stack.pop()
        if isinstance(s, dict):
            if isinstance(s.get("format"), str):
                out.add(s["format"])
            stack.extend(s.values())
        elif isinstance(s, list):
            stack.extend(s)
    return out


def _writable(value) -> bool:
    """Whether the compact text of ``value`` is one the compiler may be asked to write:
    no integral floats (``1.0``), no exponent forms, no non-finite numbers."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return True
    if isinstance(value, float):
        return math.isfinite(value) and not value.is_integer() and "e" not in repr(value) and "E" not in repr(value)
    if isinstance(value, int):
        return True
    if isinstance(value, list):
        return all(_writable(v) for v in value)
    if isinstance(value, dict):
        return all(_writable(v) for v in value.values())
    return False


def _subtracts_supersets(schema, whitespace, key_order) -> bool:
    """Whether compiling ``schema`` subtracted a superset somewhere (``not``, ``oneOf``,
    ``if`` by automaton algebra over an inexact automaton): the documented way the
    compiler narrows a schema, refusing valid values rather than accepting invalid ones."""
    from guided.grammars.json_schema.compiler import SchemaCompiler

    try:
        with deadline(HARD_CAP_S), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c = SchemaCompiler(schema, whitespace, key_order=key_order)
            c.compile()
    except (Exception, Hang):
        return False
    over = c._partner
    return over is not None and over.approximations > 0


def _compact(value) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")


def check_schema(schema, vocab, rng: random.Random, source: str = "random", instances=(),
                 whitespace="compact", key_order: str = "schema", samples: int = 4,
                 budget: float = BUDGET_S) -> Outcome:
    """Compile ``guided.JsonSchema(schema, whitespace, key_order=...)`` and judge it
    against ``jsonschema`` on guide walks, ``instances`` (values; MaskBench's tests),
    values sampled from the schema, and mutations of all of them."""
    from json_helpers import mutations, ordered

    out = Outcome("json", source, schema)
    try:
        spec = guided.JsonSchema(schema, whitespace=whitespace, key_order=key_order)
    except guided.SpecError as e:
        out.kind = type(e).__name__
        return out
    guide = compile_spec(spec, vocab, out, budget)
    if guide is None or out.unexpected:
        # RegexTooLargeError is documented for JSON Schemas too (an automaton past its
        # size limits); the other regex errors and grammar errors are not.
        if guide is None and not out.unexpected and out.kind in (
                "RegexSyntaxError", "UnsupportedRegexFeature", "EmptyLanguageError", "RegexError", "GrammarError"):
            out.unexpected = f"{out.kind} for a JSON Schema: not a SchemaError naming keyword and pointer"
        return out
    try:
        ref = JsonReference(schema)
    except Exception as e:  # jsonschema cannot build a validator: nothing to compare with
        out.note(f"reference refused the schema ({type(e).__name__})")
        return out
    stepper = Stepper(guide)
    any_order = narrowed = None
    with _judged(out):
        values = [v for v in instances]
        for _ in range(samples):
            try:
                values.append(sample_instance(schema, rng))
            except (RecursionError, ValueError, TypeError, OverflowError):
                pass
        walks = []
        for _ in range(samples):
            w = stepper.walk(rng, max_tokens=64)
            if w is not None:
                walks.append(w)
        # Members drawn from the guide: always valid, always JSON.
        texts = []
        for w in walks:
            try:
                readings, exact = ref.parse(w)
            except ValueError:
                raise _Unexpected(f"guide wrote text that is not JSON: {w!r}") from None
            verdict = ref.verdict(readings)
            out.checked += 1
            if verdict is False and exact:
                dup = " (under one reading of its repeated key)" if len(readings) > 1 else ""
                raise _Unexpected(f"guide wrote {w!r}, which jsonschema finds invalid{dup}")
            if verdict is False:
                out.note("numbers a float cannot hold (skipped)")
            if len(readings) > 1:
                out.note("repeated additional key, valid either way")
            texts.append(w)
            values.extend(mutations(readings[-1], rng, 2))
        for v in list(values):
            if isinstance(v, (dict, list)):
                values.extend(mutations(v, rng, 1))
        candidates = [(t, "walk mutation") for w in texts for t in byte_mutations(w, rng, 2)]
        for v in values:
            try:
                text = _compact(ordered(v, schema) if isinstance(schema, dict) and key_order == "schema" else v)
            except (RecursionError, KeyError, TypeError, IndexError, AttributeError, ValueError):
                text = _compact(v)
            candidates.append((text, "instance"))
        for data, why in candidates:
            if len(data) > MAX_TEXT:
                out.note("text too long to judge (skipped)")
                continue
            try:
                readings, exact = ref.parse(data)
            except (ValueError, RecursionError):
                readings, exact = None, True
                verdict = False  # not JSON (or not UTF-8): never a member
            else:
                verdict = ref.verdict(readings)
            if verdict is None:
                out.note("reference could not judge")
                continue
            got = stepper.judged(data, rng)
            out.checked += 1
            if got == verdict:
                continue
            if not exact:
                out.note("numbers a float cannot hold (skipped)")
                continue
            if got:
                raise _Unexpected(f"guide accepts {data!r} ({why}), which jsonschema finds invalid")
            # A valid text refused: the documented limits first.
            value = readings[0]
            if len(readings) > 1:
                out.note("refused: a repeated key")
                continue
            if not _writable(value) or data != _compact(value):
                out.note("refused: valid text in a form the compiler does not write (spaces, 1.0, 1e5, escapes)")
                continue
            if ref.unchecked_formats:
                out.note("refused: a format the reference does not check")
                continue
            if ref.subset_formats:
                out.note("refused: a format the compiler writes a regular subset of")
                continue
            if ref.nested_drafts:
                out.note("refused: a sub-schema declares its own draft ($schema), read with the root's")
                continue
            if narrowed is None:
                narrowed = _subtracts_supersets(schema, whitespace, key_order)
            if narrowed:
                out.note("refused: the compile subtracted a superset (an inexact not / oneOf / if narrows)")
                continue
            if key_order == "schema":
                if any_order is None:
                    tmp = Outcome("json", source, schema)
                    any_order = compile_spec(guided.JsonSchema(schema, whitespace=whitespace, key_order="any"),
                                             vocab, tmp, budget) or False
                if any_order and Stepper(any_order).accepts(data):
                    out.note("refused: keys in another order than the schema lists them")
                    continue
            raise _Unexpected(f"guide refuses {data!r} ({why}), which jsonschema finds valid")
    return out


# -- MaskBench ----------------------------------------------------------------------------


def maskbench_rows(rng: random.Random, n: int, path: Path = MASKBENCH, passing_only: bool = True) -> list[dict]:
    """``n`` MaskBench rows at random (``id``, ``schema``, ``tests``); with
    ``passing_only``, among the schemas guided passed in the recorded run
    (``benchmarks/results``), so that a refused valid instance is news."""
    passing = None
    if passing_only and MASKBENCH_STATUSES.exists():
        with gzip.open(MASKBENCH_STATUSES, "rt", encoding="utf-8") as f:
            next(f)
            passing = {line.split("\t")[0] for line in f if line.split("\t")[1] == "passing"}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = f.readlines()
    order = list(range(len(lines)))
    rng.shuffle(order)
    out = []
    for i in order:
        row = json.loads(lines[i])
        if passing is not None and row["id"] not in passing:
            continue
        out.append(row)
        if len(out) >= n:
            break
    return out


def maskbench_patterns(path: Path = MASKBENCH, limit: int = 20000) -> list[str]:
    """Distinct ``pattern`` values of MaskBench's schemas (up to ``limit``)."""
    found: dict[str, None] = {}
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            for m in re.finditer(r'"pattern":\s*("(?:[^"\\]|\\.)*")', line):
                try:
                    found[json.loads(m.group(1))] = None
                except ValueError:
                    pass
            if len(found) >= limit:
                break
    return list(found)


def check_maskbench_mutant(row: dict, vocab, rng: random.Random, budget: float = BUDGET_S) -> Outcome:
    """A MaskBench schema after ``mutate_schema``, judged on its tests (re-judged by the
    reference against the mutated schema), walks and mutations."""
    schema = mutate_schema(row["schema"], rng)
    instances = [t["data"] for t in row["tests"]][:12]
    return check_schema(schema, vocab, rng, source="maskbench", instances=instances, budget=budget)


# -- lark grammars: generation ------------------------------------------------------------

_TERMINAL_DEFS = {
    "NAME": "/[a-z_][a-z0-9_]*/",
    "NUMBER": "/[0-9]+(\\.[0-9]+)?/",
    "WORD": "/[A-Za-zé]+/",
    "STR": '/"[^"\\n]*"/',
    "OP": '"+" | "-" | "*" | "/"',
    "CMP": '"<" | "<=" | "=" | ">="',
    "HEX": "/0x[0-9a-f]+/i",
    "KW": '"let"i',
    "LONG": "/a+b?/",
}
_LITERAL_TOKENS = ['"("', '")"', '","', '";"', '"if"', '"in"', '"a"', '"ab"', '"é"', '"->"', '"x"i', '"["', '"]"']
_IMPORTS = ["INT", "WS", "ESCAPED_STRING", "CNAME", "SIGNED_NUMBER", "WORD", "LETTER", "NEWLINE", "WS_INLINE"]


def random_grammar(rng: random.Random) -> str:
    """Random lark grammar text: a few rules over literals, terminals (own and
    ``%import``ed), sub-rules, groups, ``[..]``, ``? * +``, ``~ n``, aliases,
    ``?rule``, priorities, ``%ignore``; now and then something lark or guided refuses
    (an undefined rule, a terminal matching the empty string, a lookaround, a rule
    with no way out)."""
    n_rules = rng.randint(0, 3)
    rules = [f"r{i}" for i in range(n_rules)]
    terms = rng.sample(sorted(_TERMINAL_DEFS), rng.randint(0, 3))
    imports = rng.sample(_IMPORTS, rng.randint(0, 2))
    usable = terms + [i for i in imports if i not in ("WS", "WS_INLINE", "NEWLINE")]

    max_depth = 2 if rng.random() < 0.05 else 1  # now and then one lark would expand past any limit

    def item(depth: int, level: int) -> str:
        r = rng.random()
        if r < 0.35 or depth > max_depth:
            x = rng.choice(_LITERAL_TOKENS)
        elif r < 0.6 and usable:
            x = rng.choice(usable)
        elif r < 0.78 and rules[level + 1:]:
            x = rng.choice(rules[level + 1:] if rng.random() < 0.8 else rules)  # mostly downward, some recursion
        elif r < 0.9:
            x = "(" + alternatives(depth + 1, level) + ")"
        else:
            x = "[" + alternatives(depth + 1, level) + "]"
        q = rng.random()
        if q < 0.1:
            x += "?"
        elif q < 0.2:
            x += "*"
        elif q < 0.28:
            x += "+"
        elif q < 0.31:
            x += f" ~ {rng.randint(1, 3)}"
        elif q < 0.33:
            x += " ~ 1..3"
        return x

    def sequence(depth: int, level: int) -> str:
        return " ".join(item(depth, level) for _ in range(rng.randint(1, 3)))

    def alternatives(depth: int, level: int) -> str:
        alts = [sequence(depth, level) for _ in range(rng.randint(1, 3))]
        if depth == 0 and rng.random() < 0.2:
            alts[0] += f" -> alias{rng.randrange(9)}"
        return " | ".join(alts)

    lines = [f"start: {alternatives(0, -1)}"]
    for i, name in enumerate(rules):
        prefix = rng.choice(["", "", "?", "!"])
        lines.append(f"{prefix}{name}: {alternatives(0, i)}")
    for t in terms:
        prio = f".{rng.randint(1, 3)}" if rng.random() < 0.15 else ""
        lines.append(f"{t}{prio}: {_TERMINAL_DEFS[t]}")
    for i in imports:
        lines.append(f"%import common.{i}")
    r = rng.random()
    if r < 0.35:
        if "WS" not in imports:
            lines.append("%import common.WS")
        lines.append("%ignore WS")
    elif r < 0.5:
        lines.append('%ignore " "')
    r = rng.random()
    if r < 0.02:
        lines.append("start2: undefined_rule")
        lines[0] += " | undefined_rule"
    elif r < 0.04:
        lines.append("EMPTY: /a*/")
        lines[0] += " | EMPTY"
    elif r < 0.06:
        lines.append("LOOK: /(?=a)a/")
        lines[0] += " | LOOK"
    elif r < 0.08:
        lines[0] = "start: loop\nloop: \"a\" loop"
    return "\n".join(lines) + "\n"


def mutated_grammar(rng: random.Random, seeds: list[str] | None = None) -> str:
    """A grammar (a shipped one, or ``seeds``) after one or two edits: a character
    edit, or a line dropped or duplicated."""
    if seeds is None:
        seeds = [p.read_text(encoding="utf-8") for p in sorted(SHIPPED_GRAMMARS.glob("*.lark"))]
    text = rng.choice(seeds)
    for _ in range(rng.randint(1, 2)):
        lines = text.split("\n")
        r = rng.random()
        if r < 0.25 and len(lines) > 1:
            del lines[rng.randrange(len(lines))]
            text = "\n".join(lines)
        elif r < 0.35:
            i = rng.randrange(len(lines))
            lines.insert(i, lines[i])
            text = "\n".join(lines)
        else:
            text = mutate_text(text, rng, pool='"()[]|*+?:/\\ ab_.~-\n' + "é")
    return text


# -- lark grammars: the reference ---------------------------------------------------------


class GrammarReference:
    """Lark's reading of a grammar (its loader: rules after EBNF expansion, terminal
    patterns, ``%ignore``), as a recognizer over every tokenization.

    ``accepts(s)``: some split of ``s`` into lexemes, each fully matched by a terminal's
    regex (``re.fullmatch``), with ignored lexemes anywhere between and around, is a
    sentence of the rules. A superset of what lark's Earley parser accepts with
    ``lexer="dynamic_complete"``, and of what a longest-match lexer reads.

    ``sample(rng)``: a derivation's terminals, each given a string from its regex, with
    ignored strings between them now and then; and whether guided's documented lexing
    is sure to read the string as derived (``longest_match_reads``).
    """

    def __init__(self, text: str, start: str = "start"):
        import lark

        self.lark = lark.Lark(text, parser="earley", lexer="dynamic", start=start)
        self.start = start
        self.terminals = {t.name: t for t in self.lark.terminals}
        self.regex = {n: re.compile(t.pattern.to_regexp()) for n, t in self.terminals.items()}
        self.ignore = [n for n in self.lark.ignore_tokens if n in self.terminals]
        self.rules: dict[str, list[tuple]] = {}
        for r in self.lark.rules:
            self.rules.setdefault(r.origin.name, []).append(tuple((s.name, s.is_term) for s in r.expansion))
        self._dfas = None
        # Each nonterminal's cheapest expansions (fewest terminals, then least height), for
        # ending derivations.
        from grammar_sampler import INF, cheapest_derivations

        key, cost = cheapest_derivations(self.rules)
        self.derives = key.get(start, INF) != INF
        self.shortest = {nt: [e for e in exps if cost(e) == key[nt]] for nt, exps in self.rules.items()}

    # recognizing

    def accepts(self, s: str) -> bool:
        n = len(s)
        spans: list[dict[str, list[int]]] = [{} for _ in range(n + 1)]  # spans[i][T]: ends j of T-lexemes from i
        with deadline(10.0):
            for i in range(n):
                for j in range(i + 1, n + 1):
                    piece = s[i:j]
                    for name, rx in self.regex.items():
                        if rx.fullmatch(piece):
                            spans[i].setdefault(name, []).append(j)
        gap = []  # gap[i]: positions reachable from i over ignored lexemes (i itself too)
        for i in range(n + 1):
            seen, todo = {i}, [i]
            while todo:
                p = todo.pop()
                for name in self.ignore:
                    for j in spans[p].get(name, ()):
                        if j not in seen:
                            seen.add(j)
                            todo.append(j)
            gap.append(seen)
        rules = [(origin, exp) for origin, exps in self.rules.items() for exp in exps]
        by_origin: dict[str, list[int]] = {}
        for k, (origin, _) in enumerate(rules):
            by_origin.setdefault(origin, []).append(k)
        chart: list[set] = [set() for _ in range(n + 1)]
        chart[0].update((k, 0, 0) for k in by_origin.get(self.start, ()))
        for i in range(n + 1):
            agenda = list(chart[i])
            empty_done: set[str] = set()  # nonterminals completed here with origin i (nullable)
            waiting: dict[str, list] = {}  # nonterminal -> items at i waiting for it

            def add(item):
                if item not in chart[i]:
                    chart[i].add(item)
                    agenda.append(item)

            for item in agenda:  # (grows while it is walked)
                k, dot, origin = item
                exp = rules[k][1]
                if dot == len(exp):
                    head = rules[k][0]
                    if origin == i:
                        empty_done.add(head)
                        for k2, dot2, o2 in waiting.get(head, ()):
                            add((k2, dot2 + 1, o2))
                    else:
                        for k2, dot2, o2 in list(chart[origin]):
                            e2 = rules[k2][1]
                            if dot2 < len(e2) and not e2[dot2][1] and e2[dot2][0] == head:
                                add((k2, dot2 + 1, o2))
                    continue
                name, term = exp[dot]
                if term:
                    for q in gap[i]:
                        for j in spans[q].get(name, ()):
                            chart[j].add((k, dot + 1, origin))
                    continue
                waiting.setdefault(name, []).append(item)
                if name in empty_done:
                    add((k, dot + 1, origin))
                for k2 in by_origin.get(name, ()):
                    add((k2, 0, i))
        starts = set(by_origin.get(self.start, ()))
        return any(n in gap[p] and any(k in starts and dot == len(rules[k][1]) and origin == 0
                                       for k, dot, origin in chart[p]) for p in range(n + 1))

    # sampling

    def derive(self, rng: random.Random, max_depth: int = 5) -> list[str] | None:
        if not self.derives:
            return None
        out: list[str] = []
        stack = [(self.start, False, 0)]
        while stack:
            if len(out) > 30:
                return None
            name, term, depth = stack.pop()
            if term:
                out.append(name)
                continue
            exps = self.shortest[name] if depth > max_depth else self.rules[name]
            exp = rng.choice(exps)
            stack.extend((nm, t, depth + 1) for nm, t in reversed(exp))
        return out

    def terminal_string(self, name: str, rng: random.Random) -> str | None:
        got = regex_members(self.terminals[name].pattern.to_regexp(), 0, rng, 1)
        return got[0] if got else None

    def sample(self, rng: random.Random) -> tuple[str, bool] | None:
        """A derived string, and whether guided's lexing reads it as derived."""
        names = self.derive(rng)
        if names is None:
            return None
        pieces: list[tuple[str, str]] = []
        for i, name in enumerate(names):
            if self.ignore and (i or rng.random() < 0.2) and rng.random() < 0.4:
                ig = self.terminal_string(rng.choice(self.ignore), rng)
                if ig:
                    pieces.append((rng.choice(self.ignore), ig))
            s = self.terminal_string(name, rng)
            if s is None:
                return None
            pieces.append((name, s))
        text = "".join(s for _, s in pieces)
        return text, self.longest_match_reads(pieces)

    def _terminal_dfas(self):
        if self._dfas is None:
            from guided.fsm.regex import compile_regex

            self._dfas = {}
            for name, t in self.terminals.items():
                try:
                    d = compile_regex(t.pattern.to_regexp())
                except guided.SpecError:
                    d = None
                self._dfas[name] = d
        return self._dfas

    def longest_match_reads(self, pieces: list[tuple[str, str]]) -> bool:
        """Whether a longest-match lexer over *all* terminals (a superset of those any
        parser state allows) ends each lexeme where the derivation does, with the
        derived terminal among the best-ranked ones accepting it."""
        dfas = self._terminal_dfas()
        if any(d is None for d in dfas.values()):
            return False
        data = "".join(s for _, s in pieces).encode()
        rank = {n: (t.priority, type(t.pattern).__name__ == "PatternStr") for n, t in self.terminals.items()}
        pos = 0
        for name, s in pieces:
            end = pos + len(s.encode())
            acceptors = []
            for other, d in dfas.items():
                q = 0
                alive_past = False
                for k in range(pos, len(data)):
                    q = d.step(q, data[k : k + 1])
                    if q < 0:
                        break
                    if k + 1 == end and d.is_accepting(q):
                        acceptors.append(other)
                    if k + 1 > end:
                        alive_past = True
                        break
                if alive_past:
                    return False
            if name not in acceptors or any(rank[a] > rank[name] for a in acceptors):
                return False
            pos = end
        return True


def check_grammar(text: str, vocab, rng: random.Random, source: str = "random", samples: int = 5,
                  budget: float = BUDGET_S) -> Outcome:
    """Compile ``guided.Grammar(text)`` and judge it against lark's reading of it."""
    out = Outcome("grammar", source, text)
    guide = compile_spec(guided.Grammar(text), vocab, out, budget)
    if out.unexpected:
        return out
    if guide is None:
        if out.kind not in ("GrammarError", "CompileTimeoutError", "GuideMemoryError"):
            out.unexpected = f"{out.kind} for a lark grammar: not a GrammarError"
        return out
    try:
        with deadline(HARD_CAP_S):
            ref = GrammarReference(text)
    except Hang:
        out.unexpected = "compiled a grammar lark's loader cannot load within the hard cap"
        return out
    except Exception as e:  # lark refuses it (LarkError, re.error, regex.error, OSError, ...)
        out.unexpected = f"compiled a grammar lark refuses ({type(e).__name__}: {e})"
        return out
    stepper = Stepper(guide)
    with _judged(out):
        candidates = []
        for _ in range(samples):
            w = stepper.walk(rng, max_tokens=40)
            if w is not None:
                candidates.append((w, "walk", None))
        for _ in range(samples):
            got = ref.sample(rng)
            if got is not None and len(got[0]) <= 60:
                candidates.append((got[0].encode(), "derived", got[1]))
        for data, why, _ in candidates[:]:
            if len(data) <= 40:
                candidates.extend((m, "mutation", None) for m in byte_mutations(data, rng, 2))
        for data, why, sure in candidates:
            if len(data) > 60:
                continue
            got = stepper.judged(data, rng)
            out.checked += 1
            try:
                s = data.decode("utf-8")
            except UnicodeDecodeError:
                if got:
                    raise _Unexpected(f"guide accepts {data!r} ({why}), which is not UTF-8") from None
                continue
            try:
                expected = ref.accepts(s)
            except Hang:
                out.note("reference timed out")
                continue
            if why == "derived" and not expected:
                raise _Unexpected(f"reference refuses its own derivation {s!r} (a bug in the fuzzer)")
            if got and not expected:
                raise _Unexpected(f"guide accepts {data!r} ({why}), which no tokenization of lark's grammar reads")
            if not got and expected and sure:
                raise _Unexpected(f"guide refuses {data!r} ({why}), a sentence a longest-match lexer reads as "
                                  "derived")
            if not got and expected:
                out.note("refused: a tokenization the longest-match lexer does not take")
    return out


# -- a run --------------------------------------------------------------------------------


def fuzz_one(language: str, rng: random.Random, vocab, *, maskbench: list | None = None,
             patterns: list[str] | None = None, budget: float = BUDGET_S) -> Outcome:
    """One spec of ``language`` ("regex", "json", "maskbench", "grammar"), random or
    mutated at even odds, fuzzed and judged."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # re's "possible nested set" on fuzzed patterns
        return _fuzz_one(language, rng, vocab, maskbench, patterns, budget)


def _fuzz_one(language, rng, vocab, maskbench, patterns, budget) -> Outcome:
    if language == "regex":
        if rng.random() < 0.5:
            pattern, flags = random_regex(rng)
            return check_regex(pattern, flags, vocab, rng, "random", budget=budget)
        pattern, flags = mutated_regex(rng, patterns)
        return check_regex(pattern, flags, vocab, rng, "mutated", budget=budget)
    if language == "json":
        schema = random_schema(rng)
        if rng.random() < 0.3:
            schema = mutate_schema(schema, rng)
        r = rng.random()
        ws, order = ("compact", "schema") if r < 0.7 else ("flexible", "schema") if r < 0.85 else ("compact", "any")
        return check_schema(schema, vocab, rng, "random", whitespace=ws, key_order=order, budget=budget)
    if language == "maskbench":
        row = rng.choice(maskbench)
        return check_maskbench_mutant(row, vocab, rng, budget=budget)
    if language == "grammar":
        if rng.random() < 0.6:
            return check_grammar(random_grammar(rng), vocab, rng, "random", budget=budget)
        return check_grammar(mutated_grammar(rng), vocab, rng, "mutated", budget=budget)
    raise ValueError(f"unknown language {language!r}")
