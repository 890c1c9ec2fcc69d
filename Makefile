# bringup: `make demo` (the main job) and `make test` (the test suite). Both set up .venv first.
PY ?= python3
TORCH ?= 2.13.0
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.bringup-installed-torch-$(TORCH)
PYTEST_ARGS ?=
# pytest-xdist workers for `make test` / `make test-slow` (each test's own subprocesses use the cores too:
# 2 on this project's 2-core machines took the suite from 34 to 20.5 min); PYTEST_WORKERS=0 runs in one process.
PYTEST_WORKERS ?= 2
XDIST := $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadgroup)

.PHONY: setup demo test test-slow test-compat lint bench clean

setup: $(STAMP)

# torch is installed on its own first (a CPU build from local disk here; `TORCH=x.y.z` to change) and
# pinned with a constraint, so no dependency can pull another torch (e.g. a multi-GB CUDA build).
$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "torch==$(TORCH)"
	echo "torch==$(TORCH)" > $(VENV)/constraints.txt
	$(BIN)/python -m pip install -q -c $(VENV)/constraints.txt -e ".[test,timm]"
	rm -f $(VENV)/.bringup-installed-torch-*
	touch $@

demo: $(STAMP)
	$(BIN)/bringup run --quick || test $$? -eq 1
	@echo
	@echo "results: bringup-results/ (summary.json and report.html in the run's folder; SQLite: bringup-results/bringup.db)"

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q $(XDIST) $(PYTEST_ARGS)

# bringup in fresh virtual environments (.venv-compat-*): the oldest torch pyproject.toml declares and
# the newest a plain `pip install .` picks (a CUDA build on Linux, so also "CUDA build, no GPU").
test-compat:
	$(PY) .ci/compat.py

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow $(XDIST) $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: $(STAMP)
	for b in bench/*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .venv-compat-* bringup-results .pytest_cache .ruff_cache
