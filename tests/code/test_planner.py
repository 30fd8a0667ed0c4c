"""Planner logic on hand-written FIXTURE frames (made-up GPUs and figures, never measurements)."""

from __future__ import annotations

import pandas as pd
import pytest

from wattgpu.planning import planner
from wattgpu.planning.planner import LlmSize, MemoryRule, memory_fit, near_target, recommend

# FIXTURE: four made-up GPUs; an 8 B-parameter LLM needs 16 GB of FP16 weights.
GPUS = pd.DataFrame({"gpu": ["big", "mid", "small", "tiny"], "memory_gb": [80.0, 24.0, 24.0, 16.0]})
LLM = LlmSize(total_params_b=8.0, kv_bytes_per_token=131072.0)  # 128 KiB per token (Llama-3-8B-like GQA)
PRED = pd.DataFrame({  # FIXTURE predictions for the GPUs that fit
    "gpu": ["big", "mid", "small"],
    "power_w": [300.0, 150.0, 70.0],
    "itl_ms": [6.0, 20.0, 60.0],
    "tokens_per_s": [166.7, 50.0, 16.7],
    "energy_per_token_j": [4.1, 2.0, 0.95],
})


def test_memory_rule_weights_plus_one_request_kv_within_90_percent():
    fit = memory_fit(GPUS, LLM, tokens_per_request=1000, n_gpus=1).set_index("gpu")
    assert fit.loc["tiny", "usable_gb"] == pytest.approx(14.4)
    assert fit.loc["mid", "need_gb"] == pytest.approx(16.0 + 131072 * 1000 / 1e9)
    assert list(fit["fits"]) == [True, True, True, False]
    assert "14.4 GB usable" in fit.loc["tiny", "reason"] and fit.loc["big", "reason"] == ""


def test_more_gpus_per_replica_pool_their_memory():
    fit = memory_fit(GPUS, LLM, tokens_per_request=1000, n_gpus=2).set_index("gpu")
    assert fit.loc["tiny", "fits"] and fit.loc["tiny", "usable_gb"] == pytest.approx(28.8)


def test_a_stricter_rule_excludes_more():
    fit = memory_fit(GPUS, LLM, 1000, 1, MemoryRule(usable_fraction=0.6)).set_index("gpu")
    assert not fit.loc["mid", "fits"] and fit.loc["big", "fits"]


def test_least_energy_gpu_meeting_the_target_is_picked_and_others_excluded_with_reasons():
    rec = recommend(PRED, memory_fit(GPUS, LLM, 1000, 1), max_itl_ms=25)
    t = rec.table.set_index("gpu")
    assert rec.pick == "mid"  # "small" uses less energy but misses 25 ms
    assert list(rec.table["gpu"]) == ["mid", "big", "small", "tiny"]
    assert t.loc["mid", "status"] == planner.STATUS_PICK and t.loc["mid", "rank"] == 1
    assert t.loc["big", "status"] == planner.STATUS_OK and t.loc["big", "rank"] == 2
    assert t.loc["small", "status"] == planner.STATUS_SLOW and "60.0 ms > 25 ms" in t.loc["small", "reason"]
    assert t.loc["tiny", "status"] == planner.STATUS_NO_FIT and pd.isna(t.loc["tiny", "rank"])
    assert pd.isna(t.loc["tiny", "power_w"])
    assert rec.summary.startswith("Pick: mid") and "big" in rec.summary


def test_a_looser_target_picks_the_frugal_gpu():
    rec = recommend(PRED, memory_fit(GPUS, LLM, 1000, 1), max_itl_ms=100)
    assert rec.pick == "small"
    assert list(rec.table["rank"].dropna()) == [1, 2, 3]


def test_no_gpu_meets_the_target():
    rec = recommend(PRED, memory_fit(GPUS, LLM, 1000, 1), max_itl_ms=1)
    assert rec.pick is None and "fastest is big" in rec.summary
    assert set(rec.table["status"]) == {planner.STATUS_SLOW, planner.STATUS_NO_FIT}


def test_nothing_fits():
    fit = memory_fit(GPUS.iloc[[3]], LlmSize(70.0, 0.0), 1000, 1)
    rec = recommend(PRED.iloc[:0], fit, 25)
    assert rec.pick is None and "hold the model" in rec.summary


def test_near_target_flags_close_calls():
    rec = recommend(PRED, memory_fit(GPUS, LLM, 1000, 1), max_itl_ms=21)
    assert near_target(rec.table, 21, 0.10) == ["mid"]


@pytest.mark.parametrize("bad", [
    PRED.drop(columns="energy_per_token_j"),
    pd.concat([PRED, PRED.iloc[[0]]]),
    PRED.iloc[1:],  # "big" fits but has no prediction
])
def test_malformed_predictions_are_refused(bad):
    with pytest.raises((KeyError, ValueError)):
        recommend(bad, memory_fit(GPUS, LLM, 1000, 1), 25)


def test_target_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        recommend(PRED, memory_fit(GPUS, LLM, 1000, 1), 0)


def test_a_safety_margin_excludes_gpus_just_under_the_target():
    rec = recommend(PRED, memory_fit(GPUS, LLM, 1000, 1), max_itl_ms=21, margin=0.10)
    t = rec.table.set_index("gpu")
    assert rec.pick == "big" and t.loc["mid", "status"] == planner.STATUS_SLOW
    assert "safety margin" in t.loc["mid", "reason"]
    with pytest.raises(ValueError, match="margin"):
        recommend(PRED, memory_fit(GPUS, LLM, 1000, 1), 21, margin=1.0)
