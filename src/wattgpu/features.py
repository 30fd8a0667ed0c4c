"""Features as pure functions of (GPU spec, LLM config, workload).

`attach_specs` joins catalog fields onto measurement or request rows (prefixes `gpu_` and `llm_`);
`engineer` adds the derived quantities the paper's models and the baselines use. Every derived column
says its unit in its name, and its formula is written beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

BYTES_FP16 = 2
PAPER_KV_TOKENS = 512 + 128  # the paper's KV-cache size: one 512-token prompt + 128 generated tokens
PAPER_TOKENS_PER_REQUEST = 1000 + 256  # the paper's max-concurrency estimate: context + max generated
OFFLINE_RATE = 1000.0  # the paper's convention: offline = an arbitrarily large request rate (req/s)

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
    return (2 * df["llm_num_layers"] * kv_heads * head_dim * BYTES_FP16).fillna(0.0)


def engineer(df: pd.DataFrame, offline_batch: float = 256.0) -> pd.DataFrame:
    """Add every derived feature. Pure: a new frame, the input untouched."""
    out = df.copy()
    n_gpus = out["n_gpus"].astype(float) if "n_gpus" in out else 1.0
    params_total = out["llm_total_params_b"].astype(float)
    params_active = out["llm_active_params_b"].astype(float)
    offline = out["scenario"].eq("offline")

    out["boost_ratio"] = out["gpu_boost_clock_mhz"] / out["gpu_base_clock_mhz"]
    out["log_total_params_b"] = np.log(params_total)
    out["log_active_params_b"] = np.log(params_active)
    # Time to stream the FP16 weights once: 2 bytes x params / bandwidth (GB / (GB/s) = s).
    out["bandwidth_latency_s"] = BYTES_FP16 * params_active / out["gpu_memory_bandwidth_gb_s"]
    # Time to compute one token at peak dense FP16 tensor throughput: 2 FLOPs x params / FLOP/s.
    out["compute_latency_s"] = 2 * params_total * 1e9 / (out["gpu_fp16_tensor_tflops"] * 1e12)
    out["kv_bytes_per_token"] = kv_bytes_per_token(out)
    out["kv_cache_bytes"] = out["kv_bytes_per_token"] * PAPER_KV_TOKENS
    # Memory left after the FP16 weights (GB), and the paper's 90 % usable variant.
    mem = out["gpu_memory_gb"] * n_gpus
    out["free_memory_gb"] = mem - BYTES_FP16 * params_total
    out["available_memory_gb"] = 0.9 * mem - BYTES_FP16 * params_total
    # The paper's estimate of concurrent requests: MHA KV size (ignores GQA), 1,256 tokens per request.
    mb_per_token = 2 * out["llm_num_layers"] * out["llm_hidden_size"] * BYTES_FP16 / 1024**2
    out["max_concurrent_requests"] = out["available_memory_gb"] * 1024 / mb_per_token / PAPER_TOKENS_PER_REQUEST
    # GQA-aware KV capacity in tokens (0 where the weights do not fit).
    kv = out["kv_bytes_per_token"].replace(0, np.nan)
    out["kv_capacity_tokens"] = (out["available_memory_gb"].clip(lower=0) * 1e9 / kv).fillna(1e9)
    out["request_rate_feature"] = out["request_rate_per_s"].where(~offline, OFFLINE_RATE).astype(float)
    # Roofline ITL: weights streamed once per decode step, shared by `offline_batch` sequences offline.
    out["roofline_itl_s"] = BYTES_FP16 * params_total / out["gpu_memory_bandwidth_gb_s"] / np.where(offline, offline_batch, 1.0)
    if "gpu_idle_power_w" in out:
        out["idle_power_ratio"] = out["gpu_idle_power_w"] / out["gpu_tdp_w"]
    return out


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
