"""A fitted model on disk: one folder per target, written and read only by this project.

Layout of a model folder:
    estimator.joblib   the fitted TargetRegressor (joblib; we only ever load files this project wrote)
    gpus.yaml          the GPU catalog it was trained with (names in requests resolve offline)
    llm_catalog.csv    the LLM catalog it was trained with
    meta.json          target, algorithm, feature set, hyperparameters, training rows, evaluation figures,
                       offline_batch (the offline batch the features were built with; absent: workload.OFFLINE_MAX_NUM_SEQS)
    gpu_idle_power.json  optional: catalog GPU key -> measured idle W (only the paper replica's power model uses it)
    calibration.json   optional: conformal calibration scores (modeling.intervals.Calibration); without it the
                       model gives point predictions only
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path

import joblib

from wattgpu.catalogs.gpus import load_gpu_catalog
from wattgpu.catalogs.llms import load_llm_catalog
from wattgpu.modeling.intervals import Calibration
from wattgpu.modeling.predictor import Predictor
from wattgpu.workload import OFFLINE_MAX_NUM_SEQS

ESTIMATOR, GPUS, LLMS, META = "estimator.joblib", "gpus.yaml", "llm_catalog.csv", "meta.json"
TARGET_DIRS = ("power", "itl")  # one model folder per target
IDLE_POWER = "gpu_idle_power.json"
CALIBRATION = "calibration.json"


def save_model_dir(path: Path, estimator, gpus_file: Path, llms_file: Path, meta: dict,
                   idle_power_w: Mapping[str, float] | None = None, calibration: Calibration | None = None) -> Path:
    """Write a model folder (replacing any previous one at `path`)."""
    path = Path(path)
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    joblib.dump(estimator, path / ESTIMATOR)
    shutil.copyfile(gpus_file, path / GPUS)
    shutil.copyfile(llms_file, path / LLMS)
    (path / META).write_text(json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n")
    if idle_power_w:
        (path / IDLE_POWER).write_text(json.dumps(dict(idle_power_w), indent=2, sort_keys=True) + "\n")
    if calibration is not None:
        (path / CALIBRATION).write_text(json.dumps(calibration.to_json()) + "\n")
    return path


def load_calibration(path: Path) -> Calibration | None:
    file = Path(path) / CALIBRATION
    return Calibration.from_json(json.loads(file.read_text())) if file.exists() else None


def load_model_dir(path: Path):
    """(estimator, meta, gpus, llms) from a folder written by save_model_dir."""
    path = Path(path)
    meta = json.loads((path / META).read_text())
    estimator = joblib.load(path / ESTIMATOR)
    _predict_on_one_thread(estimator)
    return estimator, meta, load_gpu_catalog(path / GPUS), load_llm_catalog(path / LLMS)


def _predict_on_one_thread(estimator) -> None:
    """Requests are small: a thread pool costs more than it saves (XGBoost on 2 cores: 20 ms vs 0.4 ms for one
    row, 13 ms vs 6 ms for 1,000 rows)."""
    pipeline = getattr(estimator, "pipeline_", None)
    model = pipeline.steps[-1][1] if pipeline is not None else estimator
    if hasattr(model, "get_params") and "n_jobs" in model.get_params(deep=False):
        model.set_params(n_jobs=1)


def load_idle_power(path: Path) -> dict[str, float]:
    """The folder's measured idle power per catalog GPU key ({} when it has none)."""
    file = Path(path) / IDLE_POWER
    return {k: float(v) for k, v in json.loads(file.read_text()).items()} if file.exists() else {}


def load_predictor(power_dir: Path | None, itl_dir: Path | None) -> Predictor:
    """A Predictor from model folders (either may be None); catalogs come from the first folder given."""
    models, versions, gpus, llms, idle, offline_batch = {}, {}, None, None, {}, None
    calibration, ranges = {}, {}
    for target, folder in (("power", power_dir), ("itl", itl_dir)):
        if folder is None:
            continue
        est, meta, g, l = load_model_dir(folder)
        models[target] = est
        versions[target] = str(meta.get("version", meta.get("algorithm", "?")))
        if (cal := load_calibration(folder)) is not None:
            calibration[target], ranges[target] = cal, meta.get("training_ranges", {})
        gpus, llms = gpus or g, llms or l
        idle = {**load_idle_power(folder), **idle}
        batch = meta.get("offline_batch")
        if batch is not None and offline_batch is not None and float(batch) != offline_batch:
            raise ValueError(f"model folders disagree on offline_batch ({offline_batch} vs {batch}): retrain together")
        offline_batch = offline_batch if batch is None else float(batch)
    if not models:
        raise ValueError("no model folder given")
    return Predictor(models, gpus, llms, offline_batch=offline_batch or float(OFFLINE_MAX_NUM_SEQS), versions=versions,
                     idle_power_w=idle, calibration=calibration, training_ranges=ranges)
