"""The decode-step model behind the `workload` candidate's ITL: physics terms with learned, positive weights, times
a learned factor that does not depend on concurrency.

    ITL(b) = exp(g(z)) x sum_k exp(theta_k . z) x T_k(b),    b = max(requests in flight, 1)

T_k are the physical step times of features.engineer (weights read per step, b x one sequence's KV cache, b x one
token's compute, b x one sequence's overhead, the per-layer fixed cost and pipeline stages' hand-offs;
wattgpu.physics); z are inputs that do not depend on concurrency (the engine, the vendor, the parallel layout, the
model's active parameters, the kind of load: WEIGHT_INPUTS), standardised. theta is
fitted by robust, ridge-penalised nonlinear least squares on log ITL (from theta = 0, the physics as computed, to
convergence: the same weights on any machine); g by LightGBM on what that leaves. Each T_k is non-decreasing in b
and grows at most linearly, and the weights do not depend on b, so per-request ITL never falls as concurrency rises
and system throughput b / ITL never falls either: the monotone responses a planner relies on hold by construction,
not by luck of the fit.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import warnings
from collections import OrderedDict
from pathlib import Path

import numpy as np
from lightgbm import LGBMRegressor
from scipy.optimize import least_squares
from scipy.sparse.linalg import LinearOperator
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from wattgpu.errors import WattgpuError
from wattgpu.modeling import boosting

# The terms, by the feature names (features.WORKLOAD_ITL) that hold log T_k; `batch` marks the per-sequence terms.
# Tensor parallelism's all-reduces (features' `comm_step_per_sequence_s`) are in the unfitted physics
# (`itl_physics_s`) but not a fitted term: as one, its weight (nonzero on multi-GPU rows only) bent the fit and a held-out
# lab's ITL moved by 10 - 20 points (issue 22's closing note); the weights' dependence on the tensor-parallel degree
# carries that cost meanwhile. The per-sequence overhead (physics.SEQUENCE_STEP_S) is a term of its own: without it the
# fit charged it to the KV read (a learned KV weight of about 8 x the bytes' time, rising with how many sequences
# fit), which made every long-context request at high load several times too slow.
TERMS = ("log_weights_step_s", "log_kv_step_per_sequence_s", "log_compute_step_per_sequence_s",
         "log_sequence_step_s", "log_fixed_step_s")
PER_SEQUENCE = (False, True, True, True, False)
BATCH = "log_batch"
# What the terms' weights may depend on: how the engine (family and release), the vendor's software stack, the
# replica's parallel layout and the model's structure (its active parameters, which set how well a step's matrix
# products fill the GPU, and the share of them a token reads, whose expert routing adds kernels) change the cost of each
# part of a step, and whether the row's load is open or closed and its prompt known. Nothing that sizes the workload or
# the replica's memory (prompt, output, how many sequences fit, the weights' share of memory): a weight that rose with
# those made the physics' own dependence on them moot and extrapolated far outside the measured range (the boosted
# factor still sees every context input, as one factor for the whole step). With these inputs and the per-sequence
# term, ITL MdAPE at first-trial settings (`python scripts/transfer_check.py --target itl --regimes loso lopo logo`)
# went 42.8 -> 34.6 % with a lab held out (LOSO), 14.0 -> 11.1 % on the LOPO folds' (GPU, LLM) pairs, 18.5 -> 17.2 %
# with a GPU held out (LOGO); the nested figures are in the closing note of stop 30.
WEIGHT_INPUTS = (
    "engine_vllm", "engine_tensorrt-llm", "engine_deepspeed-mii", "engine_deepspeed", "engine_llama.cpp",
    "engine_hf-transformers", "engine_version_num", "gpu_is_amd", "gpu_is_intel", "gpu_is_gaudi", "log_tensor_parallel",
    "log_pipeline_parallel", "log_active_params_b", "active_share", "prompt_unknown", "poisson_arrivals",
)


# The robust least-squares fit of the step weights runs to convergence: the relative change of the cost, of the
# weights and the projected gradient all below TOLERANCE. A fit stopped early (by an evaluation cap) depends on the
# path it took, and so on the machine's floating-point rounding and threads; a converged one does not (to well
# below the printed digits). MAX_EVALUATIONS only guards against a fit that cannot converge: it then warns.
TOLERANCE = 1e-12
LSMR_TOLERANCE = 1e-12  # each trust-region step solved to this (scipy default 1e-6): steps near Gauss-Newton
MAX_EVALUATIONS = 5_000


class ConvergenceWarning(UserWarning):
    """The step-time fit stopped before its tolerance was met."""


class Memo:
    """Results computed once per process per key (a digest of their inputs), the `size` newest kept; thread-safe (the
    registry's gate fits on threads). For deterministic fits only: a reused result changes no number."""

    def __init__(self, size: int):
        self.size = size
        self._items: OrderedDict[str, object] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def get(self, key: str, compute):
        with self._lock:
            found = self._items.get(key)
        if found is None:
            found = compute()
            with self._lock:
                self._items[key] = found
                while len(self._items) > self.size:
                    self._items.popitem(last=False)
        return found


class SolvedStore:
    """Converged solves kept on disk, one small `.npz` per fit-input digest, so that the worker processes of a search
    and the stages after it (search_best, register: the same folds' fits) solve each distinct fit once: the memo of
    one process does not reach the others. Off until a stage `open`s it (a library user's fits touch no disk).

    A solve is a function of its inputs (the digest), of the code that computes it (this file) and of the numerical
    libraries: results live in a folder per (this file's bytes, NumPy's and SciPy's versions), so a stored result is
    the number this process would compute, and a change to any of them starts an empty folder. Files are written
    whole (a temporary file renamed) and read without pickle; one that does not read is solved again."""

    def __init__(self):
        self.root: Path | None = None  # as opened (what a worker process is handed)
        self.folder: Path | None = None  # root / the code and libraries' salt

    def open(self, root: Path | str | None) -> None:
        """Keep solves under `root` (None: keep none)."""
        self.root = self.folder = None
        if root is None:
            return
        import scipy

        salt = hashlib.blake2b(Path(__file__).read_bytes(), digest_size=8)
        salt.update(f"numpy {np.__version__} scipy {scipy.__version__}".encode())
        self.root, self.folder = Path(root), Path(root) / salt.hexdigest()

    def get(self, key: str, solve) -> tuple[np.ndarray, dict]:
        if self.folder is None:
            return solve()
        path = self.folder / f"{key}.npz"
        try:
            with np.load(path, allow_pickle=False) as stored:
                return stored["theta"], json.loads(str(stored["report"]))
        except (OSError, ValueError, KeyError):  # not solved yet (or a file that does not read)
            pass
        theta, report = solve()
        self.folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=self.folder, suffix=".npz", delete=False) as tmp:
            np.savez(tmp, theta=np.asarray(theta, dtype=np.float64), report=np.array(json.dumps(report)))
        os.replace(tmp.name, path)
        return theta, report


# fit inputs' digest -> (weights, report): a search's trials share folds and penalties, not boosting settings
_SOLVED = Memo(64)
SOLVED_STORE = SolvedStore()


def _solved(key: str, solve) -> tuple[np.ndarray, dict]:
    """`solve()`'s result for these fit inputs (`key`: their digest), computed once per process, and once for every
    process where a stage opened SOLVED_STORE. Trials of one study differ mostly in the boosted factor's settings,
    which the weights do not depend on; a converged fit from a fixed start is a function of its inputs, so reusing it
    changes no number."""
    theta, report = _SOLVED.get(key, lambda: SOLVED_STORE.get(key, solve))
    return theta.copy(), dict(report)


def _digest(*arrays: np.ndarray) -> str:
    h = hashlib.blake2b(repr((TOLERANCE, LSMR_TOLERANCE, MAX_EVALUATIONS)).encode(), digest_size=20)
    for a in arrays:
        a = np.ascontiguousarray(a, dtype=np.float64)
        h.update(repr(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _solve(residuals, jacobian, n_params: int) -> tuple[np.ndarray, dict]:
    """Weights minimising the soft-L1 loss of `residuals` from zero (a fixed start: the same optimum every time),
    and how the fit ended (scipy's status: > 0 converged, 0 stopped by MAX_EVALUATIONS)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):  # one BLAS thread: sums in one order, whatever the machine's cores
        fit = least_squares(residuals, np.zeros(n_params), jac=jacobian, loss="soft_l1", f_scale=0.3,
                            ftol=TOLERANCE, xtol=TOLERANCE, gtol=TOLERANCE, max_nfev=MAX_EVALUATIONS,
                            tr_solver="lsmr", tr_options={"atol": LSMR_TOLERANCE, "btol": LSMR_TOLERANCE})
    report = {"converged": bool(fit.status > 0), "status": int(fit.status), "evaluations": int(fit.nfev),
              "cost": float(fit.cost), "message": str(fit.message)}
    if not report["converged"]:
        warnings.warn(f"step-time fit did not converge in {fit.nfev} evaluations (cost {fit.cost:.6g}): "
                      f"{fit.message}", ConvergenceWarning, stacklevel=3)
    return fit.x, report


class StepTimeRegressor(RegressorMixin, BaseEstimator):
    """Predicts log ITL from a matrix whose columns are named by `columns` (features.WORKLOAD_ITL.columns).

    `context`: the columns used as z (default: every column that is not a term, the batch or `exclude`).
    """

    def __init__(self, columns: tuple[str, ...] = (), exclude: tuple[str, ...] = ("log_itl_physics_s",),
                 alpha: float = 1.0, n_estimators: int = 200, learning_rate: float = 0.05, num_leaves: int = 15,
                 min_child_samples: int = 20, reg_lambda: float = 1.0, colsample_bytree: float = 1.0,
                 random_state: int = 0, n_jobs: int = 1):
        self.columns = columns
        self.exclude = exclude
        self.alpha = alpha
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.reg_lambda = reg_lambda
        self.colsample_bytree = colsample_bytree
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _split(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(log T_k(b) per term, the weights' inputs, the context z)."""
        cols = list(self.columns)
        log_b = X[:, cols.index(BATCH)]
        terms = np.column_stack([X[:, cols.index(t)] + (log_b if per_seq else 0.0)
                                 for t, per_seq in zip(TERMS, PER_SEQUENCE)])
        skip = {*TERMS, BATCH, *self.exclude}
        weights_in = X[:, [cols.index(c) for c in self._weight_inputs()]]
        return terms, weights_in, X[:, [i for i, c in enumerate(cols) if c not in skip]]

    def _weight_inputs(self) -> tuple[str, ...]:
        """The columns the weights depend on: those the model was fitted with (`weight_inputs_`, so that a stored
        model keeps answering after WEIGHT_INPUTS changes), else the declared ones."""
        fitted = getattr(self, "weight_inputs_", None)
        return self._declared_inputs() if fitted is None else fitted

    def _declared_inputs(self) -> tuple[str, ...]:
        """WEIGHT_INPUTS among `columns` (what a fit records)."""
        return tuple(c for c in WEIGHT_INPUTS if c in self.columns and c not in self.exclude)

    @staticmethod
    def _log_weights(z1: np.ndarray, theta: np.ndarray) -> np.ndarray:
        """Per row and term, the log of the term's learned weight, theta_k . z."""
        return z1 @ theta.reshape(len(TERMS), -1).T

    def _log_step(self, terms: np.ndarray, z1: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """log sum_k exp(theta_k . z + log T_k), and each term's share of the sum (for the Jacobian)."""
        a = terms + self._log_weights(z1, theta)
        top = a.max(axis=1, keepdims=True)
        w = np.exp(a - top)
        total = w.sum(axis=1, keepdims=True)
        return (top + np.log(total)).ravel(), w / total

    def fit(self, X, y) -> StepTimeRegressor:
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        if len(self.columns) != X.shape[1]:
            raise ValueError(f"columns names {len(self.columns)} inputs, X has {X.shape[1]}")
        self.weight_inputs_ = self._declared_inputs()
        terms, w, z = self._split(X)
        self.mean_, self.scale_ = w.mean(axis=0), w.std(axis=0)
        self.scale_[self.scale_ == 0] = 1.0
        self.low_, self.high_ = w.min(axis=0), w.max(axis=0)  # the weights never extrapolate past these
        z1 = np.column_stack([np.ones(len(w)), (w - self.mean_) / self.scale_])
        k, d, n = len(TERMS), z1.shape[1], len(y)
        # Ridge on every weight, intercepts included, centred on the physics as computed (theta = 0): a term no row
        # needs would otherwise leave its intercept free to drift (a flat valley no fit converges in).
        penalty = np.full(k * d, np.sqrt(self.alpha))

        def residuals(theta):
            log_step, _ = self._log_step(terms, z1, theta)
            return np.r_[log_step - y, penalty * theta]

        def jacobian(theta):
            """d residuals / d theta as an operator: row i of the data block is share_ik x z1_i for each term k,
            applied without forming the n x (k d) matrix (four times less memory traffic per product)."""
            _, share = self._log_step(terms, z1, theta)

            def matvec(v):
                v = np.ravel(v)
                return np.concatenate((np.einsum("ik,ik->i", share, z1 @ v.reshape(k, d).T), penalty * v))

            def rmatvec(u):
                u = np.ravel(u)
                return ((share * u[:n, None]).T @ z1).ravel() + penalty * u[n:]  # weighs k columns, not d

            return LinearOperator((n + k * d, k * d), matvec=matvec, rmatvec=rmatvec, dtype=float)

        self.theta_, self.convergence_ = _solved(_digest(terms, z1, y, penalty),
                                                 lambda: _solve(residuals, jacobian, k * d))
        rest = y - self._log_step(terms, z1, self.theta_)[0]
        self.boost_ = LGBMRegressor(
            n_estimators=self.n_estimators, learning_rate=self.learning_rate, num_leaves=self.num_leaves,
            min_child_samples=self.min_child_samples, reg_lambda=self.reg_lambda,
            colsample_bytree=self.colsample_bytree, random_state=self.random_state, n_jobs=self.n_jobs,
            verbose=-1, deterministic=True, force_row_wise=True,
        ).fit(z, rest)
        return self

    def _z1(self, w: np.ndarray) -> np.ndarray:
        """The weights' inputs clipped to their training range (outside it the physics terms extrapolate, not
        exp(theta . z)), standardised as in fit, after a column of ones."""
        if w.shape[1] != len(self.mean_):  # a model stored before its inputs were recorded with it
            raise WattgpuError(f"this ITL step-time model was fitted on {len(self.mean_)} weight inputs and this "
                               f"wattgpu's takes {w.shape[1]}: it was fitted by an older wattgpu; refit it with "
                               "`make run` (or `dvc repro`)")
        w = np.clip(w, self.low_, self.high_)
        return np.column_stack([np.ones(len(w)), (w - self.mean_) / self.scale_])

    def _log_physics(self, terms: np.ndarray, w: np.ndarray) -> np.ndarray:
        """log sum_k exp(theta_k . z) T_k at the fitted weights."""
        return self._log_step(terms, self._z1(w), self.theta_)[0]

    def terms(self, X) -> dict[str, np.ndarray]:
        """What the step adds up for each row of X: per term its physical time T_k (s, at the row's requests in
        flight) and its learned weight exp(theta_k . z), and the boosted factor exp(g(z)) that multiplies their sum:
        exp(predict(X)) = factor x sum_k weight_k x time_k."""
        check_is_fitted(self, "theta_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        log_t, w, z = self._split(X)
        log_w = self._log_weights(self._z1(w), self.theta_)
        out = {"factor": np.exp(boosting.predict(self.boost_, z))}
        for k, term in enumerate(TERMS):
            out[f"{term}:time"], out[f"{term}:weight"] = np.exp(log_t[:, k]), np.exp(log_w[:, k])
        return out

    def predict(self, X) -> np.ndarray:
        check_is_fitted(self, "theta_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        terms, w, z = self._split(X)
        return self._log_physics(terms, w) + boosting.predict(self.boost_, z)

    def at_context(self, X):
        """(positions, X') -> predict(X') for rows `positions` of X whose context z is unchanged in X' (only the
        terms, the batch or the weights' inputs differ): the boosted factor g(z), which depends on nothing else, is
        computed once for every row of X (the Poisson fixed point asks the same rows at many requests in flight)."""
        check_is_fitted(self, "theta_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        boost = boosting.predict(self.boost_, self._split(X)[2])

        def predict(positions: np.ndarray, moved: np.ndarray) -> np.ndarray:
            terms, w, _ = self._split(moved)
            return self._log_physics(terms, w) + boost[positions]

        return predict

    @property
    def feature_importances_(self) -> np.ndarray:
        """Importance per input column: the boosted factor's, on the context columns (0 for the terms)."""
        out = np.zeros(len(self.columns))
        skip = {*TERMS, BATCH, *self.exclude}
        out[[i for i, c in enumerate(self.columns) if c not in skip]] = self.boost_.feature_importances_
        return out
