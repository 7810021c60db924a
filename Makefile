# One command each, from a fresh machine with Python 3.11 and make: uv comes from the package registry into
# .tools/, and every environment is installed from the committed uv.lock (uv sync is a no-op when nothing
# changed, so each target simply asks for the environment it needs).
PY ?= python3.11
UV_VERSION := 0.13.9
UV := .tools/uv-$(UV_VERSION)/bin/uv
HELM := .tools/bin/helm
BIN := .venv/bin
# Never fetch an interpreter: the machine's python3.11 is the one to use.
export UV_PYTHON := $(PY)
export UV_PYTHON_DOWNLOADS := never
# The suite mostly waits on loopback servers and clocks, so more workers than cores pays off.
TEST_WORKERS ?= 4
SYNC := $(UV) sync --locked --inexact --quiet

.PHONY: demo test test-fast lint sim clean bench bench-quick soak fuzz runtime dev

$(UV):
	@echo "==> uv $(UV_VERSION): installing into .tools/ from the package registry"
	@$(PY) -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
		--target .tools/uv-$(UV_VERSION) uv==$(UV_VERSION) 2>&1 | grep -v "^WARNING: Location" || true
	@test -x $(UV)

$(HELM): tools/install_helm.py
	@$(PY) tools/install_helm.py $(HELM)

runtime: $(UV)
	@echo "==> runtime dependencies: uv.lock -> .venv"
	@$(SYNC) --no-dev

dev: $(UV)
	@echo "==> runtime and dev dependencies: uv.lock -> .venv"
	@$(SYNC)

demo: runtime
	@echo "==> the story: gpubot demo"
	@$(BIN)/gpubot demo

sim: runtime
	$(BIN)/gpubot sim

lint: dev
	@echo "==> lint: ruff, mypy --strict, import contracts"
	@$(BIN)/ruff check bot handlers sim tests bench tools
	@$(BIN)/ruff format --check bot handlers sim tests bench tools
	@$(BIN)/mypy bot handlers sim
	@$(BIN)/lint-imports

test: lint $(HELM)
	@echo "==> tests: pytest on $(TEST_WORKERS) workers"
	@$(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal

# The inner loop: the tests marked `unit` (pure code, no servers; pyproject.toml lists the markers). Only
# tests/unit is collected, so the run stays about ten seconds; `make test` runs every marker.
test-fast: dev
	@$(BIN)/pytest -n 2 -m unit tests/unit

SOAK_WORKLOADS ?= 10000
soak: dev
	$(BIN)/python -m tests.restarts.soak --workloads $(SOAK_WORKLOADS)

FUZZ_EXAMPLES ?= 100000
fuzz: dev
	GPUBOT_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/pytest -o addopts="" -q --timeout 0 -m fuzz tests/hostile --hypothesis-show-statistics

# The bench group (matplotlib, for the plots) is installed for the bench targets only.
bench: dev
	@$(SYNC) --group bench
	$(BIN)/python -m bench

bench-quick: dev
	@$(SYNC) --group bench
	$(BIN)/python -m bench --quick

clean:
	rm -rf .venv .tools .mypy_cache .pytest_cache .ruff_cache
