"""Hugging Face config.json -> `Architecture` -> parameter counts.

Configs spell the same field many ways (gpt2/gpt-j/bloom, T5, OPT, ...), nest a `text_config` (Gemma 3) or
describe a mixture of experts (Mixtral, Qwen-MoE, DeepSeek); `architecture_from_config` normalises them and
`count_params` counts total and active parameters. Every field is range-checked against wattgpu.fields.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wattgpu.errors import CatalogError
from wattgpu.fields import LLM_CONFIG

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
    "granitemoe", "internlm", "internlm2", "deepseek", "deepseek_v2", "deepseek_v3", "gpt_oss", "solar", "baichuan",
    "stablelm",
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
    "rwkv", "deci", "aquila", "internlm2", "olmo2", "olmoe", "deepseek", "deepseek_v2", "deepseek_v3", "gpt_oss",
    "qwen3_moe",
})
# MoE families whose experts have their own width (`moe_intermediate_size`); the others reuse intermediate_size.
EXPERT_WIDTH_FIELD = frozenset({"qwen2_moe", "qwen3_moe", "deepseek", "deepseek_v2", "deepseek_v3"})
# Multi-head latent attention (DeepSeek-V2/V3): the fields it needs, all required once `kv_lora_rank` is set.
MLA_FIELDS = ("q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
# quantization_config.quant_method -> the weight precision (wattgpu.workload.PRECISION_BYTES)
QUANTIZED = {"mxfp4": "mxfp4", "fp8": "fp8", "fbgemm_fp8": "fp8", "awq": "int4", "gptq": "int4", "bitsandbytes": "int8"}
OPT_POSITION_OFFSET = 2  # OPT's learned position table has 2 extra rows



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
    moe_layers: int | None = None  # layers with experts (None: every layer after the dense prefix)
    mla: tuple[int | None, int, int, int, int] | None = None  # q_lora_rank, kv_lora_rank, qk_nope, qk_rope, v_head_dim
    kv_layers: int | None = None  # layers whose KV cache grows with the context (None: every layer, no window)
    sliding_window: int | None = None  # tokens the other layers cache (None: no sliding-window layer)
    weight_precision: str = "bf16"  # from quantization_config, else the checkpoint dtype

    @property
    def is_moe(self) -> bool:
        return (self.num_experts or 0) > 1

    @property
    def attn_head_dim(self) -> int:
        return self.head_dim if self.head_dim is not None else self.hidden_size // (self.num_attention_heads or 1)

    @property
    def kv_values_per_layer(self) -> int | None:
        """Values cached per token and layer where they are not 2 x KV heads x head dim: MLA's latent + rope key."""
        return None if self.mla is None else self.mla[1] + self.mla[3]


def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The nested `text_config` of multimodal configs (a dict, or its repr in the flattened table)."""
    tc = config.get("text_config")
    if isinstance(tc, str) and tc.strip().startswith("{"):
        try:
            tc = ast.literal_eval(tc)  # literals only: the table stores the dict's Python repr
        except (ValueError, SyntaxError):
            return {}
    return tc if isinstance(tc, Mapping) else {}


def present(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v)) and v != ""


def _first(config: Mapping[str, Any], field: str) -> Any:
    for name in FIELD_NAMES[field]:
        if present(config.get(name)):
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


def _required(key: str, config: Mapping[str, Any], field: str) -> int:
    v = _first(config, field)
    if v is None:
        raise CatalogError(key, field, f"missing (looked for {', '.join(FIELD_NAMES[field])})")
    return _as_int(key, field, v, LLM_CONFIG[field].lo, LLM_CONFIG[field].hi)


def _optional(key: str, config: Mapping[str, Any], field: str, hi: float | None = None) -> int | None:
    """The field, range-checked (`hi`: a tighter upper bound than the table's), or None where absent."""
    v = _first(config, field)
    bounds = LLM_CONFIG[field]
    return None if v is None else _as_int(key, field, v, bounds.lo, bounds.hi if hi is None else hi)


def _as_bool(v: Any) -> bool:
    return v.strip().lower() == "true" if isinstance(v, str) else bool(v)


def architecture_from_config(key: str, config: Mapping[str, Any]) -> Architecture:
    """Normalise a HF config (any field spelling) into an `Architecture`; `CatalogError` on missing/absurd fields."""
    if isinstance(config, Architecture):
        return config
    if not isinstance(config, Mapping):
        raise CatalogError(key, "<config>", f"expected a mapping, got {type(config).__name__}")
    config = {**_text_config(config), **{k: v for k, v in config.items() if present(v)}}
    family = _first(config, "family")
    if not isinstance(family, str) or not family.strip():
        raise CatalogError(key, "model_type", "missing")
    family = family.strip()

    hidden = _required(key, config, "hidden_size")
    if family == "t5":  # T5's num_layers is the encoder; the decoder is what runs once per generated token
        encoder_layers = _required(key, config, "num_layers")
        layers_range = LLM_CONFIG["num_layers"]
        layers = _as_int(key, "num_decoder_layers", config.get("num_decoder_layers", encoder_layers), layers_range.lo,
                         layers_range.hi)
    else:
        encoder_layers, layers = 0, _required(key, config, "num_layers")
    vocab = _required(key, config, "vocab_size")

    heads = None if family in ATTENTION_FREE else _required(key, config, "num_attention_heads")
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
        kv_heads = _optional(key, config, "num_kv_heads", hi=heads) or heads
    head_dim = _optional(key, config, "head_dim") if heads is not None else None

    inter = _optional(key, config, "intermediate_size")
    if inter is None and family in FFN_4X_DEFAULT:
        inter = 4 * hidden
    max_pos = _optional(key, config, "max_position_embeddings")
    dtype = _first(config, "dtype")
    tie = config.get("tie_word_embeddings", family not in UNTIED_BY_DEFAULT)

    experts = _optional(key, config, "num_experts")
    top_k = _optional(key, config, "experts_per_token") if experts else None
    if experts and experts > 1 and top_k is None:
        raise CatalogError(key, "num_experts_per_tok", "a mixture of experts needs the number of experts per token")
    moe_inter = _optional_named(key, config, "moe_intermediate_size")
    if experts and experts > 1 and moe_inter is None:
        if family in EXPERT_WIDTH_FIELD:
            raise CatalogError(key, "moe_intermediate_size", f"missing: a {family} expert's width")
        moe_inter = inter
    shared = _optional_named(key, config, "shared_expert_intermediate_size") or _optional_named(
        key, config, "moe_shared_expert_intermediate_size") or 0
    n_shared = _optional_named(key, config, "n_shared_experts")
    if n_shared and moe_inter:
        shared = n_shared * moe_inter
    dense_layers = _optional_named(key, config, "first_k_dense_replace") or 0
    moe_layers = _moe_layers(key, config, layers, dense_layers) if experts and experts > 1 else None
    mla = _mla(key, config) if present(config.get("kv_lora_rank")) else None
    kv_layers, window = _attention_window(key, config, family, layers)
    quant = config.get("quantization_config")
    if isinstance(quant, str) and quant.strip().startswith("{"):
        try:
            quant = ast.literal_eval(quant)  # literals only: the flattened table stores the dict's Python repr
        except (ValueError, SyntaxError):
            raise CatalogError(key, "quantization_config", "not a mapping") from None
    method = str(quant.get("quant_method", "")).lower() if isinstance(quant, Mapping) else ""
    if method and method not in QUANTIZED:
        raise CatalogError(key, "quantization_config.quant_method", f"{method!r} is not one of {', '.join(QUANTIZED)}")
    precision = QUANTIZED.get(method) or ("fp16" if str(dtype) == "float16" else "bf16")

    return Architecture(
        family=family, num_layers=layers, hidden_size=hidden, num_attention_heads=heads, num_kv_heads=kv_heads,
        head_dim=head_dim, intermediate_size=inter, vocab_size=vocab, max_position_embeddings=max_pos,
        dtype=str(dtype) if dtype is not None else "unspecified", tie_word_embeddings=_as_bool(tie),
        num_experts=experts, experts_per_token=top_k, expert_intermediate_size=moe_inter if experts else None,
        shared_expert_intermediate_size=shared if experts else 0, dense_layers=dense_layers if experts else 0,
        kv_heads_per_layer=kv_per_layer, encoder_layers=encoder_layers, mlp_matrices=_mlp_matrices(family, config),
        moe_layers=moe_layers, mla=mla, kv_layers=kv_layers, sliding_window=window, weight_precision=precision,
    )


def _moe_layers(key: str, config: Mapping[str, Any], layers: int, dense_prefix: int) -> int:
    """How many layers hold experts: Qwen-MoE's `decoder_sparse_step` and `mlp_only_layers`, DeepSeek's
    `first_k_dense_replace` and `moe_layer_freq` (every layer after the dense prefix when none is given)."""
    step = _optional_named(key, config, "decoder_sparse_step") or 1
    freq = _optional_named(key, config, "moe_layer_freq") or 1
    dense = _list(key, config, "mlp_only_layers") or []
    if not all(isinstance(i, int) for i in dense):
        raise CatalogError(key, "mlp_only_layers", "expected a list of layer indices")
    return sum(1 for i in range(layers)
               if i >= dense_prefix and i not in dense and (i + 1) % step == 0 and i % freq == 0)


def _mla(key: str, config: Mapping[str, Any]) -> tuple[int | None, int, int, int, int]:
    """Multi-head latent attention's ranks and head dims; a missing one is an error naming it."""
    for name in MLA_FIELDS[1:]:
        if not present(config.get(name)):
            raise CatalogError(key, name, "missing: multi-head latent attention (kv_lora_rank is set) needs it")
    q_lora = _optional_named(key, config, "q_lora_rank")  # null: no low-rank query projection (DeepSeek-V2-Lite)
    return (q_lora, *(_as_int(key, n, config[n], 1, 100_000) for n in ("kv_lora_rank", *MLA_FIELDS[1:])))


def _list(key: str, config: Mapping[str, Any], name: str) -> list | None:
    """A list field (the flattened config table stores its Python repr: parsed as literals only), or None."""
    value = config.get(name)
    if not present(value):
        return None
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            raise CatalogError(key, name, f"not a list: {value[:60]!r}") from None
    if not isinstance(value, (list, tuple)):
        raise CatalogError(key, name, f"expected a list, got {type(value).__name__}")
    return list(value)


# model_type -> which layers slide where the config gives a window but no `layer_types`
ALTERNATING_WINDOW = frozenset({"gemma2"})  # layers 0, 2, 4, ... slide, the others attend to the whole context
WINDOW_FROM_MAX_WINDOW_LAYERS = frozenset({"qwen2", "qwen2_moe", "qwen3", "qwen3_moe"})  # layers >= max_window_layers


def _attention_window(key: str, config: Mapping[str, Any], family: str, layers: int) -> tuple[int | None, int | None]:
    """(full-attention layers, sliding window in tokens): a sliding-window layer caches only the last `window`
    tokens, a full-attention layer the whole context. (None, None): every layer attends to the whole context.

    The window is `sliding_window` (null or `use_sliding_window: false`, as in Qwen2 / Qwen3: none). The layers it
    applies to: those `layer_types` names sliding (gpt-oss, Gemma 3 and newer configs); else, by model type, every
    other layer from the first (Gemma 2: transformers' Gemma2 alternates sliding and global layers), every layer
    but each `sliding_window_pattern`-th (Gemma 3), the layers from `max_window_layers` on (Qwen2 with
    use_sliding_window); else every layer (Mistral-7B-v0.1, Starcoder2, Phi-3)."""
    types = _list(key, config, "layer_types")
    if types is not None and len(types) != layers:
        raise CatalogError(key, "layer_types", f"expected one entry per layer ({layers})")
    named_sliding = None if types is None else sum(1 for t in types if "sliding" in str(t))
    window = config.get("sliding_window")
    if present(config.get("use_sliding_window")) and not _as_bool(config["use_sliding_window"]):
        window = None
    if not present(window):
        if named_sliding:
            raise CatalogError(key, "sliding_window", "missing: layer_types names sliding-window layers")
        return None, None
    bounds = LLM_CONFIG["sliding_window"]
    window = _as_int(key, "sliding_window", window, bounds.lo, bounds.hi)
    pattern = _optional_named(key, config, "sliding_window_pattern")
    max_window_layers = _optional_named(key, config, "max_window_layers")
    if named_sliding is not None:
        sliding = named_sliding
    elif family in ALTERNATING_WINDOW:
        sliding = (layers + 1) // 2
    elif pattern:
        sliding = layers - layers // pattern
    elif family in WINDOW_FROM_MAX_WINDOW_LAYERS and max_window_layers is not None:
        sliding = max(layers - max_window_layers, 0)
    else:
        sliding = layers
    return (None, None) if sliding == 0 else (layers - sliding, window)


def _mlp_matrices(family: str, config: Mapping[str, Any]) -> int | None:
    if family == "t5":  # "gated-gelu" (FLAN-T5, T5 v1.1) or plain "relu" (original T5)
        gated = "gated" in str(config.get("feed_forward_proj", "")) or _as_bool(config.get("is_gated_act", False))
        return 3 if gated else 2
    return 3 if family in GATED_MLP else 2 if family in PLAIN_MLP else None


def _optional_named(key: str, config: Mapping[str, Any], name: str) -> int | None:
    v = config.get(name)
    return _as_int(key, name, v, 0, 10_000_000) if present(v) else None


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
    if arch.mla is not None:  # latent attention: low-rank q, one shared kv latent (+ rope key), per-head up-projections
        q_lora, kv_lora, nope, rope, v_dim = arch.mla
        q = h * heads * (nope + rope) if q_lora is None else h * q_lora + q_lora * heads * (nope + rope)
        attn = arch.num_layers * (q + h * (kv_lora + rope) + kv_lora * heads * (nope + v_dim) + heads * v_dim * h)

    dense_mlp = mats * h * arch.intermediate_size
    if arch.is_moe:
        expert = mats * h * arch.expert_intermediate_size
        shared = mats * h * arch.shared_expert_intermediate_size
        router = h * arch.num_experts
        moe_layers = arch.num_layers - arch.dense_layers if arch.moe_layers is None else arch.moe_layers
        dense_layers = arch.num_layers - moe_layers
        mlp_total = moe_layers * (arch.num_experts * expert + shared + router) + dense_layers * dense_mlp
        mlp_active = moe_layers * (arch.experts_per_token * expert + shared + router) + dense_layers * dense_mlp
    else:
        mlp_total = mlp_active = arch.num_layers * dense_mlp

    if arch.family == "t5":  # encoder layers: self-attention + MLP; decoder layers add cross-attention
        enc = arch.encoder_layers * (4 * h * q_dim + dense_mlp)
        attn = attn + arch.num_layers * 4 * h * q_dim + enc
    total = embed + attn + mlp_total
    active = embed + attn + mlp_active
    return round(total / 1e9, 6), round(active / 1e9, 6)


def count_or_none(arch: Architecture, key: str) -> tuple[float, float] | None:
    try:
        return count_params(arch, key)
    except NotCountable:
        return None


