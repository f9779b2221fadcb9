"""The ``guided`` command line."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from guided.cli import main


def test_invalid_regex_is_a_clear_error_before_loading_a_model(capsys):
    assert main(["generate", "--regex", "[a-", "hello"]) == 2
    err = capsys.readouterr().err
    assert "invalid regex" in err and "position 0" in err


def test_non_regular_feature_is_named(capsys):
    assert main(["generate", "--regex", r"(a)\1", "hello"]) == 2
    assert "backreference" in capsys.readouterr().err


def test_grammar_error_is_reported_with_line_and_column(capsys, tmp_path):
    bad = tmp_path / "bad.lark"
    bad.write_text('start: "a" (\n')
    assert main(["generate", "--grammar", str(bad), "hello"]) == 2
    err = capsys.readouterr().err
    assert re.search(r"line 1,? column 13", err)


def test_detect_replays_the_key_order_generation_used(tmp_path, capsys):
    """--key-order any on detect: out-of-order JSON replays through the grammar (with
    the default order it is a grammar mismatch)."""
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}))
    key = tmp_path / "wm.key"
    key.write_bytes(b"k" * 32)
    doc = tmp_path / "doc.json"
    doc.write_text('{"b":1,"a":2}')
    results = {}
    for order in ("schema", "any"):
        args = ["detect", "--key-file", str(key), "--schema", str(schema), "--whitespace", "compact"]
        assert main(args + ["--key-order", order, str(doc)]) == 0
        results[order] = json.loads(capsys.readouterr().out)
    assert results["schema"]["grammar_mismatch_at"] is not None
    assert results["any"]["grammar_mismatch_at"] is None


def test_unknown_grammar_name(capsys):
    assert main(["generate", "--grammar", "nope", "hello"]) == 2
    assert "no shipped grammar named 'nope'" in capsys.readouterr().err


@pytest.mark.subprocess
@pytest.mark.slow
def test_generate_with_a_grammar_file(tmp_path):
    import lark

    grammar = 'start: NUMBER " " UNIT\nNUMBER: /[1-9][0-9]{0,3}/\nUNIT: "km" | "miles"\n'
    path = tmp_path / "distance.lark"
    path.write_text(grammar)
    proc = subprocess.run(
        [sys.executable, "-m", "guided.cli", "generate", "--grammar", str(path), "--threads", "1", "--json",
         "How far is Paris from London?"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["finish_reason"] in ("eos", "complete")
    lark.Lark(grammar, parser="lalr").parse(result["text"])


def test_missing_model_path(capsys, tmp_path):
    assert main(["generate", "--regex", "a", "--model", str(tmp_path / "nope"), "hi"]) == 2
    assert f"error: No model at '{tmp_path / 'nope'}'" in capsys.readouterr().err


@pytest.mark.subprocess
@pytest.mark.slow
def test_generate_json_with_default_model():
    pattern = r"\d{4}-\d{2}-\d{2}"
    proc = subprocess.run(
        [sys.executable, "-m", "guided.cli", "generate", "--regex", pattern, "--json", "--threads", "1",
         "When did the Berlin wall fall? Give the date."],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert re.fullmatch(pattern, result["text"])
    assert result["stats"]["new_tokens"] == len(result["token_ids"])
    assert "tokens in" in proc.stderr  # timing goes to stderr


@pytest.mark.subprocess
@pytest.mark.slow
def test_generate_finishes_json_within_max_tokens(tmp_path):
    schema = tmp_path / "person.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"name": {"type": "string"},
                                                                   "hobbies": {"type": "array", "items": {"type": "string"}}},
                                  "required": ["name", "hobbies"]}))
    command = [sys.executable, "-m", "guided.cli", "generate", "--schema", str(schema), "--json", "--threads", "1",
               "Describe a sailor as JSON."]
    proc = subprocess.run(command + ["--max-tokens", "14"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["finish_reason"] in ("eos", "complete") and len(result["token_ids"]) <= 14
    assert set(json.loads(result["text"])) >= {"name", "hobbies"}
    proc = subprocess.run(command + ["--max-tokens", "14", "--no-budget"], capture_output=True, text=True,
                          timeout=300)
    assert json.loads(proc.stdout)["finish_reason"] == "length"
    proc = subprocess.run(command + ["--max-tokens", "4"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "is too small: the shortest output" in proc.stderr, proc.stderr


@pytest.mark.subprocess
@pytest.mark.slow
def test_generate_tool_calls_after_thinking(tmp_path):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"]}}}]))
    proc = subprocess.run(
        [sys.executable, "-m", "guided.cli", "generate", "--tools", str(tools), "--tool-choice", "required",
         "--one-tool-call", "--think", "8", "--json", "--threads", "1", "--max-tokens", "80",
         "What is the weather in Paris?"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["text"].startswith("<think>") and result["reasoning"] is not None
    assert [c["function"]["name"] for c in result["tool_calls"]] == ["get_weather"]
    assert isinstance(json.loads(result["tool_calls"][0]["function"]["arguments"])["city"], str)


def test_a_bad_structural_tag_is_named_before_loading_a_model(tmp_path, capsys):
    tag = tmp_path / "tag.json"
    tag.write_text(json.dumps({"type": "structural_tag", "format": {"type": "tag", "begin": "<a>", "end": "</a>",
                                                                    "content": {"type": "grammar", "grammar": "x"}}}))
    assert main(["generate", "--structural-tag", str(tag), "--model", "/nonexistent", "hi"]) == 2
    assert "/format/content: grammar content is not supported" in capsys.readouterr().err


@pytest.mark.subprocess
@pytest.mark.slow
def test_generate_plain_text_on_stdout():
    proc = subprocess.run(
        [sys.executable, "-m", "guided.cli", "generate", "--regex", "(yes|no)", "--threads", "1",
         "Is the sun a star?"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() in ("yes", "no")


@pytest.mark.subprocess
@pytest.mark.slow
def test_specs_the_vocabulary_cannot_write_are_reported():
    """SmolLM2 has no token for the byte 0x14: a spec that starts with it is an error
    before generating (status 2); one that needs it after "a" ends with "a", does
    not match, and says so (status 1)."""
    def run(pattern):
        return subprocess.run([sys.executable, "-m", "guided.cli", "generate", "--regex", pattern, "--threads", "1",
                               "--max-tokens", "5", "x"], capture_output=True, text=True, timeout=300)

    proc = run("\x14")
    assert proc.returncode == 2 and "error: no token of the vocabulary can begin" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    proc = run("a\x14")
    assert proc.returncode == 1 and proc.stdout.strip() == "a", proc.stderr
    assert "error: the output does not match the spec" in proc.stderr and "finish: no_match" in proc.stderr


@pytest.mark.subprocess
@pytest.mark.slow
def test_watermarked_generation_is_detected_by_the_cli(tmp_path):
    key = tmp_path / "wm.key"
    key.write_bytes(b"cli-end-to-end-watermark-key")
    proc = subprocess.run(
        [sys.executable, "-m", "guided.cli", "generate", "--watermark-key-file", str(key), "--temperature", "1",
         "--seed", "3", "--max-tokens", "120", "--json", "--threads", "1", "Write a short story about a fox."],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    text = tmp_path / "out.txt"
    text.write_text(json.loads(proc.stdout)["text"])
    det = subprocess.run([sys.executable, "-m", "guided.cli", "detect", "--key-file", str(key), str(text)],
                         capture_output=True, text=True, timeout=300)
    assert det.returncode == 0, det.stderr
    result = json.loads(det.stdout)
    assert result["is_watermarked"] and result["z_score"] > 4
    assert b"cli-end-to-end" not in det.stdout.encode() + det.stderr.encode()


def test_watermark_key_file_errors_before_loading_a_model(tmp_path, capsys):
    short = tmp_path / "short.key"
    short.write_bytes(b"tiny")
    assert main(["generate", "--watermark-key-file", str(short), "hi"]) == 2
    assert "16 bytes" in capsys.readouterr().err


def test_unknown_drafter_is_refused_before_loading_a_model(capsys):
    with pytest.raises(SystemExit, match="unknown drafter 'guess'"):
        main(["generate", "--regex", "a", "--speculative", "forced,guess", "--model", "/nonexistent", "hi"])
    with pytest.raises(SystemExit, match="unknown drafter 'lookup:3'"):
        main(["generate", "--regex", "a", "--speculative", "lookup:3", "--model", "/nonexistent", "hi"])


@pytest.mark.subprocess
@pytest.mark.slow
def test_speculative_generation_from_the_cli_matches_plain():
    args = [sys.executable, "-m", "guided.cli", "generate", "--regex", r"The answer is (yes|no)\. Because [a-z ]{5,30}\.",
            "--json", "--threads", "1", "--max-tokens", "30", "Is the sun a star?"]
    plain = subprocess.run(args, capture_output=True, text=True, timeout=300)
    fast = subprocess.run(args + ["--speculative", "forced,lookup,early-exit:8"], capture_output=True, text=True,
                          timeout=300)
    assert plain.returncode == 0 and fast.returncode == 0, fast.stderr
    assert json.loads(fast.stdout)["token_ids"] == json.loads(plain.stdout)["token_ids"]
    assert "model passes" in fast.stderr


def test_detect_refuses_input_that_is_not_utf8(tmp_path, capsys, monkeypatch):
    import io
    import sys

    key = tmp_path / "k.key"
    key.write_text("a watermark key of more than sixteen bytes\n")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"ok \xff")))
    assert main(["detect", "--key-file", str(key), "-"]) == 2
    assert "error: stdin is not UTF-8 text (byte 3)" in capsys.readouterr().err


@pytest.mark.parametrize("args,fragment", [
    (["generate", "--schema", "/nonexistent/schema.json", "hi"], "error: cannot read '/nonexistent/schema.json'"),
    (["generate", "--grammar", "/nonexistent/g.lark", "hi"], "error: cannot read '/nonexistent/g.lark'"),
    (["detect", "--key-file", "/nonexistent/k.key", "/nonexistent/text.txt"], "error: cannot read"),
])
def test_missing_files_are_clear_errors(args, fragment, capsys):
    assert main(args) == 2
    assert fragment in capsys.readouterr().err


@pytest.mark.parametrize("flag,value", [
    ("--max-tokens", "-5"), ("--temperature", "-1"), ("--top-p", "2"), ("--top-p", "0"), ("--top-k", "0"),
    ("--temperature", "nan"), ("--num-draft-tokens", "0"), ("--threads", "x"),
])
def test_bad_numeric_flags_are_refused(flag, value, capsys):
    with pytest.raises(SystemExit) as e:
        main(["generate", "--regex", "a", flag, value, "hi"])
    assert e.value.code == 2
    assert f"argument {flag}:" in capsys.readouterr().err
