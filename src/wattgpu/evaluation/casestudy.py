"""The paper's case study: one LLM in the server scenarios, each GPU's measured power and ITL beside predictions
from a model that never saw that GPU (leave-one-GPU-out), and whether the paper's two claims hold on our data.

Predictions come from the LOGO folds of the `evaluate` stage (`paper_replica`) and, when the search stage has
written them, from its nested LOGO folds. Energy per token at server load = power / (request rate x output
tokens per request), so at equal load the ratio of two GPUs' energies is the ratio of their powers; offline,
energy per token = power x ITL (ITL there is the measurement's duration over all generated tokens).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from wattgpu import paths, physics
from wattgpu.evaluation.leaderboard import BASELINES, REPLICA, SELECTION
from wattgpu.evaluation.predictions import ID_COLUMNS
from wattgpu.modeling.intervals import DEFAULT_LEVEL, level_key
from wattgpu.workload import SERVER_LOADS

# LOGO predictions (the evaluate stage's layout: one row per measurement row, target and model), best first.
PREDICTION_FILES = (
    paths.SEARCH_DIR / "logo" / "predictions.csv",
    paths.EVALUATE_DIR / "logo" / "predictions.csv",
)
DEFAULT_LLM = "meta-llama/Llama-3.1-8B-Instruct"
PAPER_GPUS = {"slow": "NVIDIA L4", "big": "NVIDIA H100 NVL", "small": "NVIDIA A30"}  # the paper's example
PAPER_POWER_GAP = 0.40  # "an H100 draws over 40 % more power than an A30"


DEFAULT_MODELS = (SELECTION, REPLICA)  # what the registry serves (its nested figure) and the paper's
PREDICTION_COLUMNS = [*ID_COLUMNS, "target", "model", "y_true", "y_pred"]  # evaluation.runner.prediction_frame
BAND = level_key(DEFAULT_LEVEL)  # the interval level the case study shows (the planner's default confidence)
BAND_COLUMNS = [f"y_lo_{BAND}", f"y_hi_{BAND}"]  # present where the search wrote conformal intervals


def load_logo_predictions(root: Path | None = None) -> pd.DataFrame:
    """Every learned model's LOGO predictions found under reports/ (baselines left out); empty if none.
    A file in another layout is skipped with a note on stderr."""
    frames = []
    for rel in PREDICTION_FILES:
        path = paths.resolve(rel, root)
        if not path.exists():
            continue
        frame = pd.read_csv(path)
        missing = [c for c in PREDICTION_COLUMNS if c not in frame.columns]
        if missing:
            print(f"note: {rel} skipped: no column {missing[0]!r}", file=sys.stderr)
            continue
        for c in BAND_COLUMNS:
            if c not in frame:
                frame[c] = np.nan
        frames.append(frame[~frame["model"].isin(BASELINES)][PREDICTION_COLUMNS + BAND_COLUMNS]
                      .assign(origin=rel.as_posix()))
    if not frames:
        return pd.DataFrame(columns=[*PREDICTION_COLUMNS, *BAND_COLUMNS, "origin"])
    out = pd.concat(frames, ignore_index=True)
    # A model in several files (the replica is scored by both stages on the same LOGO folds): the first file's.
    first = out.groupby("model")["origin"].transform("first")
    return out[out["origin"] == first].reset_index(drop=True)


def choose_models(pred: pd.DataFrame, models: list[str] | None) -> pd.DataFrame:
    """The rows of `models`, in that order (`["all"]`: every model); None: the DEFAULT_MODELS present, or every
    model when none is. An unknown name is an error that lists the available ones."""
    from wattgpu.errors import WattgpuError

    available = list(dict.fromkeys(pred["model"]))
    if models is None:
        models = [m for m in DEFAULT_MODELS if m in available] or available
    elif models == ["all"]:
        models = available
    unknown = [m for m in models if m not in available]
    if unknown:
        raise WattgpuError(f"--models: no LOGO predictions for {unknown[0]!r}; available: {', '.join(available)}, all")
    out = pred[pred["model"].isin(models)].copy()
    out["model"] = pd.Categorical(out["model"], categories=models, ordered=True)
    return out


def case_table(pred: pd.DataFrame, measurements: pd.DataFrame, llm: str, max_itl_ms: float,
               scenarios: tuple[str, ...] = SERVER_LOADS) -> pd.DataFrame:
    """Per (model, scenario, GPU): measured and predicted power, ITL and energy per token, means over replicates.

    `measurements` supplies each row's request rate and output tokens (joined on source, config_id, replicate_id).
    """
    d = pred[(pred["llm"] == llm) & pred["scenario_label"].isin(scenarios)]
    if d.empty:
        return pd.DataFrame()
    keys = ["source", "config_id", "replicate_id"]
    bands = [c for c in BAND_COLUMNS if c in d]
    wide = d.pivot_table(index=["model", "scenario_label", "gpu", *keys], columns="target",
                         values=["y_true", "y_pred", *bands], aggfunc="first", observed=True, dropna=False)
    wide.columns = [f"{t}_{v}" for v, t in wide.columns]
    load = measurements[[*keys, "request_rate_per_s", "output_tokens_mean", "n_gpus"]].drop_duplicates(keys)
    wide = wide.reset_index().merge(load, on=keys, how="left", validate="many_to_one")
    offline = wide["scenario_label"].eq("offline").to_numpy()
    for kind in ("true", "pred"):
        power, itl = wide.get(f"power_y_{kind}", np.nan), wide.get(f"itl_y_{kind}", np.nan)
        tokens_per_s = physics.system_tokens_per_s(offline, itl, wide["request_rate_per_s"], wide["output_tokens_mean"])
        wide[f"energy_y_{kind}"] = physics.energy_per_token_j(power, wide["n_gpus"].to_numpy(dtype=float), tokens_per_s)
    cols = {"power_y_true": "power_measured_w", "power_y_pred": "power_predicted_w",
            "itl_y_true": "itl_measured_ms", "itl_y_pred": "itl_predicted_ms",
            "energy_y_true": "energy_measured_j", "energy_y_pred": "energy_predicted_j",
            f"power_y_lo_{BAND}": "power_lo_w", f"power_y_hi_{BAND}": "power_hi_w",
            f"itl_y_lo_{BAND}": "itl_lo_ms", f"itl_y_hi_{BAND}": "itl_hi_ms"}
    present = [c for c in cols if c in wide.columns]
    out = (wide.groupby(["model", "scenario_label", "gpu"], observed=True)[present].mean().rename(columns=cols).reset_index()
           .rename(columns={"scenario_label": "scenario"}))
    for c in ("itl_measured_ms", "itl_predicted_ms", "itl_lo_ms", "itl_hi_ms"):
        if c in out:
            out[c] *= 1e3  # s -> ms
    for t, unit in (("power", "w"), ("itl", "ms")):
        # whether the measured mean falls inside the predicted 80 % band (None: the model gives no band)
        if f"{t}_lo_{unit}" in out:
            lo, hi, m = out[f"{t}_lo_{unit}"], out[f"{t}_hi_{unit}"], out[f"{t}_measured_{unit}"]
            out[f"{t}_inside_band"] = ((m >= lo) & (m <= hi)).astype(object).where(lo.notna() & hi.notna(), None)
    for t in ("power", "itl"):
        if f"{t}_measured_{'w' if t == 'power' else 'ms'}" in out:
            unit = "w" if t == "power" else "ms"
            out[f"{t}_error_pct"] = 100 * (out[f"{t}_predicted_{unit}"] / out[f"{t}_measured_{unit}"] - 1)
    if "itl_measured_ms" in out:
        # Offline "ITL" is duration / all generated tokens (an inverse throughput), not a per-stream latency.
        server = out["scenario"].ne("offline")
        for kind in ("measured", "predicted"):
            meets = out[f"itl_{kind}_ms"] <= max_itl_ms
            out[f"meets_{kind}"] = meets.astype(object).where(server, None)
    order = {s: i for i, s in enumerate(scenarios)}
    out["_s"] = out["scenario"].map(order)
    out = out.sort_values(["model", "_s", "power_measured_w"]).drop(columns="_s").reset_index(drop=True)
    out["model"] = out["model"].astype(str)
    return out


@dataclass(frozen=True)
class Verdict:
    claim: str
    measured: str
    predicted: str
    verdict: str  # claims: "holds" / "does not hold" on the measured data; picks: "agree" / "differ"


def _row(table: pd.DataFrame, gpu: str, scenario: str) -> pd.Series | None:
    r = table[(table["gpu"] == gpu) & (table["scenario"] == scenario)]
    return r.iloc[0] if len(r) else None


def _pick(table: pd.DataFrame, scenario: str, kind: str) -> str:
    """The least-energy GPU meeting the target by measured or predicted figures."""
    s = table[(table["scenario"] == scenario) & table[f"meets_{kind}"].eq(True)]
    if s.empty:
        return "none"
    col = "energy_measured_j" if kind == "measured" else "energy_predicted_j"
    return str(s.sort_values(col).iloc[0]["gpu"])


def _holds(ok) -> str:
    return "holds" if bool(ok) else "does not hold"


def verdicts(table: pd.DataFrame, max_itl_ms: float) -> list[Verdict]:
    """The paper's claims checked on one model's case table: L4 too slow at low load; H100 NVL vs A30 power;
    and, per scenario, the least-energy GPU meeting the target by measured and by predicted figures."""
    out = []
    l4 = _row(table, PAPER_GPUS["slow"], SERVER_LOADS[0])
    if l4 is not None:
        out.append(Verdict(
            f"L4 misses the {max_itl_ms:g} ms ITL target at low load",
            f"{l4['itl_measured_ms']:.1f} ms", f"{l4['itl_predicted_ms']:.1f} ms",
            _holds(l4["itl_measured_ms"] > max_itl_ms)))
    for scen in SERVER_LOADS:
        big, small = _row(table, PAPER_GPUS["big"], scen), _row(table, PAPER_GPUS["small"], scen)
        if big is None or small is None:
            continue
        meas = big["power_measured_w"] / small["power_measured_w"] - 1
        pred = big["power_predicted_w"] / small["power_predicted_w"] - 1
        out.append(Verdict(
            f"{scen}: H100 NVL draws > {100 * PAPER_POWER_GAP:.0f} % more power (and energy per token) than an A30 "
            f"that meets {max_itl_ms:g} ms",
            f"{100 * meas:+.0f} % (A30 ITL {small['itl_measured_ms']:.1f} ms)",
            f"{100 * pred:+.0f} % (A30 ITL {small['itl_predicted_ms']:.1f} ms)",
            _holds(meas > PAPER_POWER_GAP and small["itl_measured_ms"] <= max_itl_ms)))
    for scen in SERVER_LOADS:
        if (table["scenario"] == scen).any():
            m, p = _pick(table, scen, "measured"), _pick(table, scen, "predicted")
            out.append(Verdict(f"{scen}: least-energy GPU meeting {max_itl_ms:g} ms", m, p,
                               "agree" if m == p else "differ"))
    return out


def load_case(llm: str, max_itl_ms: float, scenarios: tuple[str, ...] = SERVER_LOADS,
              models: list[str] | None = None, root: Path | None = None) -> tuple[pd.DataFrame, str]:
    """(case table, the LLM's catalog key) from the LOGO predictions and the measurement table under `root`."""
    from wattgpu.catalogs.llms import load_llm_catalog
    from wattgpu.errors import WattgpuError
    from wattgpu.io import read_table

    measurements = paths.resolve(paths.MEASUREMENTS, root)
    if not measurements.exists():
        raise WattgpuError(f"{measurements} not found: run `dvc repro ingest` first")
    pred = load_logo_predictions(root)
    if pred.empty:
        raise WattgpuError("no LOGO predictions under reports/: run `dvc repro evaluate@logo` first")
    pred = choose_models(pred, models)
    table_path = paths.resolve(paths.LLM_CATALOG_TABLE, root)
    key = load_llm_catalog(table_path).resolve(llm) if table_path.exists() else llm
    table = case_table(pred, read_table(measurements), key, max_itl_ms, scenarios)
    if table.empty:
        raise WattgpuError(f"no LOGO predictions for {key!r} in {', '.join(scenarios)} (it was not measured there)")
    return table, key
