"""Stage `search_leaderboard`: every search regime's metrics -> reports/search/leaderboard.{md,csv} and the
verdict (reports/search/verdict.json, a DVC metric), logged as one MLflow run."""

from __future__ import annotations

import json

import pandas as pd

from wattgpu import paths, tracking
from wattgpu.config import load_params
from wattgpu.errors import WattgpuError
from wattgpu.evaluation import leaderboard
from wattgpu.io import write_csv, write_json
from wattgpu.modeling import intervals
from wattgpu.reporting import leaderboard as leaderboard_page
from wattgpu.reporting import plots

EXPERIMENT = "wattgpu-search"


def run_leaderboard() -> str:
    root = paths.project_root()
    params = load_params(paths.resolve(paths.PARAMS, root))
    s = params.search
    if s is None:
        raise WattgpuError("params.yaml has no `search` section")
    results = {r: json.loads(paths.resolve(paths.SEARCH_DIR / r / "metrics.json", root).read_text()) for r in s.regimes}
    best = {}
    for target in params.base.targets:
        file = paths.resolve(paths.SEARCH_DIR / f"best_{target}.json", root)
        if file.exists():
            best[target] = json.loads(file.read_text())
    lb = leaderboard.frame(results)
    src = leaderboard.by_source(results)
    text = leaderboard_page.markdown(lb, results, best, list(s.candidates), src)
    out = paths.resolve(paths.SEARCH_DIR, root)
    (out / "leaderboard.md").write_text(text)
    write_csv(out / "leaderboard.csv", lb)
    write_csv(out / "by_source.csv", src)
    write_json(out / "verdict.json", leaderboard.verdict(lb))
    write_json(out / "by_source.json", leaderboard.source_metrics(src))
    coverage = leaderboard.interval_metrics(results)
    write_json(out / "intervals.json", coverage)
    interval_plots(root, s.primary_regime)
    mlflow = tracking.setup(EXPERIMENT, root)
    with mlflow.start_run(run_name="search-leaderboard"):
        mlflow.set_tags({"stage": "search_leaderboard", "git_commit": tracking.git_commit(root)})
        flat = {}
        for _, r in lb.iterrows():
            for scen in ("offline", "server"):
                flat[f"{r['target']}.{r['regime']}.{r['model']}.{scen}_mdape"] = r[f"{scen}_mdape"]
        mlflow.log_metrics(tracking.flatten(flat))
        mlflow.log_metrics(tracking.flatten({"interval": coverage}))
        mlflow.log_artifact(str(out / "intervals.json"))
        mlflow.log_artifacts(str(out / "plots"), "plots")
        mlflow.log_artifact(str(out / "leaderboard.md"))
        mlflow.log_artifact(str(out / "leaderboard.csv"))
        mlflow.log_artifact(str(out / "verdict.json"))
    print(text)
    return text


def interval_plots(root, regime: str) -> None:
    """Coverage per held-out GPU and the predicted band vs measured, of the nested selection under `regime`."""
    out = paths.resolve(paths.SEARCH_DIR, root)
    level = intervals.level_key(intervals.DEFAULT_LEVEL)
    by_gpu = pd.read_csv(out / regime / "interval_coverage_by_gpu.csv")
    plots.interval_coverage_by_gpu(by_gpu, level, f"{regime}: coverage per held-out GPU",
                                   out / "plots" / "interval_coverage_by_gpu.png")
    pred = pd.read_csv(out / regime / "predictions.csv")
    plots.interval_band(pred[pred["model"] == leaderboard.SELECTION], level, f"{regime}, held-out rows",
                        out / "plots" / "interval_band.png")


def main() -> None:
    try:
        run_leaderboard()
    except WattgpuError as exc:
        raise SystemExit(f"error: {exc}") from None


if __name__ == "__main__":
    main()
