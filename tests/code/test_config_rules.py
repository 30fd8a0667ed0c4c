"""Parameter counts and KV / state sizes from config.json FIELDS (catalogs.hf_config), on real configs of current
families (data/catalogs/llm_configs and data/catalogs/reference_configs), checked against the developers' published
counts (data/catalogs/llm_published_params.yaml and reference_configs/published_params.yaml)."""

from __future__ import annotations

from pathlib import Path

import pytest

from wattgpu import paths
from wattgpu.catalogs.hf_config import (
    NotCountable,
    architecture_from_config,
    count_params,
    param_breakdown,
)
from wattgpu.catalogs.llms import llm_spec_from_hf_config, load_published_params, read_config_file
from wattgpu.errors import CatalogError

ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = ROOT / paths.LLM_CONFIG_DIR
REFERENCE_DIR = ROOT / paths.CATALOG_DIR / "reference_configs"
PUBLISHED = {**load_published_params(ROOT / paths.CATALOG_DIR / "llm_published_params.yaml"),
             **load_published_params(REFERENCE_DIR / "published_params.yaml")}


def config(name: str) -> tuple[str, dict]:
    path = CONFIG_DIR / f"{name}.json"
    return read_config_file(path if path.exists() else REFERENCE_DIR / f"{name}.json")


# (config file, family) of the real configs of current families whose count the rules must give
COUNTED = [
    ("Qwen--Qwen3.5-397B-A17B", "qwen3.5 moe, linear attention, multimodal"),
    ("Qwen--Qwen3.5-122B-A10B", "qwen3.5 moe"), ("Qwen--Qwen3.5-35B-A3B", "qwen3.5 moe"),
    ("Qwen--Qwen3.5-27B", "qwen3.5 dense"), ("Qwen--Qwen3-Next-80B-A3B-Thinking", "qwen3-next"),
    ("Qwen--Qwen3-0.6B", "qwen3"), ("Qwen--Qwen3-1.7B", "qwen3"), ("Qwen--Qwen3-8B", "qwen3"), ("Qwen--Qwen3-32B", "qwen3"),
    ("Qwen--Qwen3-30B-A3B", "qwen3 moe"), ("Qwen--Qwen3-235B-A22B", "qwen3 moe"),
    ("Qwen--Qwen3-Coder-480B-A35B-Instruct", "qwen3 moe"), ("Qwen--Qwen3-VL-235B-A22B-Instruct", "qwen3-vl moe"),
    ("deepseek-ai--DeepSeek-V3", "deepseek mla"), ("deepseek-ai--DeepSeek-R1", "deepseek mla"),
    ("deepseek-ai--DeepSeek-V3.2", "deepseek mla + sparse-attention indexer"),
    ("deepseek-ai--DeepSeek-V4-Pro", "deepseek-v4 compressed sparse attention + hyper-connections"),
    ("deepseek-ai--DeepSeek-V4-Flash", "deepseek-v4 compressed sparse attention + hyper-connections"),
    ("moonshotai--Kimi-K2-Instruct", "kimi"), ("moonshotai--Kimi-K2.5", "kimi multimodal"),
    ("zai-org--GLM-4.5", "glm4 moe + mtp"), ("zai-org--GLM-4.5-Air", "glm4 moe"), ("zai-org--GLM-5", "glm mla + indexer"),
    ("openai--gpt-oss-120b", "gpt-oss"), ("openai--gpt-oss-20b", "gpt-oss"),
    ("meta-llama--Llama-4-Scout-17B-16E-Instruct", "llama4"), ("meta-llama--Llama-4-Maverick-17B-128E-Instruct", "llama4"),
    ("meta-llama--Meta-Llama-3.1-8B", "llama3"), ("meta-llama--Meta-Llama-3.1-405B-Instruct", "llama3"),
    ("mistralai--Mixtral-8x7B-v0.1", "mixtral"), ("mistralai--Mixtral-8x22B-v0.1", "mixtral"),
    ("mistralai--Mistral-Large-Instruct-2407", "mistral"), ("google--gemma-2-27b-it", "gemma2"),
    ("google--gemma-3-27b-it", "gemma3 multimodal, class defaults"), ("google--gemma-3-4b-it", "gemma3 multimodal"),
    ("microsoft--phi-4", "phi3"), ("MiniMaxAI--MiniMax-M2.5", "minimax"),
    ("nvidia--Nemotron-H-56B-Base-8K", "nemotron-h mamba2 hybrid"),
    ("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "nemotron-h mamba2 + moe"),
    ("ai21labs--AI21-Jamba-1.5-Mini", "jamba mamba + moe"), ("tiiuae--falcon-mamba-7b", "mamba"),
]

# Publishers that leave embeddings out of their active count (the rules keep them, as in the total).
ACTIVE_LEAVES_OUT = {
    "openai/gpt-oss-120b": "input", "openai/gpt-oss-20b": "input",  # gpt-oss model card: no input embedding
    "zai-org/GLM-4.5": "both", "zai-org/GLM-4.5-Air": "both", "zai-org/GLM-5": "both",  # GLM: embedding and output layer left out
    # DeepSeek-V4: "49B" / "13B activated" fit without the input embedding (48.9 / 13.3; with it 49.8 / 13.8)
    "deepseek-ai/DeepSeek-V4-Pro": "input", "deepseek-ai/DeepSeek-V4-Flash": "input",
}
# Published figures rounded to 2-3 significant digits ("1.6T", "284B", "13B"): (total, active) tolerance.
ROUNDED = {"deepseek-ai/DeepSeek-V4-Pro": (0.03, 0.05), "deepseek-ai/DeepSeek-V4-Flash": (0.03, 0.05)}
# Published figures that are size labels, not counts: the gap the rules leave (computed vs label), and why.
LABEL_GAPS = {
    ("microsoft/phi-4", "total"): (0.048, "'14-billion parameter' is a size; the config gives 14.66B"),
    ("Qwen/Qwen3-Next-80B-A3B-Thinking", "active"): (0.30, "'A3B' is a label; q/k/v/z + experts give 3.87B"),
    ("Qwen/Qwen3.5-35B-A3B", "active"): (0.16, "'A3B' is a label; the config gives 3.46B"),
}


def test_at_least_thirty_real_configs_of_twelve_families_are_counted():
    families = set()
    for name, family in COUNTED:
        key, cfg = config(name)
        total, active = count_params(cfg, key)
        assert 0 < active <= total
        families.add(architecture_from_config(key, cfg).family)
    assert len(COUNTED) >= 30 and len(families) >= 12


CHECKED = [n for n, _ in COUNTED if config(n)[0] in PUBLISHED]


@pytest.mark.parametrize("name", CHECKED)
def test_computed_counts_match_the_published_ones(name):
    """Total within 2 %, active within 5 % of the publisher's figure (in the publisher's convention)."""
    key, cfg = config(name)
    b = param_breakdown(cfg, key)
    pub = PUBLISHED[key]
    active = b.active_b - {"input": b.embedding_b, "both": b.embedding_b + b.lm_head_b}.get(
        ACTIVE_LEAVES_OUT.get(key, ""), 0.0)
    tol_total, tol_active = ROUNDED.get(key, (0.02, 0.05))
    for what, mine, theirs, tol in (("total", b.total_b, pub.total_b, tol_total),
                                    ("active", active, pub.active_b, tol_active)):
        if theirs is None:
            continue
        gap = abs(mine / theirs - 1)
        if (key, what) in LABEL_GAPS:
            bound, why = LABEL_GAPS[key, what]
            assert tol < gap <= bound, f"{key} {what}: {mine:.3f} vs {theirs} ({why})"
        else:
            assert gap <= tol, f"{key} {what}: computed {mine:.3f} vs published {theirs}"


def test_mtp_and_vision_are_counted_apart():
    key, cfg = config("deepseek-ai--DeepSeek-V3")
    b = param_breakdown(cfg, key)
    # one MTP layer: MLA + 256 routed + 1 shared expert + router + the 2h -> h projection (the 671B leaves it out)
    assert 11 < b.mtp_b < 12 and b.total_b == pytest.approx(671, rel=0.002)
    key, cfg = config("Qwen--Qwen3.5-397B-A17B")
    b = param_breakdown(cfg, key)
    assert 0.3 < b.vision_b < 0.5 and b.mtp_b > 0  # 27 ViT blocks of width 1152, not in the decoder count


# --- an unknown model_type is read by the same rules ------------------------------------------------------------

LLAMA_LIKE = {
    "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, "hidden_act": "silu",
    "tie_word_embeddings": False,
}


def test_an_unknown_model_type_with_standard_fields_is_counted():
    assert count_params({**LLAMA_LIKE, "model_type": "acme_newarch"}) == count_params(LLAMA_LIKE)
    moe = {**LLAMA_LIKE, "model_type": "acme_moe", "n_routed_experts": 64, "num_experts_per_tok": 4,
           "moe_intermediate_size": 1024, "n_shared_experts": 2, "first_k_dense_replace": 2}
    total, active = count_params(moe)
    h, layers = 4096, 32
    attn = h * 4096 + 2 * h * 1024 + 4096 * h
    expert = 3 * h * 1024
    moe_layer = attn + 64 * expert + 2 * expert + h * 64
    dense_layer = attn + 3 * h * 14336
    embed = 2 * 128256 * h
    assert total == pytest.approx((embed + 2 * dense_layer + (layers - 2) * moe_layer) / 1e9, abs=1e-6)
    active_moe = attn + 4 * expert + 2 * expert + h * 64
    assert active == pytest.approx((embed + 2 * dense_layer + (layers - 2) * active_moe) / 1e9, abs=1e-6)


def test_gated_or_plain_mlp_is_read_from_the_activation():
    plain = {**LLAMA_LIKE, "model_type": "acme", "hidden_act": "gelu"}
    gated, ungated = count_params({**LLAMA_LIKE, "model_type": "acme"})[0], count_params(plain)[0]
    assert gated - ungated == pytest.approx(32 * 4096 * 14336 / 1e9, abs=1e-6)  # one matrix less per layer
    with pytest.raises(NotCountable) as err:  # no activation, unknown family: no silent guess
        count_params({k: v for k, v in LLAMA_LIKE.items() if k != "hidden_act"} | {"model_type": "acme"})
    assert err.value.field == "hidden_act"


# --- a layer kind no rule sizes is an error naming its field ---------------------------------------------------------

@pytest.mark.parametrize("name, field", [
    ("XiaomiMiMo--MiMo-V2-Flash", "swa_num_key_value_heads"),
])
def test_an_unsizable_layer_kind_names_the_field_that_declares_it(name, field):
    key, cfg = config(name)
    with pytest.raises(NotCountable) as err:
        count_params(cfg, key)
    assert err.value.field == field
    with pytest.raises(CatalogError):  # and the catalog will not take it without a published count
        llm_spec_from_hf_config(key, cfg)


def test_unknown_layer_types_and_missing_linear_fields_are_named():
    with pytest.raises(CatalogError) as err:
        count_params({**LLAMA_LIKE, "num_hidden_layers": 2, "layer_types": ["full_attention", "wavelet_attention"]})
    assert err.value.field == "layer_types" and "wavelet_attention" in str(err.value)
    key, cfg = config("Qwen--Qwen3.5-27B")
    del cfg["text_config"]["linear_key_head_dim"]
    with pytest.raises(NotCountable) as err:
        count_params(cfg, key)
    assert err.value.field == "linear_key_head_dim"


# --- KV cache per token and fixed state, by hand from the fields ------------------------------------------------------

def test_kv_per_token_of_latent_attention():
    # DeepSeek-R1: 61 layers x (kv_lora_rank 512 + qk_rope_head_dim 64) values, 2 bytes each
    key, cfg = config("deepseek-ai--DeepSeek-R1")
    assert llm_spec_from_hf_config(key, cfg).kv_cache_bytes_per_token() == 61 * (512 + 64) * 2
    # DeepSeek-V3.2 adds its indexer's key (index_head_dim 128) per layer
    key, cfg = config("deepseek-ai--DeepSeek-V3.2")
    assert param_breakdown(cfg, key).kv_values_per_token == 61 * (512 + 64 + 128)


def test_kv_of_sliding_and_chunked_layers():
    # gpt-oss-20b: 24 layer_types, 12 sliding over 128 tokens; 8 KV heads x head_dim 64 -> 1024 values per layer
    key, cfg = config("openai--gpt-oss-20b")
    arch = architecture_from_config(key, cfg)
    assert (arch.kv_layers, arch.sliding_window) == (12, 128)
    assert arch.kv_values_per_token == 24 * 2 * 8 * 64
    # Llama 4 Scout: chunked attention (8192) on 3 of 4 layers, every 4th a global NoPE layer: 12 full of 48
    key, cfg = config("meta-llama--Llama-4-Scout-17B-16E-Instruct")
    s = llm_spec_from_hf_config(key, cfg)
    assert (s.kv_layers, s.sliding_window) == (12, 8192)
    per_layer = 2 * 8 * 128 * 2
    assert s.kv_cache_bytes_per_sequence(100_000) == per_layer * (12 * 100_000 + 36 * 8192)


def test_linear_attention_and_state_space_layers_cache_a_fixed_state_not_kv():
    # Qwen3.5-397B: 60 layers, full_attention every 4th (layer_types): 15 x 2 KV heads x head_dim 256 per token;
    # 45 Gated DeltaNet layers: 64 value heads x 128 x 128 state + conv (2 x 16 x 128 + 64 x 128) x (4 - 1)
    key, cfg = config("Qwen--Qwen3.5-397B-A17B")
    b = param_breakdown(cfg, key)
    assert b.kv_values_per_token == 15 * 2 * 2 * 256
    assert b.state_values_per_sequence == 45 * (64 * 128 * 128 + (2 * 16 * 128 + 64 * 128) * 3)
    assert llm_spec_from_hf_config(key, cfg).kv_cache_bytes_per_token() == 15 * 2 * 2 * 256 * 2
    # Nemotron-H-56B: hybrid_override_pattern of 118 layers: 10 '*' attention (8 KV heads x 128), 54 'M' Mamba-2
    # (256 heads x head dim 64 = d_inner 16384, x ssm_state_size 256; conv (16384 + 2 x 8 groups x 256) x (4 - 1)),
    # 54 '-' MLP-only
    key, cfg = config("nvidia--Nemotron-H-56B-Base-8K")
    b = param_breakdown(cfg, key)
    assert b.kv_values_per_token == 10 * 2 * 8 * 128
    assert b.state_values_per_sequence == 54 * (16384 * 256 + (16384 + 2 * 8 * 256) * 3)
    # Mamba: no attention, no KV
    key, cfg = config("tiiuae--falcon-mamba-7b")
    assert llm_spec_from_hf_config(key, cfg).kv_cache_bytes_per_token() == 0
    assert param_breakdown(cfg, key).state_values_per_sequence == 64 * (8192 * 16 + 8192 * 3)


# --- DeepSeek-V4: compressed sparse attention, sized from its fields ----------------------------------------------------

def v4_by_hand(cfg: dict) -> tuple[float, float, float, int, int]:
    """(total, active, mtp in billions, KV values per context token, fixed values per sequence), written out from the
    V4 layout (hf_config.CompressedAttention's docstring), independently of the rules' code."""
    h, qr, heads, d = cfg["hidden_size"], cfg["q_lora_rank"], cfg["num_attention_heads"], cfg["head_dim"]
    g, orank, m, window = cfg["o_groups"], cfg["o_lora_rank"], cfg["hc_mult"], cfg["sliding_window"]
    ni, di, layers = cfg["index_n_heads"], cfg["index_head_dim"], cfg["num_hidden_layers"]
    expert = 3 * h * cfg["moe_intermediate_size"]
    e, k, shared = cfg["n_routed_experts"], cfg["num_experts_per_tok"], cfg["n_shared_experts"]

    def layer(r):
        n = h * qr + qr * heads * d + h * d + g * orank * (heads * d // g) + g * orank * h
        if r:
            c = 2 if r == 4 else 1
            n += 2 * h * c * d + r * c * d
        if r == 4:
            n += qr * ni * di + h * ni + 2 * h * 2 * di + 4 * 2 * di
        return n + 2 * ((2 + m) * m * m * h + (2 + m) * m + 3)

    ratios = cfg["compress_ratios"]
    attn = sum(layer(r) for r in ratios[:layers])
    embed = 2 * cfg["vocab_size"] * h  # untied
    moe_total, moe_active = e * expert + shared * expert + h * e, k * expert + shared * expert + h * e
    mtp = layer(ratios[layers]) + moe_total + 2 * h * h
    kv = sum(d // r + (di // 4 if r == 4 else 0) for r in ratios[:layers] if r)
    fixed = sum(window * d + (2 * (2 * 4) * (2 * d) + 2 * (2 * 4) * (2 * di) if r == 4 else 2 * r * d if r else 0)
                for r in ratios[:layers])
    return ((attn + layers * moe_total + embed) / 1e9, (attn + layers * moe_active + embed) / 1e9, mtp / 1e9, kv,
            fixed)


@pytest.mark.parametrize("name", ["deepseek-ai--DeepSeek-V4-Pro", "deepseek-ai--DeepSeek-V4-Flash"])
def test_deepseek_v4_is_sized_by_rule(name):
    key, cfg = config(name)
    b = param_breakdown(cfg, key)
    total, active, mtp, kv, fixed = v4_by_hand(cfg)
    assert (b.total_b, b.active_b, b.mtp_b) == pytest.approx((total, active, mtp), abs=2e-6)
    assert (b.kv_values_per_token, b.state_values_per_sequence) == (kv, fixed)
    spec = llm_spec_from_hf_config(key, cfg)  # buildable from the config alone, no published count needed
    # the catalog's one value per layer: the exact per-token sum spread over the layers, rounded up (< 1 % over)
    assert 1 <= spec.kv_cache_bytes_per_token() / (2 * kv) < 1.01
    assert (spec.kv_layers, spec.sliding_window) == (None, None)


def test_deepseek_v4_pro_kv_matches_the_published_figure():
    # V4-Pro: 61 layers, compress ratio 4 on 30 (512 / 4 + indexer key 128 / 4 per token), 128 on 31 (512 / 128):
    # 30 x (128 + 32) + 31 x 4 = 4924 values per token; DeepSeek states 9.62 GiB per 1M-token sequence in bf16
    key, cfg = config("deepseek-ai--DeepSeek-V4-Pro")
    b = param_breakdown(cfg, key)
    assert b.kv_values_per_token == 30 * (128 + 32) + 31 * 4 == 4924
    assert b.kv_values_per_token * 2 * 2**20 / 2**30 == pytest.approx(9.62, abs=0.005)
    # fixed per sequence: the 128-token window of 512 values on 61 layers + the compressors' pending rows
    assert b.state_values_per_sequence == 61 * 128 * 512 + 30 * (2 * 8 * 1024 + 2 * 8 * 256) + 31 * 2 * 128 * 512
    assert architecture_from_config(key, cfg).csa.ratio(61) == 0  # the MTP layer's entry: window only


def test_deepseek_v4_missing_or_stray_fields_are_named():
    key, cfg = config("deepseek-ai--DeepSeek-V4-Flash")
    with pytest.raises(NotCountable) as err:
        count_params({k: v for k, v in cfg.items() if k != "o_lora_rank"}, key)
    assert err.value.field == "o_lora_rank"
    with pytest.raises(CatalogError) as err:
        count_params({**cfg, "compress_ratios": cfg["compress_ratios"][:10]}, key)
    assert err.value.field == "compress_ratios"
    with pytest.raises(NotCountable) as err:  # hyper-connections without V4's attention: still no rule
        count_params({**LLAMA_LIKE, "hc_mult": 4})
    assert err.value.field == "hc_mult"


# --- fields a config leaves to its transformers config class ---------------------------------------------------------

def test_gemma3_takes_the_config_class_defaults_it_leaves_out():
    # gemma-3-27b-it's text_config has no vocab_size: Gemma3TextConfig's 262208 applies (tied, so counted once);
    # 62 layers, every 6th full attention (10), the others a 1024-token window
    key, cfg = config("google--gemma-3-27b-it")
    assert "vocab_size" not in cfg["text_config"] and "vocab_size" not in cfg
    arch = architecture_from_config(key, cfg)
    assert (arch.vocab_size, arch.tie_word_embeddings, arch.kv_layers, arch.sliding_window) == (262208, True, 10, 1024)
    b = param_breakdown(cfg, key)
    h, layers = 5376, 62
    per_layer = h * 32 * 128 + 2 * h * 16 * 128 + 32 * 128 * h + 3 * h * 21504  # GeGLU MLP
    assert b.total_b == pytest.approx((262208 * h + layers * per_layer) / 1e9, abs=1e-6)
    # the SigLIP tower (27 blocks of 1152, MLP 4304) apart: ~0.41B of the report's 417M vision encoder
    assert b.vision_b == pytest.approx(0.417, rel=0.03)
    # gemma-3-4b-it names no head counts either: 8 heads, 4 KV heads of 256 (the class defaults)
    key, cfg = config("google--gemma-3-4b-it")
    arch = architecture_from_config(key, cfg)
    assert (arch.num_attention_heads, arch.num_kv_heads, arch.head_dim, arch.vocab_size) == (8, 4, 256, 262208)
    # a config that gives the field keeps its own value
    own = {**cfg, "text_config": {**cfg["text_config"], "vocab_size": 1000}}
    assert architecture_from_config(key, own).vocab_size == 1000
