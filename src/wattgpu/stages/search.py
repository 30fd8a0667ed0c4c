"""Stages of the nested Optuna search over algorithms (params.yaml `search`).

  python -m wattgpu.stages.search regime <name>  search@<name>: nested search under one CV regime, beside the
                                                 replica and baselines on the same outer folds ->
                                                 reports/search/<name>/{metrics.json, predictions.csv, folds.csv}
  python -m wattgpu.stages.search best           search_best: per target, studies on ALL rows with the primary
                                                 regime's CV pick the winner -> reports/search/best_<target>.json
  python -m wattgpu.stages.search worker <name>  `wattgpu search worker`: take trials of search@<name>'s (`best`:
                                                 search_best's) studies in the shared storage (search/storage.py)

Each logs one MLflow run (experiment `wattgpu-search`); studies are nested runs under it and trials nested under
those. Optuna studies persist in optuna/ (sqlite), so an interrupted run resumes its studies.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from wattgpu import codehash, paths, tracking
from wattgpu.catalogs.gpus import load_gpu_catalog
from wattgpu.catalogs.idle_power import load_idle_power
from wattgpu.catalogs.llms import load_llm_catalog
from wattgpu.config import Params, Regime, Search, load_params
from wattgpu.errors import WattgpuError
from wattgpu.evaluation import baselines, leaderboard
from wattgpu.evaluation.cv import outer_regime
from wattgpu.evaluation.predictions import ID_COLUMNS
from wattgpu.evaluation.runner import (
    interval_by_gpu,
    interval_table,
    metrics_table,
    prepare_rows,
    step_rows,
    target_rows,
)
from wattgpu.io import read_table, write_csv, write_json
from wattgpu.modeling import replica, steptime
from wattgpu.modeling.algorithms import best_record
from wattgpu.modeling.predictor import as_served, solve_concurrency
from wattgpu.modeling.replica import paper_model
from wattgpu.search import workers
from wattgpu.search.nested import (
    FoldOutcome,
    OuterPlan,
    Settings,
    StudyTask,
    all_rows_plan,
    compare,
    nested_plan,
    run_tasks,
    select,
    tested_positions,
)
from wattgpu.search.storage import ENV as STORAGE_ENV
from wattgpu.search.storage import server_url, study_storage

EXPERIMENT = "wattgpu-search"
BEST = "best"  # the worker's name for search_best's studies (no search regime may have it)
# What a study's result depends on besides params and data: the search and everything it imports (prose ignored).
STUDY_CODE = ("wattgpu.search.nested", "wattgpu.evaluation.runner")
# Slowest first, so that two workers finish together.
COST_ORDER = ("workload", "steppower", "extra_trees", "xgboost", "physics", "lightgbm", "knn", "spline_ridge")
INNER_CV = {"logo": "GPU groups held out", "lolo": "LLM groups held out", "loso": "labs held out",
            "loeo": "engine generations held out",
            "lopo": "a GPU group x an LLM group held out, trained on rows with neither",
            "group_kfold": "(GPU, LLM) pairs held out", "row_kfold": "rows held out"}


@dataclass(frozen=True)
class Context:
    root: Path
    params: Params
    search: Search
    rows: pd.DataFrame  # every row of the source, with specs, engineered and physics features
    data_md5: str


def context(root: Path, with_idle_power: bool = True) -> Context:
    """Parameters and rows; measured idle power is attached only where the paper replica needs it."""
    params = load_params(paths.resolve(paths.PARAMS, root))
    if params.search is None or params.evaluate is None:
        raise WattgpuError("params.yaml needs `evaluate` and `search` sections for the search stages")
    ev = params.evaluate
    gpus = load_gpu_catalog(paths.resolve(paths.GPU_CATALOG, root))
    llms = load_llm_catalog(paths.resolve(paths.LLM_CATALOG_TABLE, root))
    idle = load_idle_power(paths.resolve(paths.GPU_IDLE_POWER, root), gpus) if with_idle_power else None
    measurements = paths.resolve(paths.MEASUREMENTS, root)
    rows = prepare_rows(read_table(measurements), gpus, llms, source=params.search.source,
                        dense_only=params.search.dense_only, idle_power_w=idle, offline_batch=ev.roofline_offline_batch)
    return Context(root, params, params.search, rows, tracking.file_md5(measurements))


def settings(ctx: Context) -> Settings:
    s, ev = ctx.search, ctx.params.evaluate
    return Settings(seed=ctx.params.base.seed, n_trials=s.active.n_trials, n_jobs=s.n_jobs,
                    pruner_startup_trials=s.pruner_startup_trials, load_rho=tuple(sorted(ev.load_rho.items())))


def tasks_for(ctx: Context, rows_by_target: dict[str, pd.DataFrame], plans: dict[str, list[OuterPlan]],
              store: str, regime: Regime) -> list[StudyTask]:
    """One task per (target, algorithm, outer fold), each study in its own sqlite file (workers never share one),
    costliest first (the ITL step-time fits, then by COST_ORDER) so that the workers finish together."""
    s, st = ctx.search, settings(ctx)
    code = codehash.digest(STUDY_CODE)
    algorithms = sorted(s.candidates, key=lambda a: COST_ORDER.index(a))
    out = []
    for target, rows in rows_by_target.items():
        beside = step_rows(ctx.rows, target)
        for algorithm in (a for a in algorithms if target in s.candidates[a].targets):
            space = s.candidates[algorithm]
            config = {"space": space.model_dump(mode="json"), "profile": s.active.model_dump(), "settings": repr(st),
                      "regime": regime.model_dump(), "data": ctx.data_md5, "code": code, "store": store}
            fingerprint = hashlib.sha1(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]
            for i, plan in enumerate(plans[target]):
                sqlite = paths.resolve(paths.OPTUNA_DIR / store / f"{target}-{algorithm}" / f"{i:03d}.db", ctx.root)
                storage = study_storage(s.storage, sqlite)  # the shared server where one is configured
                out.append(StudyTask(rows, (plan,), target, algorithm, space, st, storage, fingerprint,
                                     step_rows=beside))
    return sorted(out, key=lambda t: (t.target != "itl", COST_ORDER.index(t.algorithm)))


def by_algorithm(tasks: list[StudyTask], results: list[list[FoldOutcome]]) -> dict[str, dict[str, list[FoldOutcome]]]:
    """target -> algorithm -> outcomes in the plans' order (tasks_for's sort is stable, so each (target, algorithm)
    keeps its outer folds in order)."""
    out: dict[str, dict[str, list[FoldOutcome]]] = {}
    for task, res in zip(tasks, results):
        out.setdefault(task.target, {}).setdefault(task.algorithm, []).extend(res)
    return out


def algorithm_order(search: Search, target: str) -> list[str]:
    """The candidates for `target`, in params.yaml's order."""
    return [a for a, space in search.candidates.items() if target in space.targets]


def stage_tasks(ctx: Context, name: str) -> tuple[Regime, dict[str, pd.DataFrame], dict[str, list[OuterPlan]],
                                                  list[StudyTask]]:
    """The regime, rows, outer plans and studies of search@<name>, or of search_best for `best`: what the stage runs
    and what `wattgpu search worker` joins."""
    s, seed = ctx.search, ctx.params.base.seed
    rows = {t: target_rows(ctx.rows, t) for t in ctx.params.base.targets}
    if name == BEST:
        regime = outer_regime(s, s.primary_regime)
        plans = {t: [all_rows_plan(r, regime, s.active.inner_folds, seed)] for t, r in rows.items()}
        return regime, rows, plans, tasks_for(ctx, rows, plans, f"best-{s.primary_regime}", regime)
    regime = outer_regime(s, name)
    plans = {t: nested_plan(r, regime, s.active.inner_folds, seed, s.active.calibration_folds) for t, r in rows.items()}
    return regime, rows, plans, tasks_for(ctx, rows, plans, name, regime)


def run_worker(name: str) -> None:
    """`wattgpu search worker --regime <name>`: join the studies of search@<name> (`best`: of search_best) in the
    shared storage, take trials until each has its budget (search/workers.py)."""
    ctx = context(paths.project_root(), with_idle_power=name != BEST)
    if server_url(ctx.search.storage) is None:
        raise WattgpuError(f"a worker needs a shared storage: set {STORAGE_ENV} (or params.yaml search.storage) to "
                           "a postgresql:// URL; with sqlite files each study belongs to the stage's own process")
    tasks = stage_tasks(ctx, name)[3]
    print(f"search worker {name}: {len(tasks)} studies x {ctx.search.active.n_trials} trials")
    workers.work(tasks)


# ---------------------------------------------------------------------------------------------------------
# search@<regime>


def run_regime(name: str) -> dict:
    start = time.perf_counter()
    root = paths.project_root()
    ctx = context(root)
    s, ev, seed = ctx.search, ctx.params.evaluate, ctx.params.base.seed
    regime, rows, plans, tasks = stage_tasks(ctx, name)
    print(f"search {name}: {len(tasks)} (target, algorithm, outer fold) studies x "
          f"{s.active.n_trials} trials, profile {s.profile!r}, {s.n_workers} worker(s)")
    tasks, results = run_served(ctx, tasks, f"search {name}")
    outcomes = by_algorithm(tasks, results)

    parts, fold_rows, selected = [], [], {}
    for target, t_rows in rows.items():
        refs = references(t_rows, target, ctx.params, plans[target])
        frame, selected[target], studies = compare(t_rows, target, plans[target], outcomes[target],
                                                   algorithm_order(s, target), refs, s.default_algorithm)
        parts.append(frame)
        fold_rows += studies
    pred = pd.concat(parts, ignore_index=True)
    # The paper's comparison: every model on the rows the replica predicts (its source, dense LLMs).
    replica_rows = pred.loc[pred["model"] == leaderboard.REPLICA, [*ID_COLUMNS, "target", "y_pred"]]
    keys = replica_rows.dropna(subset=["y_pred"]).drop(columns="y_pred")
    paper = pred.merge(keys, on=[*ID_COLUMNS, "target"], how="inner")
    # coverage per held-out GPU and per LLM family (each scoring group apart), beside the band's width
    by_unit = {by: interval_by_gpu(pred, leaderboard.SELECTION, by) for by in ("gpu", "llm_family")}
    setup = {"profile": s.profile, "n_trials": s.active.n_trials, "inner_folds": s.active.inner_folds,
             "calibration_folds": s.active.calibration_folds,
             "default_algorithm": s.default_algorithm,
             "inner_cv": INNER_CV[regime.kind], "outer_folds": len(plans[next(iter(plans))]),
             "max_pairs": regime.max_pairs if regime.kind == "lopo" else None, "seed": seed}
    result = {"regime": name, "kind": regime.kind, "source": s.source or "all", "replica_source": ev.source,
              "setup": setup, "rows": {t: len(r) for t, r in rows.items()},
              "tested_rows": {t: len(tested_positions(plans[t])) for t in rows},
              "metrics": metrics_table(pred), "paper_metrics": metrics_table(paper), "selected": selected,
              "intervals": interval_table(pred[pred["model"] == leaderboard.SELECTION], (leaderboard.SELECTION,)),
              "search_depth": leaderboard.search_depth(pd.DataFrame(fold_rows)),
              "interval_groups": {by: leaderboard.group_coverage(t, by) for by, t in by_unit.items()}}
    out = paths.resolve(paths.SEARCH_DIR / name, root)
    write_csv(out / "predictions.csv", pred)
    for by, table in by_unit.items():
        write_csv(out / f"interval_coverage_by_{by}.csv", table)
    folds_table = pd.DataFrame(fold_rows)
    write_csv(out / "folds.csv", folds_table)
    write_json(out / "metrics.json", result)
    log_run(ctx, f"search-{name}", {"stage": "search", "regime": name}, result, tasks, results, out,
            time.perf_counter() - start)
    print(_summary(result))
    print(f"search {name}: stage time {time.perf_counter() - start:.0f} s (MLflow logging included)")
    return result


def run_served(ctx: Context, tasks: list[StudyTask], description: str
               ) -> tuple[list[StudyTask], list[list[FoldOutcome]]]:
    """Run the ITL studies, then the others, each outer-test row predicted the way it is served: a power model's
    Poisson rows at the requests in flight the ITL selection of the same outer fold solves (or, for a fold the ITL
    rows do not have, an ITL model of the default algorithm's first configuration fitted on that fold's training
    rows). Returns the tasks (power tasks with their ITL model) and their outcomes, in that order."""
    s = ctx.search
    itl_tasks = [t for t in tasks if t.target == "itl"]
    others = [t for t in tasks if t.target != "itl"]
    itl_results = run_tasks(itl_tasks, s.n_workers, description=f"{description} (itl)") if itl_tasks else []
    chosen = {}
    if itl_tasks:
        chosen = {o.fold: o.model for _, o in select(by_algorithm(itl_tasks, itl_results)["itl"], s.default_algorithm)}
    itl_algorithms, fallback = algorithm_order(s, "itl"), None
    if itl_algorithms:
        default = s.default_algorithm if s.default_algorithm in itl_algorithms else itl_algorithms[0]
        space = s.candidates[default]
        first = dict(space.first_trials[0]) if space.first_trials else {}
        fallback = (default, first.pop("feature_set", space.feature_sets[0]), first)
    others = [replace(t, itl_model=chosen.get(t.plans[0].outer.name), itl_config=fallback) for t in others]
    other_results = run_tasks(others, s.n_workers, description=description) if others else []
    return itl_tasks + others, itl_results + other_results


def references(t_rows: pd.DataFrame, target: str, params: Params, plans: list[OuterPlan]) -> dict[str, np.ndarray]:
    """The paper replica and the baselines on the same outer folds, for comparison.

    The replica is the paper's: trained and scored on its own source's dense LLMs only (params.yaml `evaluate`),
    with the paper's ITL definition (offline: duration / generated tokens), converted to per-request ITL by the same
    requests in flight the other models are scored with; NaN on every other row. The baselines learn nothing.
    """
    ev, seed = params.evaluate, params.base.seed
    eligible = (t_rows["source"] == ev.source).to_numpy()
    if ev.replica.dense_only:
        eligible &= ~t_rows["is_moe"].astype(bool).to_numpy()
    paper_rows, to_request = replica.paper_target(t_rows, target)
    y_replica = np.full(len(t_rows), np.nan)
    for plan in plans:
        train, test = plan.outer.train[eligible[plan.outer.train]], plan.outer.test[eligible[plan.outer.test]]
        if len(train) and len(test):
            model = paper_model(target, ev.replica, seed, ev.n_jobs).fit(paper_rows.iloc[train])
            y_replica[test] = model.predict(paper_rows.iloc[test]) * to_request[test]
    paper_labels = t_rows["scenario_label"].isin(ev.load_rho).to_numpy()
    out = {leaderboard.REPLICA: y_replica}
    if target == "power":
        scaled = np.full(len(t_rows), np.nan)
        scaled[paper_labels] = baselines.load_scaled_tdp(t_rows[paper_labels], ev.load_rho)
        out.update(tdp=baselines.tdp(t_rows), tdp90=baselines.tdp90(t_rows), load_scaled_tdp=scaled)
    else:
        out.update(roofline=np.where(paper_labels, baselines.roofline_itl(t_rows), np.nan),
                   itl_physics=physics_itl_as_served(t_rows))
    return out


def physics_itl_as_served(rows: pd.DataFrame) -> np.ndarray:
    """The unfitted decode-step physics (`itl_physics_s`) as a model, asked the way it would be served: a Poisson
    load's requests in flight are its own fixed point (modeling.predictor.solve_concurrency)."""
    served, _ = solve_concurrency(as_served(rows), lambda r: r["itl_physics_s"].to_numpy(dtype=float))
    return served["itl_physics_s"].to_numpy(dtype=float)


def _summary(result: dict) -> str:
    lines = [f"{'target':6} {'model':18} {'offline':>8} {'server':>8}"]
    for target, models in result["metrics"].items():
        for model, by in models.items():
            lines.append(f"{target:6} {model:18} {by['offline']['mdape']:8.2f} {by['server']['mdape']:8.2f}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------
# search_best


def run_best() -> dict:
    start = time.perf_counter()
    root = paths.project_root()
    ctx = context(root, with_idle_power=False)
    s, ev = ctx.search, ctx.params.evaluate
    primary = s.primary_regime
    regime, rows, plans, tasks = stage_tasks(ctx, BEST)
    results = run_tasks(tasks, s.n_workers, description=f"search best ({primary} CV on all rows)")
    primary_result = json.loads(paths.resolve(paths.SEARCH_DIR / primary / "metrics.json", root).read_text())
    nested = primary_result["metrics"]
    best = {}
    for target in rows:
        order = algorithm_order(s, target)
        cands = {t.algorithm: r[0] for t, r in zip(tasks, results) if t.target == target}
        algorithm = choose_algorithm(primary_result["selected"][target], {a: cands[a].inner_score for a in order})
        win = cands[algorithm]
        sel = nested[target][leaderboard.SELECTION]
        record = best_record(target, algorithm, win.feature_set, win.hyperparameters, regime=primary,
                             offline_batch=ev.roofline_offline_batch, load_rho=ev.load_rho,
                             inner_score=win.inner_score,
                             nested_mdape={"offline": sel["offline"]["mdape"], "server": sel["server"]["mdape"]})
        record["candidates"] = {a: cands[a].inner_score for a in order}  # inner score of each algorithm's best trial
        record["nested_votes"] = primary_result["selected"][target]  # outer folds won on the primary regime
        own = nested[target][algorithm]  # the winning algorithm's own nested figures (tuned, not selected, per fold)
        record["algorithm_nested_mdape"] = {"offline": own["offline"]["mdape"], "server": own["server"]["mdape"]}
        best[target] = record
        # Plain json (no rounding) so that build_estimator gets the exact hyperparameters the study chose.
        path = paths.resolve(paths.SEARCH_DIR / f"best_{target}.json", root)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=2) + "\n")
        print(f"search best {target}: {algorithm} ({win.feature_set}), inner score {win.inner_score:.2f}; "
              f"nested selection on {primary}: offline {record['nested_mdape']['offline']:.2f}%, "
              f"server {record['nested_mdape']['server']:.2f}%")
    figures = {t: {"inner_score": b["candidates"], "nested_mdape": b["nested_mdape"]} for t, b in best.items()}
    log_run(ctx, "search-best", {"stage": "search_best", "regime": primary}, {"metrics": figures}, tasks, results,
            paths.resolve(paths.SEARCH_DIR, root), time.perf_counter() - start, artifacts=[f"best_{t}.json" for t in rows])
    print(f"search best: stage time {time.perf_counter() - start:.0f} s (MLflow logging included)")
    return best


def choose_algorithm(votes: dict[str, int], inner_scores: dict[str, float]) -> str:
    """The algorithm the nested selection chose in most outer folds of the primary regime; ties (and algorithms
    it never chose) fall back on the all-rows inner score.

    With 8 GPUs an inner CV often ranks two algorithms within noise of each other; one all-rows CV then picks
    either by luck, while a choice repeated across outer folds holds across GPUs. Each vote was cast on one outer
    fold's training rows only, so no outer-test figure enters the choice.
    """
    return min(inner_scores, key=lambda a: (-votes.get(a, 0), inner_scores[a]))


# ---------------------------------------------------------------------------------------------------------
# MLflow at the edge: one run per stage invocation, studies as nested runs, trials nested under those


def log_run(ctx: Context, run_name: str, tags: dict, result: dict, tasks: list[StudyTask],
            results: list[list[FoldOutcome]], out: Path, seconds: float, artifacts: list[str] | None = None) -> None:
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

    mlflow = tracking.setup(EXPERIMENT, ctx.root)
    client = mlflow.MlflowClient()
    s = ctx.search
    with mlflow.start_run(run_name=run_name) as parent:
        mlflow.set_tags({**tags, "git_commit": tracking.git_commit(ctx.root), "data_md5": ctx.data_md5})
        mlflow.log_params({"seed": ctx.params.base.seed, "profile": s.profile,
                           **{f"profile.{k}": v for k, v in s.active.model_dump().items()},
                           "algorithms": ",".join(s.candidates), "n_workers": s.n_workers, "n_jobs": s.n_jobs})
        mlflow.log_metrics({**tracking.flatten(result.get("metrics", {})), "seconds_before_logging": seconds})
        experiment = parent.info.experiment_id
        for task, outcomes in zip(tasks, results):
            for o in outcomes:
                study = client.create_run(experiment, run_name=f"{task.target}/{task.algorithm}/{o.fold}",
                                          tags={MLFLOW_PARENT_RUN_ID: parent.info.run_id, "kind": "study"})
                params = {"target": task.target, "algorithm": task.algorithm, "fold": o.fold,
                          "feature_set": o.feature_set, **{f"best.{k}": v for k, v in o.hyperparameters.items()}}
                client.log_batch(study.info.run_id, metrics=[Metric("inner_score", o.inner_score, 0, 0)],
                                 params=[Param(k, str(v)[:500]) for k, v in params.items()])
                client.set_terminated(study.info.run_id)
                for t in o.trials:
                    run = client.create_run(experiment, run_name=f"trial-{t['number']}",
                                            tags={MLFLOW_PARENT_RUN_ID: study.info.run_id, "kind": "trial"})
                    metrics = [Metric("inner_score", float(t["value"]), 0, 0)] if t["value"] is not None else []
                    metrics.append(Metric("inner_folds_run", float(t["steps"]), 0, 0))
                    client.log_batch(run.info.run_id, metrics=metrics,
                                     params=[Param(k, str(v)[:500]) for k, v in t["params"].items()],
                                     tags=[RunTag("state", t["state"])])
                    client.set_terminated(run.info.run_id, "FAILED" if t["state"] == "FAIL" else "FINISHED")
        if artifacts is None:
            mlflow.log_artifacts(str(out))
        else:
            for name in artifacts:
                mlflow.log_artifact(str(out / name))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("regime", help="nested search under one regime").add_argument("name", help="a key of search.regimes")
    sub.add_parser("best", help="winner per target on all rows (primary regime's CV)")
    sub.add_parser("worker", help="take trials of a stage's studies in the shared storage").add_argument(
        "name", help="a key of search.regimes, or best")
    args = parser.parse_args()
    steptime.SOLVED_STORE.open(paths.resolve(paths.STEP_FITS_DIR))  # each distinct step-time fit solved once
    try:
        if args.command == "regime":
            run_regime(args.name)
        elif args.command == "worker":
            run_worker(args.name)
        else:
            run_best()
    except WattgpuError as exc:
        raise SystemExit(f"error: {exc}") from None


if __name__ == "__main__":
    main()
