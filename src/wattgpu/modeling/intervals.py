"""Prediction intervals: conformal regression (crepes) on grouped out-of-fold residuals (pure functions).

Calibration. The residuals come from models that never saw the residual's group: the regime's inner folds hold
out whole GPU (or LLM, or lab) groups, each fold's model predicts the rows it held out, and the log residual
log(measured) - log(predicted) of every held-out row is a calibration score. The model that is served (or
scored on an outer fold) is fitted on all of those rows; the scores only set the interval's half-width, on the
log scale, so a band is multiplicative: [pred x exp(-q), pred x exp(+q)].

Mondrian bins. Scores are pooled per workload group (WORKLOAD_GROUPS: the paper's offline and Poisson server
loads, closed batches on vLLM and on other engines, whose errors differ by a factor of 3 and more) and per extrapolation state: a calibration row is `extrapolating` when it lay
outside its fold's training ranges (coverage.COLUMNS), the way an unseen GPU newer than every measured one does.
An extrapolating request gets the wider of its two bins' half-widths, so extrapolating never narrows a band; where
its bin holds too few scores for the level asked (crepes gives an infinite half-width), the model abstains: no
interval, and a note that says why.

Group-level caveat: the scores are exchangeable across rows, not across groups. With few groups (8 GPUs in one
lab) a row-level quantile can still miss a whole group; the coverage the project reports is measured on outer
folds that hold the group out, never assumed.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from wattgpu.fields import DEFAULT_INTERVAL_LEVEL
from wattgpu.modeling import coverage

DEFAULT_LEVEL = DEFAULT_INTERVAL_LEVEL
LEVELS = (DEFAULT_LEVEL, 0.9)  # the levels measured and shown by default
# calibration groups of a row's workload: the paper's two loads, and closed batches on vLLM or on another engine
WORKLOAD_GROUPS = ("offline", "server", "closed_vllm", "closed_other_engine")
MIN_SCORES = 10  # a bin with fewer scores abstains at every level (crepes would return a finite width from 1)


def workload_group(rows: pd.DataFrame) -> np.ndarray:
    """Index into WORKLOAD_GROUPS: offline (a full queue), Poisson arrivals (`server`), any other closed batch on
    vLLM, or on another engine (TensorRT-LLM, llama.cpp, DeepSpeed-MII, ... whose errors are their own)."""
    scenario = rows["scenario"].astype(str).to_numpy()
    vllm = rows["engine"].astype(str).str.lower().eq("vllm").to_numpy() if "engine" in rows else np.ones(len(rows), bool)
    return np.select([scenario == "offline", scenario == "server", vllm], [0, 1, 2], 3).astype(int)


def extrapolating(rows: pd.DataFrame, ranges: dict[str, list[float]]) -> np.ndarray:
    """True where a row lies outside `ranges` (coverage.training_ranges of the rows a model was fitted on)."""
    return coverage.outside_mask(rows, ranges)


@dataclass(frozen=True)
class Calibration:
    """Calibration scores (log residuals) with each score's workload group and extrapolation state."""

    scores: np.ndarray
    group: np.ndarray
    extrapolating: np.ndarray

    @classmethod
    def from_predictions(cls, rows: pd.DataFrame, y_true, y_pred, extrap) -> Calibration:
        y_true, y_pred = np.asarray(y_true, dtype=float), np.asarray(y_pred, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            scores = np.log(y_true) - np.log(y_pred)
        ok = np.isfinite(scores)
        return cls(scores[ok], workload_group(rows)[ok], np.asarray(extrap, dtype=bool)[ok])

    @classmethod
    def concat(cls, parts: list[Calibration]) -> Calibration:
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) if parts else np.array([])
                     for f in ("scores", "group", "extrapolating")))

    def to_json(self) -> dict:
        return {"score": "log(measured) - log(predicted), out of group fold", "workload_groups": list(WORKLOAD_GROUPS),
                "scores": [round(float(s), 6) for s in self.scores], "group": self.group.astype(int).tolist(),
                "extrapolating": self.extrapolating.astype(int).tolist()}

    @classmethod
    def from_json(cls, d: dict) -> Calibration:
        return cls(np.asarray(d["scores"], dtype=float), np.asarray(d["group"], dtype=int),
                   np.asarray(d["extrapolating"], dtype=bool))

    def counts(self) -> dict[str, int]:
        return {f"{g}{'/extrapolating' if e else ''}": int(((self.group == i) & (self.extrapolating == e)).sum())
                for i, g in enumerate(WORKLOAD_GROUPS) for e in (False, True)}


def _bins(group: np.ndarray, extrap: np.ndarray) -> np.ndarray:
    return np.asarray(group, dtype=int) * 2 + np.asarray(extrap, dtype=int)


def half_widths(cal: Calibration, group: np.ndarray, extrap: np.ndarray, level: float) -> np.ndarray:
    """Per row, the log-scale half-width at `level` (inf: abstain). An extrapolating row gets the wider of its
    own bin's and the inside bin's half-width."""
    from crepes import ConformalRegressor

    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    group, extrap = np.asarray(group, dtype=int), np.asarray(extrap, dtype=bool)
    out = np.full(len(group), np.inf)
    bins = _bins(cal.group, cal.extrapolating)
    present = np.unique(bins[np.bincount(bins)[bins] >= MIN_SCORES]) if len(bins) else np.array([])
    if not len(present):
        return out
    keep = np.isin(bins, present)
    cr = ConformalRegressor().fit(cal.scores[keep], bins=bins[keep])

    def width(b: np.ndarray) -> np.ndarray:
        w = np.full(len(b), np.inf)
        known = np.isin(b, present)
        if known.any():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # too few scores for the level: inf, i.e. abstain
                iv = cr.predict_int(np.zeros(int(known.sum())), bins=b[known], confidence=level)
            w[known] = iv[:, 1]
        return w

    inside = width(_bins(group, np.zeros_like(extrap)))
    out = np.where(extrap, np.maximum(width(_bins(group, extrap)), inside), inside)
    return out


def bounds(cal: Calibration, y_pred, group, extrap, level: float) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) in natural units; NaN where the model abstains."""
    y_pred = np.asarray(y_pred, dtype=float)
    q = half_widths(cal, group, extrap, level)
    finite = np.isfinite(q)
    lo = np.where(finite, y_pred * np.exp(-np.where(finite, q, 0)), np.nan)
    hi = np.where(finite, y_pred * np.exp(np.where(finite, q, 0)), np.nan)
    return lo, hi


def coverage_summary(y_true, lo, hi, y_pred) -> dict[str, float]:
    """Share of rows inside [lo, hi] (abstentions count as outside), median relative width (hi - lo) / pred of the
    rows with an interval, share abstained, rows."""
    y_true, lo, hi, y_pred = (np.asarray(a, dtype=float) for a in (y_true, lo, hi, y_pred))
    ok = np.isfinite(y_true) & np.isfinite(y_pred)
    y_true, lo, hi, y_pred = y_true[ok], lo[ok], hi[ok], y_pred[ok]
    has = np.isfinite(lo) & np.isfinite(hi)
    inside = has & (y_true >= lo) & (y_true <= hi)
    n = len(y_true)
    return {"coverage": float(inside.mean()) if n else float("nan"),
            "median_rel_width": float(np.median((hi[has] - lo[has]) / y_pred[has])) if has.any() else float("nan"),
            "abstained": float((~has).mean()) if n else float("nan"), "n_rows": int(n)}


def calibrate(make_estimator, rows: pd.DataFrame, y_true: np.ndarray, folds, predictions=None) -> Calibration:
    """Scores from group folds: per fold, a fresh `make_estimator()` fitted on `fold.train` predicts `fold.test`
    (positions in `rows`); a row's extrapolation state is judged against its own fold's training ranges.
    `predictions`: those per-fold predictions where they were already made (no fit then)."""
    parts = []
    y_true = np.asarray(y_true, dtype=float)
    for i, fold in enumerate(folds):
        train, test = rows.iloc[fold.train], rows.iloc[fold.test]
        if predictions is not None:
            pred = np.asarray(predictions[i], dtype=float)
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                pred = np.asarray(make_estimator().fit(train).predict(test), dtype=float)
        extrap = extrapolating(test, coverage.training_ranges(train))
        parts.append(Calibration.from_predictions(test, y_true[fold.test], pred, extrap))
    return Calibration.concat(parts)


def level_key(level: float) -> str:
    """0.8 -> '80' (column suffixes and metric keys)."""
    return f"{100 * level:g}"
