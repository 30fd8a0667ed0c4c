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
from wattgpu.arrays import per_distinct, text

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
# Engines some source measured: each has its own model input (features: engine_<name>).
MEASURED_ENGINES = ("vllm", "tensorrt-llm", "deepspeed-mii", "deepspeed", "llama.cpp", "hf-transformers")
# Engines no source measured, each answered as the nearest measured family at one of its releases, the row flagged
# (modeling.coverage.engine_notes): engine -> (measured engine, its release, why that one).
ENGINE_PROXIES: dict[str, tuple[str, str, str]] = {
    # SGLang schedules a decode step as vLLM's V1 engine does: continuous batching, a paged KV cache (radix tree
    # of pages), CUDA graphs for the decode step, chunked prefill (https://docs.sglang.ai/)
    "sglang": ("vllm", DEFAULT_ENGINE_VERSION, "continuous batching, paged (radix) KV cache, CUDA graphs"),
}
ENGINES = (*MEASURED_ENGINES, *ENGINE_PROXIES)
# Each engine's current release where a request can ask for it by number: a release newer than every measured one
# is answered as the newest measured release of the generation it assumes and flagged (estimator.as_measured_release,
# modeling.coverage). An engine without a stated version keeps today's reading (vLLM: DEFAULT_ENGINE_VERSION; the
# others: unstated), except an unmeasured engine, which gets its current release. Pinned from the engines' public
# packages (PyPI `vllm`, NVIDIA's `tensorrt-llm`, `sglang`), stable releases only.
CURRENT_RELEASES = {"vllm": "0.28.0", "tensorrt-llm": "1.2.1", "sglang": "0.5.21"}

# Weight precisions (`precision`, and `expert_precision` for a mixture of experts' routed experts) -> bytes per weight,
# block scales included: FP8 / INT8 1 byte (a per-channel or 128 x 128-block scale adds < 0.1 %: not counted); INT4
# (GPTQ / AWQ) 0.5; MXFP4 (OCP microscaling) 4-bit E2M1 values + one 8-bit E8M0 scale per 32 = 4.25 bits; NVFP4
# (NVIDIA Blackwell) 4-bit E2M1 values + one FP8 E4M3 scale per 16 = 4.5 bits (a per-tensor FP32 scale: not counted).
# "16bit" is the sources' label for the checkpoint's own 16-bit type.
PRECISION_BYTES = {**dict.fromkeys(("bf16", "fp16", "16bit"), float(physics.BYTES_FP16)),
                   **dict.fromkeys(("fp8", "int8"), float(physics.BYTES_8BIT)), "mxfp4": 4.25 / 8, "int4": 0.5,
                   "nvfp4": 4.5 / 8}
WEIGHT_PRECISIONS = ("bf16", "fp16", "fp8", "int8", "int4", "nvfp4", "mxfp4")  # as documented (and "16bit")
# KV-cache precisions (`kv_precision`; bytes per cached K or V value: physics.kv_bytes_per_value, 2 or 1). 4-bit KV
# caches are not offered: the engines here keep their paged KV cache at 8 bits or more.
KV_PRECISIONS = ("bf16", "fp16", "fp8", "int8")


# Speculative decoding (`speculative`): method -> (draft tokens proposed per sequence and step, mean tokens a step
# emits per sequence: the accepted drafts + the bonus token). Defaults where a request gives neither; no measured run
# used speculative decoding, so a row that asks for it is answered from the physics (physics.replica_step_s) and
# flagged (modeling.coverage.shape_note).
# - mtp: DeepSeek-V3's one multi-token-prediction module drafts 1 token; "the acceptance rate of the second token
#   prediction ranges between 85% and 90%" (DeepSeek-V3 Technical Report, arXiv:2412.19437, section 5.4.3), so a step
#   emits 1 + 0.85..0.90 tokens: 1.8 (the report's "1.8 times TPS").
# - eagle: 3 draft tokens, vLLM's EAGLE example (`num_speculative_tokens: 3`, docs.vllm.ai features/spec_decode) and
#   a chain of SGLang's `--speculative-num-steps 3`; EAGLE-3 accepts about 0.8 of each draft in turn (arXiv:2503.01840
#   reports acceptance lengths of 6 and more with 7-8-token trees), so a 3-token chain emits 1 + 0.8 + 0.64 + 0.51
#   = 2.95: 3.0.
# - ngram: prompt lookup (no draft model), 3 draft tokens; on chat the lookups rarely match (vLLM's blog "How
#   Speculative Decoding Boosts vLLM Performance by up to 2.8x", 2024-10-17: n-gram gains on summarisation, where the
#   answer copies the prompt, little on ShareGPT chat): 1.5.
SPECULATIVE: dict[str, tuple[int, float]] = {"mtp": (1, 1.8), "eagle": (3, 3.0), "ngram": (3, 1.5)}
SPECULATIVE_CHOICES = ("none", *SPECULATIVE)  # none: no speculative decoding (the default)
# The replica-shape inputs a request may add (each answered from the physics and flagged): name -> default.
REPLICA_SHAPE = {"expert_parallel": 1, "dp_attention": False, "speculative": "none"}


# What the CLI (and its --help) says of each choice: the allowed values and what a request gets without one.
HELP = {
    "precision": f"the weights: {' | '.join(WEIGHT_PRECISIONS)} (default: the LLM's own, else bf16)",
    "expert_precision": "a mixture of experts' routed experts, where stored otherwise than --precision (e.g. "
                        f"--precision fp8 --expert-precision nvfp4): {' | '.join(WEIGHT_PRECISIONS)} (default: "
                        "--precision)",
    "kv_precision": f"the KV cache: {' | '.join(KV_PRECISIONS)} (default: the weights' 16-bit type, fp16 for fp16 "
                    "weights, else bf16)",
    "engine": f"{' | '.join(ENGINES)} (default: {DEFAULT_ENGINE}); " + "; ".join(
        f"{e}: no source measured it, answered as {p[0]} {p[1]} and flagged" for e, p in ENGINE_PROXIES.items()),
    "engine_version": "e.g. " + ", ".join(f"{e} {v}" for e, v in CURRENT_RELEASES.items()) + " (current releases); "
                      "one newer than every measured release is answered as the newest measured of its generation "
                      f"and flagged (default: vllm {DEFAULT_ENGINE_VERSION}; " + ", ".join(
                          f"{e} {CURRENT_RELEASES[e]}" for e in ENGINE_PROXIES) + ")",
}
SHAPE_HELP = {
    "expert_parallel": "expert parallel: a mixture of experts' routed experts spread whole over N of the replica's "
                       "(tensor-parallel) GPUs, tokens sent to them all-to-all; N divides the GPUs and the expert "
                       "count (default: 1, every expert sliced over the tensor-parallel GPUs)",
    "dp_attention": "attention data-parallel over the replica's tensor-parallel GPUs: each GPU runs attention for its "
                    "own share of the sequences (attention weights replicated, the KV cache split by sequence; for "
                    "latent attention, MLA, it is otherwise replicated on every GPU) (default: off)",
    "speculative": f"speculative decoding: {' | '.join(SPECULATIVE_CHOICES)} (default: none); " + ", ".join(
        f"{m}: {d} draft token{'s' if d > 1 else ''}, {a:g} tokens emitted per step"
        for m, (d, a) in SPECULATIVE.items()),
    "spec_draft_tokens": "draft tokens per sequence and step (needs --speculative; default: the method's, " + ", ".join(
        f"{m} {d}" for m, (d, _) in SPECULATIVE.items()) + ")",
    "spec_accept_length": "mean tokens a speculative step emits per sequence, the bonus token included: more than 1, "
                          "at most draft tokens + 1 (needs --speculative; default: the method's, " + ", ".join(
                              f"{m} {a:g}" for m, (_, a) in SPECULATIVE.items()) + ")",
}

# Words a planner carries over from an engine's or its benchmark's settings (vLLM, SGLang), or from the command line
# to a request body and back, and the field that says each here. No string distance links them (difflib offers
# expert_parallel for tensor_parallel, click --expert-parallel), so each is told by name: a request body the field
# (request's unknown-field message), the command line the option (cli.engine_flag).
# Field -> (the command line's option, what it is).
FIELD_OPTIONS: dict[str, tuple[str, str]] = {
    "n_gpus": ("--gpus-per-replica N", "GPUs per replica: tensor x pipeline parallel"),
    "pipeline_parallel": ("--pipeline-parallel P", "the replica's pipeline stages"),
    "expert_parallel": ("--expert-parallel N", "the GPUs a mixture of experts' routed experts are spread over"),
    "dp_attention": ("--dp-attention", "attention data-parallel over the replica's GPUs"),
    "concurrency": ("--concurrency N", "requests in flight (an engine's max_num_seqs caps those a step runs)"),
    "request_rate_per_s": ("--rate R", "Poisson requests per second"),
    "prompt_tokens": ("--prompt-tokens N", "mean prompt tokens"),
    "output_tokens": ("--output-tokens N", "mean output tokens"),
    "precision": ("--precision", "the weights' precision"),
    "kv_precision": ("--kv-precision", "the KV cache's precision"),
    "speculative": ("--speculative METHOD", f"speculative decoding: {' | '.join(SPECULATIVE)}"),
}
# An engine's word -> the field (snake case; a flag's dashes read the same).
ENGINE_WORDS: dict[str, str] = {
    **dict.fromkeys(("tensor_parallel", "tensor_parallel_size", "tp", "tp_size", "num_gpus"), "n_gpus"),
    **dict.fromkeys(("pipeline_parallel_size", "pp", "pp_size"), "pipeline_parallel"),
    **dict.fromkeys(("ep", "ep_size", "expert_parallel_size", "enable_expert_parallel"), "expert_parallel"),
    **dict.fromkeys(("enable_dp_attention", "dp_size"), "dp_attention"),
    **dict.fromkeys(("max_num_seqs", "max_concurrency", "batch_size", "max_batch_size"), "concurrency"),
    "request_rate": "request_rate_per_s",
    **dict.fromkeys(("input_len", "input_tokens", "prompt_len"), "prompt_tokens"),
    **dict.fromkeys(("output_len", "max_tokens"), "output_tokens"),
    **dict.fromkeys(("dtype", "quantization"), "precision"),
    "kv_cache_dtype": "kv_precision",
    "speculative_algorithm": "speculative",
}


def _option_word(field: str) -> str:
    """'n_gpus' -> 'gpus_per_replica': its option's name in snake case."""
    return FIELD_OPTIONS[field][0].split()[0].lstrip("-").replace("-", "_")


# What a request body's unknown field and the command line's option name are read as: the engines' words, and the
# other side's names (a body's `gpus_per_replica` or `rate`; the command line's --n-gpus or --request-rate-per-s).
BODY_WORDS = {**ENGINE_WORDS, **{_option_word(f): f for f in FIELD_OPTIONS if _option_word(f) != f}}
FLAG_WORDS = {**ENGINE_WORDS, **{f: f for f in FIELD_OPTIONS if _option_word(f) != f}}


def default_kv_precision(precision: str) -> str:
    """The KV cache's precision a request gets unless it names one: the weights' 16-bit type (fp16 for fp16 weights,
    else bf16). Quantised weights keep a 16-bit KV cache (vLLM's and SGLang's kv_cache_dtype `auto`)."""
    return "fp16" if precision == "fp16" else "bf16"


# engine -> the measured engine whose releases answer it (itself where a source measured it): pandas `replace` map
PROXY_FAMILY = {e: p[0] for e, p in ENGINE_PROXIES.items()}


def answering_family(engine) -> str:
    """The engine family whose measurements answer `engine` (lower-cased): its own, or for an engine no source
    measured, the measured family it is answered as (PROXY_FAMILY: SGLang's is vLLM's). '' for an absent engine."""
    name = text(engine).strip().lower()
    return PROXY_FAMILY.get(name, name)


def measured_engine(engine: str, version: str) -> tuple[str, str]:
    """The (engine, release) the models answer a request as: the engine itself, or for one no source measured
    (ENGINE_PROXIES) the nearest measured family's release."""
    proxy = ENGINE_PROXIES.get(str(engine))
    return (proxy[0], proxy[1]) if proxy else (str(engine), version)


@functools.lru_cache(maxsize=1024)  # a pure function of a short text, called per request row
def version_number(version: str) -> float:
    """'0.14.1' -> 1401.0 (major x 1e4 + minor x 100 + patch), sortable across releases; NaN when the text is no
    release number as engines write theirs (PEP 440: '0.11', 'v0.11.0', '0.5.3.post1', '1.2.0rc1', '0.11.0+cu128'; a
    pre-release counts as its release). Text around the number is not read past: 'vllm0.11', '0.x' and 'latest' are
    no release (request.validate says so, naming the field), never a release of the wrong engine."""
    from packaging.version import InvalidVersion, Version

    try:
        release = Version(str(version or "").strip()).release
    except InvalidVersion:
        return math.nan
    major, minor, patch = (*release, 0, 0)[:3]
    return float(major * 10**4 + minor * 100 + patch)


def engine_in_version(version: str) -> tuple[str | None, str]:
    """'vllm 0.11.0' -> ('vllm', '0.11.0'), '0.11' -> (None, '0.11'): the engine a release may be written after, as
    the CLI's help writes releases (lower-cased, not checked: request.validate says when it is no engine, or
    another than the request's `engine`)."""
    words = str(version).split()
    return (" ".join(words[:-1]).lower(), words[-1]) if len(words) > 1 else (None, str(version))


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


def engine_generation_groups(engines, versions) -> np.ndarray:
    """Per row, its engine generation as one label, the group the leave-one-engine-generation-out regime holds out:
    the family and, for a family with several generations (ENGINE_GENERATIONS), the generation ('vllm V0 engine',
    'vllm V1 engine', 'llama.cpp'); an unstated release counts as the family's first generation (engine_generation)."""
    def label(engine, version) -> str:
        family = text(engine)
        name = generation_name(family, engine_generation(family, text(version)))
        return f"{family} {name}" if name else family

    return per_distinct(label, engines, versions, dtype=object)


def generation_name(engine: str, generation: float) -> str:
    """'V1 engine' for ('vllm', 1); '' for an engine with one generation or no generation."""
    generations = ENGINE_GENERATIONS.get(str(engine), ())
    if len(generations) < 2 or not math.isfinite(generation):
        return ""
    return generations[int(min(max(generation, 0), len(generations) - 1))][1]


@functools.lru_cache(maxsize=4096)
def vllm_default_max_num_seqs(memory_gb: float, gpu_name: str, engine_version: str) -> int:
    """vLLM's default max_num_seqs for its offline `LLM` class: from the V1 engine (0.9) on, 1024 on GPUs with at
    least 70 GiB that are not an A100 (EngineArgs.get_batch_defaults), else 256."""
    big = memory_gb * 1e9 >= 70 * physics.GIB and "a100" not in gpu_name.lower()
    return 1024 if big and version_number(engine_version) >= version_number("0.9") else OFFLINE_MAX_NUM_SEQS


def default_max_num_seqs(memory_gb, gpu_names, engine_versions) -> np.ndarray:
    """vllm_default_max_num_seqs per element (the shape of `memory_gb`), computed once per distinct (memory, GPU,
    release): a batch of thousands of rows has a handful."""
    shape = np.shape(memory_gb)
    caps = per_distinct(lambda m, g, v: vllm_default_max_num_seqs(float(m), text(g), text(v)),
                        np.asarray(memory_gb, dtype=float), np.broadcast_to(np.asarray(gpu_names, dtype=object), shape),
                        np.broadcast_to(np.asarray(engine_versions, dtype=object), shape))
    return caps.reshape(shape)


# Engines that shard attention over the tensor-parallel GPUs by whole heads and refuse, at start-up, a tensor-parallel
# size that does not split them so: vLLM (ModelConfig.verify_with_parallel_config, "Total number of attention heads
# (32) must be divisible by tensor parallel size (3)"; QKVParallelLinear, vllm/model_executor/layers/linear.py) and
# SGLang (QKVParallelLinear, python/sglang/srt/layers/linear.py); e.g. Phi-4's 10 KV heads over 4 GPUs fail
# (https://github.com/vllm-project/vllm/issues/16021). Not held to it: engines that split a model by layers
# (llama.cpp, transformers' device map) or were measured beyond it (LLM-Inference-Bench ran DeepSpeed with Qwen2-7B's
# 28 heads over 8 GPUs); TensorRT-LLM, whose rule was not checked here.
HEAD_SHARDED_ENGINES = ("vllm", "sglang")


def splits_heads(num_heads, num_kv_heads, tensor_parallel) -> np.ndarray:
    """Whether `tensor_parallel` GPUs split an attention layer as HEAD_SHARDED_ENGINES require: the query heads
    divided by it, and the KV heads divided by it or, where it is at least their count, it divided by them (each KV
    head then replicated on tensor_parallel / KV heads GPUs). KV heads NaN: as many as the query heads. Arrays or
    scalars; False where the heads are not known (NaN)."""
    heads, tp = np.asarray(num_heads, dtype=float), np.asarray(tensor_parallel, dtype=float)
    kv = np.where(np.isnan(np.asarray(num_kv_heads, dtype=float)), heads, num_kv_heads)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (heads % tp == 0) & np.where(tp >= kv, tp % kv == 0, kv % tp == 0)


def head_split_sizes(num_heads: float, num_kv_heads: float) -> list[int]:
    """The tensor-parallel sizes that splits_heads accepts for one LLM (1 up to its query heads)."""
    sizes = np.arange(1, int(num_heads) + 1)
    return [int(t) for t in sizes[splits_heads(num_heads, num_kv_heads, sizes)]]


def nearest_load(rate: float) -> str:
    """The measured server load nearer to `rate` on a log scale (the models know the two loads as labels)."""
    low, high = SERVER_RATES["server_low"], SERVER_RATES["server_high"]
    return "server_low" if rate < math.sqrt(low * high) else "server_high"


def workload(scenario: str | None = None, rate: float | None = None, prompt_tokens: float | None = None,
             output_tokens: float | None = None, n_gpus: int | None = None, concurrency: float | None = None,
             pipeline_parallel: int | None = None, precision: str | None = None, engine: str | None = None,
             engine_version: str | None = None, kv_precision: str | None = None,
             expert_precision: str | None = None, expert_parallel: int | None = None,
             dp_attention: bool | None = None, speculative: str | None = None, spec_draft_tokens: int | None = None,
             spec_accept_length: float | None = None) -> dict[str, Any]:
    """Request fields of a workload, leaving out what is not given (request.validate applies the defaults)."""
    w = {"scenario": scenario, "request_rate_per_s": rate, "concurrency": concurrency, "prompt_tokens": prompt_tokens,
         "output_tokens": output_tokens, "n_gpus": n_gpus, "pipeline_parallel": pipeline_parallel,
         "precision": precision, "expert_precision": expert_precision, "kv_precision": kv_precision,
         "engine": engine, "engine_version": engine_version, "expert_parallel": expert_parallel,
         "dp_attention": dp_attention or None, "speculative": speculative, "spec_draft_tokens": spec_draft_tokens,
         "spec_accept_length": spec_accept_length}
    return {k: v for k, v in w.items() if v is not None}


def filled(w: Mapping[str, Any]) -> dict[str, Any]:
    """A workload with the defaults request.validate applies, for display and the memory rule."""
    out = {**DEFAULTS, "pipeline_parallel": 1, "precision": "bf16", "engine": DEFAULT_ENGINE, **w}
    out = {k: (v.strip().lower() if k in ("precision", "expert_precision", "kv_precision", "engine", "speculative")
               and isinstance(v, str) else v) for k, v in out.items()}
    out.setdefault("expert_precision", out["precision"])
    out.setdefault("kv_precision", default_kv_precision(out["precision"]))
    written = out.pop("engine_version", None)
    word, version = engine_in_version(written) if written else (None, "")
    if word and not w.get("engine"):
        out["engine"] = word
    if version:
        out["engine_version"] = version
    elif out["engine"] == DEFAULT_ENGINE:
        out["engine_version"] = DEFAULT_ENGINE_VERSION
    elif out["engine"] in ENGINE_PROXIES:
        out["engine_version"] = CURRENT_RELEASES.get(out["engine"], "")
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
    experts = f" (experts {w['expert_precision']})" if w["expert_precision"] != w["precision"] else ""
    kv = f", KV cache {w['kv_precision']}" if w["kv_precision"] != default_kv_precision(w["precision"]) else ""
    return (f"{load}, {w['prompt_tokens']:g} prompt + {w['output_tokens']:g} output tokens per request, {n} GPU"
            f"{'s' if n > 1 else ''} per replica{pp}{shape_words(w)}, {w['engine']} "
            f"{w.get('engine_version', '') or '(version unstated)'}, {w['precision']}{experts}{kv}")


# What a default stands for, where it shapes a load of the request's own (default_notes).
DEFAULT_MEANING = {"prompt_tokens": "Watt Counts' ~14-token prompts; chat and RAG prompts are far longer",
                   "output_tokens": "Watt Counts' mean generation, capped at 256 tokens"}


def default_notes(w: Mapping[str, Any]) -> list[str]:
    """The defaults that shape the answer to a load of the request's own (`concurrency` or `request_rate_per_s`)
    where it leaves them out: Watt Counts' prompt and output lengths, which few real workloads have, one note each
    (e.g. 'prompt_tokens 14 by default (...): give prompt_tokens (--prompt-tokens) for your own'). None for a preset
    (offline, server_low, server_high): those are Watt Counts' workloads, lengths included."""
    given = lambda k: w.get(k) is not None and w.get(k) == w.get(k)  # noqa: E731  (None / NaN: left out)
    if not (given("concurrency") or given("request_rate_per_s")):
        return []
    return [f"{k} {DEFAULTS[k]:g} by default ({why}): give {k} (--{k.replace('_', '-')}) for your own"
            for k, why in DEFAULT_MEANING.items() if not given(k)]


def dp_attention_on(w: Mapping[str, Any]) -> bool:
    """Whether a workload (canonical or as a user wrote it: true, 1, "yes") asks for DP attention."""
    v = w.get("dp_attention")
    return v is True or str(v).lower() in ("1", "1.0", "true", "yes")


def shape_words(w: Mapping[str, Any]) -> str:
    """The replica-shape inputs a workload gives, as words (e.g. ', expert parallel 8, DP attention, mtp speculative
    decoding (1 draft token, 1.8 tokens per step)'); '' where it gives none."""
    parts = []
    ep = w.get("expert_parallel")
    if ep is not None and ep == ep and int(ep) > 1:
        parts.append(f"expert parallel {int(ep)}")
    if dp_attention_on(w):
        parts.append("DP attention")
    method = str(w.get("speculative") or "none").strip().lower()
    if method in SPECULATIVE:
        draft, accept = spec_defaults(method, w.get("spec_draft_tokens"), w.get("spec_accept_length"))
        parts.append(f"{method} speculative decoding ({draft:g} draft token{'s' if draft > 1 else ''}, {accept:g} "
                     "tokens per step)")
    return "".join(f", {p}" for p in parts)


def spec_defaults(method: str, draft_tokens=None, accept_length=None) -> tuple[float, float]:
    """(draft tokens, accept length) of a speculative method, each the given value or the method's default
    (SPECULATIVE); the default accept length is capped at draft tokens + 1 where fewer drafts are given."""
    d0, a0 = SPECULATIVE[method]
    given = lambda v: v is not None and v == v  # noqa: E731  (NaN: absent)
    draft = float(draft_tokens) if given(draft_tokens) else float(d0)
    accept = float(accept_length) if given(accept_length) else min(a0, draft + 1)
    return draft, accept


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
    cap = default_max_num_seqs(memory_gb, gpu_names, engine_versions)
    fit = physics.kv_fit_sequences(memory_gb, n_gpus, weights_gb, kv_bytes_per_sequence)
    return np.minimum(np.minimum(cap, requests), fit)
