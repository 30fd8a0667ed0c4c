"""Conformal intervals on the real measurement table (built by the test pipeline's `dvc repro`): coverage measured
on GPUs held out of both the fit and the calibration, wider bands for extrapolation, and the pipeline's outputs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from wattgpu.catalogs.gpus import load_gpu_catalog
from wattgpu.catalogs.llms import load_llm_catalog
from wattgpu.config import Regime
from wattgpu.evaluation.cv import Fold
from wattgpu.evaluation.runner import prepare_rows, target_rows
from wattgpu.modeling import coverage, intervals
from wattgpu.modeling.algorithms import make_estimator
from wattgpu.modeling.store import load_predictor
from wattgpu.modeling.targets import TARGETS
from wattgpu.search.nested import inner_folds

pytestmark = pytest.mark.slow
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
HELD_OUT = ("NVIDIA A30", "NVIDIA L40S", "NVIDIA H200")  # three GPUs of the paper's lab, out of fit and calibration


@pytest.fixture(scope="module")
def power_rows(pipeline) -> pd.DataFrame:
    gpus = load_gpu_catalog(pipeline / "data/catalogs/gpus.yaml")
    llms = load_llm_catalog(pipeline / "data/processed/llm_catalog.csv")
    table = pd.read_csv(pipeline / "data/processed/measurements.csv")
    rows = prepare_rows(table, gpus, llms, source=None, dense_only=False, offline_batch=256)
    return target_rows(rows, "power")


def test_power_intervals_cover_held_out_gpus_near_their_level(power_rows):
    rows = power_rows
    test = np.flatnonzero(rows["gpu"].isin(HELD_OUT).to_numpy())
    train = np.flatnonzero(~rows["gpu"].isin(HELD_OUT).to_numpy())
    assert len(test) > 300 and len(train) > 3000
    y = rows[TARGETS["power"].column].to_numpy(dtype=float)
    make = lambda: make_estimator("xgboost", "power", "workload", {"n_estimators": 150, "max_depth": 4},  # noqa: E731
                                  seed=0, n_jobs=2)
    # Calibration folds hold out GPU groups of the training rows only: the held-out GPUs never enter.
    folds = [Fold(f.name, train[f.train], train[f.test])
             for f in inner_folds(rows.iloc[train], Regime(kind="logo"), 5, seed=0)]
    assert all(not set(f.train) & set(test) and not set(f.test) & set(test) for f in folds)
    cal = intervals.calibrate(make, rows, y, folds)
    pred = make().fit(rows.iloc[train]).predict(rows.iloc[test])
    held = rows.iloc[test]
    extrap = intervals.extrapolating(held, coverage.training_ranges(rows.iloc[train]))
    group = intervals.workload_group(held)
    found = {}
    for level in (0.8, 0.9):
        lo, hi = intervals.bounds(cal, pred, group, extrap, level)
        found[level] = intervals.coverage_summary(y[test], lo, hi, pred)
    assert 0.65 <= found[0.8]["coverage"] <= 0.97, found
    assert found[0.9]["coverage"] >= found[0.8]["coverage"]
    assert found[0.9]["median_rel_width"] > found[0.8]["median_rel_width"] > 0


def test_a_request_far_outside_the_training_ranges_gets_a_wider_interval_or_none(pipeline):
    predictor = load_predictor(pipeline / "models/power", pipeline / "models/itl")
    inside = {"gpu": "NVIDIA H100 NVL", "llm": LLAMA, "concurrency": 16, "prompt_tokens": 500, "output_tokens": 200}
    spec = {"gpu_name": "far-out accelerator", "gpu_tdp_w": 1900.0, "gpu_memory_gb": 1000.0,
            "gpu_memory_bandwidth_gb_s": 19000.0, "gpu_fp16_tensor_tflops": 9000.0, "gpu_release_year": 2034}
    far = {**{k: v for k, v in inside.items() if k != "gpu"}, **spec}
    out = predictor.predict([inside, far])
    for col in ("power_w", "itl_s"):
        width = (out[f"{col}_hi"] - out[f"{col}_lo"]) / out[col]
        assert np.isfinite(width.iloc[0]) and width.iloc[0] > 0, out.iloc[0]
        # wider, or no interval at all (the model abstains), and the note says which
        assert not np.isfinite(width.iloc[1]) or width.iloc[1] >= width.iloc[0], (col, out.iloc[1])
    assert out["interval"].iloc[0] == ""
    assert "wider" in out["interval"].iloc[1] or "abstains" in out["interval"].iloc[1]


def test_bounds_hold_the_point_and_throughput_follows_the_itl_band(pipeline):
    predictor = load_predictor(pipeline / "models/power", pipeline / "models/itl")
    out = predictor.predict([{"gpu": "NVIDIA A30", "llm": LLAMA, "concurrency": 8, "level": 0.9},
                             {"gpu": "NVIDIA A30", "llm": LLAMA, "concurrency": 8, "level": 0.6}])
    for col in ("power_w", "itl_ms", "system_tokens_per_s", "energy_per_token_j"):
        assert (out[f"{col}_lo"] <= out[col]).all() and (out[col] <= out[f"{col}_hi"]).all(), col
    assert out["level"].tolist() == [0.9, 0.6]
    assert out["itl_ms_hi"].iloc[0] > out["itl_ms_hi"].iloc[1]  # a higher level is a wider band
    # a closed batch: throughput = requests in flight / ITL, so its band is the ITL band turned over
    assert np.allclose(out["system_tokens_per_s_lo"], 8 / out["itl_s_hi"])


def test_the_pipeline_reports_coverage_per_regime_target_and_group(pipeline):
    found = json.loads((pipeline / "reports/search/intervals.json").read_text())
    assert {"logo", "lolo", "loso", "lopo"} <= set(found)
    for regime, targets in found.items():
        for target in ("power", "itl"):
            cell = targets[target]["all"]
            assert set(cell) == {"80", "90"}, (regime, target)
            assert 0 <= cell["80"]["coverage"] <= cell["90"]["coverage"] <= 1, (regime, target)
            assert cell["80"]["n_rows"] > 0
    assert (pipeline / "reports/search/plots/interval_coverage_by_gpu.png").stat().st_size > 10_000
    meta = json.loads((pipeline / "models/power/meta.json").read_text())
    assert sum(meta["calibration"]["scores"].values()) > 1000  # every row's out-of-group residual
