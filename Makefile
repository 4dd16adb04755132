# Two entry points for a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs the project into it when pyproject.toml changes.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest interop clean

# The interop suite: MAGMA's own code (Python 3.12) against gencoach processes from .venv.
MAGMA_VENV := .venv-magma
MAGMA_STAMP := $(MAGMA_VENV)/.installed
INTEROP := tests/interop

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

$(MAGMA_STAMP): $(INTEROP)/magma.txt $(INTEROP)/requirements.txt
	rm -rf $(MAGMA_VENV)
	$$($(INTEROP)/find-python312) -m venv $(MAGMA_VENV)
	$(MAGMA_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(MAGMA_VENV)/bin/python -m pip install --quiet --no-deps -r $(INTEROP)/magma.txt
	$(MAGMA_VENV)/bin/python -m pip install --quiet -r $(INTEROP)/requirements.txt
	touch $(MAGMA_STAMP)

interop: $(STAMP) $(MAGMA_STAMP)
	INTEROP_GENCOACH_VENV=$(abspath $(VENV)) $(MAGMA_VENV)/bin/python -m pytest \
		-c $(INTEROP)/pytest.ini --rootdir $(INTEROP) --confcutdir $(INTEROP) $(INTEROP) $(ARGS)

clean:
	rm -rf $(VENV) $(MAGMA_VENV) .pytest_cache .mypy_cache .ruff_cache
