"""The two targets and how they are learned: power as a fraction of TDP, ITL on a log scale; or, for the
physics-informed candidate, as corrections to a physical estimate."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from wattgpu import physics
from wattgpu.arrays import floats
from wattgpu.features import load_scaled_tdp_w

# The feature columns Target.limits reads.
LIMIT_INPUTS = ("gpu_tdp_w", "weights_step_s", "running_sequences", "kv_step_per_sequence_s")


@dataclass(frozen=True)
class Target:
    name: str
    column: str
    unit: str
    bounded: bool = True  # predictions and bands within `limits` (False: the paper replica's own quantities)

    def limits(self, rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """Per row, the range a prediction of this target may take (physics): a GPU's mean power is at most its
        power limit, the TDP (no measured row exceeds it: the largest is 0.999 x TDP); a decode step is no faster
        than its bytes at the GPU's peak memory bandwidth (physics.memory_step_s of features' columns: the weights
        read once, split over the tensor-parallel GPUs, and each running sequence's KV cache; 28 of 10,022 measured
        ITLs are below it, 15 % at the median, most of them MoE steps, whose experts read per step are an expected
        share, not a bound). Unbounded where a row does not carry the inputs. Predictions (`decode`) and their
        bands (intervals.band) are clipped into it."""
        n = len(rows)
        low, high = np.zeros(n), np.full(n, np.inf)
        if not self.bounded:
            return low, high
        if self.name == "power" and "gpu_tdp_w" in rows:
            tdp = floats(rows["gpu_tdp_w"])
            high = np.where(tdp > 0, tdp, np.inf)
        elif self.name != "power" and {"weights_step_s", "running_sequences", "kv_step_per_sequence_s"} <= set(rows):
            floor = physics.memory_step_s(rows["weights_step_s"], rows["running_sequences"],
                                          rows["kv_step_per_sequence_s"])
            low = np.where(floor > 0, floor, 0.0)
        return low, high

    def clip(self, rows: pd.DataFrame, values) -> np.ndarray:
        """`values` (W or s) within `limits` (NaN stays NaN)."""
        low, high = self.limits(rows)
        return np.clip(np.asarray(values, dtype=float), low, high)

    def encode(self, rows: pd.DataFrame, y: np.ndarray | pd.Series) -> np.ndarray:
        y = np.asarray(y, dtype=float)
        if self.name == "power":
            return y / rows["gpu_tdp_w"].to_numpy(dtype=float)
        return np.log(y)

    def decode(self, rows: pd.DataFrame, z: np.ndarray) -> np.ndarray:
        z = np.asarray(z, dtype=float)
        if self.name == "power":
            return self.clip(rows, z * rows["gpu_tdp_w"].to_numpy(dtype=float))
        return self.clip(rows, np.exp(z))


POWER = Target("power", "power_w_per_gpu", "W")
ITL = Target("itl", "itl_s", "s")
TARGETS = {"power": POWER, "itl": ITL}


def itl_learning_rows(rows: pd.DataFrame, extra: pd.DataFrame | None = None) -> pd.DataFrame:
    """What a step-time (ITL) model learns from: the rows of `rows` and of `extra` (latency-only rows, where given)
    that have an ITL."""
    learn = rows if extra is None or extra.empty else pd.concat([rows, extra], ignore_index=True)
    return learn[learn[ITL.column].notna()]


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
            return self.clip(rows, (z + self._rho(rows)) * rows["gpu_tdp_w"].to_numpy(dtype=float))
        return self.clip(rows, np.exp(z) * rows["physics_itl_s"].to_numpy(dtype=float))

    def _rho(self, rows: pd.DataFrame) -> np.ndarray:
        return load_scaled_tdp_w(rows, dict(self.load_rho)) / rows["gpu_tdp_w"].to_numpy(dtype=float)


def physics_target(target: str, load_rho: dict[str, float]) -> PhysicsTarget:
    base = TARGETS[target]
    return PhysicsTarget(base.name, base.column, base.unit, load_rho=tuple(sorted(load_rho.items())))
