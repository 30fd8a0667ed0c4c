"""A `dvc repro` killed in the middle of the search resumes: the trials that finished before the kill are kept (not
run again) and each study still ends with exactly its budget of finished trials."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.integration.helpers import clone, env, run

pytestmark = pytest.mark.slow
STAGE, REGIME = "search@loso", "loso"


def finished_trials(root: Path) -> dict[tuple[str, int], str]:
    """(study file, trial number) -> when it finished, for every COMPLETE or PRUNED trial under optuna/<regime>/
    (read-only sqlite queries on Optuna's `trials` table: a reader never blocks the running search)."""
    out = {}
    for db in sorted((root / "optuna" / REGIME).glob("*/*.db")):
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)) as conn:
            try:
                rows = conn.execute("SELECT number, datetime_complete FROM trials "
                                    "WHERE state IN ('COMPLETE', 'PRUNED')").fetchall()
            except sqlite3.OperationalError:  # the tables are not created yet
                rows = []
        out.update({(str(db.relative_to(root)), int(n)): str(done) for n, done in rows})
    return out


def test_a_killed_search_resumes_without_redoing_finished_trials(ingested, tmp_path):
    work = clone(ingested, tmp_path / "wattgpu")  # the shrunk params come with it
    shutil.copytree(ingested / "data" / "processed", work / "data" / "processed", dirs_exist_ok=True)
    params = yaml.safe_load((work / "params.yaml").read_text())
    budget = params["search"]["profiles"][params["search"]["profile"]]["n_trials"]

    proc = subprocess.Popen(["dvc", "repro", "-s", STAGE], cwd=work, env=env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    try:
        while len(finished_trials(work)) < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    before = finished_trials(work)
    assert before, "the search finished no trial in 300 s"
    assert not (work / "reports" / "search" / REGIME / "metrics.json").exists() or proc.returncode != 0

    run(["dvc", "repro", "-s", STAGE], work, timeout=900)
    after = finished_trials(work)
    kept = {k: v for k, v in after.items() if k in before}
    assert kept == before  # the same trials, finished at the same moments: none was run again
    per_study: dict[str, int] = {}
    for (db, _), _ in after.items():
        per_study[db] = per_study.get(db, 0) + 1
    assert per_study and set(per_study.values()) == {budget}
    assert (work / "reports" / "search" / REGIME / "metrics.json").exists()
    status = run(["dvc", "status", STAGE], work).stdout
    assert "changed" not in status, status
