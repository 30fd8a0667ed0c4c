"""The leaderboard's numbers: algorithm x regime x target, offline and server, beside the paper replica and the
baselines, and the verdict (`reports/search/verdict.json`): does the nested selection beat the replica?

Every learned figure is a nested outer-test figure; the replica and the baselines are scored on the same rows
(the same outer folds) by the search stage, so one table compares like with like. Rendered by
wattgpu.reporting.leaderboard.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from wattgpu.modeling.intervals import DEFAULT_LEVEL, UNIT_SLACK

SELECTION = "nested_selection"  # the nested algorithm selection (the default algorithm unless beaten by > 1 SE)
PLAIN_SELECTION = "plain_selection"  # the same outcomes, lowest inner score wins (no default algorithm)
REPLICA = "paper_replica"
BASELINES = ("tdp", "tdp90", "load_scaled_tdp", "roofline")
STATS = ("mdape", "gpu_tau", "pearson_r")  # per (target, regime, model, scenario)


def frame(results: dict[str, dict]) -> pd.DataFrame:
    """One row per (target, regime, model) from {regime: search metrics.json content}: the paper's comparison,
    every model on the rows the replica predicts (its source's offline and server rows)."""
    rows = []
    for regime, res in results.items():
        for target, models in res.get("paper_metrics", res["metrics"]).items():
            for model, by_scen in models.items():
                row = {"target": target, "regime": regime, "model": model}
                for scen in ("offline", "server"):
                    for stat in STATS:
                        row[f"{scen}_{stat}"] = by_scen.get(scen, {}).get(stat, math.nan)
                rows.append(row)
    out = pd.DataFrame(rows)
    replica = out[out["model"] == REPLICA].set_index(["target", "regime"])
    key = list(zip(out["target"], out["regime"]))
    for scen in ("offline", "server"):
        ref = pd.Series([replica[f"{scen}_mdape"].get(k, math.nan) for k in key], index=out.index)
        out[f"{scen}_beats_replica"] = out[f"{scen}_mdape"] < ref
    return out


def verdict(lb: pd.DataFrame) -> dict:
    """The acceptance view for `dvc metrics show`: per target, regime and scenario, the nested selection's MdAPE
    beside the replica's on the same rows, and whether it is lower; `all_beat_replica` over every cell. A regime
    whose folds hold out none of the replica's rows (LOSO: its lab) has no cell."""
    out: dict = {}
    keep = lb[lb["model"].isin([SELECTION, REPLICA])]
    for (target, regime), d in keep.groupby(["target", "regime"], sort=False):
        by = d.set_index("model")
        for scen in ("offline", "server"):
            nested, replica = float(by.at[SELECTION, f"{scen}_mdape"]), float(by.at[REPLICA, f"{scen}_mdape"])
            if math.isnan(nested) or math.isnan(replica):  # no such rows in these folds (a LOPO sample)
                continue
            out.setdefault(target, {}).setdefault(regime, {})[scen] = {
                "nested_mdape": round(nested, 3), "replica_mdape": round(replica, 3), "beats_replica": nested < replica}
    cells = [c["beats_replica"] for t in out.values() for r in t.values() for c in r.values()]
    return {"all_beat_replica": bool(cells) and all(cells), **out}


def by_source(results: dict[str, dict]) -> pd.DataFrame:
    """MdAPE and rows per (target, regime, model, source) over every tested row: the cross-source view."""
    rows = []
    for regime, res in results.items():
        for target, models in res["metrics"].items():
            for model, by_group in models.items():
                for group, summary in by_group.items():
                    if group.startswith("source:") or group == "all":
                        rows.append({"target": target, "regime": regime, "model": model,
                                     "source": group.removeprefix("source:"), "mdape": summary.get("mdape", math.nan),
                                     "n_rows": summary.get("n_rows", 0)})
    return pd.DataFrame(rows, columns=["target", "regime", "model", "source", "mdape", "n_rows"])


def source_metrics(src: pd.DataFrame, model: str = SELECTION) -> dict:
    """For `dvc metrics show`: the nested selection's MdAPE per target, regime and source (cross-source view)."""
    out: dict = {}
    for _, r in src[src["model"] == model].iterrows():
        out.setdefault(r["target"], {}).setdefault(r["regime"], {})[r["source"]] = round(float(r["mdape"]), 3)
    return out


def interval_metrics(results: dict[str, dict]) -> dict:
    """{regime: {target: {group: {level %: {coverage, median_rel_width, abstained, n_rows}}}}}: the nested selection's
    conformal intervals on the outer-test rows of every regime (a DVC metric)."""
    out: dict = {}
    for regime, r in results.items():
        for target, models in r.get("intervals", {}).items():
            if SELECTION in models:
                out.setdefault(regime, {})[target] = models[SELECTION]
    return out


def search_depth(studies: pd.DataFrame) -> dict:
    """Per target and algorithm, how much the studies searched (search.nested.compare's study records): studies,
    trials per study (complete, pruned), how often a seeded first trial stayed the best, and the median gain of the
    best found over the best seed (inner score points)."""
    out: dict[str, dict] = {}
    for (target, algorithm), g in studies.groupby(["target", "algorithm"], sort=False):
        trials = g["trials_complete"] + g["trials_pruned"] + g["trials_failed"]
        out.setdefault(target, {})[algorithm] = {
            "studies": int(len(g)), "min_trials": int(trials.min()), "trials_pruned": int(g["trials_pruned"].sum()),
            "trials": int(trials.sum()), "seed_won": int(g["seed_won"].sum()),
            "median_gain_over_seed": round(float(np.nanmedian(g["seed_inner_score"] - g["inner_score"])), 4)
            if g["seed_inner_score"].notna().any() else None,
        }
    return out


MIN_CELL_ROWS = 20  # a (target, held-out unit, group) cell with fewer rows is too small to judge its coverage
# an 80 % band must cover at least this share (0.65) of every judged cell (or abstain on all of it): the share the
# intervals' group floor keeps inside for every calibration GPU
COVERAGE_FLOOR = round(DEFAULT_LEVEL - UNIT_SLACK, 2)


def group_coverage(table: pd.DataFrame, by: str, level: str = "80") -> dict:
    """Per target, how the `level` % intervals hold per held-out unit (`by`: gpu or llm_family) and scoring group
    (runner.interval_by_gpu's table): judged cells (MIN_CELL_ROWS+ rows), those abstained on entirely, those under
    COVERAGE_FLOOR among the others (with their names), the worst coverage among the others, the median of the
    cells' median relative widths and the share of rows abstained."""
    out: dict = {}
    if table.empty or by not in table:
        return out
    d = table[table["level"].astype(str) == level]
    for target, g in d.groupby("target", sort=True):
        judged = g[g["n_rows"] >= MIN_CELL_ROWS]
        answered = judged[judged["abstained"] < 1.0]  # a cell abstained on entirely promises nothing to miss
        failing = answered[answered["coverage"] < COVERAGE_FLOOR]
        rows = g["n_rows"].sum()
        out[target] = {
            "cells": int(len(judged)), "failing": int(len(failing)),
            "failing_cells": [f"{r[by]} / {r['group']} {r['coverage']:.2f}" for _, r in failing.iterrows()],
            "abstained_cells": int(len(judged) - len(answered)),
            "worst_coverage": round(float(answered["coverage"].min()), 4) if len(answered) else None,
            "median_rel_width": round(float(np.nanmedian(g["median_rel_width"])), 4)
            if g["median_rel_width"].notna().any() else None,
            "abstained": round(float((g["abstained"] * g["n_rows"]).sum() / rows), 4) if rows else None,
        }
    return out
