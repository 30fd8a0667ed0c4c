"""A fitted model on disk: one folder per target, written and read only by this project.

Layout of a model folder:
    estimator.joblib   the fitted TargetRegressor (joblib; we only ever load files this project wrote)
    gpus.yaml          the GPU catalog it was trained with (names in requests resolve offline)
    llm_catalog.csv    the LLM catalog it was trained with
    meta.json          target, algorithm, feature set, hyperparameters, training rows, evaluation figures
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import joblib

from wattgpu.catalogs.gpus import load_gpu_catalog
from wattgpu.catalogs.llms import load_llm_catalog
from wattgpu.predict import Predictor

ESTIMATOR, GPUS, LLMS, META = "estimator.joblib", "gpus.yaml", "llm_catalog.csv", "meta.json"


def save_model_dir(path: Path, estimator, gpus_file: Path, llms_file: Path, meta: dict) -> Path:
    path = Path(path)
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    joblib.dump(estimator, path / ESTIMATOR)
    shutil.copyfile(gpus_file, path / GPUS)
    shutil.copyfile(llms_file, path / LLMS)
    (path / META).write_text(json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n")
    return path


def load_model_dir(path: Path):
    """(estimator, meta, gpus, llms) from a folder written by save_model_dir."""
    path = Path(path)
    meta = json.loads((path / META).read_text())
    estimator = joblib.load(path / ESTIMATOR)
    return estimator, meta, load_gpu_catalog(path / GPUS), load_llm_catalog(path / LLMS)


def load_predictor(power_dir: Path | None, itl_dir: Path | None) -> Predictor:
    """A Predictor from model folders (either may be None); catalogs come from the first folder given."""
    models, versions, gpus, llms = {}, {}, None, None
    for target, folder in (("power", power_dir), ("itl", itl_dir)):
        if folder is None:
            continue
        est, meta, g, l = load_model_dir(folder)
        models[target] = est
        versions[target] = str(meta.get("version", meta.get("algorithm", "?")))
        gpus, llms = gpus or g, llms or l
    if not models:
        raise ValueError("no model folder given")
    return Predictor(models, gpus, llms, versions)
