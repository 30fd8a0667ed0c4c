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

import contextlib
import json
import shutil
from collections.abc import Mapping
from pathlib import Path

from wattgpu.catalogs.gpus import load_gpu_catalog
from wattgpu.catalogs.llms import load_llm_catalog
from wattgpu.errors import WattgpuError
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
    import joblib  # here, not at the top: a cached `wattgpu predict` never loads a model (~35 ms of imports)

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
    if not (Path(path) / CALIBRATION).exists():
        return None
    with _reading(Path(path), CALIBRATION) as file:
        return Calibration.from_json(json.loads(file.read_text()))


class ModelFolderError(WattgpuError):
    """A model folder that is missing, incomplete or unreadable; says how to get a good one back."""

    def __init__(self, path: Path, problem: str):
        self.path = Path(path)
        super().__init__(f"model folder {path}: {problem}; rebuild it with `make run` (or `dvc repro -s register`), "
                         "or restore the last one built here with `dvc checkout`")


@contextlib.contextmanager
def _reading(path: Path, name: str):
    """Any failure to read back `name`, a file save_model_dir wrote, is a ModelFolderError naming it."""
    if not (path / name).is_file():
        raise ModelFolderError(path, f"{name} missing" if path.is_dir() else "not found")
    try:
        yield path / name
    except WattgpuError as exc:
        raise ModelFolderError(path, f"{name} is invalid ({_one_line(exc)})") from None
    except Exception as exc:  # noqa: BLE001 - a truncated file, a file of another format, ...: corruption
        detail = _one_line(exc)
        raise ModelFolderError(path, f"{name} is unreadable ({type(exc).__name__}{': ' + detail if detail else ''})"
                               ) from None


def _one_line(exc: Exception, limit: int = 200) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def read_meta(path: Path) -> dict:
    with _reading(Path(path), META) as file:
        meta = json.loads(file.read_text())
        if not isinstance(meta, dict):
            raise TypeError(f"holds a JSON {type(meta).__name__}, not an object")
        return meta


def read_catalogs(path: Path):
    """(gpus, llms): the catalogs a model folder was trained with."""
    path = Path(path)
    with _reading(path, GPUS) as file:
        gpus = load_gpu_catalog(file)
    with _reading(path, LLMS) as file:
        llms = load_llm_catalog(file)
    return gpus, llms


def load_model_dir(path: Path):
    """(estimator, meta, gpus, llms) from a folder written by save_model_dir; ModelFolderError when it is missing,
    incomplete or unreadable, naming the file."""
    path = Path(path)
    meta = read_meta(path)
    import joblib

    with _reading(path, ESTIMATOR) as file:
        estimator = joblib.load(file)
        if not hasattr(estimator, "predict"):
            raise TypeError(f"holds a {type(estimator).__name__}, not a fitted model")
    _predict_on_one_thread(estimator)
    return (estimator, meta, *read_catalogs(path))


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
