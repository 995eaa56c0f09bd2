# The two commands of the README: `make demo` (the main job on its embedded default) and
# `make test` (the default test suite). Both create .venv and install the pinned package on first use.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
export NO_GCE_CHECK := true
export TF_CPP_MIN_LOG_LEVEL := 2
export TFRANK4CLASS_DATA ?= $(abspath ../shared/datasets)

.PHONY: demo test test-slow test-all bench clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip>=23.2" "setuptools>=68" wheel
	$(PY) -m pip install --quiet -e '.[test,bench]'
	touch $(STAMP)

demo: export TF_CPP_MIN_LOG_LEVEL := 3
demo: $(STAMP)
	$(PY) -m tfrank4class.train.demo

test: $(STAMP)
	$(PY) -m pytest -q

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

test-all: $(STAMP)
	$(PY) -m pytest -q -m "slow or not slow"

clean:
	rm -rf $(VENV) *.egg-info runs
