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

.PHONY: setup setup-smdebug setup-sagemaker setup-browser setup-demo fixtures test test-fast test-wheel reliability lint demo layer synth bench clean

$(BIN)/.installed: pyproject.toml requirements/dev.txt requirements/frameworks.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q -U pip
	$(BIN)/python -m pip install -q -r requirements/dev.txt
	touch $@

setup: $(BIN)/.installed

# smdebug 1.0.34 is the oracle: it needs numpy<2.3 and protobuf 3.20, so it gets its own venv
# (requirements/smdebug.txt says why each pin is there).
$(SMD_VENV)/.installed: requirements/smdebug.txt
	test -x $(SMD_VENV)/bin/python || $(PY) -m venv $(SMD_VENV)
	$(SMD_VENV)/bin/python -m pip install -q -U pip
	$(SMD_VENV)/bin/python -m pip install -q -r requirements/smdebug.txt
	$(SMD_VENV)/bin/python -c "import smdebug, smdebug.trials, smdebug.pytorch"
	touch $@

setup-smdebug: $(SMD_VENV)/.installed

# The trees smdebug itself writes, and their ground truth, committed under tests/fixtures/smdebug.
fixtures: setup-smdebug
	scripts/fixtures/generate.sh $(SMD_VENV)/bin/python tests/fixtures/smdebug

# The SageMaker Python SDK (2.x) in its own venv: tests build real CreateTrainingJob requests with it.
SM_VENV := .venv-sagemaker
$(SM_VENV)/.installed: requirements/sagemaker.txt
	test -x $(SM_VENV)/bin/python || $(PY) -m venv $(SM_VENV)
	$(SM_VENV)/bin/python -m pip install -q -U pip
	$(SM_VENV)/bin/python -m pip install -q -r requirements/sagemaker.txt
	$(SM_VENV)/bin/python -c "import sagemaker.debugger, smdebug_rulesconfig"
	touch $@

setup-sagemaker: $(SM_VENV)/.installed

# Headless Chromium (Debian's package) for the report's browser test, tests/browser (it fails, never skips,
# without it). Needs root for apt-get; a machine that has chromium already skips the install.
setup-browser:
	command -v chromium || (apt-get update && apt-get install -y chromium)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache --no-logo

# pytest runs as two sessions at once (scripts/pytest_in_two.sh): the tiers that mostly wait on child
# processes (end-to-end, frameworks, the smdebug oracle, the browser) beside everything else. One session
# took 16:32 on an idle 2-core machine, the two 9:43 (both halves ended within a second of each other).
TEST_FIRST_SESSION := tests/e2e tests/frameworks tests/oracle tests/browser

test: setup setup-smdebug setup-sagemaker setup-browser
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache --no-logo
	PYTHON=$(BIN)/python scripts/pytest_in_two.sh $(TEST_FIRST_SESSION)

test-fast: setup
	$(BIN)/python -m pytest -q -m "not oracle"

# Build the wheel, install it into a clean venv outside the checkout, run local up / demo / hook / pip check,
# newest and oldest supported numpy/protobuf (a few minutes; needs the package index).
test-wheel: setup
	$(BIN)/python -m pytest tests/e2e/test_wheel_install.py -q

# The evaluator's reliability suite at full scale (50 jobs x 4 workers x 200 steps, a 10,000-step soak,
# a 500-step chaos run: about half an hour on 2 cores; `.ci/run` runs it); `make test` runs the same
# scenarios scaled down.
# The 10,000-step soak is one test of 12 minutes (idle machine): it runs in a session of its own beside
# the other scenarios (scripts/pytest_in_two.sh).
SOAK_TEST := tests/reliability/test_load_and_soak.py::test_a_warm_process_keeps_memory_and_work_per_step_flat
reliability: setup
	TORNASOLE_RELIABILITY_FULL=1 PYTHON=$(BIN)/python scripts/pytest_in_two.sh --base tests/reliability $(SOAK_TEST)

# The local mode on other moto releases (its patches' contract: layers/tornasole/local/moto_patches). Each
# venv is the development one with another moto (scripts/moto_venv.sh: seconds, from pip's wheel cache).
# make check-moto-versions MOTO_VERSIONS="5.2.4 5.2.5": the local mode's unit and integration tests on
# each release (how one joins CHECKED_MOTO in moto_patches/versions.py).
# make test-moto-newest: the local mode's end-to-end tests on the newest moto PyPI serves, with the speed
# patches off (what a user on a moto not yet checked gets, if they let it run); a few minutes.
MOTO_VERSIONS ?= 5.1.22 5.2.1 5.2.2 5.2.3 5.2.4 5.2.5
MOTO_LOCAL_TESTS := tests/unit/local tests/integration/local
MOTO_E2E_TESTS := tests/e2e/test_cli_local_pipeline.py tests/e2e/test_lifecycle_local_pipeline.py \
  tests/e2e/test_local_up_lifecycle.py tests/integration/local/test_local_mode.py \
  tests/integration/local/test_local_rule_bounds.py tests/integration/local/test_local_mode_speed_patches_off.py
.PHONY: check-moto-versions test-moto-newest
check-moto-versions: setup
	set -e; for v in $(MOTO_VERSIONS); do \
	  scripts/moto_venv.sh $(BIN)/python build/moto/$$v "moto[server]==$$v"; \
	  TORNASOLE_MOTO_UNCHECKED=1 build/moto/$$v/bin/python -m pytest -q -p no:cacheprovider $(MOTO_LOCAL_TESTS); \
	  echo "moto $$v: the local mode's tests passed"; \
	done

# The Keras hook's taps on private Keras attributes on other Keras releases (their contract:
# layers/tornasole/keras/versions.py). Each release is installed beside the development venv's packages
# (pip --target, no dependencies: seconds) and put first on the path; the taps are turned on with
# TORNASOLE_KERAS_UNCHECKED=1. make check-keras-versions KERAS_VERSIONS="3.16.0": how one joins CHECKED_KERAS.
KERAS_VERSIONS ?= 3.15.1
KERAS_TAP_TESTS := tests/frameworks/test_keras_hook.py tests/frameworks/test_keras_capture.py \
  tests/frameworks/test_keras_loss_values.py
.PHONY: check-keras-versions
check-keras-versions: setup
	set -e; for v in $(KERAS_VERSIONS); do \
	  $(BIN)/python -m pip install -q --no-deps --target build/keras/$$v "keras==$$v"; \
	  PYTHONPATH=build/keras/$$v TORNASOLE_KERAS_UNCHECKED=1 $(BIN)/python -m pytest -q -p no:cacheprovider \
	    $(KERAS_TAP_TESTS); \
	  echo "keras $$v: the Keras hook's tap tests passed"; \
	done

test-moto-newest: setup
	@set -e; newest=$$(scripts/moto_venv.sh $(BIN)/python build/moto/newest "moto[server]>=5" | tail -1); \
	if build/moto/newest/bin/python -c "import sys; from tornasole.local.moto_patches.versions import \
	    is_checked; sys.exit(not is_checked('$$newest'))"; then \
	  note="moto $$newest, the newest PyPI serves, is one the local mode was checked against"; \
	else \
	  note="moto $$newest, the newest PyPI serves, is NOT in CHECKED_MOTO (layers/tornasole/local/moto_patches/\
	versions.py): check it (make check-moto-versions MOTO_VERSIONS=$$newest), add it there, widen the local extra"; \
	fi; \
	echo "$$note"; rc=0; \
	TORNASOLE_MOTO_SPEED_PATCHES=0 TORNASOLE_MOTO_UNCHECKED=1 \
	  build/moto/newest/bin/python -m pytest -q -p no:cacheprovider $(MOTO_E2E_TESTS) || rc=$$?; \
	echo "$$note"; exit $$rc

# The demo gets its own small venv (requirements/demo.txt: the package's [demo] extra and CPU-only torch),
# not the development one (TensorFlow, XGBoost, CDK: gigabytes the demo never imports).
# torch comes from PyTorch's CPU-only index (only torch: other packages are not looked up there).
# --retries 0: where that index cannot be reached, pip moves on to its other configured sources at once (the
# default, five backed-off retries per URL, cost two minutes on a machine without access to it).
DEMO_VENV := .venv-demo
TORCH_INDEX_URL ?= https://download.pytorch.org/whl/cpu
$(DEMO_VENV)/.installed: pyproject.toml requirements/demo.txt
	test -x $(DEMO_VENV)/bin/python || $(PY) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/python -m pip install -q -U pip
	$(DEMO_VENV)/bin/python -m pip install -q --retries 0 --timeout 20 --index-url $(TORCH_INDEX_URL) $$(grep -E '^torch==' requirements/demo.txt)
	$(DEMO_VENV)/bin/python -m pip install -q -r requirements/demo.txt
	touch $@

setup-demo: $(DEMO_VENV)/.installed

demo: setup-demo
	$(DEMO_VENV)/bin/tornasole demo

# The PyTorch hook on a CUDA device (tests/gpu): needs a GPU and a CUDA build of torch, which `make setup`
# does not install (requirements pin the CPU wheel); run it with the interpreter that has one, e.g.
# `make test-gpu GPU_PY=python3` on a machine whose python3 has CUDA torch and the package's requirements.
GPU_PY ?= $(BIN)/python
.PHONY: test-gpu bench-cuda
test-gpu:
	TORNASOLE_GPU_TESTS=1 PYTHONPATH=layers:$$PYTHONPATH $(GPU_PY) -m pytest -q -p no:cacheprovider tests/gpu

# Hook overhead on the GPU against smdebug 1.0.34 (SMDEBUG_PATH: a directory holding smdebug for GPU_PY).
bench-cuda:
	PYTHONPATH=layers:$$PYTHONPATH $(GPU_PY) bench/hook_overhead_cuda.py $(if $(SMDEBUG_PATH),--smdebug-path $(SMDEBUG_PATH))
	PYTHONPATH=layers:$$PYTHONPATH $(GPU_PY) bench/statistics_overhead.py --device cuda --steps 200 $(if $(SMDEBUG_PATH),--smdebug-path $(SMDEBUG_PATH))

bench: setup setup-smdebug
	$(BIN)/python bench/read_vs_smdebug.py
	$(BIN)/python bench/hook_overhead.py
	$(BIN)/python bench/rules_vs_smdebug.py
	$(BIN)/python bench/step_cost.py

# detection quality: labelled runs (bench/detection), SageMaker's defaults vs recommended_rules(); 1,653 runs
# trained and scored in 6-10 min on 2 cores (bench/RESULTS.md)
.PHONY: bench-detection
bench-detection: setup
	$(BIN)/python bench/detection/run.py

# detection by model family (bench/detection/families), each family scored as the one left out: needs
# scikit-learn's bundled data sets (requirements/bench.txt). Long: training every run takes about an hour on
# 2 cores (1,006 runs in 47 min, then 8.5 min of rules, on 2026-11-30; the held-out rounds trained 52-78
# runs in 473-743 s on one); the recommended set over kept trials (score.py --reuse DIR) about 8 min for 856
# runs (bench/RESULTS.md)
.PHONY: bench-families
bench-families: setup
	$(BIN)/python -m pip install -q -r requirements/bench.txt
	$(BIN)/python bench/detection/families/score.py --sets both

clean:
	rm -rf build cdk.out .pytest_cache

# ==== Deployment (issue 6: CDK app, Lambda layer, MiniStack deploy test) — owned by the infra engineer ====
# make layer [ARCH=x86_64|arm64]   the layer asset (manylinux cp312 wheels + tornasole), no Docker
# make synth [ARCH=...]            cdk synth with the pinned CLI (cdk-nag runs on every synth)
# make test-deploy                 cdk bootstrap + deploy into MiniStack, then drive a step through it
ARCH ?= x86_64
LAYER_DIR := build/layer/$(ARCH)
NODE_BIN := node_modules/.bin
MINISTACK_VENV := .venv-ministack
# MiniStack runs the Lambdas on its own interpreter, and the layer's wheels are cp312.
PY312 ?= $(firstword $(foreach p,python3.12 $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3.12),\
  $(shell $(p) -c 'import sys; assert sys.version_info[:2] == (3, 12); print(sys.executable)' 2>/dev/null)))

.PHONY: setup-ministack test-deploy node-deps

$(LAYER_DIR)/python/.tornasole-layer: requirements/layer.txt scripts/build_layer.sh \
    $(shell find layers/tornasole -name '*.py' 2>/dev/null) | $(BIN)/.installed
	PYTHON=$(BIN)/python scripts/build_layer.sh $(ARCH) $(LAYER_DIR)

layer: $(LAYER_DIR)/python/.tornasole-layer

$(NODE_BIN)/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

node-deps: $(NODE_BIN)/.installed

synth: setup layer node-deps
	PATH="$(CURDIR)/$(NODE_BIN):$$PATH" cdk synth --quiet --no-notices --context lambda_architecture=$(ARCH)

$(MINISTACK_VENV)/.installed: tests/deploy/requirements.txt
	@test -n "$(PY312)" || { echo "setup-ministack: python3.12 not found. MiniStack runs the Lambdas on its own \
	interpreter and the layer is cp312: install CPython 3.12 (e.g. 'pyenv install 3.12') or pass PY312=/path/to/python3.12" >&2; exit 1; }
	test -x $(MINISTACK_VENV)/bin/python || $(PY312) -m venv $(MINISTACK_VENV)
	$(MINISTACK_VENV)/bin/python -m pip install -q -U pip
	$(MINISTACK_VENV)/bin/python -m pip install -q -r tests/deploy/requirements.txt
	$(MINISTACK_VENV)/bin/python -c "import sys, ministack, boto3; assert sys.version_info[:2] == (3, 12)"
	touch $@

setup-ministack: $(MINISTACK_VENV)/.installed

test-deploy: setup setup-ministack node-deps
	$(MAKE) layer ARCH=x86_64
	TORNASOLE_DEPLOY_TESTS=1 PATH="$(CURDIR)/$(NODE_BIN):$$PATH" $(BIN)/python -m pytest tests/deploy -q -s
