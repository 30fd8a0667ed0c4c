"""The planner page (`wattgpu ui`) in a real browser: the OS's Chromium driven by Playwright against the page's server
on 127.0.0.1, answering from the test pipeline's registered champions (conftest `pipeline`). The page must show what
`wattgpu predict` / `recommend --json` answer for the same question, draw one curve and one band per GPU, put an
error beside the field it names, and restore a question from its URL. Nothing is fetched from outside the server.

One test writes the screenshot the README shows (reports/ui/planner.png)."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from urllib.parse import urlencode

import pandas as pd
import pytest
import requests
from typer.testing import CliRunner

from tests.code.test_cli import LLAMA, MEASURED_GPUS, gpu_spec_yaml, llm_config_json
from wattgpu.cli import app
from harness import PageServer

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = ROOT / "reports" / "ui" / "planner.png"
SHOWN = {"power_w": ".1f", "itl_ms": ".2f", "tokens_per_s": ".1f", "system_tokens_per_s": ".1f",
         "energy_per_token_j": ".3g"}  # the numbers the answer shows, formatted as `wattgpu predict` prints them
METRICS = ("power_w", "itl_ms", "system_tokens_per_s", "energy_per_token_j")  # one subplot each


@pytest.fixture(scope="module")
def project(pipeline, tmp_path_factory):
    """The pipeline clone as the project the page and the CLI read (its catalogs, its champions in models/)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("WATTGPU_ROOT", str(pipeline))
    mp.setenv("WATTGPU_MODELS", str(pipeline / "models"))
    mp.setenv("WATTGPU_CACHE", str(tmp_path_factory.mktemp("ui-cache")))
    yield pipeline
    mp.undo()


@pytest.fixture(scope="module")
def server(project):
    with PageServer(project / "models") as srv:
        yield srv


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("no `chromium` on PATH: `make browser` installs the OS's (`make test` does)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture()
def page(browser, server):
    """A fresh page on the planner; fails the test on a script error or a request to anywhere else."""
    context = browser.new_context(viewport={"width": 1500, "height": 1000}, accept_downloads=True)
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    problems = []
    pg.on("pageerror", lambda e: problems.append(f"script error: {e}"))
    pg.on("request", lambda r: r.url.startswith((server.url, "data:", "blob:")) or problems.append(r.url))
    yield pg
    context.close()
    assert problems == []


def open_page(page, server, query: dict | None = None) -> None:
    page.goto(f"{server.url}/" + (f"?{urlencode(query)}" if query else ""))
    page.wait_for_function("['ready', 'answered', 'error'].includes(document.getElementById('result').dataset.state)")


def fill(page, **fields) -> None:
    """Type into the form as a user does: text, choices, checkboxes; `gpus` adds each GPU through the search box."""
    for name, value in fields.items():
        if name == "gpus":
            for gpu in value:
                page.fill("#gpu-add", gpu)
                page.press("#gpu-add", "Enter")
        elif page.eval_on_selector(f"#{name}", "el => el.tagName") == "SELECT":
            page.select_option(f"#{name}", str(value))
        else:
            page.fill(f"#{name}", str(value))


def submit(page, mode: str) -> str:
    """Press the mode's button, wait for the answer (or the error); the result's state."""
    seq = page.get_attribute("#result", "data-seq") or "0"
    page.click(f"#{mode}")
    page.wait_for_function(f"document.getElementById('result').dataset.seq !== '{seq}' && "
                           "document.getElementById('result').dataset.state !== 'asking'")
    return page.get_attribute("#result", "data-state")


def cli(*args: str) -> dict:
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def traces(page) -> list[dict]:
    return page.evaluate("() => document.getElementById('plot').data.map(t => ({...t.meta, name: t.name, "
                         "x: t.x, y: t.y, width: t.line && t.line.width}))")


def test_ask_shows_the_clis_numbers_with_their_intervals_and_flags(page, server):
    open_page(page, server)
    fill(page, gpu="A30", llm=LLAMA, scenario="server_high", prompt_tokens=2000)
    assert submit(page, "ask") == "answered"
    want = cli("predict", "--gpu", "A30", "--llm", LLAMA, "--scenario", "server_high", "--prompt-tokens", "2000")
    for key, spec in SHOWN.items():
        shown = page.locator(f"#ask-table .value[data-key={key}]")
        assert float(shown.get_attribute("data-value")) == pytest.approx(want["prediction"][key], rel=1e-9), key
        assert shown.inner_text() == format(want["prediction"][key], spec), key
    for band in want["intervals"]:
        for key in ("power_w", "itl_ms", "energy_per_token_j"):
            shown = page.locator(f"#ask-table .band[data-key={key}][data-level='{band['level']}']")
            assert float(shown.get_attribute("data-lo")) == pytest.approx(band[f"{key}_lo"], rel=1e-9)
            assert float(shown.get_attribute("data-hi")) == pytest.approx(band[f"{key}_hi"], rel=1e-9)
    assert want["memory"] in page.inner_text("#ask-table")
    flags = page.inner_text("#extrapolation")
    assert want["extrapolation"] and flags.startswith("EXTRAPOLATING")  # 2,000 prompt tokens: beyond the measured
    assert all(phrase in flags for phrase in want["extrapolation"])
    with page.expect_download() as download:
        page.click("#csv")
    table = pd.read_csv(download.value.path())
    assert list(table["level"]) == [b["level"] for b in want["intervals"]]
    assert table["power_w"].iloc[0] == pytest.approx(want["prediction"]["power_w"], rel=1e-5)


def test_a_pasted_gpu_spec_and_an_uploaded_config_json_answer_as_the_cli_files_do(page, server, tmp_path):
    spec, config = gpu_spec_yaml(tmp_path), llm_config_json(tmp_path)
    open_page(page, server)
    page.click("#gpu-spec-box summary")
    page.fill("#gpu_spec", spec.read_text())
    page.click("#llm-config-box summary")
    page.set_input_files("#llm_config_file", str(config))
    page.wait_for_function("document.getElementById('llm_config').value.length > 0")
    fill(page, rate=2, output_tokens=500)
    assert submit(page, "ask") == "answered"
    want = cli("predict", "--gpu-spec", str(spec), "--llm-config", str(config), "--rate", "2", "--output-tokens", "500")
    for key in SHOWN:
        shown = page.locator(f"#ask-table .value[data-key={key}]").get_attribute("data-value")
        assert float(shown) == pytest.approx(want["prediction"][key], rel=1e-9), key
    assert want["prediction"]["gpu"] in page.inner_text("#ask-table [data-row=GPU]")


def test_compare_draws_one_curve_and_one_band_per_gpu_to_its_memory_limit(page, server):
    gpus = ["NVIDIA A30", "NVIDIA H100 NVL", "NVIDIA L40S", "NVIDIA L4"]
    open_page(page, server)
    fill(page, gpu="A30", gpus=["H100 NVL", "L40S", "L4"], llm=LLAMA, max_itl_ms=25)
    assert submit(page, "compare") == "answered"
    drawn = traces(page)
    for metric in METRICS:
        for kind in ("line", "band"):
            assert sorted(t["gpu"] for t in drawn if t["kind"] == kind and t["metric"] == metric) == sorted(gpus)
    shapes = page.evaluate("() => document.getElementById('plot').layout.shapes.map(s => [s.name, s.x0, s.y0])")
    limits = {name.removeprefix("memory limit: "): x for name, x, _ in shapes if name.startswith("memory limit")}
    assert sorted(limits) == sorted(gpus)
    assert [y for name, _, y in shapes if name == "latency target"] == [25]
    for t in drawn:
        if t["kind"] == "line":  # requests in flight from 1 to the GPU's memory limit
            assert t["x"][0] == 1 and t["x"][-1] <= limits[t["gpu"]] < t["x"][-1] + 1
    # a point of a curve is what `wattgpu predict` answers for that many requests in flight
    a30 = next(t for t in drawn if t["kind"] == "line" and t["metric"] == "power_w" and t["gpu"] == "NVIDIA A30")
    want = cli("predict", "--gpu", "A30", "--llm", LLAMA, "--concurrency", "4")
    assert a30["y"][a30["x"].index(4)] == pytest.approx(want["prediction"]["power_w"], rel=1e-6)
    limit = float(page.inner_text("#curve-table tr[data-gpu='NVIDIA A30'] td:nth-child(2)").replace(",", ""))
    assert limit == round(limits["NVIDIA A30"])
    for fmt, start in (("svg", b"<svg"), ("png", b"\x89PNG")):  # the plot as an image, drawn offline by Plotly
        with page.expect_download() as download:
            page.click(f"#{fmt}")
        assert download.value.suggested_filename.endswith(f".{fmt}")
        assert Path(download.value.path()).read_bytes().startswith(start)


def test_recommend_ranks_explains_and_highlights_the_pick(page, server):
    open_page(page, server)
    fill(page, llm=LLAMA, scenario="server_high", max_itl_ms=25, gpus=MEASURED_GPUS.split(","))
    assert submit(page, "recommend") == "answered"
    want = cli("recommend", "--llm", LLAMA, "--scenario", "server_high", "--max-itl-ms", "25", "--gpus", MEASURED_GPUS)
    rows = page.locator("#recommend-table tbody tr")
    listed = [(r.get_attribute("data-gpu"), r.get_attribute("data-status")) for r in rows.all()]
    assert listed == [(r["gpu"], r["status"]) for r in [*want["ranking"], *want["excluded"]]]
    assert want["pick"] and rows.first.get_attribute("class") == "pick" and listed[0][0] == want["pick"]
    assert want["excluded"]
    for r in want["excluded"]:  # why each GPU fails
        assert r["reason"] and r["reason"] in page.inner_text(f"#recommend-table tr[data-gpu='{r['gpu']}'] td:last-child")
    lines = [t for t in traces(page) if t["kind"] == "line" and t["metric"] == "power_w"]
    pick = next(t for t in lines if t["gpu"] == want["pick"])
    assert pick["name"] == f"{want['pick']} (pick)" and all(pick["width"] > t["width"] for t in lines if t is not pick)
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    # the answer's time in ms is the one thing that differs between runs: left out, the same models give the same image
    page.evaluate("document.getElementById('status').textContent = 'recommend: answered'")
    page.screenshot(path=str(SCREENSHOT), full_page=True, animations="disabled")


def test_a_bad_field_shows_the_apis_error_beside_it_and_the_form_keeps_its_values(page, server):
    question = {"gpu": "A30", "llm": LLAMA, "scenario": "server_high", "prompt_tokens": "0", "output_tokens": "300"}
    open_page(page, server)
    fill(page, **question)
    assert submit(page, "ask") == "error"
    api = requests.post(f"{server.url}/api/ask", json=question, timeout=30)
    assert api.status_code == 422 and "Traceback" not in api.text
    [error] = api.json()["errors"]
    assert error["field"] == "prompt_tokens"
    assert page.inner_text("#error-prompt_tokens") == error["message"]
    assert "invalid" in page.get_attribute(".field[data-field=prompt_tokens]", "class")
    assert page.inner_text("#error-general") == ""
    assert {k: page.input_value(f"#{k}") for k in question} == question
    cli_run = CliRunner().invoke(app, ["predict", "--gpu", "A30", "--llm", LLAMA, "--scenario", "server_high",
                                       "--prompt-tokens", "0"])
    assert cli_run.exit_code == 2 and error["message"] in (cli_run.stderr or cli_run.output)  # the CLI's, word for word
    fill(page, gpu="A3000", prompt_tokens=14)
    assert submit(page, "ask") == "error"
    assert page.inner_text("#error-gpu").startswith("unknown GPU 'A3000'; did you mean")
    assert page.inner_text("#error-prompt_tokens") == ""


def test_a_shared_url_restores_the_question_and_its_answer(page, server, browser):
    open_page(page, server)
    fill(page, gpu="A30", gpus=["L4"], llm=LLAMA, concurrency=8, prompt_tokens=500, output_tokens=100,
         gpus_per_replica=2, precision="fp8", levels="90", max_itl_ms=30)
    page.click("#shape-box summary")
    page.check("#dp_attention")
    assert submit(page, "compare") == "answered"
    shared = page.url
    asked = {el: page.input_value(f"#{el}") for el in ("gpu", "gpus", "llm", "concurrency", "prompt_tokens",
                                                       "output_tokens", "gpus_per_replica", "precision", "levels",
                                                       "max_itl_ms")}
    other = browser.new_page()
    try:
        other.goto(shared)
        other.wait_for_function("document.getElementById('result').dataset.state === 'answered'")
        assert {el: other.input_value(f"#{el}") for el in asked} == asked
        assert other.is_checked("#dp_attention")
        assert other.inner_text("#curve-table") == page.inner_text("#curve-table")
        assert traces(other) == traces(page)
    finally:
        other.close()
    csv = requests.get(f"{server.url}/api/compare.csv?{shared.split('?', 1)[1]}", timeout=30)
    curves = pd.read_csv(io.StringIO(csv.text))
    assert sorted(curves["gpu"].unique()) == ["NVIDIA A30", "NVIDIA L4"]
