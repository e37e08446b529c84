# The two commands of the README: `make demo` and `make test`. Everything else is a step of those.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

.PHONY: demo test lint typecheck unit e2e-binaries e2e bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

demo: $(STAMP)
	$(BIN)/makeroom demo

lint: $(STAMP)
	$(BIN)/ruff check src tests e2e
	$(BIN)/ruff format --check src tests e2e

typecheck: $(STAMP)
	$(BIN)/mypy

# The real control plane for the end-to-end tests, built from Go modules into a cache that a warm run
# reuses (see e2e/README.md). MAKEROOM_E2E=0 skips it, and the e2e tests with it.
e2e-binaries:
	@if [ "$${MAKEROOM_E2E:-1}" != 0 ]; then bash e2e/build.sh && bash e2e/build-helm.sh; fi

test: lint typecheck e2e-binaries
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/makeroom bench sim
	$(BIN)/makeroom bench plan

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
