"""PNG plots (matplotlib, Agg backend): predicted vs measured, per-GPU error, feature importance."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

UNITS = {"power": "mean GPU power (W)", "itl": "inter-token latency (s)"}


def predicted_vs_measured(pred: pd.DataFrame, title: str, path: Path) -> None:
    """One panel per target: measured on x, predicted on y, coloured by scenario, identity line."""
    targets = [t for t in ("power", "itl") if t in set(pred["target"])]
    fig, axes = plt.subplots(1, len(targets), figsize=(5.5 * len(targets), 5), squeeze=False)
    for ax, target in zip(axes[0], targets):
        d = pred[pred["target"] == target].dropna(subset=["y_true", "y_pred"])
        for label, g in d.groupby("scenario_label"):
            ax.scatter(g["y_true"], g["y_pred"], s=6, alpha=0.5, label=label)
        lo = float(np.nanmin([d["y_true"].min(), d["y_pred"].min()]))
        hi = float(np.nanmax([d["y_true"].max(), d["y_pred"].max()]))
        ax.plot([lo, hi], [lo, hi], "k--", lw=1)
        if target == "itl":
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.set_xlabel(f"measured {UNITS[target]}")
        ax.set_ylabel(f"predicted {UNITS[target]}")
        ax.set_title(f"{title}: {target}")
        ax.legend(fontsize=8)
    _save(fig, path)


def per_group_error(breakdown: pd.DataFrame, by: str, title: str, path: Path) -> None:
    """Grouped bars of MdAPE per GPU (or LLM), offline vs server."""
    pivot = breakdown.pivot_table(index=by, columns="scenario", values="mdape")
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(pivot) + 2), 4.5))
    pivot.plot.bar(ax=ax)
    ax.set_ylabel("MdAPE (%)")
    ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=60, labelsize=7)
    _save(fig, path)


def importance(imp: pd.Series, title: str, path: Path, top: int = 15) -> None:
    s = imp.sort_values(ascending=True).tail(top)
    fig, ax = plt.subplots(figsize=(6, 0.3 * len(s) + 1.5))
    ax.barh(s.index, s.values)
    ax.set_xlabel("mean importance across folds")
    ax.set_title(title)
    _save(fig, path)


def interval_coverage_by_gpu(table: pd.DataFrame, level: str, title: str, path: Path) -> None:
    """Bars of the measured coverage per held-out GPU (one panel per target), a line at the nominal level."""
    d = table[table["level"].astype(str) == str(level)] if len(table) else table
    targets = [t for t in ("power", "itl") if len(d) and t in set(d["target"])]
    if not targets:
        raise ValueError(f"no coverage rows at level {level} to plot")
    fig, axes = plt.subplots(len(targets), 1, figsize=(max(7, 0.5 * d["gpu"].nunique() + 3), 3.6 * len(targets)),
                             squeeze=False)
    for ax, target in zip(axes[:, 0], targets):
        pivot = d[d["target"] == target].pivot_table(index="gpu", columns="group", values="coverage")
        (100 * pivot).plot.bar(ax=ax, width=0.8)
        ax.axhline(float(level), color="k", ls="--", lw=1)
        ax.set_ylim(0, 105)
        ax.set_ylabel(f"{target}: rows inside (%)")
        ax.set_title(f"{title}: {target}, {level} % intervals")
        ax.tick_params(axis="x", labelrotation=60, labelsize=7)
        ax.legend(fontsize=7, ncol=3)
    _save(fig, path)


def interval_band(pred: pd.DataFrame, level: str, title: str, path: Path, max_points: int = 400) -> None:
    """Per target, measured / predicted against the predicted band (lo / predicted .. hi / predicted), rows sorted
    by band width: points outside the grey band are misses."""
    targets = [t for t in ("power", "itl") if t in set(pred["target"])]
    fig, axes = plt.subplots(1, len(targets), figsize=(6 * len(targets), 4.5), squeeze=False)
    for ax, target in zip(axes[0], targets):
        d = pred[pred["target"] == target].dropna(subset=["y_true", "y_pred", f"y_lo_{level}", f"y_hi_{level}"])
        if len(d) > max_points:
            d = d.sample(max_points, random_state=0)
        lo, hi = d[f"y_lo_{level}"] / d["y_pred"], d[f"y_hi_{level}"] / d["y_pred"]
        order = np.argsort((hi - lo).to_numpy(), kind="mergesort")
        x = np.arange(len(d))
        ax.fill_between(x, lo.to_numpy()[order], hi.to_numpy()[order], color="0.85", step="mid", label=f"{level} % band")
        ratio = (d["y_true"] / d["y_pred"]).to_numpy()[order]
        inside = (d["y_true"] >= d[f"y_lo_{level}"]) & (d["y_true"] <= d[f"y_hi_{level}"])
        ax.scatter(x, ratio, s=5, c=np.where(inside.to_numpy()[order], "tab:blue", "tab:red"))
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_yscale("log")
        ax.set_xlabel("held-out rows, by band width")
        ax.set_ylabel("measured / predicted")
        ax.set_title(f"{title}: {target} ({100 * inside.mean():.0f} % inside)")
        ax.legend(fontsize=8)
    _save(fig, path)


def _save(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
