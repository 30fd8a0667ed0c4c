"""Physical baselines that learn nothing, so splits do not change them.

- tdp:             power = TDP.
- tdp90:           power = 0.9 x TDP on every row, whatever the load (a planner's rule of thumb).
- load_scaled_tdp: power = rho(scenario) x TDP (rho in params.yaml: 0.9 offline, 0.2 / 0.6 server).
- roofline:        ITL = 2 bytes x params / bandwidth, divided by the offline batch offline.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from wattgpu.features import load_scaled_tdp_w


def tdp(rows: pd.DataFrame) -> np.ndarray:
    return rows["gpu_tdp_w"].to_numpy(dtype=float)


TDP_SHARE = 0.9  # the tdp90 baseline's share of the power limit


def tdp90(rows: pd.DataFrame) -> np.ndarray:
    return TDP_SHARE * tdp(rows)


def load_scaled_tdp(rows: pd.DataFrame, rho: dict[str, float]) -> np.ndarray:
    return load_scaled_tdp_w(rows, rho)


def roofline_itl(rows: pd.DataFrame) -> np.ndarray:
    """Expects `roofline_itl_s` from features.engineer (which applies the offline batch)."""
    return rows["roofline_itl_s"].to_numpy(dtype=float)
