# The README's two commands: `make demo` and `make test`. Both set everything up first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
TRITON_BASE_PORT ?= 18000
# pytest-xdist workers for make test, each a session of its own (docs/DEVELOPING.md); 1: no xdist
TEST_WORKERS ?= 3
XDIST := $(if $(filter-out 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)
export TRITON_BASE_PORT
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: demo test setup system lint format migrate clean api-docs

demo: migrate
	@$(BIN)/python manage.py demo_run --port $(PORT) --triton-base-port $(TRITON_BASE_PORT)

test: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest $(XDIST) --durations=30

setup: system $(VENV)/.installed node_modules/.installed

system:
	@bash scripts/setup_system.sh

$(VENV)/.installed: requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || \
	  { echo "Switchyard needs Python 3.11 (found $$($(PYTHON) --version)); set PYTHON=/path/to/python3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps -e .
	@touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

migrate: setup
	$(BIN)/python manage.py migrate --noinput

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format:
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# docs/API.md from the OpenAPI document (tests/schema/test_api_reference.py fails when stale).
api-docs: $(VENV)/.installed
	$(BIN)/python manage.py api_reference > docs/API.md.new && mv docs/API.md.new docs/API.md

clean:
	rm -rf $(VENV) node_modules var staticfiles .pytest_cache .ruff_cache
