# Two commands for a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs the project from its own files first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?= dev,agent-framework,openai-agents,langchain,bench
STAMP := $(VENV)/.installed

.PHONY: venv demo test lint typecheck pytest bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
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
