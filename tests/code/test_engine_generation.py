"""Engine releases by generation (issue 22): a release no source measured is answered as a measured release of its
generation (vLLM's V0 / V1 engine), so a release between two measured ones is never interpolated between the labs
that measured them, and one newer than every measured one is answered as the newest generation measured, with a note
that says so. Rows are the test pipeline's real measurements; fits are FIXTURES (small settings), never reported."""

from __future__ import annotations

import pytest

from wattgpu import paths
from wattgpu.catalogs.gpus import load_gpu_catalog
from wattgpu.catalogs.llms import load_llm_catalog
from wattgpu.evaluation.runner import prepare_rows, target_rows
from wattgpu.io import read_table
from wattgpu.modeling import coverage
from wattgpu.modeling.algorithms import make_estimator
from wattgpu.modeling.estimator import nearest_release
from wattgpu.modeling.predictor import Predictor
from wattgpu.workload import engine_generation, generation_name, version_number

# the `workload` power model: a ridge trend (which would interpolate a version number linearly) plus boosting
HP = {"linear_scope": "all", "alpha": 30, "n_estimators": 60, "learning_rate": 0.1, "num_leaves": 15,
      "min_child_samples": 10, "reg_lambda": 1.0, "colsample_bytree": 1.0}
REQUEST = {"gpu": "NVIDIA A100-SXM4-40GB", "llm": "meta-llama/Llama-3.1-8B-Instruct", "concurrency": 64,
           "prompt_tokens": 512, "output_tokens": 512, "n_gpus": 1, "engine": "vllm"}


@pytest.fixture(scope="module")
def table(ingested):
    gpus, llms = load_gpu_catalog(ingested / paths.GPU_CATALOG), load_llm_catalog(ingested / paths.LLM_CATALOG_TABLE)
    rows = prepare_rows(read_table(ingested / paths.MEASUREMENTS), gpus, llms, source=None, dense_only=True,
                        offline_batch=256)
    return target_rows(rows, "power"), gpus, llms


def _predictor(rows, gpus, llms) -> Predictor:
    power = make_estimator("workload", "power", "workload", HP, seed=42).fit(rows)
    return Predictor({"power": power}, gpus, llms, offline_batch=256)


def _power(predictor: Predictor, version: str) -> float:
    return float(predictor.predict([{**REQUEST, "engine_version": version}])["power_w"].iloc[0])


def test_generations_follow_the_public_release_table():
    # vLLM's V1 engine is the default from 0.8.0; TensorRT-LLM's PyTorch backend from 1.0.0
    assert [engine_generation("vllm", v) for v in ("0.4.2", "0.7.3", "0.8.0", "0.11", "0.20.1")] == [0, 0, 1, 1, 1]
    assert [engine_generation("tensorrt-llm", v) for v in ("0.11.0", "0.21.0", "1.0.0")] == [0, 0, 1]
    assert engine_generation("llama.cpp", "b3000") == 0 and engine_generation("vllm", "") == 0
    assert generation_name("vllm", 1) == "V1 engine" and generation_name("deepspeed", 0) == ""


def test_a_release_between_two_labs_is_answered_as_its_generation_not_interpolated(table):
    rows, gpus, llms = table
    assert {0.0, 1.0} <= set(rows.loc[rows["engine"] == "vllm", "engine_generation"])  # both generations measured
    predictor = _predictor(rows, gpus, llms)
    # 0.11 lies between ML.ENERGY's 0.5.4 (V0) and Watt Counts' 0.14.1 (V1): it is a V1 engine, answered as one
    assert _power(predictor, "0.11") == pytest.approx(_power(predictor, "0.14.1"), rel=1e-12)
    assert _power(predictor, "0.20") == pytest.approx(_power(predictor, "0.14.1"), rel=1e-12)
    assert _power(predictor, "0.6.1") == pytest.approx(_power(predictor, "0.4.2"), rel=1e-12)


def test_a_generation_never_measured_is_answered_as_the_newest_measured_and_flagged(table):
    rows, gpus, llms = table
    v0_only = rows[rows["source"] != "wattcounts_processed"]  # no source but Watt Counts ran vLLM's V1 engine
    assert set(v0_only.loc[v0_only["engine"] == "vllm", "engine_generation"]) == {0.0}
    predictor = _predictor(v0_only, gpus, llms)
    assert _power(predictor, "0.14.1") == pytest.approx(_power(predictor, "0.6.1"), rel=1e-12)

    ranges = coverage.training_ranges(v0_only)
    notes = coverage.outside(coverage.request_values({**REQUEST, "engine_version": "0.14.1"}), ranges)
    newest = v0_only.loc[v0_only["engine"] == "vllm", "engine_version"].map(version_number).max()
    assert f"vllm 0.14.1 > {coverage._version(newest)} measured: answered as V0 engine, the newest generation " \
        "measured (V1 engine never was)" in notes
    # releases of another engine do not widen vLLM's range: TensorRT-LLM 0.12 is not a newer vLLM
    assert ranges["engine_version_num:vllm"][1] < ranges["engine_version_num:tensorrt-llm"][1]
    assert not coverage.outside(coverage.request_values({**REQUEST, "engine_version": coverage._version(newest)}), ranges)


def test_an_unmeasured_release_is_answered_as_a_measured_release_of_its_generation():
    measured = [(0.0, 402.0), (0.0, 601.0), (1.0, 1401.0)]  # vLLM 0.4.2 and 0.6.1 (V0), 0.14.1 (V1)
    assert nearest_release(0.0, 601.0, measured) == 601.0  # measured: itself
    assert nearest_release(0.0, 502.0, measured) == 402.0  # between two V0 releases: the one below, not a blend
    assert nearest_release(0.0, 300.0, measured) == 402.0  # older than any: the oldest of its generation
    assert nearest_release(1.0, 1100.0, measured) == 1401.0  # 0.11 is V1: V1's only measured release
    assert nearest_release(1.0, 2000.0, measured) == 1401.0  # newer than any: the newest of its generation
    assert nearest_release(2.0, 9000.0, measured) == 1401.0  # a generation never measured: the newest below it
    assert nearest_release(1.0, 1100.0, measured[:2]) == 601.0  # V1 unmeasured: V0's newest
