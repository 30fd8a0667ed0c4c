"""Candidate algorithms: each builds a TargetRegressor from a feature set and hyperparameters.

The search spaces live in params.yaml (`search.algorithms`); `suggest` turns one into an Optuna trial's
choices, `make_estimator` turns choices into an unfitted estimator, and `build_estimator` rebuilds the winner
from reports/search/best_<target>.json (the registry retrains it on all rows).
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

from wattgpu.config import AlgorithmSpace
from wattgpu.features import FeatureSet
from wattgpu.modeling.estimator import TargetRegressor
from wattgpu.modeling.targets import TARGETS
from wattgpu.search.physics import FEATURE_SETS, TrendBoost, ensure_features, physics_target


class SearchRegressor(TargetRegressor):
    """A TargetRegressor that adds the physics features to rows that lack them (rows from features.engineer)."""

    def __init__(self, features: FeatureSet, target, regressor, scale: bool = False, offline_batch: float = 256.0):
        super().__init__(features, target, regressor, scale)
        self.offline_batch = offline_batch

    def fit(self, rows, y=None) -> SearchRegressor:
        return super().fit(ensure_features(rows, self.offline_batch), y)

    def predict(self, rows):
        return super().predict(ensure_features(rows, self.offline_batch))


def _xgboost(hp: dict, features: FeatureSet, seed: int, n_jobs: int):
    return XGBRegressor(**hp, tree_method="hist", random_state=seed, n_jobs=n_jobs)


def _lightgbm(hp: dict, features: FeatureSet, seed: int, n_jobs: int):
    bagging = hp.get("subsample", 1.0) < 1.0  # LightGBM bags rows only with a bagging frequency
    return LGBMRegressor(**hp, subsample_freq=1 if bagging else 0, random_state=seed, n_jobs=n_jobs,
                         verbose=-1, deterministic=True, force_row_wise=True)


def _extra_trees(hp: dict, features: FeatureSet, seed: int, n_jobs: int):
    return ExtraTreesRegressor(**hp, random_state=seed, n_jobs=n_jobs)


def _spline_ridge(hp: dict, features: FeatureSet, seed: int, n_jobs: int):
    spline = SplineTransformer(n_knots=hp["n_knots"], degree=hp["degree"], extrapolation=hp["extrapolation"])
    return make_pipeline(spline, Ridge(alpha=hp["alpha"]))


def _knn(hp: dict, features: FeatureSet, seed: int, n_jobs: int):
    return KNeighborsRegressor(**hp, n_jobs=n_jobs)


def _physics(hp: dict, features: FeatureSet, seed: int, n_jobs: int):
    return TrendBoost(offline_column=features.columns.index("is_offline"), **hp, random_state=seed, n_jobs=n_jobs)


@dataclass(frozen=True)
class Algorithm:
    """How to build one candidate: its regressor, whether inputs are standardised, which target encoding."""

    build: Callable[[dict, FeatureSet, int, int], Any]
    scale: bool = False
    physics_target: bool = False  # learn a correction to the physical estimate (physics.PhysicsTarget)


ALGORITHMS: dict[str, Algorithm] = {
    "xgboost": Algorithm(_xgboost),
    "lightgbm": Algorithm(_lightgbm),
    "extra_trees": Algorithm(_extra_trees),
    "spline_ridge": Algorithm(_spline_ridge, scale=True),
    "knn": Algorithm(_knn, scale=True),
    "physics": Algorithm(_physics, physics_target=True),
}


def make_estimator(algorithm: str, target: str, feature_set: str, hyperparameters: dict, *, seed: int,
                   n_jobs: int = 1, offline_batch: float = 256.0,
                   load_rho: dict[str, float] | None = None) -> SearchRegressor:
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
    return SearchRegressor(features, encoding, regressor, scale=algo.scale, offline_batch=offline_batch)


def suggest(trial, space: AlgorithmSpace) -> tuple[str, dict]:
    """(feature set, hyperparameters) for an Optuna trial, from an algorithm's declared space."""
    if len(space.feature_sets) > 1:
        feature_set = trial.suggest_categorical("feature_set", list(space.feature_sets))
    else:
        feature_set = space.feature_sets[0]
    hp = {}
    for name, dim in space.space.items():
        if dim.type == "int":
            hp[name] = trial.suggest_int(name, int(dim.low), int(dim.high), step=int(dim.step or 1), log=dim.log)
        elif dim.type == "float":
            hp[name] = trial.suggest_float(name, dim.low, dim.high, step=dim.step, log=dim.log)
        else:
            hp[name] = trial.suggest_categorical(name, list(dim.choices))
    return feature_set, hp


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


def build_estimator(best: dict, seed: int, n_jobs: int = 1) -> SearchRegressor:
    """Rebuild the unfitted winner from a best_<target>.json record."""
    physics = best.get("physics", {})
    return make_estimator(best["algorithm"], best["target"], best["feature_set"], best["hyperparameters"],
                          seed=seed, n_jobs=n_jobs, offline_batch=float(physics.get("offline_batch", 256.0)),
                          load_rho=physics.get("load_rho"))
