"""Physical baselines that learn nothing, so splits do not change them.

- tdp:             power = TDP.
- load_scaled_tdp: power = rho(scenario) x TDP (rho in params.yaml: 0.9 offline, 0.2 / 0.6 server).
- roofline:        ITL = 2 bytes x params / bandwidth, divided by the offline batch (256) offline.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def tdp(rows: pd.DataFrame) -> np.ndarray:
    return rows["gpu_tdp_w"].to_numpy(dtype=float)


def load_scaled_tdp(rows: pd.DataFrame, rho: dict[str, float]) -> np.ndarray:
    unknown = set(rows["scenario_label"]) - set(rho)
    if unknown:
        raise ValueError(f"load_rho has no value for scenario(s) {sorted(unknown)}; it has {sorted(rho)}")
    return rows["scenario_label"].map(rho).to_numpy(dtype=float) * tdp(rows)


def roofline_itl(rows: pd.DataFrame) -> np.ndarray:
    """Expects `roofline_itl_s` from features.engineer (which applies the offline batch)."""
    return rows["roofline_itl_s"].to_numpy(dtype=float)
