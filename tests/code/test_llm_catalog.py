"""The LLM catalog: parameter counts, KV-cache size, config.json files, the config table, name lookup."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from wattgpu import paths
from wattgpu.catalogs.llms import (
    LlmCatalog,
    build_llm_catalog,
    count_params,
    llm_spec_from_hf_config,
    load_llm_catalog,
    read_config_file,
    specs_from_config_table,
)
from wattgpu.errors import CatalogError, UnknownNameError

ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = ROOT / paths.LLM_CONFIG_DIR
PUBLISHED = ROOT / paths.CATALOG_DIR / "llm_published_params.yaml"

LLAMA_31_8B = {  # meta-llama/Llama-3.1-8B-Instruct config.json, the fields that matter
    "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}
MIXTRAL_8X7B = {
    "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000, "num_local_experts": 8,
    "num_experts_per_tok": 2, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}


def _dataset(rel: str) -> Path | None:
    """A real dataset file: the project's DVC copy, else the shared read-only copy; None if neither exists."""
    shared = Path(os.environ.get("WATTGPU_SHARED_DATASETS", "/work/shared/datasets"))
    for p in (ROOT / paths.RAW_DIR / rel, shared / rel):
        if p.exists():
            return p
    return None


def _write(directory: Path, key: str, config: dict) -> Path:
    p = directory / f"{key.replace('/', '--', 1)}.json"
    p.write_text(json.dumps(config))
    return p


def test_count_params_dense_llama_31_8b():
    total, active = count_params(LLAMA_31_8B)
    assert total == pytest.approx(8.03, abs=0.01)
    assert active == total


def test_count_params_moe_mixtral():
    total, active = count_params(MIXTRAL_8X7B)
    assert total == pytest.approx(46.7, abs=0.1)
    assert active == pytest.approx(12.9, abs=0.1)


def test_count_params_reads_gpt2_and_t5_field_names():
    gpt2 = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024,
            "vocab_size": 50257}  # n_inner absent: 4 x n_embd; tied embeddings by default
    assert count_params(gpt2)[0] == pytest.approx(0.124, abs=0.001)
    flan_t5_xl = {"model_type": "t5", "d_model": 2048, "d_ff": 5120, "d_kv": 64, "num_heads": 32,
                  "num_layers": 24, "num_decoder_layers": 24, "vocab_size": 32128,
                  "feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}
    assert count_params(flan_t5_xl)[0] == pytest.approx(2.85, abs=0.01)


def test_kv_cache_bytes_llama_31_8b():
    spec = llm_spec_from_hf_config("meta-llama/Llama-3.1-8B-Instruct", LLAMA_31_8B)
    assert spec.kv_cache_bytes_per_token() == 2 * 32 * 8 * 128 * 2 == 131072
    assert spec.params_source == "computed" and not spec.is_moe


def test_published_count_wins_and_attention_free_needs_one():
    rwkv = {"model_type": "rwkv", "hidden_size": 4096, "num_hidden_layers": 32, "vocab_size": 50277}
    with pytest.raises(CatalogError) as exc:
        llm_spec_from_hf_config("RWKV/rwkv-raven-7b", rwkv)
    assert exc.value.entry == "RWKV/rwkv-raven-7b"
    spec = llm_spec_from_hf_config("RWKV/rwkv-raven-7b", rwkv, published_params_b=7.39)
    assert (spec.total_params_b, spec.params_source, spec.computed_params_b) == (7.39, "published", None)
    assert spec.num_attention_heads is None and spec.kv_cache_bytes_per_token() == 0


def test_missing_hidden_size_names_key_and_field():
    config = {k: v for k, v in LLAMA_31_8B.items() if k != "hidden_size"}
    with pytest.raises(CatalogError) as exc:
        llm_spec_from_hf_config("acme/broken-7b", config)
    assert (exc.value.entry, exc.value.field) == ("acme/broken-7b", "hidden_size")


def test_absurd_field_is_rejected():
    with pytest.raises(CatalogError) as exc:
        count_params({**LLAMA_31_8B, "num_hidden_layers": 0})
    assert exc.value.field == "num_hidden_layers"  # the key as the config writes it


def test_config_file_dropped_in_dir_appears_in_catalog(tmp_path):
    _write(tmp_path, "acme/llama-8b", {**LLAMA_31_8B, "_wattgpu_aliases": ["acme/llama-8b-chat"]})
    cat, report = build_llm_catalog(None, tmp_path, None)
    assert cat.keys == ["acme/llama-8b"] and report == []
    spec = cat.get("ACME/Llama-8B-Chat")  # alias, any case
    assert spec.total_params_b == pytest.approx(8.03, abs=0.01)
    assert spec.source.startswith("config.json: ") and spec.source.endswith("acme--llama-8b.json")


def test_published_counts_are_used_and_gaps_reported(tmp_path):
    _write(tmp_path, "acme/llama-8b", LLAMA_31_8B)
    published = tmp_path / "published.yaml"
    published.write_text("acme/llama-8b: {total_b: 7.0, source_url: https://example.org/card}\n")
    cat, report = build_llm_catalog(None, tmp_path, published)
    assert cat.get("acme/llama-8b").params_source == "published"
    assert [(r["key"], r["field"]) for r in report] == [("acme/llama-8b", "total_params_b")]
    assert report[0]["rel_gap"] == pytest.approx(8.03 / 7.0 - 1, abs=0.01)


def test_unknown_wattgpu_key_in_config_file_is_rejected(tmp_path):
    _write(tmp_path, "acme/llama-8b", {**LLAMA_31_8B, "_wattgpu_notes": "typo"})
    with pytest.raises(CatalogError) as exc:
        build_llm_catalog(None, tmp_path, None)
    assert exc.value.field == "_wattgpu_notes"


def test_table_rows_three_row_frame():
    table = pd.DataFrame({
        "model_name": ["acme/dense", "acme/moe", "acme/mamba"],
        "total_b_params": [8.03, 46.7, 7.0], "active_b_params": [8.03, 12.9, 7.0],
        "model_type": ["llama", "mixtral", "falcon_mamba"], "num_layers": [32, 32, 64],
        "hidden_size": [4096, 4096, 4096], "num_attention_heads": [32, 32, None],
        "num_key_value_heads": [8, 8, None], "intermediate_size": [14336, 14336, 8192],
        "vocab_size": [128256, 32000, 65024], "num_local_experts": [None, 8, None],
        "num_experts_per_tok": [None, 2, None], "tie_word_embeddings": [False, False, False],
    })
    specs, report = specs_from_config_table(table)
    dense, moe, mamba = specs
    assert (dense.is_moe, moe.is_moe, mamba.is_moe) == (False, True, False)
    assert moe.active_params_b == 12.9 and moe.num_experts == 8 and moe.params_source == "table"
    assert mamba.computed_params_b is None and mamba.kv_cache_bytes_per_token() == 0
    assert report == []


def test_table_row_with_invalid_field_names_model_and_field():
    table = pd.DataFrame({"model_name": ["acme/bad"], "total_b_params": [7.0], "active_b_params": [7.0],
                          "model_type": ["llama"], "num_layers": [32], "hidden_size": [-1],
                          "num_attention_heads": [32], "vocab_size": [32000], "intermediate_size": [11008]})
    with pytest.raises(CatalogError) as exc:
        specs_from_config_table(table)
    assert (exc.value.entry, exc.value.field) == ("acme/bad", "hidden_size")


def test_unknown_name_suggests_close_matches():
    cat = LlmCatalog([llm_spec_from_hf_config("meta-llama/Llama-3.1-8B-Instruct", LLAMA_31_8B)])
    with pytest.raises(UnknownNameError) as exc:
        cat.resolve("meta-llama/Llama-3.1-8B-Instruc")
    assert "meta-llama/Llama-3.1-8B-Instruct" in exc.value.suggestions


def test_duplicate_names_are_rejected():
    spec = llm_spec_from_hf_config("acme/a", LLAMA_31_8B)
    with pytest.raises(CatalogError):
        LlmCatalog([spec]).with_spec(spec.model_copy(update={"key": "ACME/A"}))


def test_frame_round_trip_through_csv(tmp_path):
    cat = LlmCatalog([
        llm_spec_from_hf_config("acme/llama", {**LLAMA_31_8B, "_wattgpu_aliases": ["a", "b"]}),
        llm_spec_from_hf_config("acme/mixtral", MIXTRAL_8X7B, 46.7, "x", published_active_b=12.9),
        llm_spec_from_hf_config("acme/rwkv", {"model_type": "rwkv", "hidden_size": 64, "num_hidden_layers": 1,
                                              "vocab_size": 100}, 0.1),
    ])
    path = tmp_path / "llm_catalog.csv"
    cat.to_frame().to_csv(path, index=False, float_format="%.10g")
    assert list(load_llm_catalog(path)) == list(cat)
    # the same bytes elsewhere (a model folder's copy of the project's table): read once per process
    copy = tmp_path / "copy.csv"
    copy.write_bytes(path.read_bytes())
    assert load_llm_catalog(copy) is load_llm_catalog(path)
    path.write_bytes(path.read_bytes().replace(b"acme/rwkv", b"acme/rwkv-2"))  # new content: read anew
    assert load_llm_catalog(path).keys[-1] == "acme/rwkv-2" and load_llm_catalog(copy).keys[-1] == "acme/rwkv"


def test_shipped_config_files_build():
    cat, _ = build_llm_catalog(None, CONFIG_DIR, PUBLISHED)
    assert len(cat) >= 50
    assert cat.resolve("metaai/llama-7B") == "huggyllama/llama-7b"
    assert cat.get("mistralai/Mixtral-8x22B-Instruct-v0.1").is_moe


@pytest.fixture(scope="module")
def real_catalog():
    table = _dataset("wattgpu-catalogs/model_features.csv")
    if table is None:
        pytest.fail("model_features.csv not available: run `make data`")
    return build_llm_catalog(table, CONFIG_DIR, PUBLISHED)


def test_real_table_watt_counts_models(real_catalog):
    cat, report = real_catalog
    assert len(cat) >= 49
    wc = _dataset("wattcounts/watt_counts_processed.csv")
    if wc is None:
        pytest.fail("watt_counts_processed.csv not available: run `make data`")
    models = pd.read_csv(wc, usecols=["model"])["model"].unique()
    specs = [cat.get(m) for m in models]
    assert len(specs) == 49
    assert sum(s.is_moe for s in specs) == 7
    assert all(s.params_source == "table" for s in specs)
    assert cat.resolve("meta-llama/Meta-Llama-3.1-8B-Instruct") == "meta-llama/Llama-3.1-8B-Instruct"
    assert all(abs(r["rel_gap"]) > 0.10 for r in report)


def test_real_catalog_covers_every_dataset_llm(real_catalog):
    cat, _ = real_catalog
    names: set[str] = set()
    if (v2 := _dataset("mlenergy-v2/llm_text_generation")) is not None:
        names |= {f"{p.parent.name}/{p.name}".removesuffix("-pp1") for p in v2.glob("*/*/*/*") if p.is_dir()}
    if (legacy := _dataset("mlenergy-v2/legacy")) is not None:
        for f in legacy.glob("*_benchmark.csv"):
            names |= set(pd.read_csv(f, usecols=["model"])["model"])
    if (bench := _dataset("llm-inference-bench/All_results.csv")) is not None:
        names |= set(pd.read_csv(bench, usecols=["Model"])["Model"].dropna())
    if not names:
        pytest.fail("no measurement datasets available: run `make data`")
    assert sorted(n for n in names if n not in cat) == []


# --- expert layouts of newer MoE families, from the published configs in data/catalogs/llm_configs -------------

@pytest.mark.parametrize("name, total, active, kv_bytes, precision", [
    # published total / active (B); KV bytes per token at 16 bits
    ("Qwen--Qwen3-30B-A3B", 30.5, 3.3, 2 * 48 * 4 * 128 * 2, "bf16"),
    ("Qwen--Qwen3-235B-A22B", 235, 22, 2 * 94 * 4 * 128 * 2, "bf16"),
    # gpt-oss: per token below its 128-token window every layer caches the token (beyond it the sliding half caps
    # at the window: test_physics); OpenAI's active count leaves the input embedding out, ours keeps it (+11 %), as
    # for every other model
    ("openai--gpt-oss-120b", 116.83, 5.13 * 1.113, 36 * 2 * 8 * 64 * 2, "mxfp4"),
    # DeepSeek-V3: latent attention caches kv_lora_rank + rope dims per layer, not 2 x heads x head dim
    ("deepseek-ai--DeepSeek-V3", 671, 37, 61 * (512 + 64) * 2, "fp8"),
])
def test_newer_moe_layouts_count_and_size_their_kv_cache(name, total, active, kv_bytes, precision):
    key, config = read_config_file(CONFIG_DIR / f"{name}.json")
    computed_total, computed_active = count_params(config, key)
    assert computed_total == pytest.approx(total, rel=0.03) and computed_active == pytest.approx(active, rel=0.03)
    spec = llm_spec_from_hf_config(key, config)
    assert spec.is_moe and spec.kv_cache_bytes_per_token() == kv_bytes and spec.weight_precision == precision


@pytest.mark.parametrize("name, drop, field", [
    ("Qwen--Qwen3-30B-A3B", "moe_intermediate_size", "moe_intermediate_size"),
    ("deepseek-ai--DeepSeek-V3", "v_head_dim", "v_head_dim"),
    ("Qwen--Qwen3-30B-A3B", "num_experts_per_tok", "num_experts_per_tok"),
])
def test_a_moe_layout_missing_a_field_names_it(name, drop, field):
    key, config = read_config_file(CONFIG_DIR / f"{name}.json")
    config.pop(drop)
    with pytest.raises(CatalogError) as err:
        count_params(config, key)
    assert err.value.field == field


def test_qwen_moe_dense_layers_are_counted_as_dense():
    key, config = read_config_file(CONFIG_DIR / "Qwen--Qwen3-30B-A3B.json")
    every, _ = count_params(config, key)
    half, _ = count_params({**config, "decoder_sparse_step": 2}, key)  # experts on every other layer only
    h, layers = config["hidden_size"], config["num_hidden_layers"]
    experts = config["num_experts"] * 3 * h * config["moe_intermediate_size"] + h * config["num_experts"]
    dense = 3 * h * config["intermediate_size"]
    assert every - half == pytest.approx(layers // 2 * (experts - dense) / 1e9, rel=1e-6)
