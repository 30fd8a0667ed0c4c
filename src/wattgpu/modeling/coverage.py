"""How far a request lies outside what the models were trained on (pure functions).

The register stage records, per model, the range of each input a planner varies (`training_ranges`, in the model
folder's meta.json). A prediction whose GPU spec, LLM size or workload falls outside that range is an
extrapolation: still answered, but flagged (`outside`); the measured data cover a handful of GPUs, dense LLMs of
limited size, two Poisson request rates and short prompts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from wattgpu.workload import PRECISION_BYTES, version_number

# column of the canonical request / training rows (wattgpu.request.validate) -> how a planner reads it
COLUMNS = {
    "gpu_tdp_w": "TDP (W)",
    "gpu_memory_gb": "memory (GB)",
    "gpu_memory_bandwidth_gb_s": "memory bandwidth (GB/s)",
    "gpu_fp16_tensor_tflops": "FP16 tensor TFLOPS",
    "llm_total_params_b": "LLM parameters (B)",
    "llm_active_params_b": "LLM active parameters (B)",
    "concurrency": "requests in flight",
    "request_rate_per_s": "request rate (req/s)",
    "prompt_tokens_mean": "prompt tokens",
    "output_tokens_mean": "output tokens",
    "n_gpus": "GPUs per replica",
    "engine_version_num": "engine version",
    "weight_bytes_per_param": "bytes per weight",
}
GPU_COLUMNS = tuple(c for c in COLUMNS if c.startswith("gpu_"))


def training_ranges(rows: pd.DataFrame) -> dict[str, list[float]]:
    """[min, max] of every COLUMNS column the rows have (finite values only)."""
    out = {}
    for col in COLUMNS:
        if col in rows:
            v = pd.to_numeric(rows[col], errors="coerce").to_numpy(dtype=float)
            v = v[np.isfinite(v)]
            if len(v):
                out[col] = [float(v.min()), float(v.max())]
    return out


def narrowest(ranges: Iterable[Mapping[str, list[float]]]) -> dict[str, list[float]]:
    """Per column, the range every model saw (the largest low, the smallest high)."""
    out: dict[str, list[float]] = {}
    for r in ranges:
        for col, (lo, hi) in r.items():
            a, b = out.get(col, [-math.inf, math.inf])
            out[col] = [max(a, lo), min(b, hi)]
    return out


def outside_mask(rows: pd.DataFrame, ranges: Mapping[str, list[float]],
                 columns: Iterable[str] = tuple(COLUMNS)) -> np.ndarray:
    """Per row, whether any column's value lies outside its range (`outside`, for a frame; NaN is inside)."""
    mask = np.zeros(len(rows), dtype=bool)
    for col in columns:
        if col in ranges and col in rows:
            v = pd.to_numeric(rows[col], errors="coerce").to_numpy(dtype=float)
            lo, hi = ranges[col]
            with np.errstate(invalid="ignore"):
                mask |= np.isfinite(v) & ((v < lo) | (v > hi))
    return mask


def outside(row: Mapping[str, float], ranges: Mapping[str, list[float]],
            columns: Iterable[str] = tuple(COLUMNS)) -> list[str]:
    """One phrase per column whose value lies outside its training range, e.g. 'TDP (W) 1000 > 700 measured'."""
    notes = []
    for col in columns:
        if col not in ranges or col not in row:
            continue
        try:
            v = float(row[col])
        except (TypeError, ValueError):
            continue
        lo, hi = ranges[col]
        if not math.isfinite(v):
            continue
        show = _version if col == "engine_version_num" else (lambda x: f"{x:.4g}")
        if v < lo:
            notes.append(f"{COLUMNS[col]} {show(v)} < {show(lo)} measured")
        elif v > hi:
            notes.append(f"{COLUMNS[col]} {show(v)} > {show(hi)} measured")
    return notes


def _version(number: float) -> str:
    """1401.0 -> '0.14.1' (workload.version_number's inverse)."""
    n = int(number)
    return f"{n // 10**4}.{n // 100 % 100}.{n % 100}"


def request_values(row: Mapping) -> dict:
    """A validated request row with the derived columns coverage compares (the engine version as a number)."""
    out = dict(row)
    if "engine_version" in out:
        out["engine_version_num"] = version_number(out["engine_version"])
    if out.get("precision") in PRECISION_BYTES:
        out["weight_bytes_per_param"] = PRECISION_BYTES[out["precision"]]
    return out
