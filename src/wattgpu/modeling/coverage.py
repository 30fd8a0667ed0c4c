"""How far a request lies outside what the models were trained on (pure functions).

The register stage records, per model, the range of each input a planner varies (`training_ranges`, in the model
folder's meta.json). A prediction whose GPU spec, LLM size or workload falls outside that range is an
extrapolation: still answered, but flagged (`outside`); the measured data cover a handful of GPUs, dense LLMs of
limited size, two Poisson request rates and short prompts. Besides the ranges, the GPU architectures measured are
recorded (`gpu_architecture`): a GPU of an architecture no measured GPU has (Blackwell, CDNA 4, ...) extrapolates
even where its spec sheet lies inside the ranges, and its band is calibrated on the errors of held-out GPUs whose
architecture was unseen in their fold (modeling.intervals): the held-out GPUs that missed most under LOGO (V100,
T4, the AMD GPUs) were each the only one of its architecture. A replica shape no source measured (expert parallel, DP
attention, speculative decoding) is flagged too (`shape_note`): answered from the physics. The GPUs per replica and
the prompt and output tokens are recorded per engine generation too (`n_gpus:<generation>`, PER_GENERATION): a
generation measured on one GPU only and with short prompts and answers (vLLM's V1 engine: Watt Counts) learned its
multi-GPU and long-context costs from other engines' rows, so an 8-GPU replica or a 2,000-token prompt on it
extrapolates even where another engine was measured so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping

import numpy as np
import pandas as pd

from wattgpu import physics
from wattgpu.arrays import floats, per_distinct, text
from wattgpu.workload import (
    ENGINE_PROXIES,
    PRECISION_BYTES,
    SPECULATIVE,
    answering_family,
    engine_generation,
    engine_generation_groups,
    generation_name,
    measured_engine,
    shape_words,
    version_number,
)

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
    "kv_bytes_per_value": "bytes per KV-cache value",
    "gpu_architecture": "GPU architecture",
}
ARCHITECTURE = "gpu_architecture"  # the one categorical entry: the sorted names measured, not a [min, max] range
GPU_COLUMNS = tuple(c for c in COLUMNS if c.startswith("gpu_"))


VERSION = "engine_version_num"  # ranged per engine family (`engine_version_num:vllm`): releases of two engines do not compare
REPLICA = "n_gpus"
# Ranged over every row and per engine generation (`n_gpus:vllm V1 engine`): what one generation measured does not
# speak for another. Every multi-GPU row in the sources ran an older engine, and every row of vLLM's V1 engine (Watt
# Counts) has a prompt of under 20 tokens and an answer of at most 258, so a replica of 8 GPUs or a 2,000-token prompt on
# today's vLLM is answered from older engines' rows: an extrapolation, said and banded as one.
PER_GENERATION = (REPLICA, "prompt_tokens_mean", "output_tokens_mean")
QUALIFIED = (VERSION, *PER_GENERATION)


def _qualified(col: str) -> tuple[str, str | None]:
    """'engine_version_num:vllm' -> (the column, the engine family its range is for), 'n_gpus:vllm V1 engine' (a
    PER_GENERATION column) -> (the column, the engine generation); other keys -> (key, None)."""
    base, _, qualifier = col.partition(":")
    return (base, qualifier) if base in QUALIFIED and qualifier else (col, None)


def generation(engine, version) -> str:
    """The engine generation a request for `engine` `version` is answered as (workload.engine_generation_groups'
    label; an engine no source measured counts as the measured family's release it is answered as)."""
    family, release = measured_engine(text(engine), text(version))
    return str(engine_generation_groups([family], [release])[0])


def generations(rows: pd.DataFrame) -> np.ndarray | None:
    """Per row, its `generation`; None without an `engine` column."""
    if "engine" not in rows:
        return None
    versions = rows["engine_version"].to_numpy(dtype=object) if "engine_version" in rows else np.full(len(rows), "")
    return per_distinct(generation, rows["engine"].to_numpy(dtype=object), versions, dtype=object)


def _architectures(values) -> list[str]:
    """The distinct architecture names given (blank and missing left out), sorted."""
    names = pd.Series(values, dtype=object).dropna().astype(str).str.strip()
    return sorted(set(names[names != ""]))


def training_ranges(rows: pd.DataFrame) -> dict[str, list]:
    """[min, max] of every COLUMNS column the rows have (finite values only); the engine version per engine
    (`engine_version_num:<engine>`): releases of different engines do not compare; the PER_GENERATION columns (GPUs
    per replica, prompt and output tokens) also per engine generation (`n_gpus:<generation>`); `gpu_architecture`: the
    architectures measured (names)."""
    out = {}
    for col in COLUMNS:
        if col == ARCHITECTURE:
            if col in rows and len(names := _architectures(rows[col])):
                out[col] = names
        elif col == VERSION and "engine" in rows and col in rows:
            v = pd.to_numeric(rows[col], errors="coerce")
            for engine, r in v.groupby(rows["engine"].astype(str)):
                r = r.to_numpy(dtype=float)
                r = r[np.isfinite(r)]
                if len(r):
                    out[f"{VERSION}:{engine}"] = [float(r.min()), float(r.max())]
        elif col in rows:
            v = floats(rows[col])
            v = v[np.isfinite(v)]
            if len(v):
                out[col] = [float(v.min()), float(v.max())]
    columns = [c for c in PER_GENERATION if c in rows]
    if columns and (groups := generations(rows)) is not None:
        for col in columns:
            values = floats(rows[col])
            for group in sorted(set(groups)):
                v = values[(groups == group) & np.isfinite(values)]
                if len(v):
                    out[f"{col}:{group}"] = [float(v.min()), float(v.max())]
    return out


def narrowest(ranges: Iterable[Mapping[str, list]]) -> dict[str, list]:
    """Per column, the range every model saw (the largest low, the smallest high; the architectures all saw)."""
    out: dict[str, list] = {}
    for r in ranges:
        for col, value in r.items():
            if col == ARCHITECTURE:
                out[col] = sorted(set(value) & set(out.get(col, value)))
                continue
            lo, hi = value
            a, b = out.get(col, [-math.inf, math.inf])
            out[col] = [max(a, lo), min(b, hi)]
    return out


def engine_note(engine, version) -> str:
    """The note of an engine no source measured (workload.ENGINE_PROXIES), '' for a measured one, e.g. 'sglang 0.5.21:
    no source measured it; answered as vllm 0.14.1 (V1 engine), the nearest measured family (continuous batching,
    ...)'."""
    proxy = ENGINE_PROXIES.get(str(engine))
    if proxy is None:
        return ""
    family, release, why = proxy
    generation = generation_name(family, engine_generation(family, release))
    return (f"{engine} {version or '(version unstated)'}: no source measured it; answered as {family} {release}"
            f"{f' ({generation})' if generation else ''}, the nearest measured family ({why})")


def shaped_mask(rows: pd.DataFrame) -> np.ndarray:
    """Per row, whether it asks for a replica shape no source measured (expert parallel > 1, DP attention or a
    speculative method; workload.REPLICA_SHAPE)."""
    n = len(rows)
    with np.errstate(invalid="ignore"):
        ep = floats(rows["expert_parallel"]) > 1 if "expert_parallel" in rows else np.zeros(n, bool)
    dp = np.array([bool(d) and not pd.isna(d) for d in rows["dp_attention"].to_numpy(dtype=object)], dtype=bool) \
        if "dp_attention" in rows else np.zeros(n, bool)  # NaN: absent
    spec = np.array([s in SPECULATIVE for s in rows["speculative"].to_numpy(dtype=object)], dtype=bool) \
        if "speculative" in rows else np.zeros(n, bool)
    return ep | dp | spec


def shape_note(row: Mapping, ratio: float | None = None) -> str:
    """The note of a replica shape no source measured, '' for none, e.g. 'expert parallel 8, DP attention: no source
    measured them; ITL x 0.62 from the physics (physics.replica_step_s at the same requests in flight); their effect
    on power is not modelled'."""
    words = shape_words(row).lstrip(", ")
    if not words:
        return ""
    applied = f"ITL x {ratio:.3g}" if ratio is not None and math.isfinite(ratio) else "ITL scaled"
    return (f"{words}: no source measured {'them' if ', ' in words else 'it'}; answered as the same replica without, "
            f"{applied} from the physics (physics.replica_step_s, at the same requests in flight); the effect on "
            "power is not modelled")


def shape_notes(rows: pd.DataFrame, ratio) -> dict[int, str]:
    """Position -> shape_note of each row that asks for a replica shape, with its ITL ratio."""
    at = np.flatnonzero(shaped_mask(rows))
    if not len(at):
        return {}
    cols = [c for c in ("expert_parallel", "dp_attention", "speculative", "spec_draft_tokens", "spec_accept_length")
            if c in rows]
    records = rows.iloc[at][cols].to_dict("records")
    return {int(i): shape_note(r, float(ratio[i])) for i, r in zip(at, records)}


def _numeric(ranges: Mapping[str, list]) -> Iterator[tuple[str, str | None, float, float]]:
    """(column, engine family or generation or None, low, high) per numeric range of `ranges` (the architecture
    names are not one)."""
    for key, value in ranges.items():
        if key != ARCHITECTURE:
            lo, hi = value
            yield (*_qualified(key), lo, hi)


def outside_mask(rows: pd.DataFrame, ranges: Mapping[str, list],
                 columns: Iterable[str] = tuple(COLUMNS)) -> np.ndarray:
    """Per row, whether any column's value lies outside its range (`outside`, for a frame; NaN is inside), or, where
    the engine version is among `columns`, its engine is one no source measured (engine_note)."""
    mask = np.zeros(len(rows), dtype=bool)
    columns = set(columns)
    engine = [text(e) for e in rows["engine"].to_numpy(dtype=object)] if "engine" in rows else None
    if VERSION in columns and engine is not None and ranges:
        mask |= np.array([e in ENGINE_PROXIES for e in engine], dtype=bool)
    if "n_gpus" in columns and ranges:  # a replica shape no source measured
        mask |= shaped_mask(rows)
    if ARCHITECTURE in columns and ARCHITECTURE in ranges and ARCHITECTURE in rows:
        measured = set(ranges[ARCHITECTURE])
        names = (text(a).strip() for a in rows[ARCHITECTURE].to_numpy(dtype=object))
        mask |= np.array([name != "" and name not in measured for name in names], dtype=bool)
    # each row's engine family and generation (an unmeasured engine: its proxy's), and those present, worked out once
    owner: dict[str, tuple[np.ndarray, set]] = {}
    values: dict[str, np.ndarray] = {}  # each column read once (several ranges per column: per family, generation)
    for col, qualifier, lo, hi in _numeric(ranges):
        if col not in columns or col not in rows or (qualifier and engine is None):
            continue
        mine = True
        if qualifier:
            kind = "family" if col == VERSION else "generation"
            if kind not in owner:
                labels = (per_distinct(answering_family, engine, dtype=object) if kind == "family"
                          else generations(rows))
                owner[kind] = (labels, set(labels))
            labels, present = owner[kind]
            if qualifier not in present:  # a range for an engine none of the rows asks
                continue
            mine = labels == qualifier
        v = values[col] if col in values else values.setdefault(col, floats(rows[col]))
        with np.errstate(invalid="ignore"):
            mask |= mine & np.isfinite(v) & ((v < lo) | (v > hi))
    return mask


def outside(row: Mapping[str, float], ranges: Mapping[str, list],
            columns: Iterable[str] = tuple(COLUMNS)) -> list[str]:
    """One phrase per column whose value lies outside its training range, e.g. 'TDP (W) 1000 > 700 measured'."""
    notes = []
    columns = set(columns)
    if VERSION in columns and (note := engine_note(row.get("engine"), row.get("engine_version"))):
        notes.append(note)
    if "n_gpus" in columns and (note := shape_note(row)):
        notes.append(note)
    arch = str(row.get(ARCHITECTURE) or "").strip()
    if ARCHITECTURE in columns and arch and ARCHITECTURE in ranges and arch not in ranges[ARCHITECTURE]:
        notes.append(f"{COLUMNS[ARCHITECTURE]} {arch}: none measured ({', '.join(ranges[ARCHITECTURE])})")
    answered_as = generation(row["engine"], row.get("engine_version", "")) if "engine" in row else None
    noted = set()  # a column outside its range over every row gets no second note for the row's engine generation
    for col, qualifier, lo, hi in _numeric(ranges):
        if col not in columns or col not in row:
            continue
        if qualifier and qualifier != (answered_as if col in PER_GENERATION
                                       else measured_engine(str(row.get("engine")), "")[0]):
            continue
        try:
            v = float(row[col])
        except (TypeError, ValueError):
            continue
        if not math.isfinite(v):
            continue
        if col == VERSION:
            if v > hi:
                notes.append(_newer_release(qualifier or str(row.get("engine", "")), v, hi))
            elif v < lo:
                notes.append(f"{qualifier or ''} {_version(v)} < {_version(lo)} measured".strip())
        elif (v < lo or v > hi) and col not in noted:
            noted.add(col)
            where = f" with {qualifier}" if qualifier else ""
            notes.append(f"{COLUMNS[col]} {v:.4g} {'<' if v < lo else '>'} {lo if v < lo else hi:.4g} measured{where}")
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
    """A validated request row with the derived columns coverage compares: the engine version as a number (an
    engine no source measured: the release it is answered as), bytes per weight over the whole model (the routed
    experts at `expert_precision`) and per KV-cache value."""
    out = dict(row)
    if "engine_version" in out:
        out["engine_version_num"] = version_number(measured_engine(str(out.get("engine")), out["engine_version"])[1])
    if out.get("precision") in PRECISION_BYTES:
        out["weight_bytes_per_param"] = PRECISION_BYTES[out["precision"]]
        expert = out.get("expert_precision")
        if expert in PRECISION_BYTES and expert != out["precision"]:
            llm = [out.get(f"llm_{k}", np.nan) for k in ("total_params_b", "active_params_b", "experts_per_token",
                                                          "num_experts")]
            out["weight_bytes_per_param"] = float(physics.mean_bytes_per_param(
                llm[0], PRECISION_BYTES[out["precision"]], physics.moe_expert_params_b(*llm),
                PRECISION_BYTES[expert]))
    if isinstance(out.get("kv_precision"), str) and out["kv_precision"]:
        out["kv_bytes_per_value"] = physics.kv_bytes_per_value(out["kv_precision"])
    return out
