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

from wattgpu.workload import PRECISION_BYTES, engine_generation, generation_name, version_number

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


VERSION = "engine_version_num"


def _per_engine(col: str) -> tuple[str, str | None]:
    """'engine_version_num:vllm' -> (the column, the engine its range is for); other keys -> (key, None)."""
    base, _, engine = col.partition(":")
    return (base, engine) if base == VERSION and engine else (col, None)


def training_ranges(rows: pd.DataFrame) -> dict[str, list[float]]:
    """[min, max] of every COLUMNS column the rows have (finite values only); the engine version per engine
    (`engine_version_num:<engine>`): releases of different engines do not compare."""
    out = {}
    for col in COLUMNS:
        if col == VERSION and "engine" in rows and col in rows:
            v = pd.to_numeric(rows[col], errors="coerce")
            for engine, r in v.groupby(rows["engine"].astype(str)):
                r = r.to_numpy(dtype=float)
                r = r[np.isfinite(r)]
                if len(r):
                    out[f"{VERSION}:{engine}"] = [float(r.min()), float(r.max())]
        elif col in rows:
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
    columns = set(columns)
    for key, (lo, hi) in ranges.items():
        col, engine = _per_engine(key)
        if col not in columns or col not in rows or (engine and "engine" not in rows):
            continue
        v = pd.to_numeric(rows[col], errors="coerce").to_numpy(dtype=float)
        mine = rows["engine"].astype(str).to_numpy() == engine if engine else True
        with np.errstate(invalid="ignore"):
            mask |= mine & np.isfinite(v) & ((v < lo) | (v > hi))
    return mask


def outside(row: Mapping[str, float], ranges: Mapping[str, list[float]],
            columns: Iterable[str] = tuple(COLUMNS)) -> list[str]:
    """One phrase per column whose value lies outside its training range, e.g. 'TDP (W) 1000 > 700 measured'."""
    notes = []
    columns = set(columns)
    for key, (lo, hi) in ranges.items():
        col, engine = _per_engine(key)
        if col not in columns or col not in row or (engine and str(row.get("engine")) != engine):
            continue
        try:
            v = float(row[col])
        except (TypeError, ValueError):
            continue
        if not math.isfinite(v):
            continue
        if col == VERSION:
            if v > hi:
                notes.append(_newer_release(engine or str(row.get("engine", "")), v, hi))
            elif v < lo:
                notes.append(f"{engine or ''} {_version(v)} < {_version(lo)} measured".strip())
        elif v < lo:
            notes.append(f"{COLUMNS[col]} {v:.4g} < {lo:.4g} measured")
        elif v > hi:
            notes.append(f"{COLUMNS[col]} {v:.4g} > {hi:.4g} measured")
    return notes


def _newer_release(engine: str, version: float, newest: float) -> str:
    """The note of a release newer than every measured one: which generation the answer assumes."""
    asked = generation_name(engine, engine_generation(engine, _version(version)))
    measured = generation_name(engine, engine_generation(engine, _version(newest)))
    if asked and asked != measured:
        how = f"answered as {measured}, the newest generation measured ({asked} never was)"
    else:
        how = f"answered as {measured or 'the newest measured release'}"
    return f"{engine} {_version(version)} > {_version(newest)} measured: {how}"


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
