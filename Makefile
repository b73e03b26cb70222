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

.PHONY: demo test test-slow test-all lint bench clean install

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

clean:
	rm -rf $(VENV) demo-run .pytest_cache .ruff_cache
