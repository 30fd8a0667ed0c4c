"""The two targets and how they are learned: power as a fraction of TDP, ITL on a log scale."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


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
