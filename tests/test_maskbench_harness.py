"""The MaskBench harness (benchmarks/maskbench.py) with fake engines: no real schemas.

Covers stratified sampling, instance judging and schema classification, message
normalisation, the percentile tables, and the worker pool's timeout / crash handling
(fake engines in spawned worker processes).
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "benchmarks")
for _p in (ROOT, BENCH):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import maskbench as mb  # noqa: E402

THIS = "tests.test_maskbench_harness"


# --------------------------------------------------------------------------- fake engines
#
# Token ids are the bytes of the compact JSON text; EOS is 256; masks are numpy
# int32 [1, 9] (288 bits).


def byte_tokenize(text: str) -> list[int]:
    return list(text.encode("utf-8"))


class _Fake:
    eos = 256
    vocab_size = 257

    def allocate(self):
        return np.full((1, (self.vocab_size + 31) // 32), -1, dtype=np.int32)

    def error(self, m) -> str:
        return ""


class AcceptAll(_Fake):
    """Every token and EOS always allowed."""

    def compile(self, schema):
        return schema

    def new_matcher(self, compiled):
        return None

    def fill(self, m, bitmask):
        bitmask[:] = -1

    def accept(self, m, tok):
        return True


class _PrefixMatcher:
    def __init__(self, texts: list[bytes]):
        self.texts = texts
        self.pos = b""


class AcceptListed(_Fake):
    """Accepts exactly the JSON texts listed in ``schema["accept"]`` (a finite language)."""

    def compile(self, schema):
        if not isinstance(schema, dict) or "accept" not in schema:
            raise ValueError(f"unsupported schema at #/properties/x: {schema!r}")
        return [mb.serialise(x).encode() for x in schema["accept"]]

    def new_matcher(self, compiled):
        return _PrefixMatcher(compiled)

    def fill(self, m, bitmask):
        bitmask[:] = 0
        words = bitmask[0].view(np.uint32)
        for t in m.texts:
            if t.startswith(m.pos):
                nxt = self.eos if len(t) == len(m.pos) else t[len(m.pos)]
                words[nxt >> 5] |= np.uint32(1 << (nxt & 31))

    def accept(self, m, tok):
        if tok == self.eos:
            return False
        cand = m.pos + bytes([tok])
        if not any(t.startswith(cand) for t in m.texts):
            return False
        m.pos = cand
        return True


class TypeErrorCompile(AcceptAll):
    def compile(self, schema):
        raise TypeError("cannot compile a spec of type dict: expected guided.Regex")


class RaisesWhileStepping(AcceptAll):
    def accept(self, m, tok):
        raise RuntimeError("boom")


class LateError(AcceptAll):
    """Compiles, but reports an error after the first mask (like llguidance's is_error)."""

    def error(self, m):
        return "grammar too large\nsecond line"


class Sleepy(AcceptAll):
    def compile(self, schema):
        if schema.get("sleep"):
            time.sleep(schema["sleep"])
        return schema


class Dies(AcceptAll):
    def compile(self, schema):
        if schema.get("die"):
            os._exit(3)
        return schema


def sleepy_engine():
    return Sleepy(), byte_tokenize


def dying_engine():
    return Dies(), byte_tokenize


def listed_engine():
    return AcceptListed(), byte_tokenize


def broken_engine():
    raise ImportError("no such engine here")


# --------------------------------------------------------------------------- sampling


def _ids():
    ids = [f"Github_easy---o{i}.json" for i in range(50)]
    ids += [f"Kubernetes---k{i}.json" for i in range(30)]
    ids += [f"Glaiveai2K---g{i}.json" for i in range(15)]
    ids += [f"JME_{i}.json" for i in range(4)]
    ids += ["Handwritten---only.json"]
    return ids


def test_category():
    assert mb.category("Github_medium---o123.json") == "Github_medium"
    assert mb.category("Kubernetes---a---b.json") == "Kubernetes"
    assert mb.category("BFCL_java_12.json") == "BFCL_java"
    assert mb.category("BFCL_parallel_multiple_0.json") == "BFCL_parallel_multiple"
    assert mb.category("JME_7.json") == "JME"


def test_stratified_sample_is_proportional_and_deterministic():
    ids = _ids()
    a = mb.stratified_sample(ids, 20, seed=0)
    assert a == mb.stratified_sample(ids, 20, seed=0)
    assert len(a) == 20 and len(set(a)) == 20 and a == sorted(a)
    cats = Counter(mb.category(ids[i]) for i in a)
    assert cats["Github_easy"] == 10 and cats["Kubernetes"] == 6 and cats["Glaiveai2K"] == 3
    assert sum(cats.values()) == 20
    b = mb.stratified_sample(ids, 20, seed=1)
    assert b != a and len(b) == 20
    # a category's draw does not depend on the others being present
    only_k = [i for i in ids if i.startswith("Kubernetes")]
    assert mb.stratified_sample(only_k, 6, seed=0) == [
        i - 50 for i in a if ids[i].startswith("Kubernetes")]


def test_stratified_sample_edges():
    ids = _ids()
    assert mb.stratified_sample(ids, None) == list(range(len(ids)))
    assert mb.stratified_sample(ids, 10_000) == list(range(len(ids)))
    assert mb.stratified_sample(ids, 0) == []
    assert len(mb.stratified_sample(ids, 1, seed=3)) == 1
    for n in range(1, len(ids)):
        assert len(mb.stratified_sample(ids, n, seed=n)) == n


# --------------------------------------------------------------------------- classification


def test_classify():
    assert mb.classify([]) == (mb.PASSING, "")
    assert mb.classify([(True, True), (False, False)])[0] == mb.PASSING
    assert mb.classify([(True, False), (False, False)])[0] == mb.VALIDATION_ERROR
    assert mb.classify([(True, True), (False, True)])[0] == mb.INVALIDATION_ERROR
    status, msg = mb.classify([(True, False), (False, True)])
    assert status == mb.INVALIDATION_ERROR and "also valid instances rejected: [0]" in msg


def test_bit_is_set():
    words = np.zeros(2, dtype=np.int32)
    words[0] = np.int32(-(2**31))  # bit 31
    words[1] = 1 << 4
    assert mb.bit_is_set(words, 31) and mb.bit_is_set(words, 36)
    assert not mb.bit_is_set(words, 0) and not mb.bit_is_set(words, 64) and not mb.bit_is_set(words, -1)


TESTS = [
    {"data": {"a": 1}, "valid": True},
    {"data": {"a": "x"}, "valid": False},
    {"data": [1, 2], "valid": False},
]


def test_accept_all_engine_counts_invalidation_errors():
    res = mb.run_schema(AcceptAll(), {"type": "object"}, TESTS, byte_tokenize)
    assert res["status"] == mb.INVALIDATION_ERROR
    assert "[1, 2]" in res["message"]
    assert res["ttfm_us"] is not None and res["ttfm_us"] >= 0
    # one fill per token plus the final EOS check, for every instance
    expected = sum(len(mb.serialise(t["data"]).encode()) + 1 for t in TESTS)
    assert len(res["tbm_ns"]) == expected
    assert [d["accepted"] for d in res["instances"]] == [True, True, True]


def test_exact_engine_passes_and_rejects():
    schema = {"accept": [{"a": 1}, {"a": 12}]}
    res = mb.run_schema(AcceptListed(), schema, TESTS, byte_tokenize)
    assert res["status"] == mb.PASSING, res
    assert [d["accepted"] for d in res["instances"]] == [True, False, False]
    # {"a":1} and {"a":12} share the prefix {"a":1; EOS is allowed only after a whole text
    tests = [{"data": {"a": 1}, "valid": True}, {"data": {"a": 2}, "valid": True}]
    res = mb.run_schema(AcceptListed(), schema, tests, byte_tokenize)
    assert res["status"] == mb.VALIDATION_ERROR and "[1]" in res["message"]


def test_eos_must_be_allowed_at_the_end():
    # the tokens spell '"a', a strict prefix of the only accepted text '"ab"': every
    # token is allowed, but EOS is not at the end -> rejected
    engine = AcceptListed()
    schema = {"accept": ["ab"]}
    res = mb.run_schema(engine, schema, [{"data": "a", "valid": True}], lambda s: list(s.encode()[:-1]))
    assert res["status"] == mb.VALIDATION_ERROR
    assert res["instances"][0]["stop"] == res["instances"][0]["tokens"]


def test_compile_errors_and_engine_exceptions():
    res = mb.run_schema(TypeErrorCompile(), {"type": "object"}, TESTS, byte_tokenize)
    assert res["status"] == mb.COMPILE_ERROR and res["ttfm_us"] is None
    assert res["message"].startswith("TypeError: cannot compile")
    res = mb.run_schema(AcceptListed(), {"type": "object"}, TESTS, byte_tokenize)
    assert res["status"] == mb.COMPILE_ERROR and res["message"].startswith("ValueError:")
    res = mb.run_schema(LateError(), {}, TESTS, byte_tokenize)
    assert res["status"] == mb.COMPILE_ERROR and res["message"] == "grammar too large"
    res = mb.run_schema(RaisesWhileStepping(), {}, TESTS, byte_tokenize)
    assert res["status"] == mb.CRASH and "RuntimeError: boom" in res["message"]


def test_normalise_message_groups_identical_causes():
    a = mb.normalise_message("ValueError: unsupported keyword at #/properties/foo/items: 'bar' = 12")
    b = mb.normalise_message("ValueError: unsupported keyword at #/definitions/x: 'baz' = 3.5\nmore")
    assert a == b == "ValueError: unsupported keyword at #/<ptr>: '…' = N"
    assert mb.normalise_message('Unimplemented keys: ["not"]') == 'Unimplemented keys: ["not"]'
    assert mb.normalise_message('Unimplemented keys: ["x-foo"]') == "Unimplemented keys: […]"
    assert mb.normalise_message("Pointer '/definitions/nope' does not exist") == "Pointer '…' does not exist"
    assert len(mb.normalise_message("x" * 500)) == 120


# --------------------------------------------------------------------------- tables


def test_percentiles_and_summary():
    vals = list(range(1, 101))
    assert mb.percentile(vals, 50) == 50 and mb.percentile(vals, 99) == 99
    assert mb.percentile(vals, 100) == 100 and mb.percentile([7], 50) == 7
    st = mb.summarise(reversed(vals))
    assert st["avg"] == 50.5 and st["p50"] == 50 and st["p95"] == 95 and st["max"] == 100 and st["n"] == 100
    assert mb.summarise([]) is None


def test_stats_table_format():
    text = mb.format_stats_table([("TTFM us", mb.summarise([1000.0, 2000.0, 3000.0])), ("TBM  us", None)])
    lines = text.splitlines()
    assert lines[0].split() == ["avg", "p50", "p75", "p90", "p95", "p99", "max", "n"]
    assert lines[1].split() == ["TTFM", "us", "2,000", "2,000", "3,000", "3,000", "3,000", "3,000", "3,000", "3"]
    assert lines[2].split()[2:] == ["-"] * 7 + ["0"]
    assert len({len(line) for line in lines[:2]}) == 1  # right-aligned columns


def test_engine_report_and_side_by_side():
    def r(i, status, ttfm=None, tbm=(), msg=""):
        return {"id": f"Github_easy---{i}.json", "category": "Github_easy", "status": status,
                "ttfm_us": ttfm, "tbm_ns": list(tbm), "message": msg}

    a = [r(0, mb.PASSING, 10.0, [1000, 3000]), r(1, mb.COMPILE_ERROR, msg="TypeError: at #/a 'x'"),
         r(2, mb.COMPILE_ERROR, msg="TypeError: at #/b 'y'"), r(3, mb.INVALIDATION_ERROR, 5.0, [2000])]
    b = [r(0, mb.PASSING, 20.0, [4000]), r(1, mb.PASSING, 1.0, [1000]),
         r(2, mb.TIMEOUT, msg="no result"), r(3, mb.CRASH, msg="worker died")]
    text = mb.engine_report("guided", a)
    assert text.startswith("engine: guided    schemas: 4")
    assert "passing   | compile error | timeout  | crash" in text
    assert "1 (25.0%) | 2 (50.0%)     | 0 (0.0%) | 0 (0.0%)" in text
    assert "    2  TypeError: at #/<ptr> '…'" in text
    assert "Github_easy---3.json" in text
    assert "TBM tail" not in text  # too few masks to speak of a tail
    both = mb.side_by_side({"guided": a, "llguidance": b})
    assert "passing only with llguidance: 1; only with guided: 0" in both
    assert "TBM p50 ratio guided/llguidance" in both


def test_tbm_tail_names_the_schemas_that_hold_the_slowest_masks():
    fast = [{"id": f"s{i}", "tbm_ns": [1000] * 50} for i in range(6)]
    slow = {"id": "heavy", "tbm_ns": [1000] * 10 + [900_000] * 3}
    light = {"id": "light", "tbm_ns": [1000] * 10 + [800_000]}
    text = mb.tbm_tail(fast + [slow, light])
    # 324 masks: p99 is the 321st smallest, light's slow mask; heavy's three are over it
    assert text.splitlines()[0].startswith("TBM tail: 3 masks over p99 (800 us) in 1 schemas")
    assert text.splitlines()[1].split() == ["3", "(100.0%)", "heavy"]
    assert mb.tbm_tail(fast) == ""  # every mask equal: nothing is over the percentile


# --------------------------------------------------------------------------- worker pool


@pytest.mark.subprocess
def test_pool_timeout_crash_and_restart():
    tasks = [({"sleep": 0}, TESTS), ({"sleep": 30}, TESTS), ({}, TESTS)]
    t0 = time.monotonic()
    res = mb.run_pool(f"{THIS}:sleepy_engine", tasks, workers=1, timeout=1.5)
    assert [x["status"] for x in res] == [mb.INVALIDATION_ERROR, mb.TIMEOUT, mb.INVALIDATION_ERROR]
    assert time.monotonic() - t0 < 25

    tasks = [({}, TESTS), ({"die": 1}, TESTS), ({}, TESTS), ({"die": 1}, TESTS)]
    seen = []
    res = mb.run_pool(f"{THIS}:dying_engine", tasks, workers=2, timeout=30,
                      on_result=lambda i, r: seen.append(i))
    assert [x["status"] for x in res] == [mb.INVALIDATION_ERROR, mb.CRASH, mb.INVALIDATION_ERROR, mb.CRASH]
    assert "exit code 3" in res[1]["message"] and sorted(seen) == [0, 1, 2, 3]


@pytest.mark.subprocess
def test_pool_init_error_is_reported():
    with pytest.raises(mb.WorkerInitError, match="no such engine here"):
        mb.run_pool(f"{THIS}:broken_engine", [({}, TESTS)], workers=1, timeout=5)


def test_main_without_data_exits_zero(tmp_path, capsys):
    assert mb.main(["--data", str(tmp_path / "missing.jsonl.gz")]) == 0
    assert "data file not found" in capsys.readouterr().err


def _fake_data(tmp_path):
    import gzip
    import json

    rows = [{"id": f"Handwritten---h{i}.json", "schema": {"accept": [{"a": i}]},
             "tests": [{"data": {"a": i}, "valid": True, "description": ""},
                       {"data": {"a": i + 1}, "valid": False, "description": ""}]} for i in range(4)]
    rows.append({"id": "Handwritten---bad.json", "schema": {"type": "string"}, "tests": []})
    data = tmp_path / "mb.jsonl.gz"
    with gzip.open(data, "wt") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return data


def test_main_with_fake_data_and_json_out(tmp_path, capsys, monkeypatch):
    import json

    data = _fake_data(tmp_path)
    monkeypatch.setattr(mb, "run_pool", lambda spec, tasks, **kw: [
        mb.run_schema(AcceptListed(), s, t, byte_tokenize) for s, t in tasks])
    out = tmp_path / "res.json"
    assert mb.main(["--data", str(data), "--engine", "both", "--sample", "3", "--json-out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "engine: guided    schemas: 3" in text and "engine: llguidance    schemas: 3" in text
    assert "side by side" in text
    got = json.loads(out.read_text())
    assert len(got) == 6 and {g["engine"] for g in got} == {"guided", "llguidance"}
    assert set(got[0]) >= {"id", "category", "status", "ttfm_us", "tbm_count", "message"}


def test_results_log_resumes_a_stopped_run(tmp_path, capsys, monkeypatch):
    """A run stopped after 2 schemas leaves them in the log; the next run with the
    same log runs only the other 3 and reports all 5, as one uninterrupted run does."""
    import json

    data = _fake_data(tmp_path)
    ran = []
    stop_after = [2]

    def pool(spec, tasks, on_result=None, **kw):
        out = []
        for i, (schema, tests) in enumerate(tasks):
            if stop_after[0] is not None and len(ran) >= stop_after[0]:
                raise KeyboardInterrupt
            res = mb.run_schema(AcceptListed(), schema, tests, byte_tokenize)
            ran.append(schema)
            on_result(i, res)
            out.append(res)
        return out

    monkeypatch.setattr(mb, "run_pool", pool)
    log = tmp_path / "log.jsonl"
    with pytest.raises(KeyboardInterrupt):
        mb.main(["--data", str(data), "--results", str(log)])
    assert len(log.read_text().splitlines()) == 2
    stop_after[0] = None
    resumed, whole = tmp_path / "resumed.json", tmp_path / "whole.json"
    assert mb.main(["--data", str(data), "--results", str(log), "--json-out", str(resumed)]) == 0
    assert len(ran) == 5 and len(log.read_text().splitlines()) == 5
    assert mb.main(["--data", str(data), "--json-out", str(whole)]) == 0
    status = lambda path: {(r["id"], r["status"]) for r in json.loads(path.read_text())}  # noqa: E731
    assert status(resumed) == status(whole) and len(status(whole)) == 5


def test_recheck_key_order_splits_validation_errors(tmp_path, capsys, monkeypatch):
    """--recheck-key-order reruns only the validation errors, only their refused valid
    instances, with key_order="any"; those it then accepts count as key order alone."""
    import gzip
    import json

    rows = [  # the fake schema lists what schema order accepts, and what any order accepts
        {"id": "Handwritten---order.json", "schema": {"accept": [], "any": [{"b": 1, "a": 2}]},
         "tests": [{"data": {"b": 1, "a": 2}, "valid": True}, {"data": {"a": 3}, "valid": False}]},
        {"id": "Handwritten---other.json", "schema": {"accept": [], "any": []},
         "tests": [{"data": {"a": 1}, "valid": True}]},
        {"id": "Handwritten---fine.json", "schema": {"accept": [{"a": 1}], "any": [{"a": 1}]},
         "tests": [{"data": {"a": 1}, "valid": True}]},
    ]
    data = tmp_path / "mb.jsonl.gz"
    with gzip.open(data, "wt") as f:
        f.writelines(json.dumps(row) + "\n" for row in rows)
    rechecked = []

    def pool(spec, tasks, options=None, on_result=None, **kw):
        any_order = options["guided_key_order"] == "any"
        if any_order:
            rechecked.extend(tasks)
        out = []
        for i, (schema, tests) in enumerate(tasks):
            listed = {"accept": schema["any"] if any_order else schema["accept"]}
            out.append(mb.run_schema(AcceptListed(), listed, tests, byte_tokenize))
            on_result(i, out[-1])
        return out

    monkeypatch.setattr(mb, "run_pool", pool)
    out = tmp_path / "res.json"
    assert mb.main(["--data", str(data), "--recheck-key-order", "--json-out", str(out)]) == 0
    assert [t for _, t in rechecked] == [[{"data": {"b": 1, "a": 2}, "valid": True}], [{"data": {"a": 1}, "valid": True}]]
    assert "(1 refused only for key order" in capsys.readouterr().out
    got = {r["id"]: (r["status"], r["key_order_only"]) for r in json.loads(out.read_text())}
    assert got == {"Handwritten---order.json": ("validation error", True),
                   "Handwritten---other.json": ("validation error", False),
                   "Handwritten---fine.json": ("passing", None)}


@pytest.mark.data
def test_real_data_sample_is_stratified():
    if not os.path.exists(mb.DEFAULT_DATA):
        pytest.skip(f"MaskBench data not found at {mb.DEFAULT_DATA}")
    import gzip
    import json

    with gzip.open(mb.DEFAULT_DATA, "rt", encoding="utf-8") as f:
        ids = [json.loads(line)["id"] for line in f]
    assert len(ids) > 10_000
    pick = mb.stratified_sample(ids, 200, seed=0)
    assert pick == mb.stratified_sample(ids, 200, seed=0) and len(pick) == 200
    cats = Counter(mb.category(ids[i]) for i in pick)
    total = Counter(mb.category(i) for i in ids)
    for c, n in total.items():
        assert abs(cats[c] - 200 * n / len(ids)) < 1.0


def test_mask_times_compare_takes_each_masks_fastest_run():
    import mask_times

    old = [np.array([300_000, 1_000, 50_000]), np.array([100_000, 2_000, 250_000])]  # ns: minima 100, 1, 50 µs
    new = [np.array([150_000, 900, 40_000])]
    table = mask_times.compare([old, new])
    lines = table.splitlines()
    assert lines[1].split()[0] == "old" and lines[1].split()[-1] == "0"  # no minimum reaches 200 µs
    assert lines[2].split()[-1] == "0" and float(lines[2].split()[-2]) == pytest.approx(0.0, abs=0.01)
    assert "100-200" in table and "       1 masks" in table  # the 100 µs mask, in the old band 100-200
    with pytest.raises(SystemExit, match="different numbers of masks"):
        mask_times.compare([old, [np.array([1, 2])]])


def test_mask_times_times_the_schemas_named():
    import mask_times

    records = [{"id": f"Github_easy---o{i}.json"} for i in range(10)]
    assert mask_times.select(records, "Github_easy---o7.json,Github_easy---o2.json", 400, 1) == [2, 7]
    assert len(mask_times.select(records, None, 4, 1)) == 4
    with pytest.raises(SystemExit, match="o99"):
        mask_times.select(records, "Github_easy---o99.json", 400, 1)
