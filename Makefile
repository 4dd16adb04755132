# Two entry points for a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs the project into it when pyproject.toml changes.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-browser lint typecheck pytest clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/gencoach demo $(ARGS)

test: lint typecheck pytest

# The console in a real browser: Debian's chromium (installed when missing) driven by
# Playwright (the `browser` extra), which never downloads a browser of its own.
test-browser: $(STAMP)
	@if [ ! -x /usr/bin/chromium ]; then apt-get update && apt-get install -y chromium; fi
	$(BIN)/python -m pip install --quiet -e '.[dev,browser]'
	GC_TEST_REDIS=$${GC_TEST_REDIS:-embedded} $(BIN)/pytest tests/browser -m browser $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy src

pytest: $(STAMP)
	$(BIN)/pytest $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
