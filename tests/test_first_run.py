"""The first run after an install compiles the numba kernels (~20 s) and says so on
stderr, once; a run that finds them in numba's cache says nothing
(``guided.fsm.kernels.watch_first_compile``). Each run is a fresh process whose
``NUMBA_CACHE_DIR`` is a new, empty folder: the first one starts with a cold cache.
The compile time limit does not count numba's compiling: a cold first compile under a
5 s limit succeeds."""

import os
import subprocess
import sys

import pytest

from guided.fsm.kernels import AVAILABLE

pytestmark = [pytest.mark.subprocess, pytest.mark.skipif(not AVAILABLE, reason="numba is not installed")]

NOTICE = "guided: compiling the numba kernels (first run after install only, ~20 s)"

# A small regex and a small JSON Schema: the subset construction, minimisation and
# liveness kernels, compiled from several kernel modules.
SCRIPT = """
import guided
guided.load_kernels()  # (a small compile would otherwise run before numba is loaded, on the Python twins)
vocab = guided.Vocabulary([bytes([b]) for b in range(256)] + [None], [256])
schema = {"type": "object", "properties": {"k": {"type": "string", "maxLength": 40}, "n": {"type": "integer"}}}
assert guided.compile(schema, vocab, timeout=5).matcher().accept_tokens(list(b'{"k":"a","n":1}'))

from guided.fsm import compile_regex
from guided.grammars.json_schema import compile_json_schema

assert compile_regex(r"[a-z]{1,3}x|ab+c").matches(b"abx")
dfa = compile_json_schema({"type": "object", "properties": {"n": {"type": "integer"}}}, "compact")
assert dfa.matches(b'{"n":12}') and not dfa.matches(b'{"n":"x"}')
"""


def _run(cache_dir) -> subprocess.CompletedProcess:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir))
    env.pop("NUMBA_DISABLE_JIT", None)
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two runs in turn with one new numba cache folder."""
    cache = tmp_path_factory.mktemp("numba_cache")
    first = _run(cache)
    second = _run(cache)
    return first, second


def test_the_first_run_with_a_cold_cache_prints_the_notice_once(runs):
    first, _ = runs
    assert first.returncode == 0, first.stderr
    assert first.stderr.count(NOTICE) == 1, first.stderr


def test_a_run_with_a_warm_cache_prints_no_notice(runs):
    first, second = runs
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    assert NOTICE not in second.stderr, second.stderr


# A fresh process: its first small compile runs without numba (the Python twins) and
# leaves numba to load behind it; a compile whose work pays for numba loads it there
# and then; a guide built before the load keeps giving the same masks after it.
LAZY_LOAD = """
import sys, guided
from guided.fsm import kernels

vocab = guided.Vocabulary([bytes([b]) for b in range(256)] + [None], [256])
schema = {"type": "object", "properties": {"k": {"type": "string", "maxLength": 40}, "n": {"type": "integer"}}}
text = list(b'{"k":"abc","n":12}')
real_warm_up, asked = kernels.warm_up, []
kernels.warm_up = lambda: asked.append(True)
early = guided.compile(schema, vocab)
assert asked and "numba" not in sys.modules and not kernels.ready(), "the small first compile waited for numba"
assert not early.index.compiled
kernels.warm_up = real_warm_up
guided.compile(guided.Regex("[a-z]{1,%d}" % (2 * kernels.LOAD_FOR_WORK)), vocab)
assert kernels.ready() and early.index.compiled, "a large compile did not load numba"
guided.clear_cache()
late = guided.compile(schema, vocab)
a, b = early.matcher(), late.matcher()
for t in text + [None]:
    assert a.allowed_token_ids() == b.allowed_token_ids()
    if t is not None:
        assert a.accept_token(t) and b.accept_token(t)
print("ok")
"""


def test_a_small_first_compile_does_not_wait_for_numba():
    env = dict(os.environ)
    env.pop("NUMBA_DISABLE_JIT", None)
    run = subprocess.run([sys.executable, "-c", LAZY_LOAD], env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr
