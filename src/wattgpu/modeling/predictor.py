"""The predictor every entry point uses (CLI, batch CSV, the served model): one way through,
requests -> validate (once) -> features -> models -> derived outputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from wattgpu import physics
from wattgpu.features import engineer
from wattgpu.request import validate

OUTPUT_COLUMNS = ("power_w", "itl_s", "itl_ms", "tokens_per_s", "system_tokens_per_s", "energy_per_token_j")


def derived_outputs(rows: pd.DataFrame, power_w: np.ndarray, itl_s: np.ndarray) -> pd.DataFrame:
    """Tokens/s and energy per token from predicted power (per GPU) and ITL (physics.system_tokens_per_s,
    physics.energy_per_token_j); `tokens_per_s` is one request stream's, 1 / ITL."""
    system_tps = physics.system_tokens_per_s(rows["scenario"].to_numpy() == "offline", itl_s,
                                             rows["request_rate_per_s"], rows["output_tokens_mean"])
    return pd.DataFrame({
        "power_w": power_w,
        "itl_s": itl_s,
        "itl_ms": itl_s * 1e3,
        "tokens_per_s": 1.0 / itl_s,
        "system_tokens_per_s": system_tps,
        "energy_per_token_j": physics.energy_per_token_j(power_w, rows["n_gpus"].to_numpy(dtype=float), system_tps),
    })


@dataclass
class Predictor:
    """Fitted power and ITL estimators (natural-unit predictions) with the catalogs they resolve names in.

    `idle_power_w` (catalog GPU key -> measured idle W) feeds the paper replica's idle-power feature; a GPU
    without a measured idle power (any GPU given by spec) gets NaN there, which the model mean-imputes.
    `offline_batch`: the sequences decoded together offline that the models were trained with (meta.json).
    """

    models: dict[str, object]
    gpus: object
    llms: object
    offline_batch: float
    versions: dict[str, str] = field(default_factory=dict)
    idle_power_w: Mapping[str, float] = field(default_factory=dict)

    def validate(self, requests) -> pd.DataFrame:
        """Canonical rows (request.validate) against the models' catalogs; raises RequestError naming row and field."""
        return validate(requests, self.gpus, self.llms)

    def features(self, rows: pd.DataFrame) -> pd.DataFrame:
        """Validated rows with the measured idle power of catalog GPUs and every engineered feature."""
        rows = rows.assign(gpu_idle_power_w=rows["gpu"].map(dict(self.idle_power_w)).astype(float))
        return engineer(rows, offline_batch=self.offline_batch)

    def predict_rows(self, rows: pd.DataFrame) -> pd.DataFrame:
        """Predictions for validated rows: gpu, llm, scenario and OUTPUT_COLUMNS."""
        rows = self.features(rows)
        nan = np.full(len(rows), np.nan)
        power = np.asarray(self.models["power"].predict(rows), dtype=float) if "power" in self.models else nan
        itl = np.asarray(self.models["itl"].predict(rows), dtype=float) if "itl" in self.models else nan
        out = derived_outputs(rows, power, itl)
        out.insert(0, "gpu", rows["gpu"].to_numpy())
        out.insert(1, "llm", rows["llm"].to_numpy())
        out.insert(2, "scenario", rows["scenario_label"].to_numpy())
        return out

    def predict(self, requests) -> pd.DataFrame:
        return self.predict_rows(self.validate(requests))
