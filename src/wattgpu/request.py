"""Prediction requests: validate them and resolve the GPU and LLM (by catalog name or by their own specs) into
canonical rows, ready for `features.engineer`. The one entry for every request: CLI, batch CSV and HTTP.

A request is a mapping (one row of a frame) with:
- `gpu`: a catalog name or alias, or else the GPU's spec fields `gpu_<field>` (fields.GPU_SPEC_REQUIRED at least);
- `llm`: a catalog name or alias, or else the LLM's config fields `llm_<field>` (fields.LLM_CONFIG_REQUIRED at least);
- `scenario`: offline | server_low | server_high | server (server needs `request_rate_per_s`);
- optional workload: `request_rate_per_s`, `prompt_tokens`, `output_tokens`, `n_gpus` (defaults: workload.DEFAULTS).
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

from wattgpu import fields
from wattgpu.errors import UnknownNameError, WattgpuError
from wattgpu.features import GPU_FIELDS, LLM_FIELDS
from wattgpu.fields import Bounds
from wattgpu.workload import DEFAULTS, SCENARIOS, nearest_load

GPU_SPEC_OPTIONAL = tuple(k for k in fields.GPU_SPEC if k not in fields.GPU_SPEC_REQUIRED)
KNOWN_FIELDS = (
    {"gpu", "llm", "scenario", *fields.WORKLOAD}
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
        scenario = req.get("scenario")
        if _missing(scenario):
            raise RequestError(i, "scenario", f"missing: one of {', '.join(SCENARIOS)}")
        if not isinstance(scenario, str) or scenario not in SCENARIOS:
            raise RequestError(i, "scenario", f"{scenario!r} is not one of {', '.join(SCENARIOS)}")
        gpu_key, gpu_spec = _resolve(i, req, "gpu", gpus, "gpu_", fields.GPU_SPEC, fields.GPU_SPEC_REQUIRED,
                                     GPU_SPEC_OPTIONAL, fields.GPU_SPEC_TEXT)
        llm_key, llm_spec = _resolve(i, req, "llm", llms, "llm_", fields.LLM_CONFIG, fields.LLM_CONFIG_REQUIRED,
                                     fields.LLM_CONFIG_OPTIONAL, fields.LLM_CONFIG_TEXT)
        row = {"gpu": gpu_key, "llm": llm_key, "scenario": "offline" if scenario == "offline" else "server"}
        rate = req.get("request_rate_per_s")
        if scenario == "offline":
            if not _missing(rate):
                raise RequestError(i, "request_rate_per_s", "not used offline (max throughput); leave it out")
            rate = np.nan
        elif _missing(rate):
            if SCENARIOS[scenario] is None:
                raise RequestError(i, "request_rate_per_s", "required for scenario 'server' (Poisson requests/s)")
            rate = SCENARIOS[scenario]
        else:
            rate = _number(i, "request_rate_per_s", rate, fields.WORKLOAD["request_rate_per_s"])
        # The models know the paper's two loads as labels; a custom rate maps to the nearer one (log scale).
        label = scenario if scenario != "server" else nearest_load(rate)
        row.update(scenario_label=label, request_rate_per_s=rate)
        for k in ("prompt_tokens", "output_tokens", "n_gpus"):
            v = req.get(k)
            v = DEFAULTS[k] if _missing(v) else _number(i, k, v, fields.WORKLOAD[k])
            row[k] = v
        row["prompt_tokens_mean"], row["output_tokens_mean"] = row.pop("prompt_tokens"), row.pop("output_tokens")
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
        rows.append(row)
    return pd.DataFrame(rows)
