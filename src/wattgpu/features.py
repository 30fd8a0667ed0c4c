"""Features as pure functions of (GPU spec, LLM config, workload): every model input is built here.

`attach_specs` joins catalog fields onto measurement or request rows (prefixes `gpu_` and `llm_`);
`engineer` adds the derived quantities: the paper's, the baselines' and the physics-informed ones. Every
derived column says its unit in its name, and its formula is written beside it. Every feature is a function of
one row's GPU spec sheet, LLM config and workload (never of a measured target), so it cannot leak between folds.
The named feature sets (`FEATURE_SETS`) are what the candidate algorithms choose from.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from wattgpu import physics
from wattgpu.workload import MAX_OUTPUT_TOKENS, OFFLINE_RATE

PAPER_KV_TOKENS = 512 + 128  # the paper's KV-cache size: one 512-token prompt + 128 generated tokens
PAPER_TOKENS_PER_REQUEST = 1000 + MAX_OUTPUT_TOKENS  # the paper's concurrency estimate: 1,000 context tokens + the cap

GPU_FIELDS = (
    "tdp_w", "memory_gb", "memory_type", "memory_bus_bits", "memory_bandwidth_gb_s", "base_clock_mhz",
    "boost_clock_mhz", "sm_count", "fp16_tensor_tflops", "fp32_tflops", "transistors_m", "process_nm",
    "l2_cache_mb", "release_year", "architecture", "vendor", "form_factor",
)
LLM_FIELDS = (
    "total_params_b", "active_params_b", "num_layers", "hidden_size", "num_attention_heads", "num_kv_heads",
    "head_dim", "intermediate_size", "vocab_size", "family", "is_moe",
)


def attach_specs(rows: pd.DataFrame, gpus, llms, idle_power_w: dict[str, float] | None = None) -> pd.DataFrame:
    """Join GPU and LLM catalog fields onto rows holding `gpu` and `llm` catalog keys."""
    g = gpus.to_frame().set_index("key")
    l = llms.to_frame().set_index("key")
    gcols = [c for c in GPU_FIELDS if c in g.columns]
    lcols = [c for c in LLM_FIELDS if c in l.columns]
    out = rows.copy()
    for col in gcols:
        out[f"gpu_{col}"] = out["gpu"].map(g[col])
    for col in lcols:
        out[f"llm_{col}"] = out["llm"].map(l[col])
    if idle_power_w is not None:
        out["gpu_idle_power_w"] = out["gpu"].map(idle_power_w)
    return out


def kv_bytes_per_token(df: pd.DataFrame) -> pd.Series:
    """K and V for every layer: 2 x layers x kv_heads x head_dim x 2 bytes (GQA-aware; 0 if attention-free)."""
    heads = df["llm_num_attention_heads"].astype(float)
    head_dim = df["llm_head_dim"].astype(float).fillna(df["llm_hidden_size"] / heads)
    kv_heads = df["llm_num_kv_heads"].astype(float).fillna(heads)
    return physics.kv_bytes_per_token(df["llm_num_layers"], kv_heads, head_dim).fillna(0.0)


def engineer(df: pd.DataFrame, offline_batch: float) -> pd.DataFrame:
    """Add every derived feature (`offline_batch`: sequences decoded together offline, params.yaml
    `evaluate.roofline_offline_batch`). Pure: a new frame, the input untouched."""
    out = df.copy()
    n_gpus = out["n_gpus"].astype(float) if "n_gpus" in out else 1.0
    params_total = out["llm_total_params_b"].astype(float)
    params_active = out["llm_active_params_b"].astype(float)
    offline = out["scenario"].eq("offline")

    out["boost_ratio"] = out["gpu_boost_clock_mhz"] / out["gpu_base_clock_mhz"]
    out["log_total_params_b"] = np.log(params_total)
    out["log_active_params_b"] = np.log(params_active)
    # Time to stream the FP16 weights once: 2 bytes x params / bandwidth (GB / (GB/s) = s).
    out["bandwidth_latency_s"] = physics.weight_stream_s(params_active, out["gpu_memory_bandwidth_gb_s"])
    # Time to compute one token at peak dense FP16 tensor throughput: 2 FLOPs x params / FLOP/s.
    out["compute_latency_s"] = physics.compute_s(params_total, out["gpu_fp16_tensor_tflops"])
    out["kv_bytes_per_token"] = kv_bytes_per_token(out)
    out["kv_cache_bytes"] = out["kv_bytes_per_token"] * PAPER_KV_TOKENS
    # Memory left after the FP16 weights (GB), and the paper's 90 % usable variant.
    mem = out["gpu_memory_gb"] * n_gpus
    out["free_memory_gb"] = mem - physics.weights_gb(params_total)
    out["available_memory_gb"] = 0.9 * mem - physics.weights_gb(params_total)
    # The paper's estimate of concurrent requests: MHA KV size (ignores GQA), 1,256 tokens per request.
    mb_per_token = physics.kv_bytes_per_token(out["llm_num_layers"], 1, out["llm_hidden_size"]) / 1024**2  # MHA
    out["max_concurrent_requests"] = out["available_memory_gb"] * 1024 / mb_per_token / PAPER_TOKENS_PER_REQUEST
    # GQA-aware KV capacity in tokens (0 where the weights do not fit).
    kv = out["kv_bytes_per_token"].replace(0, np.nan)
    out["kv_capacity_tokens"] = (out["available_memory_gb"].clip(lower=0) * 1e9 / kv).fillna(1e9)
    out["request_rate_feature"] = out["request_rate_per_s"].where(~offline, OFFLINE_RATE).astype(float)
    # Roofline ITL: weights streamed once per decode step, shared by `offline_batch` sequences offline.
    out["roofline_itl_s"] = physics.roofline_itl_s(params_total, out["gpu_memory_bandwidth_gb_s"],
                                                   np.where(offline, offline_batch, 1.0))
    if "gpu_idle_power_w" in out:
        out["idle_power_ratio"] = out["gpu_idle_power_w"] / out["gpu_tdp_w"]
    return _physics_features(out, offline_batch)


def _physics_features(out: pd.DataFrame, offline_batch: float) -> pd.DataFrame:
    """The physics-informed features (in place on `out`, a copy made by `engineer`).

    Trees cannot extrapolate to a GPU faster than any seen one; a target normalised by a physical estimate can
    (modeling.targets.PhysicsTarget), and these features describe how far a row sits from that estimate.
    """
    offline = out["scenario"].eq("offline").to_numpy()
    tokens_out = out["output_tokens_mean"].astype(float)
    tokens_seq = out["prompt_tokens_mean"].astype(float) + tokens_out
    bw_s, compute_s = out["bandwidth_latency_s"].astype(float), out["compute_latency_s"].astype(float)
    n_gpus = out["n_gpus"].astype(float) if "n_gpus" in out else 1.0

    out["log_bandwidth_latency_s"] = np.log(bw_s)
    out["log_compute_latency_s"] = np.log(compute_s)
    # < 1: a batch-1 decode step is memory-bound (weights streamed faster than computed is impossible).
    out["log_compute_bandwidth_ratio"] = np.log(compute_s / bw_s)
    # Offered load in GPU-seconds of weight streaming per second: rate x tokens/request x s/token at batch 1.
    # Offline uses the paper's "arbitrarily large" rate, so it saturates.
    rate = out["request_rate_per_s"].astype(float).where(~offline, OFFLINE_RATE)
    demand = rate * tokens_out * bw_s
    out["log_demand"] = np.log(demand)
    # Fraction of time the GPU is busy decoding (server); 1 offline.
    out["duty_cycle"] = np.minimum(1.0, demand)
    # Sequences decoded together offline: vLLM's batch cap, or fewer when the KV cache (GQA-aware, after the
    # FP16 weights, 90 % of memory) cannot hold them all; one sequence at a time in server mode.
    kv_batch = (out["kv_capacity_tokens"].astype(float) / tokens_seq).clip(lower=1.0, upper=offline_batch)
    out["effective_batch"] = np.where(offline, kv_batch, 1.0)
    # Refined roofline ITL: per token, the weights streamed once per step and shared by the batch, or the
    # FLOPs of one token at peak tensor throughput, whichever is slower.
    out["physics_itl_s"] = np.maximum(bw_s / out["effective_batch"], compute_s)
    out["log_physics_itl_s"] = np.log(out["physics_itl_s"])
    # Per-layer kernel launches dominate the ITL of small models; per token they are shared by the batch.
    out["log_num_layers"] = np.log(out["llm_num_layers"].astype(float))
    out["log_layers_per_sequence"] = out["log_num_layers"] - np.log(out["effective_batch"])
    out["log_kv_capacity_tokens"] = np.log(out["kv_capacity_tokens"].astype(float).clip(lower=1.0))
    out["log_hidden_size"] = np.log(out["llm_hidden_size"].astype(float))
    out["log_output_tokens"] = np.log(tokens_out.clip(lower=1.0))
    out["log_request_rate_per_s"] = np.log(rate)
    out["is_offline"] = offline.astype(float)
    # GPU spec sheet on log scales, and per TDP watt (efficiency sets how close to TDP a workload runs).
    out["log_tdp_w"] = np.log(out["gpu_tdp_w"].astype(float))
    out["log_memory_gb"] = np.log(out["gpu_memory_gb"].astype(float))
    out["log_memory_bandwidth_gb_s"] = np.log(out["gpu_memory_bandwidth_gb_s"].astype(float))
    out["log_fp16_tensor_tflops"] = np.log(out["gpu_fp16_tensor_tflops"].astype(float))
    out["bandwidth_per_tdp_gb_s_w"] = out["gpu_memory_bandwidth_gb_s"] / out["gpu_tdp_w"]
    out["tflops_per_tdp_w"] = out["gpu_fp16_tensor_tflops"] / out["gpu_tdp_w"]
    out["is_gddr"] = out["gpu_memory_type"].astype(str).str.upper().str.startswith("GDDR").astype(float)
    # Share of GPU memory the FP16 weights take (2 bytes x params / memory).
    out["weights_memory_fraction"] = physics.weights_gb(out["llm_total_params_b"]) / (out["gpu_memory_gb"] * n_gpus)
    return out


def load_scaled_tdp_w(rows: pd.DataFrame, rho: dict[str, float]) -> np.ndarray:
    """The load-scaled TDP estimate of each row: its scenario's share `rho` (params.yaml `evaluate.load_rho`)
    of the GPU's power limit."""
    unknown = set(rows["scenario_label"]) - set(rho)
    if unknown:
        raise ValueError(f"load_rho has no value for scenario(s) {sorted(unknown)}; it has {sorted(rho)}")
    return physics.load_scaled_tdp_w(rows["gpu_tdp_w"].to_numpy(dtype=float),
                                     rows["scenario_label"].map(rho).to_numpy(dtype=float))


@dataclass(frozen=True)
class FeatureSet:
    """A named list of model inputs; `categorical` ones are ordinal-encoded, the rest numeric."""

    name: str
    numeric: tuple[str, ...]
    categorical: tuple[str, ...] = ()

    @property
    def columns(self) -> list[str]:
        return [*self.numeric, *self.categorical]


# The paper's two feature sets (WattGPU notebook, §4.1 / §4.2), in our column names.
PAPER_POWER = FeatureSet(
    "paper_power",
    numeric=(
        "log_total_params_b", "llm_num_kv_heads", "llm_num_layers", "gpu_memory_bandwidth_gb_s",
        "boost_ratio", "idle_power_ratio", "gpu_base_clock_mhz", "gpu_release_year", "bandwidth_latency_s",
    ),
    categorical=("scenario_label", "llm_family"),
)
PAPER_ITL = FeatureSet(
    "paper_itl",
    numeric=(
        "llm_total_params_b", "llm_hidden_size", "llm_num_attention_heads", "llm_num_kv_heads", "llm_num_layers",
        "gpu_memory_bandwidth_gb_s", "gpu_memory_gb", "gpu_fp16_tensor_tflops", "gpu_release_year",
        "bandwidth_latency_s", "compute_latency_s",
    ),
    categorical=("scenario_label", "llm_family", "gpu_memory_type"),
)

PHYSICS = FeatureSet(
    "physics",
    numeric=(
        "log_bandwidth_latency_s", "log_compute_latency_s", "log_compute_bandwidth_ratio", "log_demand",
        "duty_cycle", "effective_batch", "log_physics_itl_s", "log_num_layers", "log_layers_per_sequence",
        "log_kv_capacity_tokens", "log_hidden_size", "log_total_params_b", "log_output_tokens",
        "log_request_rate_per_s", "is_offline", "log_tdp_w", "log_memory_gb", "log_memory_bandwidth_gb_s",
        "log_fp16_tensor_tflops", "bandwidth_per_tdp_gb_s_w", "tflops_per_tdp_w", "is_gddr",
        "weights_memory_fraction", "gpu_release_year", "boost_ratio",
    ),
)
# The roofline quantities and the workload without raw spec-sheet columns (TDP, memory size, year, per-watt
# ratios): trees on these cannot tell GPUs apart by identity, only by how fast they stream and compute.
PHYSICS_CORE = FeatureSet(
    "physics_core",
    numeric=(
        "log_physics_itl_s", "effective_batch", "log_compute_bandwidth_ratio", "log_num_layers",
        "log_layers_per_sequence", "log_hidden_size", "log_total_params_b", "log_output_tokens",
        "log_request_rate_per_s", "is_offline", "log_kv_capacity_tokens", "weights_memory_fraction",
        "log_bandwidth_latency_s", "log_compute_latency_s", "is_gddr", "duty_cycle", "log_demand",
    ),
)
# The paper's power set without `idle_power_ratio`: idle power is measured, not on spec sheets.
PAPER_POWER_SPEC = FeatureSet(
    "paper_power_spec",
    numeric=tuple(c for c in PAPER_POWER.numeric if c != "idle_power_ratio"),
    categorical=PAPER_POWER.categorical,
)
# feature set name (params.yaml `search.algorithms.*.feature_sets`) -> target -> FeatureSet
FEATURE_SETS: dict[str, dict[str, FeatureSet]] = {
    "paper": {"power": PAPER_POWER_SPEC, "itl": PAPER_ITL},
    "physics": {"power": PHYSICS, "itl": PHYSICS},
    "physics_core": {"power": PHYSICS_CORE, "itl": PHYSICS_CORE},
}
