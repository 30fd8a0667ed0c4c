"""The workload vocabulary, in one place: scenario presets, request rates, prompt and output tokens, GPUs per
replica, and the defaults a request gets for what it leaves out.

The measured data know the paper's three workloads (Watt Counts): `offline` (1,000 requests at once, vLLM at
max throughput), and Poisson arrivals at 0.017 (`server_low`) or 0.33 (`server_high`) requests/s. A request
names one of them, or `server` with its own `request_rate_per_s`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

# vLLM's default max_num_seqs: the sequences decoded together offline (the paper's roofline batch).
OFFLINE_MAX_NUM_SEQS = 256
# The paper's convention for features: offline = an arbitrarily large request rate (req/s).
OFFLINE_RATE = 1000.0

SERVER_RATES = {"server_low": 0.017, "server_high": 0.33}  # Watt Counts' Poisson loads (requests/s)
SERVER_LOADS = tuple(SERVER_RATES)
PRESETS = ("offline", *SERVER_LOADS)  # the paper's three workloads, as named presets
SCENARIOS: dict[str, float | None] = {"offline": None, **SERVER_RATES, "server": None}  # `server` needs a rate
# Metric groups: `server` pools both loads.
SCENARIO_GROUPS = {"offline": ("offline",), "server": SERVER_LOADS, **{s: (s,) for s in SERVER_LOADS}}

# Watt Counts' offline run: 1,000 requests at once, generation capped at 256 tokens.
OFFLINE_REQUESTS, MAX_OUTPUT_TOKENS = 1000, 256
# Watt Counts' workload: ~14-token prompts, generation capped at 256 (mean ~220 tokens), one GPU.
DEFAULTS: dict[str, float] = {"prompt_tokens": 14.0, "output_tokens": 220.0, "n_gpus": 1}

# How a measurement source ran its workload (the `scenario` column of the measurement table).
RUN_KINDS = ("offline", "server", "fixed_concurrency", "static_batch")


def nearest_load(rate: float) -> str:
    """The measured server load nearer to `rate` on a log scale (the models know the two loads as labels)."""
    low, high = SERVER_RATES["server_low"], SERVER_RATES["server_high"]
    return "server_low" if rate < math.sqrt(low * high) else "server_high"


def workload(scenario: str, rate: float | None = None, prompt_tokens: float | None = None,
             output_tokens: float | None = None, n_gpus: int | None = None) -> dict[str, Any]:
    """Request fields of a workload, leaving out what is not given (the predictor applies the defaults)."""
    w = {"scenario": scenario, "request_rate_per_s": rate, "prompt_tokens": prompt_tokens,
         "output_tokens": output_tokens, "n_gpus": n_gpus}
    return {k: v for k, v in w.items() if v is not None}


def filled(w: Mapping[str, Any]) -> dict[str, Any]:
    """A workload with the defaults the predictor applies, for display and the memory rule."""
    out = {**DEFAULTS, **w}
    if "request_rate_per_s" not in out and SCENARIOS.get(w["scenario"]) is not None:
        out["request_rate_per_s"] = SCENARIOS[w["scenario"]]
    return out


def describe(w: Mapping[str, Any]) -> str:
    """One line, e.g. 'server_high: 0.33 req/s, 14 prompt + 220 output tokens per request, 1 GPU per replica'."""
    w = filled(w)
    rate = f"{w['request_rate_per_s']:g} req/s, " if "request_rate_per_s" in w else "max throughput, "
    n = int(w["n_gpus"])
    return (f"{w['scenario']}: {rate}{w['prompt_tokens']:g} prompt + {w['output_tokens']:g} output tokens per "
            f"request, {n} GPU{'s' if n > 1 else ''} per replica")


def preset_variants(request: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The same request in each preset (none when it sets its own request rate)."""
    if "request_rate_per_s" in request:
        return []
    return [{**request, "scenario": s} for s in PRESETS]
