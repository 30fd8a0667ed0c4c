"""The HTML report: self-contained (no scripts, no external references, images as data URIs), built from
a tiny hand-written FIXTURE reports/ tree (made-up metrics, never measurements)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from wattgpu.cli import app
from wattgpu.reporting import html as report

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = {"mdape": 5.0, "mape": 6.0, "pearson_r": 0.95, "gpu_tau": 0.8, "llm_tau": 0.7, "top1_gpu": 0.5, "n_rows": 10}
CASE = pd.DataFrame({  # FIXTURE case-study rows
    "model": ["paper_replica"] * 4, "scenario": ["server_low", "server_low", "server_high", "server_high"],
    "gpu": ["NVIDIA L4", "NVIDIA A30", "NVIDIA L4", "NVIDIA A30"],
    "power_measured_w": [40.0, 41.0, 70.0, 140.0], "power_predicted_w": [35.0, 40.0, 66.0, 110.0],
    "power_error_pct": [-12.5, -2.4, -5.7, -21.4],
    "itl_measured_ms": [60.0, 20.0, 62.0, 21.0], "itl_predicted_ms": [46.0, 20.5, 48.0, 21.5],
    "energy_measured_j": [9.0, 9.2, 0.8, 1.7], "energy_predicted_j": [8.0, 9.0, 0.8, 1.3],
    "meets_measured": [False, True, False, True], "meets_predicted": [False, True, False, True],
})


def png_bytes() -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1], [0, 1])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def assert_self_contained(text: str) -> None:
    assert text.startswith("<!DOCTYPE html>")
    assert "<script" not in text and "<link" not in text and "@import" not in text
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", text), "external reference"
    assert not re.search(r"url\(\s*['\"]?https?:", text)
    for src in re.findall(r'src="([^"]*)"', text):
        assert src.startswith("data:image/png;base64,")


@pytest.fixture()
def reports_root(tmp_path) -> Path:
    for regime in ("cv5", "logo"):
        folder = tmp_path / "reports" / "evaluate" / regime
        folder.mkdir(parents=True)
        metrics = {t: {m: {s: SUMMARY for s in ("offline", "server", "server_low", "server_high")}
                       for m in ("paper_replica", base)} for t, base in (("power", "tdp"), ("itl", "roofline"))}
        (folder / "metrics.json").write_text(json.dumps({"regime": regime, "metrics": metrics}))
        (folder / "predicted_vs_measured.png").write_bytes(png_bytes())
    board = tmp_path / "reports" / "search" / "leaderboard.md"
    board.parent.mkdir(parents=True)
    board.write_text("# Leaderboard\n\nBest **power** model: `xgb_spec`.\n\n| rank | model | MdAPE |\n|---:|---|---:|\n"
                     "| 1 | xgb_spec | 9.1 |\n| 2 | <lgbm> | 9.8 |\n")
    return tmp_path


def test_report_is_self_contained_with_tables_plots_leaderboard_and_rankings(reports_root):
    out = report.write_report(reports_root / "r.html", CASE, "meta-llama/Llama-3.1-8B-Instruct", 25, root=reports_root)
    text = out.read_text()
    assert_self_contained(text)
    assert text.count("data:image/png;base64,") == 3  # two regime plots + the ranking chart
    assert "XGBoost (paper replica)" in text and "LOGO" in text and "5.0%" in text
    assert "Search leaderboard" in text and "xgb_spec" in text and "&lt;lgbm&gt;" in text  # escaped
    assert "GPU rankings" in text and "NVIDIA A30" in text and 'class="bad"' in text
    assert "least-energy GPU meeting 25 ms" in text


def test_report_without_stage_outputs_says_what_to_run(tmp_path):
    text = report.write_report(tmp_path / "r.html", None, "some/llm", 25, root=tmp_path).read_text()
    assert_self_contained(text)
    assert "dvc repro" in text and "No LOGO predictions" in text


def test_markdown_tables_and_escaping():
    html = report.markdown_html("## T\n\n| a | b |\n|---|---:|\n| <x> | 1 |\n\n- item `code`\n")
    assert "<table>" in html and "&lt;x&gt;" in html and 'style="text-align:right"' in html
    assert "<li>item <code>code</code></li>" in html


def test_cli_report_on_the_real_outputs(pipeline, tmp_path, monkeypatch):
    monkeypatch.setenv("WATTGPU_ROOT", str(pipeline))
    out = tmp_path / "report.html"
    res = CliRunner().invoke(app, ["report", "--output", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert_self_contained(text)
    assert text.count("data:image/png;base64,") >= 5
    # the measured interval coverage per regime, with its two plots
    assert "Prediction intervals: measured coverage" in text and "coverage of the 80 % intervals per held-out GPU" in text
    assert ">LOLO</td>" in text  # a table row rendered, not markdown text
