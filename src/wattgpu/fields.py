"""The one table of accepted field ranges: GPU spec-sheet fields, LLM config fields and workload fields.

Catalog entries (`catalogs.gpus.GpuSpec`, `catalogs.llms.LlmSpec`), config.json parsing, prediction requests
(`wattgpu.request`), the served model's documented schema and the CLI all check against these bounds, so a
value accepted in one place is accepted everywhere. Units are in the names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pydantic import Field


@dataclass(frozen=True)
class Bounds:
    """Closed range [lo, hi]; `integer`: whole numbers only."""

    lo: float
    hi: float
    integer: bool = False

    def as_list(self) -> list[float]:
        return [self.lo, self.hi]

    def field(self, **kwargs: Any):
        """A pydantic `Field` with these bounds."""
        return Field(ge=self.lo, le=self.hi, **kwargs)


GPU_SPEC: dict[str, Bounds] = {
    "tdp_w": Bounds(10, 2000),  # board (or module) power limit
    "memory_gb": Bounds(1, 1024),
    "memory_bandwidth_gb_s": Bounds(50, 20_000),
    "fp16_tensor_tflops": Bounds(1, 10_000),  # dense FP16/BF16 matrix, no sparsity
    "release_year": Bounds(2010, 2035, integer=True),
    "base_clock_mhz": Bounds(100, 4000),
    "boost_clock_mhz": Bounds(100, 4000),
    "sm_count": Bounds(1, 1000, integer=True),  # SMs (NVIDIA), CUs (AMD), Xe cores or TPCs (Intel)
    "fp32_tflops": Bounds(0.1, 1000),
    "transistors_m": Bounds(100, 1_000_000),
    "process_nm": Bounds(1, 100),
    "l2_cache_mb": Bounds(0.1, 1024),
    "memory_bus_bits": Bounds(32, 16_384, integer=True),
    # GPU-to-GPU bandwidth per GPU, both directions together (as NVIDIA quotes NVLink): NVLink / Infinity Fabric /
    # the scale-up links where the GPU has them, else its PCIe link (a PCIe Gen3 x16 card: 32 GB/s)
    "interconnect_bandwidth_gb_s": Bounds(8, 20_000),
}
GPU_SPEC_REQUIRED = ("tdp_w", "memory_gb", "memory_bandwidth_gb_s", "fp16_tensor_tflops", "release_year")
GPU_SPEC_TEXT = ("memory_type", "architecture", "vendor", "form_factor")

LLM_CONFIG: dict[str, Bounds] = {
    "total_params_b": Bounds(0.01, 10_000),
    "active_params_b": Bounds(0.01, 10_000),  # per token; equals total for dense models
    "num_layers": Bounds(1, 1000, integer=True),
    "hidden_size": Bounds(64, 1_000_000, integer=True),
    "num_attention_heads": Bounds(1, 10_000, integer=True),
    "num_kv_heads": Bounds(1, 10_000, integer=True),
    "head_dim": Bounds(8, 4096, integer=True),
    "intermediate_size": Bounds(16, 10_000_000, integer=True),
    "vocab_size": Bounds(100, 100_000_000, integer=True),
    "max_position_embeddings": Bounds(1, 100_000_000, integer=True),
    "num_experts": Bounds(1, 100_000, integer=True),
    "experts_per_token": Bounds(1, 100_000, integer=True),
    "kv_layers": Bounds(0, 1000, integer=True),  # layers caching the whole context (0: a window on every layer)
    "sliding_window": Bounds(1, 100_000_000, integer=True),  # tokens a sliding-window layer caches (the other layers)
    "kv_values_per_layer": Bounds(1, 1_000_000, integer=True),  # cached values per token and layer (latent attention)
    # fixed state of the linear-attention / state-space layers, values per sequence (Mamba, Gated DeltaNet, ...)
    "state_values_per_sequence": Bounds(0, 100_000_000_000, integer=True),
    # multi-token-prediction (next-n) layers that draft tokens for `speculative: mtp` (0: none; config.json's
    # num_nextn_predict_layers, mtp_num_hidden_layers or num_mtp_modules)
    "mtp_layers": Bounds(0, 1000, integer=True),
    # parameters (billions) of the token-mixing layers (attention, linear attention, state space), counted from
    # config.json by rule (catalogs.hf_config.attention_params_b): what DP attention holds whole on every GPU
    "attention_params_b": Bounds(0, 10_000),
}
LLM_CONFIG_REQUIRED = ("total_params_b", "num_layers", "hidden_size")
LLM_CONFIG_OPTIONAL = ("active_params_b", "num_attention_heads", "num_kv_heads", "head_dim", "intermediate_size",
                       "vocab_size", "num_experts", "experts_per_token", "kv_layers", "kv_values_per_layer",
                       "sliding_window", "state_values_per_sequence", "mtp_layers", "attention_params_b")
LLM_CONFIG_TEXT = ("family", "weight_precision")

# Spec fields that cannot exceed another: (lower, upper), checked on catalog entries and on requests alike.
GPU_AT_MOST = (("base_clock_mhz", "boost_clock_mhz"),)
LLM_AT_MOST = (("active_params_b", "total_params_b"), ("num_kv_heads", "num_attention_heads"),
               ("experts_per_token", "num_experts"), ("kv_layers", "num_layers"),
               ("attention_params_b", "active_params_b"), ("attention_params_b", "total_params_b"))


@dataclass(frozen=True)
class Divides:
    """A spec field that must divide another (`divisor` | `multiple`), unless `unless` is given; `why` names the
    fields in braces, so that each caller words them as its user wrote them (a request's llm_hidden_size, a
    config.json's num_key_value_heads)."""

    divisor: str
    multiple: str
    unless: str | None
    why: str

    def holds(self, divisor: float, multiple: float, unless: float | None = None) -> bool:
        """True unless both are given (not None / NaN), `unless` is not, and `divisor` does not divide `multiple`."""
        given = [v is not None and not math.isnan(v) for v in (divisor, multiple, unless)]
        return not (given[0] and given[1] and not given[2]) or multiple % divisor == 0

    def problem(self, divisor: float, multiple: float, name=lambda field: field) -> str:
        """'27 does not divide hidden_size 3584: ...', each field as `name(field)` words it."""
        names = {f: name(f) for f in (self.divisor, self.multiple, self.unless) if f}
        return f"{divisor:g} does not divide {names[self.multiple]} {multiple:g}: {self.why.format(**names)}"


# Spec fields that must divide another: checked on catalog entries, config.json files and requests alike. Where a
# config leaves head_dim out, every implementation takes hidden_size / num_attention_heads (transformers refuses a
# remainder); many real configs set head_dim, and then heads x head_dim may differ from hidden_size.
LLM_DIVIDES = (
    Divides("num_attention_heads", "hidden_size", "head_dim",
            "without {head_dim} each attention head gets {hidden_size} / {num_attention_heads} values (give "
            "{head_dim} where heads x head_dim differs from the hidden size)"),
    Divides("num_kv_heads", "num_attention_heads", None,
            "the query heads share the KV heads in equal groups (grouped-query attention)"),
)

WORKLOAD: dict[str, Bounds] = {
    "concurrency": Bounds(1e-3, 100_000),  # requests in flight (a closed batch)
    "request_rate_per_s": Bounds(1e-6, 1000),  # Poisson arrivals
    "prompt_tokens": Bounds(1, 1_000_000),
    "output_tokens": Bounds(1, 1_000_000),
    "n_gpus": Bounds(1, 64, integer=True),  # GPUs serving one model replica (tensor x pipeline parallel)
    "pipeline_parallel": Bounds(1, 64, integer=True),
    # the replica's shape (workload.REPLICA_SHAPE; physics.replica_step_s): routed experts spread whole over this many
    # of the replica's GPUs (expert parallel; 1: every expert sliced over the tensor-parallel GPUs)
    "expert_parallel": Bounds(1, 64, integer=True),
    # speculative decoding: draft tokens proposed per sequence and step, and the mean tokens a step emits per
    # sequence (the accepted drafts + the target's own bonus token; more than 1, at most draft tokens + 1)
    "spec_draft_tokens": Bounds(1, 16, integer=True),
    "spec_accept_length": Bounds(1, 17),
}
WORKLOAD_TEXT = ("precision", "engine", "engine_version", "speculative")
WORKLOAD_FLAGS = ("dp_attention",)  # true / false (also 1 / 0, yes / no); absent: false
# Names and other text (catalog keys and aliases, request labels): printable, one line, and not too long.
TEXT_MAX_CHARS = 200
PRINTABLE = r"^[^\x00-\x1f\x7f]*$"  # no newline, tab or other control character


def name_field(**kwargs: Any):
    """A pydantic `Field` for a catalog key: printable, one line, 1 to TEXT_MAX_CHARS characters."""
    return Field(min_length=1, max_length=TEXT_MAX_CHARS, pattern=PRINTABLE, **kwargs)


# The prediction interval's confidence level (a fraction), and the level a request without one gets.
INTERVAL_LEVEL = Bounds(0.5, 0.99)
DEFAULT_INTERVAL_LEVEL = 0.8
