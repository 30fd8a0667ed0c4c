"""Registry: the promotion rule on hand-written FIXTURE figures, then a real register in a temporary MLflow store."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from wattgpu import registry, tracking
from wattgpu.config import Registry, Replica, XgbParams
from wattgpu.registry import Figures, decide

RULE = Registry()
# FIXTURE figures (MdAPE %), not results.
CHAMP = Figures("logo", offline_mdape=4.0, server_mdape=12.0, rows_md5="aaaa")


@pytest.mark.parametrize("offline, server, promote, verdict", [
    (3.0, 11.0, True, "promoted"),          # better on both
    (6.0, 9.0, True, "promoted"),           # worse offline, better server: the mean (7.5 < 8) decides
    (4.0, 12.0, False, "kept champion"),    # a tie is not a win
    (5.0, 12.0, False, "kept champion"),    # worse
])
def test_the_mean_of_offline_and_server_mdape_decides(offline, server, promote, verdict):
    d = decide(Figures("logo", offline, server, "aaaa"), CHAMP, RULE, champion_version="3")
    assert (d.promote, d.verdict) == (promote, verdict)
    assert "champion v3" in d.reason and f"{(offline + server) / 2:.3f}" in d.reason


def test_a_minimum_improvement_can_be_required():
    better_by_half = Figures("logo", 3.5, 11.5, "aaaa")
    assert decide(better_by_half, CHAMP, RULE, "1").promote
    assert not decide(better_by_half, CHAMP, Registry(min_improvement_pp=1.0), "1").promote


def test_a_tie_that_adds_prediction_intervals_is_promoted_but_a_worse_one_is_not():
    tie = decide(Figures("logo", 4.0, 12.0, "aaaa"), CHAMP, RULE, "2", adds_intervals=True)
    assert tie.promote and tie.verdict == "promoted" and "adds the prediction intervals v2 lacks" in tie.reason
    assert not decide(Figures("logo", 4.5, 12.0, "aaaa"), CHAMP, RULE, "2", adds_intervals=True).promote


def test_no_champion_means_first_champion():
    d = decide(CHAMP, None, RULE, champion_version=None)
    assert d.promote and d.verdict == "first champion"


@pytest.mark.parametrize("other", [Figures("lopo", 1.0, 1.0, "aaaa"), Figures("logo", 1.0, 1.0, "bbbb"), None])
def test_figures_from_another_evaluation_are_not_compared(other):
    challenger = Figures("logo", 9.0, 9.0, "aaaa") if other is not None else CHAMP
    champion = other
    d = decide(challenger, champion, RULE, "2")
    assert d.promote and d.verdict == "promoted, not comparable" and "cannot be compared" in d.reason
    kept = decide(challenger, champion, Registry(promote_if_not_comparable=False), "2")
    assert not kept.promote and kept.verdict == "kept, not comparable"


def test_figures_round_trip_through_version_tags():
    assert Figures.from_tags(CHAMP.to_tags()) == CHAMP
    assert Figures.from_tags({"eval.regime": "logo"}) is None
    assert CHAMP.to_tags()["eval.score"] == "8"


def test_rows_fingerprint_sees_values_and_order():
    a = pd.DataFrame({"gpu": ["x", "y"], "power_w_per_gpu": [100.0, 200.0]})
    assert registry.rows_md5(a) == registry.rows_md5(a.copy())
    assert registry.rows_md5(a) != registry.rows_md5(a.iloc[::-1])
    assert registry.rows_md5(a) != registry.rows_md5(a.assign(power_w_per_gpu=[100.0, 201.0]))


# --- a real register: a small fit on real rows, in a temporary sqlite store -----------------------------------

@pytest.fixture(scope="module")
def power_rows(pipeline):
    """A few real rows per GPU (enough for a small fit, seconds not minutes), from the test pipeline's table."""
    from wattgpu.config import load_params
    from wattgpu.evaluation.runner import target_rows
    from wattgpu.stages.register import catalogs, training_table

    ev = load_params(pipeline / "params.yaml").evaluate
    table = training_table(pipeline, ev.source, ev.replica.dense_only, ev, catalogs(pipeline))
    return target_rows(table, "power").groupby("gpu").head(30).reset_index(drop=True)


def small_candidate(offline: float, server: float):
    from wattgpu.modeling.replica import paper_model
    from wattgpu.stages.register import Candidate

    replica = Replica(power=XgbParams(max_depth=3, n_estimators=20))
    return Candidate(paper_model("power", replica, seed=0, n_jobs=1), "test", "paper_replica", "paper_power",
                     replica.power.model_dump(), "logo", offline, server, "wattcounts_processed", True)


def test_register_twice_then_better_promotes_only_the_better(pipeline, power_rows, tmp_path, monkeypatch):
    from wattgpu.stages.register import catalogs, publish

    monkeypatch.setenv("WATTGPU_MLRUNS", str(tmp_path / "mlruns"))
    mlflow = tracking.setup("wattgpu-test")
    client = mlflow.MlflowClient()
    first = publish("power", power_rows, small_candidate(5.0, 15.0), RULE, tmp_path / "power", catalogs(pipeline), {"offline_batch": 256.0})
    assert (first["version"], first["alias"], first["decision"]) == (1, "champion", "first champion")
    meta = json.loads((tmp_path / "power" / "meta.json").read_text())
    assert meta["training_rows"] == len(power_rows) and meta["evaluation"]["score"] == 10.0

    # Two more versions of the same logged model with other FIXTURE figures on the same evaluation.
    uri = client.get_model_version("wattgpu-power", "1").source
    worse = registry.register_version(client, "wattgpu-power", uri, Figures("logo", 6.0, 15.0, first["figures"]["rows_md5"]), RULE)
    assert (worse["version"], worse["alias"], worse["decision"]) == (2, "challenger", "kept champion")
    aliases = client.get_registered_model("wattgpu-power").aliases
    assert aliases == {"champion": 1, "challenger": 2}
    v2 = client.get_model_version("wattgpu-power", "2")
    assert v2.tags["decision"] == "kept champion" and v2.tags["compared_with"] == "v1"
    assert v2.tags["eval.score"] == "10.5" and "10.500 % vs champion v1 10.000 %" in v2.description

    better = registry.register_version(client, "wattgpu-power", uri, Figures("logo", 4.0, 14.0, first["figures"]["rows_md5"]), RULE)
    assert (better["version"], better["alias"], better["decision"]) == (3, "champion", "promoted")
    assert client.get_registered_model("wattgpu-power").aliases == {"champion": 3, "challenger": 3}
    assert better["compared_with"]["version"] == 1 and better["compared_with"]["score"] == 10.0

    # The champion loads as a pyfunc model and answers in W, or rejects a bad request naming the field.
    from mlflow.exceptions import MlflowException

    from wattgpu.serving.pyfunc import EXAMPLE_REQUESTS, POWER_ONLY_EXAMPLE_REQUESTS

    model = mlflow.pyfunc.load_model("models:/wattgpu-power@champion")
    # Served alone (no ITL model beside it), the power model cannot derive a Poisson load's requests in flight:
    # it says so, naming the field, and answers once they are given.
    with pytest.raises(MlflowException) as alone:
        model.predict(pd.DataFrame(EXAMPLE_REQUESTS))
    assert json.loads(alone.value.serialize_as_json())["field"] == "concurrency"
    out = model.predict(pd.DataFrame(POWER_ONLY_EXAMPLE_REQUESTS))
    assert list(out.columns) == ["gpu", "llm", "scenario", "concurrency", "power_w", "power_w_lo", "power_w_hi", "level",
                                 "interval"]
    assert out["power_w_lo"].isna().all()  # registered without calibration folds: point predictions only
    assert out["concurrency"].iloc[1] == 8 and out["concurrency"].iloc[0] > 1  # offline: derived from the memory
    assert out["power_w"].between(20, 400).all()  # the H100 NVL's TDP is 400 W; the spec'd card's 350 W
    with pytest.raises(MlflowException) as err:
        model.predict(pd.DataFrame([{**EXAMPLE_REQUESTS[0], "gpu": "RTX 9999"}]))
    assert err.value.get_http_status_code() == 400
    body = json.loads(err.value.serialize_as_json())
    assert body["field"] == "gpu" and "unknown GPU 'RTX 9999'" in body["detail"] and "Traceback" not in body["message"]


def test_a_challenger_that_is_not_promoted_leaves_the_champions_folder(pipeline, power_rows, tmp_path, monkeypatch):
    from wattgpu.stages.register import catalogs, publish

    monkeypatch.setenv("WATTGPU_MLRUNS", str(tmp_path / "mlruns"))
    tracking.setup("wattgpu-test")
    folder = tmp_path / "power"
    first = publish("power", power_rows, small_candidate(5.0, 15.0), RULE, folder, catalogs(pipeline), {"offline_batch": 256.0})
    champion_bytes = (folder / "estimator.joblib").read_bytes()
    # Other settings (so another fit), a worse FIXTURE score on the same rows: a challenger; the folder stays.
    other = small_candidate(6.0, 16.0)
    other.estimator.regressor.set_params(max_depth=2)
    other.hyperparameters = {**other.hyperparameters, "max_depth": 2}
    worse = publish("power", power_rows, other, RULE, folder, catalogs(pipeline), {"offline_batch": 256.0})
    assert (worse["version"], worse["alias"], worse["champion_version"]) == (2, "challenger", first["version"])
    assert (folder / "estimator.joblib").read_bytes() == champion_bytes
    assert json.loads((folder / "meta.json").read_text())["hyperparameters"]["max_depth"] == 3
