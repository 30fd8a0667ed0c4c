"""What `wattgpu predict`, `recommend` and `precompute` do, as functions returning data (the CLI formats them).

Every path runs one way: resolve names and specs -> request fields -> validate once (wattgpu.request, against the
models' catalogs) -> predict through the cache -> derived outputs -> extrapolation notes from the same rows.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from wattgpu import physics, workload
from wattgpu.errors import WattgpuError, os_error_line
from wattgpu.modeling import coverage
from wattgpu.planning import planner, resolve
from wattgpu.planning.cache import PredictionCache
from wattgpu.planning.models import ModelSet
from wattgpu.request import Validated, check_workload, read_csv, validate, validate_batch, validate_one


def interval_bounds(row: dict[str, Any], level: float) -> dict[str, Any]:
    """The level and the bounds of one prediction row (NaN for a bound it lacks: models without calibration), and
    its note."""
    bounds = {k: math.nan if row.get(k) is None else float(row[k])
              for k in planner.BOUND_COLUMNS if not k.startswith("itl_s_")}
    return {"level": level, **bounds, "note": str(row.get("interval") or "")}


@dataclass
class PredictAnswer:
    request: dict[str, Any]
    workload: dict[str, Any]  # with the defaults applied
    prediction: dict[str, Any]  # with the bounds at the first level
    intervals: list[dict[str, Any]]  # per level asked: level, bounds, note (interval_bounds)
    gpu_origin: str
    llm_origin: str
    memory: str
    extrapolation: list[str] | None  # None: the models recorded no training ranges
    models: dict[str, str]
    defaults: list[str] = dataclasses.field(default_factory=list)  # defaults that shaped it (workload.default_notes)


def memory_line(gpu: resolve.Resolved, llm: resolve.Resolved, w: dict[str, Any]) -> str:
    """The planner's memory rule for one GPU, as one line ("" for an LLM without a KV-cache size)."""
    spec = llm.spec
    if not hasattr(spec, "kv_cache_bytes_per_token"):
        return ""
    memory_gb = float(gpu.spec["gpu_memory_gb"] if isinstance(gpu.spec, dict) else gpu.spec.memory_gb)
    fit = memory_fits(["x"], [memory_gb], spec, w).iloc[0]
    if not fit["fits"]:
        return f"DOES NOT FIT: {fit['reason']}"
    return (f"fits: needs {fit['need_gb']:.1f} GB of {fit['usable_gb']:.1f} GB usable ({fit['rule']}); the KV "
            f"cache holds {fit['held']:,.0f} such requests at once")


def memory_fits(names: Sequence[str], memory_gb: Sequence[float], spec, w: dict[str, Any]) -> pd.DataFrame:
    """Per GPU (`names`, memory per GPU): planner.memory_fit of the LLM (`spec`) under its memory rule at the
    workload `w` (defaults filled), with `held`, the requests its KV cache holds at once (memory_limit; NaN where
    the model does not fit), and `rule`, the rule in words. The one memory check of predict, recommend and the page."""
    wf = workload.filled({"precision": spec.weight_precision, **w})
    rule, size, n = memory_rule(wf, spec), llm_size(spec, wf), int(wf["n_gpus"])
    fit = planner.memory_fit(pd.DataFrame({"gpu": list(names), "memory_gb": [float(m) for m in memory_gb]}), size,
                             wf["prompt_tokens"] + wf["output_tokens"], n, rule)
    held = [memory_limit(float(m), n, size, rule) if ok else math.nan for m, ok in zip(memory_gb, fit["fits"])]
    return fit.assign(held=held, rule=rule.describe(size.replicated_gb, n))


def memory_limit(memory_gb: float, n_gpus: int, size: planner.LlmSize, rule: planner.MemoryRule) -> float:
    """How many requests of `size`'s KV cache the replica holds at once beside its weights (physics.kv_fit_sequences
    under `rule`; DP attention's attention weights held again on every further GPU)."""
    weights = physics.weights_gb(size.total_params_b, rule.bytes_per_param) + size.replicated_gb * (n_gpus - 1)
    return float(physics.kv_fit_sequences(memory_gb, n_gpus, weights, size.kv_bytes_per_request,
                                          rule.usable_fraction))


def llm_size(spec, wf: dict[str, Any]) -> planner.LlmSize:
    """What the memory rule needs of an LLM (`spec`) under a filled workload: KV bytes per token and per request
    (prompt + output tokens, windows capped, a hybrid's fixed state) at the KV cache's precision, and under DP
    attention the attention weights (at the weights' precision) that every GPU holds whole."""
    kv_value = physics.kv_bytes_per_value(wf["kv_precision"])
    replicated = 0.0
    if workload.dp_attention_on(wf):
        replicated = physics.weights_gb(spec.dp_attention_params_b(), workload.PRECISION_BYTES[wf["precision"]])
    return planner.LlmSize(spec.total_params_b, spec.kv_cache_bytes_per_token(kv_value),
                           spec.kv_cache_bytes_per_sequence(wf["prompt_tokens"] + wf["output_tokens"], kv_value),
                           replicated)


def memory_rule(wf: dict[str, Any], spec=None) -> planner.MemoryRule:
    """The memory rule at the workload's weight precision: bytes per weight over the whole model, a mixture of
    experts' routed experts at `expert_precision` where `spec` (the LLM) sizes them (physics.mean_bytes_per_param)."""
    per_param = workload.PRECISION_BYTES[wf["precision"]]
    expert = wf.get("expert_precision", wf["precision"])
    if spec is not None and expert in workload.PRECISION_BYTES and expert != wf["precision"]:
        llm = [getattr(spec, k, None) for k in ("total_params_b", "active_params_b", "experts_per_token",
                                                "num_experts")]
        llm = [math.nan if v is None else float(v) for v in llm]
        per_param = float(physics.mean_bytes_per_param(llm[0], per_param, physics.moe_expert_params_b(*llm),
                                                       workload.PRECISION_BYTES[expert]))
    return planner.MemoryRule(bytes_per_param=per_param)


def predict_one(models: ModelSet, gpu: resolve.Resolved, llm: resolve.Resolved, w: dict[str, Any],
                levels: Sequence[float] = planner.DEFAULT_LEVELS, use_cache: bool = True) -> PredictAnswer:
    """One GPU, one LLM, one workload; the prediction intervals at each of `levels` (fractions; one prediction per
    level, each cached under its own request)."""
    check_workload(w)  # one error for the one request (below, it is one row per level)
    levels = list(dict.fromkeys(levels)) or list(planner.DEFAULT_LEVELS)
    base = {**gpu.fields, **llm.fields, **w}
    reqs = [{**base, "level": lv} for lv in levels]
    rows = validate_one(reqs, models.gpus, models.llms)
    cache = PredictionCache(models.folder, use_cache)
    preds = cache.predict(reqs, rows, extra=[v for r in reqs for v in workload.preset_variants(r)])
    bands = [interval_bounds(row, lv) for row, lv in zip(preds, levels)]
    first = {k: v for k, v in bands[0].items() if k != "note"}
    prediction = {**preds[0], **first}
    ranges = models.training_ranges
    values = {**coverage.request_values(rows.iloc[0]), "concurrency": preds[0].get("concurrency", float("nan"))}
    return PredictAnswer(reqs[0], workload.filled(w), prediction, bands, gpu.origin, llm.origin,
                         memory_line(gpu, llm, w), coverage.outside(values, ranges) if ranges else None,
                         models.versions, workload.default_notes(w))


def predict_batch(models: ModelSet, frame: pd.DataFrame, progress: Callable[[int], None] | None = None,
                  chunk: int = 1024) -> tuple[pd.DataFrame, Validated]:
    """The answered input rows (with `row`, their input row number, first) with resolved names, predictions,
    extrapolation notes and model versions appended, and the validated batch (its `errors` name every rejected
    row and field). Every row is validated before any model is loaded. A `level` column sets each row's interval
    level (default 0.8); the bound columns are NaN where the models give no interval."""
    from wattgpu.modeling.store import load_predictor

    records = resolve.known_to_models(frame.to_dict("records"), models.gpus, models.llms)
    batch = validate_batch(pd.DataFrame(records, index=frame.index), models.gpus, models.llms)
    rows = batch.rows
    out = frame.iloc[batch.accepted].reset_index(drop=True).infer_objects()  # a column of numbers once more
    out.insert(0, "row", batch.accepted)
    if not len(rows):
        return out, batch
    predictor = load_predictor(models.folder / "power", models.folder / "itl")
    parts = []
    for start in range(0, len(rows), chunk):
        parts.append(predictor.predict_rows(rows.iloc[start:start + chunk]))
        if progress:
            progress(len(parts[-1]))
    pred = planner.with_bounds(pd.concat(parts, ignore_index=True))
    out["resolved_gpu"], out["resolved_llm"] = pred["gpu"].to_numpy(), pred["llm"].to_numpy()
    for c in pred.columns.drop(["gpu", "llm", "scenario"]):
        out[c] = pred[c].to_numpy()
    ranges = models.training_ranges
    out["extrapolation"] = ["; ".join(coverage.outside(coverage.request_values(r), ranges)) for _, r in rows.iterrows()]
    out["defaults"] = ["; ".join(workload.default_notes(records[i])) for i in batch.accepted]
    for t, v in models.versions.items():
        out[f"model_{t}"] = v
    return out, batch


def check_batch_options(input_csv, output_csv, named: tuple, levels) -> None:
    """Batch mode (`predict --input/--output`) reads GPU, LLM, scenario and level from the CSV's columns; --output
    must be a file path (checked before anything is predicted)."""
    if input_csv is None or output_csv is None:
        raise WattgpuError("batch mode needs both --input rows.csv and --output preds.csv")
    if any(v is not None for v in named):
        raise WattgpuError("--input takes GPU, LLM and scenario from its columns; drop --gpu/--llm/--scenario")
    if levels:
        raise WattgpuError("--input takes each row's interval level from a `level` column (default 0.8); drop --level")
    if Path(output_csv).is_dir():
        raise WattgpuError(f"--output {output_csv} is a folder: give a file path, e.g. "
                           f"{Path(output_csv) / 'preds.csv'}")
    if Path(output_csv).resolve() == Path(input_csv).resolve():
        raise WattgpuError(f"--output {output_csv} is the --input file: give another path")


def rejected_path(output_csv: Path) -> Path:
    """Where a batch's rejected rows go: beside the predictions, `<output>.rejected.csv`."""
    return output_csv.with_name(f"{output_csv.name}.rejected.csv")


def check_writable(path: Path, option: str) -> None:
    """Raise WattgpuError naming `option` unless `path` (its folders made) can be written; an existing file is left
    as it is, and none is left behind."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        existed = path.exists()
        with open(path, "a", encoding="utf-8"):
            pass
        if not existed:
            path.unlink()
    except OSError as exc:
        raise WattgpuError(f"{option} {path} cannot be written ({os_error_line(exc)}); nothing was predicted") from None


class BatchRejected(WattgpuError):
    """A batch whose answered rows were written and whose rejected rows were listed beside them (exit code 2)."""


def predict_csv(models: ModelSet, input_csv: Path, output_csv: Path,
                progress: Callable[[int], None] | None = None) -> str:
    """`predict_batch` from one CSV file to another: the answered rows to `output_csv`, every rejected row's
    errors to `rejected_path(output_csv)` (row: 0-based data row; line: its line in the file); the summary. Raises
    BatchRejected, whose message is the summary, when any row was rejected (after writing both files), and the
    batch's own error when none could be answered."""
    bad = rejected_path(output_csv)
    for path in (output_csv, bad):  # before anything is predicted
        check_writable(path, "--output")
    try:
        frame, lines = read_csv(input_csv.read_text(encoding="utf-8-sig"))
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise WattgpuError(f"{input_csv}: not a readable CSV: {exc}") from None
    out, batch = predict_batch(models, frame, progress)
    bad.unlink(missing_ok=True)  # never leave an earlier run's rejects beside these predictions
    if batch.errors:
        pd.DataFrame([{"row": e.row, "line": lines[e.row], "field": e.field, "problem": e.problem}
                      for e in batch.errors]).to_csv(bad, index=False, lineterminator="\n")
    if not len(out):
        raise batch.error()
    out.to_csv(output_csv, index=False, float_format="%.6g", lineterminator="\n")
    summary = f"{batch.n} rows: wrote {len(out)} predictions to {output_csv} (models: {models.versions})"
    if batch.errors:
        raise BatchRejected(f"{summary}; rejected {len(batch.rejected)} rows, listed (row, line, field, problem) in "
                            f"{bad}; the first: {batch.errors[0]}")
    return summary


@dataclass
class RecommendAnswer:
    llm: str
    llm_origin: str
    workload: dict[str, Any]  # as given (`workload.describe` fills the defaults)
    recommendation: planner.Recommendation
    near_target: list[str]  # judged on the point estimate (no ITL interval) and within the ITL model's error
    itl_error: float
    extrapolation_shared: list[str]  # workload and LLM outside the training ranges (every GPU)
    extrapolation_gpus: dict[str, list[str]]  # GPU -> its specs outside the training ranges
    models: dict[str, str]
    defaults: list[str] = dataclasses.field(default_factory=list)  # defaults that shaped it (workload.default_notes)


def recommend(models: ModelSet, llm: resolve.Resolved, w: dict[str, Any], constraints: planner.Constraints,
              gpu_names: list[str] | None = None, costs: planner.Costs = planner.Costs(),
              use_cache: bool = True) -> RecommendAnswer:
    """Every GPU named (default: the project's catalog) that can hold the LLM, ranked by `costs.objective` among
    those meeting `constraints` at its confidence level (planner.recommend). A catalog entry's `price_per_hour`,
    where the catalog has one, prices that GPU; `costs.gpu_price_per_hour` the others."""
    check_workload(w)  # a bad workload (e.g. 0 GPUs per replica) fails before the memory rule divides by it
    project = resolve.project_gpus()
    names = gpu_names if gpu_names is not None else project.keys
    if not names:
        raise WattgpuError("--gpus names no GPU")
    keys = list(dict.fromkeys(project.resolve(n) for n in names))
    wf = workload.filled({"precision": llm.spec.weight_precision, **w})
    fit = memory_fits(keys, [project.get(k).memory_gb for k in keys], llm.spec, w)
    labels = [k for k, ok in zip(keys, fit["fits"]) if ok]
    constraints = dataclasses.replace(constraints, gpus_per_replica=int(wf["n_gpus"]))
    requests = [{**resolve.resolve_gpu(k, models.gpus, project).fields, **llm.fields, **w,
                 "level": constraints.confidence} for k in labels]
    # A bad workload fails here, before any model is loaded; the rows also tell what lies outside the training data.
    rows = validate_one(requests, models.gpus, models.llms) if requests else None
    preds = []
    if requests:
        extra = [v for r in requests for v in workload.preset_variants(r)]
        preds = PredictionCache(models.folder, use_cache).predict(requests, rows, extra=extra)
    prices = [getattr(project.get(k), "price_per_hour", None) for k in labels]  # absent from today's catalog schema
    pred = pd.DataFrame(preds, columns=[*planner.PREDICTION_COLUMNS[1:], *planner.BOUND_COLUMNS, "interval"]).assign(
        gpu=labels, gpu_price_per_hour=pd.array([math.nan if p is None else p for p in prices], dtype=float))
    rec = planner.recommend(pred, fit, constraints, costs)
    ranges = models.training_ranges  # {} for folders without ranges: no notes
    gpu_notes, shared = {}, []
    if rows is not None:
        gpu_notes = {k: ns for k, (_, r) in zip(labels, rows.iterrows())
                     if (ns := coverage.outside(r, ranges, coverage.GPU_COLUMNS))}
        others = tuple(c for c in coverage.COLUMNS if c not in coverage.GPU_COLUMNS)
        shared = coverage.outside(coverage.request_values(rows.iloc[0]), ranges, others)
    near = planner.near_target(rec.table, constraints.max_itl_ms, models.itl_error)
    return RecommendAnswer(llm.spec.key, llm.origin, w, rec, near, models.itl_error, shared, gpu_notes,
                           models.versions, workload.default_notes(w))


def precompute(models: ModelSet, progress: Callable[[int], None] | None = None) -> tuple[int, int, Path]:
    """Predict every project GPU x model LLM x preset (default workload) x default interval level once per model
    version: (grid size, newly predicted, cache file)."""
    project = resolve.project_gpus()
    gpus = [resolve.resolve_gpu(k, models.gpus, project).fields for k in project.keys]
    grid = [{**g, "llm": llm, "scenario": s, "level": lv} for g in gpus for llm in models.llms.keys
            for s in workload.PRESETS for lv in planner.DEFAULT_LEVELS]
    cache = PredictionCache(models.folder)
    todo = cache.missing(grid)
    if todo:
        cache.predict(todo, validate(todo, models.gpus, models.llms), progress=progress)
    return len(grid), len(todo), cache.path
