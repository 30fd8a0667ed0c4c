"""What `dvc repro` registers, swept over the workload (the test pipeline's champions, trained on every source):
the directions physics and the measurements fix, the served answers beside ML.ENERGY's measured batch sweeps, and a
planner's question about a pair never measured together."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from wattgpu.cli import app
from wattgpu.io import read_table
from wattgpu.modeling.store import load_predictor

pytestmark = pytest.mark.slow
CONCURRENCY = np.unique(np.r_[np.arange(1, 65), np.geomspace(64, 512, 25).round()])  # every batch to 64, then up
PAIRS = [("NVIDIA H100 NVL", "meta-llama/Llama-3.1-8B-Instruct"),
         ("NVIDIA A100-SXM4-40GB", "mistralai/Mistral-7B-Instruct-v0.3"),
         ("AMD Instinct MI300X", "meta-llama/Meta-Llama-3-70B-Instruct"), ("NVIDIA L4", "Qwen/Qwen2.5-1.5B-Instruct"),
         ("NVIDIA B200", "mistralai/Mixtral-8x7B-Instruct-v0.1")]


@pytest.fixture(scope="module")
def sweeps(pipeline) -> pd.DataFrame:
    predictor = load_predictor(pipeline / "models/power", pipeline / "models/itl")
    requests = [{"gpu": g, "llm": m, "concurrency": float(c), "prompt_tokens": 1000, "output_tokens": 500,
                 "n_gpus": 4 if "70B" in m else 1}
                for g, m in PAIRS if g in predictor.gpus and m in predictor.llms for c in CONCURRENCY]
    assert len(requests) >= 4 * len(CONCURRENCY)
    return predictor.predict(requests)


def test_per_request_itl_never_falls_as_concurrency_rises(sweeps):
    for _, s in sweeps.groupby(["gpu", "llm"]):
        assert (np.diff(s["itl_s"].to_numpy()) >= -1e-12).all()


def test_power_and_throughput_rise_with_small_batches_and_never_fall(sweeps):
    for key, s in sweeps.groupby(["gpu", "llm"]):
        small = s[s["concurrency"] <= 64]
        for col in ("power_w", "system_tokens_per_s"):
            v = s[col].to_numpy()
            assert (np.diff(v) >= -1e-9 * v[:-1]).all(), (key, col)  # beyond 64 too: the measurements fall a
            # little in some ML.ENERGY sweeps; these models are monotone by construction, so they do not
            assert small[col].iloc[-1] > small[col].iloc[0], (key, col)


MEASURED_STEP = 0.10  # a measured change between neighbouring batches larger than this is a direction to follow


@pytest.fixture(scope="module")
def measured_sweeps(pipeline) -> pd.DataFrame:
    """ML.ENERGY v2's measured sweeps (vLLM, one GPU type and LLM and GPU count, the batch raised 32 -> 512 or
    until memory ran out), each row asked of the served models as a user would (the batch the engine was set to,
    the measured mean output length), the answers beside the measurements. These rows are among the champions'
    training rows: what is checked is that the served path (ITL model, requests in flight, throughput, energy) keeps
    the measured batching behaviour, not how well it generalises (the search's outer folds measure that)."""
    predictor = load_predictor(pipeline / "models/power", pipeline / "models/itl")
    table = read_table(pipeline / "data/processed/measurements.csv")
    rows = table[(table["source"] == "mlenergy_v2") & table["itl_s"].notna() & table["power_w_per_gpu"].notna()
                 & table["concurrency_setting"].notna()].copy()
    rows = rows[[g in predictor.gpus and m in predictor.llms for g, m in zip(rows["gpu"], rows["llm"])]]
    assert len(rows) > 250, len(rows)
    requests = [{"gpu": r.gpu, "llm": r.llm, "concurrency": float(r.concurrency_setting),
                 "output_tokens": float(round(r.output_tokens_mean)), "n_gpus": int(r.n_gpus), "engine": r.engine,
                 "engine_version": str(r.engine_version), "precision": r.precision} for r in rows.itertuples()]
    out = predictor.predict(requests)
    assert out["error"].isna().all(), out.loc[out["error"].notna(), "error"].head().tolist()
    rows["pred_throughput"] = out["system_tokens_per_s"].to_numpy()
    rows["pred_energy"] = out["energy_per_token_j"].to_numpy()
    rows["sweep"] = rows[["gpu", "llm", "n_gpus", "workload"]].astype(str).agg("|".join, axis=1)
    return rows.sort_values(["sweep", "concurrency_setting"])


def _steps(sweeps: pd.DataFrame, measured: str, predicted: str) -> pd.DataFrame:
    """Neighbouring batches of every sweep: measured and predicted log ratios (larger batch over smaller)."""
    parts = []
    for key, s in sweeps.groupby("sweep"):
        s = s.groupby("concurrency_setting")[[measured, predicted]].mean()  # replicate runs of one batch
        if len(s) < 2:
            continue
        logs = np.log(s.to_numpy())
        parts.append(pd.DataFrame({"sweep": key, "measured": np.diff(logs[:, 0]), "predicted": np.diff(logs[:, 1])}))
    return pd.concat(parts, ignore_index=True)


def test_served_throughput_rises_where_measured_throughput_rises(measured_sweeps):
    """Where a measured sweep's throughput rises by more than MEASURED_STEP from one batch to the next (the GPU is
    not yet saturated), the served prediction rises too, and by a comparable amount: a model whose ITL grew in
    proportion to the batch (no batching gain) or not at all, or a throughput per request instead of per system,
    fails."""
    steps = _steps(measured_sweeps, "throughput_tok_s", "pred_throughput")
    rising = steps[steps["measured"] > np.log1p(MEASURED_STEP)]
    assert len(rising) >= 60 and rising["sweep"].nunique() >= 25, (len(rising), rising["sweep"].nunique())
    wrong = rising[rising["predicted"] <= 0]
    assert len(wrong) <= 0.05 * len(rising), wrong  # direction: at most 1 step in 20 misses
    # size: the median predicted gain is within a factor 2 of the measured one (log ratios), so a model whose ITL does
    # not grow with the batch (throughput in proportion to the batch) fails as well as one with no batching gain
    assert 0.5 < np.median(rising["predicted"] / rising["measured"]) < 2, rising.describe()


def test_served_energy_per_token_falls_where_measured_energy_falls(measured_sweeps):
    """Batching amortises the weights' reads: where measured energy per token falls by more than MEASURED_STEP from
    one batch to the next, the served prediction falls too (power rising slower than throughput)."""
    steps = _steps(measured_sweeps, "energy_per_token_j", "pred_energy")
    falling = steps[steps["measured"] < np.log1p(-MEASURED_STEP)]
    assert len(falling) >= 50 and falling["sweep"].nunique() >= 25, (len(falling), falling["sweep"].nunique())
    wrong = falling[falling["predicted"] >= 0]
    assert len(wrong) <= 0.05 * len(falling), wrong
    assert 0.5 < np.median(falling["predicted"] / falling["measured"]) < 2, falling.describe()


def test_a_planner_question_about_a_pair_never_measured_together(pipeline, tmp_path, monkeypatch):
    monkeypatch.setenv("WATTGPU_MODELS", str(pipeline / "models"))
    monkeypatch.setenv("WATTGPU_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("WATTGPU_ROOT", str(pipeline))
    measured = read_table(pipeline / "data/processed/measurements.csv")
    gpu, llm = "NVIDIA H100 80GB HBM3", "meta-llama/Llama-3.1-70B-Instruct"
    assert measured[(measured["gpu"] == gpu) & (measured["llm"] == llm) & (measured["n_gpus"] == 4)].empty
    res = CliRunner().invoke(app, ["predict", "--gpu", "H100 80GB HBM3", "--llm", llm, "--concurrency", "64",
                                   "--prompt-tokens", "2000", "--output-tokens", "500", "--gpus-per-replica", "4",
                                   "--precision", "bf16", "--engine", "vllm", "--engine-version", "0.11", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    p = out["prediction"]
    assert 100 < p["power_w"] < 700 * 1.05 and 5 < p["itl_ms"] < 500 and p["concurrency"] == 64
    assert p["system_tokens_per_s"] == pytest.approx(64 / (p["itl_ms"] / 1e3), rel=1e-6)
    assert p["energy_per_token_j"] == pytest.approx(p["power_w"] * 4 / p["system_tokens_per_s"], rel=1e-6)
    newer = CliRunner().invoke(app, ["predict", "--gpu", "H100 80GB HBM3", "--llm", llm, "--concurrency", "64",
                                     "--gpus-per-replica", "4", "--engine-version", "0.20", "--json"])
    assert "vllm 0.20.0 > 0.14.1 measured: answered as V1 engine" in json.loads(newer.stdout)["extrapolation"]
