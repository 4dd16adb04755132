# Two entry points for a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs the project into it when pyproject.toml changes.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest chaos clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/gencoach demo $(ARGS)

test: lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy src

pytest: $(STAMP)
	$(BIN)/pytest $(ARGS)

# Kills the controller and workers, restarts Redis, drops connections, under load (~3 min).
chaos: $(STAMP)
	GC_TEST_REDIS=embedded $(BIN)/pytest tests/chaos --chaos -q -s $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
