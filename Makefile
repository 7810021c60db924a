# One command each, from a fresh machine: the venv is made or refreshed as needed.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint sim clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/gpubot demo

sim: $(STAMP)
	$(BIN)/gpubot sim

lint: $(STAMP)
	$(BIN)/ruff check bot handlers sim tests bench
	$(BIN)/ruff format --check bot handlers sim tests bench
	$(BIN)/mypy bot handlers sim
	$(BIN)/lint-imports

test: lint
	$(BIN)/pytest

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
