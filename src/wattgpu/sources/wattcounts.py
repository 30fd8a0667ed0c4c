"""Adapter for the processed Watt Counts copy (`wattcounts/watt_counts_processed.csv`, one row per run)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from wattgpu.errors import RawDataError
from wattgpu.sources.rawio import read_csv_checked
from wattgpu.sources.schema import RAW_COLUMNS, conform
from wattgpu.workload import OFFLINE_REQUESTS, PRESETS

FILE = "watt_counts_processed.csv"
SOURCE = "wattcounts_processed"
NUMERIC = [
    "lambda_qps",
    "avg_prompt_tokens",
    "avg_generation_tokens",
    "num_requests",
    "gpu_power_draw_watts",
    "avg_e2e_latency_seconds",
    "energy_efficiency_tokens_per_joule",
    "throughput_tokens_per_second",
]
SCENARIO_LABELS = PRESETS  # the three workloads of the processed copy
# What every Watt Counts run shares, in either layout: one GPU, 16-bit weights, vLLM. The benchmark's repository
# (maufadel/sw-energy-benchmark, requirements_modern.txt) pins vllm==0.14.1 for the runs of this model list.
RUN_CONSTANTS = {
    "n_gpus": 1,
    "tensor_parallel": 1,
    "pipeline_parallel": 1,
    "precision": "16bit",
    "engine": "vllm",
    "engine_version": "0.14.1",
    "workload": "watt-counts prompts, output capped at 256 tokens",
}


def read_wattcounts_processed(raw_dir: Path) -> pd.DataFrame:
    """All rows of the processed copy in the raw tidy schema (nothing dropped here)."""
    path = Path(raw_dir) / FILE
    df = read_csv_checked(path, numeric=NUMERIC, text=["model", "gpu_type", "scenario"])
    unknown = ~df["scenario"].isin(SCENARIO_LABELS)
    if unknown.any():
        i = unknown.idxmax()
        raise RawDataError(path, int(df.at[i, "_line"]), "scenario", f"{df.at[i, 'scenario']!r} not in {SCENARIO_LABELS}")
    return to_tidy(df)


def to_tidy(df: pd.DataFrame) -> pd.DataFrame:
    """Map the processed columns onto the schema. Pure: frame in, frame out."""
    offline = df["scenario"] == "offline"
    # The first (unnamed) column is the original copy's running row number: it orders the replicates.
    order = pd.to_numeric(df.iloc[:, 0], errors="coerce") if df.columns[0] in ("", "Unnamed: 0") else df["_line"]
    config = df["gpu_type"] + "|" + df["model"] + "|" + df["scenario"]
    out = pd.DataFrame(
        {
            "source": SOURCE,
            "config_id": config,
            "replicate_id": order.groupby(config).rank(method="first").astype(int) - 1,
            "raw_gpu_name": df["gpu_type"],
            "raw_llm_name": df["model"],
            **RUN_CONSTANTS,
            "scenario": np.where(offline, "offline", "server"),
            "scenario_label": df["scenario"],
            "request_rate_per_s": df["lambda_qps"].where(~offline),
            # Offline: all 1,000 requests at once (the engine's cap and the KV cache decide how many run: derived
            # at ingest from the specs); server: mean requests in flight by Little's law, the realised arrival rate
            # (generated tokens per s / tokens per request) x mean e2e latency.
            "concurrency": (df["throughput_tokens_per_second"] / df["avg_generation_tokens"]
                            * df["avg_e2e_latency_seconds"]).where(~offline),
            "concurrency_setting": np.where(offline, float(OFFLINE_REQUESTS), np.nan),
            "concurrency_derivation": np.where(offline, "", "littles_law_rate_x_mean_e2e"),
            "prompt_tokens_mean": df["avg_prompt_tokens"],
            "output_tokens_mean": df["avg_generation_tokens"],
            "requests_served": df["num_requests"],
            # offline: avg_e2e_latency_seconds is the whole measurement duration (dataset README)
            "measurement_duration_s": df["avg_e2e_latency_seconds"].where(offline),
            "power_w_per_gpu": df["gpu_power_draw_watts"],
            "power_derivation": "nvml_gpu0_mean",
            # The paper's ITL: offline, duration / generated tokens = 1 / throughput (a system time per token);
            # server: mean e2e / mean generated tokens, which includes the time to first token.
            "itl_reported_s": np.where(
                offline,
                1.0 / df["throughput_tokens_per_second"],
                df["avg_e2e_latency_seconds"] / df["avg_generation_tokens"],
            ),
            # Per-request ITL: server, the same; offline, requests in flight / throughput (set at ingest).
            "itl_s": (df["avg_e2e_latency_seconds"] / df["avg_generation_tokens"]).where(~offline),
            "itl_derivation": np.where(offline, "offline_duration_per_token", "server_e2e_per_token_incl_ttft"),
            "itl_missing_reason": "",
            "throughput_tok_s": df["throughput_tokens_per_second"],
            "energy_per_token_j": 1.0 / df["energy_efficiency_tokens_per_joule"],
        }
    )
    return conform(out, RAW_COLUMNS)
