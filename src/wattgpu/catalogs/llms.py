"""The LLM catalog: one validated `LlmSpec` per LLM, built the way a user extends it.

Two inputs, both flattened Hugging Face configs:
- `data/catalogs/llm_configs/<org>--<name>.json`: a model's `config.json` (key `<org>/<name>`), plus the
  optional keys `_wattgpu_note` (e.g. "fine-tune of X; these are X's config fields") and `_wattgpu_aliases`;
- the paper's config table (`wattgpu-catalogs/model_features.csv`, `;`-separated, one row per `model_name`).

Parameter counts are computed from the config (`count_params`) and cross-checked against a published
count (`llm_published_params.yaml`, or the table's `total_b_params`): the catalog keeps the published
count where there is one and records which (`params_source`); gaps above 10 % go to the report.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from wattgpu import paths
from wattgpu.catalogs.base import NamedCatalog, normalize_name, validate_entry  # one matching rule for every catalog
from wattgpu.errors import CatalogError, UnknownNameError

TABLE_SOURCE = "wattgpu-catalogs/model_features.csv"
MISMATCH_THRESHOLD = 0.10  # relative gap between computed and published counts worth reporting
NOTE_KEY, ALIASES_KEY = "_wattgpu_note", "_wattgpu_aliases"  # the only non-HF keys a config file may hold

# The same LLM under another name in another dataset, for keys that come from the config table.
TABLE_ALIASES: dict[str, tuple[str, ...]] = {
    "meta-llama/Llama-3.1-8B-Instruct": ("meta-llama/Meta-Llama-3.1-8B-Instruct",),  # ML.ENERGY v2
    "meta-llama/Llama-2-13b-chat-hf": ("metaai/Llama-2-13b-chat-hf",),  # ML.ENERGY legacy
}

# HF field names of each normalised field, first match wins (gpt2/gpt-j/bloom, T5, OPT, ... spell them differently).
FIELD_NAMES: dict[str, tuple[str, ...]] = {
    "family": ("model_type", "family"),
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "hidden_size": ("hidden_size", "n_embd", "n_embed", "d_model", "dim"),
    "num_attention_heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "num_kv_heads": ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num"),
    "head_dim": ("head_dim", "kv_channels", "d_kv"),
    "intermediate_size": ("intermediate_size", "ff_intermediate_size", "ffn_dim", "n_inner", "d_ff",
                          "ffn_hidden_size"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
    "max_position_embeddings": ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length",
                                "context_length"),
    "dtype": ("torch_dtype", "dtype"),
    "num_experts": ("num_local_experts", "num_experts", "n_routed_experts"),
    "experts_per_token": ("num_experts_per_tok", "experts_per_token", "num_experts_per_token"),
}

# MLP shape by HF model_type: gated (gate, up, down) or plain (up, down).
GATED_MLP = frozenset({
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3",
    "gemma3_text", "phi3", "phimoe", "phi3small", "deci", "aquila", "olmo", "olmo2", "olmoe", "granite",
    "granitemoe", "internlm", "internlm2", "deepseek", "gpt_oss", "solar", "baichuan", "stablelm",
})
PLAIN_MLP = frozenset({
    "gpt2", "gptj", "gpt_neox", "gpt_neo", "opt", "bloom", "phi", "starcoder2", "gpt_bigcode", "falcon",
    "nemotron", "mpt",
})
# No count from the config: attention-free (state-space, RWKV) or hybrid; the published count is used.
NOT_COUNTED = frozenset({"rwkv", "rwkv5", "mamba", "mamba2", "falcon_mamba", "nemotron_h", "jamba", "zamba"})
ATTENTION_FREE = frozenset({"rwkv", "rwkv5", "mamba", "mamba2", "falcon_mamba"})
# Config classes whose FFN width is 4 x hidden when the config leaves it out (n_inner: null).
FFN_4X_DEFAULT = frozenset({"gpt2", "gptj", "bloom", "gpt_bigcode", "falcon", "rwkv", "gpt_neo", "phi"})
# Learned absolute position embeddings (n_positions x hidden): counted; rotary / ALiBi families have none.
LEARNED_POSITIONS = frozenset({"gpt2", "opt", "gpt_bigcode", "gpt_neo"})
# Config classes whose tie_word_embeddings defaults to False (the transformers base default is True).
UNTIED_BY_DEFAULT = frozenset({
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "gptj", "gpt_neox", "phi", "phi3", "phimoe",
    "rwkv", "deci", "aquila", "internlm2", "olmo2", "olmoe", "deepseek", "gpt_oss",
})
OPT_POSITION_OFFSET = 2  # OPT's learned position table has 2 extra rows


class LlmSpec(BaseModel):
    """The config facts of one LLM that a prediction uses; parameter counts in billions."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str = Field(min_length=1)
    total_params_b: float = Field(gt=0, le=10_000)
    active_params_b: float = Field(gt=0, le=10_000)  # per token; equals total for dense models
    num_layers: int = Field(ge=1, le=1000)  # decoder layers (an encoder-decoder's encoder is not counted here)
    hidden_size: int = Field(ge=1, le=1_000_000)
    num_attention_heads: int | None = Field(ge=1, le=10_000)  # None: attention-free (Mamba, RWKV)
    num_kv_heads: int | None = Field(ge=1, le=10_000)
    head_dim: int | None = Field(ge=1, le=100_000)  # None: hidden_size // num_attention_heads
    intermediate_size: int | None = Field(ge=1, le=10_000_000)  # per expert for MoE
    vocab_size: int = Field(ge=2, le=100_000_000)
    max_position_embeddings: int | None = Field(ge=1, le=100_000_000)
    family: str = Field(min_length=1)  # HF model_type
    is_moe: bool
    num_experts: int | None = Field(ge=1, le=100_000)
    experts_per_token: int | None = Field(ge=1, le=100_000)
    dtype: str = Field(min_length=1)  # torch_dtype of the checkpoint; "unspecified" where the config has none
    params_source: Literal["published", "computed", "table"]
    computed_params_b: float | None = Field(gt=0, le=10_000)  # from the config; None where not computable
    source: str
    aliases: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> LlmSpec:
        if self.active_params_b > self.total_params_b * (1 + 1e-9):
            raise ValueError(f"active_params_b {self.active_params_b} exceeds total_params_b {self.total_params_b}")
        if not self.is_moe and not math.isclose(self.active_params_b, self.total_params_b, rel_tol=1e-9):
            raise ValueError("a dense model has active_params_b == total_params_b")
        if self.num_attention_heads is None and self.num_kv_heads is not None:
            raise ValueError("num_kv_heads is set but num_attention_heads is not")
        if self.num_attention_heads is not None and self.num_kv_heads is None:
            raise ValueError("num_kv_heads is missing (use num_attention_heads for multi-head attention)")
        if self.num_kv_heads is not None and self.num_attention_heads is not None:
            if self.num_kv_heads > self.num_attention_heads:
                raise ValueError(f"num_kv_heads {self.num_kv_heads} > num_attention_heads {self.num_attention_heads}")
        if self.experts_per_token is not None and self.num_experts is not None:
            if self.experts_per_token > self.num_experts:
                raise ValueError(f"experts_per_token {self.experts_per_token} > num_experts {self.num_experts}")
        if any(not a.strip() for a in self.aliases):
            raise ValueError("aliases must be non-empty strings")
        return self

    @property
    def names(self) -> tuple[str, ...]:
        """The key followed by every alias."""
        return (self.key, *self.aliases)

    @property
    def resolved_head_dim(self) -> int | None:
        if self.num_attention_heads is None:
            return None
        return self.head_dim if self.head_dim is not None else self.hidden_size // self.num_attention_heads

    def kv_cache_bytes_per_token(self, bytes_per_value: float = 2) -> float:
        """KV cache per token: 2 (K and V) x layers x kv_heads x head_dim x bytes; 0 if attention-free.

        For hybrids (nemotron_h) every layer is counted, so this is an upper bound.
        """
        if self.num_attention_heads is None or self.num_kv_heads is None:
            return 0.0
        return float(2 * self.num_layers * self.num_kv_heads * self.resolved_head_dim * bytes_per_value)

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any], entry: str) -> LlmSpec:
        """Validate one entry; a failure becomes a `CatalogError` naming `entry` and the field."""
        return validate_entry(cls, d, entry)


# ---------------------------------------------------------------------------------------------------------
# config.json -> architecture


@dataclass(frozen=True)
class Architecture:
    """A config reduced to what counting parameters and sizing the KV cache need."""

    family: str
    num_layers: int  # decoder layers
    hidden_size: int
    num_attention_heads: int | None
    num_kv_heads: int | None  # the largest per-layer value for variable-GQA models (what vLLM allocates)
    head_dim: int | None  # as set in the config (head_dim, kv_channels or d_kv)
    intermediate_size: int | None
    vocab_size: int
    max_position_embeddings: int | None
    dtype: str
    tie_word_embeddings: bool
    num_experts: int | None = None
    experts_per_token: int | None = None
    expert_intermediate_size: int | None = None
    shared_expert_intermediate_size: int = 0  # total width of always-on shared experts
    dense_layers: int = 0  # leading layers with a dense MLP in a MoE (DeepSeek's first_k_dense_replace)
    kv_heads_per_layer: tuple[int, ...] | None = None  # DeciLM's variable GQA
    encoder_layers: int = 0  # encoder-decoder (T5): encoder layers, counted in parameters only
    mlp_matrices: int | None = None  # 3 gated (gate, up, down), 2 plain (up, down), None: no rule known

    @property
    def is_moe(self) -> bool:
        return (self.num_experts or 0) > 1

    @property
    def attn_head_dim(self) -> int:
        return self.head_dim if self.head_dim is not None else self.hidden_size // (self.num_attention_heads or 1)


def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The nested `text_config` of multimodal configs (a dict, or its repr in the flattened table)."""
    tc = config.get("text_config")
    if isinstance(tc, str) and tc.strip().startswith("{"):
        try:
            tc = ast.literal_eval(tc)  # literals only: the table stores the dict's Python repr
        except (ValueError, SyntaxError):
            return {}
    return tc if isinstance(tc, Mapping) else {}


def _present(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v)) and v != ""


def _first(config: Mapping[str, Any], field: str) -> Any:
    for name in FIELD_NAMES[field]:
        if _present(config.get(name)):
            return config[name]
    return None


def _as_int(key: str, field: str, value: Any, lo: int, hi: int) -> int:
    whole = isinstance(value, int) and not isinstance(value, bool) or isinstance(value, float) and value.is_integer()
    if not whole:
        raise CatalogError(key, field, f"expected a whole number, got {value!r}")
    v = int(value)
    if not lo <= v <= hi:
        raise CatalogError(key, field, f"{v} is outside the plausible range [{lo}, {hi}]")
    return v


def _required(key: str, config: Mapping[str, Any], field: str, lo: int, hi: int) -> int:
    v = _first(config, field)
    if v is None:
        raise CatalogError(key, field, f"missing (looked for {', '.join(FIELD_NAMES[field])})")
    return _as_int(key, field, v, lo, hi)


def _optional(key: str, config: Mapping[str, Any], field: str, lo: int, hi: int) -> int | None:
    v = _first(config, field)
    return None if v is None else _as_int(key, field, v, lo, hi)


def _as_bool(v: Any) -> bool:
    return v.strip().lower() == "true" if isinstance(v, str) else bool(v)


def architecture_from_config(key: str, config: Mapping[str, Any]) -> Architecture:
    """Normalise a HF config (any field spelling) into an `Architecture`; `CatalogError` on missing/absurd fields."""
    if isinstance(config, Architecture):
        return config
    if not isinstance(config, Mapping):
        raise CatalogError(key, "<config>", f"expected a mapping, got {type(config).__name__}")
    config = {**_text_config(config), **{k: v for k, v in config.items() if _present(v)}}
    family = _first(config, "family")
    if not isinstance(family, str) or not family.strip():
        raise CatalogError(key, "model_type", "missing")
    family = family.strip()

    hidden = _required(key, config, "hidden_size", 8, 1_000_000)
    if family == "t5":  # T5's num_layers is the encoder; the decoder is what runs once per generated token
        encoder_layers = _required(key, config, "num_layers", 1, 1000)
        layers = _as_int(key, "num_decoder_layers", config.get("num_decoder_layers", encoder_layers), 1, 1000)
    else:
        encoder_layers, layers = 0, _required(key, config, "num_layers", 1, 1000)
    vocab = _required(key, config, "vocab_size", 2, 100_000_000)

    heads = None if family in ATTENTION_FREE else _required(key, config, "num_attention_heads", 1, 10_000)
    per_layer = config.get("num_key_value_heads_per_layer")
    kv_per_layer = None
    if heads is None:
        kv_heads = None
    elif isinstance(per_layer, (list, tuple)) and per_layer:
        kv_per_layer = tuple(_as_int(key, "num_key_value_heads_per_layer", v, 1, heads) for v in per_layer)
        if len(kv_per_layer) != layers:
            raise CatalogError(key, "num_key_value_heads_per_layer", f"{len(kv_per_layer)} values for {layers} layers")
        kv_heads = max(kv_per_layer)
    elif _as_bool(config.get("multi_query", False)):
        kv_heads = 1
    else:
        kv_heads = _optional(key, config, "num_kv_heads", 1, heads) or heads
    head_dim = _optional(key, config, "head_dim", 1, 100_000) if heads is not None else None

    inter = _optional(key, config, "intermediate_size", 1, 10_000_000)
    if inter is None and family in FFN_4X_DEFAULT:
        inter = 4 * hidden
    max_pos = _optional(key, config, "max_position_embeddings", 1, 100_000_000)
    dtype = _first(config, "dtype")
    tie = config.get("tie_word_embeddings", family not in UNTIED_BY_DEFAULT)

    experts = _optional(key, config, "num_experts", 1, 100_000)
    top_k = _optional(key, config, "experts_per_token", 1, 100_000) if experts else None
    if experts and experts > 1 and top_k is None:
        raise CatalogError(key, "num_experts_per_tok", "a mixture of experts needs the number of experts per token")
    moe_inter = _optional_named(key, config, "moe_intermediate_size") or inter
    shared = _optional_named(key, config, "shared_expert_intermediate_size") or _optional_named(
        key, config, "moe_shared_expert_intermediate_size") or 0
    n_shared = _optional_named(key, config, "n_shared_experts")
    if n_shared and moe_inter:
        shared = n_shared * moe_inter
    dense_layers = _optional_named(key, config, "first_k_dense_replace") or 0

    return Architecture(
        family=family, num_layers=layers, hidden_size=hidden, num_attention_heads=heads, num_kv_heads=kv_heads,
        head_dim=head_dim, intermediate_size=inter, vocab_size=vocab, max_position_embeddings=max_pos,
        dtype=str(dtype) if dtype is not None else "unspecified", tie_word_embeddings=_as_bool(tie),
        num_experts=experts, experts_per_token=top_k, expert_intermediate_size=moe_inter if experts else None,
        shared_expert_intermediate_size=shared if experts else 0, dense_layers=dense_layers if experts else 0,
        kv_heads_per_layer=kv_per_layer, encoder_layers=encoder_layers, mlp_matrices=_mlp_matrices(family, config),
    )


def _mlp_matrices(family: str, config: Mapping[str, Any]) -> int | None:
    if family == "t5":  # "gated-gelu" (FLAN-T5, T5 v1.1) or plain "relu" (original T5)
        gated = "gated" in str(config.get("feed_forward_proj", "")) or _as_bool(config.get("is_gated_act", False))
        return 3 if gated else 2
    return 3 if family in GATED_MLP else 2 if family in PLAIN_MLP else None


def _optional_named(key: str, config: Mapping[str, Any], name: str) -> int | None:
    v = config.get(name)
    return _as_int(key, name, v, 0, 10_000_000) if _present(v) else None


# ---------------------------------------------------------------------------------------------------------
# parameter counts


class NotCountable(CatalogError):
    """The architecture has no counting rule here (state-space, RWKV, hybrids, unknown model_type)."""


def count_params(config: Mapping[str, Any] | Architecture, key: str = "<config>") -> tuple[float, float]:
    """(total, active) parameters in billions, from a HF config (any field spelling).

    Embeddings (+ an untied LM head, + learned positions), per layer q/k/v/o with GQA and head_dim, and the
    MLP: 3 matrices when gated (llama-style), 2 otherwise (gpt2-style); MoE layers hold every expert
    (+ router + shared experts) and a token uses `experts_per_token` of them. Norms and biases are left out
    (< 0.1 %). Raises `NotCountable` (a `CatalogError`) where no rule applies.
    """
    arch = architecture_from_config(key, config)
    if arch.family in NOT_COUNTED:
        raise NotCountable(key, "model_type", f"{arch.family!r} is attention-free or hybrid; use the published count")
    if arch.mlp_matrices is None:
        raise NotCountable(key, "model_type", f"no parameter-count rule for {arch.family!r}; give a published count")
    if arch.intermediate_size is None:
        raise CatalogError(key, "intermediate_size", "missing; needed to count MLP parameters")
    mats = arch.mlp_matrices
    h, v = arch.hidden_size, arch.vocab_size
    heads = arch.num_attention_heads or 0
    q_dim = heads * arch.attn_head_dim

    embed = v * h * (1 if arch.tie_word_embeddings else 2)
    if arch.family in LEARNED_POSITIONS and arch.max_position_embeddings:
        offset = OPT_POSITION_OFFSET if arch.family == "opt" else 0
        embed += (arch.max_position_embeddings + offset) * h

    kv_per_layer = arch.kv_heads_per_layer or (arch.num_kv_heads or 0,) * arch.num_layers
    attn = sum(2 * h * q_dim + 2 * h * kv * arch.attn_head_dim for kv in kv_per_layer)  # q, o + k, v

    dense_mlp = mats * h * arch.intermediate_size
    if arch.is_moe:
        expert = mats * h * arch.expert_intermediate_size
        shared = mats * h * arch.shared_expert_intermediate_size
        router = h * arch.num_experts
        moe_layers = arch.num_layers - arch.dense_layers
        mlp_total = moe_layers * (arch.num_experts * expert + shared + router) + arch.dense_layers * dense_mlp
        mlp_active = moe_layers * (arch.experts_per_token * expert + shared + router) + arch.dense_layers * dense_mlp
    else:
        mlp_total = mlp_active = arch.num_layers * dense_mlp

    if arch.family == "t5":  # encoder layers: self-attention + MLP; decoder layers add cross-attention
        enc = arch.encoder_layers * (4 * h * q_dim + dense_mlp)
        attn = attn + arch.num_layers * 4 * h * q_dim + enc
    total = embed + attn + mlp_total
    active = embed + attn + mlp_active
    return round(total / 1e9, 6), round(active / 1e9, 6)


def _count_or_none(arch: Architecture, key: str) -> tuple[float, float] | None:
    try:
        return count_params(arch, key)
    except NotCountable:
        return None


# ---------------------------------------------------------------------------------------------------------
# specs from a config.json and from the config table


def llm_spec_from_hf_config(
    key: str,
    config: Mapping[str, Any],
    published_params_b: float | None = None,
    source: str = "",
    *,
    published_active_b: float | None = None,
) -> LlmSpec:
    """One `LlmSpec` from a HF config; the published count (if given) wins over the computed one."""
    arch = architecture_from_config(key, config)
    try:
        computed: tuple[float, float] | None = count_params(arch, key)
    except NotCountable:
        if published_params_b is None:
            raise
        computed = None
    aliases = _aliases(key, config)

    if published_params_b is not None:
        total = float(published_params_b)
        if published_active_b is not None:
            active = float(published_active_b)
        elif arch.is_moe:
            if computed is None:
                raise CatalogError(key, "active_params_b", "a mixture of experts needs a published active count")
            active = computed[1]
        else:
            active = total
        params_source = "published"
    else:
        total, active = computed  # type: ignore[misc]
        params_source = "computed"
    return LlmSpec.from_mapping(
        {**_spec_fields(arch), "key": key, "total_params_b": total, "active_params_b": active,
         "params_source": params_source, "computed_params_b": computed[0] if computed else None,
         "source": source, "aliases": aliases},
        key,
    )


def _spec_fields(arch: Architecture) -> dict[str, Any]:
    return {
        "num_layers": arch.num_layers, "hidden_size": arch.hidden_size,
        "num_attention_heads": arch.num_attention_heads, "num_kv_heads": arch.num_kv_heads,
        "head_dim": arch.head_dim, "intermediate_size": arch.expert_intermediate_size or arch.intermediate_size,
        "vocab_size": arch.vocab_size, "max_position_embeddings": arch.max_position_embeddings,
        "family": arch.family, "is_moe": arch.is_moe, "num_experts": arch.num_experts,
        "experts_per_token": arch.experts_per_token, "dtype": arch.dtype,
    }


def read_config_table(path: Path | str) -> pd.DataFrame:
    """The paper's flattened config table (`;`-separated, one row per `model_name`)."""
    return pd.read_csv(path, sep=";", low_memory=False)


def _row_config(row: Mapping[str, Any]) -> dict[str, Any]:
    """A table row as a config dict: empty cells dropped, whole floats made ints (pandas widens int columns)."""
    out = {}
    for k, v in row.items():
        if not _present(v):
            continue
        if hasattr(v, "item"):
            v = v.item()
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        out[str(k)] = v
    return out


def _table_float(model: str, row: Mapping[str, Any], col: str) -> float:
    v = row.get(col)
    if not _present(v):
        raise CatalogError(model, col, "missing")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise CatalogError(model, col, f"expected a number, got {v!r}") from None
    if not 0 < f <= 10_000:
        raise CatalogError(model, col, f"{f} is outside the plausible range (0, 10000] billion")
    return f


def specs_from_config_table(table: pd.DataFrame) -> tuple[list[LlmSpec], list[dict[str, Any]]]:
    """One spec per table row (keyed by `model_name`) and the rows of the parameter-count report."""
    for col in ("model_name", "total_b_params", "active_b_params", "model_type"):
        if col not in table.columns:
            raise CatalogError(TABLE_SOURCE, col, "column missing from the config table")
    specs, report = [], []
    for row in table.to_dict(orient="records"):
        model = str(row["model_name"]).strip()
        if not _present(row["model_name"]) or not model:
            raise CatalogError(TABLE_SOURCE, "model_name", "empty model name")
        total, active = _table_float(model, row, "total_b_params"), _table_float(model, row, "active_b_params")
        if active > total:
            raise CatalogError(model, "active_b_params", f"{active} exceeds total_b_params {total}")
        arch = architecture_from_config(model, _row_config(row))
        computed = _count_or_none(arch, model)
        fields = {**_spec_fields(arch), "is_moe": active < total or arch.is_moe}
        specs.append(LlmSpec.from_mapping(
            {**fields, "key": model, "total_params_b": total, "active_params_b": active, "params_source": "table",
             "computed_params_b": computed[0] if computed else None, "source": TABLE_SOURCE,
             "aliases": TABLE_ALIASES.get(model, ())},
            model,
        ))
        if computed:
            report += _gaps(model, computed, total, active if active < total else None, "table")
    return specs, report


def _gaps(key: str, computed: tuple[float, float], total: float, active: float | None, ref: str) -> list[dict]:
    rows = []
    for field, mine, theirs in (("total_params_b", computed[0], total), ("active_params_b", computed[1], active)):
        if theirs is None:
            continue
        gap = (mine - theirs) / theirs
        if abs(gap) > MISMATCH_THRESHOLD:
            rows.append({"key": key, "field": field, "computed_b": round(mine, 3), "published_b": theirs,
                         "reference": ref, "rel_gap": round(gap, 4)})
    return rows


# ---------------------------------------------------------------------------------------------------------
# published counts and config files


class PublishedCount(BaseModel):
    """A parameter count stated by the model's developer, with where it is stated."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    total_b: float = Field(gt=0, le=10_000)
    active_b: float | None = Field(default=None, gt=0, le=10_000)  # MoE only
    source_url: str = Field(min_length=8)
    note: str = ""


def load_published_params(path: Path | str) -> dict[str, PublishedCount]:
    """`{name: PublishedCount}` from `llm_published_params.yaml` (a mapping keyed by LLM key or alias)."""
    doc = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    if not isinstance(doc, Mapping):
        raise CatalogError(str(path), "<file>", "expected a mapping of LLM name -> {total_b, source_url, ...}")
    out = {}
    for name, entry in doc.items():
        try:
            out[str(name)] = PublishedCount.model_validate(entry)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise CatalogError(str(name), ".".join(str(p) for p in err["loc"]) or "<entry>", err["msg"]) from None
    return out


def key_from_filename(path: Path) -> str:
    """`<org>--<name>.json` -> `<org>/<name>`."""
    org, sep, name = path.stem.partition("--")
    if not sep or not org or not name:
        raise CatalogError(path.name, "<file name>", "expected <org>--<name>.json")
    return f"{org}/{name}"


def read_config_file(path: Path) -> tuple[str, dict[str, Any]]:
    key = key_from_filename(path)
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CatalogError(key, "<file>", f"{path.name} is not valid JSON: {exc}") from None
    if not isinstance(config, dict):
        raise CatalogError(key, "<file>", f"{path.name} must hold a JSON object")
    unknown = [k for k in config if k.startswith("_wattgpu") and k not in (NOTE_KEY, ALIASES_KEY)]
    if unknown:
        raise CatalogError(key, unknown[0], f"unknown wattgpu key; allowed: {NOTE_KEY}, {ALIASES_KEY}")
    _aliases(key, config)
    return key, config


def _aliases(key: str, config: Mapping[str, Any]) -> tuple[str, ...]:
    aliases = config.get(ALIASES_KEY, ())
    if isinstance(aliases, str) or not isinstance(aliases, (list, tuple)) or not all(
        isinstance(a, str) and a.strip() for a in aliases
    ):
        raise CatalogError(key, ALIASES_KEY, "expected a list of non-empty names")
    return tuple(aliases)


def _display_path(path: Path) -> str:
    try:
        return path.resolve().relative_to(paths.project_root()).as_posix()
    except ValueError:
        return path.as_posix()


# ---------------------------------------------------------------------------------------------------------
# the catalog


class LlmCatalog(NamedCatalog[LlmSpec]):
    """An immutable, ordered set of `LlmSpec`s with a case- and whitespace-insensitive key-and-alias index."""

    kind = "LLM"

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> LlmCatalog:
        """Inverse of `to_frame` (e.g. after a CSV round trip)."""
        missing = [c for c in LlmSpec.model_fields if c not in frame.columns]
        if missing:
            raise CatalogError("LLM catalog table", missing[0], "column missing")
        specs = []
        for i, row in enumerate(frame[list(LlmSpec.model_fields)].to_dict(orient="records")):
            d = {k: (None if not _present(v) else v.item() if hasattr(v, "item") else v) for k, v in row.items()}
            d["aliases"] = tuple(a.strip() for a in str(d["aliases"] or "").split(";") if a.strip())
            d["source"] = d["source"] or ""
            specs.append(LlmSpec.from_mapping(d, str(d.get("key") or f"row {i + 1}")))
        return cls(specs)


def build_llm_catalog(
    config_table: Path | None, config_dir: Path, published: Path | None
) -> tuple[LlmCatalog, list[dict[str, Any]]]:
    """The catalog from the config table (if any) and every `<org>--<name>.json` in `config_dir`.

    Returns the catalog and the parameter-count report: one row per (LLM, field) whose computed count
    differs from the published one (or the table's) by more than 10 %.
    """
    specs, report = ([], []) if config_table is None else specs_from_config_table(read_config_table(config_table))
    files = [read_config_file(p) for p in sorted(Path(config_dir).glob("*.json"))]

    counts = load_published_params(published) if published is not None else {}
    names = {normalize_name(n): s.key for s in specs for n in s.names}
    for key, config in files:
        for n in (key, *_aliases(key, config)):
            names.setdefault(normalize_name(n), key)
    by_key: dict[str, PublishedCount] = {}
    for name, count in counts.items():
        key = names.get(normalize_name(name))
        if key is None:
            raise UnknownNameError("LLM", name, [n for s in specs for n in s.names] + [k for k, _ in files])
        by_key[key] = count

    table_keys = {s.key for s in specs}
    for key in sorted(table_keys & by_key.keys()):
        raise CatalogError(key, "published", "the config table already gives this LLM's count")
    for key, config in files:
        if key in table_keys:
            raise CatalogError(key, "key", "defined both in the config table and in the config directory")
        count = by_key.get(key)
        path = Path(config_dir) / f"{key.replace('/', '--', 1)}.json"
        spec = llm_spec_from_hf_config(
            key, config, count.total_b if count else None, f"config.json: {_display_path(path)}",
            published_active_b=count.active_b if count else None,
        )
        specs.append(spec)
        computed = _count_or_none(architecture_from_config(key, config), key) if count else None
        if computed:
            report += _gaps(key, computed, count.total_b, count.active_b, "published")
    return LlmCatalog(specs), report


def load_llm_catalog(path: Path | str | None = None) -> LlmCatalog:
    """The catalog as written by the `catalog` stage (default: `data/processed/llm_catalog.csv`)."""
    p = paths.resolve(path if path is not None else paths.LLM_CATALOG_TABLE)
    return LlmCatalog.from_frame(pd.read_csv(p, keep_default_na=True, na_values=[""]))
