"""The decode step's physics (wattgpu.physics, columns built by features.engineer) on real config.json files
(data/catalogs/llm_configs), parsed the project's way (catalogs.hf_config via catalogs.llms), and real GPUs of the
catalog; each expectation computed by hand from the config's and the spec sheet's fields, written out here. Workloads
are FIXTURES (made-up loads), never measurements."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from wattgpu import features, paths, physics
from wattgpu.catalogs.gpus import load_gpu_catalog
from wattgpu.catalogs.llms import LlmCatalog, llm_spec_from_hf_config, read_config_file
from wattgpu.modeling import steptime

ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = ROOT / paths.LLM_CONFIG_DIR
GPUS = load_gpu_catalog(paths.resolve(paths.GPU_CATALOG, root=ROOT))
H100_SXM = "NVIDIA H100 80GB HBM3"  # spec sheet: 989.5 dense FP16 TFLOPS, 3352 GB/s, NVLink 900 GB/s (both ways)
MIXTRAL = "mistralai/Mixtral-8x7B-v0.1"
LLAMA_70B = "meta-llama/Meta-Llama-3.1-70B-Instruct"
LLAMA_1B = "meta-llama/Llama-3.2-1B-Instruct"


def spec(key: str):
    name, config = read_config_file(CONFIG_DIR / f"{key.replace('/', '--', 1)}.json")
    return llm_spec_from_hf_config(name, config)


LLMS = LlmCatalog([spec(MIXTRAL), spec(LLAMA_70B)])


def featured(llm: str, gpu: str = H100_SXM, *, n_gpus: int = 1, pp: int = 1, concurrency: float = 8.0,
             prompt: float = 1000.0, output: float = 200.0, engine_version: str = "0.11", **gpu_override) -> pd.Series:
    """features.engineer of one FIXTURE closed-batch row, specs joined from the catalogs (features.attach_specs)."""
    row = pd.DataFrame([{
        "gpu": gpu, "llm": llm, "scenario": "fixed_concurrency", "scenario_label": "concurrency",
        "request_rate_per_s": np.nan, "concurrency": concurrency, "n_gpus": n_gpus, "pipeline_parallel": pp,
        "tensor_parallel": n_gpus // pp, "prompt_tokens_mean": prompt, "output_tokens_mean": output,
        "precision": "bf16", "engine": "vllm", "engine_version": engine_version,
    }])
    row = features.attach_specs(row, GPUS, LLMS)
    for k, v in gpu_override.items():
        row[f"gpu_{k}"] = v
    return features.engineer(row, offline_batch=256).iloc[0]


# ------------------------------------------------------------------------ (a) compute counts the active parameters


def test_a_mixture_of_experts_computes_its_active_parameters_not_all_of_them():
    # Mixtral-8x7B config.json: hidden 4096, 32 layers, 32 heads of 128 (8 KV heads), 8 experts of intermediate
    # 14336, 2 per token, vocab 32000, untied embeddings. Per layer: attention q,o 4096x4096 + k,v 4096x1024; an
    # expert's MLP 3 x 4096 x 14336; the router 4096 x 8 (norms not counted, as the catalog's count does not).
    attention = 4096 * (4096 + 1024 + 1024 + 4096)
    expert = 3 * 4096 * 14336
    router = 4096 * 8
    embeddings = 2 * 32000 * 4096
    active = 32 * (attention + 2 * expert + router) + embeddings  # 12,879,659,008
    total = 32 * (attention + 8 * expert + router) + embeddings
    s = LLMS.get(MIXTRAL)
    assert s.active_params_b == pytest.approx(active / 1e9, rel=1e-6)
    assert s.total_params_b == pytest.approx(total / 1e9, rel=1e-6)
    f = featured(MIXTRAL)
    # one token's FLOPs at the H100 SXM's dense FP16 peak: 2 x active params / 989.5e12 FLOP/s
    assert f["compute_latency_s"] == pytest.approx(2 * active / 989.5e12, rel=1e-6)
    assert f["compute_latency_s"] < 0.3 * 2 * total / 989.5e12  # the old formula computed every expert
    assert f["log_compute_latency_s"] == pytest.approx(np.log(2 * active / 989.5e12), rel=1e-6)


# ------------------------------------------------------------------------------------- (b) attention's FLOPs count


def test_the_compute_term_counts_attention_over_the_context_and_splits_over_tensor_parallel_gpus():
    # Llama-3.1-70B config.json: 80 layers, 64 attention heads, hidden 8192 -> head dim 8192 / 64 = 128.
    layers, heads, head_dim = 80, 64, 128
    prompt, output = 8000.0, 1000.0
    active = LLMS.get(LLAMA_70B).active_params_b * 1e9  # dense: every parameter, every token
    linear = 2 * active
    attention_per_context_token = 2 * 2 * heads * head_dim * layers  # QK^T and attention x V, every layer
    decode = linear + attention_per_context_token * (prompt + output / 2)  # mean context: prompt + half the answer
    prefill = prompt * (linear + attention_per_context_token * prompt / 2)  # a prompt token sees P/2 before it
    flops = decode + prefill / output
    one = featured(LLAMA_70B, prompt=prompt, output=output)
    assert one["compute_step_per_sequence_s"] == pytest.approx(flops / 989.5e12, rel=1e-9)
    without_attention = linear * (1 + prompt / output) / 989.5e12  # the old term
    assert one["compute_step_per_sequence_s"] > 1.05 * without_attention
    two = featured(LLAMA_70B, n_gpus=2, prompt=prompt, output=output)
    assert two["compute_step_per_sequence_s"] == pytest.approx(flops / (2 * 989.5e12), rel=1e-9)


def test_an_attention_free_llm_has_no_attention_flops():
    rows = pd.DataFrame({"layers": [80.0], "heads": [0.0]})
    assert physics.attention_flops_per_token(rows["layers"], rows["heads"], 0.0, 1000.0).iloc[0] == 0.0
    assert physics.flops_per_generated_token(7.0, 32, 0, 0, 100.0, 50.0) == pytest.approx(2 * 7e9 * (1 + 100 / 50))


# ---------------------------------------------------------------------- (c) the per-layer cost: once per token


@pytest.mark.parametrize("pp", [1, 2, 4])
def test_the_fixed_step_cost_counts_each_layer_once_whatever_the_pipeline_stages(pp):
    # 80 layers of Llama-3.1-70B on 8 GPUs in pp stages: a token passes through all 80 once (each stage holds 80/pp),
    # so the launches are 80 x 1e-5 s whatever pp; each stage beyond the first adds its hand-off, a separate term
    f = featured(LLAMA_70B, n_gpus=8, pp=pp)
    assert physics.fixed_step_s(80) == pytest.approx(1e-5 * 80, rel=1e-12)
    assert physics.pipeline_stage_s(80, pp) == pytest.approx(1e-5 * 80 * (pp - 1), rel=1e-12, abs=0)
    assert f["fixed_step_s"] == pytest.approx(1e-5 * 80 + 1e-5 * 80 * (pp - 1), rel=1e-12)


# ------------------------------------------------------------------- (d) tensor parallelism's all-reduces count


def test_tensor_parallel_all_reduces_take_their_bytes_over_the_interconnect():
    # Llama-3.1-70B: 80 layers, hidden 8192; TP 8 on H100 SXM (NVLink 900 GB/s both ways = 450e9 bytes/s each way).
    # Per token: 2 all-reduces per layer of 8192 16-bit values; a ring moves 2 (t-1)/t of the message per GPU.
    sent = 80 * 2 * (2 * 7 / 8) * 8192 * 2  # bytes per GPU per generated token
    f = featured(LLAMA_70B, n_gpus=8, concurrency=16.0)
    assert f["comm_step_per_sequence_s"] == pytest.approx(sent / 450e9, rel=1e-12)
    assert GPUS.get(H100_SXM).interconnect_bandwidth_gb_s == 900.0
    assert f["log_comm_step_per_sequence_s"] == pytest.approx(np.log(sent / 450e9), rel=1e-12)
    b = 16.0
    per_sequence = f["kv_step_per_sequence_s"] + f["compute_step_per_sequence_s"] + f["comm_step_per_sequence_s"] \
        + 32e-6  # each running sequence's overhead, 32 us (physics.SEQUENCE_STEP_S)
    assert f["sequence_step_s"] == pytest.approx(32e-6, rel=1e-12)
    assert f["itl_physics_s"] == pytest.approx(f["weights_step_s"] + b * per_sequence + f["fixed_step_s"], rel=1e-12)
    assert featured(LLAMA_70B, n_gpus=1)["comm_step_per_sequence_s"] == 0.0  # one GPU all-reduces nothing
    assert featured(LLAMA_70B, n_gpus=8, pp=8)["comm_step_per_sequence_s"] == 0.0  # pipeline only: TP 1


def test_a_gpu_without_an_interconnect_figure_is_read_as_pcie_gen4_x16():
    # PCIe Gen4 x16: 64 GB/s both ways, 32e9 bytes/s each way; TP 2: 2 (2-1)/2 = 1 message per all-reduce.
    sent = 80 * 2 * 1 * 8192 * 2
    f = featured(LLAMA_70B, n_gpus=2, interconnect_bandwidth_gb_s=np.nan)
    assert physics.PCIE_GEN4_X16_GB_S == 64.0
    assert f["comm_step_per_sequence_s"] == pytest.approx(sent / 32e9, rel=1e-12)


def test_each_running_sequence_costs_its_overhead_whatever_the_context():
    # 32 us per running sequence per step, the same for Llama-3.1-70B on 8 GPUs at a 100-token and a 100,000-token
    # prompt and for a 1B model on one GPU (the engine's bookkeeping, not bytes); the step-time model fits it as a
    # term of its own, per sequence
    short, long_ = (featured(LLAMA_70B, n_gpus=8, concurrency=64.0, prompt=p) for p in (100, 100_000))
    small = featured(LLAMA_1B, concurrency=64.0, prompt=100)
    assert short["sequence_step_s"] == long_["sequence_step_s"] == small["sequence_step_s"] == pytest.approx(32e-6)
    assert long_["kv_step_per_sequence_s"] > 100 * short["kv_step_per_sequence_s"]
    assert dict(zip(steptime.TERMS, steptime.PER_SEQUENCE))["log_sequence_step_s"] is True
    at_1, at_64 = (featured(LLAMA_70B, n_gpus=8, concurrency=c, prompt=100) for c in (1.0, 64.0))
    grown = at_64["itl_physics_s"] - at_1["itl_physics_s"]
    assert grown == pytest.approx(at_64["weights_step_s"] - at_1["weights_step_s"] + 63 * (
        at_1["kv_step_per_sequence_s"] + at_1["compute_step_per_sequence_s"] + at_1["comm_step_per_sequence_s"]
        + 32e-6), rel=1e-9)


def test_the_comm_term_is_in_the_physics_not_a_fitted_term():
    # tensor parallelism's all-reduces count in the unfitted decode-step physics (itl_physics_s, above); the fitted
    # step-time model leaves them out (steptime.TERMS' comment says why), and no feature set feeds them to a model
    assert "log_comm_step_per_sequence_s" not in steptime.TERMS
    assert dict(zip(steptime.TERMS, steptime.PER_SEQUENCE))["log_kv_step_per_sequence_s"] is True
    for fs in (features.WORKLOAD_ITL, features.WORKLOAD_POWER):
        assert "log_comm_step_per_sequence_s" not in fs.numeric and "log_kv_step_per_sequence_s" in fs.numeric
    assert set(steptime.TERMS) <= set(features.WORKLOAD_ITL.columns)


def test_changing_the_requests_in_flight_equals_engineering_anew_with_every_term():
    rows = pd.concat([featured(llm, n_gpus=n, concurrency=1.0).to_frame().T
                      for llm, n in ((MIXTRAL, 2), (LLAMA_70B, 8), (LLAMA_70B, 1))], ignore_index=True)
    for c in (1.0, 7.0, 300.0):
        anew = pd.concat([featured(llm, n_gpus=n, concurrency=c).to_frame().T
                          for llm, n in ((MIXTRAL, 2), (LLAMA_70B, 8), (LLAMA_70B, 1))], ignore_index=True)
        moved = features.with_concurrency(rows, np.full(3, c))
        for col in features.CONCURRENCY_FEATURES:
            np.testing.assert_array_equal(moved[col].to_numpy(float), anew[col].to_numpy(float), err_msg=col)


def test_a_moe_step_reads_the_shared_weights_and_the_touched_experts():
    # Mixtral-8x7B (above): experts' weights X = 32 x 8 x expert; a step of b sequences touches 1 - (6/8)^b of them.
    s = LLMS.get(MIXTRAL)
    x = 32 * 8 * 3 * 4096 * 14336 / 1e9
    assert physics.moe_expert_params_b(s.total_params_b, s.active_params_b, 2, 8) == pytest.approx(x, rel=1e-6)
    for b in (1.0, 4.0):
        f = featured(MIXTRAL, concurrency=b)
        read = 2 * 1e9 * (s.total_params_b - x + x * (1 - (6 / 8) ** b))
        assert f["weights_step_s"] == pytest.approx(read / 3352e9, rel=1e-6)


# --------------------------------------------------------------------------------------------- the GPU catalog


def test_every_catalogued_gpu_gives_its_interconnect_with_the_source_it_rests_on():
    for g in GPUS:
        assert g.interconnect_bandwidth_gb_s is not None, g.key
        found = re.search(r"Interconnect: ([\d.]+) GB/s.*?Source: (\S+)", g.notes, flags=re.S)
        assert found, f"{g.key}: notes say no 'Interconnect: ... Source: <url>'"
        assert float(found.group(1)) == g.interconnect_bandwidth_gb_s, g.key
        assert found.group(2) in g.source_urls and found.group(2).startswith("https://"), g.key
    # a few headline figures (vendor spec sheets)
    assert GPUS.get("NVIDIA H100 80GB HBM3").interconnect_bandwidth_gb_s == 900.0  # NVLink 4
    assert GPUS.get("NVIDIA A100-SXM4-40GB").interconnect_bandwidth_gb_s == 600.0  # NVLink 3
    assert GPUS.get("NVIDIA B200").interconnect_bandwidth_gb_s == 1800.0  # NVLink 5
    assert GPUS.get("Tesla T4").interconnect_bandwidth_gb_s == 32.0  # PCIe Gen3 x16


def test_the_physical_constants_live_in_physics_only():
    src = ROOT / "src" / "wattgpu"
    for name in ("FIXED_STEP_S_PER_LAYER", "ALLREDUCES_PER_LAYER", "PCIE_GEN4_X16_GB_S"):
        defined = [p.relative_to(src).as_posix() for p in src.rglob("*.py")
                   if re.search(rf"^{name}\s*=", p.read_text(), flags=re.M)]
        assert defined == ["physics.py"], (name, defined)


# ------------------------------------------------ (g) a step decodes only the sequences the KV cache and engine admit
B200 = "NVIDIA B200"


def test_a_step_runs_only_the_sequences_whose_kv_cache_fits_at_their_mean_context():
    """Llama-3.1-70B (config.json: 80 layers x 2 (K, V) x 8 KV heads x 128 dims x 2 bytes = 327,680 bytes per token,
    70.55 B weights at 2 bytes) on 8 x B200 (180 GB each), 120,000-token prompts and 8,000-token answers: a running
    sequence holds 124,000 tokens on average, so (0.9 x 8 x 180 GB - 141.1 GB) / (124,000 x 327,680 B) = 28.4
    sequences decode at once. Asked at 500 streams, the step is the step of 28.4 (the others wait: time to first
    token, not ITL); below it, nothing changes."""
    by_hand = (0.9 * 8 * 180 - 70.552388 * 2) * 1e9 / (124_000 * 327_680)
    long = {"n_gpus": 8, "prompt": 120_000.0, "output": 8_000.0}
    many, few = featured(LLAMA_70B, B200, concurrency=500.0, **long), featured(LLAMA_70B, B200, concurrency=20.0, **long)
    assert many["running_sequences"] == pytest.approx(by_hand, rel=1e-6)
    assert few["running_sequences"] == 20.0
    at_fit = featured(LLAMA_70B, B200, concurrency=by_hand, **long)
    for col in ("itl_physics_s", "weights_step_s", "log_batch"):
        assert many[col] == pytest.approx(at_fit[col], rel=1e-12), col
    assert many["itl_physics_s"] > few["itl_physics_s"]


def test_vllms_v1_engine_admits_its_default_max_num_seqs():
    """Short requests on 8 x B200: the KV cache holds thousands, but vLLM's V1 engine (0.11 here) runs at most its
    default max_num_seqs, 1,024 on a GPU of at least 70 GiB (EngineArgs.get_batch_defaults); its V0 engine (0.6)
    keeps no such cap in the features (a lab may raise it: ML.ENERGY's 0.5.4 runs decode more than 256)."""
    short = {"n_gpus": 8, "prompt": 500.0, "output": 100.0}
    assert featured(LLAMA_70B, B200, concurrency=3000.0, **short)["running_sequences"] == 1024.0
    assert featured(LLAMA_70B, B200, concurrency=3000.0, engine_version="0.6.1", **short)["running_sequences"] == 3000.0


def test_throughput_counts_the_running_sequences_not_the_waiting_ones():
    """Little's law over the sequences decoding: 500 streams of which 28.4 run at 0.05 s per token give 568 tokens/s,
    not 10,000; a Poisson load below one request in flight keeps its own share (0.5 / 0.05 s = 10 tokens/s)."""
    from wattgpu.modeling.predictor import derived_outputs

    rows = pd.DataFrame({"concurrency": [500.0, 0.5], "running_sequences": [28.4, 1.0], "n_gpus": [8.0, 1.0]})
    out = derived_outputs(rows, np.array([700.0, 300.0]), np.array([0.05, 0.05]))
    np.testing.assert_allclose(out["system_tokens_per_s"], [568.0, 10.0])
    np.testing.assert_allclose(out["energy_per_token_j"], [700.0 * 8 / 568.0, 30.0])


# ---------------------------------------------- (h) no prediction or band outside what the GPU can physically do


def test_no_itl_is_faster_than_the_steps_bytes_and_no_power_above_tdp():
    """Llama-3.1-70B (70.55 B weights at 2 bytes; 327,680 KV bytes per token, see above) on 8 x B200 (8,000 GB/s,
    1,000 W each), 64 streams of 1,000-token prompts and 200-token answers: a step reads the weights once and 64
    caches of 1,100 tokens on average, split over the 8 GPUs, so no ITL is below (141.1 GB + 64 x 1,100 x 327,680 B)
    / (8 x 8,000 GB/s) = 2.57 ms; a GPU's mean power is at most its TDP. A model's answer outside is clipped to it,
    and so is either end of a band; answers inside pass unchanged."""
    from wattgpu.modeling import intervals
    from wattgpu.modeling.targets import TARGETS

    floor = (70.552388 * 2e9 + 64 * 1_100 * 327_680) / (8 * 8_000e9)
    row = featured(LLAMA_70B, B200, n_gpus=8, concurrency=64.0, prompt=1_000.0, output=200.0).to_frame().T
    itl, power = TARGETS["itl"], TARGETS["power"]
    assert itl.limits(row)[0][0] == pytest.approx(floor, rel=1e-6)
    np.testing.assert_allclose(itl.decode(row, np.log([floor / 3, floor * 3])), [floor, floor * 3], rtol=1e-9)
    np.testing.assert_allclose(power.decode(row, [1.4, 0.6]), [1_000.0, 600.0])
    lo, hi = intervals.band(np.array([floor * 1.2]), np.array([np.log(2.0)]), itl.limits(row))
    np.testing.assert_allclose([lo[0], hi[0]], [floor, floor * 2.4], rtol=1e-9)
    lo, hi = intervals.band(np.array([800.0]), np.array([np.log(1.5)]), power.limits(row))
    np.testing.assert_allclose([lo[0], hi[0]], [800.0 / 1.5, 1_000.0])
