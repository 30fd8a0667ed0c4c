"""Default paths, in one place. Every path is relative to the project root unless made absolute."""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """The project root: $WATTGPU_ROOT, else the nearest parent holding dvc.yaml or pyproject.toml."""
    env = os.environ.get("WATTGPU_ROOT")
    if env:
        return Path(env).resolve()
    here = Path.cwd().resolve()
    for candidate in (here, *here.parents):
        if (candidate / "dvc.yaml").exists() or (candidate / "pyproject.toml").exists():
            return candidate
    return here


ROOT = project_root
RAW_DIR = Path("data/raw")
CATALOG_DIR = Path("data/catalogs")
GPU_CATALOG = CATALOG_DIR / "gpus.yaml"
LLM_CONFIG_DIR = CATALOG_DIR / "llm_configs"
GPU_IDLE_POWER = CATALOG_DIR / "gpu_idle_power.yaml"  # measured; only the paper replica uses it
PROCESSED_DIR = Path("data/processed")
LLM_CATALOG_TABLE = PROCESSED_DIR / "llm_catalog.csv"
MEASUREMENTS = PROCESSED_DIR / "measurements.csv"
QUARANTINE = PROCESSED_DIR / "quarantine.csv"
REPORTS_DIR = Path("reports")
DATA_REPORT = REPORTS_DIR / "ingest" / "data_report.json"
EVALUATE_DIR = REPORTS_DIR / "evaluate"  # evaluate@<regime> and tables
SEARCH_DIR = REPORTS_DIR / "search"  # search@<regime>, search_best, search_leaderboard
MODELS_DIR = Path("models")  # the registered champions: models/power/, models/itl/, models/registry.json
OPTUNA_DIR = Path("optuna")  # Optuna studies (sqlite), resumable
# converged step-time solves that a search's processes and the stages after it share (steptime.SolvedStore)
STEP_FITS_DIR = OPTUNA_DIR / "step_fits"
PARAMS = Path("params.yaml")


def resolve(path: Path | str, root: Path | None = None) -> Path:
    """Make `path` absolute against the project root (DVC may run stages from other folders)."""
    p = Path(path)
    return p if p.is_absolute() else (root or project_root()) / p


def models_folder(folder: Path | str | None = None, root: Path | None = None) -> Path:
    """The folder the served models are loaded from: `folder` where given, else MODELS_DIR, under the project root
    (the planner's --models; the answer memo stamps the same folder)."""
    return resolve(folder if folder is not None else MODELS_DIR, root)
