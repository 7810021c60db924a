# One command each, from a fresh machine: the venv is made or refreshed as needed.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

BENCH_STAMP := $(VENV)/.installed-bench

.PHONY: demo test lint sim clean bench bench-quick soak fuzz

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

# The bench extra (matplotlib, for the plots) is installed for the bench targets only.
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	@touch $(BENCH_STAMP)

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

SOAK_WORKLOADS ?= 10000
soak: $(STAMP)
	$(BIN)/python -m tests.restarts.soak --workloads $(SOAK_WORKLOADS)

FUZZ_EXAMPLES ?= 100000
fuzz: $(STAMP)
	GPUBOT_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/pytest -o addopts="" -q -m fuzz tests/hostile --hypothesis-show-statistics

bench: $(BENCH_STAMP)
	$(BIN)/python -m bench

bench-quick: $(BENCH_STAMP)
	$(BIN)/python -m bench --quick

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
