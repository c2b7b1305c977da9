# Training Memory, Explained. `make site` builds the site; `make test` installs what the
# tests need (Python packages, torch CPU, Chromium) and runs them all; `make test-site` runs the
# page, widget and model tests without torch.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
STAMP := $(VENV)/.installed-full
TEST_STAMP := $(VENV)/.installed-test
SITE_STAMP := $(VENV)/.installed-site

.PHONY: help install install-site install-test browser test test-site test-fast site serve handout bench validate validate-cpu clean

help:  ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

$(SITE_STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $(SITE_STAMP)

$(TEST_STAMP): $(SITE_STAMP)
	$(BIN)/pip install -q -e '.[test]'
	touch $(TEST_STAMP)

$(STAMP): $(TEST_STAMP)
	$(BIN)/pip install -q -e '.[test,validate]'
	touch $(STAMP)

install-site: $(SITE_STAMP)  ## Create .venv with what building the site needs (no torch)

install-test: $(TEST_STAMP)  ## Also install the test extra (pytest, hypothesis, Playwright; no torch)

install: $(STAMP)  ## Also install the test and validate extras (pytest, Playwright, torch CPU, transformers)

browser: $(TEST_STAMP)  ## Make sure Chromium is available for Playwright (Debian package, else Playwright's download)
	@$(PY) -m tests.browser_setup

test: install browser  ## Install everything the tests need and run the whole suite
	TM_REQUIRE_TORCH=1 $(PY) -m pytest

test-site: install-test browser  ## The page, widget, chart and model tests, without torch (skips only the validation suite)
	$(PY) -m pytest -m "not validate"

test-fast: install  ## Run the tests that need no browser
	$(PY) -m pytest -m "not browser"

site: install-site  ## Build the default site into site/ (SITE_URL=https://.../ sets the address citations pin to)
	$(PY) -m builder build $(if $(SITE_URL),--url "$(SITE_URL)")
	@echo "Open site/index.html in a browser, or run 'make serve'."

serve: install-site  ## Preview on http://127.0.0.1:8000 with rebuild on change
	$(PY) -m builder serve

handout: install-test browser  ## The whole site as one PDF for a course pack: handout.pdf (A4; printed by Chromium)
	$(PY) -m builder handout --out handout.pdf

bench: install browser  ## Build time, page weight and widget latency benchmarks
	$(PY) -m benchmarks.run

validate: install  ## Measure real PyTorch memory (CPU) and write content/validation/
	$(PY) -m builder validate --write

validate-cpu: install  ## The small CPU validation CI runs (fails when a case leaves its tolerance)
	$(PY) -m builder validate --small

clean:  ## Remove build outputs (keeps .venv)
	rm -rf site .site-* .pytest_cache .bench handout.pdf
