"""Physics-informed features, targets and the trend-plus-boosting model.

Every feature is a function of one row's GPU spec sheet, LLM config and workload (never of a measured target,
never of the measured idle power): `add_features` works row by row, so it cannot leak between folds.
Trees cannot extrapolate to a GPU faster than any seen one; a target normalised by a physical estimate can,
so the physics model learns a correction on top of the load-scaled TDP (power) and a refined roofline (ITL).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from lightgbm import LGBMRegressor
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.linear_model import Ridge
from sklearn.preprocessing import StandardScaler

from wattgpu.evaluation.baselines import load_scaled_tdp
from wattgpu.features import BYTES_FP16, OFFLINE_RATE, PAPER_ITL, PAPER_POWER, FeatureSet
from wattgpu.modeling.targets import TARGETS, Target

MARKER = "physics_itl_s"  # present once add_features has run


def add_features(rows: pd.DataFrame, offline_batch: float = 256.0) -> pd.DataFrame:
    """Physics features on rows from features.engineer. Pure: a new frame, the input untouched."""
    out = rows.copy()
    offline = out["scenario"].eq("offline").to_numpy()
    tokens_out = out["output_tokens_mean"].astype(float)
    tokens_seq = out["prompt_tokens_mean"].astype(float) + tokens_out
    bw_s, compute_s = out["bandwidth_latency_s"].astype(float), out["compute_latency_s"].astype(float)
    n_gpus = out["n_gpus"].astype(float) if "n_gpus" in out else 1.0

    out["log_bandwidth_latency_s"] = np.log(bw_s)
    out["log_compute_latency_s"] = np.log(compute_s)
    # < 1: a batch-1 decode step is memory-bound (weights streamed faster than computed is impossible).
    out["log_compute_bandwidth_ratio"] = np.log(compute_s / bw_s)
    # Offered load in GPU-seconds of weight streaming per second: rate x tokens/request x s/token at batch 1.
    # Offline uses the paper's "arbitrarily large" rate, so it saturates.
    rate = out["request_rate_per_s"].astype(float).where(~offline, OFFLINE_RATE)
    demand = rate * tokens_out * bw_s
    out["log_demand"] = np.log(demand)
    # Fraction of time the GPU is busy decoding (server); 1 offline.
    out["duty_cycle"] = np.minimum(1.0, demand)
    # Sequences decoded together offline: vLLM's batch cap, or fewer when the KV cache (GQA-aware, after the
    # FP16 weights, 90 % of memory) cannot hold them all; one sequence at a time in server mode.
    kv_batch = (out["kv_capacity_tokens"].astype(float) / tokens_seq).clip(lower=1.0, upper=offline_batch)
    out["effective_batch"] = np.where(offline, kv_batch, 1.0)
    # Refined roofline ITL: per token, the weights streamed once per step and shared by the batch, or the
    # FLOPs of one token at peak tensor throughput, whichever is slower.
    out["physics_itl_s"] = np.maximum(bw_s / out["effective_batch"], compute_s)
    out["log_physics_itl_s"] = np.log(out["physics_itl_s"])
    # Per-layer kernel launches dominate the ITL of small models; per token they are shared by the batch.
    out["log_num_layers"] = np.log(out["llm_num_layers"].astype(float))
    out["log_layers_per_sequence"] = out["log_num_layers"] - np.log(out["effective_batch"])
    out["log_kv_capacity_tokens"] = np.log(out["kv_capacity_tokens"].astype(float).clip(lower=1.0))
    out["log_hidden_size"] = np.log(out["llm_hidden_size"].astype(float))
    out["log_output_tokens"] = np.log(tokens_out.clip(lower=1.0))
    out["log_request_rate_per_s"] = np.log(rate)
    out["is_offline"] = offline.astype(float)
    # GPU spec sheet on log scales, and per TDP watt (efficiency sets how close to TDP a workload runs).
    out["log_tdp_w"] = np.log(out["gpu_tdp_w"].astype(float))
    out["log_memory_gb"] = np.log(out["gpu_memory_gb"].astype(float))
    out["log_memory_bandwidth_gb_s"] = np.log(out["gpu_memory_bandwidth_gb_s"].astype(float))
    out["log_fp16_tensor_tflops"] = np.log(out["gpu_fp16_tensor_tflops"].astype(float))
    out["bandwidth_per_tdp_gb_s_w"] = out["gpu_memory_bandwidth_gb_s"] / out["gpu_tdp_w"]
    out["tflops_per_tdp_w"] = out["gpu_fp16_tensor_tflops"] / out["gpu_tdp_w"]
    out["is_gddr"] = out["gpu_memory_type"].astype(str).str.upper().str.startswith("GDDR").astype(float)
    # Share of GPU memory the FP16 weights take (2 bytes x params / memory).
    out["weights_memory_fraction"] = BYTES_FP16 * out["llm_total_params_b"] / (out["gpu_memory_gb"] * n_gpus)
    return out


def ensure_features(rows: pd.DataFrame, offline_batch: float) -> pd.DataFrame:
    return rows if MARKER in rows else add_features(rows, offline_batch)


PHYSICS = FeatureSet(
    "physics",
    numeric=(
        "log_bandwidth_latency_s", "log_compute_latency_s", "log_compute_bandwidth_ratio", "log_demand",
        "duty_cycle", "effective_batch", "log_physics_itl_s", "log_num_layers", "log_layers_per_sequence",
        "log_kv_capacity_tokens", "log_hidden_size", "log_total_params_b", "log_output_tokens",
        "log_request_rate_per_s", "is_offline", "log_tdp_w", "log_memory_gb", "log_memory_bandwidth_gb_s",
        "log_fp16_tensor_tflops", "bandwidth_per_tdp_gb_s_w", "tflops_per_tdp_w", "is_gddr",
        "weights_memory_fraction", "gpu_release_year", "boost_ratio",
    ),
)
# The roofline quantities and the workload without raw spec-sheet columns (TDP, memory size, year, per-watt
# ratios): trees on these cannot tell GPUs apart by identity, only by how fast they stream and compute.
PHYSICS_CORE = FeatureSet(
    "physics_core",
    numeric=(
        "log_physics_itl_s", "effective_batch", "log_compute_bandwidth_ratio", "log_num_layers",
        "log_layers_per_sequence", "log_hidden_size", "log_total_params_b", "log_output_tokens",
        "log_request_rate_per_s", "is_offline", "log_kv_capacity_tokens", "weights_memory_fraction",
        "log_bandwidth_latency_s", "log_compute_latency_s", "is_gddr", "duty_cycle", "log_demand",
    ),
)
# The paper's power set without `idle_power_ratio`: idle power is measured, not on spec sheets.
PAPER_POWER_SPEC = FeatureSet(
    "paper_power_spec",
    numeric=tuple(c for c in PAPER_POWER.numeric if c != "idle_power_ratio"),
    categorical=PAPER_POWER.categorical,
)
FEATURE_SETS: dict[str, dict[str, FeatureSet]] = {
    "paper": {"power": PAPER_POWER_SPEC, "itl": PAPER_ITL},
    "physics": {"power": PHYSICS, "itl": PHYSICS},
    "physics_core": {"power": PHYSICS_CORE, "itl": PHYSICS_CORE},
}


@dataclass(frozen=True)
class PhysicsTarget(Target):
    """A target normalised by a physical estimate.

    power: power / TDP - rho(scenario), i.e. the residual of the load-scaled TDP baseline, as a TDP fraction.
    itl:   log(ITL / physics_itl_s), the log ratio to the refined roofline.
    """

    load_rho: tuple[tuple[str, float], ...] = ()

    def encode(self, rows: pd.DataFrame, y) -> np.ndarray:
        y = np.asarray(y, dtype=float)
        if self.name == "power":
            return y / rows["gpu_tdp_w"].to_numpy(dtype=float) - self._rho(rows)
        return np.log(y / rows["physics_itl_s"].to_numpy(dtype=float))

    def decode(self, rows: pd.DataFrame, z) -> np.ndarray:
        z = np.asarray(z, dtype=float)
        if self.name == "power":
            return (z + self._rho(rows)) * rows["gpu_tdp_w"].to_numpy(dtype=float)
        return np.exp(z) * rows["physics_itl_s"].to_numpy(dtype=float)

    def _rho(self, rows: pd.DataFrame) -> np.ndarray:
        return load_scaled_tdp(rows, dict(self.load_rho)) / rows["gpu_tdp_w"].to_numpy(dtype=float)


def physics_target(target: str, load_rho: dict[str, float]) -> PhysicsTarget:
    base = TARGETS[target]
    return PhysicsTarget(base.name, base.column, base.unit, tuple(sorted(load_rho.items())))


class TrendBoost(BaseEstimator, RegressorMixin):
    """A ridge trend on standardised inputs plus LightGBM on what the trend leaves.

    The trend is linear, so it extrapolates across GPUs (an unseen GPU's server power follows its specs);
    the boosted trees add what is not linear. `linear_scope`: "none" (boosting only), "all" (trend on every
    row) or "server" (trend fitted on every row, applied to server rows only: offline runs sit at the power
    limit, where a spec trend only adds GPU-level bias). `offline_column` is the position of `is_offline`.
    """

    def __init__(self, offline_column: int = 0, linear_scope: str = "server", alpha: float = 1.0,
                 n_estimators: int = 300, learning_rate: float = 0.05, num_leaves: int = 7,
                 min_child_samples: int = 20, reg_lambda: float = 0.0, colsample_bytree: float = 1.0,
                 random_state: int = 0, n_jobs: int = 1):
        self.offline_column = offline_column
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
        X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
        if self.linear_scope not in ("none", "all", "server"):
            raise ValueError(f"linear_scope must be none, all or server, not {self.linear_scope!r}")
        self.scaler_ = StandardScaler().fit(X)
        self.trend_ = None if self.linear_scope == "none" else Ridge(alpha=self.alpha).fit(self.scaler_.transform(X), y)
        self.boost_ = LGBMRegressor(
            n_estimators=self.n_estimators, learning_rate=self.learning_rate, num_leaves=self.num_leaves,
            min_child_samples=self.min_child_samples, reg_lambda=self.reg_lambda,
            colsample_bytree=self.colsample_bytree, random_state=self.random_state, n_jobs=self.n_jobs,
            verbose=-1, deterministic=True, force_row_wise=True,
        ).fit(X, y - self._trend(X))
        return self

    def predict(self, X) -> np.ndarray:
        X = np.asarray(X, dtype=float)
        return self._trend(X) + self.boost_.predict(X)

    def _trend(self, X: np.ndarray) -> np.ndarray:
        if self.trend_ is None:
            return np.zeros(len(X))
        trend = self.trend_.predict(self.scaler_.transform(X))
        if self.linear_scope == "server":
            trend = np.where(X[:, self.offline_column] > 0.5, 0.0, trend)
        return trend

    @property
    def feature_importances_(self) -> np.ndarray:
        return self.boost_.feature_importances_
