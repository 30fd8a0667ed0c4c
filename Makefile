# Two entry points (see README): `make run` and `make test`. Each creates .venv when it is missing.
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
export MLFLOW_DISABLE_TELEMETRY := true
export DO_NOT_TRACK := 1
export DVC_NO_ANALYTICS := 1
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: run test test-fast verify verify-lock setup data repro clean-venv bench readme serve ui browser services services-stop

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
	$(BIN)/python scripts/repro_timed.py
	$(BIN)/wattgpu precompute
	$(BIN)/wattgpu data-report
	$(BIN)/wattgpu results

## Install and run every test (code, data, integration, and the planner page's tests in the system Chromium), in
## TEST_PROCS processes (pytest-xdist; each test clone is built once, by the first that needs it, the others wait).
TEST_PROCS ?= 2
test: data browser
	$(BIN)/python -m pytest -q -n $(TEST_PROCS) --dist loadgroup

## The inner loop: unit and property tests only (no raw data, no pipeline, no server), in about a minute.
test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow and not data and not pipeline"

## CI's check that main reproduces: rerun the default pipeline, fail if `dvc status` is not clean afterwards, if the
## committed dvc.lock was not made by this code, data and params, or if a committed metric moved beyond its noise.
verify: data
	$(BIN)/python scripts/verify_main.py

## What CI runs after the tests, in seconds: the committed dvc.lock matches this code, data and params (no rerun).
verify-lock: setup
	$(BIN)/python scripts/verify_main.py --lock-only

PORT ?= 5000
WORKERS ?=
## Serve both champions on http://127.0.0.1:$(PORT)/invocations (power and ITL in one answer; PORT=..., WORKERS=...:
## worker processes, by default one per usable CPU, at most 8).
serve: setup
	$(BIN)/python -m wattgpu.serving.app --port $(PORT)$(if $(WORKERS), --workers $(WORKERS))

UI_PORT ?= 8765
## The planner page on http://127.0.0.1:$(UI_PORT) (ask, compare GPUs, recommend), answered by the champions in models/.
ui: setup
	$(BIN)/wattgpu ui --port $(UI_PORT)

## The OS's Chromium, which the planner page's tests drive through Playwright (whose own browser download is not
## reachable here); installed with apt-get where it is missing.
browser:
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)

## Load the served champions (16 clients x 60 s: errors, 1-row p50/p99, batched rows/s, memory) and time in-process.
bench: setup
	mkdir -p reports/benchmarks
	set -o pipefail; $(BIN)/python scripts/benchmark.py | tee reports/benchmarks/bench.txt

## Rewrite the README's generated blocks (figures, outputs) from the committed reports; commit both.
readme: setup
	$(BIN)/python -m wattgpu.reporting.readme

## PostgreSQL, an MLflow tracking server on it and optuna-dashboard, on 127.0.0.1 (data in .services/); prints the
## URLs and what each search worker exports (README "Servers"). `make services-stop` stops them.
services: setup
	$(BIN)/pip install -q -e '.[servers]'
	$(BIN)/python scripts/services.py start

services-stop:
	$(BIN)/python scripts/services.py stop
