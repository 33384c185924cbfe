# The two commands the README promises: `make demo` and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck layers pytest bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/openprogram demo

lint: $(STAMP)
	$(BIN)/ruff check graph context openprogram tests
	$(BIN)/ruff format --check graph context openprogram tests

typecheck: $(STAMP)
	$(BIN)/mypy

layers: $(STAMP)
	$(BIN)/lint-imports

pytest: $(STAMP)
	$(BIN)/pytest

test: lint typecheck layers pytest

bench: $(STAMP)
	$(BIN)/pytest tests --benchmark-enable --benchmark-only

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
