"""The one tidy measurement schema every source adapter produces, and the checks that quarantine rows.

Adapters return a *raw tidy* frame: every column of `RAW_COLUMNS`, GPU and LLM still named the way the
source names them (`raw_gpu_name`, `raw_llm_name`). `finalize` resolves those names against the catalogs,
applies the row checks and splits the rows into the measurement table and the quarantine, so nothing is
dropped silently: every rejected row keeps its values and gains a `reason`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from wattgpu import physics, workload
from wattgpu.errors import UnknownNameError

# How an ITL value was derived; written beside every ITL so definitions are never mixed silently.
ITL_DERIVATIONS = {
    "offline_duration_per_token": "offline: measurement duration / generated tokens (= 1 / throughput)",
    "server_exact": "server: mean over requests of (e2e - TTFT) / (tokens - 1)",
    "server_e2e_per_token_incl_ttft": "server: mean e2e latency / mean generated tokens (includes TTFT)",
    "per_request_tpot": "mean per-request time per output token (TPOT) reported by the benchmark",
    "offline_concurrency_per_throughput": "offline: requests in flight / generated tokens per s (Little's law)",
    "mean_batch_per_throughput": "steady state: mean running batch / generated tokens per s (Little's law)",
    "batch_latency_per_token_incl_prefill": "end-to-end batch latency / output tokens (includes prefill)",
    "request_latency_per_token_incl_prefill": "mean request latency / mean response tokens (includes prefill)",
}
# How the `concurrency` column (requests the engine runs at once) was obtained; the source's own figure stays in
# `concurrency_setting` (the cap or batch it states) or `request_rate_per_s` (the Poisson rate it states).
CONCURRENCY_DERIVATIONS = {
    "littles_law_rate_x_mean_e2e": "derived: mean requests in flight = realised arrival rate x mean e2e latency",
    "vllm_default_max_num_seqs_capped": "derived: min(vLLM's default max_num_seqs, requests submitted, KV-cache fit)",
    "measured_mean_batch": "measured: the engine's mean running batch in steady state",
    "static_batch": "the static batch size the benchmark ran",
    "static_batch_capped_by_kv_cache": "derived: the static batch capped by the sequences whose KV cache fits",
    "one_sequence": "one sequence at a time (llama.cpp's `batch` is a prompt-chunk size)",
}
# Derivations from a measured latency or batch: a user cannot know them before deploying, so they train models but
# never reach a test row as an input (modeling.predictor.as_served asks those rows as a user would).
MEASURED_CONCURRENCY = ("littles_law_rate_x_mean_e2e", "measured_mean_batch")
POWER_DERIVATIONS = {
    "nvml_gpu0_mean": "mean of NVML power samples of GPU 0 during the measurement window",
    "energy_per_req_x_tput_div_tokens_div_gpus": "Energy/req x token throughput / output tokens / (TP x PP)",
    "energy_div_latency": "mean energy per response / mean latency per response (ratio of means)",
    "nvml_mean_mw_div_1000_div_gpus": "avg_power in mW / 1000 / number of GPUs",
}

# column -> dtype kind ("str", "int", "float", "bool"); units live in the names.
RAW_COLUMNS: dict[str, str] = {
    "source": "str",
    "config_id": "str",
    "replicate_id": "int",
    "raw_gpu_name": "str",
    "raw_llm_name": "str",
    "n_gpus": "int",
    "tensor_parallel": "int",
    "pipeline_parallel": "int",
    "precision": "str",
    "engine": "str",
    "engine_version": "str",
    "workload": "str",
    "scenario": "str",
    "scenario_label": "str",
    "request_rate_per_s": "float",
    "concurrency": "float",
    "concurrency_setting": "float",
    "concurrency_derivation": "str",
    "prompt_tokens_mean": "float",
    "output_tokens_mean": "float",
    "requests_served": "float",
    "measurement_duration_s": "float",
    "power_w_per_gpu": "float",
    "power_derivation": "str",
    "itl_s": "float",
    "itl_reported_s": "float",
    "itl_derivation": "str",
    "itl_missing_reason": "str",
    "throughput_tok_s": "float",
    "energy_per_token_j": "float",
}
TABLE_COLUMNS: dict[str, str] = {
    **{k: v for k, v in RAW_COLUMNS.items() if k not in ("raw_gpu_name", "raw_llm_name")},
    "gpu": "str",
    "llm": "str",
    "lab": "str",
    "is_moe": "bool",
    "raw_gpu_name": "str",
    "raw_llm_name": "str",
}
KEY = ("source", "config_id", "replicate_id")
QUANTISED = ("mxfp4", "fp8", "int8", "int4")  # weight precisions below 16 bits
# The lab behind each source (leave-one-source-out holds out a lab: ML.ENERGY's v2 and legacy tables together).
LABS = {"wattcounts_processed": "wattcounts", "wattcounts_original": "wattcounts", "mlenergy_v2": "mlenergy",
        "mlenergy_legacy": "mlenergy", "llm_inference_bench": "llm_inference_bench"}
# The workload a row ran, in the vocabulary every source shares (the data report gives their ranges).
WORKLOAD_FIELDS = ("concurrency", "prompt_tokens_mean", "output_tokens_mean", "n_gpus", "tensor_parallel",
                   "pipeline_parallel", "request_rate_per_s")
QUARANTINE_REASONS = (
    "unknown_gpu",
    "unknown_llm",
    "zero_tokens",
    "nonpositive_power",
    "implausible_power",
    "duplicate_key",
    "missing_targets",
)


@dataclass(frozen=True)
class Checks:
    """Row-check thresholds (params.yaml `ingest`)."""

    max_power_tdp_ratio: float = 1.3  # mean power above 1.3 x TDP cannot be a sustained reading
    min_power_tdp_ratio: float = 0.02  # below 2 % of TDP the GPU was not even idling
    min_tokens_for_itl: float = 2.0  # with ~1 token per request, "ITL" is really a time to first token
    min_itl_roofline_ratio: float = 0.5  # a per-sequence ITL below half the time to stream the weights once


def empty_raw() -> pd.DataFrame:
    """A raw tidy frame with no rows and every column."""
    return conform(pd.DataFrame(columns=list(RAW_COLUMNS)), RAW_COLUMNS)


def conform(frame: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    """Select and order `columns`, casting each to its kind; raise naming a missing column."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"missing column(s) {missing}; the schema needs {list(columns)}")
    out = frame.loc[:, list(columns)].copy()
    for col, kind in columns.items():
        if kind == "str":
            out[col] = out[col].astype("string").fillna("").astype(str)
        elif kind == "int":
            out[col] = pd.to_numeric(out[col]).astype("int64")
        elif kind == "float":
            out[col] = pd.to_numeric(out[col]).astype("float64")
        elif kind == "bool":
            out[col] = out[col].astype(bool)
    return out.reset_index(drop=True)


def mark_undefined_itl(frame: pd.DataFrame, min_tokens: float) -> pd.DataFrame:
    """Blank the ITL of rows that generate too few tokens for one, keeping the reason (the row stays)."""
    out = frame.copy()
    few = out["output_tokens_mean"] < min_tokens
    out.loc[few, ["itl_s", "itl_reported_s"]] = np.nan
    out.loc[few, "itl_missing_reason"] = (
        f"fewer than {min_tokens:g} generated tokens per request: the latency is a time to first token"
    )
    return out


def mark_implausible_itl(frame: pd.DataFrame, weight_stream_s: pd.Series, min_ratio: float) -> pd.DataFrame:
    """Blank per-request ITLs far below the physical floor (each decode step streams every weight once). The source's
    own figure goes too, except offline, where it is a system time per token (duration / all tokens) that the floor
    does not bound and the per-request ITL was derived."""
    out = frame.copy()
    low = out["itl_s"] < min_ratio * weight_stream_s
    out.loc[low, "itl_s"] = np.nan
    out.loc[low & (out["scenario"] != "offline"), "itl_reported_s"] = np.nan
    out.loc[low, "itl_missing_reason"] = (
        f"implausible: below {min_ratio:g} x the time to stream the FP16 weights once (2 x params / bandwidth)"
    )
    return out


def derive_concurrency(frame: pd.DataFrame, gpus, llms) -> pd.DataFrame:
    """Requests in flight where the source does not state them, from the GPU and LLM specs, and the per-request ITL
    that follows by Little's law (ITL = requests in flight / generated tokens per second):

    - offline runs (all requests submitted at once): min(vLLM's default max_num_seqs, requests submitted, the
      sequences whose KV cache fits beside the weights in vLLM's share of the memory);
    - static batches larger than the KV-cache fit run in waves: the fit is the concurrency.

    The fit (physics.kv_fit_sequences): the weights at the run's precision (workload.PRECISION_BYTES), each
    sequence's whole KV cache (prompt + answer, sliding-window layers capped at their window) at
    physics.kv_bytes_per_value bytes per value.
    """
    out = frame.copy()
    known = (out["gpu"] != "") & (out["llm"] != "")
    # "16bit" states the source's default; vLLM loads a quantised checkpoint (gpt-oss's MXFP4 experts) as published.
    native = out["llm"].map(lambda k: getattr(llms.get(k), "weight_precision", "bf16") if k else "bf16")
    quantised = native.isin(QUANTISED) & (out["precision"] == "16bit") & (out["engine"] == "vllm")
    out.loc[quantised, "precision"] = native[quantised]
    memory = out["gpu"].map(lambda k: gpus.get(k).memory_gb if k else np.nan)
    bytes_per_param = out["precision"].map(workload.PRECISION_BYTES).fillna(physics.BYTES_FP16)
    weights = physics.weights_gb(out["llm"].map(lambda k: llms.get(k).total_params_b if k else np.nan), bytes_per_param)
    tokens = out["prompt_tokens_mean"].fillna(0) + out["output_tokens_mean"]
    kv_value_bytes = physics.kv_bytes_per_value()  # no source states a quantised KV cache
    kv = pd.Series([llms.get(k).kv_cache_bytes_per_sequence(t, kv_value_bytes) if k else np.nan
                    for k, t in zip(out["llm"], tokens)], index=out.index, dtype=float)
    fit = pd.Series(physics.kv_fit_sequences(memory, out["n_gpus"], weights, kv), index=out.index)
    offline = known & (out["scenario"] == "offline") & out["concurrency"].isna()
    out.loc[offline, "concurrency"] = workload.offline_concurrency(
        memory[offline].to_numpy(float), out.loc[offline, "n_gpus"].to_numpy(float), weights[offline].to_numpy(float),
        kv[offline].to_numpy(float), out.loc[offline, "gpu"].to_numpy(),
        out.loc[offline, "engine_version"].to_numpy(), out.loc[offline, "concurrency_setting"].to_numpy(float))
    out.loc[offline, "concurrency_derivation"] = "vllm_default_max_num_seqs_capped"
    waves = known & (out["concurrency_derivation"] == "static_batch") & (out["concurrency"] > fit)
    out.loc[waves, "concurrency"] = np.floor(fit[waves])
    out.loc[waves, "concurrency_derivation"] = "static_batch_capped_by_kv_cache"
    little = offline | waves
    out.loc[little, "itl_s"] = out.loc[little, "concurrency"] / out.loc[little, "throughput_tok_s"]
    out.loc[offline, "itl_derivation"] = "offline_concurrency_per_throughput"
    return out


def finalize(raw: pd.DataFrame, gpus, llms, checks: Checks = Checks()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Resolve catalog names, check every row, and split into (table, quarantine).

    `gpus` / `llms` are catalogs with `resolve(name) -> key` (raising UnknownNameError) and
    `get(key)` returning a spec with `tdp_w`, `memory_bandwidth_gb_s` (GPU) or `is_moe`, `active_params_b` (LLM).
    """
    df = conform(raw, RAW_COLUMNS)
    reason = pd.Series("", index=df.index, dtype=object)

    def _resolver(catalog):
        cache: dict[str, str] = {}

        def resolve(name: str) -> str:
            if name not in cache:
                try:
                    cache[name] = catalog.resolve(name)
                except UnknownNameError:
                    cache[name] = ""
            return cache[name]

        return resolve

    df["gpu"] = df["raw_gpu_name"].map(_resolver(gpus))
    df["llm"] = df["raw_llm_name"].map(_resolver(llms))
    reason[(df["gpu"] == "") & (reason == "")] = "unknown_gpu"
    reason[(df["llm"] == "") & (reason == "")] = "unknown_llm"

    tdp = df["gpu"].map(lambda k: gpus.get(k).tdp_w if k else np.nan)
    df["is_moe"] = df["llm"].map(lambda k: bool(llms.get(k).is_moe) if k else False)

    tokens_bad = ~(df["output_tokens_mean"] > 0)
    reason[tokens_bad & (reason == "")] = "zero_tokens"
    power = df["power_w_per_gpu"]
    reason[(power.notna() & ~(power > 0)) & (reason == "")] = "nonpositive_power"
    ratio = power / tdp
    implausible = power.notna() & tdp.notna() & ((ratio > checks.max_power_tdp_ratio) | (ratio < checks.min_power_tdp_ratio))
    reason[implausible & (reason == "")] = "implausible_power"

    df = derive_concurrency(df, gpus, llms)
    df = mark_undefined_itl(df, checks.min_tokens_for_itl)
    bandwidth = df["gpu"].map(lambda k: gpus.get(k).memory_bandwidth_gb_s if k else np.nan)
    params_b = df["llm"].map(lambda k: llms.get(k).active_params_b if k else np.nan)
    df = mark_implausible_itl(df, physics.weight_stream_s(params_b, bandwidth * df["tensor_parallel"]),
                              checks.min_itl_roofline_ratio)
    df["lab"] = df["source"].map(LABS).fillna(df["source"])
    no_targets = df["power_w_per_gpu"].isna() & df["itl_s"].isna()
    reason[no_targets & (reason == "")] = "missing_targets"

    dup = df.duplicated(list(KEY), keep="first")
    reason[dup & (reason == "")] = "duplicate_key"

    bad = reason != ""
    table = conform(df[~bad], TABLE_COLUMNS).sort_values(list(KEY), kind="stable").reset_index(drop=True)
    quarantine = df[bad].copy()
    quarantine.insert(0, "reason", reason[bad].values)
    quarantine = quarantine.reset_index(drop=True)
    return table, quarantine


def count_report(raw_by_source: dict[str, int], table: pd.DataFrame, quarantine: pd.DataFrame) -> dict:
    """Counts kept / quarantined per source and reason, plus the table's coverage."""
    per_source = {}
    for source, n_raw in sorted(raw_by_source.items()):
        kept = table[table["source"] == source]
        q = quarantine[quarantine["source"] == source]
        per_source[source] = {
            "raw_rows": int(n_raw),
            "kept": int(len(kept)),
            "quarantined": int(len(q)),
            "quarantined_by_reason": {str(k): int(v) for k, v in q["reason"].value_counts().sort_index().items()},
            "gpus": int(kept["gpu"].nunique()),
            "llms": int(kept["llm"].nunique()),
            "dense_llms": int(kept.loc[~kept["is_moe"], "llm"].nunique()),
            "itl_missing": int(kept["itl_s"].isna().sum()),
            "accounted_for": bool(len(kept) + len(q) == n_raw),
        }
    coverage = table.groupby(["source", "gpu"]).size()
    ranges = {}
    for source, rows in table.groupby("source"):
        ranges[source] = {}
        for field in WORKLOAD_FIELDS:
            v = pd.to_numeric(rows[field], errors="coerce").dropna()
            ranges[source][field] = [float(v.min()), float(v.median()), float(v.max())] if len(v) else None
        for field in ("engine", "engine_version", "precision", "concurrency_derivation"):
            ranges[source][field] = sorted(set(rows[field]) - {""})
    derived = {  # how each source's targets and requests in flight were obtained, with the rows of each way
        source: {field: {str(k): int(n) for k, n in rows[field].replace("", "(none)").value_counts().sort_index().items()}
                 for field in ("itl_derivation", "concurrency_derivation")}
        for source, rows in table.groupby("source")}
    return {
        "rows_kept": int(len(table)),
        "rows_quarantined": int(len(quarantine)),
        "sources": per_source,
        "rows_per_source_and_gpu": {s: {g: int(n) for g, n in coverage[s].items()} for s in coverage.index.levels[0]
                                    if s in coverage.index},
        "workload_ranges": ranges,
        "derivations": derived,
    }


def split_sources(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate adapter outputs, keeping the schema even when every frame is empty."""
    frames = [conform(f, RAW_COLUMNS) for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else empty_raw()
