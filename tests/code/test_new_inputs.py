"""New request inputs (issue 23 items 2, 3, 5): the engine no source measured (sglang) answered as vLLM's V1 engine
and flagged; current engine releases; weight precisions down to NVFP4 / MXFP4, NVFP4 experts beside FP8 weights
(`expert_precision`) and the KV cache's own precision (`kv_precision`), each changing the decode step's bytes and
the memory fit by the hand-computed amount; their defaults leave today's features exactly as they were; the new
GPUs load with their spec-sheet URLs. Catalogs and requests are hand-written FIXTURES (test_predict), never
measurements; no fitted model is used."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from tests.code import test_predict
from tests.code.test_predict import _LLM, BY_NAME, GPUS, LLMS
from wattgpu import physics, workload
from wattgpu.catalogs.gpus import load_gpu_catalog
from wattgpu.catalogs.llms import LlmCatalog, LlmSpec
from wattgpu.cli import app
from wattgpu.features import WORKLOAD_ITL, WORKLOAD_POWER, engineer
from wattgpu.modeling import coverage
from wattgpu.modeling.estimator import as_measured_release
from wattgpu.modeling.intervals import Calibration
from wattgpu.planning import service
from wattgpu.request import RequestError, check_workload, validate_batch
from wattgpu.serving.pyfunc import as_requests, request_fields

# FIXTURE: a mixture of experts with a known layout: 64 routed experts, 8 per token, 16 B total, 3 B active, so its
# routed experts hold X = (16 - 3) / (1 - 8/64) = 14.857 B parameters and the shared weights 1.143 B.
MOE = LlmSpec(key="fixture/moe-64e", total_params_b=16.0, active_params_b=3.0, num_layers=28, hidden_size=2048,
              family="qwen3_moe", is_moe=True, **{**_LLM, "num_experts": 64, "experts_per_token": 8})
CATALOG = LlmCatalog([*LLMS, MOE])
EXPERTS_B = (16.0 - 3.0) / (1 - 8 / 64)
DENSE = {**BY_NAME, "scenario": None, "concurrency": 32, "prompt_tokens": 1000, "output_tokens": 200}
MIXED = {**DENSE, "llm": MOE.key}
# the dense FIXTURE LLM's KV cache: 32 layers x 2 (K, V) x 8 KV heads x 128 dims = 65,536 values per token
KV_VALUES_PER_TOKEN = 32 * 2 * 8 * 128


fixture_predictor = functools.partial(test_predict.fixture_predictor, GPUS, CATALOG)
rows = functools.partial(test_predict.fixture_rows, GPUS, CATALOG)
featured = functools.partial(test_predict.fixture_featured, GPUS, CATALOG)


# ------------------------------------------------------------------------------------------------- precisions


def test_nvfp4_weights_are_read_at_4_5_bits_each_against_fp8s_8():
    # NVFP4: 4-bit values + one FP8 scale per 16 values = 4.5 bits = 0.5625 bytes per weight (MXFP4: 4.25 bits)
    assert workload.PRECISION_BYTES["nvfp4"] == 0.5625 and workload.PRECISION_BYTES["mxfp4"] == 0.53125
    f = featured({**DENSE, "precision": "fp8"}, {**DENSE, "precision": "nvfp4"}, {**DENSE, "precision": "bf16"})
    assert list(f["weight_bytes_per_param"]) == [1.0, 0.5625, 2.0]
    # a dense step reads every weight once: 8 B x bytes / (3,350 GB/s): fp8 2.388 ms, nvfp4 1.343 ms (x 0.5625)
    assert f["weights_step_s"].iloc[0] == pytest.approx(8e9 * 1.0 / 3350e9)
    assert f["weights_step_s"].iloc[1] == pytest.approx(8e9 * 0.5625 / 3350e9)
    assert f["weights_step_s"].iloc[1] / f["weights_step_s"].iloc[0] == pytest.approx(0.5625)
    # the memory the weights leave for the KV cache grows: 0.9 x 80 GB - 8 B x bytes
    kv = f["kv_step_per_sequence_s"] * 3350e9  # bytes of one sequence's mean context (1,100 tokens) at 2 bytes
    per_sequence = kv / 1100 * 1200  # the whole request (1,200 tokens)
    fit = np.exp(f["log_kv_fit_sequences"])
    for i, b in enumerate((1.0, 0.5625, 2.0)):
        assert fit.iloc[i] == pytest.approx((0.9 * 80 - 8 * b) * 1e9 / per_sequence.iloc[i])
    assert fit.iloc[1] > fit.iloc[0] > fit.iloc[2]


def test_nvfp4_experts_beside_fp8_weights_change_only_the_experts_bytes():
    f = featured({**MIXED, "precision": "fp8"}, {**MIXED, "precision": "fp8", "expert_precision": "nvfp4"},
                 {**MIXED, "precision": "nvfp4"})
    shared = 16.0 - EXPERTS_B
    # weights in memory: shared x 1 byte + experts x 0.5625 bytes = 1.143 + 8.357 = 9.500 GB (fp8 alone: 16 GB)
    mixed_gb = shared * 1.0 + EXPERTS_B * 0.5625
    assert mixed_gb == pytest.approx(9.5, abs=1e-3)
    assert f["weight_bytes_per_param"].iloc[1] == pytest.approx(mixed_gb / 16.0)
    assert f["weights_memory_fraction_replica"].iloc[1] == pytest.approx(mixed_gb / 80.0)
    # a decode step of 32 sequences reads the shared weights and the experts they touch, 1 - (1 - 8/64)^32 of them
    touched = 1 - (1 - 8 / 64) ** 32
    step = [(shared * 1.0 + EXPERTS_B * touched * b) * 1e9 / 3350e9 for b in (1.0, 0.5625)]
    assert f["weights_step_s"].iloc[0] == pytest.approx(step[0])
    assert f["weights_step_s"].iloc[1] == pytest.approx(step[1])
    # between FP8 everywhere and NVFP4 everywhere
    assert f["weights_step_s"].iloc[0] > f["weights_step_s"].iloc[1] > f["weights_step_s"].iloc[2]
    assert physics.weights_gb(16.0, 1.0, EXPERTS_B, 0.5625) == pytest.approx(mixed_gb)


def test_fp8_kv_cache_halves_kv_bytes_and_doubles_the_sequences_that_fit():
    f = featured({**DENSE, "precision": "fp8"}, {**DENSE, "precision": "fp8", "kv_precision": "fp8"})
    assert list(f["kv_bytes_per_value"]) == [2.0, 1.0]
    # one sequence's KV read per step: 65,536 values x 1,100 tokens (prompt + half the answer) x 2 or 1 bytes
    assert f["kv_step_per_sequence_s"].iloc[0] == pytest.approx(KV_VALUES_PER_TOKEN * 1100 * 2 / 3350e9)
    assert f["kv_step_per_sequence_s"].iloc[1] == pytest.approx(f["kv_step_per_sequence_s"].iloc[0] / 2)
    # sequences whose whole KV cache (1,200 tokens) fits in 0.9 x 80 GB - 8 GB of FP8 weights: 406.9 -> 813.8
    fit = np.exp(f["log_kv_fit_sequences"])
    assert fit.iloc[0] == pytest.approx(64e9 / (KV_VALUES_PER_TOKEN * 1200 * 2))
    assert fit.iloc[1] == pytest.approx(2 * fit.iloc[0])
    # the weights' bytes do not move with the KV cache's
    assert f["weights_step_s"].iloc[0] == f["weights_step_s"].iloc[1]


def test_the_kv_cache_defaults_to_the_weights_16_bit_type():
    r = rows({**DENSE, "precision": "fp8"}, {**DENSE, "precision": "fp16"}, {**DENSE, "precision": "nvfp4"},
             {**MIXED, "precision": "fp8", "expert_precision": "nvfp4"}, DENSE)
    assert list(r["kv_precision"]) == ["bf16", "fp16", "bf16", "bf16", "bf16"]
    assert list(r["expert_precision"]) == ["fp8", "fp16", "nvfp4", "nvfp4", "bf16"]


def test_an_fp8_kv_cache_doubles_the_offline_batch_the_memory_holds():
    # offline: min(vLLM's cap 1,024, 1,000 requests, the KV fit); long requests make the fit the limit
    long = {**BY_NAME, "prompt_tokens": 8000, "output_tokens": 2000, "precision": "fp8"}
    r = rows(long, {**long, "kv_precision": "fp8"})
    fit = 64e9 / (KV_VALUES_PER_TOKEN * 10_000 * 2)  # 48.8 sequences at 2 bytes per value
    assert r["concurrency"].iloc[0] == pytest.approx(fit)
    assert r["concurrency"].iloc[1] == pytest.approx(2 * fit)


def test_the_memory_rule_weighs_the_experts_and_the_kv_cache_at_their_precisions():
    wf = workload.filled({"precision": "fp8", "expert_precision": "nvfp4"})
    assert service.memory_rule(wf, MOE).bytes_per_param == pytest.approx((16.0 - EXPERTS_B + EXPERTS_B * 0.5625) / 16)
    assert service.memory_rule(wf).bytes_per_param == 1.0  # without the LLM's layout: the rest's bytes
    assert workload.filled({"precision": "fp8"})["kv_precision"] == "bf16"


# ------------------------------------------------------------------------------------------------- defaults


def test_defaults_reproduce_todays_features_exactly():
    """A request that leaves the new inputs out is featured exactly as one that states their defaults, and as a
    frame without the new columns at all (the measured rows: no kv_precision, no expert_precision)."""
    plain = [{**DENSE, "precision": p} for p in ("bf16", "fp8", "int4", "mxfp4")] + [
        {**MIXED, "precision": "fp8"}, {**BY_NAME, "scenario": "server_high"}]
    stated = [{**r, "expert_precision": r.get("precision", "bf16"),
               "kv_precision": "fp16" if r.get("precision") == "fp16" else "bf16"} for r in plain]
    a, b = featured(*plain), featured(*stated)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    legacy = engineer(rows(*plain).drop(columns=["expert_precision", "kv_precision"]), offline_batch=256)
    pd.testing.assert_frame_equal(legacy.drop(columns=["expert_precision", "kv_precision"], errors="ignore"),
                                  a.drop(columns=["expert_precision", "kv_precision"]), check_exact=True)
    # the physics at its defaults is today's formula, exactly
    assert physics.weights_gb(8.0, 2.0, 3.0, 2.0) == 8.0 * 2.0
    assert physics.weights_read_per_step_bytes(16.0, 3.0, 8, 64, 32, 1.0, 1.0) == \
        physics.weights_read_per_step_bytes(16.0, 3.0, 8, 64, 32, 1.0)


# ------------------------------------------------------------------------------------------------- the rules


@pytest.mark.parametrize("request_,field,says", [
    ({**DENSE, "kv_precision": "int4"}, "kv_precision", "KV cache at int4 is not modelled"),  # no 4-bit KV cache
    ({**DENSE, "kv_precision": "nvfp4"}, "kv_precision", "KV cache at nvfp4 is not modelled"),
    ({**DENSE, "precision": "fp3"}, "precision", "is not one of"),  # an unknown precision
    ({**DENSE, "precision": "nvpf4"}, "precision", "did you mean 'nvfp4'"),
    ({**MIXED, "precision": "fp8+nvfp4-experts"}, "precision", "`expert_precision`"),  # the mixed case, spelt wrong
    ({**DENSE, "expert_precision": "nvfp4"}, "expert_precision", "no routed experts"),  # experts of a dense LLM
    ({**DENSE, "llm": "fixture/moe-16b", "expert_precision": "nvfp4"}, "expert_precision", "expert count"),
    ({**DENSE, "expert_precision": "fp5"}, "expert_precision", "is not one of"),
    ({**DENSE, "engine": "sglan"}, "engine", "did you mean 'sglang'"),
    ({**DENSE, "kv_precison": "fp8"}, "kv_precison", "did you mean 'kv_precision'"),
])
def test_a_bad_precision_or_engine_names_its_field(request_, field, says):
    with pytest.raises(RequestError) as exc:
        rows(request_)
    assert exc.value.field == field and says in str(exc.value)


def test_a_batch_answers_the_good_rows_and_names_the_bad_ones_by_row():
    frame = pd.DataFrame([{**DENSE, "kv_precision": "fp8"}, {**DENSE, "kv_precision": "int4"},
                          {**MIXED, "expert_precision": "NVFP4", "precision": "FP8"}, {**DENSE, "engine": "SGLang"}])
    batch = validate_batch(frame, GPUS, CATALOG)  # a CSV read into a frame: the empty cells are NaN, absent
    assert list(batch.accepted) == [0, 2, 3] and [(e.row, e.field) for e in batch.errors] == [(1, "kv_precision")]
    assert list(batch.rows["expert_precision"]) == ["bf16", "nvfp4", "bf16"]
    assert list(batch.rows["kv_precision"]) == ["fp8", "bf16", "bf16"]


def test_a_workload_alone_is_checked_by_the_same_rules():
    check_workload({"concurrency": 4, "kv_precision": "fp8", "precision": "nvfp4", "engine": "sglang"})
    with pytest.raises(RequestError, match="kv_precision"):
        check_workload({"concurrency": 4, "kv_precision": "mxfp4"})


def test_the_http_body_takes_the_new_fields():
    fields_ = request_fields()
    assert fields_["kv_precision"]["allowed"] == ["bf16", "fp16", "fp8", "int8"]
    assert "nvfp4" in fields_["precision"]["allowed"] and "nvfp4" in fields_["expert_precision"]["allowed"]
    assert "sglang" in fields_["engine"]["allowed"]
    body = as_requests([{**MIXED, "precision": "fp8", "expert_precision": "nvfp4", "kv_precision": "fp8",
                         "engine": "sglang"}, {**DENSE, "kv_precision": "int4"}])
    out = fixture_predictor().predict(body)
    assert out["error"].iloc[0] is None and np.isfinite(out["power_w"].iloc[0])
    assert "kv_precision" in out["error"].iloc[1]


def test_predict_help_shows_the_new_inputs():
    result = CliRunner().invoke(app, ["predict", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for text in ("--engine", "sglang", "--precision", "nvfp4", "--kv-precision", "--expert-precision"):
        assert text in result.output


# ------------------------------------------------------------------------------------------------- engines


def test_sglang_is_featured_as_vllms_v1_engine():
    f = featured({**DENSE, "engine": "sglang"}, {**DENSE, "engine": "vllm", "engine_version": "0.14.1"})
    assert f["engine_version"].iloc[0] == workload.CURRENT_RELEASES["sglang"]  # its current release by default
    inputs = sorted({*WORKLOAD_POWER.columns, *WORKLOAD_ITL.columns, "engine_generation"})
    pd.testing.assert_series_equal(f[inputs].iloc[0], f[inputs].iloc[1], check_names=False)
    assert f["engine_vllm"].iloc[0] == 1.0 and f["engine_generation"].iloc[0] == 1.0
    # a model that never saw vLLM 0.14.1 answers it as the measured release nearest within the V1 engine, or below
    v0_only = {"vllm": [(0.0, 402.0), (0.0, 601.0)]}
    assert as_measured_release(f, v0_only)["engine_version_num"].iloc[0] == 601.0
    assert as_measured_release(f, {"vllm": [(0.0, 402.0), (1.0, 1401.0)]})["engine_version_num"].iloc[0] == 1401.0


def test_sglang_is_answered_never_refused_with_the_extrapolation_flagged():
    out = fixture_predictor().predict([{**DENSE, "engine": "sglang"}, DENSE])
    assert out["error"].isna().all() and np.isfinite(out["itl_s"]).all()
    note = "sglang 0.5.21: no source measured it; answered as vllm 0.14.1 (V1 engine), the nearest measured family"
    assert note in out["interval"].iloc[0] and "sglang" not in out["interval"].iloc[1]
    # the planner's notes (predict, the batch CSV, recommend) say it too, beside any range it falls outside
    ranges = {"engine_version_num:vllm": [402.0, 1401.0], "gpu_tdp_w": [300.0, 700.0]}
    r = rows({**DENSE, "engine": "sglang"}).iloc[0]
    notes = coverage.outside(coverage.request_values(r), ranges)
    assert notes == [note + " (continuous batching, paged (radix) KV cache, CUDA graphs)"]
    assert coverage.outside_mask(rows({**DENSE, "engine": "sglang"}, DENSE), ranges).tolist() == [True, False]


@pytest.mark.parametrize("given,engine,release", [
    ({"engine_version": "vllm 0.11.0"}, "vllm", "0.11.0"),  # the CLI's help writes releases after their engine
    ({"engine_version": "SGLang 0.5.21"}, "sglang", "0.5.21"),  # the engine word sets an engine left out
    ({"engine": "tensorrt-llm", "engine_version": "TensorRT-LLM 1.2.1"}, "tensorrt-llm", "1.2.1"),
    ({"engine": "vllm", "engine_version": "0.11"}, "vllm", "0.11"),
])
def test_a_release_written_after_its_engine_is_read_as_that_engines(given, engine, release):
    r = rows({**DENSE, **given})
    assert (r["engine"].iloc[0], r["engine_version"].iloc[0]) == (engine, release)
    assert f"per replica, {engine} {release}, bf16" in workload.describe({**DENSE, **given})  # the answer's line


@pytest.mark.parametrize("given,words", [
    ({"engine": "vllm", "engine_version": "sglang 0.5.21"}, ("a release of sglang", "engine is 'vllm'")),
    ({"engine_version": "foo 0.11"}, ("'foo' is not an engine", "give the release alone, e.g. '0.11'")),
])
def test_a_release_of_another_or_of_no_engine_is_an_error_naming_engine_version(given, words):
    errors = validate_batch([DENSE, {**DENSE, **given}], GPUS, CATALOG).errors  # never read as the wrong engine's
    assert [(e.row, e.field) for e in errors] == [(1, "engine_version")]
    assert all(w in str(errors[0]) for w in words), str(errors[0])


@pytest.mark.parametrize("version", ["vllm0.11", "sglang0.5.21", "0.x", "latest", "0.11-final", "v"])
def test_text_glued_to_a_release_is_an_error_naming_engine_version(version):
    """A release is read whole or not at all (was: the digits of 'sglang0.5.21' read as a vLLM 0.5.21, '0.x' as a
    vLLM 0 release, both answered as vLLM's V0 engine without a word)."""
    errors = validate_batch([DENSE, {**DENSE, "engine_version": version}], GPUS, CATALOG).errors
    assert [(e.row, e.field) for e in errors] == [(1, "engine_version")]
    assert "must be a release like" in str(errors[0]) and repr(version) in str(errors[0]), str(errors[0])


@pytest.mark.parametrize("version,release", [("v0.11.0", "0.11.0"), ("0.5.3.post1", "0.5.3"), ("0.8.0rc1", "0.8.0"),
                                             ("0.11.0+cu128", "0.11.0"), ("1.2.0rc1", "1.2.0")])
def test_a_release_as_engines_tag_theirs_is_that_release(version, release):
    """PEP 440 as engines tag releases: a leading v, a pre-release, a post-release or a local build suffix is the
    release it names (a pre-release counts as its release: 0.8.0rc1 is vLLM's V1 engine)."""
    assert rows({**DENSE, "engine_version": version})["engine_version"].iloc[0] == version  # accepted as written
    assert workload.version_number(version) == workload.version_number(release)
    assert workload.engine_generation("vllm", version) == workload.engine_generation("vllm", release)
    assert workload.version_number("0.14.1") == 1401.0 and workload.version_number("0.11") == 1100.0


def test_an_engine_no_source_measured_is_banded_as_the_family_answering_it():
    # FIXTURE calibration scores: vLLM's closed batches (group 2) miss 10 x more than other engines' (group 3)
    rng = np.random.default_rng(0)
    scores = np.r_[rng.normal(0, 0.5, 200), rng.normal(0, 0.05, 200)]
    cal = Calibration(scores, np.repeat([2, 3], 200), np.zeros(400, bool))
    out = fixture_predictor(calibration={"power": cal, "itl": cal}).predict(
        [{**DENSE, "engine": "sglang"}, {**DENSE, "engine_version": "0.14.1"}, {**DENSE, "engine": "llama.cpp"}])
    width = ((out["itl_s_hi"] - out["itl_s_lo"]) / out["itl_s"]).to_numpy()
    assert width[0] == pytest.approx(width[1]) and width[2] < width[1] / 3  # answered as vLLM: never narrower


def test_current_engine_releases_are_answered_as_measured_generations_and_flagged():
    assert workload.engine_generation("vllm", workload.CURRENT_RELEASES["vllm"]) == 1  # V1 engine
    assert workload.engine_generation("tensorrt-llm", workload.CURRENT_RELEASES["tensorrt-llm"]) == 1  # PyTorch
    ranges = {"engine_version_num:vllm": [402.0, 1401.0], "engine_version_num:tensorrt-llm": [1100.0, 1200.0]}
    trt = coverage.outside(coverage.request_values({"engine": "tensorrt-llm", "engine_version": "1.2.1"}), ranges)
    assert trt == ["tensorrt-llm 1.2.1 > 0.12.0 measured: answered as TensorRT engine, the newest generation measured "
                   "(PyTorch backend never was)"]
    vllm = coverage.outside(coverage.request_values({"engine": "vllm", "engine_version": "0.28.0"}), ranges)
    assert vllm == ["vllm 0.28.0 > 0.14.1 measured: answered as V1 engine"]
    # and an unstated version keeps today's reading: vLLM's newest measured, another engine's unstated
    r = rows(DENSE, {**DENSE, "engine": "tensorrt-llm"})
    assert list(r["engine_version"]) == ["0.14.1", ""]


# ------------------------------------------------------------------------------------------------- GPUs


NEW_GPUS = {"AMD Instinct MI355X": "https://www.amd.com/en/products/accelerators/instinct/mi350/mi355x.html",
            "NVIDIA RTX PRO 6000 Blackwell Server Edition":
                "https://www.nvidia.com/en-us/data-center/rtx-pro-6000-blackwell-server-edition/"}


@pytest.mark.parametrize("key,url", NEW_GPUS.items())
def test_the_new_gpus_load_with_their_spec_sheet_urls(key, url):
    spec = load_gpu_catalog().get(key)
    assert spec.source_url == url and spec.fp16_tensor_tflops > 0 and spec.interconnect_bandwidth_gb_s > 0
    assert "Interconnect:" in spec.notes and "dense" in spec.notes


@pytest.mark.parametrize("name", ["H200", "L40S", "MI300X", "MI325X", "B200", "Gaudi 3", "MI355X",
                                  "RTX PRO 6000 Blackwell"])
def test_the_accelerators_bought_now_resolve(name):
    assert load_gpu_catalog().resolve(name)
