"""Terminal views of the CLI's answers (plain text and rich tables). Renders what wattgpu.planning and the stage
reports computed; computes nothing."""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

import pandas as pd

from wattgpu import workload
from wattgpu.planning import planner
from wattgpu.planning.service import PredictAnswer, RecommendAnswer, memory_rule


def console(min_width: int = 150, width: int | None = None):
    """A rich console at least `min_width` wide (or exactly `width`). rich is imported where a table is drawn, not at
    the top: `predict`'s plain text never needs it (~15 ms of a cached `wattgpu predict`)."""
    from rich.console import Console

    return Console(width=width or max(min_width, Console().width))


@contextlib.contextmanager
def progress_bar(label: str):
    """A transient progress bar on stderr; yields `advance(n)`."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), console=Console(stderr=True),
                  transient=True) as bar:
        task = bar.add_task(label, total=None)
        yield lambda n: bar.advance(task, n)


def _table(title: str, **options):
    from rich.table import Table

    return Table(title=title, **options)


def to_json(obj: Any) -> str:
    return json.dumps(_null_nan(obj), indent=2, default=str)


def _null_nan(obj: Any) -> Any:
    """NaN (no bound, no value) as JSON null: strict JSON has no NaN."""
    if isinstance(obj, dict):
        return {k: _null_nan(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_null_nan(v) for v in obj]
    return None if isinstance(obj, float) and math.isnan(obj) else obj


def _pct(level: float) -> str:
    return f"{100 * level:g} %"


def predict_json(a: PredictAnswer) -> str:
    intervals = [{k: v for k, v in band.items() if k != "note"} for band in a.intervals]
    note = "; ".join(dict.fromkeys(f"{_pct(b['level'])}: {b['note']}" if len(a.intervals) > 1 else b["note"]
                                   for b in a.intervals if b["note"]))
    return to_json({"request": a.request, "workload": a.workload, "prediction": a.prediction, "intervals": intervals,
                    "interval_note": note, "memory": a.memory, "extrapolation": a.extrapolation, "defaults": a.defaults,
                    "models": a.models})


def _band(a: PredictAnswer, key: str, spec: str, unit: str, caveat: str = "") -> str:
    """"  (80 %: lo-hi unit; 90 %: ...)" for the levels with a band; "" when none has one (NaN bounds, or bounds
    that coincide: a Poisson load's throughput is its arrival rate whatever the ITL)."""
    parts = [f"{_pct(b['level'])}: {format(b[key + '_lo'], spec)}-{format(b[key + '_hi'], spec)}{unit}"
             for b in a.intervals if b[key + "_lo"] < b[key + "_hi"]]
    return f"  ({'; '.join(parts)}{caveat})" if parts else ""


def predict_text(a: PredictAnswer) -> str:
    row = a.prediction
    coverage = ("not recorded with these models" if a.extrapolation is None else
                ("EXTRAPOLATING: " + "; ".join(a.extrapolation)) if a.extrapolation
                else "inside the range of the measured GPUs, LLMs and workloads")
    lines = [
        ("GPU", f"{row['gpu']}  ({a.gpu_origin})"),
        ("LLM", f"{row['llm']}  ({a.llm_origin})"),
        ("workload", workload.describe(a.workload, row.get("concurrency"))),
        ("defaults", "; ".join(a.defaults)),
        ("power", f"{row['power_w']:.1f} W per GPU" + _band(a, "power_w", ".0f", " W")),
        ("ITL", f"{row['itl_ms']:.2f} ms per request  ({row['tokens_per_s']:.1f} tokens/s per request stream)"
         + _band(a, "itl_ms", ".1f", " ms")),
        ("throughput", f"{row['system_tokens_per_s']:.1f} tokens/s in all (requests in flight / ITL)"
         + _band(a, "system_tokens_per_s", ".1f", " tokens/s")
         + ("  OVERLOADED: the arrivals outpace the replica; requests queue at the engine's cap"
            if row.get("overloaded") else "")),
        ("energy", f"{row['energy_per_token_j']:.3g} J per generated token"
         + _band(a, "energy_per_token_j", ".3g", " J", "; conservative: the power and throughput bounds combined")),
        ("interval", _interval_line(a)),
        ("memory", a.memory),
        ("coverage", coverage),
        ("models", ", ".join(f"{k}: {v}" for k, v in a.models.items())),
    ]
    return "\n".join(f"{k:<11} {v}" for k, v in lines if v)


def _interval_line(a: PredictAnswer) -> str:
    """The models' interval notes ("wider: ...", "abstain: ..."), or why there is no interval at all."""
    notes = list(dict.fromkeys(f"{_pct(b['level'])}: {b['note']}" if len(a.intervals) > 1 else b["note"]
                               for b in a.intervals if b["note"]))
    if notes:
        return "; ".join(notes)
    bounded = any(not math.isnan(b[f"{t}_{side}"]) for b in a.intervals for t in ("power_w", "itl_ms")
                  for side in ("lo", "hi"))
    return "" if bounded else "none for power and ITL: these models carry no interval calibration"


def recommend_json(a: RecommendAnswer) -> str:
    rec, c, k = a.recommendation, a.recommendation.constraints, a.recommendation.costs
    records = rec.table.astype(object).where(rec.table.notna(), None).to_dict("records")
    return to_json({
        "llm": a.llm, "llm_origin": a.llm_origin, "workload": workload.filled(a.workload), "max_itl_ms": rec.max_itl_ms,
        "confidence_pct": round(100 * c.confidence, 4), "max_power_w": c.max_power_w,
        "power_budget_scope": c.power_scope, "objective": k.objective, "pue": k.pue,
        "price_per_kwh": k.price_per_kwh, "gpu_price_per_hour": k.gpu_price_per_hour,
        "memory_rule": memory_rule(workload.filled(a.workload)).describe(), "models": a.models, "pick": rec.pick,
        "summary": rec.summary, "meets_only_at_point_estimate": rec.gpus(planner.STATUS_POINT_ONLY),
        "over_power_budget": rec.gpus(planner.STATUS_OVER_POWER),
        "near_target": a.near_target, "itl_error_pct": round(100 * a.itl_error, 1),
        "extrapolation": {"workload_and_llm": a.extrapolation_shared, "gpus": a.extrapolation_gpus},
        "defaults": a.defaults,
        "ranking": [r for r in records if r["status"] in planner.CHOSEN],
        "excluded": [r for r in records if r["status"] not in planner.CHOSEN],
    })


def _num(v, spec: str) -> str:
    return "" if pd.isna(v) else format(v, spec)


def _ranged(r: pd.Series, col: str, spec: str) -> str:
    """"value (lo-hi)", the interval left out where it is NaN."""
    band = "" if pd.isna(r[f"{col}_lo"]) or pd.isna(r[f"{col}_hi"]) else \
        f" ({format(r[f'{col}_lo'], spec)}-{format(r[f'{col}_hi'], spec)})"
    return _num(r[col], spec) + band if pd.notna(r[col]) else ""


def recommendation_text(a: RecommendAnswer) -> str:
    """The ranking as rich draws it on this terminal (its width and colours), as text to print."""
    rec, c, k = a.recommendation, a.recommendation.constraints, a.recommendation.costs
    lvl = f"{100 * c.confidence:g} %"
    budget = f" | power budget {c.budget_phrase()}" if c.max_power_w is not None else ""
    pue = f" | PUE {k.pue:g}" if k.pue != 1 else ""
    table = _table(f"{a.llm} | {workload.describe(a.workload)} | ITL target {rec.max_itl_ms:g} ms at the {lvl} "
                  f"upper bound{budget}{pue} | ranked by {k.objective}; ranges: {lvl} intervals", title_justify="left")
    cost_col = "total_cost_per_mtok" if k.objective == "total-cost" or (
        k.price_per_kwh is not None and k.gpu_price_per_hour is not None) else (
        "energy_cost_per_mtok" if k.price_per_kwh is not None else
        "gpu_cost_per_mtok" if k.gpu_price_per_hour is not None or rec.table["gpu_price_per_hour"].notna().any()
        else None)
    cost_head = {"total_cost_per_mtok": "cost/Mtok", "energy_cost_per_mtok": "energy cost/Mtok",
                 "gpu_cost_per_mtok": "GPU cost/Mtok", None: None}[cost_col]
    for col, just in (("#", "right"), ("GPU", "left"), ("status", "left"), ("kWh/Mtok", "right"),
                      (cost_head, "right"), ("W/GPU", "right"), ("ITL ms", "right"), ("margin", "right"),
                      ("replica tok/s", "right"), ("GB need/usable", "right"), ("reason", "left")):
        if col is not None:
            table.add_column(col, justify=just, overflow="fold")
    styles = {planner.STATUS_PICK: "bold green", planner.STATUS_OK: "", planner.STATUS_POINT_ONLY: "yellow",
              planner.STATUS_OVER_POWER: "yellow", planner.STATUS_SLOW: "yellow", planner.STATUS_NO_FIT: "dim"}
    for _, r in rec.table.iterrows():
        cost = [_ranged(r, cost_col, ".3g")] if cost_col else []
        table.add_row(
            "" if pd.isna(r["rank"]) else str(r["rank"]), r["gpu"],
            r["status"] + (" *" if r["gpu"] in a.near_target else ""), _ranged(r, "energy_kwh_per_mtok", ".3g"), *cost, _ranged(r, "power_w", ".0f"), _ranged(r, "itl_ms", ".1f"),
            _num(r["itl_margin_pct"], "+.0f") + ("%" if r["fits"] else ""), _num(r["system_tokens_per_s"], ".0f"),
            f"{r['need_gb']:.1f}/{r['usable_gb']:.1f}", r["reason"], style=styles.get(r["status"], ""))
    out = console()
    with out.capture() as drawn:
        _print_recommendation(out, a, table, lvl)
    return drawn.get()


def _print_recommendation(out, a: RecommendAnswer, table, lvl: str) -> None:
    rec = a.recommendation
    out.print(table)
    out.print(rec.summary)
    if a.defaults:
        out.print(f"defaults: {'; '.join(a.defaults)}.")
    if a.near_target:
        out.print(f"* no ITL interval, and the predicted ITL within {100 * a.itl_error:.0f} % of the target (the ITL "
                  f"model's server MdAPE on unseen GPUs): {', '.join(a.near_target)}; the verdict could go either way.")
    if a.extrapolation_shared:
        out.print(f"EXTRAPOLATING for every GPU (outside the measured data): {'; '.join(a.extrapolation_shared)}.")
    if a.extrapolation_gpus:
        out.print("extrapolated GPUs (specs outside the range of the measured GPUs'): "
                  + "; ".join(f"{k} ({', '.join(ns)})" for k, ns in a.extrapolation_gpus.items()) + ".")
    out.print(f"memory rule: {memory_rule(workload.filled(a.workload)).describe()}.  kWh/Mtok = W/GPU x GPUs / "
              "tokens per s (requests in flight / ITL) x 1e6 / 3.6e6 x PUE, per million generated tokens; its range "
              "combines the power and throughput bounds (conservative). margin: the target's headroom over the "
              f"{lvl} upper ITL bound (the point estimate where there is none).")
    out.print("models: " + ", ".join(f"{k}: {v}" for k, v in a.models.items()))


def print_casestudy(table: pd.DataFrame, llm: str, max_itl_ms: float) -> None:
    from wattgpu.evaluation.casestudy import verdicts  # only this view needs the case study's module

    out = console()
    for model, t in table.groupby("model", sort=False):
        rt = _table(f"{llm}: {model}, each GPU predicted by a model trained without it (LOGO)", title_justify="left")
        for c in ("GPU", "scenario", "W meas.", "W pred.", "ITL ms meas.", "ITL ms pred.", "J/tok meas.",
                  "J/tok pred.", f"<= {max_itl_ms:g} ms meas./pred."):
            rt.add_column(c, justify="left" if c in ("GPU", "scenario") else "right")
        for _, r in t.iterrows():
            rt.add_row(r["gpu"], r["scenario"], f"{r['power_measured_w']:.0f}", f"{r['power_predicted_w']:.0f}",
                       f"{r['itl_measured_ms']:.1f}", f"{r['itl_predicted_ms']:.1f}", f"{r['energy_measured_j']:.2f}",
                       f"{r['energy_predicted_j']:.2f}",
                       f"{'yes' if r['meets_measured'] else 'no'} / {'yes' if r['meets_predicted'] else 'no'}")
        out.print(rt)
        for v in verdicts(t, max_itl_ms):
            out.print(f"- {v.claim}: measured {v.measured}, predicted {v.predicted} -> {v.verdict}")


def print_results(verdict: dict, registry: dict | None) -> None:
    table = _table("Nested MdAPE: rows no training, tuning or selection saw", title_justify="left")
    for col in ("target", "regime", "scenario", "nested selection", "paper replica", "beats replica"):
        table.add_column(col, justify="left" if col in ("target", "regime", "scenario") else "right")
    for target in ("power", "itl"):
        for regime, by in verdict.get(target, {}).items():
            for scen, c in by.items():
                table.add_row(target, regime.upper(), scen, f"{c['nested_mdape']:.1f} %", f"{c['replica_mdape']:.1f} %",
                              "yes" if c["beats_replica"] else "NO")
    out = console(100)
    out.print(table)
    for target, e in (registry or {}).items():
        out.print(f"{e['name']}: champion v{e['champion_version']} (in models/{target}/); newest v{e['version']}: "
                  f"{e['decision']}")
    out.print("every figure: `dvc metrics show`; every algorithm: reports/search/leaderboard.md")


def print_catalog(frame: pd.DataFrame, kind: str) -> None:
    cols = (["key", "vendor", "architecture", "release_year", "tdp_w", "memory_gb", "memory_bandwidth_gb_s",
             "fp16_tensor_tflops"] if kind == "gpus" else
            ["key", "family", "total_params_b", "active_params_b", "num_layers", "hidden_size", "num_kv_heads", "is_moe"])
    table = _table(f"{len(frame)} {kind}")
    for c in cols:
        table.add_column(c, overflow="fold")
    for _, r in frame[cols].iterrows():
        table.add_row(*["" if v is None or v != v else str(v) for v in r])
    console(width=200).print(table)


def entry_text(data: dict[str, Any]) -> str:
    width = max(len(k) for k in data)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in data.items())
