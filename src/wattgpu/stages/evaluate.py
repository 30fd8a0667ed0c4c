"""Stage `evaluate@<regime>`: the paper replica and the physical baselines under one CV regime.

Writes reports/evaluate/<regime>/{metrics.json, predictions.csv, per_gpu.csv, per_llm.csv, *.png} and logs
one MLflow run (params, metrics, artifacts, git commit, data version).
"""

from __future__ import annotations

import argparse
import time

import pandas as pd

from wattgpu import paths, tracking
from wattgpu.catalogs.gpus import load_gpu_catalog
from wattgpu.catalogs.idle_power import load_idle_power
from wattgpu.catalogs.llms import load_llm_catalog
from wattgpu.config import load_params
from wattgpu.evaluation import baselines, metrics
from wattgpu.evaluation.predictions import prediction_frame
from wattgpu.evaluation.runner import cross_predict, metrics_table, prepare_rows, target_rows
from wattgpu.io import read_table, write_csv, write_json
from wattgpu.modeling import replica
from wattgpu.modeling.replica import paper_model
from wattgpu.reporting import plots


def run(regime_name: str) -> dict:
    root = paths.project_root()
    params = load_params(paths.resolve(paths.PARAMS, root))
    ev, seed = params.evaluate, params.base.seed
    regime = ev.regimes[regime_name]
    gpus = load_gpu_catalog(paths.resolve(paths.GPU_CATALOG, root))
    llms = load_llm_catalog(paths.resolve(paths.LLM_CATALOG_TABLE, root))
    table = read_table(paths.resolve(paths.MEASUREMENTS, root))
    rows = prepare_rows(
        table, gpus, llms, source=ev.source, dense_only=ev.replica.dense_only,
        idle_power_w=load_idle_power(paths.resolve(paths.GPU_IDLE_POWER, root), gpus), offline_batch=ev.roofline_offline_batch,
    )
    rows, _ = replica.paper_target(rows, "itl")  # the paper's ITL definition (offline: duration / tokens)

    parts, importances, timings = [], {}, {}
    for target in params.base.targets:
        t_rows = target_rows(rows, target)
        start = time.perf_counter()
        cp = cross_predict(t_rows, lambda: paper_model(target, ev.replica, seed, ev.n_jobs), regime, seed)
        timings[target] = round(time.perf_counter() - start, 2)
        print(f"evaluate {regime_name}: {target} replica over {cp.n_folds} folds in {timings[target]} s")
        parts.append(prediction_frame(t_rows, target, "paper_replica", cp.y_pred))
        if cp.importances:
            importances[target] = pd.concat(cp.importances, axis=1).mean(axis=1).sort_values(ascending=False)
        if target == "power":
            parts.append(prediction_frame(t_rows, target, "tdp", baselines.tdp(t_rows)))
            parts.append(prediction_frame(t_rows, target, "load_scaled_tdp", baselines.load_scaled_tdp(t_rows, ev.load_rho)))
        else:
            parts.append(prediction_frame(t_rows, target, "roofline", baselines.roofline_itl(t_rows)))
    pred = pd.concat(parts, ignore_index=True)
    result = {"regime": regime_name, "kind": regime.kind, "source": ev.source,
              "rows": int(len(rows)), "metrics": metrics_table(pred)}  # no timings: the file must reproduce exactly

    out = paths.resolve(paths.EVALUATE_DIR / regime_name, root)
    write_csv(out / "predictions.csv", pred)
    replica_pred = pred[pred["model"] == "paper_replica"]
    for by in ("gpu", "llm"):
        bd = pd.concat([metrics.breakdown(g, by).assign(target=t) for t, g in replica_pred.groupby("target")])
        write_csv(out / f"per_{by}.csv", bd)
        if by == "gpu":
            for t, g in bd.groupby("target"):
                plots.per_group_error(g, by, f"{regime_name}: replica {t} MdAPE per GPU", out / f"per_gpu_{t}.png")
    plots.predicted_vs_measured(replica_pred, f"{regime_name} replica", out / "predicted_vs_measured.png")
    for t, imp in importances.items():
        plots.importance(imp, f"{regime_name}: replica {t} feature importance", out / f"importance_{t}.png")
    write_json(out / "metrics.json", result)
    log_to_mlflow(regime_name, params, result, out, root)
    return result


def log_to_mlflow(regime_name, params, result, out, root) -> None:
    mlflow = tracking.setup("wattgpu-evaluate", root)
    with mlflow.start_run(run_name=f"evaluate-{regime_name}"):
        mlflow.set_tags({
            "stage": "evaluate", "regime": regime_name, "git_commit": tracking.git_commit(root),
            "data_md5": tracking.file_md5(paths.resolve(paths.MEASUREMENTS, root)),
        })
        ev = params.evaluate
        mlflow.log_params({
            "seed": params.base.seed, "regime": regime_name, "kind": ev.regimes[regime_name].kind,
            "source": ev.source, "dense_only": ev.replica.dense_only,
            **{f"replica.power.{k}": v for k, v in ev.replica.power.model_dump().items()},
            **{f"replica.itl.{k}": v for k, v in ev.replica.itl.model_dump().items()},
            **{f"load_rho.{k}": v for k, v in ev.load_rho.items()},
            "roofline_offline_batch": ev.roofline_offline_batch,
        })
        mlflow.log_metrics(tracking.flatten(result["metrics"]))
        mlflow.log_artifacts(str(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("regime", help="a key of params.yaml evaluate.regimes")
    args = parser.parse_args()
    run(args.regime)


if __name__ == "__main__":
    main()
