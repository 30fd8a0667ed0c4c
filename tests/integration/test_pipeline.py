"""The real `dvc repro` in a temporary clone, on shrunk params: every stage runs, outputs are sane,
and a second `dvc repro` changes nothing."""

import json

import pytest

from tests.integration.helpers import clone, run, shrink_params

pytestmark = pytest.mark.slow


def shrink(p: dict) -> None:
    ev = p["evaluate"]
    for name, regime in ev["regimes"].items():
        if regime["kind"] in ("group_kfold", "row_kfold"):
            regime["n_splits"] = 2
        if regime["kind"] == "lopo":
            regime["max_pairs"] = 3
    ev["replica"]["power"]["n_estimators"] = 15
    ev["replica"]["itl"]["n_estimators"] = 15
    if p.get("search"):
        p["search"]["profile"] = "smoke"


@pytest.fixture(scope="module")
def repo(root, raw_dir, tmp_path_factory):
    dest = clone(root, tmp_path_factory.mktemp("clone") / "wattgpu")
    shrink_params(dest / "params.yaml", shrink)
    run(["dvc", "pull", "-q", *sorted(str(p.relative_to(dest)) for p in (dest / "data/raw").glob("*.dvc"))], dest)
    run(["dvc", "repro"], dest, timeout=1500)
    return dest


def test_ingest_report_accounts_for_every_row(repo):
    report = json.loads((repo / "reports/ingest/data_report.json").read_text())
    wc = report["sources"]["wattcounts_processed"]
    assert wc["raw_rows"] == 4798 and wc["accounted_for"] and wc["gpus"] == 8 and wc["llms"] == 49
    assert (repo / "data/processed/measurements.csv").stat().st_size > 100_000


def test_evaluate_metrics_and_tables(repo):
    logo = json.loads((repo / "reports/evaluate/logo/metrics.json").read_text())
    for target, models in (("power", ("paper_replica", "load_scaled_tdp")), ("itl", ("paper_replica", "roofline"))):
        for model in models:
            for scen in ("offline", "server"):
                assert logo["metrics"][target][model][scen]["mdape"] > 0
    # the roofline baseline learns nothing: its figure is the paper's whatever the shrinking
    assert logo["metrics"]["itl"]["roofline"]["offline"]["mdape"] == pytest.approx(80.2, abs=0.5)
    tables = (repo / "reports/evaluate/tables.md").read_text()
    assert "LOPO" in tables and "Roofline" in tables
    shown = run(["dvc", "metrics", "show"], repo).stdout
    assert "reports/evaluate/logo/metrics.json" in shown


def test_second_repro_changes_nothing(repo):
    status = run(["dvc", "status"], repo).stdout
    assert "up to date" in status, status
    again = run(["dvc", "repro"], repo).stdout
    assert "Running stage" not in again, again


def test_mlflow_store_has_the_runs(repo):
    import sqlite3

    db = repo / "mlruns" / "mlflow.db"
    with sqlite3.connect(db) as con:
        names = {r[0] for r in con.execute("select name from runs")}
    assert {"evaluate-logo", "evaluate-lopo"} <= names
