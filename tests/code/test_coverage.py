"""Training ranges and extrapolation notes on hand-written FIXTURE rows."""

import math

import pandas as pd

from wattgpu.modeling import coverage


def test_ranges_ignore_missing_values_and_narrowest_keeps_what_every_model_saw():
    rows = pd.DataFrame({"gpu_tdp_w": [70.0, 700.0, 350.0], "request_rate_per_s": [math.nan, 0.017, 0.33]})
    ranges = coverage.training_ranges(rows)
    assert ranges == {"gpu_tdp_w": [70.0, 700.0], "request_rate_per_s": [0.017, 0.33]}
    assert coverage.narrowest([ranges, {"gpu_tdp_w": [100.0, 800.0]}])["gpu_tdp_w"] == [100.0, 700.0]


def test_outside_names_the_input_and_the_bound_and_skips_unknown_or_missing():
    ranges = {"gpu_tdp_w": [70.0, 700.0], "request_rate_per_s": [0.017, 0.33], "output_tokens_mean": [5.0, 258.0]}
    row = {"gpu_tdp_w": 1000.0, "request_rate_per_s": math.nan, "output_tokens_mean": 2.0, "n_gpus": 8}
    assert coverage.outside(row, ranges) == ["TDP (W) 1000 > 700 measured", "output tokens 2 < 5 measured"]
    assert coverage.outside(row, ranges, coverage.GPU_COLUMNS) == ["TDP (W) 1000 > 700 measured"]
    assert coverage.outside({"gpu_tdp_w": 300.0}, ranges) == []


def test_an_architecture_no_measured_gpu_has_extrapolates_inside_the_spec_ranges():
    """FIXTURE rows: the architectures measured are recorded by name, every model's set is intersected, and a GPU of
    another architecture is flagged (mask and note) although its TDP lies inside the range; blank is not judged."""
    rows = pd.DataFrame({"gpu_tdp_w": [300.0, 700.0, 400.0],
                         "gpu_architecture": ["Volta", "Hopper", " "]})
    ranges = coverage.training_ranges(rows)
    assert ranges["gpu_architecture"] == ["Hopper", "Volta"]
    assert coverage.narrowest([ranges, {"gpu_architecture": ["Ampere", "Hopper"]}])["gpu_architecture"] == ["Hopper"]
    asked = pd.DataFrame({"gpu_tdp_w": [500.0, 500.0, 500.0], "gpu_architecture": ["Blackwell", "Hopper", None]})
    assert coverage.outside_mask(asked, ranges).tolist() == [True, False, False]
    assert coverage.outside({"gpu_tdp_w": 500.0, "gpu_architecture": "Blackwell"}, ranges, coverage.GPU_COLUMNS) == [
        "GPU architecture Blackwell: none measured (Hopper, Volta)"]
    assert coverage.outside({"gpu_tdp_w": 500.0, "gpu_architecture": "Hopper"}, ranges) == []


def test_gpus_per_replica_are_ranged_per_engine_generation():
    """FIXTURE rows: vLLM's V0 engine measured on 1 - 8 GPUs, its V1 engine on one GPU only (as in the sources: Watt
    Counts' vLLM 0.14.1). An 8-GPU replica on the V1 engine (or on SGLang, answered as it) extrapolates although 8 GPUs
    were measured with V0; on V0 it does not; a replica larger than every measured one gets the one note over all rows."""
    rows = pd.DataFrame({"engine": ["vllm", "vllm", "vllm", "llama.cpp"], "engine_version": ["0.4.2", "", "0.14.1", ""],
                         "n_gpus": [1.0, 8.0, 1.0, 2.0]})
    ranges = coverage.training_ranges(rows)
    assert {k: v for k, v in ranges.items() if k.startswith("n_gpus")} == {
        "n_gpus": [1.0, 8.0], "n_gpus:llama.cpp": [2.0, 2.0], "n_gpus:vllm V0 engine": [1.0, 8.0],
        "n_gpus:vllm V1 engine": [1.0, 1.0]}
    asked = pd.DataFrame({"engine": ["vllm", "vllm", "sglang", "vllm", "llama.cpp"],
                          "engine_version": ["0.14.1", "0.6.0", "0.5.21", "0.14.1", ""],
                          "n_gpus": [8.0, 8.0, 4.0, 1.0, 1.0]})
    assert coverage.outside_mask(asked, ranges).tolist() == [True, False, True, False, True]
    assert coverage.outside({"engine": "vllm", "engine_version": "0.14.1", "n_gpus": 8.0}, ranges) == [
        "GPUs per replica 8 > 1 measured with vllm V1 engine"]
    assert coverage.outside({"engine": "vllm", "engine_version": "0.6.0", "n_gpus": 8.0}, ranges) == []
    assert coverage.outside({"engine": "vllm", "engine_version": "0.14.1", "n_gpus": 16.0}, ranges) == [
        "GPUs per replica 16 > 8 measured"]
    assert coverage.narrowest([ranges, {"n_gpus:vllm V1 engine": [1.0, 2.0]}])["n_gpus:vllm V1 engine"] == [1.0, 1.0]


def test_prompt_and_output_tokens_are_ranged_per_engine_generation():
    """FIXTURE rows shaped as the sources: vLLM's V1 engine (Watt Counts) measured with prompts of 12 - 20 tokens and
    answers of at most 258, its V0 engine (LLM-Inference-Bench) with 128 - 2,048 of each. A 1,000-token prompt on
    today's vLLM is inside the range over every row, yet no V1 row ever had one: flagged, for the V1 engine only; a
    prompt beyond every measured one keeps its one note over all rows."""
    rows = pd.DataFrame({"engine": ["vllm", "vllm", "vllm", "vllm"], "engine_version": ["0.14.1", "0.14.1", "", ""],
                         "prompt_tokens_mean": [12.1, 19.7, 128.0, 2048.0],
                         "output_tokens_mean": [1.0, 258.0, 128.0, 2048.0]})
    ranges = coverage.training_ranges(rows)
    assert ranges["prompt_tokens_mean:vllm V1 engine"] == [12.1, 19.7]
    assert ranges["output_tokens_mean:vllm V0 engine"] == [128.0, 2048.0]
    assert coverage.outside({"engine": "vllm", "engine_version": "0.14.1", "prompt_tokens_mean": 1000.0,
                             "output_tokens_mean": 200.0}, ranges) == [
        "prompt tokens 1000 > 19.7 measured with vllm V1 engine"]
    assert coverage.outside({"engine": "vllm", "engine_version": "0.6.0", "prompt_tokens_mean": 1000.0,
                             "output_tokens_mean": 1000.0}, ranges) == []
    assert coverage.outside({"engine": "vllm", "engine_version": "0.14.1", "prompt_tokens_mean": 4000.0,
                             "output_tokens_mean": 14.0}, ranges) == ["prompt tokens 4000 > 2048 measured"]
    asked = pd.DataFrame({"engine": ["vllm", "vllm", "sglang", "vllm"], "engine_version": ["0.14.1", "0.6.0", "", "0.11.0"],
                          "prompt_tokens_mean": [14.0, 1000.0, 512.0, 14.0], "output_tokens_mean": [220.0, 1000.0, 220.0, 600.0]})
    assert coverage.outside_mask(asked, ranges).tolist() == [False, False, True, True]
