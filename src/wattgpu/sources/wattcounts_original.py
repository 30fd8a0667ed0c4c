"""Adapter for the ORIGINAL Watt Counts subset (`data/watt_counts_subset.csv` of github.com/maufadel/wattgpu).

We do not have that file; the layout is taken from code that reads it. The paper's notebook
(`WattGPU.ipynb`) reads it with `index_col=0` and uses `model`, `gpu_type`, `lambda_qps` (empty for
offline runs), the per-request lists `time_to_first_token_seconds_events`,
`e2e_request_latency_seconds_events`, `request_generation_tokens`, and `generation_tokens_total`,
`measurement_duration`, `gpu_energy`, `gpu_0_power_draw_watts_mean`. A third-party reader of the same file
pins the full header: an unnamed index column, those fields, `gpu_0_power_draw_watts_{min,max,std}` and
`request_prompt_tokens`, with JSON lists; offline rows have an empty TTFT list and a single e2e entry.
Only the columns used here are required; `request_prompt_tokens` is optional. The notebook evaluates the
list cells with `eval`; here they are parsed as data and anything but a list of numbers is rejected.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from wattgpu.errors import RawDataError
from wattgpu.sources.rawio import read_csv_checked
from wattgpu.sources.schema import RAW_COLUMNS, conform
from wattgpu.sources.wattcounts import RUN_CONSTANTS
from wattgpu.workload import OFFLINE_REQUESTS, SERVER_LOADS

SOURCE = "wattcounts_original"
FILE = "watt_counts_subset.csv"
NUMERIC = {
    "lambda_qps": True,  # blank for offline runs
    "generation_tokens_total": False,
    "measurement_duration": False,
    "gpu_energy": False,
    "gpu_0_power_draw_watts_mean": False,
}
TTFT, E2E, TOKENS, PROMPTS = (
    "time_to_first_token_seconds_events",
    "e2e_request_latency_seconds_events",
    "request_generation_tokens",
    "request_prompt_tokens",
)
# The paper's notebook splits the two Poisson loads (0.017/s and 0.33/s) at 0.2 requests/s.
SERVER_HIGH_MIN_QPS = 0.2



def read_wattcounts_original(path_or_dir: Path) -> pd.DataFrame:
    """Every run of the original subset in the raw tidy schema (a folder means `<folder>/watt_counts_subset.csv`)."""
    path = Path(path_or_dir)
    if path.is_dir():
        path = path / FILE
    df = read_csv_checked(path, numeric=NUMERIC, text=["model", "gpu_type", TTFT, E2E, TOKENS])
    lists = {col: _list_column(df, col, path) for col in (TTFT, E2E, TOKENS, PROMPTS) if col in df.columns}
    for i in np.flatnonzero(is_server(df)):
        n = len(lists[TOKENS][i])
        for col in (TTFT, E2E):
            if len(lists[col][i]) != n:
                line = int(df["_line"].iat[i])
                raise RawDataError(path, line, col, f"{len(lists[col][i])} entries, {TOKENS} has {n}")
    return to_tidy(df, lists)


def is_server(df: pd.DataFrame) -> np.ndarray:
    """Runs with a Poisson arrival rate; offline runs leave `lambda_qps` blank (the processed copy writes -1)."""
    return (df["lambda_qps"].notna() & (df["lambda_qps"] >= 0)).to_numpy()


def to_tidy(df: pd.DataFrame, lists: Mapping[str, Sequence[np.ndarray]]) -> pd.DataFrame:
    """Map one row per run onto the schema, given the parsed per-request lists by column. Pure."""
    server = is_server(df)
    ttft, e2e, tokens = lists[TTFT], lists[E2E], lists[TOKENS]
    prompts = lists.get(PROMPTS, [np.array([])] * len(df))
    total = df["generation_tokens_total"].where(df["generation_tokens_total"] > 0)
    duration = df["measurement_duration"].where(df["measurement_duration"] > 0)
    label = np.where(~server, "offline", np.where(df["lambda_qps"] < SERVER_HIGH_MIN_QPS, *SERVER_LOADS))
    no_lists = (math.nan, "")  # offline rows: the ITL comes from the duration, not the lists
    exact = [server_itl(*args) if is_server else no_lists for is_server, *args in zip(server, e2e, ttft, tokens)]
    itl = np.where(server, [v for v, _ in exact], duration / total)
    reason = np.where(server, [r for _, r in exact], np.where(total.isna(), "no generated tokens", ""))
    config = df["gpu_type"] + "|" + df["model"] + "|" + label
    out = pd.DataFrame(
        {
            "source": SOURCE,
            "config_id": config,
            "replicate_id": config.groupby(config).cumcount(),
            "raw_gpu_name": df["gpu_type"],
            "raw_llm_name": df["model"],
            **RUN_CONSTANTS,
            "scenario": np.where(server, "server", "offline"),
            "scenario_label": label,
            "request_rate_per_s": df["lambda_qps"].where(server),
            # Little's law with the realised arrival rate: requests served / duration x mean e2e latency.
            "concurrency": np.where(server, [len(t) for t in tokens] / duration * [_mean(x) for x in e2e], np.nan),
            "concurrency_setting": np.where(server, np.nan, float(OFFLINE_REQUESTS)),
            "concurrency_derivation": np.where(server, "littles_law_rate_x_mean_e2e", ""),
            "prompt_tokens_mean": [_mean(p) for p in prompts],
            "output_tokens_mean": [_mean(t) for t in tokens],
            "requests_served": [float(len(t)) for t in tokens],
            "measurement_duration_s": duration,
            "power_w_per_gpu": df["gpu_0_power_draw_watts_mean"],
            "power_derivation": "nvml_gpu0_mean",
            "itl_s": np.where(server, itl, np.nan),  # offline: requests in flight / throughput, set at ingest
            "itl_reported_s": itl,
            "itl_derivation": np.where(server, "server_exact", "offline_duration_per_token"),
            "itl_missing_reason": np.where(np.isnan(itl.astype(float)), reason, ""),
            "throughput_tok_s": total / duration,
            "energy_per_token_j": df["gpu_energy"] / total,  # GPU 0's energy; one GPU per run
        }
    )
    return conform(out, RAW_COLUMNS)


def server_itl(e2e: np.ndarray, ttft: np.ndarray, tokens: np.ndarray) -> tuple[float, str]:
    """Mean over requests with 2+ tokens of (e2e - TTFT) / (tokens - 1), as the paper defines it."""
    valid = tokens >= 2
    if not valid.any():
        return math.nan, "no request generated 2 or more tokens"
    return float(np.mean((e2e[valid] - ttft[valid]) / (tokens[valid] - 1))), ""


def parse_number_list(cell: str, path: Path, line: int, field: str) -> np.ndarray:
    """A list-of-numbers cell as an array; anything else raises RawDataError. Never evaluates code."""
    try:
        value = json.loads(cell)
    except json.JSONDecodeError:
        try:
            value = ast.literal_eval(cell.strip())  # Python-literal lists; literal_eval runs no code
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise RawDataError(path, line, field, f"not a list of numbers: {_clip(cell)}") from None
    numbers = isinstance(value, list) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
    )
    if not numbers:
        raise RawDataError(path, line, field, f"not a list of numbers: {_clip(cell)}")
    array = np.asarray(value, dtype="float64")
    if not np.isfinite(array).all():
        raise RawDataError(path, line, field, "list has a non-finite number")
    return array


def _list_column(df: pd.DataFrame, col: str, path: Path) -> list[np.ndarray]:
    return [parse_number_list(cell, path, int(line), col) for cell, line in zip(df[col], df["_line"])]


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if len(values) else math.nan


def _clip(cell: str, width: int = 60) -> str:
    return repr(cell if len(cell) <= width else cell[:width] + "...")
