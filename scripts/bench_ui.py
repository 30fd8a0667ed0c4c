"""Benchmark of the planner page (`wattgpu ui`): the time from submitting a question to its answer, in process (the
answer functions the server calls), over HTTP (the page's JSON API on 127.0.0.1) and in the browser (the OS's
Chromium: click to the answer drawn), for one prediction, a comparison of 8 GPUs x up to 32 loads, and a
recommendation over the whole catalog. The target is 1 s for each.

    python scripts/bench_ui.py                     # writes what it prints to reports/benchmarks/ui.txt
    python scripts/bench_ui.py --repeats 20 --output -

It prints figures; it is not a test. The models are the project's registered champions (models/, `make run` first);
predictions are cached in a fresh temporary folder, so a question never asked before is timed as a cache miss.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import requests

from wattgpu import paths

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
# 8 GPUs whose memory holds Llama-3.1-8B's KV cache for 32 or more requests: 32 loads each, 256 predictions
BIG_GPUS = ["H100 NVL", "H200", "B200", "MI300X", "H100 80GB HBM3", "A100-SXM4-80GB", "L40S", "H200 NVL"]
TARGET_S = 1.0


def ask(i: int) -> dict:
    """The i-th one-GPU question: a new number of requests in flight each time (a cache miss)."""
    return {"gpu": "A30", "llm": LLAMA, "concurrency": str(3 + i), "prompt_tokens": "500", "output_tokens": "200"}


def compare(i: int) -> dict:
    return {"gpu": BIG_GPUS[0], "gpus": ", ".join(BIG_GPUS[1:]), "llm": LLAMA, "prompt_tokens": str(400 + i),
            "max_itl_ms": "30"}


def recommend(i: int) -> dict:
    return {"llm": LLAMA, "scenario": "server_high", "max_itl_ms": "25", "prompt_tokens": str(100 + i)}


QUESTIONS = {"ask": ask, "compare": compare, "recommend": recommend}


def summary(label: str, seconds: list[float]) -> str:
    med = statistics.median(seconds)
    verdict = "meets" if max(seconds) <= TARGET_S else "MISSES"
    return (f"{label:<44} first {1e3 * seconds[0]:7.0f} ms, median {1e3 * med:6.0f} ms, max {1e3 * max(seconds):6.0f} ms "
            f"({len(seconds)} questions; {verdict} the {TARGET_S:g} s target)")


def timed(call, repeats: int) -> list[float]:
    out = []
    for i in range(repeats):
        start = time.perf_counter()
        call(i)
        out.append(time.perf_counter() - start)
    return out


def in_process(repeats: int, say) -> None:
    from wattgpu.planning.models import ModelSet
    from wattgpu.ui import question
    from wattgpu.ui.answers import Planner

    start = time.perf_counter()
    planner = Planner(ModelSet.load())
    say(f"== in process (wattgpu.ui.answers.Planner, the server's calls) ==\nload the champions once: "
        f"{time.perf_counter() - start:.2f} s")
    for mode, make in QUESTIONS.items():
        def answer(i, mode=mode, make=make):
            getattr(planner, mode)(question.parse({"mode": mode, **make(i)}))
        say(summary(f"{mode}, new questions", timed(answer, repeats)))
    body, table = planner.compare(question.parse({"mode": "compare", **compare(0)}))
    points = [len(c["points"]["concurrency"]) for c in body["curves"] if "points" in c]
    loads = f"{min(points)}" if min(points) == max(points) else f"{min(points)}-{max(points)}"
    say(f"compare: {len(points)} GPUs x {loads} loads = {len(table)} predictions in one batch")
    seconds = timed(lambda i: planner.ask(question.parse({"mode": "ask", **ask(0)})), repeats)
    say(summary("ask, the same question again (cached)", seconds))


def over_http(repeats: int, say) -> None:
    from harness import PageServer

    with PageServer() as srv:
        say("== over HTTP (POST /api/<question> to `wattgpu ui` on 127.0.0.1) ==")
        session = requests.Session()
        for mode, make in QUESTIONS.items():
            def post(i, mode=mode, make=make):
                r = session.post(f"{srv.url}/api/{mode}", json={**make(100 + i)}, timeout=60)
                r.raise_for_status()
            say(summary(f"{mode}, new questions", timed(post, repeats)))
        in_browser(srv.url, repeats, say)


def in_browser(url: str, repeats: int, say) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        return say("== in the browser: skipped (no `chromium` on PATH: `make browser`) ==")
    from urllib.parse import urlencode

    from playwright.sync_api import sync_playwright

    from wattgpu.ui.app import plotly_js

    bundle_mb = plotly_js().stat().st_size / 1e6
    say("== in the browser (Chromium: the button pressed to the answer drawn, Plotly included) ==")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        start = time.perf_counter()
        page.goto(url)
        page.wait_for_function("document.getElementById('result').dataset.state === 'ready'")
        say(f"page load (HTML, scripts, Plotly's {bundle_mb:.1f} MB bundle, catalogs): {time.perf_counter() - start:.2f} s")
        for mode, make in QUESTIONS.items():
            def click(i, mode=mode, make=make):
                page.goto(f"{url}/?{urlencode(make(200 + i))}")  # fills the form; no mode: nothing asked yet
                page.wait_for_function("document.getElementById('result').dataset.state === 'ready'")
                seq = page.get_attribute("#result", "data-seq") or "0"
                t0 = time.perf_counter()
                page.click(f"#{mode}")
                page.wait_for_function(f"document.getElementById('result').dataset.seq !== '{seq}' && "
                                       "document.getElementById('result').dataset.state === 'answered'")
                return time.perf_counter() - t0
            say(summary(f"{mode}, click to answer", [click(i) for i in range(repeats)]))
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=10, help="questions timed per kind")
    parser.add_argument("--output", default=str(paths.REPORTS_DIR / "benchmarks" / "ui.txt"),
                        help="also write the figures here ('-': only print them)")
    args = parser.parse_args()
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    os.environ["WATTGPU_CACHE"] = tempfile.mkdtemp(prefix="wattgpu-bench-ui-")  # every new question misses
    try:
        load = os.getloadavg()[0]
        say(f"== planner page: {os.cpu_count()} CPUs, load average {load:.2f} at start; target {TARGET_S:g} s ==")
        in_process(args.repeats, say)
        over_http(args.repeats, say)
    finally:
        shutil.rmtree(os.environ["WATTGPU_CACHE"], ignore_errors=True)
    if args.output != "-":
        out = paths.resolve(args.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(lines) + "\n")
        print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
