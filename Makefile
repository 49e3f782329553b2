# Entry points: `make demo`, `make test` (the whole suite, what CI runs) and `make test-fast` (the
# day-to-day subset: no slow case and nothing that builds or runs a Verilator or Icarus model;
# about 7.5 CPU-minutes, so near 4 minutes on two idle cores).  All create .venv on first use
# and reinstall only when pyproject.toml changes.

PYTHON ?= python3.11
VENV := .venv
STAMP := $(VENV)/.dlforge-installed
BIN := $(VENV)/bin
# Parallel pytest workers (the CI machine has 2 cores).
JOBS ?= auto

.PHONY: demo test test-fast venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing dlforge and its tools into $(VENV) (log: $(VENV)/install.log)"
	@$(BIN)/python -m pip install --upgrade "pip>=24" "setuptools>=77" wheel > $(VENV)/install.log 2>&1 \
	  && $(BIN)/python -m pip install -e ".[test,toolchain]" >> $(VENV)/install.log 2>&1 \
	  || { tail -40 $(VENV)/install.log; exit 1; }
	touch $@

test: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) --dist loadgroup --durations=25

test-fast: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) --dist loadgroup -m "not slow and not verilator and not icarus"

demo: $(STAMP)
	$(BIN)/dlforge gen jpeg -o build/demo/jpeg_core
	$(BIN)/python -m dlforge.gen.demo

clean:
	rm -rf build dist *.egg-info
