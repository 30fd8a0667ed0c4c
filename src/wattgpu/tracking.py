"""MLflow at the edge: a sqlite store under mlruns/ with artifacts beside it (the default), or a tracking server
named by $WATTGPU_TRACKING_URI / $MLFLOW_TRACKING_URI (`http://...`: the server keeps runs, the registry and the
artifacts; README "Servers"); absolute URIs, no telemetry."""

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


SERVER_ENV = ("WATTGPU_TRACKING_URI", "MLFLOW_TRACKING_URI")  # the first one set wins


def tracking_uri(root: Path | None = None) -> str:
    """The tracking server's URI where an environment variable names one, else the project's sqlite store."""
    named = next((os.environ[k] for k in SERVER_ENV if os.environ.get(k)), None)
    return named or f"sqlite:///{tracking_dir(root) / 'mlflow.db'}"


def on_server(uri: str) -> bool:
    """A tracking server stores artifacts where it was told to (`mlflow server --artifacts-destination`)."""
    return uri.startswith(("http://", "https://"))


def artifact_location(root: Path | None = None) -> str:
    return (tracking_dir(root) / "artifacts").as_uri()


def setup(experiment: str, root: Path | None = None):
    """Point MLflow at the project store and select (creating if needed) `experiment`."""
    import mlflow

    uri = tracking_uri(root)
    if not on_server(uri):
        tracking_dir(root).mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    if mlflow.get_experiment_by_name(experiment) is None:
        location = None if on_server(uri) else f"{artifact_location(root)}/{experiment}"
        mlflow.create_experiment(experiment, artifact_location=location)
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
