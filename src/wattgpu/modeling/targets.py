"""The two targets and how they are learned: power as a fraction of TDP, ITL on a log scale; or, for the
physics-informed candidate, as corrections to a physical estimate."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from wattgpu.features import load_scaled_tdp_w


@dataclass(frozen=True)
class Target:
    name: str
    column: str
    unit: str

    def encode(self, rows: pd.DataFrame, y: np.ndarray | pd.Series) -> np.ndarray:
        y = np.asarray(y, dtype=float)
        if self.name == "power":
            return y / rows["gpu_tdp_w"].to_numpy(dtype=float)
        return np.log(y)

    def decode(self, rows: pd.DataFrame, z: np.ndarray) -> np.ndarray:
        z = np.asarray(z, dtype=float)
        if self.name == "power":
            return z * rows["gpu_tdp_w"].to_numpy(dtype=float)
        return np.exp(z)


POWER = Target("power", "power_w_per_gpu", "W")
ITL = Target("itl", "itl_s", "s")
TARGETS = {"power": POWER, "itl": ITL}


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
        return load_scaled_tdp_w(rows, dict(self.load_rho)) / rows["gpu_tdp_w"].to_numpy(dtype=float)


def physics_target(target: str, load_rho: dict[str, float]) -> PhysicsTarget:
    base = TARGETS[target]
    return PhysicsTarget(base.name, base.column, base.unit, tuple(sorted(load_rho.items())))
