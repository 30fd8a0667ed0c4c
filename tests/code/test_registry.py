"""Registry: the promotion rule on hand-written FIXTURE per-fold scores, then the gate for real: real fits on real
rows in a temporary MLflow store, across a data change and across a code change of the same configuration."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from wattgpu import registry, tracking
from wattgpu.config import Registry
from wattgpu.evaluation.cv import Fold
from wattgpu.registry import Comparison, Configuration, Decision, Evaluation, Incumbent, decide

RULE = Registry()  # min_gain_pp 0.1, se_multiple 2
FOLDS = ("A100", "H100", "L4", "T4")
# FIXTURE per-fold scores (geometric mean of MdAPE %), not results.
CHAMP = dict(zip(FOLDS, (10.0, 12.0, 8.0, 14.0)))


def shifted(*deltas: float) -> dict[str, float]:
    return {f: CHAMP[f] + d for f, d in zip(FOLDS, deltas)}


def test_the_paired_statistics_are_the_textbook_ones():
    c = Comparison(shifted(-1.0, -2.0, -1.5, -0.5), CHAMP)
    d = np.array([-1.0, -2.0, -1.5, -0.5])
    assert c.mean_difference == pytest.approx(d.mean())
    assert c.standard_error == pytest.approx(d.std(ddof=1) / 2)
    assert c.margin(RULE) == pytest.approx(max(0.1, 2 * d.std(ddof=1) / 2))
    assert c.wilcoxon_p == pytest.approx(1 / 16)  # every fold better: the smallest one-sided p with 4 pairs
    assert c.mean("challenger") == pytest.approx(np.mean(list(CHAMP.values())) - 1.25)
    ev = c.evidence(RULE)
    assert ev["folds"] == 4 and ev["mean_difference"] == -1.25 and ev["wilcoxon_p_less"] == 0.0625


@pytest.mark.parametrize("deltas, promote", [
    ((-1.0, -2.0, -1.5, -0.5), True),     # better in every fold, by far more than the noise
    ((-3.0, 2.5, -2.0, 1.0), False),      # better on average (-0.375) but the folds disagree: within the noise
    ((-0.05, -0.05, -0.05, -0.05), False),  # consistently better, by less than min_gain_pp
    ((0.0, 0.0, 0.0, 0.0), False),        # a tie is not a win
    ((1.0, 2.0, 1.0, 0.5), False),        # worse
])
def test_a_challenger_is_promoted_only_when_better_by_more_than_the_noise(deltas, promote):
    d = decide(Comparison(shifted(*deltas), CHAMP), RULE, champion_version="3")
    assert d.promote == promote and d.verdict == ("promoted" if promote else "kept champion")
    assert "champion v3" in d.reason and "4 paired folds" in d.reason


def test_the_margin_follows_the_settings():
    noisy = Comparison(shifted(-3.0, 2.5, -2.0, 1.0), CHAMP)
    assert decide(noisy, Registry(min_gain_pp=0.1, se_multiple=0.0), "1").promote  # the noise ignored: mean decides
    small = Comparison(shifted(-0.05, -0.05, -0.05, -0.05), CHAMP)
    assert decide(small, Registry(min_gain_pp=0.0, se_multiple=2.0), "1").promote  # no spread: any gain counts
    assert not decide(small, Registry(min_gain_pp=0.06, se_multiple=0.0), "1").promote


def test_one_fold_cannot_measure_the_noise_so_it_never_promotes():
    one = Comparison({"A100": 1.0}, {"A100": 9.0})
    assert math.isinf(one.standard_error) and one.evidence(RULE)["standard_error"] is None
    assert not decide(one, RULE, "1").promote


def test_adding_intervals_promotes_a_challenger_no_worse_within_the_noise_only():
    tie = decide(Comparison(shifted(0.2, -0.3, 0.1, -0.1), CHAMP), RULE, "2", adds_intervals=True)
    assert tie.promote and tie.verdict == "promoted" and "adds the prediction intervals v2 lacks" in tie.reason
    worse = Comparison(shifted(1.0, 2.0, 1.0, 1.5), CHAMP)
    assert not decide(worse, RULE, "2", adds_intervals=True).promote


def test_the_first_champion_is_the_only_promotion_without_a_comparison():
    first = decide(None, RULE, champion_version=None)
    assert first.promote and first.verdict == "first champion" and first.comparison is None
    # with a champion, every way to promote needs paired scores: without them decide raises, whatever the case
    for case in ({}, {"same_configuration": True}, {"adds_intervals": True}):
        for missing in (None, Comparison({}, {})):
            with pytest.raises(ValueError, match="only on a comparison"):
                decide(missing, RULE, champion_version="4", **case)
    # and no promoting Decision can be made without one, by decide or by hand
    for verdict in ("promoted", "refreshed"):
        with pytest.raises(ValueError, match="only on a comparison"):
            Decision(True, verdict, "by hand")
    assert not Decision(False, "kept champion", "by hand").promote
    assert Decision(True, "promoted", "by hand", Comparison(shifted(-1, -1, -1, -1), CHAMP)).promote


def test_the_identical_configuration_code_and_evaluation_is_kept_without_a_comparison():
    same = decide(None, RULE, champion_version="4", identical=True)
    assert not same.promote and same.verdict == "kept champion, identical configuration" and "v4" in same.reason
    # identical wins over scores that would promote: nothing is compared, nothing promoted
    assert not decide(Comparison(shifted(-5, -5, -5, -5), CHAMP), RULE, "4", identical=True).promote


@pytest.mark.parametrize("deltas, refreshed", [
    ((0.0, 0.0, 0.0, 0.0), True),          # a tie (the same fits): today's code replaces the champion
    ((0.05, 0.05, 0.05, 0.05), True),      # worse by less than min_gain_pp: within the margin
    ((3.0, -2.5, 2.0, -1.0), True),        # worse on average (+0.375) but within the noise between folds
    ((-1.0, -2.0, -1.5, -0.5), True),      # better: refreshed too (not "promoted": the configuration is the same)
    ((0.15, 0.15, 0.15, 0.15), False),     # consistently worse by more than min_gain_pp (no spread)
    ((1.0, 2.0, 1.0, 0.5), False),         # worse in every fold
])
def test_the_same_configuration_with_other_code_is_refreshed_only_when_no_worse(deltas, refreshed):
    d = decide(Comparison(shifted(*deltas), CHAMP), RULE, "6", same_configuration=True)
    assert d.promote == refreshed and d.verdict == ("refreshed" if refreshed else "kept champion")
    assert "4 paired folds" in d.reason and "v6's configuration fitted by today's code" in d.reason
    if not refreshed:
        assert "worse by more than the margin" in d.reason


def test_scores_on_other_folds_are_not_paired():
    with pytest.raises(ValueError, match="unpaired folds"):
        Comparison({"A100": 1.0, "H100": 2.0}, {"A100": 1.0, "L4": 2.0})


EVAL = Evaluation("logo", rows_md5="aaaa", folds_md5="ffff", profile="small", n_trials=4, code="c0de")


def test_evaluations_round_trip_through_version_tags_and_name_what_differs():
    assert Evaluation.from_tags(EVAL.to_tags()) == EVAL
    assert Evaluation.from_tags({"eval.regime": "logo"}) is None
    other = Evaluation("logo", "bbbb", "ffff", "large", 40, "c0de")
    assert EVAL.differences(other) == ["rows_md5", "profile", "n_trials"]
    assert EVAL.differences(EVAL) == [] and EVAL.differences(None) == ["no recorded evaluation"]


def test_recorded_scores_stand_only_on_the_same_rows_and_folds():
    config = Configuration("power", "xgboost", "workload", {}, {}, None, False)
    champ = Incumbent("2", config, EVAL, False, dict(CHAMP))
    for other_search_or_code in (replace(EVAL, code="new"), replace(EVAL, profile="large", n_trials=40), EVAL):
        assert champ.scores_on(other_search_or_code) == CHAMP
    for other_data in (replace(EVAL, rows_md5="bbbb"), replace(EVAL, folds_md5="gggg"), replace(EVAL, regime="lolo")):
        assert champ.scores_on(other_data) is None
    assert Incumbent("2", config, None, False, dict(CHAMP)).scores_on(EVAL) is None  # no recorded evaluation
    assert Incumbent("2", config, EVAL, False, None).scores_on(EVAL) is None  # registered before scores were recorded
    record = {"challenger": {"own_fold_scores": CHAMP, "fold_scores": {"A100": 1.0}}}
    assert registry.recorded_scores({registry.RECORD_TAG: json.dumps(record)}) == CHAMP
    assert registry.recorded_scores({registry.RECORD_TAG: json.dumps({"challenger": {}})}) is None
    assert registry.recorded_scores({}) is None


def test_a_configuration_is_identified_by_everything_that_is_fitted():
    base = Configuration("power", "xgboost", "workload", {"n_estimators": 10}, {"offline_batch": 256.0}, None, False)
    assert Configuration.from_json(base.to_json()) == base and Configuration.from_json(base.to_json()).sha == base.sha
    for change in ({"hyperparameters": {"n_estimators": 11}}, {"feature_set": "physics"}, {"dense_only": True},
                   {"physics": {"offline_batch": 128.0}}, {"source": "mlenergy_v2"}):
        assert replace(base, **change).sha != base.sha, change


def test_fingerprints_see_values_order_and_folds():
    a = pd.DataFrame({"gpu": ["x", "y"], "power_w_per_gpu": [100.0, 200.0]})
    assert registry.rows_md5(a) == registry.rows_md5(a.copy())
    assert registry.rows_md5(a) != registry.rows_md5(a.iloc[::-1])
    assert registry.rows_md5(a) != registry.rows_md5(a.assign(power_w_per_gpu=[100.0, 201.0]))
    f = [Fold("x", np.array([1]), np.array([0])), Fold("y", np.array([0]), np.array([1]))]
    assert registry.folds_md5(f) == registry.folds_md5(list(f))
    assert registry.folds_md5(f) != registry.folds_md5(f[::-1])
    assert registry.folds_md5(f) != registry.folds_md5([f[0], Fold("y", np.array([0]), np.array([1, 2]))])


# --- the gate for real: small real fits on real rows, a temporary sqlite store ------------------------------------

# Deliberately weak, medium and strong XGBoost configurations on the same features (FIXTURE settings, not tuned).
WEAK = {"n_estimators": 2, "max_depth": 1, "learning_rate": 0.05, "reg_lambda": 300.0}
MEDIUM = {"n_estimators": 10, "max_depth": 2, "learning_rate": 0.1, "reg_lambda": 10.0}
STRONG = {"n_estimators": 120, "max_depth": 4, "learning_rate": 0.1, "reg_lambda": 1.0}


@pytest.fixture(scope="module")
def setting(ingested):
    """The test pipeline's params, with LOGO's outer folds one per GPU as in `make run` (the test pipeline groups
    them), and a small real power table: the first 40 rows per GPU of one source."""
    from wattgpu.config import Regime, load_params
    from wattgpu.evaluation.runner import target_rows
    from wattgpu.stages.register import catalogs, training_table

    params = load_params(ingested / "params.yaml")
    search = params.search.model_copy(update={"regimes": {**params.search.regimes, "logo": Regime(kind="logo")}})
    params = params.model_copy(update={"search": search})
    ev = params.evaluate
    cats = catalogs(ingested)
    table = target_rows(training_table(ingested, ev.source, False, ev, cats), "power")
    return params, cats, table.groupby("gpu").head(40).reset_index(drop=True)


def candidate(hp: dict, params, nested: float = 5.0):
    from wattgpu.registry import Candidate

    config = Configuration("power", "xgboost", "workload", hp,
                           {"offline_batch": params.evaluate.roofline_offline_batch,
                            "load_rho": dict(params.evaluate.load_rho)}, None, False)
    return Candidate("test", config, "logo", nested, nested)  # FIXTURE nested figures: recorded, never compared


def itl_configuration(params) -> Configuration:
    """The ITL configuration served beside the power model: it solves the Poisson rows' requests in flight on each
    fold (FIXTURE settings: small boosted trees on the step-time features)."""
    return Configuration("itl", "xgboost", "workload", MEDIUM,
                         {"offline_batch": params.evaluate.roofline_offline_batch}, None, False)


CODE = "code-1"  # FIXTURE code fingerprints: the stage's own (stages.register.code) changes with any edit


@pytest.fixture()
def gated(setting, tmp_path, monkeypatch):
    """register(hp, rows, code=CODE, rule=RULE): publish a challenger to a fresh MLflow store through the gate, as
    the register stage does; the store's client; the champion's folder."""
    from wattgpu.registry import gate
    from wattgpu.stages.register import publish

    params, cats, _ = setting
    monkeypatch.setenv("WATTGPU_MLRUNS", str(tmp_path / "mlruns"))
    client = tracking.setup("wattgpu-test").MlflowClient()
    folder = tmp_path / "power"
    training = {"offline_batch": params.evaluate.roofline_offline_batch}

    itl = itl_configuration(params)

    def register(hp: dict, rows: pd.DataFrame, code: str = CODE, rule: Registry = RULE) -> dict:
        cand = candidate(hp, params)
        check = gate("power", rows, cand, params, code, itl)
        return publish("power", rows, cand, rule, folder, cats, training, check)

    return register, client, folder


def folder_meta(folder) -> dict:
    return json.loads((folder / "meta.json").read_text())


def test_the_gate_across_a_data_change(setting, gated):
    register, client, folder = gated
    table = setting[2]
    n_gpus = table["gpu"].nunique()

    old = table.groupby("gpu").head(30).reset_index(drop=True)  # the data before: fewer rows per GPU
    first = register(MEDIUM, old)
    assert (first["version"], first["decision"], first["champion"], first["test"]) == (1, "first champion", None, None)
    assert len(first["challenger"]["own_fold_scores"]) == n_gpus  # its own scores, recorded for a later comparison

    # New data (10 more rows per GPU): the champion's recorded evaluation is not this one, so it is scored again.
    worse = register(WEAK, table)
    assert (worse["version"], worse["alias"], worse["decision"], worse["champion_version"]) == \
        (2, "challenger", "kept champion", 1)
    assert {"rows_md5", "folds_md5"} <= set(worse["champion"]["differs_in"])
    assert worse["champion"]["configuration"]["hyperparameters"] == MEDIUM
    assert worse["champion"]["fold_scores_from"] == "refitted by today's code"
    assert list(worse["challenger"]["fold_scores"]) == list(worse["champion"]["fold_scores"])
    assert len(worse["challenger"]["fold_scores"]) == worse["test"]["folds"] == n_gpus  # LOGO: one fold per GPU
    assert worse["test"]["mean_difference"] > worse["test"]["margin"] > 0  # refused: worse by more than the noise
    assert folder_meta(folder)["configuration"]["hyperparameters"] == MEDIUM  # the champion's folder stays
    assert client.get_registered_model("wattgpu-power").aliases == {"champion": 1, "challenger": 2}

    better = register(STRONG, table)
    assert (better["version"], better["alias"], better["decision"]) == (3, "champion", "promoted")
    assert better["test"]["mean_difference"] < -better["test"]["margin"] < 0
    # The champion was scored again on this evaluation by the same procedure: the same MEDIUM figures as before.
    assert better["champion"]["fold_scores"] == worse["champion"]["fold_scores"]
    assert folder_meta(folder)["configuration"]["hyperparameters"] == STRONG
    v3 = client.get_model_version("wattgpu-power", "3")
    assert v3.tags["decision"] == "promoted" and v3.tags["compared_with"] == "v1"
    assert json.loads(v3.tags[registry.RECORD_TAG]) == better and v3.description.startswith("promoted: ")
    assert float(v3.tags["decision.mean_difference"]) == better["test"]["mean_difference"]

    # Run again on the same inputs: the same decision, nothing registered. Under another rule: decided again, and
    # the champion has this configuration, code and evaluation: kept without refits, its recorded scores carried over.
    assert register(STRONG, table) == better
    assert len(client.search_model_versions("name = 'wattgpu-power'")) == 3
    strict = register(STRONG, table, rule=Registry(min_gain_pp=1000.0))
    assert (strict["version"], strict["decision"]) == (4, "kept champion, identical configuration")
    assert strict["test"] is None and strict["challenger"]["fold_scores"] is None  # nothing fitted, nothing compared
    assert strict["challenger"]["own_fold_scores"] == better["challenger"]["own_fold_scores"]

    # Another data change, the same configuration: compared all the same, the champion's configuration refitted by
    # today's code on the new folds (its recorded scores are on other rows); no worse, so today's fit replaces it.
    fewer = table.groupby("gpu").head(35).reset_index(drop=True)
    same = register(STRONG, fewer)
    assert (same["version"], same["decision"], same["champion_version"]) == (5, "refreshed", 5)
    assert same["champion"]["fold_scores_from"] == "refitted by today's code"
    assert same["test"]["folds"] == n_gpus and same["test"]["mean_difference"] == 0.0  # the same fits: a tie
    assert same["champion"]["fold_scores"] == same["challenger"]["fold_scores"] != better["challenger"]["fold_scores"]
    assert client.get_registered_model("wattgpu-power").aliases == {"champion": 5, "challenger": 5}
    assert folder_meta(folder)["training_rows"] == len(fewer)


def test_a_code_change_is_compared_on_the_champions_recorded_scores(setting, gated, monkeypatch):
    register, client, folder = gated
    table = setting[2]
    n_gpus = table["gpu"].nunique()

    first = register(MEDIUM, table, code="code-1")
    recorded = first["challenger"]["own_fold_scores"]
    assert first["decision"] == "first champion" and len(recorded) == n_gpus

    # Other code, the same configuration, rows and folds: the champion's recorded scores against fresh fits.
    refreshed = register(MEDIUM, table, code="code-2")
    assert (refreshed["version"], refreshed["decision"], refreshed["alias"]) == (2, "refreshed", "champion")
    assert refreshed["champion"]["differs_in"] == ["code"]
    assert refreshed["champion"]["fold_scores_from"] == "recorded on v1"
    assert refreshed["champion"]["fold_scores"] == recorded and refreshed["test"]["folds"] == n_gpus
    assert refreshed["test"]["mean_difference"] == 0.0  # this "new code" fits exactly as before
    assert folder_meta(folder)["evaluation"]["code"] == "code-2"

    # A code change that fits the same configuration worse (here: every XGBoost fit stops after 2 trees): refused on
    # the champion's recorded scores (refitting the champion with today's code would have hidden it in a tie).
    real = registry.make_estimator
    monkeypatch.setattr(registry, "make_estimator",
                        lambda algorithm, target, features, hp, **kw: real(algorithm, target, features,
                                                                             {**hp, "n_estimators": 2}, **kw))
    regressed = register(MEDIUM, table, code="code-3")
    assert (regressed["version"], regressed["decision"], regressed["champion_version"]) == (3, "kept champion", 2)
    assert regressed["champion"]["fold_scores_from"] == "recorded on v2"
    assert regressed["champion"]["fold_scores"] == recorded
    assert regressed["test"]["mean_difference"] > regressed["test"]["margin"] > 0
    assert "worse by more than the margin" in regressed["reason"]
    assert folder_meta(folder)["evaluation"]["code"] == "code-2"  # the champion's folder put back
    assert client.get_registered_model("wattgpu-power").aliases == {"champion": 2, "challenger": 3}


def test_the_champion_loads_as_a_pyfunc_model_and_rejects_a_bad_request(setting, tmp_path, monkeypatch):
    from mlflow.exceptions import MlflowException

    from wattgpu.registry import gate
    from wattgpu.serving.pyfunc import EXAMPLE_REQUESTS, POWER_ONLY_EXAMPLE_REQUESTS
    from wattgpu.stages.register import publish

    params, cats, table = setting
    monkeypatch.setenv("WATTGPU_MLRUNS", str(tmp_path / "mlruns"))
    mlflow = tracking.setup("wattgpu-test")
    cand = candidate(MEDIUM, params)
    publish("power", table, cand, RULE, tmp_path / "power", cats, {"offline_batch": 256.0},
            gate("power", table, cand, params, CODE, itl_configuration(params)))
    model = mlflow.pyfunc.load_model("models:/wattgpu-power@champion")
    # Served alone (no ITL model beside it), the power model cannot derive a Poisson load's requests in flight:
    # it says so, naming the field, and answers once they are given.
    with pytest.raises(MlflowException) as alone:
        model.predict(pd.DataFrame(EXAMPLE_REQUESTS))
    assert json.loads(alone.value.serialize_as_json())["field"] == "concurrency"
    out = model.predict(pd.DataFrame(POWER_ONLY_EXAMPLE_REQUESTS))
    assert {"gpu", "llm", "scenario", "concurrency", "power_w", "power_w_lo", "power_w_hi"} <= set(out.columns)
    assert out["power_w_lo"].isna().all()  # registered without calibration folds: point predictions only
    assert out["concurrency"].iloc[1] == 8 and out["concurrency"].iloc[0] > 1  # offline: derived from the memory
    assert out["power_w"].between(20, 400).all()  # the H100 NVL's TDP is 400 W; the spec'd card's 350 W
    with pytest.raises(MlflowException) as err:
        model.predict(pd.DataFrame([{**EXAMPLE_REQUESTS[0], "gpu": "RTX 9999"}]))
    assert err.value.get_http_status_code() == 400
    body = json.loads(err.value.serialize_as_json())
    assert body["field"] == "gpu" and "unknown GPU 'RTX 9999'" in body["detail"] and "Traceback" not in body["message"]


def test_the_served_champions_are_the_names_params_yaml_registers(tmp_path, monkeypatch):
    """`make serve` (serving.app) serves the registered names of the project's params.yaml, not built-in ones."""
    from tests.conftest import ROOT
    from wattgpu.serving.app import champion_uris

    text = (ROOT / "params.yaml").read_text()
    assert "names: {power: wattgpu-power, itl: wattgpu-itl}" in text
    (tmp_path / "params.yaml").write_text(text.replace("names: {power: wattgpu-power, itl: wattgpu-itl}",
                                                       "names: {power: site-power, itl: site-itl}"))
    monkeypatch.setenv("WATTGPU_ROOT", str(tmp_path))
    assert champion_uris(alias="staging") == {"power": "models:/site-power@staging", "itl": "models:/site-itl@staging"}
    monkeypatch.setenv("WATTGPU_ROOT", str(tmp_path / "elsewhere"))  # no params.yaml: the defaults
    assert champion_uris() == {"power": "models:/wattgpu-power@champion", "itl": "models:/wattgpu-itl@champion"}


def test_the_registered_bands_score_a_poisson_row_at_the_requests_in_flight_its_fold_solves(setting):
    """The champion's calibration (registry.Gate.calibration, on register's calibration folds): a held-out Poisson
    row is predicted at the requests in flight that an ITL model fitted on the same fold's rows solves from its rate,
    not at those Little's law derives from its measured latency; a row with a set batch is predicted as it is."""
    from wattgpu.evaluation.cv import fit_fold
    from wattgpu.modeling.predictor import served_predictions
    from wattgpu.registry import _fit_solver, gate
    from wattgpu.stages.register import calibration_folds

    params, _, rows = setting
    config = candidate(MEDIUM, params).configuration
    check = gate("power", rows, candidate(MEDIUM, params), params, CODE, itl_configuration(params))
    folds = calibration_folds(rows, params)
    cal = check.calibration(config, folds)
    served, measured, poisson = [], [], []
    for fold in folds:
        model = fit_fold(config.estimator(check.seed, check.n_jobs), rows, fold.train, check.step_rows)
        itl = _fit_solver(rows, check.itl, fold.train, check.seed, check.n_jobs, check.step_rows)
        test = rows.iloc[fold.test]
        served.append(served_predictions(test, {"itl": itl, "power": model})[1]["power"])
        measured.append(np.asarray(model.predict(test), dtype=float))
        poisson.append(test["request_rate_per_s"].notna().to_numpy())
    y = np.concatenate([rows["power_w_per_gpu"].to_numpy(dtype=float)[f.test] for f in folds])
    expected, at_measured, poisson = (np.log(y) - np.log(np.concatenate(served)),
                                      np.log(y) - np.log(np.concatenate(measured)), np.concatenate(poisson))
    assert poisson.any() and (~poisson).any()
    np.testing.assert_allclose(cal.scores, expected)
    assert np.abs(expected[poisson] - at_measured[poisson]).max() > 1e-3  # the solver's share of the error is in it
    np.testing.assert_allclose(expected[~poisson], at_measured[~poisson])
