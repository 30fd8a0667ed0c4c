"""Prediction requests: validate them and resolve the GPU and LLM (by catalog name or by their own specs) into
canonical rows, ready for `features.engineer`. The one entry for every request: CLI, batch CSV and HTTP.

A request is a mapping (one row of a frame) with:
- `gpu`: a catalog name or alias, or else the GPU's spec fields `gpu_<field>` (fields.GPU_SPEC_REQUIRED at least);
- `llm`: a catalog name or alias, or else the LLM's config fields `llm_<field>` (fields.LLM_CONFIG_REQUIRED at least);
- the load, one of: `concurrency` (requests the engine runs at once), `request_rate_per_s` (Poisson arrivals, with
  `scenario` absent or `server`), or a preset `scenario`: offline | server_low | server_high;
- optional: `level` (the prediction interval's confidence, a fraction, default 0.8), `prompt_tokens`,
  `output_tokens`, `n_gpus` (GPUs per replica), `pipeline_parallel`, `precision`, `engine`, `engine_version` (defaults: workload.DEFAULTS, the LLM's own precision, vLLM at the newest measured version).
Accepted ranges: wattgpu.fields. Pure functions; every error names the row, the field and what is allowed.

A field is absent when it is left out, null (None), NaN or blank text: a DataFrame (and a CSV read into one)
marks an absent cell with NaN, so NaN cannot mean anything else. An absent field takes its default; where it
is required, the error names it as "missing (or NaN)".
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from wattgpu import fields, physics
from wattgpu.errors import UnknownNameError, WattgpuError
from wattgpu.features import GPU_FIELDS, LLM_FIELDS, kv_bytes_per_token
from wattgpu.fields import Bounds
from wattgpu.workload import (
    DEFAULT_ENGINE,
    DEFAULT_ENGINE_VERSION,
    DEFAULTS,
    ENGINES,
    PRECISION_BYTES,
    SCENARIOS,
    SERVER_RATES,
    nearest_load,
    offline_concurrency,
    version_number,
)

GPU_SPEC_OPTIONAL = tuple(k for k in fields.GPU_SPEC if k not in fields.GPU_SPEC_REQUIRED)
KNOWN_FIELDS = (
    {"gpu", "llm", "scenario", "level", *fields.WORKLOAD, *fields.WORKLOAD_TEXT}
    | {f"gpu_{k}" for k in [*fields.GPU_SPEC, *fields.GPU_SPEC_TEXT, "name"]}
    | {f"llm_{k}" for k in [*fields.LLM_CONFIG_REQUIRED, *fields.LLM_CONFIG_OPTIONAL, *fields.LLM_CONFIG_TEXT, "name"]}
)


class RequestError(WattgpuError, ValueError):
    """A request that cannot be answered; names the row and the field."""

    def __init__(self, row: int | None, field: str, problem: str):
        self.row, self.field = row, field
        where = f"row {row}, " if row is not None else ""
        super().__init__(f"{where}field {field!r}: {problem}")


def _is_na(v) -> bool:
    return v is None or v is pd.NA or (isinstance(v, (float, np.floating)) and math.isnan(v))


def _missing(v) -> bool:
    """Not given: None, NaN or blank text."""
    return _is_na(v) or (isinstance(v, str) and not v.strip())


def _records(requests: pd.DataFrame | Iterable[Mapping]) -> list:
    """Request mappings without their absent (None / NaN) fields, so that a frame's row names only what it gives."""
    records = requests.to_dict("records") if isinstance(requests, pd.DataFrame) else list(requests)
    return [{k: v for k, v in r.items() if not _is_na(v)} if isinstance(r, Mapping) else r for r in records]


def _number(i: int, name: str, v, bounds: Bounds) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise RequestError(i, name, f"must be a number, got {type(v).__name__} {v!r}")
    v = float(v)
    if not math.isfinite(v):
        raise RequestError(i, name, f"must be a finite number, got {v}")
    if not bounds.lo <= v <= bounds.hi:
        raise RequestError(i, name, f"{v:g} is outside the allowed range [{bounds.lo:g}, {bounds.hi:g}]")
    if bounds.integer and v != int(v):
        raise RequestError(i, name, f"must be a whole number, got {v:g}")
    return v


def _spec_fields(i, req, prefix, table, required, optional, text):
    given = {k: req[f"{prefix}{k}"] for k in [*required, *optional, *text]
             if f"{prefix}{k}" in req and not _missing(req[f"{prefix}{k}"])}
    out = {}
    for k in (*required, *optional):
        if k in given:
            out[k] = _number(i, f"{prefix}{k}", given[k], table[k])
        elif k in required:
            raise RequestError(i, f"{prefix}{k}", "missing (or NaN), and required when no catalog name is given "
                               f"(needs {', '.join(prefix + r for r in required)})")
        else:
            out[k] = np.nan
    for k in text:
        v = given.get(k, "")
        if not isinstance(v, str):
            raise RequestError(i, f"{prefix}{k}", f"must be text, got {type(v).__name__}")
        out[k] = v or "unknown"
    return out


def _has_spec(req: Mapping, prefix: str, fields: Iterable[str]) -> bool:
    return any(f"{prefix}{k}" in req and not _missing(req[f"{prefix}{k}"]) for k in fields)


def _resolve(i, req, kind, catalog, prefix, table, required, optional, text):
    name = req.get(kind)
    spec_given = _has_spec(req, prefix, [*required, *optional])
    if not _missing(name):
        if not isinstance(name, str):
            raise RequestError(i, kind, f"must be a catalog name (text), got {type(name).__name__}")
        if spec_given:
            first = next(f"{prefix}{k}" for k in [*required, *optional] if not _missing(req.get(f"{prefix}{k}")))
            raise RequestError(i, first, f"give either {kind!r} (a catalog name) or {prefix}* spec fields, not both")
        try:
            key = catalog.resolve(name)
        except UnknownNameError as exc:
            raise RequestError(i, kind, str(exc)) from None
        return key, None
    if not spec_given:
        raise RequestError(i, kind, f"missing: give a catalog name or the {prefix}* fields "
                           f"({', '.join(prefix + r for r in required)})")
    spec = _spec_fields(i, req, prefix, table, required, optional, text)
    label = req.get(f"{prefix}name")
    if not _missing(label) and not isinstance(label, str):
        raise RequestError(i, f"{prefix}name", f"must be text, got {type(label).__name__}")
    if not _missing(label) and label in catalog:
        # A spec'd entry must not pass for a catalog one (outputs and catalog look-ups go by this name).
        raise RequestError(i, f"{prefix}name", f"{label!r} is a catalog {kind.upper()}: send {kind!r} instead, "
                           "or choose another label")
    return (label.strip() if not _missing(label) else f"custom {kind.upper()}"), spec


def _catalog_field(catalog, key: str, field: str):
    value = getattr(catalog.get(key), field)
    return np.nan if value is None else value


def validate(requests: pd.DataFrame | list[Mapping], gpus, llms) -> pd.DataFrame:
    """Requests -> canonical rows (gpu, llm, workload, gpu_*, llm_*) ready for features.engineer."""
    records = _records(requests)
    if not records:
        raise RequestError(None, "requests", "no rows: send at least one request")
    rows = []
    for i, req in enumerate(records):
        if not isinstance(req, Mapping):
            raise RequestError(i, "-", "each request must be an object of fields")
        unknown = sorted(set(req) - KNOWN_FIELDS, key=str)
        if unknown:
            name = str(unknown[0])
            close = difflib.get_close_matches(name, sorted(KNOWN_FIELDS), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise RequestError(i, name, f"unknown field; {hint}allowed: {', '.join(sorted(KNOWN_FIELDS))}")
        gpu_key, gpu_spec = _resolve(i, req, "gpu", gpus, "gpu_", fields.GPU_SPEC, fields.GPU_SPEC_REQUIRED,
                                     GPU_SPEC_OPTIONAL, fields.GPU_SPEC_TEXT)
        llm_key, llm_spec = _resolve(i, req, "llm", llms, "llm_", fields.LLM_CONFIG, fields.LLM_CONFIG_REQUIRED,
                                     fields.LLM_CONFIG_OPTIONAL, fields.LLM_CONFIG_TEXT)
        row = {"gpu": gpu_key, "llm": llm_key, **_workload(i, req), "level": _level(i, req.get("level"))}
        for f in GPU_FIELDS:
            row[f"gpu_{f}"] = gpu_spec.get(f, np.nan) if gpu_spec is not None else _catalog_field(gpus, gpu_key, f)
        for f in LLM_FIELDS:
            if llm_spec is None:
                row[f"llm_{f}"] = _catalog_field(llms, llm_key, f)
            elif f == "is_moe":
                row[f"llm_{f}"] = bool(llm_spec["active_params_b"] == llm_spec["active_params_b"]
                                       and llm_spec["active_params_b"] < llm_spec["total_params_b"])
            else:
                row[f"llm_{f}"] = llm_spec.get(f, np.nan)
        if llm_spec is not None and _missing(row["llm_active_params_b"]):
            row["llm_active_params_b"] = row["llm_total_params_b"]
        if not row["precision"]:  # the weights as published (e.g. gpt-oss's MXFP4 experts), else 16-bit
            own = row.get("llm_weight_precision")
            row["precision"] = own if isinstance(own, str) and own in PRECISION_BYTES else "bf16"
        rows.append(row)
    return _offline_concurrency(pd.DataFrame(rows))


def _level(i: int, value) -> float:
    """The interval's confidence level: a fraction in fields.INTERVAL_LEVEL (absent: the default)."""
    return fields.DEFAULT_INTERVAL_LEVEL if _missing(value) else _number(i, "level", value, fields.INTERVAL_LEVEL)


def _workload(i: int, req: Mapping) -> dict:
    """The request's workload in the training table's vocabulary: a closed batch of `concurrency` requests, Poisson
    arrivals at `request_rate_per_s` (requests in flight solved by the predictor) or a preset (`scenario`)."""
    given = {k: req.get(k) for k in ("scenario", "concurrency", "request_rate_per_s")}
    scenario, concurrency, rate = (None if _missing(v) else v for v in given.values())
    if scenario is not None and (not isinstance(scenario, str) or scenario not in SCENARIOS):
        raise RequestError(i, "scenario", f"{scenario!r} is not one of {', '.join(SCENARIOS)}")
    out = {"concurrency": np.nan, "request_rate_per_s": np.nan}
    if concurrency is not None:
        if scenario is not None or rate is not None:
            field = "scenario" if scenario is not None else "request_rate_per_s"
            raise RequestError(i, field, "give either `concurrency` (a closed batch) or a scenario / request rate")
        out.update(scenario="fixed_concurrency", scenario_label="concurrency", concurrency_from="given",
                   concurrency=_number(i, "concurrency", concurrency, fields.WORKLOAD["concurrency"]))
    elif scenario == "offline":
        if rate is not None:
            raise RequestError(i, "request_rate_per_s", "not used offline (max throughput); leave it out")
        out.update(scenario="offline", scenario_label="offline", concurrency_from="offline rule")
    else:
        if scenario is None and rate is None:
            raise RequestError(i, "scenario", f"missing: give `concurrency`, `request_rate_per_s` or a scenario "
                               f"({', '.join(SCENARIOS)})")
        if rate is None and SCENARIOS.get(scenario) is None:
            raise RequestError(i, "request_rate_per_s", "required for scenario 'server' (Poisson requests/s)")
        if rate is not None:
            if scenario in SERVER_RATES:
                raise RequestError(i, "request_rate_per_s", f"{scenario!r} sets its own rate; use scenario 'server'")
            rate = _number(i, "request_rate_per_s", rate, fields.WORKLOAD["request_rate_per_s"])
        rate = SCENARIOS[scenario] if rate is None else rate
        # The paper's models know the two loads as labels; a custom rate maps to the nearer one (log scale).
        out.update(scenario="server", scenario_label=scenario if scenario in SERVER_RATES else nearest_load(rate),
                   request_rate_per_s=rate, concurrency_from="solved from the rate")
    for k in ("prompt_tokens", "output_tokens", "n_gpus", "pipeline_parallel"):
        v = req.get(k)
        out[k] = DEFAULTS.get(k, 1) if _missing(v) else _number(i, k, v, fields.WORKLOAD[k])
    if out["n_gpus"] % out["pipeline_parallel"]:
        raise RequestError(i, "pipeline_parallel", f"{out['pipeline_parallel']:g} does not divide n_gpus "
                           f"{out['n_gpus']:g} (GPUs per replica = tensor x pipeline parallel)")
    out["tensor_parallel"] = out["n_gpus"] // out["pipeline_parallel"]
    out["prompt_tokens_mean"], out["output_tokens_mean"] = out.pop("prompt_tokens"), out.pop("output_tokens")
    out["precision"] = _choice(i, "precision", req.get("precision"), tuple(PRECISION_BYTES), "")  # "": the LLM's own
    out["engine"] = _choice(i, "engine", req.get("engine"), ENGINES, DEFAULT_ENGINE)
    version = req.get("engine_version")
    if _missing(version):
        version = DEFAULT_ENGINE_VERSION if out["engine"] == DEFAULT_ENGINE else ""
    elif not isinstance(version, str) or math.isnan(version_number(version)):
        raise RequestError(i, "engine_version", f"must be a version like '0.11' or '0.14.1', got {version!r}")
    out["engine_version"] = version.strip()
    return out


def _choice(i: int, name: str, value, allowed: tuple[str, ...], default: str) -> str:
    if _missing(value):
        return default
    if not isinstance(value, str) or value.strip().lower() not in allowed:
        raise RequestError(i, name, f"{value!r} is not one of {', '.join(allowed)}")
    return value.strip().lower()


def _offline_concurrency(rows: pd.DataFrame) -> pd.DataFrame:
    """Offline rows get the requests in flight an offline run holds (workload.offline_concurrency)."""
    offline = (rows["scenario"] == "offline").to_numpy()
    if offline.any():
        sub = rows[offline]
        weights = physics.weights_gb(sub["llm_total_params_b"].astype(float),
                                     sub["precision"].map(PRECISION_BYTES).astype(float))
        rows.loc[offline, "concurrency"] = offline_concurrency(
            sub["gpu_memory_gb"].to_numpy(float), sub["n_gpus"].to_numpy(float), weights.to_numpy(float),
            kv_bytes_per_token(sub).to_numpy(float),
            (sub["prompt_tokens_mean"] + sub["output_tokens_mean"]).to_numpy(float),
            sub["gpu"].to_numpy(), sub["engine_version"].to_numpy())
    return rows
