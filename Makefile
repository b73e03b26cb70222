# Two commands do all the set-up on a fresh machine:
#   make demo   create .venv, install boltzlab, train an RBM on the built-in digits
#   make test   create .venv, install boltzlab with its test tools, run the fast tier of the tests
#               (exact-oracle and unit tests; under 5 minutes on 2 cores, install included)
# and `make test-all` adds the slow tier (long statistical runs, multi-process groups, the README's
# commands end to end, compiled kernels); .ci/run runs both tiers.
# Both install the library and the papers' reproductions (experiments/, the boltzlab-experiments
# package that `boltzlab reproduce` finds); the test suite runs the reproductions' tiny presets too.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml experiments/pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: demo test test-slow test-all lint bench bench-env-rbms bench-potts clean install

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml experiments/pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]' -e experiments
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/boltzlab demo --out demo-run

# The suite runs one test file per worker process (pytest-xdist), one thread each: on 2 cores it
# takes half the time it takes in one process with two threads (most tests are small steps).
# Tests marked @pytest.mark.slow form the second tier (CONTRIBUTING.md, "Two tiers").
PYTEST := OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n auto --dist loadfile

test: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/python tools/import_cycles.py
	$(PYTEST) -m "not slow"

test-slow: $(STAMP)
	$(PYTEST) -m slow

test-all: test test-slow

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks experiments tools
	$(BIN)/ruff format --check src tests benchmarks experiments tools

bench: $(STAMP)
	$(BIN)/python benchmarks/sweeps.py

# The Potts sweep against the `rbms` package (benchmarks/potts_sweep.py) runs in an environment
# of its own, so that rbms (and what it pulls in) is never a dependency of boltzlab or its tests:
# torch first at boltzlab's pin (pip takes the CPU wheel the machine has), then rbms, pinned,
# and boltzlab itself, editable, under a constraint that keeps torch where it is. Needs the
# package registry once; `make test` never builds or reads it.
RBMS_ENV := benchmarks/envs/rbms
RBMS_STAMP := $(RBMS_ENV)/.venv/.installed-$(shell cat pyproject.toml $(RBMS_ENV)/requirements.txt $(RBMS_ENV)/constraints.txt | cksum | cut -d' ' -f1)

$(RBMS_STAMP): pyproject.toml $(RBMS_ENV)/requirements.txt $(RBMS_ENV)/constraints.txt
	test -x $(RBMS_ENV)/.venv/bin/python || $(PYTHON) -m venv $(RBMS_ENV)/.venv
	$(RBMS_ENV)/.venv/bin/python -m pip install --quiet -c $(RBMS_ENV)/constraints.txt torch==2.13.0
	$(RBMS_ENV)/.venv/bin/python -m pip install --quiet -c $(RBMS_ENV)/constraints.txt \
		-r $(RBMS_ENV)/requirements.txt -e .
	rm -f $(RBMS_ENV)/.venv/.installed-*
	touch $(RBMS_STAMP)

bench-env-rbms: $(RBMS_STAMP)

bench-potts: $(RBMS_STAMP)
	$(RBMS_ENV)/.venv/bin/python benchmarks/potts_sweep.py --out benchmarks/results/potts_sweep.md

clean:
	rm -rf $(VENV) $(RBMS_ENV)/.venv demo-run .pytest_cache .ruff_cache
