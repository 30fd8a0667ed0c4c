"""Conformal intervals. On FIXTURES (synthetic residuals, labelled as such, never reported): where the scores are
exchangeable with the rows, every group's coverage is its level within a binomial band, and clustered GPUs are each
covered. On the real measurement table (built by the test pipeline's `dvc repro`): real scores split at random rows
cover each group at least at its level; on GPUs held out of fit and calibration, what must hold row by row; and the
pipeline's reported coverage is its predictions' coverage, recomputed."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from wattgpu.catalogs.gpus import load_gpu_catalog
from wattgpu.catalogs.llms import load_llm_catalog
from wattgpu.config import Regime
from wattgpu.evaluation.cv import Fold
from wattgpu.evaluation.runner import prepare_rows, target_rows
from wattgpu.modeling import coverage, intervals
from wattgpu.modeling.algorithms import make_estimator
from wattgpu.modeling.store import load_predictor
from wattgpu.modeling.targets import TARGETS
from wattgpu.search.nested import inner_folds

pytestmark = pytest.mark.slow
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
HELD_OUT = ("NVIDIA A30", "NVIDIA L40S", "NVIDIA H200")  # three GPUs of the paper's lab, out of fit and calibration


@pytest.fixture(scope="module")
def power_rows(pipeline) -> pd.DataFrame:
    gpus = load_gpu_catalog(pipeline / "data/catalogs/gpus.yaml")
    llms = load_llm_catalog(pipeline / "data/processed/llm_catalog.csv")
    table = pd.read_csv(pipeline / "data/processed/measurements.csv")
    rows = prepare_rows(table, gpus, llms, source=None, dense_only=False, offline_batch=256)
    return target_rows(rows, "power")


# FIXTURE (synthetic residuals, never a measurement): per workload group and extrapolation state, log residuals
# drawn i.i.d. from a Laplace law of that bin's own scale, 6 "GPUs" of 2000 scores each; the served rows draw from
# the same law, so the scores are exchangeable with them and a row's coverage is a known quantity: its level.
FIXTURE_SCALES = {0: 0.05, 1: 0.15, 2: 0.45, 3: 0.9}  # per intervals.WORKLOAD_GROUPS, 18x apart (Mondrian bins matter)
FIXTURE_EXTRAP_MULT = 2.0  # extrapolating rows err twice as much (their own bin is the wider one)
FIXTURE_UNITS, FIXTURE_PER_UNIT, FIXTURE_TEST = 6, 2000, 4000


def _fixture_draw(rng, group: int, extrap: bool, n: int) -> np.ndarray:
    return rng.laplace(0.0, FIXTURE_SCALES[group] * (FIXTURE_EXTRAP_MULT if extrap else 1.0), n)


def test_fixture_exchangeable_residuals_cover_every_group_and_state_at_its_level():
    """Every (workload group, extrapolation state) bin's coverage lies within 3 sigma of the level asked, sigma the
    binomial spread of the test rows and of the calibration quantile together. Pooling the groups (group 0 then
    covers ~100 %, group 3 far less), dropping the extrapolating bins, a wrong quantile or a floor across GPUs that
    overshoots (e.g. the widest GPU's quantile) each move a bin out of the band."""
    rng = np.random.default_rng(20240521)
    n_cal = FIXTURE_UNITS * FIXTURE_PER_UNIT
    units = np.repeat([f"fixture-gpu-{u}" for u in range(FIXTURE_UNITS)], FIXTURE_PER_UNIT).astype(object)
    bins = [(g, e) for g in FIXTURE_SCALES for e in (False, True)]
    cal = intervals.Calibration.concat([
        intervals.Calibration(_fixture_draw(rng, g, e, n_cal), np.full(n_cal, g), np.full(n_cal, e), units.copy())
        for g, e in bins])
    found = {}
    for level in (0.8, 0.9):
        sigma = np.sqrt(level * (1 - level) * (1 / FIXTURE_TEST + 1 / n_cal))
        for g, e in bins:
            pred = np.full(FIXTURE_TEST, 250.0)
            y = pred * np.exp(_fixture_draw(rng, g, e, FIXTURE_TEST))
            lo, hi = intervals.bounds(cal, pred, np.full(FIXTURE_TEST, g), np.full(FIXTURE_TEST, e), level)
            summary = intervals.coverage_summary(y, lo, hi, pred)
            assert summary["abstained"] == 0 and summary["n_rows"] == FIXTURE_TEST
            found[(level, g, e)] = summary["coverage"]
            assert abs(summary["coverage"] - level) <= 3 * sigma, (level, g, e, summary, 3 * sigma)
    # the widths follow the scales: a wider law, a wider band (the bins are not pooled)
    widths = [intervals.half_widths(cal, np.array([g]), np.array([False]), 0.8)[0] for g in FIXTURE_SCALES]
    assert np.all(np.diff(widths) > 0), widths
    # Laplace: the level quantile of |score| is scale x ln(1 / (1 - level)) (sampling error and the GPU floor: ~2 %)
    assert widths[2] == pytest.approx(FIXTURE_SCALES[2] * np.log(1 / 0.2), rel=0.05)


def test_fixture_clustered_gpus_each_new_gpu_is_covered_not_only_most_rows():
    """FIXTURE (synthetic, never a measurement): 3 precise "GPUs" with 3 000 scores each (Laplace scale 0.05) and 9
    imprecise ones with 100 each (scale 0.4), all in one bin. A row quantile is set by the precise GPUs' rows and
    would cover a new imprecise GPU ~25 % of the time; the group-conditional floor (the widest across GPUs of each
    GPU's own level - UNIT_SLACK quantile) must cover every new GPU, precise or not, at its level less UNIT_SLACK
    and 3 sigma (sigma: the new GPU's 2 000 rows and a quantile estimated from 100 scores), and a precise one at its
    level."""
    rng = np.random.default_rng(11)
    kinds = [(0.05, 3000)] * 3 + [(0.4, 100)] * 9
    scores = [rng.laplace(0.0, scale, n) for scale, n in kinds]
    units = np.concatenate([np.full(n, f"fixture-gpu-{i}", dtype=object) for i, (_, n) in enumerate(kinds)])
    n = len(units)
    cal = intervals.Calibration(np.concatenate(scores), np.zeros(n, int), np.zeros(n, bool), units)
    m = 2000
    for level in (0.8, 0.9):
        sigma = np.sqrt(level * (1 - level) * (1 / m + 1 / 100))
        for scale in (0.05, 0.4):  # a new GPU of each kind
            pred = np.full(m, 40.0)
            y = pred * np.exp(rng.laplace(0.0, scale, m))
            lo, hi = intervals.bounds(cal, pred, np.zeros(m, int), np.zeros(m, bool), level)
            cover = intervals.coverage_summary(y, lo, hi, pred)["coverage"]
            floor = level - intervals.UNIT_SLACK if scale > 0.1 else level
            assert cover >= floor - 3 * sigma, (level, scale, cover, 3 * sigma)


@pytest.fixture(scope="module")
def held_out(power_rows):
    """The power model fitted without three GPUs, its conformal scores from GPU folds of the training rows only."""
    rows = power_rows
    test = np.flatnonzero(rows["gpu"].isin(HELD_OUT).to_numpy())
    train = np.flatnonzero(~rows["gpu"].isin(HELD_OUT).to_numpy())
    assert len(test) > 300 and len(train) > 3000
    y = rows[TARGETS["power"].column].to_numpy(dtype=float)
    make = lambda: make_estimator("xgboost", "power", "workload", {"n_estimators": 150, "max_depth": 4},  # noqa: E731
                                  seed=0, n_jobs=2)
    # Calibration folds hold out GPU groups of the training rows only: the held-out GPUs never enter.
    folds = [Fold(f.name, train[f.train], train[f.test])
             for f in inner_folds(rows.iloc[train], Regime(kind="logo"), 5, seed=0)]
    assert all(not set(f.train) & set(test) and not set(f.test) & set(test) for f in folds)
    def predict_fold(fold):
        return rows.iloc[fold.test], make().fit(rows.iloc[fold.train]).predict(rows.iloc[fold.test])

    cal = intervals.calibrate(predict_fold, rows, y, folds)
    pred = make().fit(rows.iloc[train]).predict(rows.iloc[test])
    return rows, y, train, test, cal, pred


def test_real_scores_split_at_random_rows_cover_each_group_at_least_at_its_level(held_out):
    """The real out-of-GPU residuals, split at random rows: one half calibrates, the other half is scored. The two
    halves are exchangeable by construction, so the conformal guarantee holds per workload group: coverage at least
    the level less 3 binomial sigma (more is allowed: the per-GPU floor widens bands where GPUs' errors cluster)."""
    _, _, _, _, cal, _ = held_out
    usable = np.flatnonzero(~cal.novel)
    rng = np.random.default_rng(5)
    order = rng.permutation(usable)
    a, b = order[: len(order) // 2], order[len(order) // 2:]
    half = intervals.Calibration(cal.scores[a], cal.group[a], cal.extrapolating[a], cal.unit[a], cal.novel[a])
    checked = 0
    for level in (0.8, 0.9):
        for g in np.unique(cal.group[b]):
            rows = b[(cal.group[b] == g) & ~cal.extrapolating[b]]  # inside rows: their bin is (group, inside)
            n_cal = int(((half.group == g) & ~half.extrapolating).sum())
            if len(rows) < 100 or n_cal < 100:
                continue
            pred = np.ones(len(rows))
            lo, hi = intervals.bounds(half, pred, cal.group[rows], np.zeros(len(rows), bool), level)
            cover = intervals.coverage_summary(np.exp(cal.scores[rows]), lo, hi, pred)["coverage"]
            sigma = np.sqrt(level * (1 - level) * (1 / len(rows) + 1 / n_cal))
            assert cover >= level - 3 * sigma, (level, intervals.WORKLOAD_GROUPS[g], cover, len(rows), sigma)
            checked += 1
    assert checked >= 4  # at least two workload groups with enough scores, at both levels


def test_bands_on_held_out_gpus_hold_the_point_and_nest_by_level(held_out):
    """On GPUs out of both the fit and the calibration (no coverage is promised there: the rows are not exchangeable
    with the scores) what must hold row by row: lo <= point <= hi, and the 90 % band contains the 80 % band."""
    rows, y, train, test, cal, pred = held_out
    held = rows.iloc[test]
    extrap = intervals.extrapolating(held, coverage.training_ranges(rows.iloc[train]))
    group = intervals.workload_group(held)
    (lo8, hi8), (lo9, hi9) = (intervals.bounds(cal, pred, group, extrap, level) for level in (0.8, 0.9))
    assert np.isfinite(lo8).all() and np.isfinite(lo9).all()  # NVIDIA GPUs: a known family, no abstention
    assert (lo9 <= lo8).all() and (lo8 <= pred).all() and (pred <= hi8).all() and (hi8 <= hi9).all()
    assert (hi8 > lo8).all()
    # an extrapolating row never gets a narrower band than an inside row of its group
    q = intervals.half_widths(cal, group, extrap, 0.8)
    for g in np.unique(group[extrap]):
        inside = intervals.half_widths(cal, np.array([g]), np.array([False]), 0.8)[0]
        assert (q[extrap & (group == g)] >= inside - 1e-12).all()


def test_a_request_far_outside_the_training_ranges_gets_a_wider_interval_or_none(pipeline):
    predictor = load_predictor(pipeline / "models/power", pipeline / "models/itl")
    # inside: the prompt and output lengths the default engine's generation (vLLM V1) was measured with
    ranges = coverage.narrowest(predictor.training_ranges.values())
    prompt, output = (float(np.mean(ranges[f"{c}:vllm V1 engine"])) for c in ("prompt_tokens_mean", "output_tokens_mean"))
    inside = {"gpu": "NVIDIA H100 NVL", "llm": LLAMA, "concurrency": 16, "prompt_tokens": prompt,
              "output_tokens": output}
    spec = {"gpu_name": "far-out accelerator", "gpu_tdp_w": 1900.0, "gpu_memory_gb": 1000.0,
            "gpu_memory_bandwidth_gb_s": 19000.0, "gpu_fp16_tensor_tflops": 9000.0, "gpu_release_year": 2034}
    far = {**{k: v for k, v in inside.items() if k != "gpu"}, **spec}
    out = predictor.predict([inside, far])
    for col in ("power_w", "itl_s"):
        width = (out[f"{col}_hi"] - out[f"{col}_lo"]) / out[col]
        assert np.isfinite(width.iloc[0]) and width.iloc[0] > 0, out.iloc[0]
        # wider, or no interval at all (the model abstains), and the note says which
        assert not np.isfinite(width.iloc[1]) or width.iloc[1] >= width.iloc[0], (col, out.iloc[1])
    assert out["interval"].iloc[0] == ""
    assert "wider" in out["interval"].iloc[1] or "abstains" in out["interval"].iloc[1]


def test_bounds_hold_the_point_and_throughput_follows_the_itl_band(pipeline):
    predictor = load_predictor(pipeline / "models/power", pipeline / "models/itl")
    out = predictor.predict([{"gpu": "NVIDIA A30", "llm": LLAMA, "concurrency": 8, "level": 0.9},
                             {"gpu": "NVIDIA A30", "llm": LLAMA, "concurrency": 8, "level": 0.6}])
    for col in ("power_w", "itl_ms", "system_tokens_per_s", "energy_per_token_j"):
        assert (out[f"{col}_lo"] <= out[col]).all() and (out[col] <= out[f"{col}_hi"]).all(), col
    assert out["level"].tolist() == [0.9, 0.6]
    assert out["itl_ms_hi"].iloc[0] > out["itl_ms_hi"].iloc[1]  # a higher level is a wider band
    # a closed batch: throughput = requests in flight / ITL, so its band is the ITL band turned over
    assert np.allclose(out["system_tokens_per_s_lo"], 8 / out["itl_s_hi"])


def test_the_pipeline_reports_coverage_recomputed_from_its_predictions(pipeline):
    """reports/search/intervals.json and each regime's interval_coverage_by_gpu.csv are the nested selection's
    bands in reports/search/<regime>/predictions.csv, recomputed here from the rows (abstentions count as misses);
    and row by row the bands hold the point and the 90 % band holds the 80 % band."""
    from wattgpu.evaluation.leaderboard import SELECTION
    from wattgpu.workload import SCENARIO_GROUPS

    def summary(sub: pd.DataFrame, key: str) -> dict:
        lo, hi, y, p = (sub[c].to_numpy(dtype=float) for c in (f"y_lo_{key}", f"y_hi_{key}", "y_true", "y_pred"))
        assert np.isfinite(y).all() and np.isfinite(p).all()  # the selection predicts every row it is scored on
        has = np.isfinite(lo) & np.isfinite(hi)
        return {"coverage": float((has & (y >= lo) & (y <= hi)).mean()), "abstained": float((~has).mean()),
                "median_rel_width": float(np.median((hi[has] - lo[has]) / p[has])) if has.any() else None,
                "n_rows": len(sub)}

    found = json.loads((pipeline / "reports/search/intervals.json").read_text())
    assert {"logo", "lolo", "loso", "loeo", "lopo"} <= set(found)
    for regime, targets in found.items():
        pred = pd.read_csv(pipeline / f"reports/search/{regime}/predictions.csv")
        sel = pred[pred["model"] == SELECTION]
        by_gpu = pd.read_csv(pipeline / f"reports/search/{regime}/interval_coverage_by_gpu.csv")
        assert set(targets) == set(sel["target"]) == {"power", "itl"}, regime
        for target, groups in targets.items():
            g = sel[sel["target"] == target]
            lo8, hi8, lo9, hi9, point = (g[c].to_numpy(dtype=float) for c in
                                         ("y_lo_80", "y_hi_80", "y_lo_90", "y_hi_90", "y_pred"))
            has = np.isfinite(lo8) & np.isfinite(lo9)
            assert (np.isfinite(lo8) == np.isfinite(lo9)).all()  # a model abstains at every level or at none
            assert ((lo9 <= lo8) & (lo8 <= point) & (point <= hi8) & (hi8 <= hi9))[has].all(), (regime, target)
            label = np.where(g["scenario_label"].eq("offline"), "offline",
                             np.where(g["scenario_label"].isin(SCENARIO_GROUPS["server"]), "server", g["source"]))
            masks = {str(k): label == k for k in np.unique(label)}
            if g["source"].nunique() > 1:
                masks.update({f"source:{k}": (g["source"] == k).to_numpy() for k in g["source"].unique()})
            masks["all"] = np.ones(len(g), dtype=bool)
            assert set(groups) == set(masks), (regime, target)
            for name, m in masks.items():
                for key in ("80", "90"):
                    want, cell = summary(g[m], key), groups[name][key]
                    assert cell["n_rows"] == want["n_rows"] > 0, (regime, target, name)
                    for field in ("coverage", "abstained", "median_rel_width"):
                        assert cell[field] == pytest.approx(want[field], abs=1e-6), (regime, target, name, key, field)
            for (gpu, group, key), row in by_gpu[by_gpu["target"] == target].set_index(
                    ["gpu", "group", "level"]).iterrows():
                sub = g[(g["gpu"] == gpu).to_numpy() & (label == group)]
                want = summary(sub, str(key))
                assert row["n_rows"] == want["n_rows"] and row["coverage"] == pytest.approx(want["coverage"], abs=1e-9)
            assert len(by_gpu[by_gpu["target"] == target]) == 2 * len(set(zip(g["gpu"], label)))
    assert (pipeline / "reports/search/plots/interval_coverage_by_gpu.png").stat().st_size > 10_000
    meta = json.loads((pipeline / "models/power/meta.json").read_text())
    assert sum(meta["calibration"]["scores"].values()) > 1000  # every row's out-of-group residual
