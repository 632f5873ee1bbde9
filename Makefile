# The two commands of the README: `make demo` and `make test`. Both start from a bare python3.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PORT ?= 8501
export GPULEDGER_DB ?= data/gpuledger.duckdb
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home

.PHONY: demo test lint bench services dashboard clean

$(STAMP): pyproject.toml constraints.txt
	@bash scripts/bootstrap-venv.sh $(VENV)
	@touch $(STAMP)

demo: $(STAMP)
	@mkdir -p $(DAGSTER_HOME) data
	@test -f $(DAGSTER_HOME)/dagster.yaml || printf 'telemetry:\n  enabled: false\n' > $(DAGSTER_HOME)/dagster.yaml
	GPULEDGER_SAMPLE_DATA=sample_data $(PY) -m pipelines.materialize $$($(PY) -m gpuledger.partitions sample_data)
	@echo "Dagster UI: DAGSTER_HOME=$(DAGSTER_HOME) $(VENV)/bin/dagster dev  (then open http://localhost:3000)"
	$(VENV)/bin/gpuledger dashboard --port $(PORT)

services:
	@bash tests/services/install-system-packages.sh

test: $(STAMP) services
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check .

bench: $(STAMP)
	$(PY) -m benchmarks.run

clean:
	rm -rf data reports .dagster_home
