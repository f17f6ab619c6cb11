# Two commands for a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs the project from its own files first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?= dev,agent-framework,openai-agents,langchain,bench
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo
# Two stamps: $(STAMP) when every extra is installed (make test), $(DEMO_STAMP) when
# chatledger itself is (make demo). Installing every extra also satisfies the demo;
# installing for the demo never satisfies the tests.

# A second virtual environment runs the Agent Framework tests against the oldest
# version the adapters support (the dev extra pins the newest): chatledger with the dev
# extra's requirements, agent-framework-core 1.23.0 in place of the pinned one, in one
# resolve (read from pyproject.toml, so the two environments never drift).
AF_OLDEST := 1.23.0
AF_VENV := .venv-af123
AF_BIN := $(AF_VENV)/bin
AF_STAMP := $(AF_VENV)/.installed
AF_TESTS := tests/groups/test_groups_reference.py tests/strategies \
	$(wildcard tests/formats/test_agent_framework*.py) \
	$(wildcard tests/integrations/test_*agent_framework*.py) \
	tests/integrations/test_bounded_tools_e2e.py tests/integrations/test_deferred_compaction.py \
	tests/integrations/test_provider.py

# pytest runs in this many processes (pytest-xdist): one a core, at most 4 (each has its
# own PostgreSQL template database and PgBouncers). TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print(min(4, len(os.sched_getaffinity(0))))")

.PHONY: venv demo test lint typecheck pytest test-af123 bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]'
	touch $(STAMP) $(DEMO_STAMP)

# The demo needs chatledger and its own dependencies only; pip shows its progress.
$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -e .
	touch $(DEMO_STAMP)

$(AF_BIN)/python:
	$(PYTHON) -m venv $(AF_VENV)
	$(AF_BIN)/python -m pip install --quiet --upgrade pip

$(AF_STAMP): pyproject.toml | $(AF_BIN)/python
	$(AF_BIN)/python -c "import tomllib; dev = tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['dev']; print('\n'.join(r for r in dev if not r.startswith('agent-framework-core')))" > $(AF_VENV)/requirements.txt
	$(AF_BIN)/python -m pip install --quiet -e . -r $(AF_VENV)/requirements.txt 'agent-framework-core==$(AF_OLDEST)'
	touch $(AF_STAMP)

venv: $(STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/chatledger demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest -n $(TEST_WORKERS)

# The Agent Framework tests again, against agent-framework-core $(AF_OLDEST).
test-af123: $(AF_STAMP)
	$(AF_BIN)/pytest -q -p no:cacheprovider -n $(TEST_WORKERS) $(AF_TESTS)

test: lint typecheck pytest test-af123

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) $(AF_VENV) build dist .mypy_cache .pytest_cache .ruff_cache
