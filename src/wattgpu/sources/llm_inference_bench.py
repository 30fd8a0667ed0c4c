"""Adapter for LLM-Inference-Bench (Argonne): static-batch latency and throughput, with power for a few runs.

Decisions, with the evidence (files in `data/raw/llm-inference-bench`, upstream commit 4211f5d):

* `avg_power` is one GPU's power in mW, not a sum over `Num of Hardware`. The upstream power scripts
  (e.g. `vLLM/A100/Power_measurement/benchmark_power.py`) start `gpuPowerProbe(interval=0.25, gpu_id=0)`
  and write `np.mean` of its NVML samples (NVML reports mW): GPU 0 only. The values agree: 1 GPU rows read
  222-382 W on A100, 363-595 W on H100, 410-656 W on GH200, inside each TDP; the earlier file names a
  separate, empty `sum_power` column beside `avg_power`. Every power row has `Num of Hardware` = 1, so
  nothing is divided; a multi-GPU row would still be GPU 0's reading (derivation `nvml_gpu0_mean`).
  The probe window adds 1 s of idle before and after the run, so short runs read a little low.
* `all_power_results.csv` is not used. Its runs are earlier, different runs of the same configurations
  (A100 vLLM Llama-2-7B, batch 1: latency 13.65 s there, 13.98 s in All_results), some blocks have no
  throughput, and one GH200 block has other columns and no Hardware field, so its power cannot be tied to
  a latency row. `power_results.csv` (the later commit) holds 48 rows that are exact copies of
  All_results rows plus `avg_power`: power is joined on all eight columns, which also picks the right
  run where All_results repeats a key (H100 vLLM Llama-2-7B 1024/32 appears twice).
* `Throughput` counts input + output tokens (upstream: `batch_size * (input_len + input_len) / latency`),
  so generated tokens/s is half of it.
* llama.cpp's `Batch Size` is its prompt-processing batch (`n_batch`), not a number of sequences: its
  `Throughput` is 2 x length / latency with no batch factor, and its latency falls as the "batch" grows
  (prompt evaluated in fewer chunks) while the decode time stays put. It is one sequence.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from wattgpu.sources.rawio import read_csv_checked
from wattgpu.sources.schema import RAW_COLUMNS, conform

SOURCE = "llm_inference_bench"
PERF_FILE = "All_results.csv"
POWER_FILE = "power_results.csv"
KEY = ["Hardware", "Num of Hardware", "Framework", "Model", "Input Output Length", "Batch Size"]
RUN = [*KEY, "Latency", "Throughput"]
TEXT = ["Hardware", "Framework", "Model"]
NUMERIC = [c for c in RUN if c not in TEXT]
ENGINES = {
    "vLLM": "vllm",
    "TensorRT-LLM": "tensorrt-llm",
    "llama.cpp": "llama.cpp",
    "Deepspeed-MII": "deepspeed-mii",
    "Deepspeed": "deepspeed",
    "sambaflow": "sambaflow",
}
ONE_SEQUENCE_ENGINES = ("llama.cpp",)
# llama.cpp splits a model across GPUs by layers (pipeline); the others shard each layer (tensor parallel).
PIPELINE_ENGINES = ("llama.cpp",)
# Engine versions the benchmark's repository states (argonne-lcf/LLM-Inference-Bench @ 4211f5d: requirements files
# and READMEs per engine and hardware); a pair missing here is unpinned or unstated, left empty.
ENGINE_VERSIONS = {
    ("vLLM", "Nvidia GH200 GPU"): "0.5.3.post1", ("vLLM", "AMD MI250 GPU"): "0.6.1",
    ("vLLM", "AMD MI300X GPU"): "0.6.1", ("vLLM", "Intel Max 1550"): "0.5.2", ("vLLM", "Intel PVC GPU"): "0.5.2",
    ("TensorRT-LLM", "Nvidia A100 GPU"): "0.11.0", ("TensorRT-LLM", "Nvidia H100 GPU"): "0.11.0",
    ("TensorRT-LLM", "Nvidia GH200 GPU"): "0.12.0",
}


def read_llm_inference_bench(raw_dir: Path) -> pd.DataFrame:
    """Every All_results row (power NaN unless power_results has the same run), plus any power-only run."""
    raw_dir = Path(raw_dir)
    perf = read_csv_checked(raw_dir / PERF_FILE, numeric=NUMERIC, text=TEXT)
    power = read_csv_checked(raw_dir / POWER_FILE, numeric=[*NUMERIC, "avg_power"], text=TEXT)
    return to_tidy(join_power(perf, power))


def join_power(perf: pd.DataFrame, power: pd.DataFrame) -> pd.DataFrame:
    """`perf` with `avg_power_mw` where `power` has the identical run; power runs missing from perf appended."""
    power = power.drop_duplicates(RUN, keep="first").rename(columns={"avg_power": "avg_power_mw"})
    joined = perf[RUN].merge(power[[*RUN, "avg_power_mw"]], on=RUN, how="left", validate="many_to_one")
    only_power = power.merge(perf[RUN], on=RUN, how="left", indicator=True)
    only_power = only_power.loc[only_power["_merge"] == "left_only", [*RUN, "avg_power_mw"]]
    return pd.concat([joined, only_power], ignore_index=True)


def to_tidy(df: pd.DataFrame) -> pd.DataFrame:
    """Map the joined columns onto the schema. Pure: frame in, frame out."""
    length = df["Input Output Length"]
    batch = df["Batch Size"]
    n_gpus = df["Num of Hardware"]
    one_sequence = df["Framework"].isin(ONE_SEQUENCE_ENGINES)
    pipeline = df["Framework"].isin(PIPELINE_ENGINES)
    sequences = batch.where(~one_sequence, 1.0)
    latency = df["Latency"].where(df["Latency"] > 0)
    throughput = sequences * length / latency  # generated tokens only (= source Throughput / 2)
    power_w = df["avg_power_mw"] / 1000.0  # NVML mW -> W, GPU 0
    has_power = power_w.notna()
    derivation = np.where(n_gpus == 1, "nvml_mean_mw_div_1000_div_gpus", "nvml_gpu0_mean")
    config = (
        f"{SOURCE}/"
        + df["Hardware"]
        + "/"
        + n_gpus.map(_int_text)
        + "x/"
        + df["Framework"]
        + "/"
        + df["Model"]
        + "/io"
        + length.map(_int_text)
        + "/bs"
        + batch.map(_int_text)
    )
    out = pd.DataFrame(
        {
            "source": SOURCE,
            "config_id": config,
            "replicate_id": config.groupby(config).cumcount(),
            "raw_gpu_name": df["Hardware"],
            "raw_llm_name": df["Model"],
            "n_gpus": n_gpus,
            "tensor_parallel": n_gpus.where(~pipeline, 1),
            "pipeline_parallel": n_gpus.where(pipeline, 1),
            "precision": "fp16",  # the run scripts pass float16 (vLLM --dtype float16, llama.cpp f16 GGUF)
            "engine": df["Framework"].map(lambda f: ENGINES.get(f, f.lower())),
            "engine_version": [ENGINE_VERSIONS.get((f, h), "") for f, h in zip(df["Framework"], df["Hardware"])],
            "workload": "static input=output=" + length.map(_int_text),
            "scenario": "static_batch",
            "scenario_label": np.where(one_sequence, "n_batch=", "batch_size=") + batch.map(_int_text),
            "request_rate_per_s": math.nan,
            "concurrency": sequences,
            "concurrency_setting": sequences,
            "concurrency_derivation": np.where(one_sequence, "one_sequence", "static_batch"),
            "prompt_tokens_mean": length,
            "output_tokens_mean": length,
            "requests_served": sequences,
            "measurement_duration_s": latency,
            "power_w_per_gpu": power_w,
            "power_derivation": np.where(has_power, derivation, ""),
            "itl_s": latency / length.where(length > 0),
            "itl_reported_s": latency / length.where(length > 0),
            "itl_derivation": "batch_latency_per_token_incl_prefill",
            "itl_missing_reason": "",
            "throughput_tok_s": throughput,
            # GPU 0's power stands for each of the n GPUs.
            "energy_per_token_j": power_w * n_gpus / throughput,
        }
    )
    return conform(out, RAW_COLUMNS)


def _int_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
