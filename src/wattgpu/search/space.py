"""Search spaces (params.yaml `search.algorithms`) in Optuna's terms."""

from __future__ import annotations

from wattgpu.config import AlgorithmSpace


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
