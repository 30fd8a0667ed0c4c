"""Hugging Face config.json -> `Architecture` -> parameter counts, by rule from the config's fields.

Configs spell the same field many ways (gpt2/gpt-j/bloom, T5, OPT, ...), nest a `text_config` (Gemma 3, Llama 4,
Qwen3.5, Kimi K2.5) and mix layer kinds. `architecture_from_config` reads, for every decoder layer, which token
mixer it has (full / sliding-window / chunked attention, a linear-attention or state-space layer with a fixed state)
and which MLP (dense, mixture of experts, none), each sized from the fields that declare it, so a new `model_type`
is read by the same rules as a known one. `count_params` counts total and active parameters from that layout.
Every field is range-checked against wattgpu.fields; a layer kind the rules cannot size is a `NotCountable` naming
the field that declares it, never a silent guess.

What is counted (the decoder the engine streams once per generated token):
- embeddings (+ an untied LM head, + learned absolute positions where the family has them);
- per attention layer q/k/v/o with GQA / MQA and head_dim (else hidden / heads), an output gate where declared
  (`attn_output_gate`), multi-head latent attention from its ranks, a DeepSeek-V3.2 / GLM-5 sparse-attention indexer;
- per linear-attention layer (Gated DeltaNet, Qwen3-Next / Qwen3.5) and state-space layer (Mamba, Mamba-2) their
  projections and convolution;
- the MLP, 3 matrices when gated (gate, up, down), 2 when plain (up, down), decided from the activation field; mixture
  of experts layers hold every routed expert + shared experts + the router, and a token uses `experts_per_token`
  routed experts + the shared ones.
Left out: norms and biases (< 0.1 %), multi-token-prediction (MTP / next-n) layers and vision towers: both are
counted apart (`param_breakdown`), as publishers count them apart (DeepSeek-V3's 671B excludes its 14B MTP module).
Active parameters keep the input embedding, as the total does (some publishers leave it out, e.g. gpt-oss).
"""

from __future__ import annotations

import ast
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wattgpu.errors import CatalogError
from wattgpu.fields import LLM_AT_MOST, LLM_CONFIG, LLM_DIVIDES

FIELD_NAMES: dict[str, tuple[str, ...]] = {
    "family": ("model_type", "family"),
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "hidden_size": ("hidden_size", "n_embd", "n_embed", "d_model", "dim"),
    "num_attention_heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "num_kv_heads": ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num"),
    "head_dim": ("head_dim", "kv_channels", "d_kv", "attention_head_dim"),
    "intermediate_size": ("intermediate_size", "ff_intermediate_size", "ffn_dim", "n_inner", "d_ff",
                          "ffn_hidden_size"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
    "max_position_embeddings": ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length",
                                "context_length"),
    "dtype": ("torch_dtype", "dtype"),
    "num_experts": ("num_local_experts", "num_experts", "n_routed_experts"),
    "experts_per_token": ("num_experts_per_tok", "experts_per_token", "num_experts_per_token"),
}
# The activation of the MLP, where the config names it.
ACTIVATION_FIELDS = ("mlp_hidden_act", "hidden_activation", "hidden_act", "activation_function", "hidden_activation_fn")
# Activations that only exist as the gate of a gated linear unit (SwiGLU: silu(gate) * up; "gegelu": Phi-3-small).
GLU_ACTIVATIONS = frozenset({"silu", "swish", "swiglu", "geglu", "reglu", "gegelu", "swiglu_limit", "silu_glu"})
# Fields a config.json may leave out because its transformers config class defaults them (only for a few well-known
# classes; the defaults fill a field only where the config, its text_config included, does not give it):
# - gemma3_text: transformers src/transformers/models/gemma3/configuration_gemma3.py, Gemma3TextConfig.__init__
#   (huggingface/transformers@008f5c8c29be84d4721dc6d1e0fcd72300580be4); google/gemma-3-27b-it's text_config leaves
#   out vocab_size, gemma-3-4b-it's also the head counts and head_dim.
CONFIG_CLASS_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {
        "vocab_size": 262_208, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
        "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 131_072, "tie_word_embeddings": True,
        "sliding_window": 4096, "sliding_window_pattern": 6,
    },
}
# Fallback tables, only where the config genuinely gives no signal:
# - gelu is the activation of plain (GPT-2, StarCoder2, Phi-2) and of gated (Gemma's GeGLU) MLPs alike;
GELU_GATED = frozenset({"gemma", "gemma2", "gemma3", "gemma3_text", "recurrent_gemma", "paligemma", "t5gemma"})
# - checkpoints whose config names no activation at all (older configs; the flattened config table);
GATED_MLP = frozenset({
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3",
    "gemma3_text", "phi3", "phimoe", "phi3small", "deci", "aquila", "olmo", "olmo2", "olmoe", "granite",
    "granitemoe", "internlm", "internlm2", "deepseek", "deepseek_v2", "deepseek_v3", "gpt_oss", "solar", "baichuan",
    "stablelm", "glm4_moe", "glm4_moe_lite", "glm_moe_dsa", "minimax_m2", "kimi_k2",
})
PLAIN_MLP = frozenset({
    "gpt2", "gptj", "gpt_neox", "gpt_neo", "opt", "bloom", "phi", "starcoder2", "gpt_bigcode", "falcon",
    "nemotron", "mpt",
})
# - attention-free families whose config has no attention field (their layers are read from their SSM fields);
ATTENTION_FREE = frozenset({"rwkv", "rwkv5", "mamba", "mamba2", "falcon_mamba"})
# - RWKV's time-mixing layer: no rule here (its count must be published);
NO_RULE_FAMILIES = {"rwkv": "RWKV time-mixing layers", "rwkv5": "RWKV time-mixing layers"}
# - fields that declare a layer kind no rule here sizes (a count from them would be a guess);
UNSIZED_FIELDS = {
    "compress_ratios": "compressed sparse attention (DeepSeek-V4) layers",
    "hc_mult": "hyper-connection residual streams",
    "block_configs": "per-layer block configs (Nemotron-NAS)",
    "num_hash_layers": "hash-routed expert layers",
}
# - ... except where DeepSeek-V4's compressed attention is read (`CompressedAttention`): its layers are sized then
#   (hc_mult: hyper-connection weights; num_hash_layers: the first MoE layers pick experts by token id through a
#   vocab x experts_per_token lookup table, not counted, and still hold the router, whose scores weight the experts).
V4_SIZED_FIELDS = ("compress_ratios", "hc_mult", "num_hash_layers")
# - config classes whose FFN width is 4 x hidden when the config leaves it out (n_inner: null);
FFN_4X_DEFAULT = frozenset({"gpt2", "gptj", "bloom", "gpt_bigcode", "falcon", "rwkv", "gpt_neo", "phi"})
# - learned absolute position embeddings (n_positions x hidden): counted; rotary / ALiBi families have none;
LEARNED_POSITIONS = frozenset({"gpt2", "opt", "gpt_bigcode", "gpt_neo"})
# - config classes whose tie_word_embeddings defaults to False (the transformers base default is True);
UNTIED_BY_DEFAULT = frozenset({
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "gptj", "gpt_neox", "phi", "phi3", "phimoe",
    "rwkv", "deci", "aquila", "internlm2", "olmo2", "olmoe", "deepseek", "deepseek_v2", "deepseek_v3", "gpt_oss",
    "qwen3_moe", "llama4", "llama4_text", "qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text",
    "deepseek_v32", "kimi_k2", "kimi_k25", "glm4_moe", "glm4_moe_lite", "glm_moe_dsa", "minimax_m2", "nemotron_h",
    "jamba",
})
# - attention with a sigmoid output gate (q_proj doubles) that the config does not flag (`attn_output_gate`);
OUTPUT_GATED_BY_DEFAULT = frozenset({"qwen3_next"})
# - Llama 4's MoE layers hold one always-on shared expert of the experts' width; its config has no field for it.
SHARED_EXPERT_BY_DEFAULT = frozenset({"llama4", "llama4_text"})
# Fields that declare dense-MLP layers beside the MoE ones (their width is intermediate_size): the experts' width must
# then come from `moe_intermediate_size` (Mixtral, gpt-oss, MiniMax, Jamba: the experts use intermediate_size).
DENSE_LAYER_FIELDS = ("first_k_dense_replace", "mlp_only_layers", "decoder_sparse_step", "moe_layer_freq",
                      "n_shared_experts", "shared_expert_intermediate_size")
# Multi-head latent attention (DeepSeek-V2/V3): the fields it needs, all required once `kv_lora_rank` is set.
MLA_FIELDS = ("q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
# Multi-token-prediction layers (counted apart): DeepSeek / GLM, Qwen3.5, MiniMax.
MTP_FIELDS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_modules")
# quantization_config.quant_method -> the weight precision (wattgpu.workload.PRECISION_BYTES)
QUANTIZED = {"mxfp4": "mxfp4", "fp8": "fp8", "fbgemm_fp8": "fp8", "awq": "int4", "gptq": "int4", "bitsandbytes": "int8",
             "compressed-tensors": "compressed-tensors"}
OPT_POSITION_OFFSET = 2  # OPT's learned position table has 2 extra rows

# Per-layer token mixers and MLPs (Architecture.layer_mixers / layer_mlps).
FULL, SLIDING, LINEAR, SSM, NO_MIXER = "full", "sliding", "linear", "ssm", "none"
DENSE, MOE, NO_MLP = "dense", "moe", "none"


# ---------------------------------------------------------------------------------------------------------
# config.json -> architecture


@dataclass(frozen=True)
class CompressedAttention:
    """DeepSeek-V4's attention, sized from its fields (DeepseekV4ForCausalLM; layout read from DeepSeek's reference
    `inference/model.py` as ported to lmdeploy / vLLM: `Attention`, `Compressor`, `Indexer`, `Block`):
    - a low-rank query (hidden -> q_lora_rank -> heads x head_dim) and ONE shared key-value head of head_dim
      (hidden -> head_dim; the rope part, qk_rope_head_dim, lies inside head_dim): the same entry is the key and the
      value, cached once, like MLA's latent;
    - a grouped low-rank output: o_groups groups, each (heads x head_dim / o_groups) -> o_lora_rank, then
      (o_groups x o_lora_rank) -> hidden;
    - per layer a compress ratio r (`compress_ratios`, one per decoder layer, then one per MTP layer): r = 0, the
      layer attends to its sliding window only; r > 0, a compressor (kv and gate projections hidden -> c x head_dim,
      c = 2 where r = 4 (overlapping windows), else 1, and a c x head_dim position table per slot) pools every r
      tokens into one cached entry; r = 4 layers also hold a sparse-attention indexer (its query from the q latent,
      q_lora_rank -> index_n_heads x index_head_dim; per-head weights hidden -> index_n_heads; its keys from its own
      overlapping compressor of width index_head_dim) that picks the compressed entries to attend to;
    - every layer also attends to the last `sliding_window` uncompressed entries (a fixed amount per sequence);
    - hyper-connections: the residual stream is hc_mult copies of the hidden state, mixed around the attention and
      the MLP by (2 + hc_mult) x hc_mult weights read from the hc_mult x hidden stream (2 per layer)."""

    q_lora_rank: int
    o_groups: int
    o_lora_rank: int
    ratios: tuple[int, ...]  # compress ratio per decoder layer, then per MTP layer (0: sliding window only)
    window: int  # uncompressed tokens every layer attends to (`sliding_window`)
    hc_mult: int = 1  # residual-stream copies (1: a plain residual)

    def ratio(self, layer: int) -> int:
        return self.ratios[layer] if layer < len(self.ratios) else 0


V4_REQUIRED = ("q_lora_rank", "o_groups", "o_lora_rank", "head_dim", "sliding_window")


@dataclass(frozen=True)
class Architecture:
    """A config reduced to what counting parameters and sizing the KV cache need."""

    family: str
    num_layers: int  # decoder layers
    hidden_size: int
    num_attention_heads: int | None
    num_kv_heads: int | None  # the largest per-layer value for variable-GQA models (what vLLM allocates)
    head_dim: int | None  # as set in the config (head_dim, kv_channels or d_kv)
    intermediate_size: int | None  # the dense MLP's width
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
    sliding_window: int | None = None  # tokens the other attention layers cache (None: no sliding-window layer)
    weight_precision: str = "bf16"  # from quantization_config, else the checkpoint dtype
    # --- the per-layer layout (None: every layer full attention + the MLP given by the fields above)
    layer_mixers: tuple[str, ...] | None = None  # FULL, SLIDING, LINEAR, SSM or NO_MIXER per layer
    layer_mlps: tuple[str, ...] | None = None  # DENSE, MOE or NO_MLP per layer
    attn_output_gate: bool = False  # q_proj also emits a per-channel output gate (Qwen3-Next, Qwen3.5)
    indexer: tuple[int, int] | None = None  # sparse-attention indexer: (index_n_heads, index_head_dim)
    linear_attn: tuple[int, int, int, int, int] | None = None  # key heads, key dim, value heads, value dim, conv kernel
    # state-space layer: (d_inner, state size, conv kernel, dt rank (0: Mamba-2), groups, heads (0: Mamba-1))
    ssm: tuple[int, int, int, int, int, int] | None = None
    mtp_layers: int = 0  # multi-token-prediction layers (counted apart)
    vision_params: int = 0  # vision tower, approximately (counted apart; 0: none or not sized)
    not_countable: tuple[str, str] | None = None  # (field, why) where a layer kind has no sizing rule
    csa: CompressedAttention | None = None  # DeepSeek-V4's compressed sparse attention (every layer)

    @property
    def is_moe(self) -> bool:
        return (self.num_experts or 0) > 1

    @property
    def attn_head_dim(self) -> int:
        return self.head_dim if self.head_dim is not None else self.hidden_size // (self.num_attention_heads or 1)

    @property
    def kv_values_per_layer(self) -> int | None:
        """Values cached per token and layer where they are not 2 x KV heads x head dim: MLA's latent + rope key
        (+ the sparse-attention indexer's key, DeepSeek-V3.2 / GLM-5)."""
        if self.csa is not None:  # the catalog's single value: the exact per-token sum spread over the layers
            return -(-self.kv_values_per_token // self.num_layers)
        if self.mla is None:
            return None
        return self.mla[1] + self.mla[3] + (self.indexer[1] if self.indexer else 0)

    @property
    def kv_values_per_token(self) -> int:
        """Values cached per token over every attention layer (full + sliding; below every window); 0 if none."""
        if not self.num_attention_heads:
            return 0
        if self.csa is not None:
            return self._csa_values_per_token()
        per_layer = self.kv_values_per_layer
        if per_layer is None:
            per_layer = 2 * (self.num_kv_heads or self.num_attention_heads) * self.attn_head_dim
        if self.kv_heads_per_layer is not None:
            return sum(2 * kv * self.attn_head_dim for kv in self.kv_heads_per_layer)
        mixers = self.layer_mixers or (FULL,) * self.num_layers
        return per_layer * sum(1 for m in mixers if m in (FULL, SLIDING))

    @property
    def state_values_per_sequence(self) -> int:
        """Values of the fixed per-sequence state of linear-attention and state-space layers (recurrent state +
        convolution window), independent of the context length; 0 where there are none."""
        if self.csa is not None:
            return self._csa_state_values()
        mixers = self.layer_mixers or ()
        per_layer = 0
        if self.linear_attn is not None:
            nk, dk, nv, dv, kernel = self.linear_attn
            per_layer = nv * dk * dv + (2 * nk * dk + nv * dv) * (kernel - 1)
            return per_layer * mixers.count(LINEAR)
        if self.ssm is not None:
            d_inner, n, kernel, _, groups, heads = self.ssm
            conv = d_inner + 2 * groups * n if heads else d_inner
            per_layer = d_inner * n + conv * (kernel - 1)
            return per_layer * mixers.count(SSM)
        return 0

    def _csa_values_per_token(self) -> int:
        """DeepSeek-V4: values cached per context token, over the decoder layers: one shared K = V entry of head_dim
        per `r` tokens on each layer of compress ratio r > 0 (none on r = 0 layers), + the indexer's key of
        index_head_dim per 4 tokens on r = 4 layers. The window and the compressors' pending rows are fixed per
        sequence (`_csa_state_values`)."""
        d, total = self.attn_head_dim, 0.0
        for i in range(self.num_layers):
            r = self.csa.ratio(i)  # type: ignore[union-attr]
            if r:
                total += d / r + (self.indexer[1] / r if r == 4 and self.indexer else 0)
        return math.ceil(total)

    def _csa_state_values(self) -> int:
        """DeepSeek-V4: values held per sequence whatever its length: the last `sliding_window` uncompressed K = V
        entries (head_dim each) on every decoder layer, + each compressor's pending rows (kv and gate scores,
        c x r rows of c x width, c = 2 at r = 4), the indexer's compressor included."""
        csa, d, n = self.csa, self.attn_head_dim, 0
        for i in range(self.num_layers):
            r = csa.ratio(i)  # type: ignore[union-attr]
            n += csa.window * d  # type: ignore[union-attr]
            if r:
                c = 2 if r == 4 else 1
                n += 2 * (c * r) * (c * d)
                if r == 4 and self.indexer:
                    n += 2 * (c * r) * (c * self.indexer[1])
        return n


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


def spelled(config: Mapping[str, Any], field: str) -> str:
    """The config key that gives `field` (e.g. num_experts_per_tok for experts_per_token), else its usual spelling:
    an error names the key the user wrote, never the catalog's own field."""
    return next((name for name in FIELD_NAMES[field] if present(config.get(name))), FIELD_NAMES[field][0])


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
        raise CatalogError(key, spelled(config, field), f"missing (looked for {', '.join(FIELD_NAMES[field])})")
    return _as_int(key, spelled(config, field), v, LLM_CONFIG[field].lo, LLM_CONFIG[field].hi)


def _optional(key: str, config: Mapping[str, Any], field: str, hi: float | None = None) -> int | None:
    """The field, range-checked (`hi`: a tighter upper bound than the table's), or None where absent."""
    v = _first(config, field)
    bounds = LLM_CONFIG[field]
    return None if v is None else _as_int(key, spelled(config, field), v, bounds.lo, bounds.hi if hi is None else hi)


def _check_rules(key: str, config: Mapping[str, Any], values: Mapping[str, int | None]) -> None:
    """The rules between config fields (fields.LLM_AT_MOST, LLM_DIVIDES) that `values` give, each broken one a
    CatalogError naming the config key as written (num_experts_per_tok, num_key_value_heads)."""
    name = functools.partial(spelled, config)
    for lo, hi in LLM_AT_MOST:
        a, b = values.get(lo), values.get(hi)
        if a is not None and b is not None and a > b:
            raise CatalogError(key, name(lo), f"{a} exceeds {name(hi)} {b} (at most equal)")
    for rule in LLM_DIVIDES:
        a, b = values.get(rule.divisor), values.get(rule.multiple)
        if not rule.holds(a, b, values.get(rule.unless) if rule.unless else None):
            raise CatalogError(key, name(rule.divisor), rule.problem(a, b, name))


def _as_bool(v: Any) -> bool:
    return v.strip().lower() == "true" if isinstance(v, str) else bool(v)


def _mapping(key: str, config: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    value = config.get(name)
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            value = ast.literal_eval(value)  # literals only: the flattened table stores the dict's Python repr
        except (ValueError, SyntaxError):
            raise CatalogError(key, name, "not a mapping") from None
    return value if isinstance(value, Mapping) else None


def architecture_from_config(key: str, config: Mapping[str, Any]) -> Architecture:
    """Normalise a HF config (any field spelling) into an `Architecture`; `CatalogError` on missing/absurd fields."""
    if isinstance(config, Architecture):
        return config
    if not isinstance(config, Mapping):
        raise CatalogError(key, "<config>", f"expected a mapping, got {type(config).__name__}")
    outer = config
    inner = _text_config(config)
    defaults = CONFIG_CLASS_DEFAULTS.get(str(inner.get("model_type") or config.get("model_type") or ""), {})
    config = {**defaults, **{k: v for k, v in inner.items() if present(v)},
              **{k: v for k, v in config.items() if present(v)}}
    family = _first(config, "family")
    if not isinstance(family, str) or not family.strip():
        raise CatalogError(key, "model_type", "missing")
    family = family.strip()
    text_family = str(_text_config(outer).get("model_type") or family)

    hidden = _required(key, config, "hidden_size")
    if family == "t5":  # T5's num_layers is the encoder; the decoder is what runs once per generated token
        encoder_layers = _required(key, config, "num_layers")
        layers_range = LLM_CONFIG["num_layers"]
        layers = _as_int(key, "num_decoder_layers", config.get("num_decoder_layers", encoder_layers), layers_range.lo,
                         layers_range.hi)
    else:
        encoder_layers, layers = 0, _required(key, config, "num_layers")
    vocab = _required(key, config, "vocab_size")

    attention_free = (family in ATTENTION_FREE or text_family in ATTENTION_FREE) and not present(
        _first(config, "num_attention_heads"))
    heads = None if attention_free else _required(key, config, "num_attention_heads")
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
        kv_heads = _optional(key, config, "num_kv_heads") or heads
    head_dim = _optional(key, config, "head_dim") if heads is not None else None

    inter = _optional(key, config, "intermediate_size")
    if inter is None and family in FFN_4X_DEFAULT:
        inter = 4 * hidden
    max_pos = _optional(key, config, "max_position_embeddings")
    dtype = _first(config, "dtype")
    tie = config.get("tie_word_embeddings", family not in UNTIED_BY_DEFAULT and text_family not in UNTIED_BY_DEFAULT)

    experts = _optional(key, config, "num_experts")
    is_moe = bool(experts and experts > 1)
    top_k = _optional(key, config, "experts_per_token") if experts else None
    _check_rules(key, config, {"hidden_size": hidden, "num_attention_heads": heads, "head_dim": head_dim,
                               "num_kv_heads": kv_heads if kv_per_layer is None else None, "num_experts": experts,
                               "experts_per_token": top_k})
    if is_moe and top_k is None:
        raise CatalogError(key, "num_experts_per_tok", "a mixture of experts needs the number of experts per token")
    dense_inter = _optional_named(key, config, "intermediate_size_mlp")  # Llama 4: the dense layers' own width
    moe_inter = _optional_named(key, config, "moe_intermediate_size")
    if is_moe and moe_inter is None:
        declared = next((f for f in DENSE_LAYER_FIELDS if present(config.get(f))), None)
        if declared is not None and dense_inter is None:
            raise CatalogError(key, "moe_intermediate_size",
                               f"missing: `{declared}` declares dense-MLP layers of width intermediate_size, so an "
                               "expert's width must be given")
        moe_inter = inter
    if dense_inter is not None:
        inter = dense_inter
    shared = _optional_named(key, config, "shared_expert_intermediate_size") or _optional_named(
        key, config, "moe_shared_expert_intermediate_size") or 0
    n_shared = _optional_named(key, config, "n_shared_experts") or _optional_named(key, config, "num_shared_experts")
    if n_shared and moe_inter and not shared:
        shared = n_shared * moe_inter
    if is_moe and not shared and (family in SHARED_EXPERT_BY_DEFAULT or text_family in SHARED_EXPERT_BY_DEFAULT):
        shared = moe_inter or 0
    dense_layers = _optional_named(key, config, "first_k_dense_replace") or 0
    mla = _mla(key, config) if present(config.get("kv_lora_rank")) else None
    indexer = None
    if present(config.get("index_n_heads")):
        indexer = (_optional_named(key, config, "index_n_heads"), _required_named(key, config, "index_head_dim"))

    mtp = next((_optional_named(key, config, f) for f in MTP_FIELDS if present(config.get(f))), None) or 0
    csa = _compressed_attention(key, config, layers, mtp, indexer) if present(config.get("compress_ratios")) else None
    if csa is not None:  # every layer: its own window + compressed entries, sized by `_csa_params`
        mixers, window, unsized = None, None, None
    else:
        mixers, window, unsized = _layer_mixers(key, config, family, layers, heads)
    mlps = _layer_mlps(key, config, layers, dense_layers, is_moe, mixers)
    linear = _linear_attn(key, config) if mixers and LINEAR in mixers else None
    ssm = None
    if mixers and SSM in mixers:
        ssm, why = _ssm(key, config, hidden)
        unsized = unsized or why
    if unsized is None:
        sized_here = V4_SIZED_FIELDS if csa is not None else ()
        unsized = next(((f, f"`{f}` declares {what}: no rule here sizes them; give a published count")
                        for f, what in UNSIZED_FIELDS.items() if present(config.get(f)) and f not in sized_here), None)
    if unsized is None and (family in NO_RULE_FAMILIES or text_family in NO_RULE_FAMILIES):
        unsized = ("model_type", f"{NO_RULE_FAMILIES.get(family) or NO_RULE_FAMILIES[text_family]} have no sizing "
                   "rule here; give a published count")
    kv_layers = None
    if mixers is not None:
        full = mixers.count(FULL)
        attention = full + mixers.count(SLIDING)
        if heads is not None and (window is not None or attention < layers):
            kv_layers = full  # attention-free (Mamba): None, as before; no attention head caches anything
        if window is not None and attention < layers and mixers.count(SLIDING):
            # the catalog's KV layout takes every non-full layer as sliding: no rule for windows beside linear layers
            unsized = unsized or ("sliding_window", "sliding-window layers beside linear / state-space layers")
    moe_layers = sum(1 for m in mlps if m == MOE) if (is_moe and mlps is not None) else None

    quant = _mapping(key, config, "quantization_config") or {}
    if present(config.get("quantization_config")) and not quant:
        raise CatalogError(key, "quantization_config", "not a mapping")
    method = str(quant.get("quant_method", "")).lower()
    if method and method not in QUANTIZED:
        raise CatalogError(key, "quantization_config.quant_method", f"{method!r} is not one of {', '.join(QUANTIZED)}")
    precision = QUANTIZED.get(method) or ("fp16" if str(dtype) == "float16" else "bf16")
    if precision == "compressed-tensors":
        precision = _compressed_tensors_precision(key, quant)
    output_gate = config.get("attn_output_gate")
    output_gate = _as_bool(output_gate) if present(output_gate) else (
        family in OUTPUT_GATED_BY_DEFAULT or text_family in OUTPUT_GATED_BY_DEFAULT)

    return Architecture(
        family=family, num_layers=layers, hidden_size=hidden, num_attention_heads=heads, num_kv_heads=kv_heads,
        head_dim=head_dim, intermediate_size=inter, vocab_size=vocab, max_position_embeddings=max_pos,
        dtype=str(dtype) if dtype is not None else "unspecified", tie_word_embeddings=_as_bool(tie),
        num_experts=experts, experts_per_token=top_k, expert_intermediate_size=moe_inter if experts else None,
        shared_expert_intermediate_size=shared if experts else 0, dense_layers=dense_layers if experts else 0,
        kv_heads_per_layer=kv_per_layer, encoder_layers=encoder_layers,
        mlp_matrices=_mlp_matrices(family, text_family, config), moe_layers=moe_layers, mla=mla, kv_layers=kv_layers,
        sliding_window=window, weight_precision=precision, layer_mixers=mixers, layer_mlps=mlps,
        attn_output_gate=output_gate, indexer=indexer, linear_attn=linear, ssm=ssm, mtp_layers=mtp,
        vision_params=_vision_params(outer), not_countable=unsized, csa=csa,
    )


def _compressed_tensors_precision(key: str, quant: Mapping[str, Any]) -> str:
    """compressed-tensors: the weights' bits of its config groups (4 -> int4, 8 -> fp8 / int8)."""
    groups = quant.get("config_groups")
    bits = set()
    kinds = set()
    for group in (groups.values() if isinstance(groups, Mapping) else ()):
        weights = group.get("weights") if isinstance(group, Mapping) else None
        if isinstance(weights, Mapping) and present(weights.get("num_bits")):
            bits.add(int(weights["num_bits"]))
            kinds.add(str(weights.get("type", "int")))
    if len(bits) != 1 or bits - {4, 8}:
        raise CatalogError(key, "quantization_config.config_groups", f"expected one weight width of 4 or 8 bits, "
                           f"got {sorted(bits) or 'none'}")
    return "int4" if bits == {4} else ("fp8" if kinds == {"float"} else "int8")


def _layer_mixers(key: str, config: Mapping[str, Any], family: str, layers: int, heads: int | None,
                  ) -> tuple[tuple[str, ...] | None, int | None, tuple[str, str] | None]:
    """(token mixer per layer or None when every layer is full attention, sliding window, (field, why) unsized).

    Read from, in order: `layer_types` (gpt-oss, Gemma 3, Qwen3.5, newer configs), `hybrid_override_pattern`
    (Nemotron-H: M Mamba, * attention, - MLP, E experts), `layers_block_type` or `attn_layer_period` /
    `attn_layer_offset` (Jamba), `full_attention_interval` (Qwen3-Next: every n-th layer full, the others linear),
    `hybrid_layer_pattern` (1 sliding, 0 full), `attention_chunk_size` with `no_rope_layers` (Llama 4: chunked
    local attention, cached like a window, on the rotary layers); an attention-free config with state-space fields
    (Mamba); else the sliding-window rules of `_attention_window`."""
    def window_of(required: bool) -> int | None:
        w = config.get("sliding_window")
        if present(config.get("use_sliding_window")) and not _as_bool(config["use_sliding_window"]) and not required:
            w = None
        if not present(w):
            if required:
                raise CatalogError(key, "sliding_window", "missing: the layer layout names sliding-window layers")
            return None
        bounds = LLM_CONFIG["sliding_window"]
        return _as_int(key, "sliding_window", w, bounds.lo, bounds.hi)

    types = _list(key, config, "layer_types")
    if types is not None:
        if len(types) != layers:
            raise CatalogError(key, "layer_types", f"expected one entry per layer ({layers})")
        mixers = []
        for t in types:
            t = str(t).lower()
            if "linear" in t or "deltanet" in t:
                mixers.append(LINEAR)
            elif "sliding" in t or "local" in t or "chunk" in t:
                mixers.append(SLIDING)
            elif "mamba" in t or "ssm" in t:
                mixers.append(SSM)
            elif t in ("full_attention", "attention", "global", "global_attention", "full"):
                mixers.append(FULL)
            else:
                raise CatalogError(key, "layer_types", f"no rule sizes a {t!r} layer")
        mixers = tuple(mixers)
        window = window_of(required=SLIDING in mixers) if SLIDING in mixers else None
        return (None if set(mixers) == {FULL} else mixers), window, None

    pattern = config.get("hybrid_override_pattern")
    if present(pattern):
        kinds = {"M": SSM, "*": FULL, "-": NO_MIXER, "E": NO_MIXER}
        if len(str(pattern)) != layers:
            raise CatalogError(key, "hybrid_override_pattern", f"expected one character per layer ({layers})")
        bad = sorted(set(str(pattern)) - kinds.keys())
        if bad:
            raise CatalogError(key, "hybrid_override_pattern", f"no rule sizes a {bad[0]!r} layer")
        return tuple(kinds[c] for c in str(pattern)), None, None

    block_types = _list(key, config, "layers_block_type")
    if block_types is None and present(config.get("attn_layer_period")):
        period = _required_named(key, config, "attn_layer_period")
        offset = _optional_named(key, config, "attn_layer_offset") or 0
        block_types = ["attention" if i % period == offset else "mamba" for i in range(layers)]
    if block_types is not None:
        if len(block_types) != layers:
            raise CatalogError(key, "layers_block_type", f"expected one entry per layer ({layers})")
        mixers = []
        for t in block_types:
            t = str(t).lower()
            if t not in ("attention", "mamba"):
                raise CatalogError(key, "layers_block_type", f"no rule sizes a {t!r} layer")
            mixers.append(FULL if t == "attention" else SSM)
        return tuple(mixers), None, None

    interval = _optional_named(key, config, "full_attention_interval")
    if interval and present(config.get("linear_num_value_heads")):
        return tuple(FULL if (i + 1) % interval == 0 else LINEAR for i in range(layers)), None, None

    hybrid = _list(key, config, "hybrid_layer_pattern")
    if hybrid is not None:
        if len(hybrid) != layers or not all(v in (0, 1) for v in hybrid):
            raise CatalogError(key, "hybrid_layer_pattern", f"expected {layers} entries of 0 (full) or 1 (sliding)")
        unsized = None
        if any(present(config.get(f)) for f in ("swa_num_attention_heads", "swa_num_key_value_heads", "swa_head_dim")):
            unsized = ("swa_num_key_value_heads", "sliding-window layers with their own head counts")
        return tuple(SLIDING if v else FULL for v in hybrid), window_of(required=True), unsized

    chunk = _optional_named(key, config, "attention_chunk_size")
    if chunk:
        nope = _list(key, config, "no_rope_layers")
        if nope is None:  # Llama4TextConfig's default: every `no_rope_layer_interval`-th layer is a global NoPE layer
            every = _optional_named(key, config, "no_rope_layer_interval") or 4
            nope = [int((i + 1) % every != 0) for i in range(layers)]
        if len(nope) != layers:
            raise CatalogError(key, "no_rope_layers", f"expected one entry per layer ({layers})")
        return tuple(SLIDING if v else FULL for v in nope), chunk, None

    if heads is None:
        if any(present(config.get(f)) for f in ("state_size", "ssm_state_size", "mamba_d_state", "d_state")):
            return (SSM,) * layers, None, None
        return None, None, None  # attention-free without state-space fields (RWKV): sized elsewhere or refused

    full_layers, window = _attention_window(key, config, family, layers)
    if window is None:
        return None, None, None
    sliding = layers - full_layers
    # which layers slide does not change a count; keep the catalog's order (full ones first is arbitrary)
    return (FULL,) * full_layers + (SLIDING,) * sliding, window, None


def _layer_mlps(key: str, config: Mapping[str, Any], layers: int, dense_prefix: int, is_moe: bool,
                mixers: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """The MLP of every layer: DENSE, MOE or NO_MLP (None: every layer dense, no experts)."""
    pattern = config.get("hybrid_override_pattern")
    if present(pattern):
        return tuple(MOE if c == "E" else DENSE if c == "-" else NO_MLP for c in str(pattern))
    if mixers is not None and set(mixers) == {SSM} and not present(config.get("attn_layer_period")):
        return (NO_MLP,) * layers  # Mamba: the mixer is the whole block
    if not is_moe:
        return None
    types = _list(key, config, "mlp_layer_types")
    if types is not None:
        if len(types) != layers:
            raise CatalogError(key, "mlp_layer_types", f"expected one entry per layer ({layers})")
        return tuple(MOE if str(t).lower() in ("sparse", "moe") else DENSE for t in types)
    if present(config.get("expert_layer_period")):  # Jamba
        period = _required_named(key, config, "expert_layer_period")
        offset = _optional_named(key, config, "expert_layer_offset") or 0
        return tuple(MOE if i % period == offset else DENSE for i in range(layers))
    if present(config.get("interleave_moe_layer_step")):  # Llama 4: layers step-1, 2*step-1, ... hold experts
        step = _required_named(key, config, "interleave_moe_layer_step")
        return tuple(MOE if (i + 1) % step == 0 else DENSE for i in range(layers))
    raw_freq = config.get("moe_layer_freq")
    as_list = isinstance(raw_freq, (list, tuple)) or isinstance(raw_freq, str) and raw_freq.strip().startswith("[")
    freq_list = _list(key, config, "moe_layer_freq") if as_list else None  # MiMo: one 0 / 1 per layer
    if freq_list is not None:
        if len(freq_list) != layers:
            raise CatalogError(key, "moe_layer_freq", f"expected one entry per layer ({layers})")
        return tuple(MOE if v else DENSE for v in freq_list)
    step = _optional_named(key, config, "decoder_sparse_step") or 1
    freq = _optional_named(key, config, "moe_layer_freq") or 1
    dense = _list(key, config, "mlp_only_layers") or []
    if not all(isinstance(i, int) for i in dense):
        raise CatalogError(key, "mlp_only_layers", "expected a list of layer indices")
    return tuple(MOE if i >= dense_prefix and i not in dense and (i + 1) % step == 0 and i % freq == 0 else DENSE
                 for i in range(layers))


def _linear_attn(key: str, config: Mapping[str, Any]) -> tuple[int, int, int, int, int]:
    """Gated DeltaNet (Qwen3-Next, Qwen3.5): key heads, key head dim, value heads, value head dim, conv kernel."""
    names = ("linear_num_key_heads", "linear_key_head_dim", "linear_num_value_heads", "linear_value_head_dim",
             "linear_conv_kernel_dim")
    for name in names:
        if not present(config.get(name)):
            raise NotCountable(key, name, "missing: linear-attention layers (layer_types) need it to be sized")
    return tuple(_as_int(key, n, config[n], 1, 100_000) for n in names)  # type: ignore[return-value]


def _ssm(key: str, config: Mapping[str, Any], hidden: int) -> tuple[tuple | None, tuple[str, str] | None]:
    """A state-space layer: Mamba-2 where heads / groups are given (Nemotron-H, Mamba2), else Mamba-1 (Mamba, Jamba).
    ((d_inner, state, kernel, dt_rank, groups, heads), None) or (None, (field, why)) where a field is missing."""
    def get(*names):
        return next((config[n] for n in names if present(config.get(n))), None)

    state = get("ssm_state_size", "state_size", "mamba_d_state", "d_state")
    kernel = get("conv_kernel", "mamba_d_conv", "d_conv")
    if state is None:
        return None, ("state_size", "missing: state-space layers need their state size to be sized")
    if kernel is None:
        return None, ("conv_kernel", "missing: state-space layers need their convolution width to be sized")
    state, kernel = _as_int(key, "state_size", state, 1, 100_000), _as_int(key, "conv_kernel", kernel, 1, 1000)
    heads = get("mamba_num_heads", "num_heads") if present(get("n_groups", "mamba_n_groups")) else None
    expand = get("expand", "mamba_expand")
    if heads is not None:  # Mamba-2
        head_dim = get("mamba_head_dim", "head_dim")
        if head_dim is None:
            return None, ("mamba_head_dim", "missing: Mamba-2 layers need their head dim")
        heads, head_dim = _as_int(key, "mamba_num_heads", heads, 1, 100_000), _as_int(key, "mamba_head_dim",
                                                                                       head_dim, 1, 100_000)
        groups = _as_int(key, "n_groups", get("n_groups", "mamba_n_groups"), 1, 100_000)
        return (heads * head_dim, state, kernel, 0, groups, heads), None
    d_inner = get("mamba_intermediate_size")
    if d_inner is None and not present(config.get("attn_layer_period")):
        d_inner = _first(config, "intermediate_size")  # Mamba: no MLP, intermediate_size is the SSM's width
    if d_inner is None and expand:
        d_inner = expand * hidden
    if d_inner is None:
        return None, ("expand", "missing: state-space layers need their width (expand x hidden)")
    d_inner = _as_int(key, "expand", d_inner, 1, 10_000_000)
    dt_rank = get("time_step_rank", "mamba_dt_rank", "dt_rank")
    dt_rank = math.ceil(hidden / 16) if dt_rank in (None, "auto") else _as_int(key, "time_step_rank", dt_rank, 1,
                                                                                 100_000)
    return (d_inner, state, kernel, dt_rank, 0, 0), None


def _vision_params(config: Mapping[str, Any]) -> int:
    """A vision tower's parameters, approximately (ViT blocks: 4 h^2 attention + 2 h x intermediate MLP), from
    `vision_config`; 0 where none or its fields are missing. Counted apart: not streamed per generated token."""
    vc = config.get("vision_config")
    if not isinstance(vc, Mapping):
        return 0
    def get(*names):
        return next((vc[n] for n in names if isinstance(vc.get(n), int) and not isinstance(vc.get(n), bool)), None)
    h = get("hidden_size", "vt_hidden_size", "embed_dim")
    depth = get("depth", "num_hidden_layers", "vt_num_hidden_layers", "num_layers")
    inter = get("intermediate_size", "vt_intermediate_size") or (4 * h if h else None)
    if not (h and depth and inter):
        return 0
    return depth * (4 * h * h + 2 * h * inter)


def _compressed_attention(key: str, config: Mapping[str, Any], layers: int, mtp: int,
                          indexer: tuple[int, int] | None) -> CompressedAttention:
    """DeepSeek-V4's `compress_ratios` and the fields its layers need; a missing one is a `NotCountable` naming it."""
    for name in V4_REQUIRED:
        if not present(config.get(name)):
            raise NotCountable(key, name, "missing: compressed sparse attention (compress_ratios) needs it")
    ratios = tuple(_as_int(key, "compress_ratios", r, 0, 65_536) for r in _list(key, config, "compress_ratios"))
    if len(ratios) not in (layers, layers + mtp):
        raise CatalogError(key, "compress_ratios", f"{len(ratios)} values for {layers} layers (+ {mtp} MTP)")
    if any(r == 1 for r in ratios):
        raise CatalogError(key, "compress_ratios", "a ratio of 1 compresses nothing (0: no compression)")
    if 4 in ratios[:layers] and indexer is None:
        raise NotCountable(key, "index_n_heads", "missing: ratio-4 layers hold a sparse-attention indexer")
    heads = _required(key, config, "num_attention_heads")
    groups = _required_named(key, config, "o_groups")
    if groups == 0 or heads % groups:
        raise CatalogError(key, "o_groups", f"{groups} does not divide the {heads} attention heads")
    kv = _optional(key, config, "num_kv_heads")
    if kv not in (None, 1):
        raise NotCountable(key, "num_key_value_heads", f"{kv}: compressed attention has one shared K = V head")
    bounds = LLM_CONFIG["sliding_window"]
    return CompressedAttention(
        q_lora_rank=_required_named(key, config, "q_lora_rank"), o_groups=groups,
        o_lora_rank=_required_named(key, config, "o_lora_rank"), ratios=ratios,
        window=_as_int(key, "sliding_window", config["sliding_window"], bounds.lo, bounds.hi),
        hc_mult=max(_optional_named(key, config, "hc_mult") or 1, 1))


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
    applies to: by model type, every other layer from the first (Gemma 2: transformers' Gemma2 alternates sliding
    and global layers), every layer but each `sliding_window_pattern`-th (Gemma 3), the layers from
    `max_window_layers` on (Qwen2 with use_sliding_window); else every layer (Mistral-7B-v0.1, Starcoder2, Phi-3).
    (`layer_types`, the explicit list, is read by `_layer_mixers`.)"""
    window = config.get("sliding_window")
    if present(config.get("use_sliding_window")) and not _as_bool(config["use_sliding_window"]):
        window = None
    if not present(window):
        return None, None
    bounds = LLM_CONFIG["sliding_window"]
    window = _as_int(key, "sliding_window", window, bounds.lo, bounds.hi)
    pattern = _optional_named(key, config, "sliding_window_pattern")
    max_window_layers = _optional_named(key, config, "max_window_layers")
    if family in ALTERNATING_WINDOW:
        sliding = (layers + 1) // 2
    elif pattern:
        sliding = layers - layers // pattern
    elif family in WINDOW_FROM_MAX_WINDOW_LAYERS and max_window_layers is not None:
        sliding = max(layers - max_window_layers, 0)
    else:
        sliding = layers
    return (None, None) if sliding == 0 else (layers - sliding, window)


def _mlp_matrices(family: str, text_family: str, config: Mapping[str, Any]) -> int | None:
    """3 for a gated MLP (gate, up, down), 2 for a plain one (up, down), from the fields: T5's `feed_forward_proj`,
    else the activation (a GLU-only activation such as silu / swiglu: gated; relu / relu2: plain; gelu: plain but
    for Gemma's GeGLU), else, where the config names no activation, the family's (None: unknown)."""
    if family == "t5":  # "gated-gelu" (FLAN-T5, T5 v1.1) or plain "relu" (original T5)
        gated = "gated" in str(config.get("feed_forward_proj", "")) or _as_bool(config.get("is_gated_act", False))
        return 3 if gated else 2
    if present(config.get("is_gated_act")):
        return 3 if _as_bool(config["is_gated_act"]) else 2
    act = next((str(config[f]).strip().lower() for f in ACTIVATION_FIELDS if isinstance(config.get(f), str)
                and config[f].strip()), None)
    if act is not None:
        if act in GLU_ACTIVATIONS or act.endswith("glu"):
            return 3
        if "gelu" in act:
            return 3 if family in GELU_GATED or text_family in GELU_GATED else 2
        if "relu" in act or act in ("tanh", "sigmoid"):
            return 2
    for f in (family, text_family):
        if f in GATED_MLP:
            return 3
        if f in PLAIN_MLP:
            return 2
    return None


def _optional_named(key: str, config: Mapping[str, Any], name: str) -> int | None:
    v = config.get(name)
    return _as_int(key, name, v, 0, 10_000_000) if present(v) else None


def _required_named(key: str, config: Mapping[str, Any], name: str) -> int:
    v = _optional_named(key, config, name)
    if v is None:
        raise CatalogError(key, name, "missing")
    return v


# ---------------------------------------------------------------------------------------------------------
# parameter counts


class NotCountable(CatalogError):
    """The architecture has a layer kind with no counting rule here (RWKV, DeepSeek-V4's compressed attention, a
    state-space layer missing its fields, an MLP whose shape the config does not tell)."""


@dataclass(frozen=True)
class ParamBreakdown:
    """Parameters in billions: the decoder's total and active (per token) count, and the parts counted apart."""

    total_b: float  # embeddings + decoder layers (+ LM head); no MTP layers, no vision tower
    active_b: float  # per token: the same with only the routed experts a token uses
    embedding_b: float  # the input embedding (+ learned positions), inside total and active
    lm_head_b: float  # the untied output projection (0 when tied), inside total and active
    mtp_b: float  # multi-token-prediction layers, not in total
    vision_b: float  # the vision tower, approximately, not in total
    kv_values_per_token: int  # cached values per token over every attention layer (below every window)
    state_values_per_sequence: int  # fixed state of linear-attention / state-space layers, per sequence


def _attention_params(arch: Architecture, heads: int, kv: int) -> int:
    h = arch.hidden_size
    if arch.mla is not None:  # latent attention: low-rank q, one shared kv latent (+ rope key), per-head up-projections
        q_lora, kv_lora, nope, rope, v_dim = arch.mla
        q = h * heads * (nope + rope) if q_lora is None else h * q_lora + q_lora * heads * (nope + rope)
        n = q + h * (kv_lora + rope) + kv_lora * heads * (nope + v_dim) + heads * v_dim * h
    else:
        d = arch.attn_head_dim
        n = h * heads * d * (2 if arch.attn_output_gate else 1) + 2 * h * kv * d + heads * d * h  # q(+gate), k, v, o
    if arch.indexer is not None:  # sparse-attention indexer: its query (from the q latent), one key, head weights
        idx_heads, idx_dim = arch.indexer
        q_in = arch.mla[0] if arch.mla is not None and arch.mla[0] else h
        n += q_in * idx_heads * idx_dim + h * idx_dim + h * idx_heads
    return n


def _csa_params(arch: Architecture, layer: int) -> int:
    """One DeepSeek-V4 layer's attention (+ its hyper-connection mixing), from `CompressedAttention`'s layout."""
    csa, h, heads, d = arch.csa, arch.hidden_size, arch.num_attention_heads or 0, arch.attn_head_dim
    assert csa is not None
    n = h * csa.q_lora_rank + csa.q_lora_rank * heads * d  # low-rank query
    n += h * d  # the one shared K = V head
    n += heads * d * csa.o_lora_rank + csa.o_groups * csa.o_lora_rank * h  # grouped low-rank output
    r = csa.ratio(layer)
    if r:
        c = 2 if r == 4 else 1
        n += 2 * h * c * d + r * c * d  # compressor: kv + gate projections, position table
        if r == 4 and arch.indexer is not None:
            idx_heads, idx_dim = arch.indexer
            # as for DeepSeek-V3.2: query from the q latent + per-head weights; its key from its own compressor
            n += csa.q_lora_rank * idx_heads * idx_dim + h * idx_heads + 2 * h * c * idx_dim + r * c * idx_dim
    m = csa.hc_mult
    if m > 1:  # hyper-connections: (2 + m) x m mixing weights over the m x hidden stream, before attention and MLP
        n += 2 * ((2 + m) * m * m * h + (2 + m) * m + 3)
    return n


def _mixer_params(arch: Architecture, kind: str, layer: int) -> int:
    h = arch.hidden_size
    if arch.csa is not None and kind in (FULL, SLIDING):
        return _csa_params(arch, layer)
    if kind in (FULL, SLIDING):
        heads = arch.num_attention_heads or 0
        kv = arch.kv_heads_per_layer[layer] if arch.kv_heads_per_layer else (arch.num_kv_heads or heads)
        return _attention_params(arch, heads, kv)
    if kind == LINEAR:  # Gated DeltaNet: q, k, v, z (output gate), b, a projections; depthwise conv; out projection
        nk, dk, nv, dv, kernel = arch.linear_attn  # type: ignore[misc]
        k, v = nk * dk, nv * dv
        return h * (2 * k + 2 * v + 2 * nv) + (2 * k + v) * kernel + v * h + 2 * nv + dv
    if kind == SSM:
        d_inner, n, kernel, dt_rank, groups, heads = arch.ssm  # type: ignore[misc]
        if heads:  # Mamba-2: in_proj -> (z, x, B, C, dt); conv over x, B, C; out_proj
            conv = d_inner + 2 * groups * n
            return h * (d_inner + conv + heads) + conv * (kernel + 1) + 3 * heads + d_inner + d_inner * h
        # Mamba-1: in_proj -> (x, z); conv; x_proj -> (dt, B, C); dt_proj; A, D; out_proj
        return (h * 2 * d_inner + d_inner * (kernel + 1) + d_inner * (dt_rank + 2 * n) + dt_rank * d_inner
                + d_inner + d_inner * n + d_inner + d_inner * h)
    return 0


def _mlp_params(arch: Architecture, kind: str) -> tuple[int, int]:
    """(total, active) of one layer's MLP."""
    mats, h = arch.mlp_matrices or 0, arch.hidden_size
    if kind == DENSE:
        n = mats * h * (arch.intermediate_size or 0)
        return n, n
    if kind == MOE:
        expert = mats * h * (arch.expert_intermediate_size or 0)
        always = mats * h * arch.shared_expert_intermediate_size + h * (arch.num_experts or 0)  # shared + router
        return arch.num_experts * expert + always, arch.experts_per_token * expert + always
    return 0, 0


def _check_countable(arch: Architecture, key: str) -> None:
    if arch.not_countable is not None:
        raise NotCountable(key, *arch.not_countable)
    if arch.num_attention_heads is None and arch.layer_mixers is None:
        raise NotCountable(key, "model_type", f"{arch.family!r} has no attention and no state-space fields; "
                           "give a published count")
    mlps = arch.layer_mlps
    needs_mlp = mlps is None or any(m != NO_MLP for m in mlps)
    if needs_mlp and arch.mlp_matrices is None:
        raise NotCountable(key, "hidden_act", f"no activation field tells a gated from a plain MLP for "
                           f"{arch.family!r}; give a published count")
    if needs_mlp and arch.intermediate_size is None and (mlps is None or DENSE in mlps):
        raise CatalogError(key, "intermediate_size", "missing; needed to count MLP parameters")
    if arch.is_moe and arch.expert_intermediate_size is None:
        raise CatalogError(key, "moe_intermediate_size", "missing; needed to count the experts")


def param_breakdown(config: Mapping[str, Any] | Architecture, key: str = "<config>") -> ParamBreakdown:
    """Parameter counts from a HF config by rule (see the module docstring); `NotCountable` where no rule applies."""
    arch = architecture_from_config(key, config)
    _check_countable(arch, key)
    h, v = arch.hidden_size, arch.vocab_size
    embed = v * h
    if arch.family in LEARNED_POSITIONS and arch.max_position_embeddings:
        offset = OPT_POSITION_OFFSET if arch.family == "opt" else 0
        embed += (arch.max_position_embeddings + offset) * h
    head = 0 if arch.tie_word_embeddings else v * h

    mixers = arch.layer_mixers or (FULL,) * arch.num_layers
    if arch.layer_mlps is not None:
        mlps = arch.layer_mlps
    elif arch.is_moe:  # an Architecture built by hand: experts on every layer after the dense prefix
        mlps = (DENSE,) * arch.dense_layers + (MOE,) * (arch.num_layers - arch.dense_layers)
    else:
        mlps = (DENSE,) * arch.num_layers
    total = active = 0
    for i, (mixer, mlp) in enumerate(zip(mixers, mlps, strict=True)):
        m = _mixer_params(arch, mixer, i)
        t, a = _mlp_params(arch, mlp)
        total, active = total + m + t, active + m + a

    if arch.family == "t5":  # encoder layers: self-attention + MLP; decoder layers add cross-attention
        q_dim = (arch.num_attention_heads or 0) * arch.attn_head_dim
        dense_mlp = (arch.mlp_matrices or 0) * h * (arch.intermediate_size or 0)
        extra = arch.num_layers * 4 * h * q_dim + arch.encoder_layers * (4 * h * q_dim + dense_mlp)
        total, active = total + extra, active + extra

    mtp = 0
    if arch.mtp_layers:  # one decoder layer (the last layer's kind, experts included) + its 2h -> h input projection
        last_mixer = FULL if mixers[-1] == SLIDING else mixers[-1]
        mtp_mixer = FULL if last_mixer in (LINEAR, SSM) and arch.num_attention_heads else last_mixer
        mtp_layer = arch.num_layers if arch.csa is not None else arch.num_layers - 1  # V4: the MTP layer's ratio
        mtp = arch.mtp_layers * (_mixer_params(arch, mtp_mixer, mtp_layer)
                                 + _mlp_params(arch, mlps[-1])[0] + 2 * h * h)
    fixed = embed + head
    return ParamBreakdown(
        total_b=round((total + fixed) / 1e9, 6), active_b=round((active + fixed) / 1e9, 6),
        embedding_b=round(embed / 1e9, 6), lm_head_b=round(head / 1e9, 6), mtp_b=round(mtp / 1e9, 6),
        vision_b=round(arch.vision_params / 1e9, 6), kv_values_per_token=arch.kv_values_per_token,
        state_values_per_sequence=arch.state_values_per_sequence,
    )


def attention_params_b(arch: Architecture) -> float | None:
    """Parameters (billions) of the decoder's token-mixing layers, by the same per-layer rules as `param_breakdown`
    (attention with GQA / MQA, an output gate, latent attention's ranks, a sparse-attention indexer, DeepSeek-V4's
    compressed attention; linear-attention and state-space layers): what DP attention holds whole on every GPU, where
    tensor parallelism splits it. MTP layers are not counted (a draft pass reads its own). None where a layer kind
    has no rule (`NotCountable`) and for an encoder-decoder (its cross-attention is not a decoder's token mixer)."""
    if arch.not_countable is not None or arch.family == "t5":
        return None
    mixers = arch.layer_mixers or (FULL,) * arch.num_layers
    return round(sum(_mixer_params(arch, kind, i) for i, kind in enumerate(mixers)) / 1e9, 6)


def count_params(config: Mapping[str, Any] | Architecture, key: str = "<config>") -> tuple[float, float]:
    """(total, active) parameters in billions, from a HF config (any field spelling): `param_breakdown`'s decoder
    counts (embeddings and LM head included; MTP layers and vision towers counted apart). Raises `NotCountable`
    (a `CatalogError`) naming the field of a layer kind no rule sizes."""
    b = param_breakdown(config, key)
    return b.total_b, b.active_b


def count_or_none(arch: Architecture, key: str) -> tuple[float, float] | None:
    try:
        return count_params(arch, key)
    except NotCountable:
        return None
