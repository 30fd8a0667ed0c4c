"""Stage `register`: retrain each target's winning configuration on all rows, log it as an MLflow pyfunc model,
register it (`wattgpu-power`, `wattgpu-itl`) and promote it to champion only when it beats the champion.

Reads reports/search/best_<target>.json (the search stage's winner on the primary regime, with its nested
MdAPE). Until the search stage has written one, the PAPER REPLICA stands in (algorithm "paper_replica"), with
the `evaluate` stage's figures on `registry.replica_regime`: it is not tuned, so those are honest held-out figures.
Writes models/<target>/ and models/registry.json (version, alias, decision, figures per target). models/<target>/
always holds the CHAMPION (what the planner and `wattgpu predict` use): a challenger that is not promoted is
registered, and the champion's folder, as logged with its version, is put back.
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from wattgpu import paths, registry, tracking
from wattgpu.catalogs.gpus import load_gpu_catalog
from wattgpu.catalogs.idle_power import load_idle_power
from wattgpu.catalogs.llms import load_llm_catalog
from wattgpu.config import Evaluate, Params, Registry, load_params
from wattgpu.errors import WattgpuError
from wattgpu.evaluation.predictions import ID_COLUMNS
from wattgpu.evaluation.runner import prepare_rows, target_rows
from wattgpu.io import read_table, write_json
from wattgpu.modeling import coverage, intervals, replica
from wattgpu.modeling.replica import paper_model
from wattgpu.modeling.store import save_model_dir
from wattgpu.modeling.targets import TARGETS
from wattgpu.serving import pyfunc

DESCRIPTIONS = {
    "power": "Mean power per GPU (W) of LLM inference on a GPU and an LLM given by catalog name or by spec.",
    "itl": "Mean inter-token latency (s) of LLM inference on a GPU and an LLM given by catalog name or by spec.",
}


@dataclass
class Candidate:
    """An unfitted estimator with what it is and how it scored on the primary regime."""

    estimator: object
    origin: str  # "search" or "paper_replica fallback"
    algorithm: str
    feature_set: str
    hyperparameters: dict
    regime: str
    offline_mdape: float
    server_mdape: float
    source: str | None  # the rows it trains on: one source, or every source (None)
    dense_only: bool


def candidate(target: str, params: Params, reg: Registry, root) -> Candidate:
    best_file = paths.resolve(paths.SEARCH_DIR / f"best_{target}.json", root)
    if best_file.exists():
        from wattgpu.modeling.algorithms import build_estimator

        best = json.loads(best_file.read_text())
        return Candidate(build_estimator(best, params.base.seed), "search", best["algorithm"], best["feature_set"],
                         best["hyperparameters"], best["regime"], float(best["nested_mdape"]["offline"]),
                         float(best["nested_mdape"]["server"]), params.search.source, params.search.dense_only)
    # Fallback: the paper replica, scored by the evaluate stage on registry.replica_regime.
    ev = params.evaluate
    scores = json.loads(paths.resolve(paths.EVALUATE_DIR / reg.replica_regime / "metrics.json", root).read_text())
    replica = scores["metrics"][target]["paper_replica"]
    estimator = paper_model(target, ev.replica, params.base.seed, ev.n_jobs)
    return Candidate(estimator, "paper_replica fallback", "paper_replica", estimator.features.name,
                     getattr(ev.replica, target).model_dump(), reg.replica_regime,
                     float(replica["offline"]["mdape"]), float(replica["server"]["mdape"]), ev.source,
                     ev.replica.dense_only)


def run() -> dict:
    root = paths.project_root()
    params = load_params(paths.resolve(paths.PARAMS, root))
    ev, reg = params.evaluate, params.registry or Registry()
    cats = catalogs(root)

    mlflow = tracking.setup("wattgpu-register", root)
    summary = {}
    with mlflow.start_run(run_name="register"):
        mlflow.set_tags({"stage": "register", "git_commit": tracking.git_commit(root),
                         "data_md5": tracking.file_md5(paths.resolve(paths.MEASUREMENTS, root))})
        mlflow.log_params({"seed": params.base.seed, **{f"registry.{k}": v for k, v in reg.model_dump().items()}})
        # ITL first: the power model is logged with the ITL champion it is served with.
        for target in sorted(params.base.targets, key=lambda t: t != "itl"):
            cand = candidate(target, params, reg, root)
            training = {"source": cand.source or "all", "dense_only": cand.dense_only, "seed": params.base.seed,
                        "offline_batch": ev.roofline_offline_batch}
            rows = target_rows(training_table(root, cand.source, cand.dense_only, ev, cats), target)
            if cand.algorithm == "paper_replica":
                rows, _ = replica.paper_target(rows, target)  # the replica learns the paper's ITL definition
            folds = calibration_folds(rows, params)
            summary[target] = s = publish(target, rows, cand, reg, paths.resolve(paths.MODELS_DIR / target, root),
                                          cats, training, folds)
            print(f"register {target}: {s['name']} v{s['version']} ({cand.algorithm}, {cand.origin}) -> "
                  f"{s['decision']}: {s['reason']}")
    write_json(paths.resolve(paths.MODELS_DIR / "registry.json", root), summary)
    return summary


@dataclass(frozen=True)
class Catalogs:
    """What a model folder carries besides the estimator: the catalogs names resolve in, measured idle W."""

    gpus_file: Path
    llms_file: Path
    gpus: object
    llms: object
    idle_power_w: dict[str, float]


def catalogs(root: Path) -> Catalogs:
    gpus_file, llms_file = paths.resolve(paths.GPU_CATALOG, root), paths.resolve(paths.LLM_CATALOG_TABLE, root)
    gpus = load_gpu_catalog(gpus_file)
    return Catalogs(gpus_file, llms_file, gpus, load_llm_catalog(llms_file),
                    load_idle_power(paths.resolve(paths.GPU_IDLE_POWER, root), gpus))


def training_table(root: Path, source: str | None, dense_only: bool, ev: Evaluate, cats: Catalogs) -> pd.DataFrame:
    """Every row of `source` (None: every source), MoE LLMs unless `dense_only`, with specs and features."""
    return prepare_rows(read_table(paths.resolve(paths.MEASUREMENTS, root)), cats.gpus, cats.llms, source=source,
                        dense_only=dense_only, idle_power_w=cats.idle_power_w, offline_batch=ev.roofline_offline_batch)


def calibration_folds(rows: pd.DataFrame, params: Params) -> list:
    """The primary search regime's calibration folds on every row (GPU groups held out under LOGO): the same
    procedure whose coverage the search measures on its outer folds."""
    from wattgpu.search.nested import inner_folds

    s = params.search
    if s is None:
        return []
    return inner_folds(rows, s.regimes[s.primary_regime], s.active.calibration_folds, params.base.seed)


def publish(target: str, rows: pd.DataFrame, cand: Candidate, reg: Registry, folder: Path, catalogs: Catalogs,
            training: dict, folds: list | None = None) -> dict:
    """Fit `cand` on every row, write the model folder, log it as a pyfunc model (a nested run), register it.
    With `folds`, the model folder carries conformal calibration scores from fits on each fold's training rows."""
    import mlflow

    calibration = None
    if folds:
        y = rows[TARGETS[target].column].to_numpy(dtype=float)
        calibration = intervals.calibrate(lambda: copy.deepcopy(cand.estimator), rows, y, folds)

    figures = registry.Figures(cand.regime, cand.offline_mdape, cand.server_mdape,
                               registry.rows_md5(rows[[*ID_COLUMNS, TARGETS[target].column]]))
    meta = {"target": target, "unit": TARGETS[target].unit, "origin": cand.origin, "algorithm": cand.algorithm,
            "feature_set": cand.feature_set, "hyperparameters": cand.hyperparameters, **training,
            "training_rows": len(rows), "training_ranges": coverage.training_ranges(rows),
            "evaluation": figures.summary(),
            "calibration": None if calibration is None else {"folds": len(folds), "scores": calibration.counts()}}
    save_model_dir(folder, cand.estimator.fit(rows), catalogs.gpus_file, catalogs.llms_file, meta, catalogs.idle_power_w,
                   calibration)
    with mlflow.start_run(run_name=f"register-{target}", nested=True):
        mlflow.log_params({k: meta[k] for k in ("target", "origin", "algorithm", "feature_set", "training_rows")})
        mlflow.log_params({f"hp.{k}": v for k, v in cand.hyperparameters.items()})
        mlflow.log_metrics({k: v for k, v in figures.summary().items() if isinstance(v, float)})
        itl_folder = folder.parent / "itl" if target == "power" and (folder.parent / "itl").exists() else None
        info = pyfunc.log_model(target, folder, itl_folder)
    result = registry.register_version(
        mlflow.MlflowClient(), reg.names[target], info.model_uri, figures, reg,
        tags={"algorithm": cand.algorithm, "origin": cand.origin, "feature_set": cand.feature_set,
              registry.INTERVALS_TAG: "conformal" if calibration is not None else "none"},
        model_description=DESCRIPTIONS[target])
    if result["alias"] != registry.CHAMPION:
        restore_champion(reg.names[target], folder, target)  # the folder holds result["champion_version"]
    return result


def restore_champion(name: str, folder: Path, target: str) -> None:
    """Replace `folder` with the model folder logged with `name`'s champion version."""
    import mlflow

    with tempfile.TemporaryDirectory() as tmp:
        local = Path(mlflow.artifacts.download_artifacts(artifact_uri=f"models:/{name}@{registry.CHAMPION}",
                                                         dst_path=tmp))
        found = [m for m in sorted(local.glob("artifacts/*/meta.json"))
                 if json.loads(m.read_text()).get("target") == target]
        if len(found) != 1:
            raise WattgpuError(f"{name}@{registry.CHAMPION}: expected one model folder in its artifacts, found "
                               f"{len(found)}")
        shutil.rmtree(folder)
        shutil.copytree(found[0].parent, folder)


def main() -> None:
    run()


if __name__ == "__main__":
    main()
