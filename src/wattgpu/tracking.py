"""MLflow at the edge: a sqlite store under mlruns/ with artifacts beside it, absolute URIs, no telemetry."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from wattgpu import paths

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "1")


def tracking_dir(root: Path | None = None) -> Path:
    return paths.resolve(os.environ.get("WATTGPU_MLRUNS", "mlruns"), root)


def tracking_uri(root: Path | None = None) -> str:
    return f"sqlite:///{tracking_dir(root) / 'mlflow.db'}"


def artifact_location(root: Path | None = None) -> str:
    return (tracking_dir(root) / "artifacts").as_uri()


def setup(experiment: str, root: Path | None = None):
    """Point MLflow at the project store and select (creating if needed) `experiment`."""
    import mlflow

    tracking_dir(root).mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(tracking_uri(root))
    mlflow.set_registry_uri(tracking_uri(root))
    if mlflow.get_experiment_by_name(experiment) is None:
        mlflow.create_experiment(experiment, artifact_location=f"{artifact_location(root)}/{experiment}")
    mlflow.set_experiment(experiment)
    return mlflow


def git_commit(root: Path | None = None) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root or paths.project_root(),
                             capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def file_md5(path: Path) -> str:
    h = hashlib.md5()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def flatten(metrics: dict, prefix: str = "") -> dict[str, float]:
    """{a: {b: 1.0}} -> {"a.b": 1.0}, finite numbers only (MLflow metric names)."""
    out: dict[str, float] = {}
    for k, v in metrics.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict):
            out.update(flatten(v, key))
        elif isinstance(v, (int, float)) and v == v and abs(v) != float("inf"):
            out[key] = float(v)
    return out
