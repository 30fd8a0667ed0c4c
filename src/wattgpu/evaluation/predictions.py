"""The layout of held-out predictions (every evaluate and search stage writes it): one row per measurement row,
target and model, with the measured and the predicted value in natural units."""

from __future__ import annotations

import numpy as np
import pandas as pd

from wattgpu.modeling.targets import TARGETS

ID_COLUMNS = ["source", "config_id", "replicate_id", "gpu", "llm", "scenario_label"]


def prediction_frame(rows: pd.DataFrame, target: str, model: str, y_pred: np.ndarray) -> pd.DataFrame:
    out = rows[ID_COLUMNS].copy()
    out["target"] = target
    out["model"] = model
    out["y_true"] = rows[TARGETS[target].column].to_numpy(dtype=float)
    out["y_pred"] = y_pred
    return out
