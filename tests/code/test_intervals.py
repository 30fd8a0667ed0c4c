"""modeling.intervals on hand-made residual arrays (FIXTURES: numbers for the functions, not measurements)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from wattgpu.modeling import coverage, intervals
from wattgpu.modeling.intervals import Calibration


def calibration(n_inside: int, n_extrap: int, scale_inside: float, scale_extrap: float) -> Calibration:
    rng = np.random.default_rng(0)
    scores = np.concatenate([rng.normal(0, scale_inside, n_inside), rng.normal(0, scale_extrap, n_extrap)])
    return Calibration(scores, np.zeros(n_inside + n_extrap, dtype=int),
                       np.r_[np.zeros(n_inside, bool), np.ones(n_extrap, bool)])


def test_an_extrapolating_row_is_never_narrower_than_an_inside_one():
    # its own bin is narrower here, yet it gets the inside bin's width
    cal = calibration(500, 200, scale_inside=0.2, scale_extrap=0.05)
    q = intervals.half_widths(cal, np.array([0, 0]), np.array([False, True]), 0.8)
    assert q[1] == pytest.approx(q[0]) and q[0] > 0
    cal = calibration(500, 200, scale_inside=0.05, scale_extrap=0.3)
    q = intervals.half_widths(cal, np.array([0, 0]), np.array([False, True]), 0.8)
    assert q[1] > 2 * q[0]


def test_too_few_scores_abstain_and_an_unseen_group_abstains():
    cal = calibration(500, 5, scale_inside=0.1, scale_extrap=0.1)  # 5 < MIN_SCORES extrapolating scores
    lo, hi = intervals.bounds(cal, np.array([100.0, 100.0, 100.0]), np.array([0, 0, 1]),
                              np.array([False, True, False]), 0.8)
    assert np.isfinite(lo[0]) and lo[0] < 100 < hi[0]
    assert np.isnan(lo[1]) and np.isnan(hi[1])  # extrapolating, too few such scores
    assert np.isnan(lo[2])  # group 1 has no scores at all


def test_the_band_is_multiplicative_and_the_quantile_matches_the_scores():
    scores = np.log(np.linspace(0.5, 1.5, 1001))
    cal = Calibration(scores, np.zeros(len(scores), int), np.zeros(len(scores), bool))
    lo, hi = intervals.bounds(cal, np.array([10.0, 1000.0]), np.array([0, 0]), np.array([False, False]), 0.8)
    assert hi[1] / hi[0] == pytest.approx(100) and lo[0] * hi[0] == pytest.approx(100)
    q = np.log(hi[0] / 10)
    assert np.mean(np.abs(scores) <= q + 1e-12) == pytest.approx(0.8, abs=0.005)


def test_calibration_round_trips_through_json():
    cal = calibration(20, 12, 0.1, 0.2)
    back = Calibration.from_json(cal.to_json())
    assert np.allclose(back.scores, cal.scores, atol=1e-6)
    assert (back.group == cal.group).all() and (back.extrapolating == cal.extrapolating).all()
    assert back.counts()["offline"] == 20 and back.counts()["offline/extrapolating"] == 12


def test_coverage_summary_counts_an_abstention_as_a_miss():
    out = intervals.coverage_summary([1.0, 2.0, 3.0, 4.0], [0.5, 2.5, np.nan, 3.0], [1.5, 3.0, np.nan, 5.0],
                                     [1.0, 2.7, 3.0, 4.0])
    assert out["coverage"] == pytest.approx(0.5) and out["abstained"] == pytest.approx(0.25) and out["n_rows"] == 4


def test_workload_groups_and_the_extrapolation_mask():
    rows = pd.DataFrame({"scenario": ["offline", "server", "fixed_concurrency", "static_batch"],
                         "engine": ["vllm", "vllm", "vllm", "trt-llm"], "gpu_tdp_w": [300, 700, 1000, np.nan]})
    assert intervals.workload_group(rows).tolist() == [0, 1, 2, 3]
    assert coverage.outside_mask(rows, {"gpu_tdp_w": [250, 700]}).tolist() == [False, False, True, False]


def test_a_level_outside_zero_one_is_refused():
    with pytest.raises(ValueError, match="level"):
        intervals.half_widths(calibration(50, 0, 0.1, 0.1), np.array([0]), np.array([False]), 80)
