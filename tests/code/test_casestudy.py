"""Case-study plumbing on hand-written FIXTURE prediction rows (not measurements, never reported)."""

from __future__ import annotations

import pandas as pd
import pytest

from wattgpu.errors import WattgpuError
from wattgpu.evaluation import casestudy

COLUMNS = casestudy.PREDICTION_COLUMNS


def _fixture(models: list[str], y_pred: float) -> pd.DataFrame:
    return pd.DataFrame([["fixture", "c1", 0, "GPU-A", "llm-x", "server_low", "power", m, 100.0, y_pred]
                         for m in models], columns=COLUMNS)


@pytest.fixture
def root(tmp_path):
    search = tmp_path / "reports/search/logo"
    evaluate = tmp_path / "reports/evaluate/logo"
    search.mkdir(parents=True)
    evaluate.mkdir(parents=True)
    searched = _fixture(["physics", "nested_selection", "paper_replica", "tdp"], 110.0)
    searched.to_csv(search / "predictions.csv", index=False)
    _fixture(["paper_replica", "load_scaled_tdp"], 90.0).to_csv(evaluate / "predictions.csv", index=False)
    return tmp_path


def test_a_model_in_two_files_comes_from_the_first_and_baselines_are_left_out(root):
    pred = casestudy.load_logo_predictions(root)
    assert sorted(pred["model"]) == ["nested_selection", "paper_replica", "physics"]
    assert pred.loc[pred["model"] == "paper_replica", "y_pred"].tolist() == [110.0]  # the search file's


def test_choose_models_defaults_keeps_order_and_names_unknown_ones(root):
    pred = casestudy.load_logo_predictions(root)
    assert list(casestudy.choose_models(pred, None)["model"]) == ["nested_selection", "paper_replica"]
    assert set(casestudy.choose_models(pred, ["all"])["model"]) == {"physics", "nested_selection", "paper_replica"}
    assert list(casestudy.choose_models(pred, ["paper_replica", "physics"])["model"].cat.categories) == [
        "paper_replica", "physics"]
    with pytest.raises(WattgpuError, match="'knn'.*available: physics"):
        casestudy.choose_models(pred, ["knn"])
