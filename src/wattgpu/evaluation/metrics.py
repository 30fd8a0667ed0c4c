"""Metrics: MdAPE, MAPE, Pearson r, Kendall tau of GPU and LLM rankings, top-k of the least-power GPU.

All take a frame with `y_true`, `y_pred` (natural units), `gpu`, `llm`, `scenario_label`.
Ranking metrics average replicates first, then rank within each group, then average tau over groups
(as the paper does).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import kendalltau, pearsonr

from wattgpu.workload import SCENARIO_GROUPS


def ape(df: pd.DataFrame) -> pd.Series:
    return (df["y_pred"] - df["y_true"]).abs() / df["y_true"].abs() * 100


def mdape(df: pd.DataFrame) -> float:
    d = df.dropna(subset=["y_true", "y_pred"])
    return float(np.median(ape(d))) if len(d) else float("nan")


def mape(df: pd.DataFrame) -> float:
    d = df.dropna(subset=["y_true", "y_pred"])
    return float(np.mean(ape(d))) if len(d) else float("nan")


def pearson(df: pd.DataFrame) -> float:
    d = df.dropna(subset=["y_true", "y_pred"])
    if len(d) < 2 or d["y_true"].std() == 0 or d["y_pred"].std() == 0:
        return float("nan")
    return float(pearsonr(d["y_true"], d["y_pred"])[0])


def _ranking_groups(df: pd.DataFrame, over: str):
    within = ["llm", "scenario_label"] if over == "gpu" else ["gpu", "scenario_label"]
    agg = df.groupby([*within, over], dropna=False)[["y_true", "y_pred"]].mean().reset_index()
    for _, g in agg.groupby(within, dropna=False):
        g = g.dropna(subset=["y_true", "y_pred"])
        if len(g) >= 2:
            yield g


def kendall(df: pd.DataFrame, over: str) -> float:
    """Mean Kendall tau of the ranking of `over` ("gpu" or "llm") within each (other, scenario) group."""
    taus = []
    for g in _ranking_groups(df, over):
        if g["y_true"].std() == 0 or g["y_pred"].std() == 0:
            continue
        tau = kendalltau(g["y_true"], g["y_pred"])[0]
        if not np.isnan(tau):
            taus.append(tau)
    return float(np.mean(taus)) if taus else float("nan")


def top_k(df: pd.DataFrame, k: int, over: str = "gpu") -> float:
    """Share of groups where the measured-lowest entity is among the k predicted-lowest."""
    hits, total = 0, 0
    for g in _ranking_groups(df, over):
        best = set(g.loc[g["y_true"] == g["y_true"].min(), over])
        ranked = list(g.sort_values("y_pred")[over])[:k]
        hits += bool(best & set(ranked))
        total += 1
    return float(hits / total) if total else float("nan")


def summary(df: pd.DataFrame) -> dict[str, float]:
    return {
        "mdape": mdape(df),
        "mape": mape(df),
        "pearson_r": pearson(df),
        "gpu_tau": kendall(df, "gpu"),
        "llm_tau": kendall(df, "llm"),
        "top1_gpu": top_k(df, 1),
        "top3_gpu": top_k(df, 3),
        "n_rows": int(df.dropna(subset=["y_true", "y_pred"]).shape[0]),
    }


def score_groups(df: pd.DataFrame) -> np.ndarray:
    """The group each row is scored in: the paper's `offline` / `server` for Watt Counts' presets, else its source
    (every other source has one kind of workload)."""
    label = df["scenario_label"].astype(str)
    server = label.isin(SCENARIO_GROUPS["server"])
    source = df["source"].astype(str) if "source" in df else pd.Series("", index=df.index)
    return np.where(label.eq("offline"), "offline", np.where(server, "server", source)).astype(str)


def by_scenario(df: pd.DataFrame) -> dict[str, dict[str, float]]:
    """`summary` for offline, server (both loads) and each server load (the paper's presets), and, when the rows
    come from more than one source, per source (`source:<name>`) and over all rows (`all`)."""
    out = {}
    for name, labels in SCENARIO_GROUPS.items():
        sub = df[df["scenario_label"].isin(labels)]
        if len(sub):
            out[name] = summary(sub)
    if "source" in df and df["source"].nunique() > 1:
        for source, sub in df.groupby("source"):
            out[f"source:{source}"] = summary(sub)
        out["all"] = summary(df)
    return out


def breakdown(df: pd.DataFrame, by: str) -> pd.DataFrame:
    """MdAPE and row count per `by` ("gpu" or "llm") and scenario group."""
    rows = []
    for name, labels in (("offline", SCENARIO_GROUPS["offline"]), ("server", SCENARIO_GROUPS["server"])):
        sub = df[df["scenario_label"].isin(labels)]
        for key, g in sub.groupby(by):
            rows.append({by: key, "scenario": name, "mdape": mdape(g), "n_rows": len(g)})
    return pd.DataFrame(rows, columns=[by, "scenario", "mdape", "n_rows"])
