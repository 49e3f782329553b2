# Two entry points: `make demo` and `make test`.  Both create .venv on first use and reinstall
# only when pyproject.toml changes.

PYTHON ?= python3.11
VENV := .venv
STAMP := $(VENV)/.dlforge-installed
BIN := $(VENV)/bin
# Parallel pytest workers (the CI machine has 2 cores).
JOBS ?= auto

.PHONY: demo test venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=24" "setuptools>=77" wheel
	$(BIN)/python -m pip install --quiet -e ".[test,toolchain]"
	touch $@

test: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) --dist loadgroup

demo: $(STAMP)
	$(BIN)/dlforge gen idct --samples-per-clock 8 -o build/demo/idct_p8
	$(BIN)/dlforge sim idct --blocks 2000

clean:
	rm -rf build dist *.egg-info
