"""Prediction requests on hand-written FIXTURE catalogs and requests (made-up GPUs and LLMs, never measurements)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from wattgpu.catalogs.gpus import dump_gpu_catalog, parse_gpu_catalog
from wattgpu.catalogs.llms import LlmCatalog, LlmSpec
from wattgpu.features import engineer
from wattgpu.modeling.predictor import Predictor
from wattgpu.modeling.store import load_predictor, save_model_dir
from wattgpu.request import KNOWN_FIELDS, RequestError, validate

# FIXTURE: one made-up GPU (H100-like figures) and two made-up LLMs, one dense and one MoE.
GPUS = parse_gpu_catalog({"gpus": [{
    "key": "FIXTURE GPU X1", "display_name": "X1", "vendor": "NVIDIA", "architecture": "Hopper", "release_year": 2023,
    "tdp_w": 700.0, "memory_gb": 80.0, "memory_type": "HBM3", "memory_bus_bits": 5120,
    "memory_bandwidth_gb_s": 3350.0, "base_clock_mhz": 1590.0, "boost_clock_mhz": 1980.0, "sm_count": 132,
    "fp16_tensor_tflops": 989.0, "fp32_tflops": 67.0, "form_factor": "SXM", "aliases": ["x1"],
    "source_urls": ["https://example.com/x1"],
}]})
_LLM = {"num_attention_heads": 32, "num_kv_heads": 8, "head_dim": 128, "intermediate_size": 14336,
        "vocab_size": 128256, "max_position_embeddings": 8192, "dtype": "bfloat16", "params_source": "table",
        "computed_params_b": None, "source": "fixture", "num_experts": None, "experts_per_token": None}
LLMS = LlmCatalog([
    LlmSpec(key="fixture/dense-8b", total_params_b=8.0, active_params_b=8.0, num_layers=32, hidden_size=4096,
            family="llama", is_moe=False, aliases=("dense8",), **_LLM),
    LlmSpec(key="fixture/moe-16b", total_params_b=16.0, active_params_b=3.0, num_layers=28, hidden_size=2048,
            family="mixtral", is_moe=True, **_LLM),
])
BY_NAME = {"gpu": "FIXTURE GPU X1", "llm": "fixture/dense-8b", "scenario": "offline"}
GPU_SPEC = {"gpu_tdp_w": 350, "gpu_memory_gb": 48, "gpu_memory_bandwidth_gb_s": 864, "gpu_fp16_tensor_tflops": 181,
            "gpu_release_year": 2023}
LLM_CONFIG = {"llm_total_params_b": 7.0, "llm_num_layers": 28, "llm_hidden_size": 3584}


def one(request: dict) -> pd.Series:
    return validate([request], GPUS, LLMS).iloc[0]


def test_names_resolve_case_and_alias_insensitively_to_catalog_specs():
    r = one({"gpu": " x1 ", "llm": "DENSE8", "scenario": "offline"})
    assert (r["gpu"], r["llm"]) == ("FIXTURE GPU X1", "fixture/dense-8b")
    assert r["gpu_tdp_w"] == 700.0 and r["gpu_memory_type"] == "HBM3" and r["llm_num_kv_heads"] == 8


def test_gpu_by_spec_uses_the_given_fields_and_leaves_the_rest_unknown():
    r = one({**GPU_SPEC, "gpu_name": "my card", "gpu_memory_type": "GDDR6", "llm": "fixture/dense-8b",
             "scenario": "offline"})
    assert r["gpu"] == "my card" and r["gpu_tdp_w"] == 350.0 and r["gpu_memory_type"] == "GDDR6"
    assert math.isnan(r["gpu_base_clock_mhz"]) and r["gpu_vendor"] == "unknown"
    assert one({**GPU_SPEC, "llm": "fixture/dense-8b", "scenario": "offline"})["gpu"] == "custom GPU"


def test_llm_by_config_fields_dense_unless_fewer_active_params():
    dense = one({"gpu": "x1", **LLM_CONFIG, "scenario": "offline"})
    assert dense["llm"] == "custom LLM" and dense["llm_active_params_b"] == 7.0 and not dense["llm_is_moe"]
    moe = one({"gpu": "x1", **LLM_CONFIG, "llm_active_params_b": 2.0, "scenario": "offline"})
    assert moe["llm_is_moe"] and moe["llm_active_params_b"] == 2.0


@pytest.mark.parametrize("scenario, rate, label", [
    ("offline", None, "offline"), ("server_low", 0.017, "server_low"), ("server_high", 0.33, "server_high"),
])
def test_defaults_per_scenario(scenario, rate, label):
    r = one({**BY_NAME, "scenario": scenario})
    assert r["scenario"] == ("offline" if scenario == "offline" else "server") and r["scenario_label"] == label
    assert (math.isnan(r["request_rate_per_s"]) if rate is None else r["request_rate_per_s"] == rate)
    assert (r["prompt_tokens_mean"], r["output_tokens_mean"], r["n_gpus"]) == (14.0, 220.0, 1)


def test_a_custom_server_rate_maps_to_the_nearer_paper_load_on_a_log_scale():
    assert one({**BY_NAME, "scenario": "server", "request_rate_per_s": 0.05})["scenario_label"] == "server_low"
    assert one({**BY_NAME, "scenario": "server", "request_rate_per_s": 0.1})["scenario_label"] == "server_high"


BAD = [  # (request, the field the error must name)
    ({**BY_NAME, "gpu": "RTX 9999"}, "gpu"),                                    # unknown GPU, no specs
    ({"llm": "fixture/dense-8b", "scenario": "offline"}, "gpu"),                # no GPU at all
    ({"gpu": "x1", "scenario": "offline"}, "llm"),                              # no LLM at all
    ({**GPU_SPEC, "gpu_tdp_w": None, "llm": "dense8", "scenario": "offline"}, "gpu_tdp_w"),  # spec incomplete
    ({"gpu": "x1", "llm": "dense8"}, "scenario"),                               # missing scenario
    ({**BY_NAME, "scenario": "batch"}, "scenario"),                             # unknown scenario
    ({**BY_NAME, "scenario": ["offline"]}, "scenario"),                         # not text (unhashable)
    ({**BY_NAME, "prompt_token": 100}, "prompt_token"),                         # extra / misspelt field
    ({**GPU_SPEC, "gpu_tdp_w": "abc", "llm": "dense8", "scenario": "offline"}, "gpu_tdp_w"),  # wrong type
    ({**GPU_SPEC, "gpu_tdp_w": True, "llm": "dense8", "scenario": "offline"}, "gpu_tdp_w"),   # bool is no number
    ({**GPU_SPEC, "gpu_tdp_w": float("nan"), "llm": "dense8", "scenario": "offline"}, "gpu_tdp_w"),  # NaN
    ({**GPU_SPEC, "gpu_tdp_w": float("inf"), "llm": "dense8", "scenario": "offline"}, "gpu_tdp_w"),  # infinite
    ({**GPU_SPEC, "gpu_tdp_w": 1e9, "llm": "dense8", "scenario": "offline"}, "gpu_tdp_w"),    # absurd
    ({**BY_NAME, "prompt_tokens": -5}, "prompt_tokens"),                        # negative
    ({**BY_NAME, "n_gpus": 1.5}, "n_gpus"),                                     # not a whole number
    ({**BY_NAME, "request_rate_per_s": 0.1}, "request_rate_per_s"),             # a rate offline
    ({**BY_NAME, "scenario": "server"}, "request_rate_per_s"),                  # server without its rate
    ({**BY_NAME, **GPU_SPEC}, "gpu_tdp_w"),                                     # name and specs at once
    ({**GPU_SPEC, "gpu_name": "x1", "llm": "dense8", "scenario": "offline"}, "gpu_name"),  # spec posing as catalog
    ({**BY_NAME, "gpu": 5}, "gpu"),                                             # a number for a name
    ({**BY_NAME, "llm": None, **LLM_CONFIG, "llm_hidden_size": 10}, "llm_hidden_size"),  # config out of range
]


@pytest.mark.parametrize("request_, field", BAD, ids=[f"{i}-{f}" for i, (_, f) in enumerate(BAD)])
def test_bad_request_names_its_field(request_, field):
    with pytest.raises(RequestError) as err:
        validate([BY_NAME, request_], GPUS, LLMS)
    assert err.value.field == field and err.value.row == 1
    assert str(err.value).startswith(f"row 1, field {field!r}: ")


def test_a_misspelt_field_gets_a_suggestion():
    with pytest.raises(RequestError, match="did you mean 'prompt_tokens'"):
        validate([{**BY_NAME, "prompt_token": 100}], GPUS, LLMS)


@pytest.mark.parametrize("requests", [[], pd.DataFrame()])
def test_no_rows_is_an_error(requests):
    with pytest.raises(RequestError, match="no rows") as err:
        validate(requests, GPUS, LLMS)
    assert err.value.field == "requests"


def test_a_frame_marks_absent_cells_with_nan_so_nan_means_absent():
    frame = pd.DataFrame([BY_NAME, {**GPU_SPEC, "llm": "dense8", "scenario": "server_low", "prompt_tokens": 100}])
    rows = validate(frame, GPUS, LLMS)  # row 0 has NaN gpu_* and prompt_tokens, row 1 has NaN gpu
    assert list(rows["gpu"]) == ["FIXTURE GPU X1", "custom GPU"]
    assert list(rows["prompt_tokens_mean"]) == [14.0, 100.0]


def test_every_known_field_is_accepted_somewhere():
    assert {"gpu", "llm", "scenario", "gpu_tdp_w", "llm_total_params_b", "request_rate_per_s", "n_gpus"} <= KNOWN_FIELDS


class FixtureModel:
    """FIXTURE estimator: power = 0.5 x TDP, ITL = 2 x roofline (enough to check the wiring and formulas)."""

    def __init__(self, target):
        self.target = target

    def predict(self, rows):
        return 0.5 * rows["gpu_tdp_w"] if self.target == "power" else 2 * rows["roofline_itl_s"]


def fixture_predictor(gpus=GPUS, llms=LLMS, **kw) -> Predictor:
    """The FIXTURE models behind a Predictor over these catalogs (default: this file's)."""
    return Predictor({"power": FixtureModel("power"), "itl": FixtureModel("itl")}, gpus, llms, offline_batch=256, **kw)


def fixture_rows(gpus, llms, *requests) -> pd.DataFrame:
    """Requests validated against these catalogs (the rows a Predictor features)."""
    return validate(list(requests), gpus, llms)


def fixture_featured(gpus, llms, *requests) -> pd.DataFrame:
    """Requests validated and engineered as the FIXTURE Predictor does (offline batch 256)."""
    return engineer(fixture_rows(gpus, llms, *requests), offline_batch=256)


def test_derived_outputs_follow_their_formulas():
    out = fixture_predictor().predict([
        {**BY_NAME, "n_gpus": 2},
        {**BY_NAME, "scenario": "server_high", "output_tokens": 100},
        {**BY_NAME, "scenario": None, "concurrency": 64},
    ])
    off, srv, batch = out.iloc[0], out.iloc[1], out.iloc[2]
    itl_off = 2 * (2 * 8 / 3350 / 256)  # FIXTURE ITL: 2 x roofline (weights / bandwidth / offline batch 256)
    assert off["power_w"] == 350.0 and off["itl_s"] == pytest.approx(itl_off)
    assert off["itl_ms"] == pytest.approx(itl_off * 1e3) and off["tokens_per_s"] == pytest.approx(1 / itl_off)
    # offline: all 1,000 requests fit (vLLM's cap on an 80 GB non-A100 is 1,024; the KV cache holds more)
    assert off["concurrency"] == 1000 and off["system_tokens_per_s"] == pytest.approx(1000 / itl_off)
    assert off["energy_per_token_j"] == pytest.approx(350.0 * 2 * itl_off / 1000)  # power x GPUs / throughput
    # server: requests in flight solved from the rate, so the throughput is the arrival rate x output tokens
    itl_srv = 2 * (2 * 8 / 3350)
    assert srv["concurrency"] == pytest.approx(0.33 * 100 * itl_srv, rel=1e-3)
    assert srv["system_tokens_per_s"] == pytest.approx(0.33 * 100, rel=1e-3)
    assert srv["energy_per_token_j"] == pytest.approx(350.0 / (0.33 * 100), rel=1e-3)
    assert batch["concurrency"] == 64 and batch["system_tokens_per_s"] == pytest.approx(64 / batch["itl_s"])
    assert list(out["scenario"]) == ["offline", "server_high", "concurrency"] and not out["overloaded"].any()


def test_idle_power_reaches_catalog_gpus_only():
    predictor = fixture_predictor(idle_power_w={"FIXTURE GPU X1": 70.0})
    rows = predictor.features(predictor.validate([BY_NAME, {**GPU_SPEC, "llm": "dense8", "scenario": "offline"}]))
    assert rows["idle_power_ratio"].iloc[0] == pytest.approx(0.1) and np.isnan(rows["idle_power_ratio"].iloc[1])


def test_model_folder_round_trip_keeps_catalogs_idle_power_and_offline_batch(tmp_path):
    dump_gpu_catalog(GPUS, tmp_path / "gpus.yaml")
    LLMS.to_frame().to_csv(tmp_path / "llms.csv", index=False)
    for target in ("power", "itl"):
        save_model_dir(tmp_path / target, FixtureModel(target), tmp_path / "gpus.yaml", tmp_path / "llms.csv",
                       {"target": target, "algorithm": "fixture", "offline_batch": 128.0}, {"FIXTURE GPU X1": 70.0})
    p = load_predictor(tmp_path / "power", tmp_path / "itl")
    assert p.offline_batch == 128.0 and p.idle_power_w == {"FIXTURE GPU X1": 70.0}
    assert p.versions == {"power": "fixture", "itl": "fixture"}
    assert p.predict([BY_NAME])["itl_s"].iloc[0] == pytest.approx(2 * (2 * 8 / 3350 / 128))


@pytest.mark.parametrize("request_, field", [
    ({**BY_NAME, "concurrency": 8}, "scenario"),  # a closed batch or a preset, not both
    ({**BY_NAME, "scenario": None, "concurrency": 8, "request_rate_per_s": 1.0}, "request_rate_per_s"),
    ({**BY_NAME, "scenario": "server_low", "request_rate_per_s": 1.0}, "request_rate_per_s"),  # presets set it
    ({**BY_NAME, "scenario": None}, "scenario"),  # no load at all
    ({**BY_NAME, "concurrency": 0, "scenario": None}, "concurrency"),
    ({**BY_NAME, "n_gpus": 4, "pipeline_parallel": 3}, "pipeline_parallel"),  # 3 does not divide 4
    ({**BY_NAME, "precision": "fp6"}, "precision"),
    ({**BY_NAME, "engine": "my-engine"}, "engine"),
    ({**BY_NAME, "engine_version": "latest"}, "engine_version"),
])
def test_bad_workload_names_its_field(request_, field):
    with pytest.raises(RequestError) as err:
        validate([request_], GPUS, LLMS)
    assert err.value.field == field and err.value.row == 0


def test_the_workload_vocabulary_reaches_the_rows():
    closed = one({**BY_NAME, "scenario": None, "concurrency": 64, "n_gpus": 4, "pipeline_parallel": 2,
                  "precision": "FP8", "engine": "TensorRT-LLM", "engine_version": "0.11"})
    assert (closed["scenario"], closed["concurrency"], closed["tensor_parallel"], closed["pipeline_parallel"]) == \
        ("fixed_concurrency", 64, 2, 2)
    assert (closed["precision"], closed["engine"], closed["engine_version"]) == ("fp8", "tensorrt-llm", "0.11")
    poisson = one({**BY_NAME, "scenario": None, "request_rate_per_s": 2.0})
    assert poisson["scenario"] == "server" and np.isnan(poisson["concurrency"])  # solved by the predictor
    assert (poisson["engine"], poisson["engine_version"], poisson["precision"]) == ("vllm", "0.14.1", "bf16")
    # offline: vLLM's cap on an 80 GB non-A100 (1,024) and the 1,000 requests submitted, the KV cache holds more
    assert one(BY_NAME)["concurrency"] == 1000


def test_a_batch_answers_its_good_rows_and_names_every_bad_one():
    requests = [BY_NAME, {**BY_NAME, "prompt_tokens": -5}, {**BY_NAME, "gpu": "RTX 9999"}, {**BY_NAME, "n_gpus": 2}]
    batch = fixture_predictor().validate_batch(requests)
    assert list(batch.accepted) == [0, 3] and batch.rejected == [1, 2] and batch.n == 4
    assert [(e.row, e.field) for e in batch.errors] == [(1, "prompt_tokens"), (2, "gpu")]
    out = fixture_predictor().predict(requests)
    assert len(out) == 4 and out["error"].isna().tolist() == [True, False, False, True]
    assert out["power_w"].notna().tolist() == [True, False, False, True]
    assert "field 'prompt_tokens'" in out.loc[1, "error"] and "unknown GPU 'RTX 9999'" in out.loc[2, "error"]
    with pytest.raises(RequestError) as err:  # all or nothing: every bad row named, the first as row / field
        validate(requests, GPUS, LLMS)
    assert (err.value.row, err.value.field) == (1, "prompt_tokens") and "row 2, field 'gpu'" in str(err.value)


def test_a_batch_with_no_good_row_raises_listing_every_row():
    from wattgpu.request import BatchRequestError

    with pytest.raises(BatchRequestError) as err:
        fixture_predictor().predict([{**BY_NAME, "level": 2}, {**BY_NAME, "scenario": "peak"}])
    assert [(e.row, e.field) for e in err.value.errors] == [(0, "level"), (1, "scenario")] and err.value.n_rows == 2


@pytest.mark.parametrize("request_, field", [
    ({**BY_NAME, "gpu": None, **GPU_SPEC, "gpu_release_year": 2023.7}, "gpu_release_year"),  # not a whole year
    ({"gpu": "x1", **LLM_CONFIG, "llm_active_params_b": 9.0, "scenario": "offline"}, "llm_active_params_b"),
    ({**BY_NAME, "output_tokens": float("nan")}, "output_tokens"),  # explicit NaN outside a frame: an error
    ({**BY_NAME, "n_gpus": 0}, "n_gpus"),
    ({**BY_NAME, "gpu": None, **GPU_SPEC, "gpu_name": "my\ncard"}, "gpu_name"),  # one printable line
    ({**BY_NAME, "gpu": "X" * 5_000_000}, "gpu"),  # far too long: named, and echoed only in part
])
def test_nonsense_is_rejected_naming_its_field(request_, field):
    with pytest.raises(RequestError) as err:
        validate([request_], GPUS, LLMS)
    assert err.value.field == field and len(str(err.value)) < 2000


def test_a_workload_is_checked_before_any_gpu_is_looked_at():
    from wattgpu.request import check_workload

    check_workload({"scenario": "server_high", "n_gpus": 2})
    for w, field in (({"scenario": "offline", "n_gpus": 0}, "n_gpus"), ({"scenario": "offline", "n_gpus": -1}, "n_gpus"),
                     ({"scenario": "offline", "output_tokens": float("nan")}, "output_tokens")):
        with pytest.raises(RequestError) as err:
            check_workload(w)
        assert err.value.field == field and err.value.row is None


def test_mlflow_inputs_and_instances_formats_are_requests():
    from wattgpu.serving.pyfunc import as_requests

    rows = [{"gpu": np.array("x1"), "llm": np.array("dense8"), "scenario": np.array("offline")}]  # `inputs` records
    columns = {"gpu": np.array(["x1", "x1"]), "llm": np.array(["dense8"] * 2), "scenario": np.array(["offline"] * 2)}
    assert list(validate(as_requests(rows), GPUS, LLMS)["gpu"]) == ["FIXTURE GPU X1"]
    assert list(validate(as_requests(columns), GPUS, LLMS)["gpu"]) == ["FIXTURE GPU X1"] * 2  # `instances`
    assert len(validate(as_requests({k: v[0] for k, v in columns.items()}), GPUS, LLMS)) == 1  # one request


def test_catalog_names_are_one_printable_line_and_json_keys_are_unique(tmp_path):
    from wattgpu.catalogs.llms import read_config_file
    from wattgpu.errors import CatalogError

    entry = dict(key="org/a\nb", total_params_b=8.0, active_params_b=8.0, num_layers=32, hidden_size=4096,
                 family="llama", is_moe=False, **_LLM)
    with pytest.raises(CatalogError, match="printable"):
        LlmSpec.from_mapping(entry, "org/a")
    path = tmp_path / "org--dup.json"
    path.write_text('{"model_type": "llama", "num_hidden_layers": 32, "num_hidden_layers": 4}')
    with pytest.raises(CatalogError, match="'num_hidden_layers' appears more than once"):
        read_config_file(path)
