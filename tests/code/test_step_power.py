"""Power from the work of a decode step (modeling.steppower, issue 22): idle + busy x the step's bytes and FLOPs over
the step time, within [idle, TDP]. Fitted on the test pipeline's real measurements (every source); the fits are
FIXTURES (first-trial settings), never reported."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from wattgpu import paths, physics
from wattgpu.catalogs.gpus import load_gpu_catalog
from wattgpu.catalogs.llms import load_llm_catalog
from wattgpu.evaluation.runner import prepare_rows, target_rows
from wattgpu.io import read_table
from wattgpu.modeling import steppower, steptime
from wattgpu.modeling.algorithms import make_estimator
from wattgpu.modeling.predictor import Predictor

PHYSICS_ONLY = {"ridge": 1000, "n_estimators": 0}
CORRECTED = {"ridge": 100, "n_estimators": 200, "learning_rate": 0.05, "num_leaves": 15,
             "min_child_samples": 20, "reg_lambda": 1.0, "colsample_bytree": 1.0}
GPUS = ("NVIDIA A100-SXM4-40GB", "NVIDIA H100 NVL", "NVIDIA L4", "Tesla T4", "NVIDIA H200")
LLM = "meta-llama/Llama-3.1-8B-Instruct"
# a measured 3B model leaves headroom below TDP at one sequence on the large GPUs (an 8B model's weight stream already
# puts a 400 W GPU at ~0.85-0.9 x TDP at one sequence in this fit, at the edge of the 0.9 x TDP headroom rule)
SMALL_LLM = "meta-llama/Llama-3.2-3B-Instruct"


@pytest.fixture(scope="module")
def fitted(ingested):
    gpus, llms = load_gpu_catalog(ingested / paths.GPU_CATALOG), load_llm_catalog(ingested / paths.LLM_CATALOG_TABLE)
    rows = target_rows(prepare_rows(read_table(ingested / paths.MEASUREMENTS), gpus, llms, source=None,
                                    dense_only=False, offline_batch=256), "power")
    models = {name: make_estimator("steppower", "power", "workload", hp, seed=42).fit(rows)
              for name, hp in (("physics", PHYSICS_ONLY), ("corrected", CORRECTED))}
    return rows, gpus, llms, models


def _ask(fitted, name, requests) -> pd.DataFrame:
    """The served answers (a Poisson load's requests in flight solved by the model's own step-time model) beside the
    requests' featured rows."""
    rows, gpus, llms, models = fitted
    predictor = Predictor({"power": models[name], "itl": models[name].itl_}, gpus, llms, offline_batch=256)
    featured = predictor.features(predictor.validate(requests))
    return featured.assign(power_w=predictor.predict(requests)["power_w"].to_numpy())


@pytest.mark.parametrize("name", ["physics", "corrected"])
def test_power_stays_between_idle_and_the_power_limit_at_any_load(fitted, name):
    requests = [{"gpu": g, "llm": LLM, "concurrency": c, "prompt_tokens": p, "output_tokens": 256}
                for g in GPUS for c in (1, 8, 64, 512, 4096) for p in (16, 2048, 32_000)]
    requests += [{"gpu": g, "llm": LLM, "scenario": "server", "request_rate_per_s": r}
                 for g in GPUS for r in (1e-4, 0.3, 50.0)]
    got = _ask(fitted, name, requests)
    share = got["power_w"].to_numpy() / got["gpu_tdp_w"].to_numpy()
    idle = fitted[3][name].idle_share(got)
    assert np.isfinite(share).all()
    assert (share <= 1.0 + 1e-12).all() and (share >= idle - 1e-12).all()
    assert 0.05 < idle.min() and idle.max() < 0.6  # an idle GPU draws a fraction of its limit, not nothing or all


def test_an_idle_poisson_load_draws_idle_power(fitted):
    got = _ask(fitted, "physics", [{"gpu": g, "llm": LLM, "scenario": "server", "request_rate_per_s": 1e-5}
                                   for g in GPUS])
    share = got["power_w"].to_numpy() / got["gpu_tdp_w"].to_numpy()
    np.testing.assert_allclose(share, fitted[3]["physics"].idle_share(got), rtol=1e-3)


def test_a_faster_step_at_the_same_work_draws_more_watts(fitted, monkeypatch):
    # the 3B model: an 8B model's closed batch already streams its weights at about the peak bandwidth in this fit
    requests = [{"gpu": g, "llm": SMALL_LLM, "concurrency": c} for g in GPUS for c in (1, 16, 128)]
    model = fitted[3]["physics"]
    asked = _ask(fitted, "physics", requests)
    before = asked["power_w"].to_numpy()
    slow_itl = model.itl_.predict
    # the shares of peak bandwidth and FLOP/s the step uses before the change (the model's own accounting)
    u_mem, u_flops, _, _ = model._inputs(asked)
    monkeypatch.setattr(model.itl_, "predict", lambda rows: 0.7 * slow_itl(rows))  # the same work, 30 % sooner
    after = _ask(fitted, "physics", requests)
    tdp = after["gpu_tdp_w"].to_numpy()
    at_limit = before * 1.01 >= tdp  # within 1 % of the limit: the clip at TDP leaves no room to rise by 1 %
    # a step 30 % sooner that would move its bytes or FLOPs faster than the peak cannot: its utilisation stays at 1
    at_peak = (u_mem / 0.7 >= 1.0) | (u_flops / 0.7 >= 1.0)
    free = ~at_limit & ~at_peak
    assert free.sum() >= len(requests) // 2  # most requests leave room to draw more
    assert (after["power_w"].to_numpy()[free] > before[free] * 1.01).all()
    assert (after["power_w"].to_numpy()[~at_limit] >= before[~at_limit] - 1e-9).all()
    assert (after["power_w"].to_numpy() <= tdp + 1e-9).all()


def test_power_rises_with_requests_in_flight_from_one_to_a_full_batch(fitted):
    for name in ("physics", "corrected"):
        got = _ask(fitted, name, [{"gpu": g, "llm": SMALL_LLM, "concurrency": c} for g in GPUS for c in (1, 256)])
        one, full = got["power_w"].to_numpy()[0::2], got["power_w"].to_numpy()[1::2]
        tdp = got["gpu_tdp_w"].to_numpy()[0::2]
        below = one < 0.9 * tdp  # a small GPU streams an 8B model near its limit already at one sequence
        assert below.sum() >= 2 and (full[below] > one[below] * 1.05).all(), (name, one, full)
        assert (full[~below] >= one[~below]).all() and (full <= tdp + 1e-9).all()


def test_the_busy_fraction_is_one_for_a_closed_batch_and_poisson_below():
    np.testing.assert_allclose(physics.busy_fraction([0.0, 0.5, 3.0], [False, False, False]), 1.0)
    np.testing.assert_allclose(physics.busy_fraction([0.0, 0.5, 3.0], [True, True, True]),
                               [0.0, 1 - np.exp(-0.5), 1 - np.exp(-3.0)])


def test_the_power_fit_converges_and_a_fit_stopped_early_warns(fitted, monkeypatch):
    """The physics fit runs to its tolerance on the real rows; cut short, it says so (steptime.ConvergenceWarning)
    instead of answering from a half-fitted model silently."""
    rows, _, _, models = fitted
    assert models["physics"].converged_
    monkeypatch.setattr(steppower, "MAX_EVALUATIONS", 2)
    with pytest.warns(steptime.ConvergenceWarning, match="step-power fit did not converge"):
        early = make_estimator("steppower", "power", "workload", PHYSICS_ONLY, seed=42).fit(rows.iloc[:3000])
    assert not early.converged_


def test_a_held_out_lab_is_answered_better_than_load_scaled_tdp_with_the_latency_only_rows(ingested):
    """Issue 22's bar, through the served path: Watt Counts held out (LOSO), its power from the step model fitted on the
    other labs. LLM-Inference-Bench measured latency in thousands of runs and power in a few dozen; the step time
    learns from all of them (evaluation.cv.fit_fold) and the held-out lab's offline power, which follows its step time,
    is no longer a third under (the power rows alone teach a step twice too slow at a full batch, from vLLM 0.4.2)."""
    from wattgpu.evaluation import baselines
    from wattgpu.evaluation.cv import fit_fold
    from wattgpu.evaluation.runner import step_rows
    from wattgpu.modeling.algorithms import ITL_SETTINGS
    from wattgpu.modeling.predictor import served_predictions

    gpus, llms = load_gpu_catalog(ingested / paths.GPU_CATALOG), load_llm_catalog(ingested / paths.LLM_CATALOG_TABLE)
    every = prepare_rows(read_table(ingested / paths.MEASUREMENTS), gpus, llms, source=None, dense_only=False,
                         offline_batch=256)
    rows, beside = target_rows(every, "power"), step_rows(every, "power")
    held = (rows["source"] == "wattcounts_processed").to_numpy()
    assert len(beside) > 4000 and held.sum() > 4000
    itl_rows = target_rows(every, "itl")
    itl = make_estimator("workload", "itl", "workload", ITL_SETTINGS, seed=42).fit(
        itl_rows[itl_rows["source"] != "wattcounts_processed"])
    y = rows.loc[held, "power_w_per_gpu"].to_numpy(dtype=float)

    def mdape(extra) -> float:
        model = fit_fold(make_estimator("steppower", "power", "workload", PHYSICS_ONLY, seed=42), rows,
                         np.flatnonzero(~held), extra)
        pred = served_predictions(rows[held], {"itl": itl, "power": model})[1]["power"]
        return float(100 * np.median(np.abs(pred / y - 1)))

    baseline = float(100 * np.median(np.abs(baselines.load_scaled_tdp(rows[held], {"offline": 0.9, "server_low": 0.2,
                                                                                   "server_high": 0.6}) / y - 1)))
    alone, with_latency = mdape(None), mdape(beside)
    assert with_latency < baseline < alone, (with_latency, baseline, alone)


# the `workload` power candidate's first trial in params.yaml (search.algorithms.workload.first_trials[0])
TREND_BOOST = {"linear_scope": "arrivals", "alpha": 100, "n_estimators": 200, "learning_rate": 0.05, "num_leaves": 15,
               "min_child_samples": 20, "reg_lambda": 1.0, "colsample_bytree": 1.0}


def test_a_longer_output_at_the_same_load_is_not_answered_as_an_older_lab(fitted):
    """The `workload` power candidate (ridge trend + boosting) fitted on every source, asked a closed batch of 128 that
    the KV cache holds whole (512-token prompts) on GPUs Watt Counts measured with vLLM's V1 engine, at 256- and
    1,000-token outputs: the step's work per sequence grows with the context, the power by a few per cent at most.
    Where raw prompt and output lengths were inputs, the long outputs of the V0-engine labs (ML.ENERGY v2,
    LLM-Inference-Bench, which drew 0.4 - 0.8 x TDP) taught "long output, low power" and the 1,000-token outputs came
    out about a tenth below the 256-token ones."""
    rows, gpus, llms, _ = fitted
    model = make_estimator("workload", "power", "workload", TREND_BOOST, seed=42,
                           load_rho={"offline": 0.9, "server_low": 0.2, "server_high": 0.6}).fit(rows)
    v1_gpus = ("NVIDIA H100 NVL", "NVIDIA H200", "NVIDIA A100-SXM4-40GB", "NVIDIA L40S")
    requests = [{"gpu": g, "llm": LLM, "concurrency": 128, "prompt_tokens": 512, "output_tokens": o}
                for g in v1_gpus for o in (256, 1000)]
    predictor = Predictor({"power": model}, gpus, llms, offline_batch=256)
    featured = predictor.features(predictor.validate(requests))
    assert (featured["running_sequences"].to_numpy() == 128).all()  # the same load: every request runs
    power = predictor.predict(requests)["power_w"].to_numpy().reshape(-1, 2)
    assert (np.abs(power[:, 1] / power[:, 0] - 1) < 0.05).all(), power
