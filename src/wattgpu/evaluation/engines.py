"""How much the engine (and the lab that ran it) moves power and speed, measured where sources overlap.

Two views, on measured rows only:
- `on_gpu`: on one GPU that several sources ran (the A100-SXM4-40GB is in all four), per source, engine and
  version, within bins of requests in flight: median power as a share of TDP, median per-request ITL as a multiple
  of the time to stream the weights once (the physical floor, so LLMs of different sizes compare), and median
  generated tokens per s per GPU per billion active parameters.
- `paired`: LLM-Inference-Bench ran the same GPU, LLM, lengths and batch on several engines: the median ratio of
  each engine's ITL (and power, where measured) to vLLM's on identical configurations.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from wattgpu import physics

CONCURRENCY_BINS = (0, 1.5, 8, 48, 160, np.inf)  # ~1, 2-8, 9-48, 49-160, more requests in flight
BIN_LABELS = ("1", "2-8", "9-48", "49-160", ">160")


def _with_specs(table: pd.DataFrame, gpus, llms) -> pd.DataFrame:
    out = table.copy()
    out["tdp_w"] = out["gpu"].map(lambda k: gpus.get(k).tdp_w)
    bandwidth = out["gpu"].map(lambda k: gpus.get(k).memory_bandwidth_gb_s) * out["tensor_parallel"]
    active = out["llm"].map(lambda k: llms.get(k).active_params_b)
    out["itl_over_floor"] = out["itl_s"] / physics.weight_stream_s(active, bandwidth)
    out["power_share_of_tdp"] = out["power_w_per_gpu"] / out["tdp_w"]
    out["tokens_per_s_per_gpu_per_b"] = out["throughput_tok_s"] / out["n_gpus"] * active
    out["concurrency_bin"] = pd.cut(out["concurrency"], CONCURRENCY_BINS, labels=BIN_LABELS)
    return out


def on_gpu(table: pd.DataFrame, gpus, llms, gpu: str = "NVIDIA A100-SXM4-40GB") -> pd.DataFrame:
    """Medians per (source, engine, version, concurrency bin) on one GPU (measured rows)."""
    rows = _with_specs(table[table["gpu"] == gpu], gpus, llms)
    keys = ["source", "engine", "engine_version", "concurrency_bin"]
    out = rows.groupby(keys, observed=True).agg(
        rows=("itl_s", "size"), power_share_of_tdp=("power_share_of_tdp", "median"),
        itl_over_floor=("itl_over_floor", "median"), tokens_per_s_per_gpu_per_b=("tokens_per_s_per_gpu_per_b", "median"))
    return out.reset_index().assign(gpu=gpu)


def paired(table: pd.DataFrame, reference: str = "vllm") -> pd.DataFrame:
    """Per engine, the median ratio of its ITL and power to `reference`'s on identical configurations (same source,
    GPU, GPUs, LLM, lengths and batch), and how many configurations that rests on."""
    keys = ["source", "gpu", "n_gpus", "llm", "prompt_tokens_mean", "output_tokens_mean", "concurrency_setting"]
    ref = table[table["engine"] == reference].groupby(keys)[["itl_s", "power_w_per_gpu"]].median()
    out = []
    for engine, rows in table[table["engine"] != reference].groupby("engine"):
        mine = rows.groupby(keys)[["itl_s", "power_w_per_gpu"]].median()
        both = mine.join(ref, rsuffix="_ref", how="inner")
        if both.empty:
            continue
        itl = (both["itl_s"] / both["itl_s_ref"]).dropna()
        power = (both["power_w_per_gpu"] / both["power_w_per_gpu_ref"]).dropna()
        out.append({"engine": engine, "reference": reference, "configurations": len(itl),
                    "itl_ratio_median": float(itl.median()) if len(itl) else np.nan,
                    "power_configurations": len(power),
                    "power_ratio_median": float(power.median()) if len(power) else np.nan})
    return pd.DataFrame(out, columns=["engine", "reference", "configurations", "itl_ratio_median",
                                      "power_configurations", "power_ratio_median"])
