"""Recommend a GPU for one LLM workload: which GPUs hold the model, which meet the latency target, and
which of those needs the least energy per token. Pure functions of small frames; no models, no disk.

The memory rule (`MemoryRule`): the FP16 weights (2 bytes x total parameters) plus the KV cache of one
whole request (prompt + output tokens) must fit in 90 % of the memory of the GPUs serving one replica
(vLLM's default `gpu_memory_utilization`, the paper's 90 % rule); the rest of that 90 % is KV cache for
concurrent requests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from wattgpu import physics
from wattgpu.physics import BYTES_FP16

STATUS_PICK, STATUS_OK, STATUS_SLOW, STATUS_NO_FIT = "pick", "meets target", "too slow", "does not fit"
PREDICTION_COLUMNS = ("gpu", "power_w", "itl_ms", "tokens_per_s", "energy_per_token_j")


@dataclass(frozen=True)
class MemoryRule:
    """Weights + one request's KV cache must fit in `usable_fraction` of the replica's memory."""

    usable_fraction: float = 0.9
    bytes_per_param: float = BYTES_FP16

    def describe(self) -> str:
        return (f"{self.bytes_per_param:g} bytes x parameters (weights) + the KV cache of one request "
                f"<= {100 * self.usable_fraction:.0f} % of memory x GPUs per replica")


@dataclass(frozen=True)
class LlmSize:
    """What the memory rule needs to know about an LLM."""

    total_params_b: float
    kv_bytes_per_token: float  # 2 (K, V) x layers x kv_heads x head_dim x 2 bytes; 0 if attention-free


def memory_fit(gpus: pd.DataFrame, llm: LlmSize, tokens_per_request: float, n_gpus: int,
               rule: MemoryRule = MemoryRule()) -> pd.DataFrame:
    """Per GPU (`gpu`, `memory_gb`): usable memory, what the model needs, whether it fits and why not."""
    for col in ("gpu", "memory_gb"):
        if col not in gpus.columns:
            raise KeyError(f"memory_fit needs column {col!r}")
    memory = gpus["memory_gb"].astype(float) * n_gpus
    usable = rule.usable_fraction * memory
    weights = physics.weights_gb(llm.total_params_b, rule.bytes_per_param)
    kv = llm.kv_bytes_per_token * tokens_per_request / 1e9
    need = weights + kv
    fits = need <= usable
    gpus_word = f"{n_gpus} x " if n_gpus > 1 else ""
    reason = [
        "" if ok else (f"needs {need:.1f} GB (weights {weights:.1f} + KV {kv:.2f}) > {u:.1f} GB usable "
                       f"({100 * rule.usable_fraction:.0f} % of {gpus_word}{m / n_gpus:g} GB)")
        for ok, u, m in zip(fits, usable, memory)
    ]
    return pd.DataFrame({"gpu": gpus["gpu"].to_numpy(), "memory_gb": memory.to_numpy(), "usable_gb": usable.to_numpy(),
                         "need_gb": need, "fits": fits.to_numpy(), "reason": reason})


@dataclass
class Recommendation:
    """Every GPU considered, ranked: the pick first, then the others that meet the target (by energy per
    token), then those too slow, then those that cannot hold the model."""

    table: pd.DataFrame
    pick: str | None
    max_itl_ms: float
    summary: str
    margin: float = 0.0  # safety share of the target: meeting it means ITL <= max_itl_ms x (1 - margin)


def recommend(predictions: pd.DataFrame, fit: pd.DataFrame, max_itl_ms: float, margin: float = 0.0) -> Recommendation:
    """Rank GPUs by predicted energy per token among those that hold the model and meet `max_itl_ms`.

    `predictions`: one row per GPU that fits (PREDICTION_COLUMNS); `fit`: `memory_fit`'s frame for every GPU;
    `margin`: a safety share of the target (e.g. the ITL model's error): a GPU meets it when its predicted ITL
    <= max_itl_ms x (1 - margin).
    """
    if not max_itl_ms > 0:
        raise ValueError(f"max_itl_ms must be positive, got {max_itl_ms}")
    if not 0 <= margin < 1:
        raise ValueError(f"margin must be in [0, 1), got {margin}")
    missing = [c for c in PREDICTION_COLUMNS if c not in predictions.columns]
    if missing:
        raise KeyError(f"predictions lack column {missing[0]!r}")
    if predictions["gpu"].duplicated().any():
        raise ValueError("predictions hold a GPU twice")
    table = fit[["gpu", "memory_gb", "usable_gb", "need_gb", "fits", "reason"]].merge(
        predictions[list(PREDICTION_COLUMNS)], on="gpu", how="left", validate="one_to_one")
    no_pred = table["fits"] & table["itl_ms"].isna()
    if no_pred.any():
        raise ValueError(f"no prediction for GPU {table.loc[no_pred, 'gpu'].iloc[0]!r}, which holds the model")
    table.loc[~table["fits"], list(PREDICTION_COLUMNS[1:])] = np.nan  # predictions for a GPU that cannot run it mean nothing
    limit_ms = max_itl_ms * (1 - margin)
    meets = table["fits"] & (table["itl_ms"] <= limit_ms)
    slow = table["fits"] & ~meets
    table["status"] = np.select([meets, slow], [STATUS_OK, STATUS_SLOW], STATUS_NO_FIT)
    # Positive: below the target by that share of it; negative: over it.
    table["itl_margin_pct"] = 100 * (max_itl_ms - table["itl_ms"]) / max_itl_ms
    table.loc[slow, "reason"] = [
        f"ITL {v:.1f} ms > {max_itl_ms:g} ms target" if v > max_itl_ms else
        f"ITL {v:.1f} ms within the {100 * margin:g} % safety margin of {max_itl_ms:g} ms"
        for v in table.loc[slow, "itl_ms"]]
    table["_group"] = np.select([meets, slow], [0, 1], 2)
    table = table.sort_values(["_group", "energy_per_token_j", "itl_ms", "need_gb", "gpu"],
                              na_position="last", kind="mergesort").drop(columns="_group").reset_index(drop=True)
    table.insert(0, "rank", pd.array([i + 1 if s == STATUS_OK else pd.NA for i, s in enumerate(table["status"])],
                                     dtype="Int64"))
    pick = table["gpu"].iloc[0] if meets.any() else None
    if pick is not None:
        table.loc[0, "status"] = STATUS_PICK
    return Recommendation(table, pick, float(max_itl_ms), _summary(table, pick, limit_ms), margin)


def _summary(table: pd.DataFrame, pick: str | None, max_itl_ms: float) -> str:
    n_fit = int(table["fits"].sum())
    if n_fit == 0:
        return "No GPU considered can hold the model: use more GPUs per replica or a smaller LLM."
    if pick is None:
        fastest = table[table["fits"]].sort_values("itl_ms").iloc[0]
        return (f"No GPU that holds the model meets {max_itl_ms:g} ms; the fastest is {fastest['gpu']} "
                f"at a predicted {fastest['itl_ms']:.1f} ms.")
    best = table.iloc[0]
    text = (f"Pick: {pick}, {best['energy_per_token_j']:.3g} J per token ({best['power_w']:.0f} W per GPU, "
            f"predicted ITL {best['itl_ms']:.1f} ms <= {max_itl_ms:g} ms).")
    ok = table[table["status"] == STATUS_OK]
    if len(ok):
        nxt = ok.iloc[0]
        more = 100 * (nxt["energy_per_token_j"] / best["energy_per_token_j"] - 1)
        text += f" Runner-up: {nxt['gpu']}, {more:+.0f} % energy per token."
    return text


def near_target(table: pd.DataFrame, max_itl_ms: float, rel_error: float) -> list[str]:
    """GPUs whose predicted ITL is within `rel_error` of the target: the verdict could flip within model error."""
    fits = table[table["fits"]]
    close = (fits["itl_ms"] - max_itl_ms).abs() <= rel_error * max_itl_ms
    return list(fits.loc[close, "gpu"])
