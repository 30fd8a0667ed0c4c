"""The trend-plus-boosting regressor behind the physics-informed candidate (algorithm `physics`)."""

from __future__ import annotations

import numpy as np
from lightgbm import LGBMRegressor
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.linear_model import Ridge
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted, validate_data

from wattgpu.modeling import boosting


class TrendBoost(RegressorMixin, BaseEstimator):
    """A ridge trend on standardised inputs plus LightGBM on what the trend leaves.

    The trend is linear, so it extrapolates across GPUs (an unseen GPU's server power follows its specs);
    the boosted trees add what is not linear. `linear_scope`: "none" (boosting only), "all" (trend on every
    row) or "server" (trend fitted on every row, applied to server rows only: offline runs sit at the power
    limit, where a spec trend only adds GPU-level bias). `offline_column` is the position of `is_offline`.
    `monotone`: +1 / 0 per column: predictions never fall in the +1 columns (the trend keeps only non-negative
    coefficients on them, refitting without a column whose coefficient came out negative; the trees are
    constrained).
    """

    def __init__(self, offline_column: int = 0, linear_scope: str = "server", alpha: float = 1.0,
                 n_estimators: int = 300, learning_rate: float = 0.05, num_leaves: int = 7,
                 min_child_samples: int = 20, reg_lambda: float = 0.0, colsample_bytree: float = 1.0,
                 random_state: int = 0, n_jobs: int = 1, monotone: tuple[int, ...] = ()):
        self.offline_column = offline_column
        self.monotone = monotone
        self.linear_scope = linear_scope
        self.alpha = alpha
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.reg_lambda = reg_lambda
        self.colsample_bytree = colsample_bytree
        self.random_state = random_state
        self.n_jobs = n_jobs

    def fit(self, X, y) -> TrendBoost:
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        if self.linear_scope not in ("none", "all", "server", "arrivals"):
            raise ValueError(f"linear_scope must be none, all, server or arrivals, not {self.linear_scope!r}")
        self.scaler_ = StandardScaler().fit(X)
        self.trend_ = None if self.linear_scope == "none" else self._fit_trend(self.scaler_.transform(X), y)
        monotone = {"monotone_constraints": list(self.monotone)} if any(self.monotone) else {}
        self.boost_ = LGBMRegressor(
            n_estimators=self.n_estimators, learning_rate=self.learning_rate, num_leaves=self.num_leaves,
            min_child_samples=self.min_child_samples, reg_lambda=self.reg_lambda,
            colsample_bytree=self.colsample_bytree, random_state=self.random_state, n_jobs=self.n_jobs,
            verbose=-1, deterministic=True, force_row_wise=True, **monotone,
        ).fit(X, y - self._trend(X))
        return self

    def _fit_trend(self, Xs: np.ndarray, y: np.ndarray) -> Ridge:
        """Ridge on standardised inputs; a monotone column with a negative coefficient is dropped (coefficient 0)."""
        keep = np.ones(Xs.shape[1], dtype=bool)
        while True:
            trend = Ridge(alpha=self.alpha).fit(Xs * keep, y)
            negative = np.array([bool(m) and c < 0 for m, c in zip(self.monotone, trend.coef_)] +
                                [False] * (Xs.shape[1] - len(self.monotone)))
            if not negative.any():
                return trend
            keep &= ~negative

    def predict(self, X) -> np.ndarray:
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return self._trend(X) + boosting.predict(self.boost_, X)

    def _trend(self, X: np.ndarray) -> np.ndarray:
        if self.trend_ is None:
            return np.zeros(len(X))
        trend = self.trend_.predict(self.scaler_.transform(X))
        if self.linear_scope == "server":
            trend = np.where(X[:, self.offline_column] > 0.5, 0.0, trend)
        elif self.linear_scope == "arrivals":  # the column flags rows with Poisson arrivals: the trend applies there
            trend = np.where(X[:, self.offline_column] > 0.5, trend, 0.0)
        return trend

    @property
    def feature_importances_(self) -> np.ndarray:
        return self.boost_.feature_importances_
