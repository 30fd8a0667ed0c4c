"""Shared fixtures. Rows built by hand here and in the tests are FIXTURES, never measurements.

Nothing skips: a test that needs the measurement table, models or reports gets them from `pipeline`, the real
`dvc repro` run once per session in a temporary clone on shrunk params (every stage, from the raw data that
`make test` pulls); a missing prerequisite fails with what to run.

Two clones: `ingested` stops after the measurement table (`dvc repro ingest`: seconds) and is never written to again,
for the tests that read only the table or the catalogs (run alone, they start in seconds, not after the whole
pipeline); `pipeline` is a copy of it on which the rest of `dvc repro` runs, once, when a test first needs it.

`make test` runs the tests in two processes (pytest-xdist): each clone is built once for the whole session, by the
first process that needs it (the others wait for it). Both clones are read-only to the tests; a test that runs a
stage or DVC in one works on its own copy (`pipeline_copy` to run DVC, `pipeline_files` a stage's module).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "1")
NEEDS_PIPELINE = frozenset({"pipeline", "ingested", "raw_dir"})  # the fixtures that need the raw data


@pytest.hookimpl(tryfirst=True)  # before `-m` selects: `make test-fast` leaves these out
def pytest_collection_modifyitems(config, items):
    """Mark `pipeline` every test whose fixtures (directly or through others) need the raw data or the pipeline
    built from it, so that the mark never depends on someone remembering it."""
    for item in items:
        if NEEDS_PIPELINE & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.pipeline)


@pytest.fixture(autouse=True)
def _tracking_uri_stays_in_its_test():
    """mlflow.set_tracking_uri also exports MLFLOW_TRACKING_URI (for subprocesses), and wattgpu.tracking honours that
    variable: after each test it is cleared, so one test's (or fixture's) temporary store never becomes the store
    of a later test or of a server a later fixture starts. Tests name their store explicitly."""
    yield
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI"):
        os.environ.pop(name, None)


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def raw_dir(root) -> Path:
    path = root / "data" / "raw"
    if not (path / "wattcounts").exists():
        pytest.fail("raw data not pulled: run `make data` (or `dvc pull data/raw/*.dvc`); `make test` does")
    return path


def shrink(p: dict) -> None:
    """Shrunk params for the test pipeline: fewer folds, trees and trials (minutes, not the default's 10)."""
    ev = p["evaluate"]
    for regime in ev["regimes"].values():
        if regime["kind"] in ("group_kfold", "row_kfold"):
            regime["n_splits"] = 2
        if regime["kind"] == "lopo":
            regime["max_pairs"] = 3
        if regime["kind"] == "lolo":
            regime["groups"] = 3  # 3 folds of LLMs, not one per LLM: evaluate@lolo was its slowest regime
    ev["replica"]["power"]["n_estimators"] = 15
    ev["replica"]["itl"]["n_estimators"] = 15
    p["search"]["profile"] = "smoke"
    for regime in p["search"]["regimes"].values():
        if regime["kind"] == "lolo":
            regime["groups"] = 3  # 3 outer folds, not 10: search@lolo was a quarter of the test pipeline's time
        if regime["kind"] == "logo":  # 4 groups of GPUs, not one fold per GPU (15): search@logo and register (which
            regime["groups"] = 4  # refits the winner on every outer fold) were 60 % of the test pipeline's time
    # the candidates that win `make run`'s primary regime (LOGO: workload and steppower; the smoke profile alone would
    # search every one). LightGBM, which `make run` also searches and which wins some of its LOLO power folds, and
    # xgboost are fitted, predicted and selected in unit tests (tests/code/test_search.py): with 2 trials on 2 inner
    # folds a tree model could win the test pipeline's LOGO search by chance, and the behaviour tests
    # (tests/integration/test_workload_sweeps.py) check the kind of champion the default pipeline registers.
    profiles = p["search"]["profiles"]
    profiles["smoke"]["algorithms"] = [a for a in profiles["small"]["algorithms"] if a != "lightgbm"]


def _reused() -> Path | None:
    """WATTGPU_TEST_PIPELINE: for quick local iteration only, a clone built by an earlier session of `pipeline`, used as
    it is for both fixtures (so it may hold older code's outputs); `make test` and CI never set it."""
    reuse = os.environ.get("WATTGPU_TEST_PIPELINE")
    if reuse and not (Path(reuse) / "dvc.lock").exists():
        pytest.fail(f"WATTGPU_TEST_PIPELINE={reuse} is not a pipeline clone (no dvc.lock)")
    return Path(reuse) if reuse else None


def _shared(tmp_path_factory) -> Path:
    """The folder every process of this test session shares: under pytest-xdist, the parent of the workers' own
    base folders; in a single process, its base folder."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _built_once(folder: Path, build: Callable[[Path], None]) -> Path:
    """`folder`/wattgpu, made by `build(path)` in the first process of the session that asks (a file lock keeps
    the others waiting until it is done), then reused; a failed build is reported by every process that asks
    afterwards, not built again."""
    from filelock import FileLock

    dest, done, failed = folder / "wattgpu", folder / "done", folder / "failed"
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(folder / "build.lock"):
        if failed.exists():
            pytest.fail(f"{folder.name}: another test process's build failed:\n{failed.read_text()}")
        if not done.exists():
            try:
                build(dest)
            except BaseException as exc:
                failed.write_text(f"{type(exc).__name__}: {str(exc)[-4000:]}")
                raise
            done.touch()
    return dest


@pytest.fixture(scope="session")
def ingested(root, raw_dir, tmp_path_factory) -> Path:
    """A clone of this project (with uncommitted work) on shrunk params after the real `dvc repro ingest` (catalog and
    measurement table), never written to afterwards: for tests that read only the data and the catalogs."""
    from tests.integration.helpers import clone, run, shrink_params

    if reused := _reused():
        return reused

    def build(dest: Path) -> None:
        clone(root, dest)
        shrink_params(dest / "params.yaml", shrink)
        run(["dvc", "pull", "-q", *sorted(str(p.relative_to(dest)) for p in (dest / "data/raw").glob("*.dvc"))], dest)
        run(["dvc", "repro", "ingest"], dest)

    return _built_once(_shared(tmp_path_factory) / "ingested", build)


@pytest.fixture(scope="session")
def pipeline(ingested, tmp_path_factory) -> Path:
    """A copy of the `ingested` clone after the real `dvc repro` on shrunk params (every stage). Read-only to the
    tests (others read it at the same time): to run DVC in it take `pipeline_copy`; a stage's module,
    `pipeline_files`."""
    from tests.integration.helpers import run

    if _reused():
        return ingested

    def build(dest: Path) -> None:
        shutil.copytree(ingested, dest, symlinks=True)
        run(["dvc", "repro"], dest, timeout=1500)

    return _built_once(_shared(tmp_path_factory) / "clone", build)


def _copy_of(pipeline: Path, dest: Path, dvc_cache: bool) -> Path:
    """A copy of the `pipeline` clone without its MLflow store and Optuna studies (a stage that logs starts a store of
    its own: the copied store's experiments would point their artifacts into the shared clone), and without DVC's
    cache unless `dvc_cache` (a few hundred MB that only DVC commands read)."""
    skip = {pipeline: ("mlruns", "optuna"), pipeline / ".dvc": () if dvc_cache else ("cache",)}
    shutil.copytree(pipeline, dest, symlinks=True,
                    ignore=lambda folder, names: [n for n in names if n in skip.get(Path(folder), ())])
    (dest / "mlruns").mkdir()
    return dest


@pytest.fixture()
def pipeline_copy(pipeline, tmp_path) -> Path:
    """This test's own copy of the `pipeline` clone, to run DVC in (_copy_of, DVC's cache included)."""
    return _copy_of(pipeline, tmp_path / "wattgpu", dvc_cache=True)


@pytest.fixture()
def pipeline_files(pipeline, tmp_path) -> Path:
    """This test's own copy of the `pipeline` clone's files, to run a stage's module in without DVC (_copy_of)."""
    return _copy_of(pipeline, tmp_path / "wattgpu", dvc_cache=False)
