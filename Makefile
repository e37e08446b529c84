# The two commands of the README: `make demo` and `make test`. Everything else is a step of those.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HASH := $(shell sha1sum pyproject.toml | cut -c1-12)
# What the demo needs: makeroom and its runtime dependencies only.
RUNTIME := $(VENV)/.runtime-$(HASH)
# What the tests need besides: the dev tools, the Kubernetes client, OR-Tools.
STAMP := $(VENV)/.installed-$(HASH)
PIP := $(BIN)/pip --quiet --disable-pip-version-check

.PHONY: demo test lint typecheck unit e2e-binaries e2e bench browser image image-tools clean

$(RUNTIME): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -e .
	rm -f $(VENV)/.runtime-*
	touch $@

$(STAMP): $(RUNTIME)
	$(PIP) install --upgrade pip
	$(PIP) install -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

demo: $(RUNTIME)
	$(BIN)/makeroom demo

# Headless Chromium for the HTML report's screenshot test (tests/report/test_html_in_chromium.py):
# Debian's package, installed only where it is missing, without questions.
browser:
	@if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then \
		echo "installing chromium (Debian) for the report's screenshot test"; \
		if [ "$$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi; \
		$$sudo apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null; \
	fi

# The container image, as an OCI archive (docs/install.md): built from Debian's packages and the
# project's wheel with no daemon and no registry base image (deploy/image/build.sh; needs root).
# Its base layer (Debian, makeroom's dependencies) is cached by its inputs in ~/.cache/makeroom-image.
# IMAGE_VERIFY=1 builds it a second time, base included and without the cache, and fails unless the
# digest is the same.
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)
IMAGE ?= makeroom-$(VERSION).oci.tar

image-tools:
	@missing=; for t in mmdebstrap umoci; do command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing (Debian) for the image build"; \
		if [ "$$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi; \
		$$sudo apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends mmdebstrap umoci >/dev/null; \
	fi

image: image-tools
	bash deploy/image/build.sh $(IMAGE)
	@if [ "$${IMAGE_VERIFY:-0}" = 1 ]; then \
		again="$$(mktemp -d)"; IMAGE_NO_CACHE=1 bash deploy/image/build.sh "$$again/$(notdir $(IMAGE))" || exit 1; \
		if cmp -s $(IMAGE) "$$again/$(notdir $(IMAGE))"; then echo "reproducible: a second build gave $$(cat $(IMAGE).digest) again"; \
		else echo "not reproducible: $$(cat $(IMAGE).digest), then $$(cat "$$again/$(notdir $(IMAGE)).digest")"; rm -rf "$$again"; exit 1; fi; \
		rm -rf "$$again"; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check src tests e2e
	$(BIN)/ruff format --check src tests e2e

typecheck: $(STAMP)
	$(BIN)/mypy

# The real control plane for the end-to-end tests, built from Go modules into a cache that a warm run
# reuses (see e2e/README.md), and the tools that build and unpack the image tests/e2e/test_install.py
# runs. MAKEROOM_E2E=0 skips it, and the e2e tests with it.
e2e-binaries:
	@if [ "$${MAKEROOM_E2E:-1}" != 0 ]; then bash e2e/build.sh && bash e2e/build-helm.sh && bash e2e/build-karpenter.sh && \
		$(MAKE) --no-print-directory image-tools; fi

# The end-to-end tests wait in real time on their control planes (the CPU is mostly idle meanwhile);
# several workers, each with its own plane on free ports, overlap those waits, and work stealing keeps
# a long parametrized matrix from ending up on one worker. PYTEST_WORKERS=0: one process.
PYTEST_WORKERS ?= 4

test: lint typecheck e2e-binaries browser
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist worksteal

bench: $(STAMP)
	$(BIN)/makeroom bench sim
	$(BIN)/makeroom bench plan

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
