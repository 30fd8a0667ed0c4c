"""Benchmark: the last `make run`'s stage time table, the served champions (one client alone, then 16 clients),
in-process throughput, the command line end to end, and the bad-input corpus's totals over HTTP, the CLI and batch CSV.

    python scripts/benchmark.py                       # 16 clients x 60 s against the `make serve` endpoint, in-process rows/s
    python scripts/benchmark.py --duration 10         # a shorter run
    python scripts/benchmark.py --stages register     # also times `dvc repro -f -s register` (side effects: a new version)
    python scripts/benchmark.py --stages              # ... every stage of dvc.yaml
    python scripts/benchmark.py --against d908f79 --duration 40   # serving and in-process: that commit's code, then
                                                                  # this tree's, back to back (same champions)

It prints figures; it is not a test. The served models come from the project's MLflow store (`dvc repro` first).
The server is the one `make serve` starts (serving.app, both champions, 127.0.0.1); the clients are threads with
one HTTP session each, half the time sending one-row requests, half the time `--batch`-row requests, each loop
bounded by its time and a request count.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import requests
from bad_input_corpus import corpus_summary, corpus_totals
from harness import Server

from wattgpu import paths, tracking
from wattgpu.catalogs.gpus import load_gpu_catalog
from wattgpu.catalogs.llms import load_llm_catalog
from wattgpu.planning import answers
from wattgpu.workload import PRESETS

MAX_REQUESTS_PER_CLIENT = 100_000  # a bound on each client's loop beside its time
SOLO_SECONDS = 10  # one client alone first: the latency of a request that does not queue behind others


def batch_requests(n: int) -> list[dict]:
    """`n` requests cycling through every catalog GPU x dense LLM x paper scenario (deterministic order)."""
    gpus = load_gpu_catalog(paths.resolve(paths.GPU_CATALOG)).keys
    llms = load_llm_catalog(paths.resolve(paths.LLM_CATALOG_TABLE)).to_frame()
    dense = llms.loc[~llms["is_moe"].astype(bool), "key"].tolist()
    combos = itertools.cycle(itertools.product(gpus, dense, PRESETS))
    return [{"gpu": g, "llm": l, "scenario": s} for g, l, s in itertools.islice(combos, n)]


@dataclass
class Load:
    """What the clients of one phase saw: per-request latency (s), rows answered, failures by kind."""

    latencies: list[float] = field(default_factory=list)
    rows: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, took: float, rows: int, error: str | None) -> None:
        with self.lock:
            if error is None:
                self.latencies.append(took)
                self.rows += rows
            else:
                self.errors[error] = self.errors.get(error, 0) + 1


def load_phase(url: str, bodies: list[bytes], rows_per_body: int, clients: int, seconds: float) -> Load:
    """`clients` threads, each posting `bodies` in turn until `seconds` pass or MAX_REQUESTS_PER_CLIENT."""
    load = Load()
    deadline = time.monotonic() + seconds

    def client(k: int) -> None:
        with requests.Session() as session:
            for i in range(MAX_REQUESTS_PER_CLIENT):
                if time.monotonic() >= deadline:
                    return
                start = time.perf_counter()
                try:
                    r = session.post(f"{url}/invocations", data=bodies[(k + i) % len(bodies)], timeout=60,
                                     headers={"Content-Type": "application/json"})
                    ok = r.status_code == 200 and len(r.json()["predictions"]) == rows_per_body
                    error = None if ok else f"HTTP {r.status_code}"
                except (requests.RequestException, ValueError, KeyError) as exc:
                    error = type(exc).__name__
                load.record(time.perf_counter() - start, rows_per_body, error)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    load.seconds = time.perf_counter() - start
    return load


def serving(args, batch: list[dict]) -> None:
    """The `make serve` endpoint under `args.clients` concurrent clients for `args.duration` seconds."""
    one_row = [json.dumps({"dataframe_records": [r]}).encode() for r in batch[:48]]
    many = [json.dumps({"dataframe_records": batch}).encode()]
    print(f"== serving: {args.clients} clients x {args.duration:g} s against `make serve` (serving.app, "
          f"{args.workers} worker{'s' if args.workers > 1 else ''}, 127.0.0.1) ==")
    with Server.champions(tracking.tracking_uri(), workers=args.workers) as srv:
        for body in one_row[:10] + many:  # warm-up: first requests load lazily held state
            srv.post_raw(body).raise_for_status()
        rss_start = srv.rss_bytes()
        print(f"load average at start {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
        alone = np.array(load_phase(srv.url, one_row, 1, 1, SOLO_SECONDS).latencies) * 1e3
        if len(alone):
            print(f"1-row requests, one client alone for {SOLO_SECONDS:g} s: {len(alone):,}, "
                  f"p50 {np.percentile(alone, 50):.1f} ms, p99 {np.percentile(alone, 99):.1f} ms")
        single = load_phase(srv.url, one_row, 1, args.clients, args.duration / 2)
        batched = load_phase(srv.url, many, len(batch), args.clients, args.duration / 2)
        rss_end = srv.rss_bytes()
    errors = {**{f"1 row {k}": v for k, v in single.errors.items()},
              **{f"{len(batch)} rows {k}": v for k, v in batched.errors.items()}}
    ms = np.array(single.latencies) * 1e3
    print(f"errors: {sum(errors.values())}" + (f" {errors}" if errors else ""))
    if len(ms):
        print(f"1-row requests: {len(ms):,} in {single.seconds:.0f} s, p50 {np.percentile(ms, 50):.1f} ms, "
              f"p99 {np.percentile(ms, 99):.1f} ms, {len(ms) / single.seconds:,.0f} requests/s")
    if batched.rows:
        print(f"{len(batch):,}-row requests: {len(batched.latencies):,} in {batched.seconds:.0f} s, "
              f"{batched.rows / batched.seconds:,.0f} rows/s, p50 {np.percentile(batched.latencies, 50) * 1e3:.0f} ms "
              "per request")
    print(f"server RSS: {rss_start / 2**20:,.0f} MiB at start, {rss_end / 2**20:,.0f} MiB at end "
          f"({(rss_end - rss_start) / 2**20:+,.0f} MiB)")
    print(f"load average at end {os.getloadavg()[0]:.2f}")


def in_process(batch: list[dict]) -> None:
    """The same champions in this process (serving.app.load_champions): rows/s, and where the time goes: validation
    (request.validate_batch), features (features.engineer), the models and their bands (Predictor.predict_rows, less
    the features it builds), and the rest (the answer spread over the input rows, nulls for JSON, MLflow's wrapper)."""
    from wattgpu.serving.app import champion_uris, load_champions

    model = load_champions(champion_uris())
    predictor = model.unwrap_python_model().predictor_
    print("== in process (both champions, pyfunc predict) ==")
    for rows in (batch[:1], batch[1:2], batch):
        frame = pd.DataFrame(rows)
        valid = predictor.validate_batch(frame).rows
        model.predict(frame)
        n = 15 if len(rows) > 1 else 50  # medians of enough runs that a lingering process (the server) does not set them
        took = _median_seconds(lambda frame=frame: model.predict(frame), n)
        parts = {"validation": _median_seconds(lambda frame=frame: predictor.validate_batch(frame), n),
                 "features": _median_seconds(lambda valid=valid: predictor.features(valid), n)}
        parts["models and bands"] = _median_seconds(lambda valid=valid: predictor.predict_rows(valid), n) \
            - parts["features"]
        parts["the rest"] = took - sum(parts.values())
        what = f"1 row ({rows[0]['scenario']})" if len(rows) == 1 else f"{len(rows):,} rows"
        print(f"{what}: {took * 1e3:.1f} ms, {len(rows) / took:,.0f} rows/s; "
              + ", ".join(f"{k} {v * 1e3:.1f} ms ({v / took:.0%})" for k, v in parts.items()))


LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
CLI_RUNS = 5  # timed runs per command, after one untimed run


def cli_times() -> None:
    """`wattgpu` end to end (process start to answer) on the registered champions: a question asked before (its answer
    remembered: wattgpu.planning.answers), a question whose predictions are cached but whose answer is composed anew
    (the memo emptied before each run), a new question (the models loaded), recommend over the catalog in the same
    three states. The cache is a fresh temporary folder; Python's bytecode cache is on (its default:
    PYTHONDONTWRITEBYTECODE unset), so the untimed first run compiles the package once as a user's first call does."""
    import tempfile

    wattgpu = [str(Path(sys.executable).with_name("wattgpu"))]
    predict = [*wattgpu, "predict", "--gpu", "A30", "--llm", LLAMA, "--prompt-tokens", "512", "--output-tokens", "200"]
    recommend = [*wattgpu, "recommend", "--llm", LLAMA, "--scenario", "offline", "--max-itl-ms", "50"]
    commands = [  # (label, argv of the i-th run, target s, forget the remembered answers before each run)
        ("wattgpu --help", lambda i: [*wattgpu, "--help"], None, False),
        ("predict, asked before", lambda i: [*predict, "--concurrency", "64"], 0.5, False),
        ("predict, predictions cached", lambda i: [*predict, "--concurrency", "64"], 0.5, True),
        ("predict, a new question", lambda i: [*predict, "--concurrency", str(65 + i)], 0.5, False),
        ("recommend, asked before", lambda i: recommend, 0.3, False),
        ("recommend, predictions cached", lambda i: recommend, 0.3, True),
        ("recommend, --no-cache", lambda i: [*recommend, "--no-cache"], 2.0, False),
    ]
    print(f"== command line (process start to answer, median of {CLI_RUNS} after one untimed run) ==")
    with tempfile.TemporaryDirectory() as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"WATTGPU_CACHE": cache}
        memo = Path(cache) / answers.ANSWERS_FILE
        for label, argv, target, forget in commands:
            subprocess.run(argv(-1), env=env, capture_output=True, check=True)
            times = []
            for i in range(CLI_RUNS):
                if forget:
                    memo.unlink(missing_ok=True)
                start = time.perf_counter()
                subprocess.run(argv(i), env=env, capture_output=True, check=True)
                times.append(time.perf_counter() - start)
            verdict = "" if target is None else f" (target {target:g} s: {'met' if np.median(times) <= target else 'not met'})"
            print(f"{label:<32} {np.median(times):.2f} s, max {max(times):.2f} s{verdict}")
    probe = "import time; t = time.perf_counter(); import pandas; print(time.perf_counter() - t)"
    import_s = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    print(f"of which importing pandas alone: {float(import_s.stdout):.2f} s (a question asked before needs none); a "
          "new question also imports scikit-learn, SciPy and LightGBM to load the models")


def _median_seconds(fn, n: int) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


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


def recorded_stage_table() -> None:
    """The stage time table of the last `make run` (scripts/repro_timed.py writes .timings/repro.json)."""
    import repro_timed

    print("== pipeline: stage times of the last `make run` ==")
    record = paths.resolve(repro_timed.RECORD)
    if not record.exists():
        print(f"no {repro_timed.RECORD}: run `make run` (or `python scripts/repro_timed.py`) first")
        return
    print(repro_timed.table(json.loads(record.read_text())))
    print("(pass --stages [NAME ...] to time `dvc repro -f -s` per stage)")


def bad_input_totals() -> None:
    """Every case of the bad-input corpus (tests/bad_inputs, scripts/bad_input_corpus.py) through HTTP, the CLI and
    batch CSV, on this project's champions: how many are answered as they must be."""
    import tempfile

    print("== bad input ==")
    with tempfile.TemporaryDirectory() as tmp:
        print(corpus_summary(corpus_totals(paths.project_root(), Path(tmp))))


SECTIONS = ("stages", "serving", "in-process", "cli", "bad-input")
COMPARED = ("serving", "in-process")  # what --against runs for each side: what the served code's speed sets


def against(args) -> None:
    """--against REV: the serving and in-process sections with REV's package (its `src`, on PYTHONPATH, which the
    server inherits), then with this tree's, one after the other on this machine and on the same registered
    champions: a before / after that machine noise between runs does not decide."""
    import tempfile

    root = paths.project_root()
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "archive", args.against, "src"], cwd=root, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        for label, src in ((args.against, Path(tmp) / "src"), ("this tree", None)):
            env = dict(os.environ)
            if src is not None:
                env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(src), env.get("PYTHONPATH")]))
            subprocess.run([sys.executable, __file__, "--label", label, "--sections", *COMPARED,
                            "--clients", str(args.clients),
                            "--duration", str(args.duration), "--workers", str(args.workers),
                            "--batch", str(args.batch)], env=env, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=16, help="concurrent HTTP clients")
    parser.add_argument("--duration", type=float, default=60, help="seconds of load in all (half 1-row, half batch)")
    parser.add_argument("--workers", type=int, default=None,
                        help="server worker processes (default: `make serve`'s, one per usable CPU, at most 8)")
    parser.add_argument("--batch", type=int, default=1000, help="rows per request for the throughput figures")
    parser.add_argument("--stages", nargs="*", default=None, metavar="STAGE",
                        help="time `dvc repro -f -s` for these stages (none named: every stage)")
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS),
                        help="which sections to run (default: all)")
    parser.add_argument("--against", metavar="REV",
                        help="a git revision: its code's serving and in-process figures, then this tree's")
    parser.add_argument("--label", help=argparse.SUPPRESS)  # --against's: which side, and the package it imported
    args = parser.parse_args()
    if args.workers is None:
        from wattgpu.serving.app import default_workers

        args.workers = default_workers()
    if args.against:
        return against(args)
    batch = batch_requests(args.batch)
    if args.label:
        import wattgpu

        print(f"#### {args.label} (package {Path(wattgpu.__file__).parent})", flush=True)
    # Sections in order; each prints its own block.
    if "stages" in args.sections and args.stages is None:
        recorded_stage_table()
    elif "stages" in args.sections:
        stage_times(args.stages)
    if "serving" in args.sections:
        serving(args, batch)
    if "in-process" in args.sections:
        in_process(batch)
    if "cli" in args.sections:
        cli_times()
    if "bad-input" in args.sections:
        bad_input_totals()


if __name__ == "__main__":
    main()
