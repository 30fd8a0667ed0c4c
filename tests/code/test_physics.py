"""The KV cache and the memory fit, on real config.json files (data/catalogs/llm_configs), parsed the project's way
(catalogs.hf_config via catalogs.llms), each expectation computed by hand from the file's fields written out here."""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from wattgpu import features, paths, physics
from wattgpu.catalogs.hf_config import architecture_from_config
from wattgpu.catalogs.llms import LlmCatalog, llm_spec_from_hf_config, load_llm_catalog, read_config_file
from wattgpu.sources.schema import derive_concurrency

ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = ROOT / paths.LLM_CONFIG_DIR
SRC = ROOT / "src" / "wattgpu"


def spec(name: str, **published):
    key, config = read_config_file(CONFIG_DIR / f"{name}.json")
    return llm_spec_from_hf_config(key, config, **published)


def llm_columns(s) -> dict:
    """The catalog fields of one spec as the `llm_` columns features.attach_specs joins (None: NaN)."""
    return {f"llm_{f}": (np.nan if getattr(s, f) is None else getattr(s, f)) for f in features.LLM_FIELDS}


# ------------------------------------------------------------------------------------- one memory-utilisation rule

MEMORY_WORDS = re.compile(r"memory|\bmem\b|utili[sz]ation|usable|available", re.IGNORECASE)


def test_memory_utilisation_is_defined_once_in_physics():
    """vLLM's gpu_memory_utilization (0.9) is physics.MEMORY_UTILIZATION; no other line of the package writes a 0.9
    beside a memory word (load_rho's 0.9 share of TDP and the 0.9 interval level are not memory), and physics.py
    writes it once. The GiB (2**30) likewise lives in physics.py only."""
    assert physics.MEMORY_UTILIZATION == 0.9
    stray, in_physics = [], 0
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Constant) and type(node.value) is float and node.value == 0.9:
                if path.name == "physics.py" and path.parent == SRC:
                    in_physics += 1
                elif MEMORY_WORDS.search(lines[node.lineno - 1]):
                    stray.append(f"{path.relative_to(SRC)}:{node.lineno}: {lines[node.lineno - 1].strip()}")
        if not (path.name == "physics.py" and path.parent == SRC) and re.search(r"\b2\s*\*\*\s*30\b", text):
            stray.append(f"{path.relative_to(SRC)}: 2**30 (physics.GIB)")
    assert stray == []
    assert in_physics == 1  # MEMORY_UTILIZATION = 0.9, the default of kv_fit_sequences and every other rule


def test_every_memory_rule_defaults_to_the_one_utilisation():
    import inspect

    from wattgpu.planning.planner import MemoryRule

    assert MemoryRule().usable_fraction == physics.MEMORY_UTILIZATION
    default = inspect.signature(physics.kv_fit_sequences).parameters["utilization"].default
    assert default == physics.MEMORY_UTILIZATION


# ------------------------------------------------------------------------------------- KV bytes: one owner


def test_kv_bytes_have_one_owner_that_the_catalog_and_the_features_share(monkeypatch):
    """Both the catalog's LlmSpec and the features read an LLM's KV cache through physics.kv_cache_layout, and agree
    on every real config at a short and a long context."""
    calls = []
    layout = physics.kv_cache_layout

    def spy(*args, **kwargs):
        calls.append(args)
        return layout(*args, **kwargs)

    monkeypatch.setattr(physics, "kv_cache_layout", spy)
    s = spec("openai--gpt-oss-120b")
    # gpt-oss-120b: 36 layers, 8 KV heads x head_dim 64 -> 2 x 8 x 64 = 1024 values per layer and token, 2 bytes
    assert s.kv_cache_bytes_per_token() == 36 * 1024 * 2
    assert len(calls) == 1
    assert features.kv_bytes_per_token(pd.DataFrame([llm_columns(s)])).iloc[0] == 36 * 1024 * 2
    assert len(calls) == 2

    monkeypatch.undo()
    for path in sorted(CONFIG_DIR.glob("*.json")):
        key, config = read_config_file(path)
        try:
            s = llm_spec_from_hf_config(key, config)
        except Exception:  # attention-free / hybrid configs need a published count: not a KV question
            continue
        row = pd.DataFrame([llm_columns(s)] * 2)
        assert features.kv_bytes_per_token(row).iloc[0] == pytest.approx(s.kv_cache_bytes_per_token()), key
        by_features = features.kv_bytes_per_sequence(row, [100.0, 8192.0]).to_numpy()
        by_catalog = [s.kv_cache_bytes_per_sequence(100.0), s.kv_cache_bytes_per_sequence(8192.0)]
        assert by_features == pytest.approx(by_catalog), key


# ------------------------------------------------------------------------------------- sliding windows

# (config, full layers, window) and the hand computation: values per layer = 2 x KV heads x head dim, 2 bytes each
WINDOWED = [
    # Mistral-7B-v0.1: 32 layers, all sliding over 4096 tokens; 8 KV heads x (4096 / 32 heads = 128) -> 2048 values
    ("mistralai--Mistral-7B-v0.1", 0, 4096, 2048 * 2 * 32 * 4096, 2048 * 2 * 32 * 1000),
    # Gemma-2-9b-it: 42 layers, every other one slides over 4096 (21 + 21); 8 KV heads x head_dim 256 -> 4096 values
    ("google--gemma-2-9b-it", 21, 4096, 4096 * 2 * (21 * 8192 + 21 * 4096), 4096 * 2 * 42 * 1000),
    # gpt-oss-120b: 36 layer_types, 18 sliding over 128 tokens; 8 KV heads x head_dim 64 -> 1024 values
    ("openai--gpt-oss-120b", 18, 128, 1024 * 2 * (18 * 8192 + 18 * 128), 1024 * 2 * (18 * 1000 + 18 * 128)),
    # Qwen2-7B: sliding_window 131072 but use_sliding_window false: no window; 28 layers, 4 KV heads x 128 -> 1024
    ("Qwen--Qwen2-7B", None, None, 1024 * 2 * 28 * 8192, 1024 * 2 * 28 * 1000),
]


@pytest.mark.parametrize("name, full_layers, window, bytes_8192, bytes_1000", WINDOWED)
def test_sliding_window_layers_cache_at_most_their_window(name, full_layers, window, bytes_8192, bytes_1000):
    key, config = read_config_file(CONFIG_DIR / f"{name}.json")
    arch = architecture_from_config(key, config)
    assert (arch.kv_layers, arch.sliding_window) == (full_layers, window)
    s = llm_spec_from_hf_config(key, config)
    assert (s.kv_layers, s.sliding_window) == (full_layers, window)
    assert s.kv_cache_bytes_per_sequence(8192) == bytes_8192
    assert s.kv_cache_bytes_per_sequence(1000) == bytes_1000


@pytest.mark.parametrize("name", ["mistralai--Mistral-7B-v0.1", "google--gemma-2-9b-it"])
def test_below_the_window_every_layer_caches_the_whole_context(name):
    """At a context shorter than the window, sliding layers hold what full attention holds: per token x context."""
    s = spec(name)
    values = 2 * s.num_kv_heads * s.resolved_head_dim
    assert s.kv_cache_bytes_per_sequence(1000) == values * 2 * s.num_layers * 1000 == s.kv_cache_bytes_per_token() * 1000


def gpu_columns(memory_gb=80.0, bandwidth_gb_s=2000.0):
    return {"gpu_tdp_w": 700.0, "gpu_memory_gb": memory_gb, "gpu_memory_bandwidth_gb_s": bandwidth_gb_s,
            "gpu_base_clock_mhz": 1590.0, "gpu_boost_clock_mhz": 1980.0, "gpu_fp16_tensor_tflops": 989.0,
            "gpu_memory_type": "HBM3"}


def workload_row(s, prompt, output, precision="bf16", memory_gb=80.0, bandwidth_gb_s=2000.0):
    return {"scenario": "server", "scenario_label": "server_high", "request_rate_per_s": np.nan, "concurrency": 8.0,
            "n_gpus": 1, "tensor_parallel": 1, "pipeline_parallel": 1, "precision": precision, "engine": "vllm",
            "engine_version": "0.14.1", "prompt_tokens_mean": prompt, "output_tokens_mean": output,
            **gpu_columns(memory_gb, bandwidth_gb_s), **llm_columns(s)}


def test_workload_features_read_the_windowed_kv_cache():
    """Mistral-7B-v0.1 at 8000 prompt + 384 output tokens: a decode step reads the KV of prompt + half the answer =
    8192 tokens, capped at 4096 by the window on all 32 layers: 2048 values x 2 bytes x 32 x 4096 = 512 MiB; the
    memory fit holds the whole 8384-token sequence, also capped: the same 512 MiB."""
    s = spec("mistralai--Mistral-7B-v0.1", published_params_b=7.0)
    f = features.engineer(pd.DataFrame([workload_row(s, 8000.0, 384.0)]), offline_batch=256).iloc[0]
    kv = 2048 * 2 * 32 * 4096
    assert f["kv_step_per_sequence_s"] == pytest.approx(kv / 2000e9)
    assert f["kv_bytes_per_token"] == 2048 * 2 * 32  # a context shorter than the window
    assert math.exp(f["log_kv_fit_sequences"]) == pytest.approx((0.9 * 80 - 2 * 7.0) * 1e9 / kv)


def test_a_catalog_without_the_window_column_still_loads(tmp_path):
    """A catalog CSV written before the window was recorded loads with sliding_window None, keeping its old
    meaning (only the kv_layers cache anything)."""
    catalog = LlmCatalog([spec("openai--gpt-oss-120b"), spec("mistralai--Mistral-7B-v0.1")])
    frame = catalog.to_frame()
    assert frame.set_index("key").loc["openai/gpt-oss-120b", "sliding_window"] == 128
    path = tmp_path / "llm_catalog.csv"
    frame.drop(columns=["sliding_window"]).assign(kv_layers=[18, None]).to_csv(path, index=False)
    old = load_llm_catalog(path)
    assert old.get("openai/gpt-oss-120b").sliding_window is None
    assert old.get("openai/gpt-oss-120b").kv_cache_bytes_per_sequence(1000) == 1024 * 2 * 18 * 1000
    assert old.get("mistralai/Mistral-7B-v0.1").kv_cache_bytes_per_sequence(8192) == 2048 * 2 * 32 * 8192


# ------------------------------------------------------------------------------------- the fit at a run's precision


def test_kv_cache_is_16_bit_unless_a_run_states_an_8_bit_one():
    assert physics.kv_bytes_per_value() == physics.kv_bytes_per_value("auto") == 2
    assert physics.kv_bytes_per_value("fp8_e4m3") == physics.kv_bytes_per_value("int8") == 1


class FakeGpus:
    """One 40 GB GPU (FIXTURE), with the resolve/get interface of the GPU catalog."""

    gpu = type("Gpu", (), {"memory_gb": 40.0, "tdp_w": 300.0, "memory_bandwidth_gb_s": 1500.0})()

    def get(self, key):
        return self.gpu


# Meta-Llama-3-8B (published 8.0 B parameters): 32 layers, 8 KV heads x (4096 / 32 heads = 128) -> 2048 values per
# layer and token, 2 bytes each: 131,072 bytes per token; 1000 prompt + 1000 output tokens -> 262.144 MB a sequence.
# On 40 GB: 0.9 x 40 = 36 GB usable; bf16 weights 2 x 8 = 16 GB -> 20e9 / 262.144e6 = 76.29 sequences;
# fp8 weights 1 x 8 = 8 GB -> 28e9 / 262.144e6 = 106.81 sequences.
LLAMA_KV_SEQUENCE = 131072 * 2000
FIT = {"bf16": (36 - 16) * 1e9 / LLAMA_KV_SEQUENCE, "fp8": (36 - 8) * 1e9 / LLAMA_KV_SEQUENCE}


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_ingest_kv_fit_weighs_the_weights_at_the_runs_precision(precision):
    assert FIT == pytest.approx({"bf16": 76.29, "fp8": 106.81}, abs=0.01)
    s = spec("meta-llama--Meta-Llama-3-8B", published_params_b=8.0)
    llms = LlmCatalog([s])
    base = {"gpu": "GPU-A", "llm": s.key, "precision": precision, "engine": "vllm", "engine_version": "0.6.0",
            "n_gpus": 1, "prompt_tokens_mean": 1000.0, "output_tokens_mean": 1000.0, "throughput_tok_s": 100.0,
            "itl_s": np.nan, "itl_derivation": ""}
    rows = pd.DataFrame([
        {**base, "scenario": "static_batch", "concurrency": 1000.0, "concurrency_setting": 1000.0,
         "concurrency_derivation": "static_batch"},
        {**base, "scenario": "offline", "concurrency": np.nan, "concurrency_setting": 1000.0,
         "concurrency_derivation": ""},
    ])
    out = derive_concurrency(rows, FakeGpus(), llms)
    assert out.at[0, "concurrency"] == math.floor(FIT[precision])  # the batch runs in waves of what fits
    assert out.at[1, "concurrency"] == pytest.approx(FIT[precision])  # below vLLM's cap of 256


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_the_features_kv_fit_follows_the_same_rule(precision):
    s = spec("meta-llama--Meta-Llama-3-8B", published_params_b=8.0)
    row = workload_row(s, 1000.0, 1000.0, precision=precision, memory_gb=40.0)
    f = features.engineer(pd.DataFrame([row]), offline_batch=256).iloc[0]
    assert math.exp(f["log_kv_fit_sequences"]) == pytest.approx(FIT[precision])
