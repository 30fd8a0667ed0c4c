"""The planner page's answers: `ask` is `wattgpu predict --json`, `recommend` is `wattgpu recommend --json` (the same
wattgpu.planning.service calls, the same JSON), and `compare` adds curves against the requests in flight, predicted
in one batch by the same Predictor (validated once, `Predictor.predict_rows`). Each also gives its CSV table."""

from __future__ import annotations

import json
import math
import threading
from typing import Any

import numpy as np
import pandas as pd

from wattgpu import fields, workload
from wattgpu.modeling import coverage
from wattgpu.modeling.store import load_predictor
from wattgpu.planning import planner, resolve, service
from wattgpu.planning.models import ModelSet
from wattgpu.reporting import console
from wattgpu.request import check_workload, validate
from wattgpu.ui import question
from wattgpu.ui.question import Question

CURVE_POINTS = 32  # requests-in-flight values per GPU, from 1 to its memory limit
LOAD_FIELDS = ("scenario", "request_rate_per_s", "concurrency")  # what a curve replaces by its requests in flight
CURVE_COLUMNS = ("concurrency", "power_w", "power_w_lo", "power_w_hi", "itl_ms", "itl_ms_lo", "itl_ms_hi",
                 "tokens_per_s", "system_tokens_per_s", "system_tokens_per_s_lo", "system_tokens_per_s_hi",
                 "energy_per_token_j", "energy_per_token_j_lo", "energy_per_token_j_hi", "overloaded", "interval")


def concurrency_grid(limit: float, points: int = CURVE_POINTS) -> list[float]:
    """`points` whole numbers of requests in flight from 1 to `limit`'s whole part (the memory limit; at most the
    request field's bound), spaced evenly on a log scale where they can be and one apart where they cannot (every
    number up to a `limit` under `points`). Each stays within the limit: round(top^(k/(n-1))) + (n-1-k) <= top."""
    top = int(max(1.0, math.floor(min(limit, fields.WORKLOAD["concurrency"].hi))))
    if top <= points:
        return [float(c) for c in range(1, top + 1)]
    grid: list[int] = []
    for g in np.geomspace(1.0, top, points):
        grid.append(max(round(g), grid[-1] + 1) if grid else 1)
    return [float(c) for c in grid]


def _memory_gb(g: resolve.Resolved) -> float:
    return float(g.spec["gpu_memory_gb"] if isinstance(g.spec, dict) else g.spec.memory_gb)


def _records(frame: pd.DataFrame) -> dict[str, list]:
    return {c: frame[c].tolist() for c in CURVE_COLUMNS}


class Planner:
    """The registered champions, loaded once per process: the ModelSet `predict` and `recommend` answer from, and
    the Predictor the prediction cache would load from the same folder, kept for the curves' batches."""

    def __init__(self, models: ModelSet):
        self.models = models
        self.predictor = load_predictor(models.folder / "power", models.folder / "itl")
        self.lock = threading.Lock()  # one question at a time: the page asks one, the models are shared

    def ask(self, q: Question) -> tuple[dict[str, Any], pd.DataFrame]:
        """`wattgpu predict --json`'s answer (with the workload in words), and one CSV row per interval level."""
        m = self.models
        with self.lock:
            a = service.predict_one(m, question.gpu(q, m.gpus), question.llm(q, m.llms), q.workload(),
                                    q.level_fractions())
        body = json.loads(console.predict_json(a))
        body.update(workload_text=workload.describe(a.workload, a.prediction.get("concurrency")),
                    origins={"gpu": a.gpu_origin, "llm": a.llm_origin})
        point = {k: v for k, v in a.prediction.items() if k not in (*planner.BOUND_COLUMNS, "level", "interval")}
        extrapolation = "; ".join(a.extrapolation or [])
        table = pd.DataFrame([{**point, **{k: v for k, v in band.items() if k != "note"}, "interval": band["note"],
                               "workload": body["workload_text"], "memory": a.memory, "extrapolation": extrapolation,
                               **{f"model_{t}": v for t, v in a.models.items()}} for band in a.intervals])
        return body, table

    def compare(self, q: Question) -> tuple[dict[str, Any], pd.DataFrame]:
        """Curves for up to 8 GPUs against the requests in flight, at the first interval level."""
        m = self.models
        gpus, llm = question.compared_gpus(q, m.gpus), question.llm(q, m.llms)
        level = q.level_fractions()[0]
        with self.lock:
            curves, table = self.curves(gpus, llm, q.workload(), level)
        return {"llm": llm.spec.key, "level": level, "max_itl_ms": q.max_itl_ms, "curves": curves,
                "workload_text": _curve_words(q.workload()), "models": m.versions}, table

    def recommend(self, q: Question) -> tuple[dict[str, Any], pd.DataFrame]:
        """`wattgpu recommend --json`'s answer, with the curves of the first 8 GPUs that hold the model (the pick
        first) at the confidence level."""
        m = self.models
        llm, w = question.llm(q, m.llms), q.workload()
        names, constraints, costs = question.recommend_names(q), q.constraints(), q.costs()
        with self.lock:
            a = service.recommend(m, llm, w, constraints, names, costs)
            table = a.recommendation.table
            project = resolve.project_gpus()
            top = [resolve.resolve_gpu(k, m.gpus, project) for k in table.loc[table["fits"].astype(bool), "gpu"]]
            curves, _ = self.curves(top[:question.MAX_COMPARED], llm, w, constraints.confidence)
        body = json.loads(console.recommend_json(a))
        body.update(workload_text=workload.describe(a.workload), curves=curves, curve_words=_curve_words(w))
        return body, table

    def curves(self, gpus: list[resolve.Resolved], llm: resolve.Resolved, w: dict[str, Any],
               level: float) -> tuple[list[dict[str, Any]], pd.DataFrame]:
        """Per GPU: the memory rule (service.memory_limit: the requests its KV cache holds) and, where the model
        fits, predictions at `concurrency_grid(limit)` requests in flight with the rest of `w`; every GPU's rows
        validated and predicted in one batch. Also the long table (one row per GPU and point)."""
        base = {k: v for k, v in w.items() if k not in LOAD_FIELDS}
        check_workload({**base, "concurrency": 1.0})
        if not gpus:
            return [], pd.DataFrame(columns=["gpu", *CURVE_COLUMNS])
        fit = service.memory_fits([question.label(g) for g in gpus], [_memory_gb(g) for g in gpus], llm.spec, base)
        out, requests, owner = [], [], []
        for i, (g, (_, f)) in enumerate(zip(gpus, fit.iterrows())):
            limit = float(f["held"]) if f["fits"] else None
            grid = concurrency_grid(limit) if limit is not None else []
            requests += [{**g.fields, **llm.fields, **base, "concurrency": c, "level": level} for c in grid]
            owner += [i] * len(grid)
            out.append({"gpu": question.label(g), "origin": g.origin, "fits": bool(f["fits"]), "reason": f["reason"],
                        "need_gb": float(f["need_gb"]), "usable_gb": float(f["usable_gb"]), "memory_limit": limit})
        if not requests:
            return out, pd.DataFrame(columns=["gpu", *CURVE_COLUMNS])
        rows = validate(requests, self.models.gpus, self.models.llms)
        pred = planner.with_bounds(self.predictor.predict_rows(rows))
        owner = np.asarray(owner)
        ranges = self.models.training_ranges
        for i, entry in enumerate(out):
            at = np.flatnonzero(owner == i)
            if not len(at):
                continue
            entry["points"] = _records(pred.iloc[at])
            ends = (rows.iloc[at[0]], rows.iloc[at[-1]])  # the fewest and the most requests in flight
            entry["extrapolation"] = list(dict.fromkeys(
                note for r in ends for note in coverage.outside(coverage.request_values(r), ranges))) if ranges else None
        return out, pred[["gpu", *CURVE_COLUMNS]]


def _curve_words(w: dict[str, Any]) -> str:
    """The curves' workload in words: the question's, with the requests in flight on the x axis."""
    base = {k: v for k, v in w.items() if k not in LOAD_FIELDS}
    rest = workload.describe({**base, "concurrency": 1}).split(", ", 1)[1]  # describe's first part is the load
    return f"1 to the memory limit requests in flight, {rest}"
