"""The search and the registry on real servers: a PostgreSQL (pgserver, in a temporary folder) that search workers
share, and an `mlflow server` on it that the registry and `mlflow models serve` use. Every server is stopped by a
finalizer; every wait is bounded."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import requests
import yaml

from harness import Server, free_port

pytestmark = pytest.mark.slow

BUDGET = 6  # trials of the one study the workers share (2 first trials, then TPE)
HEARTBEAT_S = 1  # a killed worker's trial is failed 2 s after its last heartbeat


@pytest.fixture(scope="module")
def postgres():
    """A real PostgreSQL on a unix socket (no TCP port), with the databases `optuna` and `mlflow`; its folder is
    made by mkdtemp (pytest's are private to root, where pgserver runs PostgreSQL as its own user) and deleted."""
    import pgserver

    server = pgserver.get_server(tempfile.mkdtemp(prefix="wattgpu-pg-"), cleanup_mode="delete")
    try:
        for db in ("optuna", "mlflow"):
            server.psql(f"CREATE DATABASE {db};")
        yield server
    finally:
        server.cleanup()


def worker_project(pipeline: Path, tmp: Path) -> Path:
    """A project root on the pipeline clone's data whose search_best is one study: ITL, the workload model (its
    step-time fit takes about a second per inner fold, so a kill lands mid-trial), Watt Counts rows, BUDGET trials."""
    tmp.mkdir()
    (tmp / "data").symlink_to(pipeline / "data", target_is_directory=True)
    params = yaml.safe_load((pipeline / "params.yaml").read_text())
    params["base"]["targets"] = ["itl"]
    s = params["search"]
    s.update(source="wattcounts_processed", profile="servers", default_algorithm="workload",
             algorithms={"workload": {**s["algorithms"]["workload"], "targets": ["itl"]}})
    s["profiles"] = {"servers": {"n_trials": BUDGET, "inner_folds": 2, "max_pairs": 2, "calibration_folds": 2}}
    (tmp / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return tmp


def start(cmd: list[str], env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def test_two_workers_share_one_study_and_a_killed_workers_trial_fails(postgres, pipeline, tmp_path):
    import optuna
    from optuna.trial import TrialState

    url = postgres.get_uri("optuna")
    project = worker_project(pipeline, tmp_path / "project")
    env = {**os.environ, "WATTGPU_ROOT": str(project), "WATTGPU_OPTUNA_STORAGE": url,
           "WATTGPU_OPTUNA_HEARTBEAT_S": str(HEARTBEAT_S), "MLFLOW_DISABLE_TELEMETRY": "true"}
    storage = optuna.storages.RDBStorage(url.replace("postgresql://", "postgresql+psycopg://", 1))  # the tables
    wattgpu = str(Path(sys.executable).with_name("wattgpu"))
    kept = start([wattgpu, "search", "worker", "--regime", "best"], env, tmp_path / "kept.log")
    killed = start([sys.executable, "-m", "wattgpu.stages.search", "worker", "best"], env, tmp_path / "killed.log")
    victim = f"{socket.gethostname()}:{killed.pid}"
    # the kill lands mid-fit: once the victim's trial holds all its parameters (a kill between two of its suggestions
    # leaves a trial with some, whose retry keeps those and samples the rest, which is not the retry checked below)
    space = yaml.safe_load((project / "params.yaml").read_text())["search"]["algorithms"]["workload"]["space"]
    try:
        deadline, shot = time.monotonic() + 90, None
        while time.monotonic() < deadline and shot is None and killed.poll() is None:
            for name in optuna.get_all_study_names(storage):
                running = optuna.load_study(study_name=name, storage=storage).get_trials(states=(TrialState.RUNNING,))
                shot = next((t.number for t in running if t.user_attrs.get("worker") == victim
                             and set(t.params) == set(space)), None)
            time.sleep(0.1)
        assert shot is not None, f"the second worker ran no trial:\n{(tmp_path / 'killed.log').read_text()[-3000:]}"
        os.killpg(killed.pid, signal.SIGKILL)  # mid-trial
        assert kept.wait(120) == 0, (tmp_path / "kept.log").read_text()[-3000:]
    finally:
        stop(kept), stop(killed)

    [name] = optuna.get_all_study_names(storage)
    trials = optuna.load_study(study_name=name, storage=storage).get_trials()
    states = [t.state for t in trials]
    assert sum(s in (TrialState.COMPLETE, TrialState.PRUNED) for s in states) == BUDGET  # exactly the budget
    assert trials[shot].state == TrialState.FAIL and trials[shot].user_attrs["worker"] == victim  # by heartbeat
    assert not {TrialState.RUNNING, TrialState.WAITING} & set(states)
    assert sorted(t.number for t in trials) == list(range(len(trials)))  # each trial number once
    ran_by = {t.user_attrs["worker"] for t in trials}
    assert victim in ran_by and len(ran_by) == 2  # both workers took trials of the one study
    params = yaml.safe_load((project / "params.yaml").read_text())["search"]["algorithms"]["workload"]
    finished = [t for t in trials if t.state != TrialState.FAIL]
    for first in params["first_trials"]:  # enqueued once, not once per worker
        assert sum(t.params == first for t in finished) == 1
    assert sum(t.params == trials[shot].params for t in finished) == 1  # the killed trial, retried once


@pytest.fixture(scope="module")
def tracking_server(postgres, tmp_path_factory):
    """`mlflow server` on 127.0.0.1 with its runs and registry in PostgreSQL and its artifacts in a folder."""
    tmp = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    backend = postgres.get_uri("mlflow").replace("postgresql://", "postgresql+psycopg://", 1)
    cmd = [str(Path(sys.executable).with_name("mlflow")), "server", "--backend-store-uri", backend,
           "--artifacts-destination", str(tmp / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
           "--workers", "1"]
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true",
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    proc = start(cmd, env, tmp / "server.log")
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert proc.poll() is None, (tmp / "server.log").read_text()[-3000:]
            try:
                if requests.get(f"{uri}/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:  # not listening yet, or busy migrating its database
                pass
            time.sleep(0.5)
        else:
            pytest.fail(f"no answer on {uri}/health:\n{(tmp / 'server.log').read_text()[-3000:]}")
        yield uri, tmp / "artifacts"
    finally:
        stop(proc)


def register_project(pipeline: Path, tmp: Path) -> Path:
    """A project root holding what the register stage reads from the pipeline clone: its params, catalogs, search
    winners and evaluation figures, and a slice of its measurement table (25 rows per source and GPU: fast fits)."""
    import pandas as pd

    for rel in ("params.yaml", "data/catalogs", "data/processed/llm_catalog.csv", "reports/search/best_power.json",
                "reports/search/best_itl.json", "reports/evaluate"):
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).symlink_to(pipeline / rel)
    table = pd.read_csv(pipeline / "data/processed/measurements.csv", low_memory=False)
    table.groupby(["source", "gpu"]).head(25).to_csv(tmp / "data/processed/measurements.csv", index=False)
    return tmp


def test_the_register_stage_and_serving_work_against_the_tracking_server(tracking_server, pipeline, tmp_path):
    import mlflow

    uri, artifacts = tracking_server
    root = register_project(pipeline, tmp_path / "project")
    env = {**os.environ, "WATTGPU_ROOT": str(root), "WATTGPU_TRACKING_URI": uri, "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("WATTGPU_MLRUNS", None)
    proc = subprocess.run([sys.executable, "-m", "wattgpu.stages.register"], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not (root / "mlruns").exists()  # nothing went to a local store
    client = mlflow.MlflowClient(uri, registry_uri=uri)  # not the registry an earlier in-process test set
    for name in ("wattgpu-power", "wattgpu-itl"):
        assert client.get_model_version_by_alias(name, "champion").version
    assert any(artifacts.rglob("MLmodel"))  # the server stored the artifacts where it was told to

    with Server("models:/wattgpu-power@champion", uri) as srv:
        r = srv.post({"dataframe_records": [{"gpu": "NVIDIA H100 NVL", "llm": "meta-llama/Llama-3.1-8B-Instruct",
                                             "scenario": "offline"}]})
        assert r.status_code == 200, r.text
        assert 40 <= r.json()["predictions"][0]["power_w"] <= 400 * 1.3
