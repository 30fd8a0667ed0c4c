"""Metrics on hand-written FIXTURE predictions with known answers."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import kendalltau

from wattgpu.evaluation import metrics
from wattgpu.evaluation.leaderboard import REPLICA


def preds(y_true, y_pred, gpus, llm="m", scen="offline"):
    return pd.DataFrame({"y_true": y_true, "y_pred": y_pred, "gpu": gpus, "llm": llm, "scenario_label": scen})


def test_mdape_and_mape():
    df = preds([100, 100, 100], [110, 95, 150], ["a", "b", "c"])
    assert metrics.mdape(df) == pytest.approx(10.0)
    assert metrics.mape(df) == pytest.approx((10 + 5 + 50) / 3)


def test_perfect_and_reversed_gpu_ranking():
    good = preds([1, 2, 3], [10, 20, 30], ["a", "b", "c"])
    bad = preds([1, 2, 3], [30, 20, 10], ["a", "b", "c"])
    assert metrics.kendall(good, "gpu") == pytest.approx(1.0)
    assert metrics.kendall(bad, "gpu") == pytest.approx(-1.0)
    assert metrics.top_k(good, 1) == 1.0 and metrics.top_k(bad, 1) == 0.0 and metrics.top_k(bad, 3) == 1.0


# few distinct values: ties in x, in y and in both are common
_VALUES = st.sampled_from([0.5, 1.0, 1.0 + 1e-12, 2.0, 3.25, 40.0, 1e6])


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 40).flatmap(lambda n: st.tuples(st.lists(_VALUES, min_size=n, max_size=n),
                                                      st.lists(_VALUES, min_size=n, max_size=n))))
def test_tau_b_is_scipys_kendall_tau_to_the_last_bit(xy):
    x, y = (np.array(v) for v in xy)
    ours, scipys = metrics.tau_b(x, y), float(kendalltau(x, y).statistic)
    assert (np.isnan(ours) and np.isnan(scipys)) or ours == scipys


def test_groups_with_absent_keys_and_ties_rank_as_the_pandas_groupby_does():
    # two LLMs (one label absent) x two loads; within each, GPUs a-c with tied predictions: the lowest measured GPU
    # and the lowest predicted ones (ties kept in input order by a stable sort of three values)
    df = preds([1, 2, 3, 3, 2, 1, 5, 5, 6], [1, 1, 2, 2, 1, 1, 7, 7, 7], list("abcabcabc"),
               llm=["m", "m", "m", None, None, None, "m", "m", "m"],
               scen=["offline"] * 6 + ["server_low"] * 3)
    assert metrics.top_k(df, 1) == pytest.approx(2 / 3)  # (m, offline): a; (absent, offline): b; (m, server): a, b tie
    assert metrics.kendall(df, "gpu") == pytest.approx(np.mean([
        kendalltau([1, 2, 3], [1, 1, 2]).statistic, kendalltau([3, 2, 1], [2, 1, 1]).statistic]))  # server: constant


def test_replicates_are_averaged_before_ranking():
    df = preds([1, 1.2, 2, 3], [1, 5, 2.5, 3.5], ["a", "a", "b", "c"])
    # means: a (1.1, 3.0), b (2, 2.5), c (3, 3.5): predicted order b < a < c, measured a < b < c
    assert metrics.kendall(df, "gpu") == pytest.approx(1 / 3)


def test_by_scenario_groups_server_loads():
    df = pd.concat([
        preds([1, 2], [1, 2], ["a", "b"], scen="server_low"),
        preds([1, 2], [1.5, 2], ["a", "b"], scen="server_high"),
        preds([1, 2], [1, 2], ["a", "b"], scen="offline"),
    ])
    out = metrics.by_scenario(df)
    assert set(out) == {"offline", "server", "server_low", "server_high"}
    assert out["server"]["n_rows"] == 4 and out["server_high"]["mdape"] == pytest.approx(25.0)
    assert np.isnan(metrics.pearson(preds([1, 1], [1, 2], ["a", "b"])))


def test_a_missing_prediction_is_an_error_naming_the_model_and_the_rows():
    df = preds([100, 100, 100], [110, np.nan, np.nan], ["a", "b", "c"]).assign(model="xgboost", target="power")
    for metric in (metrics.mdape, metrics.mape, metrics.pearson, metrics.summary, metrics.by_scenario,
                   lambda d: metrics.kendall(d, "gpu")):
        with pytest.raises(metrics.MissingPredictions, match=r"model 'xgboost' \(power\): 2 without a prediction of 3"):
            metric(df)
    with pytest.raises(metrics.MissingPredictions, match="1 without a measured value"):
        metrics.mdape(preds([100, np.nan], [100, 100], ["a", "b"]))


def test_a_model_declared_partial_is_scored_on_the_rows_it_predicts_and_says_how_many_it_left_out():
    df = preds([100, 100, 100], [110, np.nan, 130], ["a", "b", "c"]).assign(model=REPLICA)
    out = metrics.summary(df)
    assert out["mdape"] == pytest.approx(20.0) and (out["n_rows"], out["n_unpredicted"]) == (2, 1)
    full = metrics.summary(preds([100, 100], [110, 130], ["a", "c"]))
    assert full["n_unpredicted"] == 0 and full["mdape"] == out["mdape"]
