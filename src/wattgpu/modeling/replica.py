"""The paper replica: its two feature sets and fixed XGBoost settings (dense models only)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
from xgboost import XGBRegressor

from wattgpu.config import Replica, XgbParams
from wattgpu.features import PAPER_ITL, PAPER_POWER
from wattgpu.modeling.estimator import TargetRegressor
from wattgpu.modeling.targets import TARGETS


def xgb(params: XgbParams, seed: int, n_jobs: int) -> XGBRegressor:
    return XGBRegressor(
        max_depth=params.max_depth,
        n_estimators=params.n_estimators,
        reg_lambda=params.reg_lambda,
        learning_rate=params.learning_rate,
        random_state=seed,
        n_jobs=n_jobs,
        tree_method="hist",
    )


def paper_model(target: str, replica: Replica, seed: int = 42, n_jobs: int = 2) -> TargetRegressor:
    features = PAPER_POWER if target == "power" else PAPER_ITL
    params = replica.power if target == "power" else replica.itl
    # unbounded: the paper's method as published (and its offline ITL is a system time per token, below any
    # per-request floor; paper_target)
    return TargetRegressor(features, dataclasses.replace(TARGETS[target], bounded=False), xgb(params, seed, n_jobs))


def paper_target(rows: pd.DataFrame, target: str) -> tuple[pd.DataFrame, np.ndarray]:
    """Rows with the paper's ITL definition as the ITL target (offline: measurement duration / generated tokens,
    a system time per token: `itl_reported_s` for Watt Counts), and per row the factor that turns it into the
    per-request ITL every other model predicts (requests in flight offline, 1 at a Poisson load)."""
    if target != "itl":
        return rows, np.ones(len(rows))
    factor = (rows["itl_s"] / rows["itl_reported_s"]).to_numpy(dtype=float)
    return rows.assign(itl_s=rows["itl_reported_s"]), factor
