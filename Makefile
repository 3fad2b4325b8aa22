# Sundial developer commands. `make help` lists them.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
# Test processes: each takes whole test files (a module's shared deployment stays in one
# process) and starts its own PostgreSQL, NATS and etcd; most tests wait on servers, so
# two keep a 2-core machine busy. TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 2

.DEFAULT_GOAL := help
.PHONY: help setup run test generate verify lint typecheck proto-check proto-baseline deploy-check bench chaos clean

help: ## Show this help
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

setup: $(BIN)/python ## Create .venv, install Sundial with its dev and stack extras, build sdk/typescript
	$(BIN)/pip install --quiet -e '.[dev]'
	@if command -v npm >/dev/null; then \
		(cd sdk/typescript && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build) && \
		(cd tools/buf && npm ci --no-audit --no-fund --loglevel=error) && \
		(cd tools/openapi && npm ci --no-audit --no-fund --loglevel=error); \
	else echo "npm not found: sdk/typescript not built (its tests are skipped), no buf"; fi

run: setup ## Start PostgreSQL, NATS, etcd and the three services locally, with a demo schedule
	$(BIN)/sundial dev

test: setup ## Run the whole test suite against real servers started by the fixtures
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

generate: setup ## Regenerate libs/sundial/v1 and the OpenAPI document from proto/, README's config tables
	$(BIN)/python scripts/gen_protos.py
	$(BIN)/python scripts/gen_openapi.py
	$(BIN)/python scripts/config_docs.py

verify: setup ## Fail when generated code (protos, openapi.json, README config tables) is stale
	$(BIN)/python scripts/gen_protos.py --check
	$(BIN)/python scripts/gen_openapi.py --check
	$(BIN)/python scripts/config_docs.py --check

lint: setup typecheck proto-check ## Ruff lint and format check, the type check, buf lint and breaking
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

BUF := tools/buf/node_modules/.bin/buf

proto-check: setup ## buf lint (STANDARD) and buf breaking against the committed contract, proto/baseline.binpb
	$(BUF) lint
	$(BUF) breaking --against proto/baseline.binpb

proto-baseline: setup ## Make the current protos the contract buf breaking checks against (a deliberate act)
	$(BUF) build --exclude-source-info -o proto/baseline.binpb

typecheck: setup ## Type-check with mypy (what it checks is [tool.mypy] in pyproject.toml)
	$(BIN)/mypy

deploy-check: setup ## Render deploy/k8s's overlays and validate every object (kubernetes-validate --strict)
	VENV=$(VENV) deploy/check.sh

bench: setup ## Run the benchmarks under bench/ (results printed and written to bench/results)
	$(BIN)/python bench/run.py

chaos: setup ## Long seeded fault soak (SUNDIAL_SOAK_SEEDS=1,2 SUNDIAL_SOAK_SECONDS=300); reports in bench/results
	$(BIN)/python -m tests.fault.soak

clean: ## Remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis
