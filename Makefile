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

.PHONY: venv demo test lint typecheck pytest bench clean

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

venv: $(STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/chatledger demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest

test: lint typecheck pytest

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) build dist .mypy_cache .pytest_cache .ruff_cache
