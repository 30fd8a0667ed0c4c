"""Benchmark: serving latency and throughput of the registered champion, and (with --stages) pipeline stage times.

    python scripts/benchmark.py                       # latency p50/p99 (one row, HTTP), rows/s (1,000 rows, HTTP and in-process)
    python scripts/benchmark.py --stages register     # also times `dvc repro -f -s register` (side effects: a new version)
    python scripts/benchmark.py --stages              # ... every stage of dvc.yaml

It prints figures; it is not a test. The served model comes from the project's MLflow store (`dvc repro` first).
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import time

import numpy as np
import pandas as pd

from wattgpu import paths, tracking
from wattgpu.catalogs.gpus import load_gpu_catalog
from wattgpu.catalogs.llms import load_llm_catalog
from wattgpu.serving.server import Server
from wattgpu.workload import PRESETS


def batch_requests(n: int) -> list[dict]:
    """`n` requests cycling through every catalog GPU x dense LLM x paper scenario (deterministic order)."""
    gpus = load_gpu_catalog(paths.resolve(paths.GPU_CATALOG)).keys
    llms = load_llm_catalog(paths.resolve(paths.LLM_CATALOG_TABLE)).to_frame()
    dense = llms.loc[~llms["is_moe"].astype(bool), "key"].tolist()
    combos = itertools.cycle(itertools.product(gpus, dense, PRESETS))
    return [{"gpu": g, "llm": l, "scenario": s} for g, l, s in itertools.islice(combos, n)]


def serving(model_uri: str, n_requests: int, batch: list[dict]) -> None:
    import mlflow

    uri = tracking.tracking_uri()
    with Server(model_uri, uri) as srv:
        one = {"dataframe_records": batch[:1]}
        for _ in range(10):  # warm-up
            srv.post(one).raise_for_status()
        lat = []
        for _ in range(n_requests):
            start = time.perf_counter()
            srv.post(one).raise_for_status()
            lat.append(time.perf_counter() - start)
        ms = np.array(lat) * 1e3
        print(f"HTTP latency, 1 row, {n_requests} requests: p50 {np.percentile(ms, 50):.1f} ms, "
              f"p99 {np.percentile(ms, 99):.1f} ms, max {ms.max():.1f} ms")
        body = {"dataframe_records": batch}
        srv.post(body).raise_for_status()
        times = []
        for _ in range(5):
            start = time.perf_counter()
            r = srv.post(body)
            times.append(time.perf_counter() - start)
            r.raise_for_status()
        print(f"HTTP throughput, {len(batch)} rows per request: {len(batch) / np.median(times):,.0f} rows/s "
              f"(median of 5, {np.median(times) * 1e3:.0f} ms per request)")

    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    model = mlflow.pyfunc.load_model(model_uri)
    frame = pd.DataFrame(batch)
    model.predict(frame)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        model.predict(frame)
        times.append(time.perf_counter() - start)
    print(f"in-process throughput (pyfunc predict), {len(batch)} rows: {len(batch) / np.median(times):,.0f} rows/s "
          f"({np.median(times) * 1e3:.0f} ms)")


def stage_times(stages: list[str]) -> None:
    """Wall time of `dvc repro -f -s <stage>` for each stage (forces a rerun of that stage only)."""
    dvc = [sys.executable, "-m", "dvc"]
    if not stages:
        out = subprocess.run([*dvc, "stage", "list", "--name-only"], capture_output=True, text=True, check=True)
        stages = out.stdout.split()
    for stage in stages:
        start = time.perf_counter()
        done = subprocess.run([*dvc, "repro", "-f", "-s", stage], capture_output=True, text=True)
        took = time.perf_counter() - start
        status = "ok" if done.returncode == 0 else f"FAILED ({done.returncode}): {done.stderr.strip()[-300:]}"
        print(f"stage {stage:<20} {took:7.1f} s  {status}")


def recorded_fit_times() -> None:
    """What is free: the fit seconds the evaluate stages record in their metrics."""
    for path in sorted(paths.resolve(paths.REPORTS_DIR / "evaluate").glob("*/metrics.json")):
        fit = json.loads(path.read_text()).get("fit_seconds", {})
        print(f"evaluate@{path.parent.name:<9} replica fit over all folds: "
              + ", ".join(f"{t} {s:.1f} s" for t, s in fit.items()))
    print("(pass --stages [NAME ...] to time `dvc repro -f -s` per stage)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-uri", default="models:/wattgpu-power@champion")
    parser.add_argument("--requests", type=int, default=200, help="one-row requests for the latency figures")
    parser.add_argument("--batch", type=int, default=1000, help="rows per request for the throughput figures")
    parser.add_argument("--stages", nargs="*", default=None, metavar="STAGE",
                        help="time `dvc repro -f -s` for these stages (none named: every stage)")
    args = parser.parse_args()
    serving(args.model_uri, args.requests, batch_requests(args.batch))
    if args.stages is None:
        recorded_fit_times()
    else:
        stage_times(args.stages)


if __name__ == "__main__":
    main()
