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
from wattgpu.modeling import coverage, intervals
from wattgpu.request import RequestError, validate
from wattgpu.workload import vllm_default_max_num_seqs

OUTPUT_COLUMNS = ("power_w", "itl_s", "itl_ms", "tokens_per_s", "system_tokens_per_s", "energy_per_token_j",
                  "concurrency", "overloaded")
BOUNDED = ("power_w", "itl_s", "itl_ms", "system_tokens_per_s", "energy_per_token_j")  # each gets _lo and _hi
INTERVAL_COLUMNS = ("level", *(f"{c}_{end}" for c in BOUNDED for end in ("lo", "hi")), "interval")
FIXED_POINT_STEPS = 40  # iterations of requests-in-flight = rate x output tokens x ITL(requests in flight)


def derived_outputs(rows: pd.DataFrame, power_w: np.ndarray, itl_s: np.ndarray) -> pd.DataFrame:
    """Throughput and energy per token from predicted power (per GPU) and per-request ITL, tied through the
    requests in flight (Little's law): system tokens/s = concurrency / ITL; `tokens_per_s` is one request stream's,
    1 / ITL; energy per token = W per GPU x GPUs / system tokens/s (physics.energy_per_token_j)."""
    concurrency = rows["concurrency"].to_numpy(dtype=float)
    system_tps = concurrency / itl_s
    return pd.DataFrame({
        "power_w": power_w,
        "itl_s": itl_s,
        "itl_ms": itl_s * 1e3,
        "tokens_per_s": 1.0 / itl_s,
        "system_tokens_per_s": system_tps,
        "energy_per_token_j": physics.energy_per_token_j(power_w, rows["n_gpus"].to_numpy(dtype=float), system_tps),
        "concurrency": concurrency,
        "overloaded": rows["overloaded"].to_numpy(dtype=bool) if "overloaded" in rows else np.zeros(len(rows), bool),
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
    calibration: dict[str, intervals.Calibration] = field(default_factory=dict)  # target -> conformal scores
    training_ranges: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # target -> its rows' ranges

    def validate(self, requests) -> pd.DataFrame:
        """Canonical rows (request.validate) against the models' catalogs; raises RequestError naming row and field."""
        return validate(requests, self.gpus, self.llms)

    def features(self, rows: pd.DataFrame) -> pd.DataFrame:
        """Validated rows with the measured idle power of catalog GPUs and every engineered feature."""
        rows = rows.assign(gpu_idle_power_w=rows["gpu"].map(dict(self.idle_power_w)).astype(float))
        return engineer(rows, offline_batch=self.offline_batch)

    def _itl(self, rows: pd.DataFrame) -> np.ndarray:
        return np.asarray(self.models["itl"].predict(self.features(rows)), dtype=float)

    def solve_concurrency(self, rows: pd.DataFrame) -> pd.DataFrame:
        """Rows with Poisson arrivals get the requests in flight their rate implies, by Little's law: the fixed
        point of C = rate x output tokens x ITL(C), found by iteration from one request (ITL never falls as C rises,
        so the iteration climbs to the smallest fixed point). Where it passes the engine's cap (vLLM's default
        max_num_seqs), the arrivals outpace the replica: C is the cap and the row is flagged `overloaded`."""
        rows = rows.assign(overloaded=False)
        todo = rows["concurrency"].isna().to_numpy() & rows["request_rate_per_s"].notna().to_numpy()
        if not todo.any():
            return rows
        if "itl" not in self.models:
            raise RequestError(int(np.flatnonzero(todo)[0]), "concurrency",
                               "a Poisson load's requests in flight come from the ITL model, which this power model "
                               "was served without: give `concurrency` (requests in flight), or serve it beside the "
                               "ITL model")
        sub = rows[todo].copy()
        demand = (sub["request_rate_per_s"] * sub["output_tokens_mean"]).to_numpy(dtype=float)
        cap = np.array([vllm_default_max_num_seqs(m, g, v) for m, g, v in
                        zip(sub["gpu_memory_gb"], sub["gpu"], sub["engine_version"])], dtype=float)
        c = np.zeros(len(sub))
        for _ in range(FIXED_POINT_STEPS):
            new = np.minimum(demand * self._itl(sub.assign(concurrency=c)), cap)
            if np.allclose(new, c, rtol=1e-4, atol=1e-9):
                break
            c = new
        sub["concurrency"] = c
        sub["overloaded"] = demand * self._itl(sub) > cap * (1 + 1e-6)
        rows.loc[todo, ["concurrency", "overloaded"]] = sub[["concurrency", "overloaded"]].to_numpy()
        rows["overloaded"] = rows["overloaded"].astype(bool)
        return rows

    def predict_rows(self, rows: pd.DataFrame) -> pd.DataFrame:
        """Predictions for validated rows: gpu, llm, scenario and OUTPUT_COLUMNS."""
        rows = self.features(self.solve_concurrency(rows))
        nan = np.full(len(rows), np.nan)
        power = np.asarray(self.models["power"].predict(rows), dtype=float) if "power" in self.models else nan
        itl = np.asarray(self.models["itl"].predict(rows), dtype=float) if "itl" in self.models else nan
        out = derived_outputs(rows, power, itl)
        out = pd.concat([out, self.intervals(rows, out)], axis=1)
        out.insert(0, "gpu", rows["gpu"].to_numpy())
        out.insert(1, "llm", rows["llm"].to_numpy())
        out.insert(2, "scenario", rows["scenario_label"].to_numpy())
        return out

    def intervals(self, rows: pd.DataFrame, point: pd.DataFrame) -> pd.DataFrame:
        """INTERVAL_COLUMNS for featured rows at each row's `level` (modeling.intervals): power and ITL from their
        conformal scores; throughput from the ITL bounds through the requests in flight (a Poisson load below the
        engine's cap serves its arrivals whatever the ITL: no band); energy per token combines the power and
        throughput bounds (conservative: both at their worst). NaN bounds: no calibration, or the model abstains."""
        n = len(rows)
        level = (rows["level"] if "level" in rows else pd.Series(intervals.DEFAULT_LEVEL, index=rows.index))
        level = level.to_numpy(dtype=float)
        group = intervals.workload_group(rows)
        out = {"level": level}
        notes = [[] for _ in range(n)]
        for target, column in (("power", "power_w"), ("itl", "itl_s")):
            lo, hi = np.full(n, np.nan), np.full(n, np.nan)
            cal = self.calibration.get(target)
            if cal is not None and target in self.models:
                extrap = coverage.outside_mask(rows, self.training_ranges.get(target, {}))
                for lv in np.unique(level):
                    at = level == lv
                    lo[at], hi[at] = intervals.bounds(cal, point[column].to_numpy(float)[at], group[at], extrap[at], lv)
                for i in np.flatnonzero(extrap):
                    notes[i].append(f"{target} wider: extrapolating")
                for i in np.flatnonzero(~np.isfinite(lo) & np.isfinite(point[column].to_numpy(float))):
                    notes[i].append(f"{target} abstains: too few calibration rows this far out for a "
                                    f"{intervals.level_key(level[i])} % interval")
            out[f"{column}_lo"], out[f"{column}_hi"] = lo, hi
        out["itl_ms_lo"], out["itl_ms_hi"] = out["itl_s_lo"] * 1e3, out["itl_s_hi"] * 1e3
        concurrency = point["concurrency"].to_numpy(float)
        arrivals = rows["request_rate_per_s"].notna().to_numpy() & ~point["overloaded"].to_numpy(bool)
        tps = point["system_tokens_per_s"].to_numpy(float)
        out["system_tokens_per_s_lo"] = np.where(arrivals, tps, concurrency / out["itl_s_hi"])
        out["system_tokens_per_s_hi"] = np.where(arrivals, tps, concurrency / out["itl_s_lo"])
        gpus = rows["n_gpus"].to_numpy(float)
        out["energy_per_token_j_lo"] = physics.energy_per_token_j(out["power_w_lo"], gpus, out["system_tokens_per_s_hi"])
        out["energy_per_token_j_hi"] = physics.energy_per_token_j(out["power_w_hi"], gpus, out["system_tokens_per_s_lo"])
        frame = pd.DataFrame(out)
        frame["interval"] = ["; ".join(sorted(set(n_))) for n_ in notes]
        return frame[list(INTERVAL_COLUMNS)]

    def predict(self, requests) -> pd.DataFrame:
        return self.predict_rows(self.validate(requests))
