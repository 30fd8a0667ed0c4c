"""Adapters for the ML.ENERGY leaderboard: the v2 runs (2024, vLLM) and the 2023 legacy tables (HF transformers)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd

from wattgpu.errors import RawDataError
from wattgpu.sources.rawio import read_csv_checked
from wattgpu.sources.schema import RAW_COLUMNS, conform, empty_raw

V2_SOURCE = "mlenergy_v2"
LEGACY_SOURCE = "mlenergy_legacy"
V2_DIR = "llm_text_generation"
LEGACY_DIR = "legacy"

# Every field of a v2 run file and its JSON type.
V2_FIELDS = {
    "Model": str,
    "GPU": str,
    "TP": int,
    "PP": int,
    "Energy/req (J)": float,
    "Avg TPOT (s)": float,
    "Token tput (tok/s)": float,
    "Avg Output Tokens": float,
    "Avg BS (reqs)": float,
    "Max BS (reqs)": float,
}
V2_RUN_FILE = re.compile(r"bs(?P<bs>\d+)\+tp(?P<tp>\d+)\+pp(?P<pp>\d+)\.json")
# A second folder for the same model with a different parallel layout, e.g. "Mixtral-8x22B-Instruct-v0.1-pp1".
LAYOUT_SUFFIX = re.compile(r"-pp\d+$")
# vLLM's --dtype auto loads the model's config `torch_dtype` (float32 configs are served in float16). The
# 2024 checkpoints here publish bfloat16 configs as far as we can check offline (the four of them in the
# WattGPU model catalog all say bfloat16), so bf16; the byte width, which is what the features use, is 2
# either way.
V2_PRECISION = "bf16"
# The runs' vLLM release: 0.5.4. The benchmark's queue files at the data's commit run every model with
# `--server-images mlenergy/vllm:v0.5.4-openai` (benchmark/llm_text_generation/{chat,code}/pegasus/*/queue_*.yaml,
# github.com/ml-energy/leaderboard-v2 at c3af7f3), and the runs include Llama 3.1 and Mistral-Large-2407, whose
# configs vLLM loads from 0.5.3 on (the `llama3` RoPE scaling), so not 0.4.2, which the chat README's `docker pull`
# line and our dataset README name.
V2_ENGINE_VERSION = "0.5.4"

LEGACY_FILE = re.compile(r"(?P<gpu>[^_]+)_(?P<task>.+)_benchmark\.csv")
LEGACY_NUMERIC = ["throughput", "response_length", "latency", "energy"]
# The legacy README says setting columns such as these may sit in the CSVs; this snapshot has none and the
# adapter assumes batch 1 and FP16 for every row, so a file that has them must not be read silently.
LEGACY_UNHANDLED = ("batch_size", "datatype")


def read_mlenergy_v2(raw_dir: Path) -> pd.DataFrame:
    """Every `llm_text_generation/<task>/<GPU>/<org>/<model>/bs<N>+tp<T>+pp<P>.json` run, one row each."""
    root = Path(raw_dir) / V2_DIR
    if not root.is_dir():
        raise RawDataError(root, None, "-", "folder not found")
    records = [_v2_record(path, root) for path in sorted(root.glob("*/*/*/*/*.json"))]
    return conform(pd.DataFrame.from_records(records), RAW_COLUMNS) if records else empty_raw()


def _v2_record(path: Path, root: Path) -> dict:
    task, gpu_dir, org, model_dir = path.relative_to(root).parts[:4]
    name = V2_RUN_FILE.fullmatch(path.name)
    if name is None:
        raise RawDataError(path, None, "file name", "expected bs<max_num_seqs>+tp<TP>+pp<PP>.json")
    run, text = _read_run(path)
    tp, pp, max_num_seqs = int(name["tp"]), int(name["pp"]), int(name["bs"])

    def disagree(field: str, expected: object) -> RawDataError:
        return RawDataError(path, _line_of(text, field), field, f"{run[field]!r} disagrees with the path ({expected!r})")

    if (run["TP"], run["PP"]) != (tp, pp):
        raise disagree("TP" if run["TP"] != tp else "PP", f"tp{tp}+pp{pp}")
    if run["GPU"].removeprefix("NVIDIA ").strip() != gpu_dir:
        raise disagree("GPU", gpu_dir)
    model = f"{org}/{LAYOUT_SUFFIX.sub('', model_dir)}"
    if run["Model"] != model:
        raise disagree("Model", model)

    n_gpus = tp * pp
    tokens = run["Avg Output Tokens"]
    energy_j = run["Energy/req (J)"]
    # J/request x tokens/s / (tokens/request) = J/s of all GPUs together; one GPU gets 1/(TP x PP) of it.
    power_all_w = _ratio(energy_j * run["Token tput (tok/s)"], tokens)
    return {
        "source": V2_SOURCE,
        "config_id": f"{V2_SOURCE}/{task}/{gpu_dir}/{org}/{model_dir}/{path.stem}",
        "replicate_id": 0,
        "raw_gpu_name": run["GPU"],
        "raw_llm_name": model,
        "n_gpus": n_gpus,
        "tensor_parallel": tp,
        "pipeline_parallel": pp,
        "precision": V2_PRECISION,
        "engine": "vllm",
        "engine_version": V2_ENGINE_VERSION,
        "workload": task,
        "scenario": "fixed_concurrency",
        "scenario_label": f"max_num_seqs={max_num_seqs}",
        "request_rate_per_s": math.nan,
        # Avg BS is the measured mean running batch over the steady state (the leaderboard keeps only runs whose
        # Avg BS reaches 95 % of Max BS); Max BS is the setting, max_num_seqs x PP (vLLM admits max_num_seqs per
        # pipeline stage).
        "concurrency": run["Avg BS (reqs)"],
        "concurrency_setting": run["Max BS (reqs)"],
        "concurrency_derivation": "measured_mean_batch",
        "prompt_tokens_mean": math.nan,
        "output_tokens_mean": tokens,
        "requests_served": math.nan,
        "measurement_duration_s": math.nan,
        "power_w_per_gpu": power_all_w / n_gpus,
        "power_derivation": "energy_per_req_x_tput_div_tokens_div_gpus",
        # Per-request ITL in the steady state by Little's law: mean batch / generated tokens per s (the same window as
        # the energy). The reported Avg TPOT also averages the drain after the steady state, where the batch
        # shrinks, so it reads up to 2x lower at high max_num_seqs; it is kept beside it.
        "itl_s": _ratio(run["Avg BS (reqs)"], run["Token tput (tok/s)"]),
        "itl_reported_s": run["Avg TPOT (s)"],
        "itl_derivation": "mean_batch_per_throughput",
        "itl_missing_reason": "",
        "throughput_tok_s": run["Token tput (tok/s)"],
        "energy_per_token_j": _ratio(energy_j, tokens),
    }


def _read_run(path: Path) -> tuple[dict, str]:
    """The run's JSON object with every V2 field present and of the right type, and the file's text."""
    text = path.read_text(encoding="utf-8")
    try:
        run = json.loads(text)
    except json.JSONDecodeError as err:
        raise RawDataError(path, err.lineno, "-", f"invalid JSON: {err.msg}") from None
    if not isinstance(run, dict):
        raise RawDataError(path, 1, "-", f"expected a JSON object, got {type(run).__name__}")
    for field, kind in V2_FIELDS.items():
        if field not in run:
            raise RawDataError(path, None, field, "missing field")
        value = run[field]
        if kind is str:
            ok = isinstance(value, str)
        else:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            ok = ok and (kind is float or float(value).is_integer())
        if not ok:
            raise RawDataError(path, _line_of(text, field), field, f"expected {kind.__name__}, got {value!r}")
    return run, text


def _line_of(text: str, field: str) -> int | None:
    """1-based line where `"field"` first appears in a JSON text (None if it does not)."""
    key = json.dumps(field)
    for number, line in enumerate(text.splitlines(), start=1):
        if key in line:
            return number
    return None


def _ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, NaN when the denominator is not positive (the row is quarantined later)."""
    return numerator / denominator if denominator > 0 else math.nan


def read_mlenergy_legacy(raw_dir: Path) -> pd.DataFrame:
    """Every row of `legacy/<GPU>_<task>_benchmark.csv`: HF transformers, batch 1, FP16, one GPU."""
    folder = Path(raw_dir) / LEGACY_DIR
    if not folder.is_dir():
        raise RawDataError(folder, None, "-", "folder not found")
    frames = [_legacy_file(path) for path in sorted(folder.glob("*_benchmark.csv"))]
    frames = [f for f in frames if len(f)]
    return conform(pd.concat(frames, ignore_index=True), RAW_COLUMNS) if frames else empty_raw()


def _legacy_file(path: Path) -> pd.DataFrame:
    name = LEGACY_FILE.fullmatch(path.name)
    if name is None:
        raise RawDataError(path, None, "file name", "expected <GPU>_<task>_benchmark.csv")
    df = read_csv_checked(path, numeric=LEGACY_NUMERIC, text=["model"])
    for col in LEGACY_UNHANDLED:
        if col in df.columns:
            raise RawDataError(path, 1, col, "column not handled: the adapter assumes batch 1 and FP16 on every row")
    gpu, task = name["gpu"], name["task"]
    tokens = df["response_length"]
    positive = tokens > 0
    return pd.DataFrame(
        {
            "source": LEGACY_SOURCE,
            "config_id": f"{LEGACY_SOURCE}/{task}/{gpu}/" + df["model"],
            "replicate_id": df.groupby("model").cumcount(),
            "raw_gpu_name": gpu,
            "raw_llm_name": df["model"],
            "n_gpus": 1,
            "tensor_parallel": 1,
            "pipeline_parallel": 1,
            "precision": "fp16",
            "engine": "hf-transformers",
            "engine_version": "",  # unstated (the leaderboard's docs name PyTorch 2.0.1 and FastChat)
            "workload": task,
            "scenario": "static_batch",
            "scenario_label": "batch_size=1",
            "request_rate_per_s": math.nan,
            "concurrency": 1.0,
            "concurrency_setting": 1.0,
            "concurrency_derivation": "static_batch",
            "prompt_tokens_mean": math.nan,
            "output_tokens_mean": tokens,
            "requests_served": math.nan,
            "measurement_duration_s": math.nan,
            # Both are per-response means, so this is a ratio of means, close to (not equal to) mean power.
            "power_w_per_gpu": (df["energy"] / df["latency"]).where(df["latency"] > 0),
            "power_derivation": "energy_div_latency",
            "itl_s": (df["latency"] / tokens).where(positive),
            "itl_reported_s": (df["latency"] / tokens).where(positive),
            "itl_derivation": "request_latency_per_token_incl_prefill",
            "itl_missing_reason": "",
            "throughput_tok_s": df["throughput"],
            "energy_per_token_j": (df["energy"] / tokens).where(positive),
        }
    )
