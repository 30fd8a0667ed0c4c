"""Fixtures of the CLI tests (test_cli.py, test_faults.py): a small model folder and the environment that points the
CLI at it and at the test pipeline's clone. Rows come from the pipeline's real measurements; fits are FIXTURES, never
reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from wattgpu import paths


@pytest.fixture(scope="session")
def models_dir(ingested, tmp_path_factory) -> Path:
    """power/ and itl/ model folders fitted on the real Watt Counts rows (small forests: seconds)."""
    measurements = ingested / paths.MEASUREMENTS
    from wattgpu.catalogs.gpus import load_gpu_catalog
    from wattgpu.catalogs.llms import load_llm_catalog
    from wattgpu.config import XgbParams
    from wattgpu.evaluation.runner import prepare_rows, target_rows
    from wattgpu.features import PAPER_ITL, PAPER_POWER, FeatureSet
    from wattgpu.io import read_table
    from wattgpu.modeling import coverage
    from wattgpu.modeling.estimator import TargetRegressor
    from wattgpu.modeling.replica import xgb
    from wattgpu.modeling.store import save_model_dir
    from wattgpu.modeling.targets import TARGETS

    gpus_file, llms_file = ingested / paths.GPU_CATALOG, ingested / paths.LLM_CATALOG_TABLE
    rows = prepare_rows(read_table(measurements), load_gpu_catalog(gpus_file), load_llm_catalog(llms_file),
                        source="wattcounts_processed", dense_only=True, offline_batch=256)
    power = FeatureSet("power_no_idle", tuple(c for c in PAPER_POWER.numeric if c != "idle_power_ratio"),
                       PAPER_POWER.categorical)
    out = tmp_path_factory.mktemp("models")
    for target, features in (("power", power), ("itl", PAPER_ITL)):
        est = TargetRegressor(features, TARGETS[target], xgb(XgbParams(max_depth=5, n_estimators=60), 42, 2))
        t_rows = target_rows(rows, target)
        save_model_dir(out / target, est.fit(t_rows), gpus_file, llms_file,
                       {"target": target, "version": f"test-{target}-1", "offline_batch": 256,
                        "training_ranges": coverage.training_ranges(t_rows)})
    return out


@pytest.fixture()
def env(pipeline, models_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("WATTGPU_MODELS", str(models_dir))
    monkeypatch.setenv("WATTGPU_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("WATTGPU_ROOT", str(pipeline))
    monkeypatch.setenv("COLUMNS", "200")
    return tmp_path
