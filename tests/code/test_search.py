"""Nested search on a FIXTURE grid: 4 made-up GPUs x 5 made-up LLMs x 3 scenarios x 2 replicates, built here.

The rows are synthetic (power = a load share of TDP, ITL = a multiple of the roofline, with seeded noise); they
are not measurements and only exercise the code paths.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import parametrize_with_checks

from wattgpu import paths
from wattgpu.config import AlgorithmSpace, Regime, Search, load_params
from wattgpu.evaluation.metrics import score_groups
from wattgpu.features import FEATURE_SETS, PHYSICS, engineer
from wattgpu.modeling.algorithms import ALGORITHMS, best_record, build_estimator, make_estimator
from wattgpu.modeling.predictor import served_predictions
from wattgpu.modeling.targets import TARGETS, physics_target
from wattgpu.modeling.trendboost import TrendBoost
from wattgpu.search.nested import (
    FoldOutcome,
    Settings,
    StudyTask,
    all_rows_plan,
    assert_inner_inside,
    inner_folds,
    nested_plan,
    outer_bounds,
    run_study,
    run_task,
    score,
    select,
)

RHO = {"offline": 0.9, "server_low": 0.2, "server_high": 0.6}
FIXTURE_GPUS = {  # name: (TDP W, memory GB, bandwidth GB/s, FP16 TFLOPS, memory type, year)
    "gpu-a": (70, 16, 300, 65, "GDDR6", 2018),
    "gpu-b": (300, 32, 900, 125, "HBM2", 2018),
    "gpu-c": (400, 80, 2000, 312, "HBM2e", 2021),
    "gpu-d": (700, 141, 4800, 990, "HBM3e", 2024),
}
FIXTURE_LLMS = {"llm-1": (0.5, 24), "llm-2": (1.5, 28), "llm-3": (3.0, 32), "llm-4": (7.0, 32), "llm-5": (8.0, 40)}
SCENARIOS = {"offline": ("offline", np.nan), "server_low": ("server", 0.017), "server_high": ("server", 0.33)}


def fixture_rows(seed: int = 0) -> pd.DataFrame:
    """FIXTURE rows with engineered and physics features and both targets."""
    rng = np.random.default_rng(seed)
    records = []
    for (g, (tdp, mem, bw, tf, mtype, year)), (m, (params, layers)), (label, (scen, rate)), rep in itertools.product(
            FIXTURE_GPUS.items(), FIXTURE_LLMS.items(), SCENARIOS.items(), range(2)):
        records.append({
            "source": "fixture", "config_id": f"{g}|{m}|{label}", "replicate_id": rep, "gpu": g, "llm": m,
            "scenario": scen, "scenario_label": label, "request_rate_per_s": rate, "n_gpus": 1,
            "prompt_tokens_mean": 14.0, "output_tokens_mean": 200.0 + 10 * rep,
            "gpu_tdp_w": tdp, "gpu_memory_gb": mem, "gpu_memory_type": mtype, "gpu_memory_bandwidth_gb_s": bw,
            "gpu_base_clock_mhz": 1000.0, "gpu_boost_clock_mhz": 1500.0, "gpu_fp16_tensor_tflops": tf,
            "gpu_release_year": year, "llm_total_params_b": params, "llm_active_params_b": params,
            "llm_num_layers": layers, "llm_hidden_size": 128 * layers, "llm_num_attention_heads": 16,
            "llm_num_kv_heads": 8, "llm_head_dim": 128, "llm_family": "fixture", "llm_num_experts": np.nan,
            "llm_experts_per_token": np.nan, "gpu_vendor": "NVIDIA", "lab": "fixture",
            # the workload vocabulary: 256 in flight offline, a fraction of one request at the Poisson loads
            "concurrency": 256.0 if scen == "offline" else rate * 10, "tensor_parallel": 1, "pipeline_parallel": 1,
            "precision": "bf16", "engine": "vllm", "engine_version": "0.14.1",
        })
    rows = engineer(pd.DataFrame(records), offline_batch=256)
    noise = rng.normal(0, 0.03, len(rows))
    rows["power_w_per_gpu"] = rows["gpu_tdp_w"] * rows["scenario_label"].map(RHO) * (1 + noise)
    rows["itl_s"] = rows["physics_itl_s"] * (2.0 + rows["llm_num_layers"] / 40) * (1 + noise)
    return rows


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    return fixture_rows()


@pytest.fixture(scope="module")
def search(root) -> Search:
    """params.yaml's search with the Watt-Counts-only candidates' spaces added (tests/fixtures)."""
    import yaml

    current = load_params(root / "params.yaml").search.model_dump(mode="json")
    extra = yaml.safe_load((root / "tests/fixtures/wattcounts_search_spaces.yaml").read_text())["algorithms"]
    return Search.model_validate({**current, "algorithms": {**current["algorithms"], **extra}})


def test_logo_nested_plan_keeps_the_outer_test_gpu_out_of_the_inner_search(rows):
    plans = nested_plan(rows, Regime(kind="logo"), inner_splits=2, seed=1)
    assert len(plans) == len(FIXTURE_GPUS)
    for plan in plans:
        held_out = set(rows["gpu"].iloc[plan.outer.test])
        assert len(held_out) == 1
        outer_train = set(plan.outer.train.tolist())
        for f in plan.inner:
            for idx in (f.train, f.test):
                assert set(idx.tolist()) <= outer_train
                assert not held_out & set(rows["gpu"].iloc[idx])
            assert not set(rows["gpu"].iloc[f.train]) & set(rows["gpu"].iloc[f.test])  # inner: GPU groups too
        assert_inner_inside(plan)


def test_lopo_nested_plan_keeps_the_outer_gpu_and_llm_out_and_blocks_inner_folds(rows):
    plans = nested_plan(rows, Regime(kind="lopo", max_pairs=5), inner_splits=2, seed=1)
    assert len(plans) == 5
    for plan in plans:
        gpu, llm = set(rows["gpu"].iloc[plan.outer.test]), set(rows["llm"].iloc[plan.outer.test])
        for f in plan.inner:
            inner = rows.iloc[np.concatenate([f.train, f.test])]
            assert not gpu & set(inner["gpu"]) and not llm & set(inner["llm"])
            train, test = rows.iloc[f.train], rows.iloc[f.test]
            assert not set(train["gpu"]) & set(test["gpu"]) and not set(train["llm"]) & set(test["llm"])


def test_inner_folds_zero_means_one_per_group(rows):
    assert len(inner_folds(rows, Regime(kind="logo"), 0, seed=1)) == len(FIXTURE_GPUS)
    assert len(inner_folds(rows, Regime(kind="lolo"), 0, seed=1)) == len(FIXTURE_LLMS)


def test_all_rows_plan_holds_nothing_out(rows):
    plan = all_rows_plan(rows, Regime(kind="logo"), 2, seed=1)
    assert len(plan.outer.train) == len(rows) and len(plan.outer.test) == 0 and len(plan.inner) == 2


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
@pytest.mark.parametrize("target", ["power", "itl"])
def test_each_algorithm_fits_and_predicts_from_its_first_trial(rows, search, algorithm, target):
    space = search.algorithms[algorithm]
    first = dict(space.first_trials[0])
    feature_set = first.pop("feature_set", space.feature_sets[0])
    if algorithm == "steppower" and target == "itl":  # power from the step's work: no ITL model of its own to offer
        with pytest.raises(ValueError, match="power only"):
            make_estimator(algorithm, target, feature_set, first, seed=3)
        return
    train, test = rows[rows["gpu"] != "gpu-d"], rows[rows["gpu"] == "gpu-d"]
    model = make_estimator(algorithm, target, feature_set, first, seed=3, load_rho=RHO).fit(train)
    pred = model.predict(test)
    assert pred.shape == (len(test),) and np.isfinite(pred).all() and (pred > 0).all()


@pytest.mark.parametrize("algorithm", ["workload", "lightgbm", "xgboost", "paper_replica"])
@pytest.mark.parametrize("target", ["power", "itl"])
def test_predict_skips_the_frames_and_gives_the_pipelines_answer_bit_for_bit(rows, search, algorithm, target):
    """TargetRegressor.predict fills missing numeric inputs with the imputer's means itself instead of running the
    ColumnTransformer (issue 25: the frames cost more than the trees); the answer must be the pipeline's, to the
    last bit, with inputs missing. The paper's feature set has text columns: it keeps the pipeline."""
    from wattgpu.modeling.estimator import as_measured_release
    from wattgpu.modeling.replica import paper_model

    rows = rows.assign(idle_power_ratio=0.25)  # the paper's power set reads measured idle (a FIXTURE value here)
    train, test = rows[rows["gpu"] != "gpu-d"], rows[rows["gpu"] == "gpu-d"].copy()
    if algorithm == "paper_replica":
        model = paper_model(target, load_params(paths.project_root() / paths.PARAMS).evaluate.replica, seed=3)
        model = model.fit(train)
    else:
        space = search.algorithms[algorithm]
        first = dict(space.first_trials[0])
        model = make_estimator(algorithm, target, first.pop("feature_set", space.feature_sets[0]), first,
                               seed=3).fit(train)
    test.loc[test.index[::2], "log_prompt_tokens"] = np.nan  # imputed
    test.loc[test.index[1::3], "log_memory_gb"] = np.nan
    assert (model._imputed() is None) == bool(model.features.categorical)
    frame = model._frame(as_measured_release(test, model.measured_releases_))
    np.testing.assert_array_equal(model.predict(test), model.target.decode(test, model.pipeline_.predict(frame)))


def test_search_models_never_see_measured_idle_power():
    for sets in FEATURE_SETS.values():
        for fs in sets.values():
            assert not any("idle" in c for c in fs.columns), fs.name


def test_physics_features_ignore_every_target(rows):
    scrambled = rows.drop(columns=["power_w_per_gpu", "itl_s"]).assign(power_w_per_gpu=1.0, itl_s=np.nan)
    cols = list(PHYSICS.columns)
    pd.testing.assert_frame_equal(engineer(scrambled, offline_batch=256)[cols], rows[cols])


@pytest.mark.parametrize("target", ["power", "itl"])
def test_physics_target_round_trips_within_the_physical_range(rows, target):
    # the FIXTURE's made-up ITLs lie partly below the step's memory floor, where decode answers the floor instead
    enc = physics_target(target, RHO)
    low, high = TARGETS[target].limits(rows)
    y = np.clip(rows[TARGETS[target].column].to_numpy(), low, high)
    np.testing.assert_allclose(enc.decode(rows, enc.encode(rows, y)), y)


def test_score_is_the_geometric_mean_of_offline_and_server_mdape():
    rows = pd.DataFrame({"scenario_label": ["offline", "offline", "server_low", "server_high", "max_num_seqs=64"],
                         "source": ["wattcounts_processed"] * 4 + ["mlenergy_v2"]})
    groups = score_groups(rows)
    assert list(groups) == ["offline", "offline", "server", "server", "mlenergy_v2"]
    y_true = np.array([100.0, 100.0, 100.0, 100.0])
    y_pred = np.array([104.0, 104.0, 91.0, 109.0])  # offline MdAPE 4, server MdAPE 9
    assert score(y_true, y_pred, groups[:4]) == pytest.approx(6.0)
    assert score(y_true, np.array([np.inf, 104, 91, 109]), groups[:4]) > 1000  # non-finite predictions lose
    # a third group counts as much as the others: geometric mean of 4, 9 and 48
    assert score(np.full(5, 100.0), np.r_[y_pred, 148.0], groups) == pytest.approx((4 * 9 * 48) ** (1 / 3))


def test_select_takes_the_lowest_inner_score_per_fold():
    def out(fold, s):
        return FoldOutcome(fold, "physics", {}, s, np.array([0]), np.array([1.0]))

    chosen = select({"a": [out("f1", 5.0), out("f2", 3.0)], "b": [out("f1", 4.0), out("f2", 3.5)]})
    assert [(a, o.fold) for a, o in chosen] == [("b", "f1"), ("a", "f2")]


def test_the_default_algorithm_is_displaced_only_by_a_win_beyond_one_standard_error():
    def out(fold, scores):
        return FoldOutcome(fold, "physics", {}, float(np.mean(scores)), np.array([0]), np.array([1.0]),
                           fold_scores=tuple(scores))

    default = {"f1": out("f1", [6.0, 7.0, 8.0]), "f2": out("f2", [6.0, 7.0, 8.0])}
    # f1: lower mean (6.9 vs 7.0) but the paired differences (-1.3, +0.7, +0.3) straddle zero: the default stays.
    # f2: better on every inner fold by about 1 (SE 0.06): it displaces the default.
    other = {"f1": out("f1", [4.7, 7.7, 8.3]), "f2": out("f2", [5.0, 6.1, 6.9])}
    chosen = select({"physics": list(default.values()), "xgboost": list(other.values())}, default="physics")
    assert [(a, o.fold) for a, o in chosen] == [("physics", "f1"), ("xgboost", "f2")]
    plain = select({"physics": list(default.values()), "xgboost": list(other.values())})
    assert [a for a, _ in plain] == ["xgboost", "xgboost"]


def _task(rows, search, tmp_path, algorithm: str, name: str, n_trials: int = 3) -> StudyTask:
    plans = tuple(nested_plan(rows, Regime(kind="logo"), inner_splits=2, seed=5)[:2])
    settings = Settings(seed=5, n_trials=n_trials, pruner_startup_trials=1, load_rho=tuple(sorted(RHO.items())))
    return StudyTask(rows, plans, "power", algorithm, search.algorithms[algorithm], settings,
                     tmp_path / f"{name}.db", "fixture")


@pytest.mark.parametrize("algorithm", ["lightgbm", "physics"])
def test_same_seed_same_result_and_a_finished_study_resumes_without_new_trials(rows, search, tmp_path, algorithm):
    first = run_task(_task(rows, search, tmp_path, algorithm, "one"))
    second = run_task(_task(rows, search, tmp_path, algorithm, "two"))  # fresh storage, same seed
    again = run_task(_task(rows, search, tmp_path, algorithm, "one"))  # same storage: resumed, nothing to add
    for a, b, c in zip(first, second, again):
        assert a.hyperparameters == b.hyperparameters == c.hyperparameters
        np.testing.assert_array_equal(a.y_pred, b.y_pred)
        np.testing.assert_array_equal(a.y_pred, c.y_pred)
        assert len(c.trials) == len(a.trials) == 3


def spy_calibrations(monkeypatch) -> list:
    """The Calibration objects search.nested's outer_bounds builds, in order."""
    from wattgpu.search import nested

    seen, calibrate = [], nested.intervals.calibrate
    monkeypatch.setattr(nested.intervals, "calibrate", lambda *a: seen.append(calibrate(*a)) or seen[-1])
    return seen


@pytest.mark.parametrize("algorithm", ["lightgbm", "workload"])
def test_calibration_reuses_the_chosen_trials_inner_models_and_a_refit_gives_the_same_scores(rows, search, tmp_path,
                                                                                            algorithm, monkeypatch):
    """`calibration_folds: null` scores the intervals with the chosen trial's own inner-fold models; a resumed study
    (trials run by an earlier process) refits instead: both must give the same calibration."""
    task = _task(rows, search, tmp_path, algorithm, "reuse")
    plan = task.plans[0]
    assert plan.calibrates_on_inner
    objective = task.objective(plan)
    study = run_study(task, plan, objective)
    best = study.best_trial
    params = dict(best.params)
    feature_set = params.pop("feature_set", task.space.feature_sets[0])
    own = objective.models[best.number]
    assert len(own) == len(plan.inner)
    ran = [t for t in study.trials if t.state.name == "COMPLETE"]
    assert list(objective.models) == [best.number]  # no other trial's models kept (`workload` completes several)
    assert len(ran) > 1 or algorithm == "lightgbm"  # lightgbm's later trials are pruned here
    seen = spy_calibrations(monkeypatch)
    y_pred = np.ones(len(plan.outer.test))
    outer_bounds(task, plan, objective, feature_set, params, y_pred, own)
    outer_bounds(task, plan, objective, feature_set, params, y_pred)  # refits
    reused, refit = seen
    assert len(reused.scores) == sum(len(f.test) for f in plan.inner) > 0
    for part in ("scores", "group", "extrapolating", "unit"):
        np.testing.assert_array_equal(getattr(reused, part), getattr(refit, part))


def test_a_failed_first_trial_does_not_keep_its_models_in_place_of_the_best_trials(rows, search, tmp_path, monkeypatch):
    """A trial whose score is NaN fails in Optuna; the models kept for calibration are still the best completed
    trial's (a NaN kept as the best so far would have blocked every later trial)."""
    from wattgpu.search import nested

    task = _task(rows, search, tmp_path, "workload", "nan")
    plan = task.plans[0]
    objective = task.objective(plan)
    real, calls = nested.score, []

    def first_fold_nan(*args):
        calls.append(args)
        return float("nan") if len(calls) == 1 else real(*args)

    monkeypatch.setattr(nested, "score", first_fold_nan)
    study = run_study(task, plan, objective)
    states = [t.state.name for t in study.trials]
    assert states[0] == "FAIL" and "COMPLETE" in states[1:]
    assert list(objective.models) == [study.best_trial.number] != [0]


def test_calibration_scores_a_poisson_row_at_the_requests_in_flight_its_fold_model_solves(rows, search, tmp_path,
                                                                                        monkeypatch):
    """A Poisson row's calibration score is the error of what is served: requests in flight solved from its rate by
    the fold's own ITL model (modeling.predictor.served_predictions), not those Little's law derives from the measured
    latency (FIXTURE rows marked so)."""
    marked = rows.copy()
    poisson = marked["request_rate_per_s"].notna().to_numpy()
    marked["concurrency_derivation"] = np.where(poisson, "littles_law_rate_x_mean_e2e", "")
    plans = tuple(nested_plan(marked, Regime(kind="logo"), inner_splits=2, seed=5)[:1])
    settings = Settings(seed=5, n_trials=1, pruner_startup_trials=1, load_rho=tuple(sorted(RHO.items())))
    task = StudyTask(marked, plans, "itl", "workload", search.algorithms["workload"], settings,
                     tmp_path / "served.db", "fixture")
    plan = task.plans[0]
    objective = task.objective(plan)
    best = run_study(task, plan, objective).best_trial
    params = dict(best.params)
    feature_set = params.pop("feature_set", task.space.feature_sets[0])
    seen = spy_calibrations(monkeypatch)
    outer_bounds(task, plan, objective, feature_set, params, np.ones(len(plan.outer.test)),
                 objective.models[best.number])
    (cal,) = seen
    served, at_measured = [], []
    for fold, model in zip(plan.inner, objective.models[best.number]):
        test = marked.iloc[fold.test]
        served.append(served_predictions(test, {"itl": model})[1]["itl"])
        at_measured.append(np.asarray(model.predict(test), dtype=float))
    y = np.concatenate([objective.y[f.test] for f in plan.inner])
    expected = np.log(y) - np.log(np.concatenate(served))
    np.testing.assert_allclose(cal.scores, expected[np.isfinite(expected)])
    on_poisson = np.concatenate([poisson[f.test] for f in plan.inner])
    measured = np.log(y) - np.log(np.concatenate(at_measured))
    assert not np.allclose(expected[on_poisson], measured[on_poisson])  # the solver's share of the error is in it
    np.testing.assert_allclose(expected[~on_poisson], measured[~on_poisson])


def test_build_estimator_round_trips_the_best_json(rows):
    hp = {"linear_scope": "server", "alpha": 2.5, "n_estimators": 60, "learning_rate": 0.1, "num_leaves": 7,
          "min_child_samples": 5, "reg_lambda": 0.01, "colsample_bytree": 0.9}
    record = best_record("power", "physics", "physics", hp, regime="logo", offline_batch=256.0, load_rho=RHO,
                         inner_score=4.2, nested_mdape={"offline": 2.0, "server": 8.0})
    loaded = json.loads(json.dumps(record))
    rebuilt = build_estimator(loaded, seed=7)
    direct = make_estimator("physics", "power", "physics", hp, seed=7, load_rho=RHO)
    np.testing.assert_allclose(rebuilt.fit(rows).predict(rows), direct.fit(rows).predict(rows))
    assert rebuilt.regressor.get_params()["alpha"] == 2.5


def test_search_params_reject_unknown_keys_and_first_trials_off_the_space(search):
    raw = search.model_dump(mode="json")
    with pytest.raises(ValueError):
        Search.model_validate({**raw, "surprise": 1})
    bad = dict(raw["algorithms"]["lightgbm"], first_trials=[{"n_estimators": 5}])
    with pytest.raises(ValueError):
        AlgorithmSpace.model_validate(bad)
    with pytest.raises(ValueError):
        Search.model_validate({**raw, "profile": "enormous"})


def test_a_profile_may_search_fewer_algorithms_but_never_unknown_ones_or_without_the_default(search):
    raw = search.model_dump(mode="json")
    profile = raw["profile"]

    def with_algorithms(names):
        profiles = {**raw["profiles"], profile: {**raw["profiles"][profile], "algorithms": names}}
        return Search.model_validate({**raw, "profiles": profiles})

    assert list(with_algorithms(["lightgbm", "workload"]).candidates) == [
        a for a in raw["algorithms"] if a in ("lightgbm", "workload")]
    assert list(with_algorithms(None).candidates) == list(raw["algorithms"])
    with pytest.raises(ValueError, match="not in `algorithms`"):
        with_algorithms(["workload", "catboost"])
    with pytest.raises(ValueError, match="default_algorithm"):
        with_algorithms(["lightgbm"])


def test_compare_scores_every_model_on_the_same_outer_test_rows_and_the_leaderboard_reads_it(rows):
    from wattgpu.evaluation import leaderboard
    from wattgpu.evaluation.runner import metrics_table
    from wattgpu.reporting.leaderboard import markdown
    from wattgpu.search.nested import compare

    plans = nested_plan(rows, Regime(kind="lopo", max_pairs=3), inner_splits=2, seed=1)
    y = rows["power_w_per_gpu"].to_numpy()
    outcomes = {a: [FoldOutcome(p.outer.name, "physics", {}, s, p.outer.test, y[p.outer.test] * f)
                    for p in plans] for a, s, f in (("good", 1.0, 1.01), ("bad", 2.0, 1.5))}
    refs = {leaderboard.REPLICA: y * 1.1, "tdp": rows["gpu_tdp_w"].to_numpy()}
    frame, counts, studies = compare(rows, "power", plans, outcomes, ["good", "bad"], refs)
    assert counts == {"good": 3} and len(studies) == 6
    sizes = frame.groupby("model").size()
    assert sizes.nunique() == 1 and sizes.iloc[0] == sum(len(p.outer.test) for p in plans)  # LOPO sample only
    result = {"kind": "lopo", "metrics": metrics_table(frame), "selected": {"power": counts},
              "setup": {"outer_folds": 3, "inner_folds": 2, "inner_cv": "blocks", "n_trials": 1, "profile": "smoke",
                        "max_pairs": 3}}
    lb = leaderboard.frame({"lopo": result})
    sel = lb[lb["model"] == leaderboard.SELECTION].iloc[0]
    assert sel["offline_mdape"] == pytest.approx(1.0) and sel["offline_beats_replica"]
    text = markdown(lb, {"lopo": result}, {}, ["good", "bad"])
    assert "sample of 3 (GPU, LLM) pairs" in text and "nested selection" in text
    verdict = leaderboard.verdict(lb)  # selection 1 % off, replica 10 % off
    assert verdict["all_beat_replica"] and verdict["power"]["lopo"]["offline"]["replica_mdape"] == pytest.approx(10.0)
    worse = lb.assign(offline_mdape=lb["offline_mdape"].where(lb["model"] != leaderboard.SELECTION, 50.0))
    assert not leaderboard.verdict(worse)["all_beat_replica"]


def test_the_final_algorithm_is_the_one_most_outer_folds_chose():
    from wattgpu.stages.search import choose_algorithm

    scores = {"extra_trees": 5.7, "physics": 5.8, "knn": 9.0}
    assert choose_algorithm({"physics": 7, "extra_trees": 1}, scores) == "physics"
    assert choose_algorithm({"physics": 4, "extra_trees": 4}, scores) == "extra_trees"  # tie: inner score
    assert choose_algorithm({}, scores) == "extra_trees"


# ------------------------------------------------------------------------------------------------ estimators


@parametrize_with_checks([TrendBoost(n_estimators=10)])
def test_trendboost_passes_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_every_candidate_clones_refuses_to_predict_unfitted_and_fit_returns_itself(rows, search, algorithm):
    space = search.algorithms[algorithm]
    first = dict(space.first_trials[0])
    feature_set = first.pop("feature_set", space.feature_sets[0])
    target = "power" if algorithm == "steppower" else "itl"
    est = make_estimator(algorithm, target, feature_set, first, seed=3, load_rho=RHO)
    twin = clone(est)
    assert twin.get_params().keys() == est.get_params().keys() and twin is not est
    with pytest.raises(NotFittedError):
        est.predict(rows)
    assert est.fit(rows) is est
    np.testing.assert_allclose(clone(est).fit(rows).predict(rows), est.predict(rows))  # same seed, same fit


def test_the_nested_choice_does_not_move_when_outer_test_targets_are_perturbed(rows, search, tmp_path):
    """Tuning sees outer-training rows only: scaling the held-out GPU's targets by 3 changes its errors, never the
    hyperparameters, the inner scores or the predictions chosen for it."""
    task = _task(rows, search, tmp_path, "physics", "plain")
    held_out = task.plans[0].outer.test
    perturbed = rows.copy()
    perturbed.loc[perturbed.index[held_out], "power_w_per_gpu"] *= 3
    moved = StudyTask(perturbed, task.plans, task.target, task.algorithm, task.space, task.settings,
                      tmp_path / "perturbed.db", task.fingerprint)
    a, b = run_task(task)[0], run_task(moved)[0]  # the fold whose test rows moved (others train on them)
    assert (a.hyperparameters, a.inner_score, a.fold_scores) == (b.hyperparameters, b.inner_score, b.fold_scores)
    np.testing.assert_array_equal(a.y_pred, b.y_pred)
    assert [t["value"] for t in a.trials] == [t["value"] for t in b.trials]


def test_every_candidate_has_a_place_in_the_workers_cost_order():
    from wattgpu.stages.search import COST_ORDER

    assert sorted(COST_ORDER) == sorted(ALGORITHMS)
