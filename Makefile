# Two entry points (see README): `make run` and `make test`. Each creates .venv when it is missing.
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
export MLFLOW_DISABLE_TELEMETRY := true
export DO_NOT_TRACK := 1
export DVC_NO_ANALYTICS := 1
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: run test setup data repro clean-venv bench readme

$(BIN)/wattgpu: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(BIN)/wattgpu

setup: $(BIN)/wattgpu
	$(BIN)/dvc config --local core.analytics false

data: setup
	$(BIN)/dvc pull -q $(wildcard data/raw/*.dvc)

## Install, pull the raw data, run the whole pipeline, fill the planner's cache, print the data report and the headline results.
run: data
	$(BIN)/dvc repro
	$(BIN)/wattgpu precompute
	$(BIN)/wattgpu data-report
	$(BIN)/wattgpu results

## Install and run every test (code, data and integration tests).
test: data
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python scripts/benchmark.py

## Rewrite the README's generated blocks (figures, outputs) from the committed reports; commit both.
readme: setup
	$(BIN)/python -m wattgpu.reporting.readme
