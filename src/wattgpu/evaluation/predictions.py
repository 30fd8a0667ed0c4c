"""The layout of held-out predictions (every evaluate and search stage writes it): one row per measurement row,
target and model, with the measured and the predicted value in natural units."""

from __future__ import annotations

import numpy as np
import pandas as pd

from wattgpu.modeling.intervals import level_key
from wattgpu.modeling.targets import TARGETS

ID_COLUMNS = ["source", "config_id", "replicate_id", "gpu", "llm", "scenario_label"]


def prediction_frame(rows: pd.DataFrame, target: str, model: str, y_pred: np.ndarray,
                     bounds: dict[float, tuple[np.ndarray, np.ndarray]] | None = None) -> pd.DataFrame:
    """`bounds`: level -> (lo, hi) per row, written as y_lo_<level %> / y_hi_<level %> (NaN for a model without)."""
    out = rows[ID_COLUMNS].copy()
    if "llm_family" in rows:  # coverage is reported per held-out LLM family too
        out["llm_family"] = rows["llm_family"].to_numpy()
    out["target"] = target
    out["model"] = model
    out["y_true"] = rows[TARGETS[target].column].to_numpy(dtype=float)
    out["y_pred"] = y_pred
    for level, (lo, hi) in (bounds or {}).items():
        out[f"y_lo_{level_key(level)}"], out[f"y_hi_{level_key(level)}"] = lo, hi
    return out
