# bringup: `make demo` (the main job) and `make test` (the test suite). Both set up .venv first.
# `make docs`: the sample scorecard (README, docs/sample.md) from docs/sample/run-quick-cpu.json, and every time and
# speed-up in README.md and docs/*.md from its bench row (bench/results/figures); `make docs-check`: fails when stale.
# `make test-xla`: bringup on PyTorch/XLA (its own venv, .venv-xla), `run --quick` held by .ci/expect-xla.yaml.
PY ?= python3
TORCH ?= 2.13.0
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.bringup-installed-torch-$(TORCH)
PYTEST_ARGS ?=
# pytest-xdist workers for `make test` / `make test-slow` (each test's own subprocesses use the cores too:
# 2 on this project's 2-core machines took the suite from 34 to 20.5 min; once workers were forked, not started,
# a test waits more than it computes: 3 took it from 25:41 to 19:43, same code, cold caches, 2026-12-03);
# each of the N shares the cores (tests/conftest.py: cores/N threads for torch and inductor's compile pool);
# PYTEST_WORKERS=0 runs in one process.
PYTEST_WORKERS ?= 3
# byte-code compiled on every core, once (compileall skips what is up to date), for where Python caches none itself:
# the venv at set-up, the tree's own modules in `make test` / `make demo`
BYTECODE := $(BIN)/python -m compileall -q -j 0
XDIST := $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadgroup)

# PyTorch/XLA pins one torch release; its own venv, torch installed first and pinned as for .venv.
XLA_VENV ?= .venv-xla
XLA_TORCH ?= 2.9.0
TORCH_XLA ?= 2.9.0
XLA_STAMP := $(XLA_VENV)/.bringup-installed-xla-$(TORCH_XLA)-torch-$(XLA_TORCH)
XLA_EXPECT ?= .ci/expect-xla.yaml

.PHONY: setup demo test test-slow test-compat test-xla setup-xla lint bench clean docs docs-check

setup: $(STAMP)

# torch is installed on its own first, by pip (which reads this machine's pip configuration: a CPU build from
# local disk here; `TORCH=x.y.z` to change) and pinned with a constraint, so no dependency can pull another torch
# (e.g. a multi-GB CUDA build). The rest goes in with uv (resolves and downloads in parallel: 7 s where pip took
# 1 min 49 s here, 2026-12-04), under the same constraint: the torch already installed satisfies it.
# Byte-code: compiled once, on every core, for the whole venv (compileall -j 0: 15 s here; pip compiles on one core,
# torch's wheel alone took it 21 s, and uv compiles nothing by default). Where PYTHONDONTWRITEBYTECODE is set
# (this project's machines) Python never caches what it compiles: each process that imported transformers compiled
# it again (1.5 s of CPU each, ~10% of a tiny zoo test's: docs/testing.md), and torch, sympy and the rest left
# uncompiled cost `make test` half again its CPU. A few modules are for a newer Python (torch's
# testing/_internal/py312_intrinsics.py) and cannot compile here, as under pip: never imported, not make's error.
# bringup's own modules: BYTECODE below.
$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip uv
	$(BIN)/python -m pip install -q --no-compile "torch==$(TORCH)"
	echo "torch==$(TORCH)" > $(VENV)/constraints.txt
	$(BIN)/uv pip install -q --python $(BIN)/python -c $(VENV)/constraints.txt -e ".[test,timm]"
	$(BYTECODE) -qq "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" || true
	rm -f $(VENV)/.bringup-installed-torch-*
	touch $@

demo: $(STAMP)
	$(BYTECODE) bringup
	$(BIN)/bringup run --quick || test $$? -eq 1
	@echo
	@echo "results: bringup-results/ (summary.json and report.html in the run's folder; SQLite: bringup-results/bringup.db)"

# mypy (~30 s on one core, cold) runs beside pytest, not before it: its result is printed after pytest's and
# fails the target the same way; `make lint` gives it alone, first.
test: $(STAMP)
	$(BYTECODE) bringup tests
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy > $(VENV)/mypy.log 2>&1 & mypy=$$!; \
	$(BIN)/python -m pytest -q $(XDIST) $(PYTEST_ARGS); rc=$$?; \
	wait $$mypy || rc=1; echo "mypy: $$(tail -n 30 $(VENV)/mypy.log)"; exit $$rc

# bringup in fresh virtual environments (.venv-compat-*): the oldest torch pyproject.toml declares and
# the newest a plain `pip install .` picks (a CUDA build on Linux, so also "CUDA build, no GPU").
test-compat:
	$(PY) .ci/compat.py

# torch + torch-xla first (a CUDA build of torch from PyPI: it runs on cpu), then bringup (and timm, which
# the quick zoo's convnet needs) with that torch pinned by a constraint, so nothing can move it.
setup-xla: $(XLA_STAMP)

$(XLA_STAMP): pyproject.toml Makefile
	test -x $(XLA_VENV)/bin/python || $(PY) -m venv $(XLA_VENV)
	$(XLA_VENV)/bin/python -m pip install -q --upgrade pip
	$(XLA_VENV)/bin/python -m pip install -q "torch==$(XLA_TORCH)" "torch-xla==$(TORCH_XLA)"
	echo "torch==$(XLA_TORCH)" > $(XLA_VENV)/constraints.txt
	$(XLA_VENV)/bin/python -m pip install -q -c $(XLA_VENV)/constraints.txt -e ".[timm]"
	rm -f $(XLA_VENV)/.bringup-installed-xla-*
	touch $@

# `bringup --device xla run --quick` on PJRT's cpu client (~10 min on 2 cores), from a fresh work dir; the
# exit code is the expectations file's (docs/expect.md): 1 only on a status that file does not expect.
test-xla: $(XLA_STAMP)
	rm -rf $(XLA_VENV)/work && mkdir -p $(XLA_VENV)/work
	cd $(XLA_VENV)/work && PJRT_DEVICE=CPU $(CURDIR)/$(XLA_VENV)/bin/bringup --db bringup.db --device xla \
		run --quick --expect $(CURDIR)/$(XLA_EXPECT) --json xla.json --junit xla.xml

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow $(XDIST) $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

# The sample blocks (between `<!-- sample:begin` and `<!-- sample:end -->`: README's abridged, docs/sample.md's
# whole), rendered from the real run in docs/sample/run-quick-cpu.json, and every figure marker
# (`<!-- fig ID -->...<!-- /fig -->`) in README.md and docs/*.md, rendered from its row in
# bench/results/figures/*.jsonl (docs/figures.md). docs-check fails, naming file and line, on a stale block or
# marker and on a time or speed-up written outside a marker.
docs: $(STAMP)
	$(BIN)/python docs/sample/render.py
	$(BIN)/python docs/figures/render.py

docs-check: $(STAMP)
	$(BIN)/python docs/sample/render.py --check
	$(BIN)/python docs/figures/render.py --check

# every benchmark with its defaults (bench/time_command.py is the tool that times a command into a figure row)
bench: $(STAMP)
	for b in bench/*.py; do [ $$b = bench/time_command.py ] || $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) $(XLA_VENV) .venv-compat-* bringup-results .pytest_cache .ruff_cache .mypy_cache
