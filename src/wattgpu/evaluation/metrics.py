"""Metrics: MdAPE, MAPE, Pearson r, Kendall tau of GPU and LLM rankings, top-k of the least-power GPU.

All take a frame with `y_true`, `y_pred` (natural units), `gpu`, `llm`, `scenario_label` (and `model`, `target`
where it is a slice of a predictions frame). Every model is scored on every row it is given: a missing (NaN)
prediction is an error naming the model and how many rows, except for the models in PARTIAL, which predict a
declared subset of rows by design (their figures count the rows left out, `n_unpredicted`).
Ranking metrics average replicates first, then rank within each group, then average tau over groups
(as the paper does).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import pearsonr

from wattgpu.errors import WattgpuError
from wattgpu.evaluation.leaderboard import REPLICA
from wattgpu.workload import SCENARIO_GROUPS

# Models that predict only some rows by design, and which (NaN elsewhere): the search scores them beside the
# learned models on the same outer folds. Every other model must predict every row it is scored on.
PARTIAL = {
    REPLICA: "its own source's dense LLMs (params.yaml evaluate.source, evaluate.replica.dense_only)",
    "load_scaled_tdp": "the paper's load presets (evaluate.load_rho)",
    "roofline": "the paper's load presets",
}


class MissingPredictions(WattgpuError, ValueError):
    """A model without a prediction (or a row without a measured value) where every row must be scored."""


def scored(df: pd.DataFrame) -> pd.DataFrame:
    """The rows `df` is scored on: all of them, or for a PARTIAL model the rows it predicts. A missing prediction of
    any other model, or a missing measured value, raises MissingPredictions naming the model and how many rows."""
    no_pred, no_true = df["y_pred"].isna(), df["y_true"].isna()
    if not (no_pred.any() or no_true.any()):
        return df
    model = _label(df, "model") or "(unnamed)"
    if model in PARTIAL and not no_true.any():
        return df[~no_pred]
    what = [f"{int(n.sum())} {label}" for n, label in ((no_pred, "without a prediction"),
                                                       (no_true, "without a measured value")) if n.any()]
    target = _label(df, "target")
    raise MissingPredictions(
        f"model {model!r}{f' ({target})' if target else ''}: {' and '.join(what)} of {len(df)} rows; every model is "
        f"scored on every row it is given (only {', '.join(sorted(PARTIAL))} predict a declared subset)")


def _label(df: pd.DataFrame, column: str) -> str:
    return ", ".join(map(str, pd.unique(df[column]))) if column in df else ""


def ape(df: pd.DataFrame) -> pd.Series:
    return (df["y_pred"] - df["y_true"]).abs() / df["y_true"].abs() * 100


def mdape(df: pd.DataFrame) -> float:
    d = scored(df)
    return float(np.median(ape(d))) if len(d) else float("nan")


def mape(df: pd.DataFrame) -> float:
    d = scored(df)
    return float(np.mean(ape(d))) if len(d) else float("nan")


def pearson(df: pd.DataFrame) -> float:
    d = scored(df)
    if len(d) < 2 or d["y_true"].std() == 0 or d["y_pred"].std() == 0:
        return float("nan")
    return float(pearsonr(d["y_true"], d["y_pred"])[0])


def _ranking_groups(df: pd.DataFrame, over: str) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(measured, predicted, `over` names) of each (other, scenario) group with 2+ entities, replicates averaged, in
    the groups' sorted order. One groupby: its result is sorted by the group keys, so each group is a run of rows
    (iterating a second groupby per group cost most of a search stage)."""
    within = ["llm", "scenario_label"] if over == "gpu" else ["gpu", "scenario_label"]
    agg = scored(df).groupby([*within, over], dropna=False)[["y_true", "y_pred"]].mean().reset_index()
    if not len(agg):
        return []
    new = np.zeros(len(agg), dtype=bool)
    new[0] = True
    for col in within:
        v = agg[col].to_numpy(dtype=object)
        absent = pd.isna(v)
        new[1:] |= ~((v[1:] == v[:-1]) | (absent[1:] & absent[:-1]))
    starts = np.flatnonzero(new)
    ends = np.r_[starts[1:], len(agg)]
    true, pred, names = (agg[c].to_numpy(dtype=dtype) for c, dtype in (("y_true", float), ("y_pred", float),
                                                                        (over, object)))
    return [(true[a:b], pred[a:b], names[a:b]) for a, b in zip(starts, ends) if b - a >= 2]


def tau_b(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b of two equal-length arrays (NaN where either is constant): scipy.stats.kendalltau's pair
    counts (concordant minus discordant, ties in x, in y, in both) and its formula, without its p-value, which cost
    most of the ranking metrics' time over thousands of small groups. The counts are exact integers, so the value is
    scipy's to the last bit (tests/code/test_metrics.py checks it)."""
    i, j = np.triu_indices(len(x), 1)
    dx = np.sign(x[i] - x[j])
    dy = np.sign(y[i] - y[j])
    tot = len(i)
    xtie, ytie = int((dx == 0).sum()), int((dy == 0).sum())
    if xtie == tot or ytie == tot:
        return float("nan")
    ntie, dis = int(((dx == 0) & (dy == 0)).sum()), int((dx * dy < 0).sum())
    tau = (tot - xtie - ytie + ntie - 2 * dis) / np.sqrt(tot - xtie) / np.sqrt(tot - ytie)
    return float(np.minimum(1.0, max(-1.0, tau)))


def _mean_tau(groups) -> float:
    """Mean tau over the groups where it is defined (neither ranking constant: tau_b is NaN there)."""
    taus = [tau for true, pred, _ in groups if not np.isnan(tau := tau_b(true, pred))]
    return float(np.mean(taus)) if taus else float("nan")


def _top_k(groups, k: int) -> float:
    hits = [bool(set(names[true == true.min()]) & set(names[np.argsort(pred, kind="quicksort")[:k]]))
            for true, pred, names in groups]
    return sum(hits) / len(hits) if hits else float("nan")


def kendall(df: pd.DataFrame, over: str) -> float:
    """Mean Kendall tau of the ranking of `over` ("gpu" or "llm") within each (other, scenario) group."""
    return _mean_tau(_ranking_groups(df, over))


def top_k(df: pd.DataFrame, k: int, over: str = "gpu") -> float:
    """Share of groups where the measured-lowest entity is among the k predicted-lowest."""
    return _top_k(_ranking_groups(df, over), k)


def summary(df: pd.DataFrame) -> dict[str, float]:
    d = scored(df)
    gpus = _ranking_groups(d, "gpu")
    return {
        "mdape": mdape(d),
        "mape": mape(d),
        "pearson_r": pearson(d),
        "gpu_tau": _mean_tau(gpus),
        "llm_tau": kendall(d, "llm"),
        "top1_gpu": _top_k(gpus, 1),
        "top3_gpu": _top_k(gpus, 3),
        "n_rows": len(d),
        "n_unpredicted": len(df) - len(d),  # rows a PARTIAL model does not predict (0 for every other model)
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
