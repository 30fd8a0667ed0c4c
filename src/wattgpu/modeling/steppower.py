"""Power from the work of a decode step (the `steppower` candidate): the step-time model says how long a step
takes, the step's bytes and FLOPs say how much work it does, and power follows from work over time.

    power / TDP = idle(z) + busy x (m(z) x u_mem + f x u_flops)  (+ boosted correction),  within [idle(z), 1]

physics.step_power_tdp_share holds the formula. u_mem and u_flops (physics.step_utilisation) are the step's bytes
and FLOPs at peak (features: the weights and b KV caches read, b tokens computed) over the step time the model's own
step-time model predicts (modeling.steptime, the `workload` ITL model fitted on the same rows and on the rows measured
with an ITL and no power that the fold may learn from: `fit`'s `step_rows`), so a faster engine at the same work draws
more watts, and a slow one fewer, as ML.ENERGY's vLLM 0.5.4 runs do at 0.4 x TDP. The power rows alone (ML.ENERGY's
and Watt Counts' runs, and 48 of LLM-Inference-Bench's 4,700) taught a step at a full batch from vLLM 0.4.2 alone:
with Watt Counts held out its offline steps came out 2.6 x too slow and its offline power 0.62 x measured. `busy` is 1
for a closed batch and 1 - e^-C under Poisson arrivals (physics.busy_fraction). idle and m depend on the GPU's spec
sheet (z, standardised, ridge-shrunk to one value for every GPU, which is what a lab without Poisson loads can
teach); f is shared. A LightGBM correction on the power features, when asked for, learns what the physics leaves;
the result stays within [idle, TDP].
"""

from __future__ import annotations

import hashlib
import warnings

import numpy as np
import pandas as pd
from lightgbm import LGBMRegressor
from scipy.optimize import least_squares
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from wattgpu import physics
from wattgpu.arrays import float_matrix, floats
from wattgpu.features import WORKLOAD_POWER
from wattgpu.modeling import boosting
from wattgpu.modeling.estimator import as_measured_release, measured_releases
from wattgpu.modeling.steptime import ConvergenceWarning, Memo
from wattgpu.modeling.targets import ITL, POWER, itl_learning_rows


def spec_sheet(rows: pd.DataFrame) -> np.ndarray:
    """What idle and the memory-bound share depend on, per row, from the GPU's spec sheet: the power limit's inverse,
    1000 W / TDP (idle watts of the form a + b x TDP, a floor the board draws whatever its size: fans, regulators,
    memory refresh; L4 and T4 idle near 0.45 x TDP, H200 near 0.17), and GDDR memory (features' `is_gddr`: the L40S
    idles a third above HBM parts of its TDP). Two inputs, not six: with a handful of GPUs per lab a linear share in
    six standardised specs interpolated the training GPUs and missed a held-out GPU's idle by a quarter (Poisson loads
    at 0.017 req/s are nearly idle); with these two, first-trial steppower went 17.1 -> 13.7 % with a GPU held out and
    22.8 -> 22.4 % with a lab held out (`python scripts/transfer_check.py --target power --candidates steppower`)."""
    return np.column_stack([1000.0 / floats(rows["gpu_tdp_w"]), floats(rows["is_gddr"])])


START = (0.2, 0.5, 0.5)  # idle, memory-bound and compute-bound shares of TDP the fit starts from
SOFT_L1_SCALE = 0.1  # relative error beyond which a row counts linearly (robust to a lab's odd readings)
TOLERANCE = 1e-10  # the fit runs to convergence (cost, parameters and gradient), from the fixed START
MAX_EVALUATIONS = 2_000  # a guard only: a fit converges in tens of evaluations
_FITTED = Memo(32)  # rows' digest -> fitted step-time model (deterministic fits)


def _digest(frame: pd.DataFrame, extra: str) -> str:
    h = hashlib.blake2b(extra.encode(), digest_size=20)
    h.update(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes())
    return h.hexdigest()


class StepPowerRegressor(RegressorMixin, BaseEstimator):
    """Rows in, watts per GPU out (the TargetRegressor interface: fit(rows), predict(rows), feature_importances()).

    `itl_hyperparameters`: the step-time model's settings (the `workload` ITL candidate's); `ridge`: the penalty pulling the spec-sheet
    dependence of idle and of the memory-bound share towards one value for every GPU; the LightGBM settings shape the
    correction (n_estimators 0: none)."""

    def __init__(self, itl_hyperparameters: dict, ridge: float = 100.0, n_estimators: int = 0, learning_rate: float = 0.05,
                 num_leaves: int = 15, min_child_samples: int = 20, reg_lambda: float = 1.0,
                 colsample_bytree: float = 1.0, random_state: int = 0, n_jobs: int = 1):
        self.itl_hyperparameters = itl_hyperparameters
        self.ridge = ridge
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.reg_lambda = reg_lambda
        self.colsample_bytree = colsample_bytree
        self.random_state = random_state
        self.n_jobs = n_jobs

    # ---- pieces
    def _fit_itl(self, rows: pd.DataFrame, step_rows: pd.DataFrame | None):
        from wattgpu.modeling.algorithms import make_estimator  # the candidates' module builds the step-time model

        learn = itl_learning_rows(rows, step_rows)
        model = make_estimator("workload", "itl", "workload", self.itl_hyperparameters, seed=self.random_state,
                               n_jobs=self.n_jobs)
        key = _digest(learn[[*model.features.columns, ITL.column, "engine"]],
                      repr((sorted(self.itl_hyperparameters.items()), self.random_state)))
        return _FITTED.get(key, lambda: model.fit(learn))

    def _inputs(self, rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(u_mem, u_flops, busy, the raw spec sheet) at the step time the step-time model predicts; `fit`
        standardises the specs with the training GPUs' mean and scale, `_specs` does so for requests (clipped)."""
        b = rows["running_sequences"].to_numpy(dtype=float)  # the sequences each step decodes (features)
        memory_s = physics.memory_step_s(rows["weights_step_s"], b, rows["kv_step_per_sequence_s"])
        compute_s = b * rows["compute_step_per_sequence_s"].to_numpy(dtype=float)
        with np.errstate(over="ignore", invalid="ignore"):
            step_s = np.asarray(self.itl_.predict(rows), dtype=float)
        u_mem, u_flops = physics.step_utilisation(memory_s, compute_s, step_s)
        busy = physics.busy_fraction(rows["concurrency"].to_numpy(dtype=float),
                                     rows["request_rate_per_s"].notna().to_numpy())
        return np.nan_to_num(u_mem), np.nan_to_num(u_flops), busy, spec_sheet(rows)

    def _shares(self, theta: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        k = z.shape[1]
        idle = theta[0] + z @ theta[3:3 + k]
        memory = theta[1] * np.exp(z @ theta[3 + k:3 + 2 * k])
        return np.clip(idle, 0.0, 1.0), memory, float(theta[2])

    def _physics(self, theta, u_mem, u_flops, busy, z) -> np.ndarray:
        idle, memory, compute = self._shares(theta, z)
        return physics.step_power_tdp_share(idle, memory, compute, busy, u_mem, u_flops)

    # ---- the estimator
    learns_step_time = True  # fit takes `step_rows` (evaluation.cv.fit_fold passes the fold's)

    def fit(self, rows: pd.DataFrame, y=None, step_rows: pd.DataFrame | None = None) -> StepPowerRegressor:
        """`step_rows`: rows measured with an ITL but no power (LLM-Inference-Bench's latency runs) that the step-time
        model learns from beside `rows`' own: a lab measured without power still says how long a step takes."""
        y = rows[POWER.column] if y is None else y
        share = POWER.encode(rows, y)
        self.measured_releases_ = measured_releases(rows)
        self.itl_ = self._fit_itl(rows, step_rows)
        raw = spec_sheet(rows)
        self.mean_ = np.nanmean(raw, axis=0)
        self.scale_ = np.nanstd(raw, axis=0)
        self.scale_[~(self.scale_ > 0)] = 1.0
        u_mem, u_flops, busy, z = self._inputs(rows)
        z = np.nan_to_num((z - self.mean_) / self.scale_)  # a spec the sheet leaves out: the average GPU's
        k = z.shape[1]
        penalty = np.sqrt(self.ridge)

        def residuals(theta):
            return np.r_[(self._physics(theta, u_mem, u_flops, busy, z) - share) / share, penalty * theta[3:]]

        fit = least_squares(residuals, np.r_[START, np.zeros(2 * k)], loss="soft_l1", f_scale=SOFT_L1_SCALE,
                            ftol=TOLERANCE, xtol=TOLERANCE, gtol=TOLERANCE, max_nfev=MAX_EVALUATIONS)
        self.converged_ = bool(fit.status > 0)
        if not self.converged_:
            warnings.warn(f"step-power fit did not converge in {fit.nfev} evaluations (cost {fit.cost:.6g}): "
                          f"{fit.message}", ConvergenceWarning, stacklevel=2)
        self.theta_ = fit.x
        self.boost_ = None
        if self.n_estimators > 0:
            rest = share - self._physics(self.theta_, u_mem, u_flops, busy, z)
            self.boost_ = LGBMRegressor(
                n_estimators=self.n_estimators, learning_rate=self.learning_rate, num_leaves=self.num_leaves,
                min_child_samples=self.min_child_samples, reg_lambda=self.reg_lambda,
                colsample_bytree=self.colsample_bytree, random_state=self.random_state, n_jobs=self.n_jobs,
                monotone_constraints=WORKLOAD_POWER.monotone_signs, verbose=-1, deterministic=True,
                force_row_wise=True,
            ).fit(self._boost_inputs(rows), rest)
        return self

    def _boost_inputs(self, rows: pd.DataFrame) -> pd.DataFrame:
        """The boosted correction's inputs as the frame it is fitted on (_boost_matrix, with the column names)."""
        return pd.DataFrame(self._boost_matrix(rows), columns=list(WORKLOAD_POWER.columns))

    def _boost_matrix(self, rows: pd.DataFrame) -> np.ndarray:
        """The boosted correction's inputs as the float matrix the booster reads (boosting.predict: the same numbers,
        without LightGBM's scikit-learn layer, several times the trees' own work on a one-row request)."""
        return float_matrix(rows, WORKLOAD_POWER.columns)

    def _specs(self, rows: pd.DataFrame) -> np.ndarray:
        """The standardised spec sheet of requests, within 3 standard deviations of the training GPUs' (the spec
        dependence does not extrapolate far)."""
        z = spec_sheet(rows)
        return np.clip(np.nan_to_num((z - self.mean_) / self.scale_), -3.0, 3.0)

    def idle_share(self, rows: pd.DataFrame) -> np.ndarray:
        """Per row, the idle power the model assumes for its GPU, as a share of TDP."""
        check_is_fitted(self, "theta_")
        return self._shares(self.theta_, self._specs(rows))[0]

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        check_is_fitted(self, "theta_")
        rows = as_measured_release(rows, self.measured_releases_)
        u_mem, u_flops, busy, _ = self._inputs(rows)
        z = self._specs(rows)
        share = self._physics(self.theta_, u_mem, u_flops, busy, z)
        if self.boost_ is not None:
            idle = self._shares(self.theta_, z)[0]
            share = np.clip(share + boosting.predict(self.boost_, self._boost_matrix(rows)), idle, 1.0)
        return POWER.decode(rows, share)

    def feature_importances(self) -> pd.Series:
        """The boosted correction's importances (the physics' own parameters: `theta_`)."""
        if self.boost_ is None:
            return pd.Series(dtype=float)
        return pd.Series(self.boost_.feature_importances_, index=list(WORKLOAD_POWER.columns)).sort_values(
            ascending=False)
