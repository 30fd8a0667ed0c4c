"""Prediction intervals: conformal regression (crepes) on grouped out-of-fold residuals (pure functions).

Calibration. The residuals come from models that never saw the residual's group: the regime's inner folds hold
out whole GPU (or LLM, or lab) groups, each fold's model predicts the rows it held out, and the log residual
log(measured) - log(predicted) of every held-out row is a calibration score. The model that is served (or
scored on an outer fold) is fitted on all of those rows; the scores only set the interval's half-width, on the
log scale, so a band is multiplicative: [pred x exp(-q), pred x exp(+q)].

Mondrian bins. Scores are pooled per workload group (WORKLOAD_GROUPS: the paper's offline and Poisson server
loads, closed batches on vLLM and on other engines, whose errors differ by a factor of 3 and more) and per
extrapolation state: a calibration row is `extrapolating` when it lay outside its fold's training ranges
(coverage.COLUMNS), the way an unseen GPU newer than every measured one does, or its GPU's architecture had no GPU
among its fold's training rows (coverage.ARCHITECTURE). With the architecture counted, the GPUs that missed most
when held out (V100 and T4, each the only one of its architecture; the AMD GPUs) calibrate the extrapolating bins
instead of widening every band, and a GPU of an unmeasured architecture (Blackwell) gets their width: under LOGO the
worst held-out GPU's ITL coverage went 0.08 -> 0.41 and the median ITL band 1.05 -> 0.82 x the prediction (stop 32's
closing note).
An extrapolating request gets the wider of its two bins' half-widths, so extrapolating never narrows a band; where
its bin holds too few scores for the level asked (crepes gives an infinite half-width), the model abstains: no
interval, and a note that says why.

Group-conditional widths. Residuals cluster by GPU: a held-out GPU's errors share a sign and a size, so a pooled
row quantile covers the average GPU and misses whole ones. Each score keeps the GPU it came from (`unit`); a bin's
half-width is the larger of the pooled conformal quantile and, where the bin holds GROUP_MIN_UNITS GPUs or more, the
largest across those GPUs of each GPU's own (level - UNIT_SLACK) quantile: the narrowest band under which every
calibration GPU keeps at least level - UNIT_SLACK of its rows inside (0.65 at 80 %: the floor every held-out GPU is
judged by, evaluation.leaderboard.COVERAGE_FLOOR). It replaced the 0.67 quantile across GPUs of their own `level`
quantiles, which promised most GPUs their level and left the rest to chance (stop 40's closing note: under LOGO the ITL
groups under 0.65 went 3 -> 1 at the same median width).

Scored as served. A calibration score is the error of what the served path answers for the held-out row
(modeling.predictor.served_predictions, through calibrate's `predict_fold`): a Poisson load's requests in flight solved
by an ITL model fitted on the fold's training rows, a measured closed batch asked at its setting. Scores taken at the
measured requests in flight missed the solver's share of the error, so the bands of Poisson rows were too narrow.

Abstention by accelerator family. A request whose accelerator family (features.accelerator_family: the vendor, with
Intel's Gaudi apart from its GPUs) has no member among the model's training rows gets no interval: the errors measured
on such GPUs held out were 10x and more (Intel Gaudi 2 and Max 1550 under LOGO), and nothing in the calibration
scores speaks for them. Calibration scores from a fold where the held-out GPU's family was unseen are kept out of
every bin for the same reason; `Calibration.families` records the families the served model was fitted on. A
request with no vendor given is not judged.

Group-level caveat: the scores are exchangeable across rows, not across groups. With few groups (8 GPUs in one
lab) a row-level quantile can still miss a whole group; the coverage the project reports is measured on outer
folds that hold the group out, never assumed.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from wattgpu.arrays import per_distinct
from wattgpu.features import accelerator_families
from wattgpu.fields import DEFAULT_INTERVAL_LEVEL
from wattgpu.modeling import coverage
from wattgpu.workload import answering_family

DEFAULT_LEVEL = DEFAULT_INTERVAL_LEVEL
LEVELS = (DEFAULT_LEVEL, 0.9)  # the levels measured and shown by default
# calibration groups of a row's workload: the paper's two loads, and closed batches on vLLM or on another engine
WORKLOAD_GROUPS = ("offline", "server", "closed_vllm", "closed_other_engine")
MIN_SCORES = 10  # a bin with fewer scores abstains at every level (crepes would return a finite width from 1)
UNIT_SLACK = 0.15  # the group floor keeps level - UNIT_SLACK of every calibration GPU's rows inside (None: no floor)
GROUP_MIN_UNITS = 3  # GPUs a bin needs for the group-conditional floor
GROUP_MIN_SCORES = 5  # scores a GPU needs to count as one of them


def workload_group(rows: pd.DataFrame) -> np.ndarray:
    """Index into WORKLOAD_GROUPS: offline (a full queue), Poisson arrivals (`server`), any other closed batch on
    vLLM, or on another engine (TensorRT-LLM, llama.cpp, DeepSpeed-MII, ... whose errors are their own). An engine no
    source measured is in the group of the family that answers it (workload.answering_family: SGLang's, vLLM's), so
    that its band is never narrower than that family's own."""
    scenario = rows["scenario"].to_numpy(dtype=object)
    vllm = per_distinct(answering_family, rows["engine"], dtype=object) == "vllm" if "engine" in rows \
        else np.ones(len(rows), bool)
    return np.select([scenario == "offline", scenario == "server", vllm], [0, 1, 2], 3).astype(int)


def extrapolating(rows: pd.DataFrame, ranges: dict[str, list[float]]) -> np.ndarray:
    """True where a row lies outside `ranges` (coverage.training_ranges of the rows a model was fitted on)."""
    return coverage.outside_mask(rows, ranges)


def novel_family(rows: pd.DataFrame, families, family: np.ndarray | None = None) -> np.ndarray:
    """True where a row's accelerator family (known) has no member in `families` (those of the training rows);
    `family`: the rows' accelerator_family where the caller has it."""
    fam = accelerator_families(rows) if family is None else family
    known = {str(f) for f in families}
    return np.array([bool(f) and f not in known for f in fam], dtype=bool)


def abstain_reason(target: str, family: str) -> str:
    """The `interval` note of a request whose accelerator family was never measured."""
    return (f"{target} abstains: no {family} accelerator among the training rows (held-out accelerators of an "
            "unmeasured family missed by 10x and more)")


@dataclass(frozen=True)
class Calibration:
    """Calibration scores (log residuals) with each score's workload group, extrapolation state, the GPU it came from
    (`unit`) and whether that GPU's accelerator family was absent from its fold's training rows (`novel`); `families`:
    the accelerator families of the rows the served (or scored) model is fitted on (empty: not judged)."""

    scores: np.ndarray
    group: np.ndarray
    extrapolating: np.ndarray
    unit: np.ndarray | None = None
    novel: np.ndarray | None = None
    families: tuple[str, ...] = ()

    def __post_init__(self):
        n = len(self.scores)
        if self.unit is None:
            object.__setattr__(self, "unit", np.full(n, "", dtype=object))
        if self.novel is None:
            object.__setattr__(self, "novel", np.zeros(n, dtype=bool))

    @classmethod
    def from_predictions(cls, rows: pd.DataFrame, y_true, y_pred, extrap, novel=None) -> Calibration:
        y_true, y_pred = np.asarray(y_true, dtype=float), np.asarray(y_pred, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            scores = np.log(y_true) - np.log(y_pred)
        ok = np.isfinite(scores)
        unit = (rows["gpu"].astype(str).to_numpy(dtype=object) if "gpu" in rows
                else np.full(len(rows), "", dtype=object))
        novel = np.zeros(len(rows), bool) if novel is None else np.asarray(novel, dtype=bool)
        return cls(scores[ok], workload_group(rows)[ok], np.asarray(extrap, dtype=bool)[ok], unit[ok], novel[ok])

    @classmethod
    def concat(cls, parts: list[Calibration], families=()) -> Calibration:
        fields_ = ("scores", "group", "extrapolating", "unit", "novel")
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) if parts else np.array([]) for f in fields_),
                   families=tuple(sorted({str(f) for f in families})))

    def to_json(self) -> dict:
        return {"score": "log(measured) - log(predicted), out of group fold", "workload_groups": list(WORKLOAD_GROUPS),
                "scores": [round(float(s), 6) for s in self.scores], "group": self.group.astype(int).tolist(),
                "extrapolating": self.extrapolating.astype(int).tolist(),
                "unit": [str(u) for u in self.unit], "novel": self.novel.astype(int).tolist(),
                "families": list(self.families)}

    @classmethod
    def from_json(cls, d: dict) -> Calibration:
        n = len(d["scores"])
        return cls(np.asarray(d["scores"], dtype=float), np.asarray(d["group"], dtype=int),
                   np.asarray(d["extrapolating"], dtype=bool),
                   np.asarray(d.get("unit", [""] * n), dtype=object),
                   np.asarray(d.get("novel", [0] * n), dtype=bool), tuple(d.get("families", ())))

    def counts(self) -> dict[str, int]:
        return {f"{g}{'/extrapolating' if e else ''}": int(((self.group == i) & (self.extrapolating == e)).sum())
                for i, g in enumerate(WORKLOAD_GROUPS) for e in (False, True)}


def _bins(group: np.ndarray, extrap: np.ndarray) -> np.ndarray:
    return np.asarray(group, dtype=int) * 2 + np.asarray(extrap, dtype=int)


def group_floor(scores: np.ndarray, units: np.ndarray, level: float) -> float:
    """The largest across units (GPUs) of each unit's own (level - UNIT_SLACK) quantile of |score|; 0 with too few
    units."""
    if UNIT_SLACK is None:
        return 0.0
    per = [np.quantile(np.abs(scores[units == u]), max(level - UNIT_SLACK, 0.0)) for u in np.unique(units)
           if u != "" and (units == u).sum() >= GROUP_MIN_SCORES]
    return float(np.max(per)) if len(per) >= GROUP_MIN_UNITS else 0.0


def half_widths(cal: Calibration, group: np.ndarray, extrap: np.ndarray, level: float,
                novel: np.ndarray | None = None) -> np.ndarray:
    """Per row, the log-scale half-width at `level` (inf: abstain). An extrapolating row gets the wider of its
    own bin's and the inside bin's half-width; a bin's width is the larger of crepes' pooled quantile and the
    group-conditional floor (group_floor: every calibration GPU keeps level - UNIT_SLACK of its rows inside); a
    `novel` row (accelerator family unseen in training) abstains, and scores from novel held-out GPUs calibrate
    nothing."""
    from crepes import ConformalRegressor

    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    group, extrap = np.asarray(group, dtype=int), np.asarray(extrap, dtype=bool)
    out = np.full(len(group), np.inf)
    usable = ~np.asarray(cal.novel, dtype=bool)
    bins = _bins(cal.group[usable], cal.extrapolating[usable])
    scores, units = cal.scores[usable], np.asarray(cal.unit, dtype=object)[usable]
    present = np.unique(bins[np.bincount(bins)[bins] >= MIN_SCORES]) if len(bins) else np.array([])
    if not len(present):
        return out
    keep = np.isin(bins, present)
    cr = ConformalRegressor().fit(scores[keep], bins=bins[keep])
    floor = {int(b): group_floor(scores[bins == b], units[bins == b], level) for b in present}

    def width(b: np.ndarray) -> np.ndarray:
        w = np.full(len(b), np.inf)
        known = np.isin(b, present)
        if known.any():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # too few scores for the level: inf, i.e. abstain
                iv = cr.predict_int(np.zeros(int(known.sum())), bins=b[known], confidence=level)
            w[known] = np.maximum(iv[:, 1], [floor[int(x)] for x in b[known]])
        return w

    inside = width(_bins(group, np.zeros_like(extrap)))
    out = np.where(extrap, np.maximum(width(_bins(group, extrap)), inside), inside)
    if novel is not None:
        out = np.where(np.asarray(novel, dtype=bool), np.inf, out)
    return out


def band(y_pred, q, limits: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) = y_pred x exp(-/+ q), within `limits` (the target's physical range per row, targets.Target.limits:
    no band reaches above a GPU's TDP or below the time the decode step's weights and KV caches take to read); NaN
    where q is infinite (the model abstains)."""
    y_pred, q = np.asarray(y_pred, dtype=float), np.asarray(q, dtype=float)
    finite = np.isfinite(q)
    lo, hi = (np.where(finite, y_pred * np.exp(sign * np.where(finite, q, 0)), np.nan) for sign in (-1, 1))
    if limits is not None:
        low, high = limits
        lo, hi = np.clip(lo, low, high), np.clip(hi, low, high)
    return lo, hi


def bounds(cal: Calibration, y_pred, group, extrap, level: float, novel: np.ndarray | None = None,
           limits: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) in natural units within `limits` (band); NaN where the model abstains."""
    return band(y_pred, half_widths(cal, group, extrap, level, novel), limits)


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


def calibrate(predict_fold, rows: pd.DataFrame, y_true: np.ndarray, folds) -> Calibration:
    """Scores from group folds: per fold, `predict_fold(fold)` -> (the fold's test rows as they are served, their
    predictions), by a model fitted on `fold.train` only (the served path: a Poisson load's requests in flight solved,
    modeling.predictor.served_predictions); a row's extrapolation state and family novelty are judged against its own
    fold's training rows. `families`: the accelerator families of the folds' rows together (what the model fitted on
    all of them saw)."""
    parts = []
    y_true = np.asarray(y_true, dtype=float)
    for fold in folds:
        test, pred = predict_fold(fold)
        train = rows.iloc[fold.train]
        extrap = extrapolating(test, coverage.training_ranges(train))
        novel = novel_family(test, set(accelerator_families(train)))
        parts.append(Calibration.from_predictions(test, y_true[fold.test], np.asarray(pred, dtype=float), extrap,
                                                  novel))
    seen = np.unique(np.concatenate([np.r_[f.train, f.test] for f in folds])) if len(folds) else np.array([], int)
    families = [f for f in set(accelerator_families(rows.iloc[seen])) if f]
    return Calibration.concat(parts, families)


def level_key(level: float) -> str:
    """0.8 -> '80' (column suffixes and metric keys)."""
    return f"{100 * level:g}"
