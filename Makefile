# Two commands a newcomer runs: `make demo` and `make test`. Both create the venvs when missing.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
SMD_VENV := .venv-smdebug
BIN := $(VENV)/bin
export AWS_DEFAULT_REGION ?= us-east-1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true
export MPLBACKEND := Agg

.PHONY: setup setup-smdebug test test-fast lint demo layer synth bench clean

$(BIN)/.installed: pyproject.toml requirements/dev.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q -U pip
	$(BIN)/python -m pip install -q -r requirements/dev.txt
	touch $@

setup: $(BIN)/.installed

# smdebug 1.0.34 is the oracle: it needs numpy<2.3 and protobuf 3.20, so it gets its own venv
# (recipe: shared/fixtures/generators/SMDEBUG_INSTALL.md).
$(SMD_VENV)/.installed: requirements/smdebug.txt
	test -x $(SMD_VENV)/bin/python || $(PY) -m venv $(SMD_VENV)
	$(SMD_VENV)/bin/python -m pip install -q -U pip
	$(SMD_VENV)/bin/python -m pip install -q -r requirements/smdebug.txt
	$(SMD_VENV)/bin/python -c "import smdebug, smdebug.trials, smdebug.pytorch"
	touch $@

setup-smdebug: $(SMD_VENV)/.installed

lint: setup
	$(BIN)/ruff check .

test: setup setup-smdebug
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

test-fast: setup
	$(BIN)/python -m pytest -q -m "not oracle"

demo: setup
	$(BIN)/tornasole demo

bench: setup setup-smdebug
	$(BIN)/python bench/read_vs_smdebug.py

clean:
	rm -rf build cdk.out .pytest_cache
