"""The yardstick scores what is served: an outer-test row with a request rate is predicted through the Predictor's
path (its requests in flight solved by the evaluated ITL model), never from the requests in flight a source derived
from the measured latency. Rows come from the test pipeline's real measurements; fits are FIXTURES (one held-out GPU,
small settings), never reported."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from wattgpu import paths
from wattgpu.catalogs.gpus import load_gpu_catalog
from wattgpu.catalogs.llms import load_llm_catalog
from wattgpu.config import AlgorithmSpace, Regime
from wattgpu.evaluation.runner import prepare_rows, target_rows
from wattgpu.features import with_concurrency
from wattgpu.io import read_table
from wattgpu.modeling.algorithms import make_estimator
from wattgpu.modeling.predictor import Predictor, as_served, served_predictions, shaped_itl, solve_concurrency
from wattgpu.search.nested import Settings, StudyTask, nested_plan, run_task
from wattgpu.sources.schema import MEASURED_CONCURRENCY

HP = {"alpha": 100, "n_estimators": 40, "learning_rate": 0.1, "num_leaves": 7, "min_child_samples": 20,
      "reg_lambda": 1.0, "colsample_bytree": 1.0}
POWER_HP = {"linear_scope": "arrivals", **HP}
GPUS = ("NVIDIA A30", "NVIDIA L4", "NVIDIA H100 NVL")  # three Watt Counts GPUs: LOGO holds each one out


@pytest.fixture(scope="module")
def table(ingested):
    gpus, llms = load_gpu_catalog(ingested / paths.GPU_CATALOG), load_llm_catalog(ingested / paths.LLM_CATALOG_TABLE)
    rows = prepare_rows(read_table(ingested / paths.MEASUREMENTS), gpus, llms, source="wattcounts_processed",
                        dense_only=True, offline_batch=256)
    rows = rows[rows["gpu"].isin(GPUS)].reset_index(drop=True)
    return rows, gpus, llms


def request_of(row: pd.Series) -> dict:
    """What a user asks for the workload of a measured server row: its GPU, LLM, request rate and lengths."""
    return {"gpu": row["gpu"], "llm": row["llm"], "scenario": "server", "request_rate_per_s": row["request_rate_per_s"],
            "prompt_tokens": row["prompt_tokens_mean"], "output_tokens": row["output_tokens_mean"],
            "n_gpus": int(row["n_gpus"]), "engine": row["engine"], "engine_version": row["engine_version"],
            "precision": row["precision"]}


def test_a_server_row_is_scored_with_the_predictors_answer_for_its_rate(table):
    rows, gpus, llms = table
    itl_rows = target_rows(rows, "itl")
    held_out = itl_rows["gpu"] == GPUS[0]
    itl = make_estimator("workload", "itl", "workload", HP, seed=42).fit(itl_rows[~held_out])
    power = make_estimator("workload", "power", "workload", POWER_HP, seed=42).fit(rows[rows["gpu"] != GPUS[0]])
    predictor = Predictor({"power": power, "itl": itl}, gpus, llms, offline_batch=256)

    test = itl_rows[held_out & itl_rows["request_rate_per_s"].notna()].iloc[:5]
    assert (test["concurrency_derivation"].isin(MEASURED_CONCURRENCY)).all()
    served, pred = served_predictions(test, {"power": power, "itl": itl})
    answer = predictor.predict([request_of(r) for _, r in test.iterrows()])
    np.testing.assert_allclose(pred["itl"], answer["itl_s"].to_numpy(), rtol=1e-9)
    np.testing.assert_allclose(pred["power"], answer["power_w"].to_numpy(), rtol=1e-9)
    np.testing.assert_allclose(served["concurrency"], answer["concurrency"].to_numpy(), rtol=1e-9)
    # the measured-latency concurrency is not what was used: the solved one differs from it
    assert not np.allclose(served["concurrency"], test["concurrency"], rtol=1e-3)


def test_as_served_drops_only_inputs_derived_from_measurements(table):
    rows, _, _ = table
    asked = as_served(rows)
    arrivals = rows["request_rate_per_s"].notna().to_numpy()
    assert asked.loc[arrivals, "concurrency"].isna().all()  # a Poisson row's requests in flight are solved
    np.testing.assert_array_equal(asked.loc[~arrivals, "concurrency"], rows.loc[~arrivals, "concurrency"])  # offline
    measured = pd.DataFrame({**rows.iloc[:2].to_dict("list"), "request_rate_per_s": [np.nan, np.nan],
                             "concurrency": [191.3, 29.7], "concurrency_setting": [192.0, 32.0],
                             "concurrency_derivation": ["measured_mean_batch", "static_batch"]})
    # a measured mean batch is asked at its setting (max_num_seqs); a static batch is the user's own number
    assert as_served(measured)["concurrency"].tolist() == [192.0, 29.7]


def test_the_nested_search_scores_poisson_rows_through_the_served_path(table, tmp_path):
    """run_task's outer-test predictions of a Poisson row equal the Predictor's answer with the fold's models."""
    rows, gpus, llms = table
    itl_rows = target_rows(rows, "itl")
    space = AlgorithmSpace(feature_sets=("workload",), first_trials=(HP,),
                           space={k: {"type": "categorical", "choices": [v]} for k, v in HP.items()})
    plan = next(p for p in nested_plan(itl_rows, Regime(kind="logo"), 2, 42) if p.outer.name == GPUS[0])
    settings = Settings(seed=42, n_trials=1)
    task = StudyTask(itl_rows, (plan,), "itl", "workload", space, settings, tmp_path / "study.db", "test")
    outcome = run_task(task)[0]
    fitted = make_estimator("workload", "itl", "workload", HP, seed=42).fit(itl_rows.iloc[plan.outer.train])
    predictor = Predictor({"itl": fitted}, gpus, llms, offline_batch=256)
    test = itl_rows.iloc[outcome.test]
    poisson = test["request_rate_per_s"].notna().to_numpy()
    answer = predictor.predict([request_of(r) for _, r in test[poisson].iterrows()])
    np.testing.assert_allclose(outcome.y_pred[poisson], answer["itl_s"].to_numpy(), rtol=1e-9)
    # and not the prediction at the measured-latency requests in flight (the same below one request in flight,
    # where a step holds one sequence either way; apart at the loads that queue)
    at_measured = np.asarray(fitted.predict(test[poisson]), dtype=float)
    assert np.max(np.abs(outcome.y_pred[poisson] / at_measured - 1)) > 1e-3


def test_an_overloaded_poisson_load_stops_at_the_engines_own_cap(table):
    """FIXTURE requests at 1,000 req/s (more than any replica decodes) with a constant ITL: the requests in flight stop
    at the features' running cap, vLLM V1's default max_num_seqs on an 80 GB H100 (1024), and the KV cache's fit for
    an engine whose default is not known (TensorRT-LLM), not at vLLM V0's 256 borrowed for every engine."""
    _, gpus, llms = table
    predictor = Predictor({}, gpus, llms, offline_batch=256)
    asked = [{"gpu": "H100 SXM", "llm": "meta-llama/Llama-3.1-8B-Instruct", "scenario": "server",
              "request_rate_per_s": 1000.0, "prompt_tokens": 128, "output_tokens": 128, "engine": engine,
              "engine_version": version} for engine, version in (("vllm", "0.14.1"), ("tensorrt-llm", "0.12.0"))]
    rows = predictor.features(predictor.validate(asked))
    solved, _ = solve_concurrency(rows, lambda f: np.full(len(f), 0.05))
    assert solved["concurrency"].iloc[0] == 1024
    fit = rows["running_cap"].iloc[1]
    assert fit > 1024 and solved["concurrency"].iloc[1] == pytest.approx(fit)


def test_the_fixed_point_shortcut_answers_what_re_featuring_the_rows_answers(table):
    """The Poisson fixed point asks the ITL model at many requests in flight through a shortcut (features.
    concurrency_sweep, TargetRegressor.at_concurrency, StepTimeRegressor.at_context: what does not depend on the
    requests in flight built once). It answers, to the bit, what the rows re-featured at each concurrency and
    predicted answer: dense and MoE LLMs, one GPU and four, two engines, below and beyond the engine's cap. The fit is
    a FIXTURE."""
    rows, gpus, llms = table
    itl = make_estimator("workload", "itl", "workload", HP, seed=42).fit(target_rows(rows, "itl"))
    predictor = Predictor({"itl": itl}, gpus, llms, offline_batch=256)
    asked = [{"gpu": gpu, "llm": llm, "scenario": "server", "request_rate_per_s": rate, "prompt_tokens": 512,
              "output_tokens": 300, "n_gpus": n, "engine": engine, "engine_version": version}
             for gpu in ("H100 SXM", "A30")
             for llm, n in (("meta-llama/Llama-3.1-8B-Instruct", 1), ("Qwen/Qwen3-30B-A3B", 1),
                            ("meta-llama/Llama-3.1-70B-Instruct", 4))
             for engine, version in (("vllm", "0.14.1"), ("tensorrt-llm", "0.12.0"))
             for rate in (0.05, 3.0, 1000.0)]
    featured = predictor.features(predictor.validate(asked))
    served = shaped_itl(itl)
    ask = served.at_concurrency(featured)
    assert itl.at_concurrency(featured) is not None  # the shortcut applies (no silent fallback to re-featuring)
    rng = np.random.default_rng(0)
    for size in (1, 7, len(featured)):
        positions = np.sort(rng.choice(len(featured), size=size, replace=False))
        concurrency = rng.uniform(0.0, 3000.0, size=size)
        np.testing.assert_array_equal(ask(positions, concurrency),
                                      served(with_concurrency(featured.iloc[positions], concurrency)))
    fast, itl_fast = solve_concurrency(featured, served)
    slow, itl_slow = solve_concurrency(featured, lambda f: served(f))  # a plain callable: re-featured every step
    np.testing.assert_array_equal(fast["concurrency"], slow["concurrency"])
    np.testing.assert_array_equal(itl_fast, itl_slow)
    assert (fast["concurrency"] > 0).all() and np.isfinite(itl_fast).all()
