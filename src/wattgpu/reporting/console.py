"""Terminal views of the CLI's answers (plain text and rich tables). Renders what wattgpu.planning and the stage
reports computed; computes nothing."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
from rich.console import Console
from rich.table import Table

from wattgpu import workload
from wattgpu.evaluation.casestudy import verdicts
from wattgpu.planning import planner
from wattgpu.planning.service import PredictAnswer, RecommendAnswer, memory_rule


def console(min_width: int = 150) -> Console:
    return Console(width=max(min_width, Console().width))


def to_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, default=str)


def predict_json(a: PredictAnswer) -> str:
    return to_json({"request": a.request, "workload": a.workload, "prediction": a.prediction, "memory": a.memory,
                    "extrapolation": a.extrapolation, "models": a.models})


def predict_text(a: PredictAnswer) -> str:
    row = a.prediction
    coverage = ("not recorded with these models" if a.extrapolation is None else
                ("EXTRAPOLATING: " + "; ".join(a.extrapolation)) if a.extrapolation
                else "inside the range of the measured GPUs, LLMs and workloads")
    lines = [
        ("GPU", f"{row['gpu']}  ({a.gpu_origin})"),
        ("LLM", f"{row['llm']}  ({a.llm_origin})"),
        ("workload", workload.describe(a.workload, row.get("concurrency"))),
        ("power", f"{row['power_w']:.1f} W per GPU"),
        ("ITL", f"{row['itl_ms']:.2f} ms per request  ({row['tokens_per_s']:.1f} tokens/s per request stream)"),
        ("throughput", f"{row['system_tokens_per_s']:.1f} tokens/s in all (requests in flight / ITL)"
         + ("  OVERLOADED: the arrivals outpace the replica; requests queue at the engine's cap"
            if row.get("overloaded") else "")),
        ("energy", f"{row['energy_per_token_j']:.3g} J per generated token"),
        ("memory", a.memory),
        ("coverage", coverage),
        ("models", ", ".join(f"{k}: {v}" for k, v in a.models.items())),
    ]
    return "\n".join(f"{k:<11} {v}" for k, v in lines if v)


def recommend_json(a: RecommendAnswer, margin_pct: float) -> str:
    rec = a.recommendation
    records = rec.table.astype(object).where(rec.table.notna(), None).to_dict("records")
    chosen = (planner.STATUS_PICK, planner.STATUS_OK)
    return to_json({
        "llm": a.llm, "llm_origin": a.llm_origin, "workload": workload.filled(a.workload), "max_itl_ms": rec.max_itl_ms,
        "itl_margin_pct": margin_pct, "memory_rule": memory_rule(workload.filled(a.workload)).describe(), "models": a.models, "pick": rec.pick,
        "summary": rec.summary, "near_target": a.near_target, "itl_error_pct": round(100 * a.itl_error, 1),
        "extrapolation": {"workload_and_llm": a.extrapolation_shared, "gpus": a.extrapolation_gpus},
        "ranking": [r for r in records if r["status"] in chosen],
        "excluded": [r for r in records if r["status"] not in chosen],
    })


def _num(v, spec: str) -> str:
    return "" if pd.isna(v) else format(v, spec)


def print_recommendation(a: RecommendAnswer) -> None:
    rec = a.recommendation
    margin = f" with a {100 * rec.margin:g} % safety margin" if rec.margin else ""
    table = Table(title=f"{a.llm} | {workload.describe(a.workload)} | ITL target {rec.max_itl_ms:g} ms{margin}",
                  title_justify="left")
    for col, just in (("#", "right"), ("GPU", "left"), ("status", "left"), ("J/token", "right"), ("W/GPU", "right"),
                      ("ITL ms", "right"), ("margin", "right"), ("tok/s", "right"), ("GB need/usable", "right"),
                      ("reason", "left")):
        table.add_column(col, justify=just, overflow="fold")
    styles = {planner.STATUS_PICK: "bold green", planner.STATUS_OK: "", planner.STATUS_SLOW: "yellow",
              planner.STATUS_NO_FIT: "dim"}
    for _, r in rec.table.iterrows():
        table.add_row(
            "" if pd.isna(r["rank"]) else str(r["rank"]), r["gpu"], r["status"] + (" *" if r["gpu"] in a.near_target else ""),
            _num(r["energy_per_token_j"], ".3g"), _num(r["power_w"], ".0f"), _num(r["itl_ms"], ".1f"),
            _num(r["itl_margin_pct"], "+.0f") + ("%" if r["fits"] else ""), _num(r["tokens_per_s"], ".0f"),
            f"{r['need_gb']:.1f}/{r['usable_gb']:.1f}", r["reason"], style=styles.get(r["status"], ""))
    out = console()
    out.print(table)
    out.print(rec.summary)
    if a.near_target:
        out.print(f"* predicted ITL within {100 * a.itl_error:.0f} % of the target (the ITL model's server MdAPE on "
                  f"unseen GPUs): {', '.join(a.near_target)}; the verdict could go either way.")
    if a.extrapolation_shared:
        out.print(f"EXTRAPOLATING for every GPU (outside the measured data): {'; '.join(a.extrapolation_shared)}.")
    if a.extrapolation_gpus:
        out.print("extrapolated GPUs (specs outside the range of the measured GPUs'): "
                  + "; ".join(f"{k} ({', '.join(ns)})" for k, ns in a.extrapolation_gpus.items()) + ".")
    out.print(f"memory rule: {memory_rule(workload.filled(a.workload)).describe()}.  J/token = W/GPU x GPUs / "
              "tokens per s (requests in flight / ITL).")
    out.print("models: " + ", ".join(f"{k}: {v}" for k, v in a.models.items()))


def print_casestudy(table: pd.DataFrame, llm: str, max_itl_ms: float) -> None:
    out = console()
    for model, t in table.groupby("model", sort=False):
        rt = Table(title=f"{llm}: {model}, each GPU predicted by a model trained without it (LOGO)", title_justify="left")
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
    table = Table(title="Nested MdAPE: rows no training, tuning or selection saw", title_justify="left")
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
    table = Table(title=f"{len(frame)} {kind}")
    for c in cols:
        table.add_column(c, overflow="fold")
    for _, r in frame[cols].iterrows():
        table.add_row(*["" if v is None or v != v else str(v) for v in r])
    Console(width=200).print(table)


def entry_text(data: dict[str, Any]) -> str:
    width = max(len(k) for k in data)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in data.items())
