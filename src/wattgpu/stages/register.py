"""Stage `register`: retrain each target's winning configuration on all rows, log it as an MLflow pyfunc model,
register it (`wattgpu-power`, `wattgpu-itl`) and promote it to champion only as the gate decides (wattgpu.registry:
`gate` builds the challenger's outer folds, `judge` compares it with the champion on them; the rules are there).
This module is the entry and the I/O around it: the candidate, the training table, the champion's folder and tags.

Reads reports/search/best_<target>.json (the search stage's winner on the primary regime, with its nested
MdAPE). Until the search stage has written one, the PAPER REPLICA stands in (algorithm "paper_replica"), with
the `evaluate` stage's figures on `registry.replica_regime`: it is not tuned, so those are honest held-out figures.
Writes models/<target>/, models/registry.json (name, version, alias, decision per target) and
reports/register/decision.json (per target: the decision, both configurations, their per-fold and mean scores, the
test statistic and the evidence; no time in it, so a rerun on the same inputs writes the same file). A run on the
configuration and evaluation the newest version was registered from reproduces that version's decision and
registers nothing. models/<target>/ always holds the CHAMPION (what the planner and `wattgpu predict` use): a
challenger that is not promoted is registered, and the champion's folder, as logged with its version, is put back.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from wattgpu import codehash, paths, registry, tracking
from wattgpu.catalogs.gpus import load_gpu_catalog
from wattgpu.catalogs.idle_power import load_idle_power
from wattgpu.catalogs.llms import load_llm_catalog
from wattgpu.config import Evaluate, Params, Registry, load_params
from wattgpu.errors import WattgpuError
from wattgpu.evaluation.cv import fit_fold
from wattgpu.evaluation.runner import prepare_rows, step_rows, target_rows
from wattgpu.io import read_table, write_json
from wattgpu.modeling import coverage, steptime
from wattgpu.modeling.replica import paper_model
from wattgpu.modeling.store import META, save_model_dir
from wattgpu.modeling.targets import TARGETS
from wattgpu.registry import CHAMPION, Candidate, Configuration, Evaluation, Gate, Incumbent
from wattgpu.serving import pyfunc

STAGE = "wattgpu.stages.register"
DECISION_FILE = paths.REPORTS_DIR / "register" / "decision.json"
DESCRIPTIONS = {
    "power": "Mean power per GPU (W) of LLM inference on a GPU and an LLM given by catalog name or by spec.",
    "itl": "Mean inter-token latency (s) of LLM inference on a GPU and an LLM given by catalog name or by spec.",
}


def candidate(target: str, params: Params, reg: Registry, root) -> Candidate:
    best_file = paths.resolve(paths.SEARCH_DIR / f"best_{target}.json", root)
    if best_file.exists():
        best = json.loads(best_file.read_text())
        config = Configuration(target, best["algorithm"], best["feature_set"], best["hyperparameters"],
                               best.get("physics", {}), params.search.source, params.search.dense_only)
        return Candidate("search", config, best["regime"], float(best["nested_mdape"]["offline"]),
                         float(best["nested_mdape"]["server"]))
    # Fallback: the paper replica, scored by the evaluate stage on registry.replica_regime.
    ev = params.evaluate
    scores = json.loads(paths.resolve(paths.EVALUATE_DIR / reg.replica_regime / "metrics.json", root).read_text())
    replica = scores["metrics"][target]["paper_replica"]
    config = Configuration(target, registry.REPLICA_ALGORITHM, paper_model(target, ev.replica).features.name,
                           getattr(ev.replica, target).model_dump(), {"offline_batch": ev.roofline_offline_batch},
                           ev.source, ev.replica.dense_only)
    return Candidate("paper_replica fallback", config, reg.replica_regime, float(replica["offline"]["mdape"]),
                     float(replica["server"]["mdape"]))


def code() -> str:
    """The fingerprint of the code this stage runs (what the gate's Evaluation records)."""
    return codehash.digest([STAGE])[:16]


def run() -> dict:
    root = paths.project_root()
    params = load_params(paths.resolve(paths.PARAMS, root))
    ev, reg = params.evaluate, params.registry or Registry()
    cats = catalogs(root)

    mlflow = tracking.setup("wattgpu-register", root)
    records = {}
    with mlflow.start_run(run_name="register"):
        mlflow.set_tags({"stage": "register", "git_commit": tracking.git_commit(root),
                         "data_md5": tracking.file_md5(paths.resolve(paths.MEASUREMENTS, root))})
        mlflow.log_params({"seed": params.base.seed, **{f"registry.{k}": v for k, v in reg.model_dump().items()}})
        # ITL first: the power model is logged with the ITL champion it is served with, and scored with it (a
        # Poisson row's requests in flight come from the served ITL model).
        served_itl = None
        for target in sorted(params.base.targets, key=lambda t: t != "itl"):
            cand = candidate(target, params, reg, root)
            config = cand.configuration
            training = {"source": config.source or "all", "dense_only": config.dense_only, "seed": params.base.seed,
                        "offline_batch": ev.roofline_offline_batch}
            table = training_table(root, config.source, config.dense_only, ev, cats)
            rows = target_rows(table, target)
            check = registry.gate(target, rows, cand, params, code(), served_itl, step_rows(table, target))
            records[target] = r = publish(target, rows, cand, reg, paths.resolve(paths.MODELS_DIR / target, root),
                                          cats, training, check, calibration_folds(rows, params))
            if target == "itl":  # the folder holds the ITL champion now (promoted or restored)
                meta = json.loads((paths.resolve(paths.MODELS_DIR / "itl", root) / META).read_text())
                served_itl = configuration_of(meta, dict(ev.load_rho))
            print(f"register {target}: {r['name']} v{r['version']} ({config.algorithm}, {cand.origin}) -> "
                  f"{r['decision']}: {r['reason']}")
    write_json(paths.resolve(paths.MODELS_DIR / "registry.json", root),
               {t: {k: r[k] for k in ("name", "version", "alias", "champion_version", "decision", "reason")}
                for t, r in records.items()})
    write_json(paths.resolve(DECISION_FILE, root), records)
    return records


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
    return inner_folds(rows, s.regimes[s.primary_regime], s.active.calibration_splits, params.base.seed)


def publish(target: str, rows: pd.DataFrame, cand: Candidate, reg: Registry, folder: Path, catalogs: Catalogs,
            training: dict, check: Gate, folds: list | None = None) -> dict:
    """Decide on `cand` against the champion (registry.judge, on `check`'s folds), fit it on every row, write the
    model folder, log it as a pyfunc model (a nested run) and register it with the decision; the decision record.
    With `folds`, the model folder carries conformal calibration scores from fits on each fold's training rows."""
    import mlflow

    client, name, config = mlflow.MlflowClient(), reg.names[target], cand.configuration
    inputs = registry.inputs_sha({"configuration": config.to_json(), "evaluation": asdict(check.evaluation),
                                  "rule": reg.model_dump(), "training": training,
                                  "calibration": registry.folds_md5(folds or [])})
    again = registry.reproduced(client, name, inputs)
    if again is not None:  # decided on these very inputs already: nothing new to register
        restore_champion(name, folder, target)
        return again

    learn, _ = config.learning_rows(rows)  # the paper replica learns the paper's ITL definition
    calibration = check.calibration(config, folds) if folds else None  # held-out rows predicted as served
    champion = incumbent(client, name, target, dict(check.load_rho))
    adds_intervals = calibration is not None and champion is not None and not champion.intervals
    decision, record = registry.judge(cand, champion, check, reg, adds_intervals)

    model = fit_fold(config.estimator(check.seed, check.n_jobs), learn, np.arange(len(learn)), check.step_rows)
    learns_step_time = check.step_rows is not None and getattr(model, "learns_step_time", False)
    meta = {"target": target, "unit": TARGETS[target].unit, "origin": cand.origin, "algorithm": config.algorithm,
            "feature_set": config.feature_set, "hyperparameters": config.hyperparameters,
            "configuration": config.to_json(), **training,
            "training_rows": len(learn),
            "step_rows": len(check.step_rows) if learns_step_time else 0,  # latency-only rows its step time saw
            "training_ranges": coverage.training_ranges(learn),
            "evaluation": {**cand.nested(), **asdict(check.evaluation)},
            "calibration": None if calibration is None else {"folds": len(folds), "scores": calibration.counts()}}
    save_model_dir(folder, model, catalogs.gpus_file, catalogs.llms_file, meta, catalogs.idle_power_w, calibration)
    with mlflow.start_run(run_name=f"register-{target}", nested=True):
        mlflow.log_params({k: meta[k] for k in ("target", "origin", "algorithm", "feature_set", "training_rows")})
        mlflow.log_params({f"hp.{k}": v for k, v in config.hyperparameters.items()})
        mlflow.log_metrics({"nested_offline_mdape": cand.offline_mdape, "nested_server_mdape": cand.server_mdape,
                            **{f"{who}_mean_score": record[who]["mean_score"] for who in ("challenger", "champion")
                               if record[who] and record[who]["mean_score"] is not None}})
        itl_folder = folder.parent / "itl" if target == "power" and (folder.parent / "itl").exists() else None
        info = pyfunc.log_model(target, folder, itl_folder)
    compared = champion.version if champion else None
    version = registry.register_version(
        client, name, info.model_uri, decision, check.evaluation, config, compared, record["test"] or {},
        tags={"algorithm": config.algorithm, "origin": cand.origin, "feature_set": config.feature_set,
              registry.INTERVALS_TAG: "conformal" if calibration is not None else "none"},
        model_description=DESCRIPTIONS[target])
    record.update(version=int(version), alias=CHAMPION if decision.promote else registry.CHALLENGER,
                  champion_version=int(version if decision.promote else compared))
    client.set_model_version_tag(name, version, registry.RECORD_TAG, json.dumps(record, sort_keys=True))
    client.set_model_version_tag(name, version, registry.INPUTS_TAG, inputs)
    if not decision.promote:
        restore_champion(name, folder, target)  # the folder holds record["champion_version"]
    return record


def incumbent(client, name: str, target: str, load_rho: dict[str, float]) -> Incumbent | None:
    """`name`'s champion (None before the first): its configuration from its model folder, its evaluation, intervals
    and own per-fold scores from its version's tags."""
    version = registry.aliases(client, name).get(CHAMPION)
    if version is None:
        return None
    tags = client.get_model_version(name, version).tags
    with champion_folder(name, target) as folder:
        meta = json.loads((folder / META).read_text())
    return Incumbent(version, configuration_of(meta, load_rho), Evaluation.from_tags(tags),
                     tags.get(registry.INTERVALS_TAG) == "conformal", registry.recorded_scores(tags))


def configuration_of(meta: dict, load_rho: dict[str, float]) -> Configuration:
    """A model folder's configuration: as recorded (`configuration`), or for a folder written before it was, from
    its algorithm, feature set, hyperparameters and training rows, with today's evaluate.load_rho (what the search
    that chose it used unless that setting changed since)."""
    if "configuration" in meta:
        return Configuration.from_json(meta["configuration"])
    physics = {"offline_batch": float(meta["offline_batch"])}
    if meta["algorithm"] != registry.REPLICA_ALGORITHM:
        physics["load_rho"] = dict(load_rho)
    source = meta.get("source", "all")
    return Configuration(meta["target"], meta["algorithm"], meta["feature_set"], meta["hyperparameters"], physics,
                         None if source == "all" else source, bool(meta.get("dense_only", False)))


@contextmanager
def champion_folder(name: str, target: str) -> Iterator[Path]:
    """The model folder logged with `name`'s champion version (in a temporary folder)."""
    import mlflow

    with tempfile.TemporaryDirectory() as tmp:
        local = Path(mlflow.artifacts.download_artifacts(artifact_uri=f"models:/{name}@{CHAMPION}", dst_path=tmp))
        found = [m for m in sorted(local.glob(f"artifacts/*/{META}"))
                 if json.loads(m.read_text()).get("target") == target]
        if len(found) != 1:
            raise WattgpuError(f"{name}@{CHAMPION}: expected one model folder in its artifacts, found {len(found)}")
        yield found[0].parent


def restore_champion(name: str, folder: Path, target: str) -> None:
    """Replace `folder` with the model folder logged with `name`'s champion version."""
    with champion_folder(name, target) as found:
        if folder.exists():
            shutil.rmtree(folder)
        shutil.copytree(found, folder)


def main() -> None:
    steptime.SOLVED_STORE.open(paths.resolve(paths.STEP_FITS_DIR))  # the search stages' solves of the same folds
    run()


if __name__ == "__main__":
    main()
