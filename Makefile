# Two commands do all the set-up on a fresh machine:
#   make demo   create .venv, install boltzlab, train an RBM on the built-in digits
#   make test   create .venv, install boltzlab with its test tools, run the test suite
# Both install the library and the papers' reproductions (experiments/, the boltzlab-experiments
# package that `boltzlab reproduce` finds); the test suite runs the reproductions' tiny presets too.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml experiments/pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: demo test lint bench clean install

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
test: $(STAMP)
	$(BIN)/lint-imports
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n auto --dist loadfile

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks experiments
	$(BIN)/ruff format --check src tests benchmarks experiments

bench: $(STAMP)
	$(BIN)/python benchmarks/sweeps.py

clean:
	rm -rf $(VENV) demo-run .pytest_cache .ruff_cache
