# Viking Context Engine — every developer task is a target here. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
GEN_PY := gen/python
GEN_TS := gen/ts
PROTO_FILES := $(wildcard protos/contextengine/v1/*.proto)

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk -F':.*?## ' '{printf "  %-14s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip==25.3
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

openclaw-plugin/node_modules/.installed: openclaw-plugin/package.json openclaw-plugin/package-lock.json
	cd openclaw-plugin && npm ci --no-audit --no-fund --loglevel=error
	touch $@

.PHONY: install
install: $(VENV)/.installed node_modules/.installed openclaw-plugin/node_modules/.installed ## Install the Python and Node.js toolchains (pinned)

.PHONY: protos
protos: install ## Regenerate the Python (typed) and TypeScript stubs from protos/ (and the npm package's compiled ones)
	rm -rf $(GEN_PY) $(GEN_TS)
	mkdir -p $(GEN_PY) $(GEN_TS)
	$(PY) -m grpc_tools.protoc -I protos \
	  --plugin=protoc-gen-mypy=$(BIN)/protoc-gen-mypy --plugin=protoc-gen-mypy_grpc=$(BIN)/protoc-gen-mypy_grpc \
	  --python_out=$(GEN_PY) --grpc_python_out=$(GEN_PY) \
	  --mypy_out=$(GEN_PY) --mypy_grpc_out=$(GEN_PY) $(PROTO_FILES)
	touch $(GEN_PY)/contextengine/__init__.py $(GEN_PY)/contextengine/v1/__init__.py $(GEN_PY)/contextengine/py.typed
	$(PY) -m grpc_tools.protoc -I protos \
	  --plugin=protoc-gen-ts_proto=node_modules/.bin/protoc-gen-ts_proto \
	  --ts_proto_out=$(GEN_TS) \
	  --ts_proto_opt=outputServices=grpc-js,esModuleInterop=true,useDate=false,importSuffix=.js \
	  $(PROTO_FILES)
	rm -rf clients/node/dist
	node_modules/.bin/tsc -p clients/node/tsconfig.json

.PHONY: protos-check
protos-check: protos ## Fail if the generated stubs differ from what is committed
	git diff --exit-code -- gen/ clients/node/dist/ && test -z "$$(git status --porcelain -- gen/ clients/node/dist/)"

.PHONY: lint
lint: install ## ruff, buf lint (and buf breaking against main when it has v1)
	$(BIN)/ruff check shared services tests clients examples
	$(BIN)/ruff format --check shared services tests clients examples
	$(BIN)/buf lint
	scripts/buf-breaking.sh $(BIN)/buf

.PHONY: typecheck
typecheck: install ## mypy --strict on our packages
	$(BIN)/mypy

.PHONY: k8s-check
k8s-check: install ## Validate k8s/ and the Dockerfiles offline (kustomize, kubernetes-validate, checkov, hadolint, build context)
	scripts/check-k8s.sh

.PHONY: plugin
plugin: install ## Build and test the OpenClaw plugin (openclaw-plugin/: strict tsc, node test runner)
	cd openclaw-plugin && npm test

.PHONY: test
test: install protos-check lint typecheck k8s-check plugin ## Everything CI checks: drift, lint, types, k8s, plugin, unit + integration + OpenClaw e2e tests
	$(BIN)/pytest -q

.PHONY: chaos
chaos: install ## Fault run (kill -9, OpenViking restart, late append, SIGTERM) under load; a few minutes
	CHAOS_SESSIONS=10 CHAOS_TURNS=16 $(BIN)/pytest -q -s -o timeout=900 tests/chaos

.PHONY: run
run: install ## Start the local stack (embeddings, OpenViking, the three services) and play the demo turn loop
	$(PY) -m shared.localstack.demo

.PHONY: bench
bench: install ## Run the benchmarks (load, recall quality, 2 OpenViking shards, capture path, trigger-turn latency, Phase-3 sources, ONNX vs PyTorch embedder, OpenViking CPU per call kind) on the local stack; write bench-results/
	$(PY) -m tests.bench.run
	$(PY) -m tests.bench.recall.run --tier both
	$(PY) -m tests.bench.shards
	$(PY) -m tests.bench.capture_path
	$(PY) -m tests.bench.capture_path --pause-ms 300
	$(PY) -m tests.bench.phase3
	$(PY) -m tests.bench.embedders
	$(PY) -m tests.chaos.trigger_latency --pause-ms 1200 --sessions 3 --turns 16 --threshold 4
	$(PY) -m tests.bench.openviking_costs

.PHONY: bench-recall
bench-recall: install ## Only the recall-quality benchmark, both tiers (easy: recall.md; hard: recall-hard.md, vs BM25, MiniLM, RRF)
	$(PY) -m tests.bench.recall.run --tier both

.PHONY: bench-recall-hard
bench-recall-hard: install ## Only the hard recall tier at medium size (1 conversation, 2,000 stored exchanges for latency)
	$(PY) -m tests.bench.recall.run --tier hard --hard-users 1 --scale-exchanges 2000

.PHONY: clean-data
clean-data: ## Wipe the local stack's data (OpenViking workspace, logs); keeps the installed runtimes
	rm -rf .stack/data

.PHONY: clean
clean: ## Remove every local install and data
	rm -rf $(VENV) .stack .tools node_modules openclaw-plugin/node_modules openclaw-plugin/dist openclaw-plugin/gen
