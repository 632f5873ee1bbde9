# The two commands of the README: `make demo` and `make test`. Both start from a bare python3.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PORT ?= 8501
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home

.PHONY: demo test lint bench services dashboard clean schema-doc

$(STAMP): pyproject.toml constraints.txt
	@bash scripts/bootstrap-venv.sh $(VENV)
	@touch $(STAMP)

demo: $(STAMP)
	@mkdir -p $(DAGSTER_HOME) data
	@grep -qs '^concurrency:' $(DAGSTER_HOME)/dagster.yaml || cp pipelines/dagster.yaml $(DAGSTER_HOME)/dagster.yaml  # gpuledger_ledger pool: 1 slot
	GPULEDGER_CONFIG=sample_data/gpuledger.toml $(PY) -m pipelines.materialize $$($(PY) -m gpuledger.site.partitions sample_data/gpuledger.toml)
	@echo "Dagster UI: GPULEDGER_CONFIG=sample_data/gpuledger.toml DAGSTER_HOME=$(DAGSTER_HOME) $(VENV)/bin/dagster dev  (then open http://localhost:3000)"
	$(VENV)/bin/gpuledger dashboard --port $(PORT)

services:
	@bash tests/services/install-system-packages.sh
	@bash scripts/bootstrap-focus-validator.sh  # .venv-focus: FOCUS validator (docs/focus.md)

test: $(STAMP) services
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) -m benchmarks.run

# the table reference at the end of docs/schema.md, from models/schema/
schema-doc: $(STAMP)
	$(PY) -m scripts.schema_doc

clean:
	rm -rf data reports .dagster_home
