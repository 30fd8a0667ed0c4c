"""Features as pure functions of (GPU spec, LLM config, workload): every model input is built here.

`attach_specs` joins catalog fields onto measurement or request rows (prefixes `gpu_` and `llm_`);
`engineer` adds the derived quantities: the paper's, the baselines' and the physics-informed ones. Every
derived column says its unit in its name, and its formula is written beside it. Every feature is a function of
one row's GPU spec sheet, LLM config and workload (never of a measured target), so it cannot leak between folds.
The named feature sets (`FEATURE_SETS`) are what the candidate algorithms choose from.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from wattgpu import physics
from wattgpu.arrays import float_columns, frame, per_distinct, text
from wattgpu.workload import (
    DEFAULT_ENGINE,
    MAX_OUTPUT_TOKENS,
    MEASURED_ENGINES,
    OFFLINE_RATE,
    PRECISION_BYTES,
    SPECULATIVE,
    default_max_num_seqs,
    engine_generation,
    measured_engine,
    spec_defaults,
    version_number,
)

PAPER_KV_TOKENS = 512 + 128  # the paper's KV-cache size: one 512-token prompt + 128 generated tokens
PAPER_TOKENS_PER_REQUEST = 1000 + MAX_OUTPUT_TOKENS  # the paper's concurrency estimate: 1,000 context tokens + the cap

GPU_FIELDS = (
    "tdp_w", "memory_gb", "memory_type", "memory_bus_bits", "memory_bandwidth_gb_s", "base_clock_mhz",
    "boost_clock_mhz", "sm_count", "fp16_tensor_tflops", "fp32_tflops", "transistors_m", "process_nm",
    "l2_cache_mb", "interconnect_bandwidth_gb_s", "release_year", "architecture", "vendor", "form_factor",
)
LLM_FIELDS = (
    "total_params_b", "active_params_b", "num_layers", "hidden_size", "num_attention_heads", "num_kv_heads",
    "head_dim", "intermediate_size", "vocab_size", "family", "is_moe", "num_experts", "experts_per_token",
    "kv_layers", "kv_values_per_layer", "sliding_window", "state_values_per_sequence", "weight_precision",
    "mtp_layers", "attention_params_b",
)


def attach_specs(rows: pd.DataFrame, gpus, llms, idle_power_w: dict[str, float] | None = None) -> pd.DataFrame:
    """Join GPU and LLM catalog fields onto rows holding `gpu` and `llm` catalog keys."""
    g = gpus.to_frame().set_index("key")
    l = llms.to_frame().set_index("key")
    gcols = [c for c in GPU_FIELDS if c in g.columns]
    lcols = [c for c in LLM_FIELDS if c in l.columns]
    out = rows.copy()
    for col in gcols:
        out[f"gpu_{col}"] = out["gpu"].map(g[col])
    for col in lcols:
        out[f"llm_{col}"] = out["llm"].map(l[col])
    if idle_power_w is not None:
        out["gpu_idle_power_w"] = out["gpu"].map(idle_power_w)
    return out


def kv_bytes_per_token(df: pd.DataFrame) -> pd.Series:
    """KV cache bytes per token of a context shorter than every sliding window (every attention layer caches the
    token; physics.kv_bytes_per_token; GQA and latent attention aware; 0 if attention-free)."""
    return pd.Series(_kv_bytes_per_token(_Columns(df)), index=df.index)


def kv_bytes_per_sequence(df: pd.DataFrame, context_tokens, bytes_per_value=None) -> pd.Series:
    """KV cache bytes of one sequence at `context_tokens` per row, sliding-window layers capped at their window
    (physics.kv_bytes_per_sequence, at `bytes_per_value` per value: default, each row's `kv_precision` where the frame
    has it, else physics.kv_bytes_per_value(), 16-bit; 0 if attention-free)."""
    cols = _Columns(df)
    per_value = _kv_value_bytes(cols) if bytes_per_value is None else bytes_per_value
    return pd.Series(_kv_bytes_per_sequence(cols, np.asarray(context_tokens, dtype=float), per_value), index=df.index)


def _kv_layout(cols: _Columns) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """physics.kv_cache_layout of each row's LLM (a column the frame lacks: not set); worked out once per frame."""
    if cols.kv_layout is None:
        unset = np.full(len(cols.frame), np.nan)
        cols.kv_layout = physics.kv_cache_layout(*(cols.num(f"llm_{f}") if f"llm_{f}" in cols else unset for f in (
            "num_layers", "num_attention_heads", "num_kv_heads", "head_dim", "hidden_size", "kv_layers",
            "kv_values_per_layer", "sliding_window")))
    return cols.kv_layout


def _kv_bytes_per_token(cols: _Columns) -> np.ndarray:
    full, sliding, _, values = _kv_layout(cols)
    return _fill(physics.kv_bytes_per_token(full + sliding, values), 0.0)


def _kv_bytes_per_sequence(cols: _Columns, context_tokens: np.ndarray, bytes_per_value=None) -> np.ndarray:
    """At `bytes_per_value` per value (a number or one per row; default physics.kv_bytes_per_value(), 16-bit: the
    paper-era features keep it whatever the request's KV precision)."""
    per_value = physics.kv_bytes_per_value() if bytes_per_value is None else bytes_per_value
    state = (_fill(cols.num("llm_state_values_per_sequence"), 0.0) if "llm_state_values_per_sequence" in cols
             else 0.0)  # linear-attention / state-space layers' fixed state: none where the catalog has no column
    return _fill(physics.kv_bytes_per_sequence(context_tokens, *_kv_layout(cols), per_value, state), 0.0)


def _kv_value_bytes(cols: _Columns) -> np.ndarray:
    """Bytes per cached K or V value per row: its `kv_precision` (physics.kv_bytes_per_value), 16-bit where the
    frame has none (no measured run states a quantised KV cache)."""
    if "kv_precision" not in cols.frame:
        return np.full(len(cols.frame), physics.kv_bytes_per_value())
    return per_distinct(lambda v: physics.kv_bytes_per_value(v if isinstance(v, str) else None),
                        cols.frame["kv_precision"].to_numpy(dtype=object))


def _weight_bytes(cols: _Columns, column: str, fallback) -> np.ndarray:
    """Bytes per weight per row from a precision column (workload.PRECISION_BYTES), `fallback` where the frame has no
    such column or the cell is not a known precision."""
    fallback = np.broadcast_to(np.asarray(fallback, dtype=float), (len(cols.frame),))
    if column not in cols.frame:
        return np.array(fallback, dtype=float)
    known = per_distinct(lambda v: PRECISION_BYTES.get(v, np.nan) if isinstance(v, str) else np.nan,
                         cols.frame[column].to_numpy(dtype=object))
    return np.where(np.isnan(known), fallback, known)


# The accelerator family: the GPU's vendor, except architectures that are another chip line of that vendor, with
# software of its own (SEPARATE_FAMILIES). Intel's data-center GPUs (Xe, oneAPI / SYCL) and its Gaudi accelerators
# (matrix engines beside tensor processor cores, programmed through SynapseAI) share a vendor and no kernel:
# LLM-Inference-Bench measured a Max 1550 at about 20 x its decode-step physics and a Gaudi 2 at about 1.7 x. As one
# `vendor is Intel` input, each of the two, held out, was answered with the other's speed (LOGO ITL: Gaudi 2 predicted
# 9.3 x its measured ITL), and a Gaudi 3 asked with vLLM got the Max 1550's vLLM (160 ms per token for an 8B model).
# The family is a model input (FAMILY_FEATURES: NVIDIA, the reference, has none) and what the bands abstain by
# (modeling.intervals: a family no training row has).
SEPARATE_FAMILIES = {"gaudi": "Intel Gaudi"}  # architecture name (lower case) contains -> family
FAMILY_FEATURES = {"gpu_is_amd": "amd", "gpu_is_intel": "intel", "gpu_is_gaudi": "intel gaudi"}  # -> family, lower case


def accelerator_family(vendor, architecture) -> str:
    """A GPU's accelerator family from its catalog vendor and architecture: the vendor as given, or the family of
    SEPARATE_FAMILIES its architecture names ('Intel Gaudi'); '' where the vendor is not given."""
    arch = text(architecture).lower()
    return next((family for key, family in SEPARATE_FAMILIES.items() if key in arch), text(vendor).strip())


def accelerator_families(frame: pd.DataFrame) -> np.ndarray:
    """accelerator_family per row of a frame with `gpu_vendor` and `gpu_architecture` (absent: '')."""
    n = len(frame)
    columns = [frame[c].to_numpy(dtype=object) if c in frame else np.full(n, "", dtype=object)
               for c in ("gpu_vendor", "gpu_architecture")]
    return per_distinct(accelerator_family, *columns, dtype=object).astype(str).reshape(n)


READ_ONE_BY_ONE = 8  # columns _Columns reads one at a time before it reads every numeric one at once


class _Columns(dict):
    """The features being built (name -> float array) over the frame they are built from: `num` reads a built
    column first, else the frame's own as floats. Features are computed on arrays and joined to the frame once
    (a column at a time into a DataFrame costs more than computing it)."""

    def __init__(self, frame: pd.DataFrame):
        super().__init__()
        self.frame = frame
        self._read: dict[str, np.ndarray] = {}  # the frame's columns as floats, each read once
        self.kv_layout: tuple | None = None  # _kv_layout's answer, worked out once

    def __contains__(self, name) -> bool:
        return dict.__contains__(self, name) or name in self.frame

    def num(self, name: str) -> np.ndarray:
        if dict.__contains__(self, name):
            return self[name]
        if name not in self._read:
            if len(self._read) == READ_ONE_BY_ONE:  # many columns wanted: the frame's numeric ones in one pass
                self._read = {**float_columns(self.frame), **self._read}
            if name not in self._read:
                self._read[name] = self.frame[name].to_numpy(dtype=float)
        return self._read[name]

    def text(self, name: str, default: str, test) -> np.ndarray:
        """`test` (str -> bool) of each value as text (absent column: of `default`), as 0/1 floats."""
        if name not in self.frame:
            return np.full(len(self.frame), float(test(default)))
        return per_distinct(lambda v: float(test(str(v))), self.frame[name].to_numpy(dtype=object))

    def joined(self) -> pd.DataFrame:
        """The frame with the built columns (a new frame; the input untouched)."""
        built = {k: v for k, v in self.items() if k not in self.frame}
        # one block per dtype (arrays.frame): a frame built from a dict checks each column apart
        out = pd.concat([self.frame, frame(built, index=self.frame.index)], axis=1)
        for k in self.keys() - built.keys():
            out[k] = self[k]
        return out


def _fill(values: np.ndarray, fallback) -> np.ndarray:
    """`values` with NaN replaced by `fallback` (a scalar or an array of the same length)."""
    return np.where(np.isnan(values), fallback, values)


def _log(values) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(values)


def engineer(df: pd.DataFrame, offline_batch: float, inputs: dict[str, np.ndarray] | None = None) -> pd.DataFrame:
    """Add every derived feature (`offline_batch`: sequences decoded together offline, params.yaml
    `evaluate.roofline_offline_batch`; `inputs`: more input columns, name -> one float per row, joined with the
    features). Pure: a new frame, the input untouched."""
    out = _Columns(df)
    out.update(inputs or {})
    n_gpus = out.num("n_gpus") if "n_gpus" in out else 1.0
    params_total = out.num("llm_total_params_b")
    params_active = out.num("llm_active_params_b")
    offline = df["scenario"].to_numpy() == "offline"
    bandwidth_gb_s = out.num("gpu_memory_bandwidth_gb_s")

    with np.errstate(divide="ignore", invalid="ignore"):
        out["boost_ratio"] = out.num("gpu_boost_clock_mhz") / out.num("gpu_base_clock_mhz")
        out["log_total_params_b"] = _log(params_total)
        out["log_active_params_b"] = _log(params_active)
        # Time to stream the FP16 weights once: 2 bytes x params / bandwidth (GB / (GB/s) = s).
        out["bandwidth_latency_s"] = physics.weight_stream_s(params_active, bandwidth_gb_s)
        # Time to compute one token at peak dense FP16 tensor throughput: 2 FLOPs x active params / FLOP/s (a mixture
        # of experts computes only the experts a token is routed to).
        out["compute_latency_s"] = physics.compute_s(params_active, out.num("gpu_fp16_tensor_tflops"))
        kv_bytes = out["kv_bytes_per_token"] = _kv_bytes_per_token(out)
        out["kv_cache_bytes"] = _kv_bytes_per_sequence(out, np.full(len(df), float(PAPER_KV_TOKENS)))
        # Memory left after the FP16 weights (GB), and the paper's usable variant (vLLM's gpu_memory_utilization).
        mem = out.num("gpu_memory_gb") * n_gpus
        out["free_memory_gb"] = mem - physics.weights_gb(params_total)
        available = out["available_memory_gb"] = physics.MEMORY_UTILIZATION * mem - physics.weights_gb(params_total)
        # The paper's estimate of concurrent requests: MHA KV size (ignores GQA), 1,256 tokens per request.
        mha_values = physics.kv_values_per_layer(1, out.num("llm_hidden_size"))  # the paper's: every head, no GQA
        mb_per_token = physics.kv_bytes_per_token(out.num("llm_num_layers"), mha_values) / 1024**2
        out["max_concurrent_requests"] = available * 1024 / mb_per_token / PAPER_TOKENS_PER_REQUEST
        # GQA-aware KV capacity in tokens (0 where the weights do not fit).
        kv = np.where(kv_bytes == 0, np.nan, kv_bytes)
        out["kv_capacity_tokens"] = _fill(np.where(available < 0, 0.0, available) * 1e9 / kv, 1e9)
        out["request_rate_feature"] = np.where(~offline, out.num("request_rate_per_s"), OFFLINE_RATE)
        # Roofline ITL: weights streamed once per decode step, shared by `offline_batch` sequences offline.
        out["roofline_itl_s"] = physics.roofline_itl_s(params_total, bandwidth_gb_s,
                                                       np.where(offline, offline_batch, 1.0))
        if "gpu_idle_power_w" in out:
            out["idle_power_ratio"] = out.num("gpu_idle_power_w") / out.num("gpu_tdp_w")
        _physics_features(out, offline, offline_batch)
        if "concurrency" in out:
            _workload_features(out)
    return out.joined()


# The features that change with the requests in flight (the Poisson fixed point recomputes only these).
CONCURRENCY_FEATURES = ("weights_step_s", "itl_physics_s", "log_weights_step_s", "log_itl_physics_s", "log_batch",
                        "concurrency_duty", "busy_fraction", "running_sequences")


def _workload_features(out: _Columns) -> None:
    """Workload-aware physics (added to `out`): one decode step of `b = max(concurrency, 1)` sequences, each
    getting one token, takes about

        ITL(b) = T_weights(b) + b x (T_kv + T_compute + T_comm + T_seq) + T_fixed

    (the physics, with the formulas, is in wattgpu.physics; this builds its columns):
    - T_weights (`weights_step_s`): physics.weights_read_per_step_bytes over the tensor-parallel GPUs' memory
      bandwidth; a MoE step reads the shared weights and the share of experts its b sequences touch;
    - T_kv (`kv_step_per_sequence_s`): one sequence's KV cache (prompt + half the answer, on average) read per step;
    - T_compute (`compute_step_per_sequence_s`): physics.flops_per_generated_token (2 x active params, attention's
      QK^T and attention x V over the context, and the token's share of prefill) at the tensor-parallel GPUs' peak;
    - T_comm (`comm_step_per_sequence_s`): tensor parallelism's all-reduces of the token's activations over the
      GPU-to-GPU interconnect (physics.tensor_parallel_bytes_per_token, physics.interconnect_s; 0 on one GPU);
    - T_seq (`sequence_step_s`): each running sequence's overhead beyond its bytes and FLOPs (physics.
      SEQUENCE_STEP_S; a scale);
    - T_fixed (`fixed_step_s`): per-layer kernel launches and scheduling (physics.fixed_step_s; a scale), and each
      extra pipeline stage's hand-off (physics.pipeline_stage_s).

    Every term grows with b at most linearly, so ITL never falls as concurrency rises and throughput b / ITL never
    falls either. Features that depend on concurrency are listed in MONOTONE (modeling keeps predictions monotone
    in them); all others are functions of the GPU, the LLM and the rest of the workload only.
    """
    n = len(out.frame)
    step = _step_inputs(out)
    tp, pp, weight_bytes, total, active = step["tp"], step["pp"], step["weight_bytes"], step["total"], step["active"]
    prompt = out.num("prompt_tokens_mean")
    answer = np.maximum(out.num("output_tokens_mean"), 1.0)
    context_prompt = _fill(prompt, 0)
    layers, heads, head_dim = _attention_shape(out)
    out["weights_step_s"] = np.full(n, np.nan)  # placeholders keep the columns' order: _concurrency_features
    out["kv_step_per_sequence_s"] = _kv_bytes_per_sequence(out, _fill(prompt, 0) + answer / 2,
                                                           step["kv_bytes"]) / step["bandwidth"]
    flops = physics.flops_per_generated_token(active, layers, heads, head_dim, context_prompt, answer)
    out["compute_step_per_sequence_s"] = physics.compute_time_s(flops, out.num("gpu_fp16_tensor_tflops") * tp)
    out["comm_step_per_sequence_s"] = physics.interconnect_s(
        physics.tensor_parallel_bytes_per_token(layers, out.num("llm_hidden_size"), tp), step["interconnect_gb_s"])
    out["sequence_step_s"] = np.full(n, physics.SEQUENCE_STEP_S)
    out["fixed_step_s"] = physics.fixed_step_s(layers) + physics.pipeline_stage_s(layers, pp)
    out["itl_physics_s"] = np.full(n, np.nan)
    for col in ("weights_step_s", "kv_step_per_sequence_s", "compute_step_per_sequence_s",
                "comm_step_per_sequence_s", "sequence_step_s", "fixed_step_s", "itl_physics_s"):
        # an attention-free LLM reads no KV cache; one GPU all-reduces nothing
        out[f"log_{col}"] = np.log(np.maximum(out[col], 1e-9))
    engines = _answered_engines(out)
    out["running_cap"] = _running_cap(out, step, _fill(prompt, 0) + answer / 2, engines)
    out.update(_concurrency_features(out, out.num("concurrency"), step))
    # Open-loop load (requests arrive at a rate, the GPU idles between them) or a closed batch (always full).
    out["poisson_arrivals"] = (~np.isnan(out.num("request_rate_per_s"))).astype(float) \
        if "request_rate_per_s" in out else np.zeros(n)
    # How many such sequences the KV cache holds beside the weights (a batch near it preempts and recomputes).
    tokens = _fill(prompt, 0) + answer
    weights_gb = physics.weights_gb(total, weight_bytes, step["expert_params"], step["expert_bytes"])
    fit = physics.kv_fit_sequences(out.num("gpu_memory_gb"), tp * pp, weights_gb,
                                   _kv_bytes_per_sequence(out, tokens, step["kv_bytes"]))
    out["log_kv_fit_sequences"] = np.log(np.clip(fit, 1.0, 1e6))
    out["log_tensor_parallel"], out["log_pipeline_parallel"] = np.log(tp), np.log(np.broadcast_to(pp, n))
    # bytes per weight over the whole model (the experts' own precision weighed in) and per KV value
    out["weight_bytes_per_param"] = physics.mean_bytes_per_param(total, weight_bytes, step["expert_params"],
                                                                 step["expert_bytes"])
    out["kv_bytes_per_value"] = step["kv_bytes"]
    out["log_prompt_tokens"] = np.log(np.maximum(prompt, 1.0))  # NaN where the source does not say
    out["prompt_unknown"] = np.isnan(prompt).astype(float)
    out["log_active_params_b"] = np.log(active)
    out["active_share"] = active / total
    # an engine no source measured is featured as the measured family and release it is answered as
    # (workload.ENGINE_PROXIES; flagged by modeling.coverage)
    family = np.array([a[0] for a in engines], dtype=object)
    for name in MEASURED_ENGINES:
        out[f"engine_{name}"] = (family == name).astype(float)
    # the release (a model input; estimator.as_measured_release answers an unmeasured one as a measured release of
    # its generation) and its generation (workload.ENGINE_GENERATIONS)
    out["engine_version_num"] = np.array([a[2] for a in engines], dtype=float)
    out["engine_generation"] = np.array([a[3] for a in engines], dtype=float)
    family = np.char.lower(accelerator_families(out.frame))
    for name, value in FAMILY_FEATURES.items():
        out[name] = (family == value).astype(float)
    out["weights_memory_fraction_replica"] = weights_gb / (out.num("gpu_memory_gb") * tp * pp)


def _attention_shape(cols: _Columns) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(layers, attention heads, head dim) of each row's LLM for its attention FLOPs: head dim where the config
    gives it, else hidden size // heads; 0 heads for an attention-free LLM (no attention FLOPs)."""
    unset = np.full(len(cols.frame), np.nan)
    heads = cols.num("llm_num_attention_heads") if "llm_num_attention_heads" in cols else unset
    with np.errstate(divide="ignore", invalid="ignore"):
        head_dim = _fill(cols.num("llm_head_dim") if "llm_head_dim" in cols else unset,
                         np.floor(cols.num("llm_hidden_size") / heads))
    return cols.num("llm_num_layers"), _fill(heads, 0.0), _fill(head_dim, 0.0)


def _step_inputs(cols: _Columns) -> dict:
    """What a decode step's terms are built from: parallelism, bytes per weight (`weight_bytes`; the routed experts'
    `expert_bytes` where the row gives an `expert_precision`, else the same) and per KV value (`kv_bytes`, the row's
    `kv_precision`, else 16-bit), the replica's memory bandwidth (`bandwidth`: bytes/s; `bandwidth_gb_s`), the
    GPU-to-GPU interconnect (where the spec does not give it, PCIe Gen4 x16: physics.PCIE_GEN4_X16_GB_S) and the
    MoE layout (parameters, experts per token, experts, the routed experts' parameters `expert_params`)."""
    n_gpus = cols.num("n_gpus")
    tp = _fill(cols.num("tensor_parallel"), n_gpus) if "tensor_parallel" in cols else n_gpus
    pp = _fill(cols.num("pipeline_parallel"), 1.0) if "pipeline_parallel" in cols else 1.0
    weight_bytes = _weight_bytes(cols, "precision", physics.BYTES_FP16)
    expert_bytes = _weight_bytes(cols, "expert_precision", weight_bytes)
    total, active = cols.num("llm_total_params_b"), cols.num("llm_active_params_b")
    experts = cols.num("llm_num_experts") if "llm_num_experts" in cols else np.full(len(total), np.nan)
    top_k = cols.num("llm_experts_per_token") if "llm_experts_per_token" in cols else experts
    interconnect = cols.num("gpu_interconnect_bandwidth_gb_s") if "gpu_interconnect_bandwidth_gb_s" in cols \
        else np.full(len(total), np.nan)
    bandwidth_gb_s = cols.num("gpu_memory_bandwidth_gb_s")
    return {"tp": tp, "pp": pp, "weight_bytes": weight_bytes, "expert_bytes": expert_bytes,
            "kv_bytes": _kv_value_bytes(cols), "bandwidth": bandwidth_gb_s * 1e9 * tp,
            "bandwidth_gb_s": bandwidth_gb_s * tp, "interconnect_gb_s": _fill(interconnect, physics.PCIE_GEN4_X16_GB_S),
            "total": total, "active": active, "top_k": top_k, "experts": experts,
            "expert_params": physics.moe_expert_params_b(total, active, top_k, experts)}


def _answered_engines(cols: _Columns) -> np.ndarray:
    """Per row, the (family, release, release number, generation) its engine and release are answered as: an engine
    no source measured as the measured family's release (workload.measured_engine, ENGINE_PROXIES); each distinct
    pair once."""
    n = len(cols.frame)
    engine = cols.frame["engine"].to_numpy() if "engine" in cols else np.full(n, DEFAULT_ENGINE, dtype=object)
    version = cols.frame["engine_version"].to_numpy() if "engine_version" in cols else np.full(n, "", dtype=object)

    def answered(e, v) -> tuple[str, str, float, float]:
        family, release = measured_engine(text(e), text(v))
        return family, release, version_number(release), engine_generation(family, release)

    return per_distinct(answered, engine, version, dtype=object)


def _running_cap(cols: _Columns, step: dict, mean_context, engines: np.ndarray) -> np.ndarray:
    """The most sequences one decode step of the row's replica runs (physics.running_sequences): those whose KV
    cache at the mean context a running sequence holds (prompt + half the answer: a paged cache grows with the
    answer) fits beside the weights, and for vLLM's V1 engine (0.9 on: what a user runs today; workload.
    vllm_default_max_num_seqs, the rule ingest applies to offline runs) its default max_num_seqs. Older releases and
    other engines: the KV fit only (ML.ENERGY's vLLM 0.5.4 runs hold more than V0's 256 default: raised by the lab).
    `engines`: the rows' _answered_engines."""
    weights = physics.weights_gb(step["total"], step["weight_bytes"], step["expert_params"], step["expert_bytes"])
    gpus, memory = step["tp"] * step["pp"], cols.num("gpu_memory_gb")
    fit = physics.kv_fit_sequences(memory, gpus, weights, _kv_bytes_per_sequence(cols, mean_context, step["kv_bytes"]))
    # weights that leave no room (the memory rule says so to the user) are answered as if they fitted: no cap
    fit = np.where(weights < physics.MEMORY_UTILIZATION * memory * gpus, fit, np.inf)
    v1 = np.array([f == "vllm" and g >= 1 for f, _, _, g in engines], dtype=bool)
    cap = np.full(len(fit), np.inf)
    if v1.any():
        gpu = cols.frame["gpu"].to_numpy()[v1] if "gpu" in cols else np.full(int(v1.sum()), "", dtype=object)
        release = np.array([r for _, r, _, _ in engines[v1]], dtype=object)
        cap[v1] = default_max_num_seqs(memory[v1], gpu, release)
    return np.minimum(fit, cap)


def _concurrency_features(cols: _Columns, concurrency: np.ndarray, step: dict) -> dict[str, np.ndarray]:
    """CONCURRENCY_FEATURES at `concurrency` requests in flight, from the decode step's other terms in `cols`: the
    step runs b = physics.running_sequences of them (`running_cap`: _running_cap; the rest wait)."""
    c = np.asarray(concurrency, dtype=float)
    b = physics.running_sequences(c, cols.num("running_cap") if "running_cap" in cols else np.inf)
    weights = physics.read_s(physics.weights_read_per_step_bytes(step["total"], step["active"], step["top_k"],
                                                                 step["experts"], b, step["weight_bytes"],
                                                                 step["expert_bytes"]),
                             step["bandwidth_gb_s"])
    per_sequence = cols.num("kv_step_per_sequence_s") + cols.num("compute_step_per_sequence_s") \
        + cols.num("comm_step_per_sequence_s") + cols.num("sequence_step_s")
    itl = weights + b * per_sequence + cols.num("fixed_step_s")
    return {"weights_step_s": weights, "itl_physics_s": itl, "log_weights_step_s": np.log(np.maximum(weights, 1e-9)),
            "log_itl_physics_s": np.log(np.maximum(itl, 1e-9)), "log_batch": np.log(b),
            "concurrency_duty": np.minimum(c, 1.0),  # a Poisson load below one request in flight leaves the GPU idle
            "busy_fraction": 1.0 - np.exp(-c),  # share of time with a request in flight (Poisson arrivals, mean c)
            "running_sequences": b}


def with_concurrency(featured: pd.DataFrame, concurrency) -> pd.DataFrame:
    """Featured rows (engineer's output) at other requests in flight: `concurrency` and CONCURRENCY_FEATURES
    recomputed, every other column as it was; equal to engineering the rows anew at that concurrency."""
    out = featured.copy()
    out["concurrency"] = np.asarray(concurrency, dtype=float)
    for name, values in concurrency_sweep(featured)(np.arange(len(out)), out["concurrency"].to_numpy()).items():
        out[name] = values
    return out


# The columns of featured rows that CONCURRENCY_FEATURES are computed from (_concurrency_features), besides the step
# inputs (_step_inputs).
_CONCURRENCY_INPUTS = ("running_cap", "kv_step_per_sequence_s", "compute_step_per_sequence_s",
                       "comm_step_per_sequence_s", "sequence_step_s", "fixed_step_s")


class _Arrays(dict):
    """Columns already read as float arrays (name -> array), read as _Columns reads a frame's."""

    def num(self, name: str) -> np.ndarray:
        return self[name]


def concurrency_sweep(featured: pd.DataFrame):
    """(positions, concurrency) -> CONCURRENCY_FEATURES of `featured.iloc[positions]` at `concurrency` requests in
    flight ({name: values}: with_concurrency's columns, the same numbers), with everything that does not depend on
    the requests in flight read and worked out once: the Poisson fixed point asks the same rows at many."""
    cols = _Columns(featured)
    step = _step_inputs(cols)
    inputs = {name: cols.num(name) for name in _CONCURRENCY_INPUTS if name in cols}

    def at(positions: np.ndarray, concurrency) -> dict[str, np.ndarray]:
        rows = _Arrays({name: values[positions] for name, values in inputs.items()})
        taken = {k: v[positions] if np.ndim(v) else v for k, v in step.items()}
        with np.errstate(divide="ignore", invalid="ignore"):
            return _concurrency_features(rows, concurrency, taken)

    return at


def has_replica_shape(featured: pd.DataFrame) -> np.ndarray:
    """Per row, whether its replica has a shape the models were not trained on (expert parallel, DP attention,
    speculative decoding): where it has, replica_shape_ratio depends on the requests in flight."""
    return _shape(_Columns(featured))["shaped"]


# ------------------------------------------------------------------------------------------------- the replica's shape
# Request columns of the replica's shape (workload.REPLICA_SHAPE) and the values a frame without them has.
SHAPE_COLUMNS = {"expert_parallel": 1.0, "dp_attention": False, "speculative": "none", "spec_draft_tokens": np.nan,
                 "spec_accept_length": np.nan}


def _shape(cols: _Columns) -> dict[str, np.ndarray]:
    """Each row's replica shape: expert parallel N, DP attention, the speculative method, draft tokens d and accept
    length a (0 and 1 without speculation; the method's defaults, workload.SPECULATIVE, where not given), and
    `shaped`: whether any differs from the plain tensor-parallel replica the models were trained on."""
    n = len(cols.frame)
    frame = cols.frame
    ep = _fill(frame["expert_parallel"].to_numpy(dtype=float), 1.0) if "expert_parallel" in frame else np.ones(n)
    dp = frame["dp_attention"].fillna(False).to_numpy(dtype=bool) if "dp_attention" in frame else np.zeros(n, bool)
    method = frame["speculative"].fillna("none").astype(str).to_numpy() if "speculative" in frame \
        else np.full(n, "none", dtype=object)
    given = {k: frame[k].to_numpy(dtype=float) if k in frame else np.full(n, np.nan)
             for k in ("spec_draft_tokens", "spec_accept_length")}
    draft, accept = np.zeros(n), np.ones(n)
    for m in set(method) & set(SPECULATIVE):
        at = method == m
        d, a = zip(*(spec_defaults(m, x, y) for x, y in zip(given["spec_draft_tokens"][at],
                                                             given["spec_accept_length"][at])))
        draft[at], accept[at] = d, a
    return {"ep": ep, "dp": dp, "method": method, "draft": draft, "accept": accept,
            "shaped": (ep > 1) | dp | (draft > 0)}


def replica_shape_ratio(featured: pd.DataFrame) -> np.ndarray:
    """Per row, what its replica's shape (expert parallel, DP attention, speculative decoding) does to the ITL: the
    models' ITL for the same replica without them times this is the ITL per emitted token with them
    (physics.replica_itl_ratio of physics.replica_step_s with and without, at the row's requests in flight). Exactly
    1 where the row has none of them (every measured row, every request that leaves them out)."""
    cols = _Columns(featured)
    shape = _shape(cols)
    ratio = np.ones(len(featured))
    if not shape["shaped"].any():
        return ratio
    at = np.flatnonzero(shape["shaped"])
    sub = _Columns(featured.iloc[at])
    shape = {k: v[at] for k, v in shape.items()}
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio[at] = _shape_ratio(sub, shape)
    return ratio


def _shape_ratio(cols: _Columns, shape: dict[str, np.ndarray]) -> np.ndarray:
    step = _step_inputs(cols)
    tp, pp, total, active = step["tp"], step["pp"], step["total"], step["active"]
    b = np.maximum(cols.num("concurrency"), 1.0)
    prompt = _fill(cols.num("prompt_tokens_mean"), 0.0)
    answer = np.maximum(cols.num("output_tokens_mean"), 1.0)
    layers, heads, head_dim = _attention_shape(cols)
    bandwidth, tflops = cols.num("gpu_memory_bandwidth_gb_s"), cols.num("gpu_fp16_tensor_tflops")
    hidden = cols.num("llm_hidden_size")
    moe = step["expert_params"] > 0
    top_k = _fill(step["top_k"], 1.0)

    def weights_read(tokens):
        return physics.weights_read_per_step_bytes(total, active, step["top_k"], step["experts"], tokens,
                                                   step["weight_bytes"], step["expert_bytes"])

    attention = physics.attention_weight_bytes(_dp_attention_params_b(cols), step["weight_bytes"])
    kv = _kv_bytes_per_sequence(cols, prompt + answer / 2, step["kv_bytes"])
    latent = ~np.isnan(cols.num("llm_kv_values_per_layer")) if "llm_kv_values_per_layer" in cols \
        else np.zeros(len(b), bool)
    kv_heads = cols.num("llm_num_kv_heads") if "llm_num_kv_heads" in cols else np.full(len(b), np.nan)
    linear = physics.linear_flops_per_token(active)
    decode = linear + physics.attention_flops_per_token(layers, heads, head_dim,
                                                        physics.decode_context_tokens(prompt, answer))
    prefill = prompt * (linear + physics.attention_flops_per_token(layers, heads, head_dim, prompt / 2)) / answer
    fixed = physics.fixed_step_s(layers) + physics.pipeline_stage_s(layers, pp)
    common = dict(prefill_flops_per_token=prefill, fixed_s=fixed, tensor_parallel=tp, bandwidth_gb_s=bandwidth,
                  tflops=tflops, interconnect_gb_s=step["interconnect_gb_s"],
                  sequence_s=physics.SEQUENCE_STEP_S)
    without = physics.replica_step_s(
        b, weights_read(b), attention, kv, physics.kv_shards(tp, kv_heads, latent, False), decode,
        comm_bytes_per_token=physics.replica_comm_bytes_per_token(layers, hidden, tp), **common)
    verify, accept, draft = shape["draft"] + 1, shape["accept"], shape["draft"]
    draft_layers = np.array([physics.DRAFT_LAYERS.get(m, 0) for m in shape["method"]], dtype=float)
    # MTP: one of the target's own layers (its experts too); EAGLE: one dense layer of the target's width
    layer_read = np.where(shape["method"] == "mtp", weights_read(b) / layers, active * 1e9 * step["weight_bytes"]
                          / layers)
    vocab = cols.num("llm_vocab_size") if "llm_vocab_size" in cols else np.zeros(len(b))
    draft_s = physics.draft_pass_s(draft_layers, layer_read, _fill(vocab, 0.0) * hidden / 1e9,
                                   physics.linear_flops_per_token(active / layers), b, tp, bandwidth, tflops,
                                   step["weight_bytes"])
    with_ = physics.replica_step_s(
        b, weights_read(b * verify), attention, kv, physics.kv_shards(tp, kv_heads, latent, shape["dp"]), decode,
        comm_bytes_per_token=physics.replica_comm_bytes_per_token(layers, hidden, tp, shape["ep"], shape["dp"], moe,
                                                                  top_k),
        dp_attention=shape["dp"], verify_tokens=verify, accept_length=accept, draft_tokens=draft, draft_s=draft_s,
        **common)
    return physics.replica_itl_ratio(with_, without, accept)


def _dp_attention_params_b(cols: _Columns) -> np.ndarray:
    """Per row, the parameters (billions) DP attention holds whole on every GPU (physics.dp_attention_params_b): the
    LLM's `attention_params_b` counted from its config where the row has it, else the estimate from its attention
    layers' shape."""
    _, heads, head_dim = _attention_shape(cols)
    full, sliding, _, values = _kv_layout(cols)
    counted = cols.num("llm_attention_params_b") if "llm_attention_params_b" in cols \
        else np.full(len(cols.frame), np.nan)
    return physics.dp_attention_params_b(counted, _fill(full + sliding, 0.0), cols.num("llm_hidden_size"), heads,
                                         head_dim, _fill(values, 0.0))


def replica_fit_ratio(rows: pd.DataFrame, context_tokens) -> np.ndarray:
    """Per row, the sequences whose KV cache (at `context_tokens`) fits beside the weights under DP attention
    (physics.kv_fit_sequences with the attention weights whole on every GPU, each sequence cached whole on one
    GPU) over those today's rule for the replica holds (physics.kv_fit_sequences: the replica's memory pooled, the
    KV cache split evenly). The rule is kept for every other row; DP attention's fit is physical, so it is not
    scaled from the rule (which already splits a latent (MLA) KV cache that tensor parallelism would replicate).
    Exactly 1 where the row has no DP attention."""
    cols = _Columns(rows)
    shape = _shape(cols)
    ratio = np.ones(len(rows))
    at = np.flatnonzero(shape["dp"])
    if not len(at):
        return ratio
    cols = _Columns(rows.iloc[at])
    step = _step_inputs(cols)
    tp, pp = step["tp"], step["pp"]
    attention_gb = physics.attention_weight_bytes(_dp_attention_params_b(cols), step["weight_bytes"]) / 1e9
    weights = physics.weights_gb(step["total"], step["weight_bytes"], step["expert_params"], step["expert_bytes"])
    per_gpu = weights / (tp * pp)
    kv = _kv_bytes_per_sequence(cols, np.asarray(context_tokens, dtype=float)[at], step["kv_bytes"])
    memory = cols.num("gpu_memory_gb")
    with np.errstate(divide="ignore", invalid="ignore"):
        base = physics.kv_fit_sequences(memory, tp * pp, weights, kv)
        # every GPU holds its weight share plus the rest of the attention weights; the KV cache splits by sequence
        dp = physics.kv_fit_sequences(memory, tp * pp, (per_gpu + attention_gb * (1 - 1 / tp) / pp) * tp * pp, kv)
        ratio[at] = _fill(dp / base, 1.0)
    return ratio


def _physics_features(out: _Columns, offline: np.ndarray, offline_batch: float) -> None:
    """The physics-informed features (added to `out`).

    Trees cannot extrapolate to a GPU faster than any seen one; a target normalised by a physical estimate can
    (modeling.targets.PhysicsTarget), and these features describe how far a row sits from that estimate.
    """
    tokens_out = out.num("output_tokens_mean")
    tokens_seq = out.num("prompt_tokens_mean") + tokens_out
    bw_s, compute_s = out["bandwidth_latency_s"], out["compute_latency_s"]
    n_gpus = out.num("n_gpus") if "n_gpus" in out else 1.0

    out["log_bandwidth_latency_s"] = np.log(bw_s)
    out["log_compute_latency_s"] = np.log(compute_s)
    # < 1: a batch-1 decode step is memory-bound (weights streamed faster than computed is impossible).
    out["log_compute_bandwidth_ratio"] = np.log(compute_s / bw_s)
    # Offered load in GPU-seconds of weight streaming per second: rate x tokens/request x s/token at batch 1.
    # Offline uses the paper's "arbitrarily large" rate, so it saturates.
    rate = np.where(~offline, out.num("request_rate_per_s"), OFFLINE_RATE)
    demand = rate * tokens_out * bw_s
    out["log_demand"] = np.log(demand)
    # Fraction of time the GPU is busy decoding (server); 1 offline.
    out["duty_cycle"] = np.minimum(1.0, demand)
    # Sequences decoded together offline: vLLM's batch cap, or fewer when the KV cache (GQA-aware, after the
    # FP16 weights, 90 % of memory) cannot hold them all; one sequence at a time in server mode.
    kv_batch = np.clip(out["kv_capacity_tokens"] / tokens_seq, 1.0, offline_batch)
    effective_batch = out["effective_batch"] = np.where(offline, kv_batch, 1.0)
    # Refined roofline ITL: per token, the weights streamed once per step and shared by the batch, or the
    # FLOPs of one token at peak tensor throughput, whichever is slower.
    out["physics_itl_s"] = np.maximum(bw_s / effective_batch, compute_s)
    out["log_physics_itl_s"] = np.log(out["physics_itl_s"])
    # Per-layer kernel launches dominate the ITL of small models; per token they are shared by the batch.
    out["log_num_layers"] = np.log(out.num("llm_num_layers"))
    out["log_layers_per_sequence"] = out["log_num_layers"] - np.log(effective_batch)
    out["log_kv_capacity_tokens"] = np.log(np.maximum(out["kv_capacity_tokens"], 1.0))
    out["log_hidden_size"] = np.log(out.num("llm_hidden_size"))
    out["log_output_tokens"] = np.log(np.maximum(tokens_out, 1.0))
    out["log_request_rate_per_s"] = np.log(rate)
    out["is_offline"] = offline.astype(float)
    # GPU spec sheet on log scales, and per TDP watt (efficiency sets how close to TDP a workload runs).
    tdp_w, memory_gb = out.num("gpu_tdp_w"), out.num("gpu_memory_gb")
    out["log_tdp_w"] = np.log(tdp_w)
    out["log_memory_gb"] = np.log(memory_gb)
    out["log_memory_bandwidth_gb_s"] = np.log(out.num("gpu_memory_bandwidth_gb_s"))
    out["log_fp16_tensor_tflops"] = np.log(out.num("gpu_fp16_tensor_tflops"))
    out["bandwidth_per_tdp_gb_s_w"] = out.num("gpu_memory_bandwidth_gb_s") / tdp_w
    out["tflops_per_tdp_w"] = out.num("gpu_fp16_tensor_tflops") / tdp_w
    out["is_gddr"] = out.text("gpu_memory_type", "", lambda v: v.upper().startswith("GDDR"))
    # Share of GPU memory the FP16 weights take (2 bytes x params / memory).
    out["weights_memory_fraction"] = physics.weights_gb(out.num("llm_total_params_b")) / (memory_gb * n_gpus)


def load_scaled_tdp_w(rows: pd.DataFrame, rho: dict[str, float]) -> np.ndarray:
    """The load-scaled TDP estimate of each row: its scenario's share `rho` (params.yaml `evaluate.load_rho`)
    of the GPU's power limit."""
    unknown = set(rows["scenario_label"]) - set(rho)
    if unknown:
        raise ValueError(f"load_rho has no value for scenario(s) {sorted(unknown)}; it has {sorted(rho)}")
    return physics.load_scaled_tdp_w(rows["gpu_tdp_w"].to_numpy(dtype=float),
                                     rows["scenario_label"].map(rho).to_numpy(dtype=float))


@dataclass(frozen=True)
class FeatureSet:
    """A named list of model inputs; `categorical` ones are ordinal-encoded, the rest numeric. `monotone`: the inputs
    a model's prediction must not fall in (+1), e.g. those that grow with concurrency."""

    name: str
    numeric: tuple[str, ...]
    categorical: tuple[str, ...] = ()
    monotone: tuple[str, ...] = ()

    @property
    def monotone_signs(self) -> list[int]:
        """+1 / 0 per column (the order of `columns`), for gradient boosting's monotone constraints."""
        return [1 if c in self.monotone else 0 for c in self.columns]

    @property
    def columns(self) -> list[str]:
        return [*self.numeric, *self.categorical]


# The paper's two feature sets (WattGPU notebook, §4.1 / §4.2), in our column names.
PAPER_POWER = FeatureSet(
    "paper_power",
    numeric=(
        "log_total_params_b", "llm_num_kv_heads", "llm_num_layers", "gpu_memory_bandwidth_gb_s",
        "boost_ratio", "idle_power_ratio", "gpu_base_clock_mhz", "gpu_release_year", "bandwidth_latency_s",
    ),
    categorical=("scenario_label", "llm_family"),
)
PAPER_ITL = FeatureSet(
    "paper_itl",
    numeric=(
        "llm_total_params_b", "llm_hidden_size", "llm_num_attention_heads", "llm_num_kv_heads", "llm_num_layers",
        "gpu_memory_bandwidth_gb_s", "gpu_memory_gb", "gpu_fp16_tensor_tflops", "gpu_release_year",
        "bandwidth_latency_s", "compute_latency_s",
    ),
    categorical=("scenario_label", "llm_family", "gpu_memory_type"),
)

PHYSICS = FeatureSet(
    "physics",
    numeric=(
        "log_bandwidth_latency_s", "log_compute_latency_s", "log_compute_bandwidth_ratio", "log_demand",
        "duty_cycle", "effective_batch", "log_physics_itl_s", "log_num_layers", "log_layers_per_sequence",
        "log_kv_capacity_tokens", "log_hidden_size", "log_total_params_b", "log_output_tokens",
        "log_request_rate_per_s", "is_offline", "log_tdp_w", "log_memory_gb", "log_memory_bandwidth_gb_s",
        "log_fp16_tensor_tflops", "bandwidth_per_tdp_gb_s_w", "tflops_per_tdp_w", "is_gddr",
        "weights_memory_fraction", "gpu_release_year", "boost_ratio",
    ),
)
# The roofline quantities and the workload without raw spec-sheet columns (TDP, memory size, year, per-watt
# ratios): trees on these cannot tell GPUs apart by identity, only by how fast they stream and compute.
PHYSICS_CORE = FeatureSet(
    "physics_core",
    numeric=(
        "log_physics_itl_s", "effective_batch", "log_compute_bandwidth_ratio", "log_num_layers",
        "log_layers_per_sequence", "log_hidden_size", "log_total_params_b", "log_output_tokens",
        "log_request_rate_per_s", "is_offline", "log_kv_capacity_tokens", "weights_memory_fraction",
        "log_bandwidth_latency_s", "log_compute_latency_s", "is_gddr", "duty_cycle", "log_demand",
    ),
)
# The paper's power set without `idle_power_ratio`: idle power is measured, not on spec sheets.
PAPER_POWER_SPEC = FeatureSet(
    "paper_power_spec",
    numeric=tuple(c for c in PAPER_POWER.numeric if c != "idle_power_ratio"),
    categorical=PAPER_POWER.categorical,
)
# feature set name (params.yaml `search.algorithms.*.feature_sets`) -> target -> FeatureSet
FEATURE_SETS: dict[str, dict[str, FeatureSet]] = {
    "paper": {"power": PAPER_POWER_SPEC, "itl": PAPER_ITL},
    "physics": {"power": PHYSICS, "itl": PHYSICS},
    "physics_core": {"power": PHYSICS_CORE, "itl": PHYSICS_CORE},
}

# Workload-aware sets (every source): the GPU, the LLM and the workload, no identity. Inputs that grow with
# concurrency are monotone: power and ITL never fall as requests in flight rise.
WORKLOAD_CONTEXT = (  # independent of concurrency
    "log_total_params_b", "log_active_params_b", "active_share", "log_num_layers", "log_hidden_size",
    "log_kv_step_per_sequence_s", "log_compute_step_per_sequence_s",
    "log_fixed_step_s", "log_tdp_w", "log_memory_gb", "log_memory_bandwidth_gb_s", "log_fp16_tensor_tflops",
    "bandwidth_per_tdp_gb_s_w", "tflops_per_tdp_w", "is_gddr", "gpu_release_year", *FAMILY_FEATURES,
    "weights_memory_fraction_replica", "log_tensor_parallel", "log_pipeline_parallel", "weight_bytes_per_param",
    "log_prompt_tokens", "prompt_unknown", "log_output_tokens", "poisson_arrivals", "log_kv_fit_sequences",
    *(f"engine_{e}" for e in MEASURED_ENGINES), "engine_version_num",
)
# Power's inputs leave out the raw prompt and output lengths: a decode step's power depends on them only through
# the work they put in the step (one sequence's KV read over its context, its FLOPs with the prompt's prefill share,
# how many sequences fit: the step features above), which is what transfers. As raw inputs the trees read them as a
# lab's signature: the measured long outputs are ML.ENERGY v2's and LLM-Inference-Bench's V0-engine runs, which drew
# far below Watt Counts' V1 runs at the same load, so a question with long outputs on a current engine was answered
# well below the same question with short ones (tests/code/test_step_power.py; the figures are in the closing note).
RAW_LENGTHS = ("log_prompt_tokens", "log_output_tokens")
WORKLOAD_POWER = FeatureSet("workload", numeric=("log_batch", "concurrency_duty", "busy_fraction",
                                                 *(c for c in WORKLOAD_CONTEXT if c not in RAW_LENGTHS)),
                            monotone=("log_batch", "concurrency_duty", "busy_fraction"))
WORKLOAD_ITL = FeatureSet("workload", numeric=("log_batch", "log_weights_step_s", "log_itl_physics_s",
                                              "log_sequence_step_s", *WORKLOAD_CONTEXT),
                          monotone=("log_batch", "log_weights_step_s", "log_itl_physics_s"))
FEATURE_SETS["workload"] = {"power": WORKLOAD_POWER, "itl": WORKLOAD_ITL}
