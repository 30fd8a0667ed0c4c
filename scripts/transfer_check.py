"""Transfer check: candidates with fixed settings (each one's first trial in params.yaml), a lab (LOSO), a GPU (LOGO),
an engine generation (LOEO) or each (GPU, LLM) pair of the LOPO regime's folds (reports/search/lopo/folds.csv: the
GPU and the LLM both out of training) held out, every held-out row asked through the served path
(modeling.predictor.served_predictions: a Poisson load's requests in flight solved by an ITL model fitted on the same
training rows; a power model's step time also from the latency-only rows the fold may learn from,
evaluation.cv.fit_fold, unless --no-step-rows). Prints MdAPE % per source (or per GPU, --by gpu, per engine
family, --by engine, per tensor-parallel degree, --by tensor_parallel, or per load, --by load: a closed batch's
requests in flight in buckets, Poisson arrivals apart) and pooled: power beside the 0.9 x TDP
baseline, ITL beside the unfitted decode-step physics (`itl_physics_s`). No tuning, no selection: a quick look at
how a candidate transfers, not the nested figures of `dvc repro` (reports/search/by_source.csv).

    python scripts/transfer_check.py [--target power] [--regimes loso loeo logo] [--candidates workload steppower lightgbm]
    python scripts/transfer_check.py --target itl [--regimes loso logo lopo] [--by gpu]
    python scripts/transfer_check.py --target itl --regimes loso --by engine   # where a held-out lab's ITL misses
    python scripts/transfer_check.py --target itl --regimes loso --by tensor_parallel  # multi-GPU rows apart
    python scripts/transfer_check.py --target itl --regimes loso --by gpu --ratio  # which way: too slow or too fast
    python scripts/transfer_check.py --target itl --regimes loso --by load --terms  # which part of the step misses
"""

from __future__ import annotations

import argparse
import csv
import warnings

import numpy as np
import pandas as pd

from wattgpu import paths
from wattgpu.config import Regime
from wattgpu.evaluation import baselines
from wattgpu.evaluation.cv import fit_fold, folds
from wattgpu.evaluation.runner import step_rows, target_rows
from wattgpu.modeling.algorithms import make_estimator
from wattgpu.modeling.predictor import served_predictions
from wattgpu.stages.search import context, physics_itl_as_served

HELD_OUT = ("loso", "logo", "loeo")  # a lab, a GPU, an engine generation (evaluation.cv); lopo: the LOPO folds' pairs
COLUMN = {"power": "power_w_per_gpu", "itl": "itl_s"}


def first_trial(params, algorithm: str, trial: int = 0) -> tuple[str, dict]:
    space = params.search.algorithms[algorithm]
    hp = dict(space.first_trials[min(trial, len(space.first_trials) - 1)])
    return hp.pop("feature_set", space.feature_sets[0]), hp


def mdape(y: np.ndarray, pred: np.ndarray) -> float:
    return float(100 * np.median(np.abs(pred / y - 1)))


def median_ratio(y: np.ndarray, pred: np.ndarray) -> float:
    """The median of predicted / measured: above 1 too high (power) or too slow (ITL), below 1 the other way."""
    return float(np.median(pred / y))


def load_bucket(rows: pd.DataFrame) -> np.ndarray:
    """A row's load for the table: Poisson arrivals, or a closed batch's requests in flight in buckets."""
    c = rows["concurrency"].to_numpy(dtype=float)
    closed = np.select([c <= 8, c <= 32, c <= 128, c <= 256], ["c<=8", "c 9-32", "c 33-128", "c 129-256"], "c>256")
    return np.where(rows["request_rate_per_s"].notna().to_numpy(), "poisson", closed)


def step_terms(model, served: pd.DataFrame) -> dict[str, np.ndarray]:
    """What a fitted step-time ITL model (the `workload` candidate: modeling.steptime) adds up for each served row: per
    decode-step term its physical time T_k (ms, at the row's running sequences), its learned weight and the weighted
    time, and the boosted factor that multiplies their sum (StepTimeRegressor.terms, before the floor the target clips
    to)."""
    from wattgpu.modeling.estimator import as_measured_release
    from wattgpu.modeling.steptime import TERMS

    reg, prep = model.pipeline_.named_steps["model"], model.pipeline_.named_steps["prep"]
    parts = reg.terms(prep.transform(model._frame(as_measured_release(served, model.measured_releases_))))
    out = {"boosted factor": parts["factor"]}
    for term in TERMS:
        name = term.removeprefix("log_").removesuffix("_s")
        time, weight = parts[f"{term}:time"], parts[f"{term}:weight"]
        out[f"{name} ms"], out[f"{name} weight"], out[f"{name} weighted ms"] = time * 1e3, weight, time * weight * 1e3
    return out


def held_out(rows: pd.DataFrame, regime: str, root) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(group, training mask, test mask) per held-out group: a lab, a GPU or an engine generation out of training (the
    regime's folds, evaluation.cv.folds), or a LOPO pair's GPU and LLM both out (its test rows: that pair's)."""
    if regime != "lopo":
        out = []
        for fold in folds(rows, Regime(kind=regime)):
            train, test = np.zeros(len(rows), dtype=bool), np.zeros(len(rows), dtype=bool)
            train[fold.train], test[fold.test] = True, True
            out.append((fold.name, train, test))
        return out
    with open(root / "reports" / "search" / "lopo" / "folds.csv", newline="") as f:
        pairs = sorted({r["fold"] for r in csv.DictReader(f) if r["selected"] == "True"})
    out = []
    for pair in pairs:
        gpu, llm = pair.split("|", 1)
        train = ((rows["gpu"] != gpu) & (rows["llm"] != llm)).to_numpy()
        test = ((rows["gpu"] == gpu) & (rows["llm"] == llm)).to_numpy()
        if test.any():
            out.append((pair, train, test))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="power", choices=sorted(COLUMN))
    parser.add_argument("--regimes", nargs="+", default=["loso", "logo"], choices=[*HELD_OUT, "lopo"])
    parser.add_argument("--candidates", nargs="+", default=None,
                        help="power: workload steppower lightgbm (default); ITL: workload")
    parser.add_argument("--trial", type=int, default=0,
                        help="which of each candidate's first_trials in params.yaml (its last where it has fewer)")
    parser.add_argument("--by", default="source", choices=["source", "gpu", "engine", "tensor_parallel", "load"],
                        help="the table's columns: MdAPE per source (default), per GPU, per engine family, per "
                             "tensor-parallel degree or per load (a closed batch's requests in flight, bucketed; "
                             "Poisson arrivals apart)")
    parser.add_argument("--ratio", action="store_true",
                        help="the median of predicted / measured per cell instead of MdAPE (which way a group misses)")
    parser.add_argument("--terms", action="store_true",
                        help="ITL: per column of --by, the medians of each decode-step term's physical time, its "
                             "learned weight and their product, and of the boosted factor (modeling.steptime), beside "
                             "the measured and predicted ITL: where in the step a held-out group's miss comes from")
    parser.add_argument("--no-step-rows", action="store_true",
                        help="steppower's step time from the power rows only (as before the latency-only rows joined)")
    args = parser.parse_args()
    if args.terms and args.target != "itl":
        parser.error("--terms decomposes the ITL model's decode step: give --target itl")
    warnings.filterwarnings("ignore", category=UserWarning)
    root = paths.project_root()
    ctx = context(root, with_idle_power=False)  # the search stages' own rows: no measured idle power
    params, rows = ctx.params, ctx.rows
    target = target_rows(rows, args.target)
    latency_only = step_rows(rows, args.target)
    itl_rows = target_rows(rows, "itl")
    candidates = args.candidates or (["workload", "steppower", "lightgbm"] if args.target == "power" else ["workload"])
    seed = params.base.seed
    itl_set, itl_hp = first_trial(params, params.search.default_algorithm)
    y = target[COLUMN[args.target]].to_numpy(dtype=float)
    if args.by == "load":
        target = target.assign(load=load_bucket(target))
    table, terms = [], {}
    for regime in args.regimes:
        pred = {c: np.full(len(target), np.nan) for c in candidates}
        itl_groups = {g: train for g, train, _ in held_out(itl_rows, regime, root)}
        for group, train, test in held_out(target, regime, root):
            itl = make_estimator(params.search.default_algorithm, "itl", itl_set, itl_hp, seed=seed).fit(
                itl_rows[itl_groups[group]])
            for c in candidates:
                model = itl
                if args.target == "power":
                    feature_set, hp = first_trial(params, c, args.trial)
                    model = fit_fold(make_estimator(c, "power", feature_set, hp, seed=seed,
                                                    load_rho=params.evaluate.load_rho),
                                     target, np.flatnonzero(train), None if args.no_step_rows else latency_only)
                models = {"itl": itl, args.target: model}
                served, answers = served_predictions(target[test], models)
                pred[c][test] = answers[args.target]
                if args.terms:
                    for name, values in step_terms(itl, served).items():
                        terms.setdefault((regime, name), np.full(len(target), np.nan))[test] = values
        tested = ~np.isnan(pred[candidates[0]])
        if args.target == "power":
            pred["baseline: 0.9 x TDP"] = baselines.tdp90(target)
        else:
            pred["baseline: decode-step physics"] = physics_itl_as_served(target)
        score = median_ratio if args.ratio else mdape
        for name, p in pred.items():
            cells = {s: score(y[at], p[at]) if (at := tested & (target[args.by] == s).to_numpy()).any() else np.nan
                     for s in sorted(target[args.by].unique())}
            table.append({"regime": regime.upper(), "model": name, **cells, "all rows": score(y[tested], p[tested])})
    out = pd.DataFrame(table)
    shown = "median predicted / measured" if args.ratio else "MdAPE %"
    digits = (lambda v: f"{v:.2f}") if args.ratio else (lambda v: f"{v:.1f}")
    print(f"{args.target} {shown} (first-trial settings, served path):")
    print(out.set_index(["regime", "model"]).T.to_string(float_format=digits) if args.by == "gpu"
          else out.to_string(index=False, float_format=digits))
    if terms:
        print_terms(terms, target, y, pred[candidates[0]], args.by)


def print_terms(terms: dict, target: pd.DataFrame, y: np.ndarray, pred: np.ndarray, by: str) -> None:
    """--terms: per regime, a table of medians per column of `by`: measured and predicted ITL (ms), then each term's
    physical time, weight and weighted time, and the boosted factor."""
    for regime in dict.fromkeys(r for r, _ in terms):
        rows = {"measured ITL ms": y * 1e3, "predicted ITL ms": pred * 1e3,
                **{name: v for (r, name), v in terms.items() if r == regime}}
        tested = ~np.isnan(rows["boosted factor"])
        cells = {}
        for s in sorted(target[by].unique()):
            at = tested & (target[by] == s).to_numpy()
            if at.any():
                cells[f"{s} ({at.sum()})"] = {k: float(np.median(v[at])) for k, v in rows.items()}
        print(f"\n{regime.upper()}: medians per {by} (rows), the ITL model's decode step (modeling.steptime)")
        print(pd.DataFrame(cells).to_string(float_format=lambda v: f"{v:.3g}"))


if __name__ == "__main__":
    main()
