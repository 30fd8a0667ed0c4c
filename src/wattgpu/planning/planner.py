"""Recommend a GPU for one LLM workload: which GPUs hold the model, which meet the latency target (at the upper
bound of the ITL prediction interval) and the power budget, and which of those serves a million tokens for the least
energy or money. Pure functions of small frames; no models, no disk.

The memory rule (`MemoryRule`): the FP16 weights (2 bytes x total parameters) plus the KV cache of one
whole request (prompt + output tokens) must fit in 90 % of the memory of the GPUs serving one replica
(vLLM's default `gpu_memory_utilization`, the paper's 90 % rule); the rest of that 90 % is KV cache for
concurrent requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from wattgpu import physics
from wattgpu.errors import WattgpuError
from wattgpu.fields import INTERVAL_LEVEL
from wattgpu.modeling import intervals
from wattgpu.modeling.predictor import INTERVAL_COLUMNS
from wattgpu.physics import BYTES_FP16

STATUS_PICK, STATUS_OK, STATUS_POINT_ONLY = "pick", "meets target", "meets only at the point estimate"
STATUS_OVER_POWER, STATUS_SLOW, STATUS_NO_FIT = "over power budget", "too slow", "does not fit"
CHOSEN = (STATUS_PICK, STATUS_OK)
PREDICTION_COLUMNS = ("gpu", "power_w", "itl_ms", "tokens_per_s", "system_tokens_per_s", "energy_per_token_j")
# Each prediction's interval at the request's `level` (modeling.predictor): `<column>_lo`, `<column>_hi` (NaN: the
# model abstains, or its folder carries no calibration) and an `interval` note ("wider: ..." when extrapolating).
BOUND_COLUMNS = tuple(c for c in INTERVAL_COLUMNS if c.endswith(("_lo", "_hi")))
DEFAULT_LEVELS = intervals.LEVELS  # the interval levels `predict` shows (and `precompute` caches) by default
OBJECTIVES = {"energy": "energy_kwh_per_mtok", "energy-cost": "energy_cost_per_mtok",
              "total-cost": "total_cost_per_mtok"}
POWER_SCOPES = ("gpu", "replica")
TOKENS = 1e6  # energy and costs are per million generated tokens
J_PER_KWH = 3.6e6
S_PER_H = 3600.0


class PlanError(WattgpuError, ValueError):
    """A planning option out of range or missing; names the command-line flag."""


def level_fraction(value: float, flag: str) -> float:
    """A confidence level given as a percent (80) or a fraction (0.8), as a fraction in fields.INTERVAL_LEVEL."""
    v = float(value)
    frac = v / 100 if v > 1 else v
    lo, hi = INTERVAL_LEVEL.lo, INTERVAL_LEVEL.hi
    if not (math.isfinite(frac) and lo - 1e-9 <= frac <= hi + 1e-9):
        raise PlanError(f"{flag} must be a level from {100 * lo:g} to {100 * hi:g} (percent) or {lo:g} to {hi:g}, "
                        f"got {value:g}")
    return round(frac, 6)


def with_bounds(predictions: pd.DataFrame) -> pd.DataFrame:
    """`predictions` with every BOUND_COLUMNS column (NaN where the models give none, e.g. a folder from before
    intervals) and the `interval` note ("" where none)."""
    out = predictions.copy()
    for c in BOUND_COLUMNS:
        out[c] = pd.to_numeric(out[c], errors="coerce").astype(float) if c in out.columns else np.nan
    out["interval"] = out["interval"].fillna("").astype(str) if "interval" in out.columns else ""
    return out


@dataclass(frozen=True)
class MemoryRule:
    """Weights + one request's KV cache must fit in `usable_fraction` of the replica's memory."""

    usable_fraction: float = physics.MEMORY_UTILIZATION  # vLLM's default gpu_memory_utilization
    bytes_per_param: float = BYTES_FP16

    def describe(self, replicated_gb: float = 0.0, n_gpus: int = 1) -> str:
        """The rule in words; `replicated_gb` held again on each of the replica's further GPUs (DP attention's
        attention weights, LlmSize.replicated_gb) is said where there is any."""
        again = (f" + the attention's {replicated_gb:.1f} GB again on each of {n_gpus - 1} more GPUs (DP attention)"
                 if replicated_gb > 0 and n_gpus > 1 else "")
        return (f"{self.bytes_per_param:g} bytes x parameters (weights){again} + the KV cache of one request "
                f"<= {100 * self.usable_fraction:.0f} % of memory x GPUs per replica")


@dataclass(frozen=True)
class LlmSize:
    """What the memory rule needs to know about an LLM."""

    total_params_b: float
    # 2 (K, V) x layers x kv_heads x head_dim x 2 bytes (LlmSpec.kv_cache_bytes_per_token); 0 if attention-free. Exact
    # below every sliding window, an upper bound beyond (a sliding layer caches its window only).
    kv_bytes_per_token: float
    # one request's KV cache at its prompt + output tokens where known (LlmSpec.kv_cache_bytes_per_sequence: windows
    # capped, a hybrid's fixed state added); None: kv_bytes_per_token x tokens
    kv_bytes_per_request: float | None = None
    # weights every GPU of the replica holds whole rather than its share (GB): DP attention's attention weights
    replicated_gb: float = 0.0


def memory_fit(gpus: pd.DataFrame, llm: LlmSize, tokens_per_request: float, n_gpus: int,
               rule: MemoryRule = MemoryRule()) -> pd.DataFrame:
    """Per GPU (`gpu`, `memory_gb`): usable memory, what the model needs (its weights, the weights each further GPU
    holds again, one request's KV cache), whether it fits and why not."""
    for col in ("gpu", "memory_gb"):
        if col not in gpus.columns:
            raise KeyError(f"memory_fit needs column {col!r}")
    memory = gpus["memory_gb"].astype(float) * n_gpus
    usable = rule.usable_fraction * memory
    weights = physics.weights_gb(llm.total_params_b, rule.bytes_per_param) + llm.replicated_gb * (n_gpus - 1)
    per_request = llm.kv_bytes_per_token * tokens_per_request if llm.kv_bytes_per_request is None \
        else llm.kv_bytes_per_request
    kv = per_request / 1e9
    need = weights + kv
    fits = need <= usable
    gpus_word = f"{n_gpus} x " if n_gpus > 1 else ""
    again = ", the attention whole on every GPU" if llm.replicated_gb > 0 and n_gpus > 1 else ""
    reason = [
        "" if ok else (f"needs {need:.1f} GB (weights {weights:.1f}{again} + KV {kv:.2f}) > {u:.1f} GB usable "
                       f"({100 * rule.usable_fraction:.0f} % of {gpus_word}{m / n_gpus:g} GB)")
        for ok, u, m in zip(fits, usable, memory)
    ]
    return pd.DataFrame({"gpu": gpus["gpu"].to_numpy(), "memory_gb": memory.to_numpy(), "usable_gb": usable.to_numpy(),
                         "need_gb": need, "fits": fits.to_numpy(), "reason": reason})


@dataclass(frozen=True)
class Constraints:
    """What a GPU must meet. The ITL target at the upper bound of the `confidence` prediction interval (the point
    estimate where the model gives no interval); the power budget, if any, at the upper power bound, in W per GPU
    (`power_scope` "gpu") or for the replica's GPUs together ("replica": W per GPU x GPUs per replica)."""

    max_itl_ms: float
    confidence: float = DEFAULT_LEVELS[0]
    max_power_w: float | None = None
    power_scope: str = "gpu"
    gpus_per_replica: int = 1

    def __post_init__(self) -> None:
        if not (math.isfinite(self.max_itl_ms) and self.max_itl_ms > 0):
            raise PlanError(f"--max-itl-ms must be positive, got {self.max_itl_ms:g}")
        level_fraction(self.confidence, "--confidence")
        if self.max_power_w is not None and not (math.isfinite(self.max_power_w) and self.max_power_w > 0):
            raise PlanError(f"--max-power-w must be positive (W), got {self.max_power_w:g}")
        if self.power_scope not in POWER_SCOPES:
            raise PlanError(f"--power-budget-scope must be one of {', '.join(POWER_SCOPES)}, got {self.power_scope!r}")
        if self.gpus_per_replica < 1:
            raise PlanError(f"--gpus-per-replica must be at least 1, got {self.gpus_per_replica}")

    @property
    def level_pct(self) -> str:
        return f"{100 * self.confidence:g} %"

    def budget_phrase(self) -> str:
        if self.max_power_w is None:
            return ""
        return f"{self.max_power_w:g} W {'per GPU' if self.power_scope == 'gpu' else 'per replica'}"


@dataclass(frozen=True)
class Costs:
    """Energy and money per million generated tokens. `pue`: facility over IT power (>= 1); `price_per_kwh`:
    currency per kWh; `gpu_price_per_hour`: currency per GPU-hour, for every GPU without a price of its own (a
    `gpu_price_per_hour` column of the predictions); `objective`: what ranks the GPUs that meet the constraints."""

    pue: float = 1.0
    price_per_kwh: float | None = None
    gpu_price_per_hour: float | None = None
    objective: str = "energy"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.pue) and self.pue >= 1):
            raise PlanError(f"--pue must be >= 1 (facility power / IT power), got {self.pue:g}")
        for flag, v in (("--price-per-kwh", self.price_per_kwh), ("--gpu-price-per-hour", self.gpu_price_per_hour)):
            if v is not None and not (math.isfinite(v) and v >= 0):
                raise PlanError(f"{flag} must be a price >= 0, got {v:g}")
        if self.objective not in OBJECTIVES:
            raise PlanError(f"--objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        if self.objective != "energy" and self.price_per_kwh is None:
            raise PlanError(f"--objective {self.objective} needs --price-per-kwh")


def costs_per_million_tokens(table: pd.DataFrame, costs: Costs, gpus_per_replica: int) -> pd.DataFrame:
    """Per row, with `_lo` / `_hi` bounds: energy in kWh per million generated tokens (J per token x 1e6 / 3.6e6 x
    PUE), its cost (kWh x price), the GPU cost (GPUs per replica x price per GPU-hour x hours the replica takes for
    a million tokens at `system_tokens_per_s`) and the total. The energy bounds combine the power and throughput
    bounds (both at their worst), so they are conservative, and so are the costs built on them; NaN where a price
    or a bound is missing."""
    price_kwh = np.nan if costs.price_per_kwh is None else costs.price_per_kwh
    flat = np.nan if costs.gpu_price_per_hour is None else costs.gpu_price_per_hour
    own = table["gpu_price_per_hour"] if "gpu_price_per_hour" in table.columns else pd.Series(np.nan, table.index)
    price_h = pd.to_numeric(own, errors="coerce").astype(float).fillna(flat)
    out = {}
    # The lower cost bound takes the higher throughput bound, and the other way round.
    for side, tput in (("", "system_tokens_per_s"), ("_lo", "system_tokens_per_s_hi"),
                       ("_hi", "system_tokens_per_s_lo")):
        kwh = table[f"energy_per_token_j{side}"].astype(float) * TOKENS / J_PER_KWH * costs.pue
        gpu_cost = gpus_per_replica * price_h * TOKENS / table[tput].astype(float) / S_PER_H
        out[f"energy_kwh_per_mtok{side}"] = kwh
        out[f"energy_cost_per_mtok{side}"] = kwh * price_kwh
        out[f"gpu_cost_per_mtok{side}"] = gpu_cost
        out[f"total_cost_per_mtok{side}"] = kwh * price_kwh + gpu_cost
    return pd.DataFrame(out, index=table.index)


@dataclass
class Recommendation:
    """Every GPU considered, ranked: the pick first, then the others that meet the constraints (by the objective),
    then those that meet the ITL target only at the point estimate, those over the power budget, those too slow,
    and those that cannot hold the model."""

    table: pd.DataFrame
    pick: str | None
    constraints: Constraints
    costs: Costs
    summary: str

    @property
    def max_itl_ms(self) -> float:
        return self.constraints.max_itl_ms

    def gpus(self, status: str) -> list[str]:
        return list(self.table.loc[self.table["status"] == status, "gpu"])


def recommend(predictions: pd.DataFrame, fit: pd.DataFrame, constraints: Constraints,
              costs: Costs = Costs()) -> Recommendation:
    """Rank the GPUs that hold the model and meet `constraints` by `costs.objective`.

    `predictions`: one row per GPU that fits (PREDICTION_COLUMNS; BOUND_COLUMNS and `interval` at the constraints'
    confidence where the models give them, an optional `gpu_price_per_hour`); `fit`: `memory_fit`'s frame for every
    GPU. A GPU meets the ITL target when the upper bound of its ITL interval is within it; where the bound is NaN
    the point estimate decides and the row's reason says so. Likewise the power budget with the upper power bound.
    """
    c = constraints
    missing = [col for col in PREDICTION_COLUMNS if col not in predictions.columns]
    if missing:
        raise KeyError(f"predictions lack column {missing[0]!r}")
    if predictions["gpu"].duplicated().any():
        raise ValueError("predictions hold a GPU twice")
    pred = with_bounds(predictions)
    if "gpu_price_per_hour" not in pred.columns:
        pred["gpu_price_per_hour"] = np.nan
    value_cols = [*PREDICTION_COLUMNS[1:], *BOUND_COLUMNS, "gpu_price_per_hour"]
    table = fit[["gpu", "memory_gb", "usable_gb", "need_gb", "fits", "reason"]].merge(
        pred[["gpu", *value_cols, "interval"]], on="gpu", how="left", validate="one_to_one")
    fits = table["fits"].astype(bool)
    no_pred = fits & table["itl_ms"].isna()
    if no_pred.any():
        raise ValueError(f"no prediction for GPU {table.loc[no_pred, 'gpu'].iloc[0]!r}, which holds the model")
    table[value_cols] = table[value_cols].astype(float)  # object columns where no GPU fits
    table.loc[~fits, value_cols] = np.nan  # predictions for a GPU that cannot run it mean nothing
    table["interval"] = table["interval"].where(fits, "").fillna("")
    if costs.objective == "total-cost":
        unpriced = fits & table["gpu_price_per_hour"].isna() & (costs.gpu_price_per_hour is None)
        if unpriced.any():
            raise PlanError(f"--objective total-cost needs --gpu-price-per-hour (no price per hour for "
                            f"{table.loc[unpriced, 'gpu'].iloc[0]!r})")
    table = pd.concat([table, costs_per_million_tokens(table, costs, c.gpus_per_replica)], axis=1)

    per = c.gpus_per_replica if c.power_scope == "replica" else 1
    table["itl_judged_ms"] = table["itl_ms_hi"].fillna(table["itl_ms"])
    table["power_judged_w"] = table["power_w_hi"].fillna(table["power_w"]) * per
    slow = fits & (table["itl_ms"] > c.max_itl_ms)
    over_budget = fits & (table["power_judged_w"] > c.max_power_w if c.max_power_w is not None else False)
    over = over_budget & ~slow
    point_only = fits & ~slow & ~over & (table["itl_judged_ms"] > c.max_itl_ms)
    meets = fits & ~slow & ~over & ~point_only
    table["status"] = np.select([meets, point_only, over, slow], [STATUS_OK, STATUS_POINT_ONLY, STATUS_OVER_POWER,
                                                                  STATUS_SLOW], STATUS_NO_FIT)
    # Positive: the judged ITL (upper bound, else point) is below the target by that share of it; negative: over it.
    table["itl_margin_pct"] = 100 * (c.max_itl_ms - table["itl_judged_ms"]) / c.max_itl_ms
    table.loc[fits, "reason"] = [_reason(r, c, bool(o)) for (_, r), o in zip(table[fits].iterrows(), over_budget[fits])]
    table["_group"] = np.select([meets, point_only, over, slow], [0, 1, 2, 3], 4)
    table = table.sort_values(["_group", OBJECTIVES[costs.objective], "itl_ms", "need_gb", "gpu"],
                              na_position="last", kind="mergesort").drop(columns="_group").reset_index(drop=True)
    table.insert(0, "rank", pd.array([i + 1 if s == STATUS_OK else pd.NA for i, s in enumerate(table["status"])],
                                     dtype="Int64"))
    pick = table["gpu"].iloc[0] if meets.any() else None
    if pick is not None:
        table.loc[0, "status"] = STATUS_PICK
    return Recommendation(table, pick, c, costs, _summary(table, pick, c, costs))


def _reason(r: pd.Series, c: Constraints, over: bool) -> str:
    """Why a GPU that holds the model is excluded, and on what its verdict rests."""
    parts = []
    if r["itl_ms"] > c.max_itl_ms:
        parts.append(f"ITL {r['itl_ms']:.1f} ms > {c.max_itl_ms:g} ms target")
    elif r["itl_judged_ms"] > c.max_itl_ms:
        parts.append(f"{c.level_pct} upper ITL bound {r['itl_judged_ms']:.1f} ms > {c.max_itl_ms:g} ms target "
                     f"(point estimate {r['itl_ms']:.1f} ms)")
    if over:
        basis = f"{c.level_pct} upper bound" if pd.notna(r["power_w_hi"]) else "point estimate"
        parts.append(f"{r['power_judged_w']:.0f} W {'per GPU' if c.power_scope == 'gpu' else 'per replica'} "
                     f"({basis}) > {c.max_power_w:g} W budget")
    no_bound = []  # what the point estimate decided for want of an interval (a GPU too slow is so regardless)
    if r["itl_ms"] <= c.max_itl_ms:
        asked = (("ITL", "itl_ms_hi", True), ("power", "power_w_hi", c.max_power_w is not None))
        no_bound = [name for name, col, used in asked if used and pd.isna(r[col])]
    note = str(r["interval"])
    if no_bound:
        why = f" ({note})" if note else " (the models carry no calibration)"
        parts.append(f"no {c.level_pct} {' or '.join(no_bound)} interval{why}: judged on the point estimate")
    elif note:
        parts.append(note)
    return "; ".join(parts)


_OBJECTIVE_WORDS = {"energy": "energy per token", "energy-cost": "energy cost per million tokens",
                    "total-cost": "total cost per million tokens"}


def _objective_value(r: pd.Series, objective: str) -> str:
    kwh = f"{r['energy_kwh_per_mtok']:.3g} kWh per million tokens ({r['energy_per_token_j']:.3g} J per token)"
    if objective == "energy":
        return kwh
    if objective == "energy-cost":
        return f"{r['energy_cost_per_mtok']:.3g} per million tokens in energy, {kwh}"
    return (f"{r['total_cost_per_mtok']:.3g} per million tokens in all ({r['energy_cost_per_mtok']:.3g} energy + "
            f"{r['gpu_cost_per_mtok']:.3g} GPU hours)")


def _summary(table: pd.DataFrame, pick: str | None, c: Constraints, costs: Costs) -> str:
    fits = table[table["fits"].astype(bool)]
    if fits.empty:
        return "No GPU considered can hold the model: use more GPUs per replica or a smaller LLM."
    budget = f" within {c.budget_phrase()}" if c.max_power_w is not None else ""
    if pick is None:
        fastest = fits.sort_values("itl_judged_ms").iloc[0]
        text = (f"No GPU that holds the model meets {c.max_itl_ms:g} ms at the {c.level_pct} upper ITL bound"
                f"{budget}; the fastest is {fastest['gpu']} at a predicted {fastest['itl_ms']:.1f} ms"
                + (f" (upper bound {fastest['itl_ms_hi']:.1f} ms)." if pd.notna(fastest["itl_ms_hi"]) else "."))
    else:
        best = table.iloc[0]
        bound = (f"{c.level_pct} upper bound {best['itl_ms_hi']:.1f} ms" if pd.notna(best["itl_ms_hi"])
                 else "no interval: point estimate")
        text = (f"Pick: {pick}, {_objective_value(best, costs.objective)}; {best['power_w']:.0f} W per GPU, "
                f"predicted ITL {best['itl_ms']:.1f} ms ({bound}) <= {c.max_itl_ms:g} ms{budget}.")
        ok = table[table["status"] == STATUS_OK]
        if len(ok):
            col = OBJECTIVES[costs.objective]
            more = 100 * (ok.iloc[0][col] / best[col] - 1)
            text += f" Runner-up: {ok.iloc[0]['gpu']}, {more:+.0f} % {_OBJECTIVE_WORDS[costs.objective]}."
    point = list(table.loc[table["status"] == STATUS_POINT_ONLY, "gpu"])
    if point:
        text += (f" Meeting {c.max_itl_ms:g} ms only at the point estimate (the {c.level_pct} upper bound is over it): "
                 f"{', '.join(point)}.")
    over = list(table.loc[table["status"] == STATUS_OVER_POWER, "gpu"])
    if over:
        text += f" Over the {c.budget_phrase()} power budget: {', '.join(over)}."
    return text


def near_target(table: pd.DataFrame, max_itl_ms: float, rel_error: float) -> list[str]:
    """GPUs judged on the point estimate (no ITL interval) whose predicted ITL is within `rel_error` of the target:
    the verdict could flip within the model's error. Where an interval exists, its upper bound already decided."""
    fits = table[table["fits"].astype(bool)]
    no_bound = fits["itl_ms_hi"].isna() if "itl_ms_hi" in fits.columns else pd.Series(True, fits.index)
    close = no_bound & ((fits["itl_ms"] - max_itl_ms).abs() <= rel_error * max_itl_ms)
    return list(fits.loc[close, "gpu"])
