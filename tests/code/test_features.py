"""Feature formulas on one hand-written FIXTURE row (a Llama-3.1-8B-like LLM on an H100-like GPU)."""

import numpy as np
import pandas as pd
import pytest

from wattgpu.evaluation import baselines
from wattgpu.features import engineer, kv_bytes_per_token


def fixture_rows(scenario_label="offline"):
    return pd.DataFrame([{
        "scenario": "offline" if scenario_label == "offline" else "server", "scenario_label": scenario_label,
        "request_rate_per_s": np.nan if scenario_label == "offline" else 0.33, "n_gpus": 1,
        "gpu_tdp_w": 700.0, "gpu_memory_gb": 80.0, "gpu_memory_bandwidth_gb_s": 3350.0, "gpu_base_clock_mhz": 1590.0,
        "gpu_boost_clock_mhz": 1980.0, "gpu_fp16_tensor_tflops": 989.0,
        "llm_total_params_b": 8.0, "llm_active_params_b": 8.0, "llm_num_layers": 32, "llm_hidden_size": 4096,
        "llm_num_attention_heads": 32, "llm_num_kv_heads": 8, "llm_head_dim": np.nan,
        "prompt_tokens_mean": 14.0, "output_tokens_mean": 220.0, "gpu_memory_type": "HBM3",
    }])


def test_paper_formulas():
    f = engineer(fixture_rows(), offline_batch=256).iloc[0]
    assert f["boost_ratio"] == pytest.approx(1980 / 1590)
    assert f["bandwidth_latency_s"] == pytest.approx(2 * 8 / 3350)
    assert f["compute_latency_s"] == pytest.approx(2 * 8e9 / 989e12)
    assert f["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2
    assert f["kv_cache_bytes"] == 2 * 32 * 8 * 128 * 2 * 640
    assert f["free_memory_gb"] == pytest.approx(80 - 16)
    assert f["available_memory_gb"] == pytest.approx(72 - 16)
    assert f["max_concurrent_requests"] == pytest.approx(56 * 1024 / (2 * 32 * 4096 * 2 / 1024**2) / 1256)
    assert f["request_rate_feature"] == 1000.0


def test_roofline_divides_by_batch_offline_only():
    off = engineer(fixture_rows("offline"), offline_batch=256).iloc[0]
    srv = engineer(fixture_rows("server_high"), offline_batch=256).iloc[0]
    assert off["roofline_itl_s"] == pytest.approx(2 * 8 / 3350 / 256)
    assert srv["roofline_itl_s"] == pytest.approx(2 * 8 / 3350)
    assert baselines.roofline_itl(engineer(fixture_rows("server_high"), offline_batch=256))[0] == pytest.approx(2 * 8 / 3350)


def test_attention_free_llm_has_no_kv_cache():
    rows = fixture_rows()
    rows["llm_num_attention_heads"] = np.nan
    rows["llm_num_kv_heads"] = np.nan
    assert kv_bytes_per_token(rows).iloc[0] == 0.0


def test_load_scaled_tdp_and_unknown_scenario():
    rows = pd.concat([fixture_rows("offline"), fixture_rows("server_low")], ignore_index=True)
    rho = {"offline": 0.9, "server_low": 0.2}
    assert baselines.load_scaled_tdp(rows, rho).tolist() == pytest.approx([630.0, 140.0])
    with pytest.raises(ValueError, match="server_low"):
        baselines.load_scaled_tdp(rows, {"offline": 0.9})


def test_the_accelerator_family_not_the_vendor_is_a_model_input():
    """Intel's GPUs (oneAPI) and its Gaudi accelerators (SynapseAI) share a vendor and no kernel: LLM-Inference-Bench
    measured a Max 1550 at about 20 x its decode-step physics and a Gaudi 2 at about 1.7 x. The catalog's real entries
    get one family flag each (none for NVIDIA, the reference), read from the vendor and the architecture."""
    from wattgpu.catalogs.gpus import load_gpu_catalog
    from wattgpu.features import FAMILY_FEATURES

    gpus = list(load_gpu_catalog())
    rows = pd.concat([fixture_rows()] * len(gpus), ignore_index=True).assign(concurrency=1.0)
    rows["gpu_vendor"] = [g.vendor for g in gpus]
    rows["gpu_architecture"] = [g.architecture for g in gpus]
    flags = engineer(rows, offline_batch=256).set_index(pd.Index([g.key for g in gpus]))[list(FAMILY_FEATURES)]
    assert flags.loc["Intel Gaudi 2"].to_dict() == {"gpu_is_amd": 0.0, "gpu_is_intel": 0.0, "gpu_is_gaudi": 1.0}
    assert flags.loc["Intel Gaudi 3", "gpu_is_gaudi"] == 1.0
    assert flags.loc["Intel Data Center GPU Max 1550"].to_dict() == {
        "gpu_is_amd": 0.0, "gpu_is_intel": 1.0, "gpu_is_gaudi": 0.0}
    assert flags.loc["AMD Instinct MI300X"].to_dict() == {"gpu_is_amd": 1.0, "gpu_is_intel": 0.0, "gpu_is_gaudi": 0.0}
    assert flags.loc["NVIDIA H100 NVL"].sum() == 0.0
    vendors = pd.Series([g.vendor for g in gpus], index=flags.index)
    assert (flags.sum(axis=1) == (vendors != "NVIDIA").astype(float)).all()  # each non-NVIDIA entry: one family
