"""Wall time of one search regime with 1 and with 2 workers on a shared PostgreSQL, and how much the results move.

  python scripts/benchmark_workers.py [--regime loso] [--profile small]

Each run is the real stage (`python -m wattgpu.stages.search regime <regime>`, search.n_workers 1: one process)
in a scratch project on this repository's measurement table, its studies in a fresh database of a temporary
PostgreSQL (pgserver); the 2-worker run adds one `wattgpu search worker` beside it. The 1-worker run samples exactly
as the embedded stage does; with 2 workers TPE sees the other worker's trials in a timing-dependent order, so the
chosen hyperparameters (and figures) may differ: the script prints by how much. The machine's load is printed too:
on a shared machine the times are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]


def project(tmp: Path, regime: str, profile: str) -> Path:
    tmp.mkdir(parents=True)
    (tmp / "data").symlink_to(ROOT / "data", target_is_directory=True)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["search"].update(profile=profile, n_workers=1, regimes={regime: params["search"]["regimes"][regime]},
                            primary_regime=regime)
    (tmp / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return tmp


def run(root: Path, url: str, regime: str, workers: int) -> float:
    env = {k: v for k, v in os.environ.items() if k not in ("WATTGPU_TRACKING_URI", "MLFLOW_TRACKING_URI")}
    env.update(WATTGPU_ROOT=str(root), WATTGPU_OPTUNA_STORAGE=url, WATTGPU_MLRUNS=str(root / "mlruns"),
               MLFLOW_DISABLE_TELEMETRY="true")
    stage = [sys.executable, "-m", "wattgpu.stages.search"]
    start = time.perf_counter()
    procs = [subprocess.Popen([*stage, "regime", regime], env=env, stdout=(root / "stage.log").open("w"),
                              stderr=subprocess.STDOUT)]
    procs += [subprocess.Popen([*stage, "worker", regime], env=env, stdout=(root / f"worker{i}.log").open("w"),
                               stderr=subprocess.STDOUT) for i in range(1, workers)]
    if procs[0].wait() != 0:
        raise SystemExit(f"the stage failed: see {root / 'stage.log'}")
    seconds = time.perf_counter() - start
    for p in procs[1:]:
        p.wait(120)  # the studies have their budget: the workers are leaving
    return seconds


def compare(one: Path, two: Path, regime: str) -> str:
    a, b = (pd.read_csv(r / "reports" / "search" / regime / "folds.csv") for r in (one, two))
    keys = ["target", "algorithm", "fold"]
    m = a.merge(b, on=keys, suffixes=("_1", "_2"))
    same_hp = (m["hyperparameters_1"] == m["hyperparameters_2"]).sum()
    rel = (m["inner_score_2"] - m["inner_score_1"]).abs() / m["inner_score_1"] * 100
    lines = [f"studies: {len(m)}; same chosen hyperparameters with 1 and 2 workers: {same_hp}/{len(m)}; inner score "
             f"|change|: median {rel.median():.2f} %, max {rel.max():.2f} %"]
    ma, mb = (json.loads((r / "reports" / "search" / regime / "metrics.json").read_text())["metrics"]
              for r in (one, two))
    for target in ma:
        for scenario in ("offline", "server"):
            x, y = (m_[target]["nested_selection"][scenario]["mdape"] for m_ in (ma, mb))
            lines.append(f"nested selection MdAPE {target} {scenario}: 1 worker {x:.2f} %, 2 workers {y:.2f} %")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--regime", default="loso")
    parser.add_argument("--profile", default="small")
    args = parser.parse_args()
    import pgserver

    pg_dir = tempfile.mkdtemp(prefix="wattgpu-bench-pg-")
    server = pgserver.get_server(pg_dir, cleanup_mode="delete")
    try:
        with tempfile.TemporaryDirectory(prefix="wattgpu-bench-") as tmp:
            times, roots = {}, {}
            for workers in (1, 2):
                server.psql(f"CREATE DATABASE w{workers};")
                roots[workers] = project(Path(tmp) / f"w{workers}", args.regime, args.profile)
                load = os.getloadavg()[0]
                times[workers] = run(roots[workers], server.get_uri(f"w{workers}"), args.regime, workers)
                print(f"search@{args.regime} (profile {args.profile}), {workers} worker(s): {times[workers]:.0f} s "
                      f"(load average before: {load:.1f} on {os.cpu_count()} cores)", flush=True)
            print(f"speed-up: {times[1] / times[2]:.2f}x")
            print(compare(roots[1], roots[2], args.regime))
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
