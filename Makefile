# The README's two commands: `make run` and `make test`. Both set up what they need first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install bench clean

$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c requirements.lock -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/dagwright serve

test: $(STAMP)
	$(BIN)/ruff check backend blocks tests benchmarks
	$(BIN)/ruff format --check backend blocks tests benchmarks
	$(BIN)/mypy
	$(BIN)/pytest

bench: $(STAMP)
	command -v wrk >/dev/null || (apt-get update -qq && apt-get install -y -qq wrk)
	$(BIN)/python benchmarks/runtime_overhead.py
	$(BIN)/python benchmarks/llm_throughput.py
	$(BIN)/python benchmarks/server_throughput.py
	$(BIN)/python benchmarks/embedding_service.py

clean:
	rm -rf $(VENV)
