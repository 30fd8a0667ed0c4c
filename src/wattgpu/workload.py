"""The workload vocabulary, in one place: scenario presets, request rates, prompt and output tokens, GPUs per
replica, and the defaults a request gets for what it leaves out.

The measured data know the paper's three workloads (Watt Counts): `offline` (1,000 requests at once, vLLM at
max throughput), and Poisson arrivals at 0.017 (`server_low`) or 0.33 (`server_high`) requests/s. A request
names one of them, or `server` with its own `request_rate_per_s`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from wattgpu import physics

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

# The engine a request runs on unless it names one: Watt Counts' (the newest measured), so the presets are its runs.
DEFAULT_ENGINE, DEFAULT_ENGINE_VERSION = "vllm", "0.14.1"
ENGINES = ("vllm", "tensorrt-llm", "deepspeed-mii", "deepspeed", "llama.cpp", "hf-transformers")
# Bytes per weight at each precision (the KV cache's bytes per value: physics.kv_bytes_per_value).
PRECISION_BYTES = {**dict.fromkeys(("bf16", "fp16", "16bit"), float(physics.BYTES_FP16)),
                   **dict.fromkeys(("fp8", "int8"), float(physics.BYTES_8BIT)), "mxfp4": 4.25 / 8, "int4": 0.5}


@functools.lru_cache(maxsize=1024)  # a pure function of a short text, called per request row
def version_number(version: str) -> float:
    """'0.14.1' -> 1401.0 (major x 1e4 + minor x 100 + patch), sortable across releases; NaN when unknown."""
    parts = [p for p in str(version or "").split(".") if p]
    numbers = []
    for p in parts[:3]:
        digits = "".join(ch for ch in p if ch.isdigit())
        if not digits:
            break
        numbers.append(int(digits))
    if not numbers:
        return math.nan
    numbers += [0] * (3 - len(numbers))
    return float(numbers[0] * 10**4 + numbers[1] * 100 + numbers[2])


# Engine generations: releases that changed how an engine schedules and runs a decode step, in release order, each
# (first version, name). A version belongs to the last generation whose first version it reaches; an engine not
# listed has one generation. The generation, not the version number, is what the models learn: a version number
# would interpolate between the labs that happened to measure each release, and a release newer than every measured
# one is answered as the newest generation measured (estimator.TargetRegressor), flagged (modeling.coverage).
ENGINE_GENERATIONS: dict[str, tuple[tuple[str, str], ...]] = {
    # V1 engine on by default from 0.8.0: https://github.com/vllm-project/vllm/releases/tag/v0.8.0
    "vllm": (("0", "V0 engine"), ("0.8.0", "V1 engine")),
    # PyTorch backend the LLM API's default from 1.0: https://github.com/NVIDIA/TensorRT-LLM/releases/tag/v1.0.0
    "tensorrt-llm": (("0", "TensorRT engine"), ("1.0.0", "PyTorch backend")),
}


@functools.lru_cache(maxsize=1024)
def engine_generation(engine: str, version: str) -> float:
    """The index of `version`'s generation in ENGINE_GENERATIONS[engine] (0 for an engine with one generation). An
    unstated version counts as the first generation: the measured runs that leave it unstated (LLM-Inference-Bench's
    vLLM on A100 and H100, published 2024) predate every later generation, and a request naming no version of the
    default engine gets DEFAULT_ENGINE_VERSION (request.validate)."""
    generations = ENGINE_GENERATIONS.get(str(engine))
    number = version_number(version)
    if generations is None or math.isnan(number):
        return 0.0
    return float(sum(number >= version_number(first) for first, _ in generations[1:]))


def generation_name(engine: str, generation: float) -> str:
    """'V1 engine' for ('vllm', 1); '' for an engine with one generation or no generation."""
    generations = ENGINE_GENERATIONS.get(str(engine))
    if generations is None or not math.isfinite(generation):
        return ""
    return generations[int(min(max(generation, 0), len(generations) - 1))][1]


@functools.lru_cache(maxsize=4096)
def vllm_default_max_num_seqs(memory_gb: float, gpu_name: str, engine_version: str) -> int:
    """vLLM's default max_num_seqs for its offline `LLM` class: from the V1 engine (0.9) on, 1024 on GPUs with at
    least 70 GiB that are not an A100 (EngineArgs.get_batch_defaults), else 256."""
    big = memory_gb * 1e9 >= 70 * physics.GIB and "a100" not in gpu_name.lower()
    return 1024 if big and version_number(engine_version) >= version_number("0.9") else OFFLINE_MAX_NUM_SEQS


def nearest_load(rate: float) -> str:
    """The measured server load nearer to `rate` on a log scale (the models know the two loads as labels)."""
    low, high = SERVER_RATES["server_low"], SERVER_RATES["server_high"]
    return "server_low" if rate < math.sqrt(low * high) else "server_high"


def workload(scenario: str | None = None, rate: float | None = None, prompt_tokens: float | None = None,
             output_tokens: float | None = None, n_gpus: int | None = None, concurrency: float | None = None,
             pipeline_parallel: int | None = None, precision: str | None = None, engine: str | None = None,
             engine_version: str | None = None) -> dict[str, Any]:
    """Request fields of a workload, leaving out what is not given (request.validate applies the defaults)."""
    w = {"scenario": scenario, "request_rate_per_s": rate, "concurrency": concurrency, "prompt_tokens": prompt_tokens,
         "output_tokens": output_tokens, "n_gpus": n_gpus, "pipeline_parallel": pipeline_parallel,
         "precision": precision, "engine": engine, "engine_version": engine_version}
    return {k: v for k, v in w.items() if v is not None}


def filled(w: Mapping[str, Any]) -> dict[str, Any]:
    """A workload with the defaults request.validate applies, for display and the memory rule."""
    out = {**DEFAULTS, "pipeline_parallel": 1, "precision": "bf16", "engine": DEFAULT_ENGINE, **w}
    if "engine_version" not in out and out["engine"] == DEFAULT_ENGINE:
        out["engine_version"] = DEFAULT_ENGINE_VERSION
    if "request_rate_per_s" not in out and SCENARIOS.get(w.get("scenario")) is not None:
        out["request_rate_per_s"] = SCENARIOS[w["scenario"]]
    return out


def describe(w: Mapping[str, Any], concurrency: float | None = None) -> str:
    """One line, e.g. 'server_high: Poisson 0.33 req/s (1.2 in flight), 14 prompt + 220 output tokens per request,
    1 GPU per replica, vllm 0.14.1, bf16'. `concurrency`: the requests in flight a prediction used."""
    w = filled(w)
    in_flight = f" ({concurrency:.3g} in flight)" if concurrency is not None else ""
    if "concurrency" in w:
        load = f"{w['concurrency']:g} requests in flight"
    elif "request_rate_per_s" in w:
        load = f"{w.get('scenario', 'server')}: Poisson {w['request_rate_per_s']:g} req/s{in_flight}"
    else:
        load = f"offline: all requests at once{in_flight}"
    n = int(w["n_gpus"])
    pp = f" ({n // int(w['pipeline_parallel'])} x {int(w['pipeline_parallel'])} pipeline)" if w["pipeline_parallel"] > 1 else ""
    return (f"{load}, {w['prompt_tokens']:g} prompt + {w['output_tokens']:g} output tokens per request, {n} GPU"
            f"{'s' if n > 1 else ''} per replica{pp}, {w['engine']} {w.get('engine_version', '') or '(version unstated)'}"
            f", {w['precision']}")


def preset_variants(request: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The same request in each preset (none when it sets its own rate or concurrency)."""
    if "request_rate_per_s" in request or "concurrency" in request:
        return []
    return [{**request, "scenario": s} for s in PRESETS]


def offline_concurrency(memory_gb, n_gpus, weights_gb, kv_bytes_per_sequence, gpu_names, engine_versions,
                        requests=OFFLINE_REQUESTS):
    """Requests an offline run (every request submitted at once) holds in flight: vLLM's default max_num_seqs, the
    requests submitted, or the sequences whose KV cache (`kv_bytes_per_sequence`: prompt + answer) fits beside the
    weights in vLLM's share of the memory (physics.kv_fit_sequences), whichever is fewest. Elementwise over arrays;
    derived, so labelled so wherever it is stored."""
    cap = np.array([vllm_default_max_num_seqs(float(m), str(g), str(v))
                    for m, g, v in zip(np.ravel(memory_gb), np.ravel(gpu_names), np.ravel(engine_versions))],
                   dtype=float).reshape(np.shape(memory_gb))
    fit = physics.kv_fit_sequences(memory_gb, n_gpus, weights_gb, kv_bytes_per_sequence)
    return np.minimum(np.minimum(cap, requests), fit)
