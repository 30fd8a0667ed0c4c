"""Cross-validated predictions and their metrics: pure functions of rows, a model factory and folds."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from wattgpu.config import Regime
from wattgpu.evaluation import metrics
from wattgpu.evaluation.cv import check_disjoint, folds
from wattgpu.features import attach_specs, engineer
from wattgpu.modeling import intervals
from wattgpu.modeling.targets import TARGETS


def prepare_rows(table: pd.DataFrame, gpus, llms, *, source: str | None, dense_only: bool,
                 offline_batch: float, idle_power_w: dict[str, float] | None = None) -> pd.DataFrame:
    """Measurement rows with catalog specs and engineered features, filtered to one source."""
    rows = table if source is None else table[table["source"] == source]
    if dense_only:
        rows = rows[~rows["is_moe"].astype(bool)]
    rows = attach_specs(rows.reset_index(drop=True), gpus, llms, idle_power_w)
    return engineer(rows, offline_batch=offline_batch)


def target_rows(rows: pd.DataFrame, target: str) -> pd.DataFrame:
    """Rows whose target is defined (ITL may be empty with a reason; power may be absent)."""
    return rows[rows[TARGETS[target].column].notna()].reset_index(drop=True)


def step_rows(rows: pd.DataFrame, target: str) -> pd.DataFrame | None:
    """Rows measured with an ITL but without `target` (LLM-Inference-Bench's latency runs beside its few power runs):
    what a power model's step time learns from beside the power rows (evaluation.cv.fit_fold); None for ITL."""
    if target == "itl":
        return None
    itl, column = TARGETS["itl"].column, TARGETS[target].column
    return rows[rows[column].isna() & rows[itl].notna()].reset_index(drop=True)


@dataclass
class CrossPrediction:
    y_pred: np.ndarray
    importances: list[pd.Series] = field(default_factory=list)
    n_folds: int = 0


def cross_predict(rows: pd.DataFrame, make_model: Callable[[], object], regime: Regime, seed: int,
                  progress: Callable[[str], None] | None = None) -> CrossPrediction:
    """Predict every row from a model that did not see it (nor its group, per the regime)."""
    y_pred = np.full(len(rows), np.nan)
    result = CrossPrediction(y_pred)
    for fold in folds(rows, regime, seed):
        check_disjoint(rows, regime, fold)
        if len(fold.train) == 0:
            continue
        model = make_model().fit(rows.iloc[fold.train])
        y_pred[fold.test] = model.predict(rows.iloc[fold.test])
        if hasattr(model, "feature_importances"):
            result.importances.append(model.feature_importances())
        result.n_folds += 1
        if progress:
            progress(fold.name)
    return result


def metrics_table(predictions: pd.DataFrame) -> dict:
    """{target: {model: {scenario_group: summary}}} from a long predictions frame."""
    out: dict = {}
    for (target, model), g in predictions.groupby(["target", "model"], sort=True):
        out.setdefault(target, {})[model] = metrics.by_scenario(g)
    return out


def interval_table(predictions: pd.DataFrame, calibrated: tuple[str, ...] = ()) -> dict:
    """{target: {model: {group: {level %: coverage summary}}}} for the models with intervals (y_lo_<level> columns),
    per scoring group (the paper's offline / server and each other source), per source and over all rows. A model
    named in `calibrated` is reported even where it abstains on every row (its summary says so); another model whose
    bounds are all missing has no intervals and is left out."""
    out: dict = {}
    levels = [lv for lv in intervals.LEVELS if f"y_lo_{intervals.level_key(lv)}" in predictions]
    if not levels:
        return out
    for (target, model), g in predictions.groupby(["target", "model"], sort=True):
        first = f"y_lo_{intervals.level_key(levels[0])}"
        if g[first].isna().all() and model not in calibrated:
            continue
        labels = metrics.score_groups(g)
        groups = {str(k): labels == k for k in np.unique(labels)}
        if g["source"].nunique() > 1:
            groups.update({f"source:{s}": (g["source"] == s).to_numpy() for s in sorted(g["source"].unique())})
        groups["all"] = np.ones(len(g), dtype=bool)
        out.setdefault(target, {})[model] = {
            name: {intervals.level_key(lv): intervals.coverage_summary(
                g["y_true"][m], g[f"y_lo_{intervals.level_key(lv)}"][m], g[f"y_hi_{intervals.level_key(lv)}"][m],
                g["y_pred"][m]) for lv in levels}
            for name, m in groups.items()}
    return out


def interval_by_gpu(predictions: pd.DataFrame, model: str, by: str = "gpu") -> pd.DataFrame:
    """Coverage per (target, `by` (the GPU, or `llm_family`), scoring group, level) of one model's intervals, beside
    the band's median relative width and the share abstained: the per-GPU plot's table. A unit the model abstains on
    entirely is a row too (abstained 1.0); the columns are there even when no row is."""
    parts = []
    columns = ["target", by, "group", "level", "coverage", "median_rel_width", "abstained", "n_rows"]
    g = predictions[predictions["model"] == model]
    if by not in g:
        return pd.DataFrame(parts, columns=columns)
    for lv in intervals.LEVELS:
        key = intervals.level_key(lv)
        if f"y_lo_{key}" not in g:
            continue
        frame = g.assign(group=metrics.score_groups(g))
        for (target, unit, group), sub in frame.groupby(["target", by, "group"], sort=True):
            parts.append({"target": target, by: unit, "group": group, "level": key,
                          **intervals.coverage_summary(sub["y_true"], sub[f"y_lo_{key}"], sub[f"y_hi_{key}"],
                                                       sub["y_pred"])})
    return pd.DataFrame(parts, columns=columns)
