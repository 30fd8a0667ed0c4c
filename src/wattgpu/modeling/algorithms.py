"""Candidate algorithms: each builds a TargetRegressor from a feature set and hyperparameters.

The search spaces live in params.yaml (`search.algorithms`; wattgpu.search.space turns one into an Optuna
trial's choices); `make_estimator` turns choices into an unfitted estimator, `best_record` is what the search
writes to reports/search/best_<target>.json, and `build_estimator` rebuilds that winner (the registry retrains it
on all rows).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lightgbm import LGBMRegressor
from sklearn.ensemble import ExtraTreesRegressor
from sklearn.linear_model import Ridge
from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import SplineTransformer
from xgboost import XGBRegressor

from wattgpu.features import FEATURE_SETS, FeatureSet
from wattgpu.modeling.estimator import TargetRegressor
from wattgpu.modeling.steppower import StepPowerRegressor
from wattgpu.modeling.steptime import StepTimeRegressor
from wattgpu.modeling.targets import TARGETS, physics_target
from wattgpu.modeling.trendboost import TrendBoost


def _monotone(features: FeatureSet) -> dict:
    """Gradient boosting's monotone constraints where the feature set names inputs predictions must not fall in."""
    return {"monotone_constraints": features.monotone_signs} if features.monotone else {}


def _xgboost(hp: dict, features: FeatureSet, seed: int, n_jobs: int):
    monotone = {k: tuple(v) for k, v in _monotone(features).items()}
    return XGBRegressor(**hp, **monotone, tree_method="hist", random_state=seed, n_jobs=n_jobs)


def _lightgbm(hp: dict, features: FeatureSet, seed: int, n_jobs: int):
    bagging = hp.get("subsample", 1.0) < 1.0  # LightGBM bags rows only with a bagging frequency
    return LGBMRegressor(**hp, **_monotone(features), subsample_freq=1 if bagging else 0, random_state=seed,
                         n_jobs=n_jobs, verbose=-1, deterministic=True, force_row_wise=True)


def _extra_trees(hp: dict, features: FeatureSet, seed: int, n_jobs: int):
    return ExtraTreesRegressor(**hp, random_state=seed, n_jobs=n_jobs)


def _spline_ridge(hp: dict, features: FeatureSet, seed: int, n_jobs: int):
    spline = SplineTransformer(n_knots=hp["n_knots"], degree=hp["degree"], extrapolation=hp["extrapolation"])
    return make_pipeline(spline, Ridge(alpha=hp["alpha"]))


def _knn(hp: dict, features: FeatureSet, seed: int, n_jobs: int):
    return KNeighborsRegressor(**hp, n_jobs=n_jobs)


def _physics(hp: dict, features: FeatureSet, seed: int, n_jobs: int):
    return TrendBoost(offline_column=features.columns.index("is_offline"), **hp, random_state=seed, n_jobs=n_jobs)


def _workload(hp: dict, features: FeatureSet, seed: int, n_jobs: int):
    """ITL: the decode-step model (modeling.steptime); power: a ridge trend across GPUs plus LightGBM on what it
    leaves (modeling.trendboost), both monotone in the inputs that grow with concurrency."""
    hp = dict(hp)
    scope = hp.pop("linear_scope", "all")
    if "log_itl_physics_s" in features.columns:
        return StepTimeRegressor(columns=tuple(features.columns), **hp, random_state=seed, n_jobs=n_jobs)
    return TrendBoost(offline_column=features.columns.index("poisson_arrivals"), linear_scope=scope,
                      monotone=tuple(features.monotone_signs), **hp, random_state=seed, n_jobs=n_jobs)


def _steppower(hp: dict, features: FeatureSet, seed: int, n_jobs: int):
    """Power from the decode step's work over the step time its own step-time model predicts (modeling.steppower);
    that model has the `workload` ITL candidate's first-trial settings (ITL_SETTINGS; `itl_alpha`, which params.yaml
    no longer searches, sets its ridge penalty in configurations recorded before)."""
    hp = dict(hp)
    itl = {**ITL_SETTINGS, "alpha": hp.pop("itl_alpha", ITL_SETTINGS["alpha"])}
    return StepPowerRegressor(itl, **hp, random_state=seed, n_jobs=n_jobs)


# the step-time model inside `steppower` (params.yaml search.algorithms.workload.first_trials[0], ITL's settings)
ITL_SETTINGS = {"alpha": 100, "n_estimators": 200, "learning_rate": 0.05, "num_leaves": 15, "min_child_samples": 20,
                "reg_lambda": 1.0, "colsample_bytree": 1.0}


@dataclass(frozen=True)
class Algorithm:
    """How to build one candidate: its regressor, whether inputs are standardised, which target encoding."""

    build: Callable[[dict, FeatureSet, int, int], Any]
    scale: bool = False
    physics_target: bool = False  # learn a correction to the physical estimate (targets.PhysicsTarget)
    whole_rows: bool = False  # the build is the estimator itself (rows in, natural units out), not a regressor


ALGORITHMS: dict[str, Algorithm] = {
    "xgboost": Algorithm(_xgboost),
    "lightgbm": Algorithm(_lightgbm),
    "extra_trees": Algorithm(_extra_trees),
    "spline_ridge": Algorithm(_spline_ridge, scale=True),
    "knn": Algorithm(_knn, scale=True),
    "physics": Algorithm(_physics, physics_target=True),
    "workload": Algorithm(_workload),
    "steppower": Algorithm(_steppower, whole_rows=True),
}


def make_estimator(algorithm: str, target: str, feature_set: str, hyperparameters: dict, *, seed: int,
                   n_jobs: int = 1, load_rho: dict[str, float] | None = None) -> TargetRegressor:
    """An unfitted estimator; `load_rho` (evaluate.load_rho) is needed by the physics power target only."""
    algo = ALGORITHMS[algorithm]
    features = FEATURE_SETS[feature_set][target]
    if algo.physics_target:
        if target == "power" and not load_rho:
            raise ValueError("the physics power target needs load_rho (evaluate.load_rho)")
        encoding = physics_target(target, load_rho or {})
    else:
        encoding = TARGETS[target]
    regressor = algo.build(dict(hyperparameters), features, seed, n_jobs)
    if algo.whole_rows:
        if target != "power":
            raise ValueError(f"{algorithm} predicts power only, not {target}")
        return regressor
    return TargetRegressor(features, encoding, regressor, scale=algo.scale)


def best_record(target: str, algorithm: str, feature_set: str, hyperparameters: dict, *, regime: str,
                offline_batch: float, load_rho: dict[str, float], inner_score: float,
                nested_mdape: dict[str, float]) -> dict:
    """The content of reports/search/best_<target>.json (what build_estimator reads back)."""
    return {
        "target": target, "algorithm": algorithm, "feature_set": feature_set,
        "hyperparameters": dict(hyperparameters), "regime": regime,
        "physics": {"offline_batch": offline_batch, "load_rho": dict(load_rho)},
        "inner_score": inner_score, "nested_mdape": dict(nested_mdape),
    }


def build_estimator(best: dict, seed: int, n_jobs: int = 1) -> TargetRegressor:
    """Rebuild the unfitted winner from a best_<target>.json record."""
    return make_estimator(best["algorithm"], best["target"], best["feature_set"], best["hyperparameters"],
                          seed=seed, n_jobs=n_jobs, load_rho=best.get("physics", {}).get("load_rho"))
