"""The `wattgpu` CLI end to end through typer's CliRunner: predict, recommend, casestudy, catalog add, errors.

Project: the test pipeline's clone (conftest `pipeline`: the real `dvc repro` on shrunk params). Models: a small
model folder fitted once per session on its measurement rows (the paper replica's XGBoost on its ITL features;
power without the idle-power feature, which only measured GPUs have), and the pipeline's own registered champions
(the physics-informed model the search registers).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from wattgpu import paths
from wattgpu.cli import app

ROOT = Path(__file__).resolve().parents[2]
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
MEASURED_GPUS = "H100 NVL,H200,L40S,A100-SXM4-40GB,V100-SXM2-32GB,A30,L4,T4"
LLAMA_31_8B_CONFIG = {  # meta-llama/Llama-3.1-8B-Instruct config.json (public), the fields that matter
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "max_position_embeddings": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}
runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args))


def assert_clean_error(result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    text = result.stderr if result.stderr else result.output
    assert "error:" in text or "Error" in text
    for f in fragments:
        assert f in text, text


def gpu_spec_yaml(tmp_path: Path, **override) -> Path:
    """The catalog's L4 entry as a stand-alone spec file under another name."""
    entry = next(e for e in yaml.safe_load((ROOT / paths.GPU_CATALOG).read_text())["gpus"] if e["key"] == "NVIDIA L4")
    entry = {**entry, "key": "My L4-like card", "aliases": [], **override}
    path = tmp_path / "gpu.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in entry.items() if v is not None or k in override}))
    return path


def llm_config_json(tmp_path: Path, **override) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA_31_8B_CONFIG, **override}))
    return path


# ------------------------------------------------------------------------------------------------ predict


def test_predict_gpu_by_spec_yaml_and_llm_by_config_json(env):
    res = run("predict", "--gpu-spec", str(gpu_spec_yaml(env)), "--llm-config", str(llm_config_json(env)),
              "--scenario", "server_high", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    p = out["prediction"]
    assert p["gpu"] == "My L4-like card" and 20 < p["power_w"] < 75  # an L4 is a 72 W card
    assert p["itl_ms"] > 0 and p["tokens_per_s"] == pytest.approx(1000 / p["itl_ms"])
    # server: requests in flight solved from the rate, so energy per token = W / (rate x output tokens)
    assert p["energy_per_token_j"] == pytest.approx(p["power_w"] / (0.33 * 220), rel=1e-3)
    assert p["concurrency"] == pytest.approx(0.33 * 220 * p["itl_ms"] / 1e3, rel=1e-3) and not p["overloaded"]
    assert out["models"] == {"power": "test-power-1", "itl": "test-itl-1"}
    assert out["request"]["gpu_tdp_w"] == 72.0 and out["request"]["llm_num_layers"] == 32


def test_spec_gpu_predicts_like_the_same_catalog_gpu(env):
    by_spec = json.loads(run("predict", "--gpu-spec", str(gpu_spec_yaml(env)), "--llm", LLAMA,
                             "--scenario", "server_low", "--json").stdout)["prediction"]
    by_name = json.loads(run("predict", "--gpu", "L4", "--llm", LLAMA, "--scenario", "server_low",
                             "--json").stdout)["prediction"]
    assert by_spec["power_w"] == pytest.approx(by_name["power_w"])
    assert by_spec["itl_ms"] == pytest.approx(by_name["itl_ms"])


def test_a_spec_file_labelled_as_a_catalog_entry_is_answered_under_its_own_label(env):
    """A GPU spec YAML keyed as a catalog GPU, a config.json whose _name_or_path is a catalog LLM: the files' fields
    are answered, labelled with the file's name (a request refuses a spec that calls itself a catalog entry)."""
    res = run("predict", "--gpu-spec", str(gpu_spec_yaml(env, key="NVIDIA L4")), "--llm-config",
              str(llm_config_json(env, _name_or_path=LLAMA)), "--scenario", "server_low", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["prediction"]["gpu"], out["request"]["llm_name"]) == ("NVIDIA L4 (gpu.yaml)", f"{LLAMA} (config.json)")
    by_name = json.loads(run("predict", "--gpu", "L4", "--llm", LLAMA, "--scenario", "server_low",
                             "--json").stdout)["prediction"]
    assert out["prediction"]["power_w"] == pytest.approx(by_name["power_w"], rel=0.02)
    assert out["prediction"]["itl_ms"] == pytest.approx(by_name["itl_ms"], rel=0.02)


def test_predict_text_output_names_units_and_model_versions(env):
    res = run("predict", "--gpu", "a30", "--llm", LLAMA, "--scenario", "offline", "--gpus-per-replica", "1")
    assert res.exit_code == 0, res.output
    for fragment in ("NVIDIA A30", "W per GPU", "ms", "tokens/s", "J per generated token", "test-power-1", "fits:"):
        assert fragment in res.stdout


def test_predict_cache_gives_the_same_answer(env):
    args = ("predict", "--gpu", "H200", "--llm", LLAMA, "--scenario", "server_high", "--json")
    first, second = run(*args), run(*args)
    assert list((env / "cache").glob("predictions-*.sqlite"))
    assert json.loads(first.stdout)["prediction"] == json.loads(second.stdout)["prediction"]
    fresh = json.loads(run(*args, "--no-cache").stdout)["prediction"]
    assert fresh["power_w"] == pytest.approx(json.loads(first.stdout)["prediction"]["power_w"])


HEAVY = ("mlflow", "optuna", "dvc", "sklearn", "scipy", "lightgbm", "xgboost", "joblib", "crepes", "pandas")


def _heavy_imports(*args: str) -> tuple[list[str], str]:
    """The heavy packages a fresh `wattgpu` process imports to run `args` (its environment: this test's), and what
    it printed."""
    import subprocess
    import sys

    probe = (f"import json, sys\nfrom wattgpu.cli import app\ntry:\n    app({list(args)!r})\nexcept SystemExit as e:\n"
             f"    assert not e.code, e.code\nheavy = {{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r}\n"
             "print(json.dumps(sorted(heavy)), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stderr.strip().splitlines()[-1]), done.stdout


def test_help_and_a_question_answered_before_load_no_model_library(env):
    """`wattgpu --help` and a question asked before import no model, search or tracking library and no pandas
    (each costs a process start 0.1 - 0.6 s); answering a new question does load the models (the probe sees them),
    a question whose predictions are cached but which was not asked so (another rendering) loads pandas but not the
    models, and all three print the same answer."""
    assert _heavy_imports("--help")[0] == []
    args = ("predict", "--gpu", "A30", "--llm", LLAMA, "--concurrency", "12", "--prompt-tokens", "300")
    first, answer = _heavy_imports(*args)
    assert "sklearn" in first and "pandas" in first  # a new question: the models are loaded, and cached
    assert _heavy_imports(*args) == ([], answer)  # asked before: the answer remembered (wattgpu.planning.answers)
    asked_as_json, body = _heavy_imports(*args, "--json")
    assert "pandas" in asked_as_json and "sklearn" not in asked_as_json  # the predictions cached, the answer not
    assert json.loads(body)["prediction"]["itl_ms"] == pytest.approx(float(re.search(r"ITL +([\d.]+) ms", answer)[1]),
                                                                     abs=0.005)
    recommend = ("recommend", "--llm", LLAMA, "--scenario", "offline", "--max-itl-ms", "50", "--gpus", "A30,L4")
    _, ranking = _heavy_imports(*recommend)
    assert _heavy_imports(*recommend) == ([], ranking) and "NVIDIA A30" in ranking


def _memo_rows(env) -> int:
    import sqlite3

    path = env / "cache" / "answers.sqlite"
    if not path.exists():
        return 0
    with sqlite3.connect(path) as db:
        return db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]


def test_an_answer_is_remembered_only_for_the_same_question_the_same_files_and_the_same_terminal(env, monkeypatch):
    """A question asked again prints the same bytes from the memo; a changed --llm-config (same path, other
    content), another terminal width, `--no-cache` and an error each miss it (and the last two write nothing)."""
    config = llm_config_json(env)
    args = ("predict", "--gpu", "L4", "--llm-config", str(config), "--concurrency", "8", "--prompt-tokens", "512")
    first = run(*args)
    assert first.exit_code == 0, first.output
    assert _memo_rows(env) == 1 and run(*args).stdout == first.stdout and _memo_rows(env) == 1
    config.write_text(json.dumps({**LLAMA_31_8B_CONFIG, "num_hidden_layers": 16}))  # the same path, half the layers
    halved = run(*args)
    assert halved.exit_code == 0 and _memo_rows(env) == 2
    itl = [float(re.search(r"ITL +([\d.]+) ms", r.stdout)[1]) for r in (first, halved)]
    assert itl[1] < itl[0]  # answered from the new file, not remembered from the old one
    recommend = ("recommend", "--llm", LLAMA, "--scenario", "offline", "--max-itl-ms", "50", "--gpus", "A30,L4,H200")
    wide = run(*recommend)
    monkeypatch.setenv("COLUMNS", "160")
    narrow = run(*recommend)
    assert _memo_rows(env) == 4 and wide.stdout != narrow.stdout  # rich draws the table to the width
    assert max(map(len, narrow.stdout.splitlines())) <= 160 < max(map(len, wide.stdout.splitlines()))
    assert run(*recommend).stdout == narrow.stdout and _memo_rows(env) == 4
    assert run(*recommend, "--no-cache").stdout == narrow.stdout and _memo_rows(env) == 4
    assert_clean_error(run("predict", "--gpu", "L4", "--llm", LLAMA, "--concurrency", "-3"), "concurrency")
    assert _memo_rows(env) == 4


def test_batch_predict_writes_one_row_per_request(env):
    rows = pd.DataFrame({"gpu": ["A30", "H100 NVL", "L4"], "llm": [LLAMA] * 3,
                         "scenario": ["server_low", "offline", "server"], "request_rate_per_s": [None, None, 1.0]})
    src, dst = env / "in.csv", env / "out" / "preds.csv"
    rows.to_csv(src, index=False)
    res = run("predict", "--input", str(src), "--output", str(dst))
    assert res.exit_code == 0, res.output
    out = pd.read_csv(dst)
    assert len(out) == 3 and list(out["resolved_gpu"]) == ["NVIDIA A30", "NVIDIA H100 NVL", "NVIDIA L4"]
    assert out["power_w"].gt(0).all() and out["itl_ms"].gt(0).all() and set(out["model_power"]) == {"test-power-1"}
    assert out["extrapolation"].isna().tolist() == [True, True, False]  # 1 request/s: above the measured 0.33


def test_predict_flags_inputs_outside_the_training_ranges(env):
    inside = json.loads(run("predict", "--gpu", "A30", "--llm", LLAMA, "--scenario", "server_high", "--json").stdout)
    assert inside["extrapolation"] == []
    res = run("predict", "--gpu", "B200", "--llm", LLAMA, "--scenario", "server", "--rate", "2",
              "--prompt-tokens", "500")
    assert res.exit_code == 0, res.output
    line = next(x for x in res.stdout.splitlines() if x.startswith("coverage"))
    assert "EXTRAPOLATING" in line and "TDP (W) 1000 > 700 measured" in line
    assert "request rate (req/s) 2 > 0.33 measured" in line and "prompt tokens 500 >" in line


def test_predict_gives_an_interval_per_level(env):
    args = ("predict", "--gpu", "A30", "--llm", LLAMA, "--scenario", "server_high", "--json")
    out = json.loads(run(*args).stdout)
    p, bounds = out["prediction"], [f"{t}_{s}" for t in ("power_w", "itl_ms", "system_tokens_per_s",
                                                         "energy_per_token_j") for s in ("lo", "hi")]
    assert p["level"] == 0.8 and [b["level"] for b in out["intervals"]] == [0.8, 0.9]
    assert all(k in p and k in out["intervals"][0] for k in bounds) and isinstance(out["interval_note"], str)
    for band in out["intervals"]:  # these test models carry no calibration: null bounds, or bounds around the point
        assert all(band[k] is None or band[k] <= p[k[:-3]] for k in bounds if k.endswith("_lo"))
    res = run(*args, "--level", "0.95", "--level", "80")
    assert res.exit_code == 0, res.output
    again = json.loads(res.stdout)
    assert [b["level"] for b in again["intervals"]] == [0.95, 0.8] and again["prediction"]["level"] == 0.95
    assert again["prediction"]["power_w"] == pytest.approx(p["power_w"])  # the level moves the bounds only
    text = run(*args[:-1]).stdout
    assert next(x for x in text.splitlines() if x.startswith("interval"))  # the band, or why there is none


def test_batch_predict_passes_the_interval_columns_and_each_rows_level(env):
    rows = pd.DataFrame({"gpu": ["A30", "L4"], "llm": [LLAMA] * 2, "scenario": ["offline", "server_low"],
                         "level": [0.9, None]})
    src, dst = env / "in.csv", env / "preds.csv"
    rows.to_csv(src, index=False)
    res = run("predict", "--input", str(src), "--output", str(dst))
    assert res.exit_code == 0, res.output
    out = pd.read_csv(dst)
    assert {"power_w_lo", "power_w_hi", "itl_ms_lo", "itl_ms_hi", "energy_per_token_j_hi", "interval"} <= set(out)
    assert list(out["level"]) == [0.9, 0.8]
    assert_clean_error(run("predict", "--input", str(src), "--output", str(dst), "--level", "90"), "level")


def test_batch_error_names_the_row_and_field(env):
    src = env / "in.csv"
    pd.DataFrame({"gpu": ["A30", "A30"], "llm": [LLAMA, LLAMA], "scenario": ["offline", "peak"]}).to_csv(src, index=False)
    assert_clean_error(run("predict", "--input", str(src), "--output", str(env / "o.csv")), "row 1", "scenario")


# ------------------------------------------------------------------------------------------------ recommend


def test_recommend_json_over_the_measured_gpus(env):
    res = run("recommend", "--llm", LLAMA, "--scenario", "server_high", "--max-itl-ms", "25", "--gpus",
              MEASURED_GPUS, "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    ranked = [r["gpu"] for r in out["ranking"]]
    excluded = {r["gpu"]: r for r in out["excluded"]}
    assert len(ranked) + len(excluded) == 8
    assert out["pick"] == ranked[0]
    assert excluded["Tesla T4"]["status"] == "does not fit" and "14.4 GB usable" in excluded["Tesla T4"]["reason"]
    assert excluded["NVIDIA L4"]["status"] == "too slow"  # ~60 ms measured at server_high
    energies = [r["energy_per_token_j"] for r in out["ranking"]]
    assert energies == sorted(energies)
    assert all(r["itl_ms"] <= r["itl_judged_ms"] <= 25 for r in out["ranking"])
    assert out["confidence_pct"] == 80 and out["objective"] == "energy" and out["pue"] == 1.0
    assert all(r["energy_kwh_per_mtok"] == pytest.approx(r["energy_per_token_j"] / 3.6) for r in out["ranking"])
    assert set(out["meets_only_at_point_estimate"]) == {
        r["gpu"] for r in out["excluded"] if r["status"] == "meets only at the point estimate"}
    assert "90 %" in out["memory_rule"] and out["models"]["itl"] == "test-itl-1"
    assert out["extrapolation"] == {"workload_and_llm": [], "gpus": {}}  # the measured GPUs, the paper's load


def test_recommend_names_the_gpus_it_extrapolates_to(env):
    res = run("recommend", "--llm", LLAMA, "--scenario", "server_high", "--max-itl-ms", "25", "--gpus",
              "B200,A30", "--output-tokens", "2000", "--json")
    assert res.exit_code == 0, res.output
    ext = json.loads(res.stdout)["extrapolation"]
    assert list(ext["gpus"]) == ["NVIDIA B200"] and any("TDP" in n for n in ext["gpus"]["NVIDIA B200"])
    assert ext["workload_and_llm"] == ["output tokens 2000 > 258 measured"]


def test_recommend_text_states_the_pick_and_the_rule(env):
    res = run("recommend", "--llm", LLAMA, "--scenario", "server_low", "--max-itl-ms", "25")
    assert res.exit_code == 0, res.output
    assert "Pick:" in res.stdout and "memory rule" in res.stdout and "does not fit" in res.stdout


def test_recommend_power_budget_prices_and_objective(env):
    base = ("recommend", "--llm", LLAMA, "--scenario", "server_high", "--max-itl-ms", "30", "--gpus", MEASURED_GPUS,
            "--json")
    res = run(*base, "--max-power-w", "200", "--confidence", "90", "--pue", "1.25", "--price-per-kwh", "0.2",
              "--gpu-price-per-hour", "2.5", "--objective", "total-cost")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["confidence_pct"] == 90 and out["max_power_w"] == 200 and out["objective"] == "total-cost"
    for r in out["ranking"]:
        assert r["power_judged_w"] <= 200
        assert r["energy_kwh_per_mtok"] == pytest.approx(r["energy_per_token_j"] / 3.6 * 1.25)
        hours = 1e6 / r["system_tokens_per_s"] / 3600
        assert r["total_cost_per_mtok"] == pytest.approx(0.2 * r["energy_kwh_per_mtok"] + 2.5 * hours)
    costs = [r["total_cost_per_mtok"] for r in out["ranking"]]
    assert costs == sorted(costs)
    over = [r for r in out["excluded"] if r["status"] == "over power budget"]
    assert over and all(r["power_judged_w"] > 200 and "200 W budget" in r["reason"] for r in over)
    assert {r["gpu"] for r in over} == set(out["over_power_budget"])
    text = run(*base[:-1], "--price-per-kwh", "0.2", "--gpu-price-per-hour", "2.5")
    assert text.exit_code == 0 and "cost/Mtok" in text.stdout and "kWh/Mtok" in text.stdout


def test_recommend_for_an_llm_given_by_config(env):
    args = ("--scenario", "offline", "--max-itl-ms", "1000", "--gpus", "A30,H200", "--json")
    res = run("recommend", "--llm-config", str(llm_config_json(env)), *args)
    assert res.exit_code == 0, res.output
    by_config, by_name = json.loads(res.stdout), json.loads(run("recommend", "--llm", LLAMA, *args).stdout)
    # the same config as the catalog's Llama-3.1-8B (a computed parameter count, not the published one)
    assert by_config["pick"] == by_name["pick"] and by_config["pick"] is not None
    assert [r["gpu"] for r in by_config["ranking"]] == [r["gpu"] for r in by_name["ranking"]]


def test_recommend_more_gpus_per_replica_lets_a_big_model_fit(env):
    args = ("recommend", "--llm", "meta-llama/Meta-Llama-3.1-70B-Instruct", "--scenario", "server_high",
            "--max-itl-ms", "200", "--gpus", "H100 NVL", "--json")
    one = json.loads(run(*args).stdout)
    two = json.loads(run(*args, "--gpus-per-replica", "2").stdout)
    assert one["pick"] is None and [r["status"] for r in one["excluded"]] == ["does not fit"]
    assert "does not fit" not in [r["status"] for r in two["excluded"] + two["ranking"]]
    assert len(two["excluded"] + two["ranking"]) == 1


# ------------------------------------------------------------------------------------------------ errors


@pytest.mark.parametrize("args, fragments", [
    (("predict", "--gpu", "H10O", "--llm", LLAMA, "--scenario", "offline"), ("unknown GPU", "did you mean")),
    (("predict", "--gpu", "A30", "--llm", "llama-3.1-8b", "--scenario", "offline"), ("unknown LLM",)),
    (("predict", "--gpu", "A30", "--llm", LLAMA, "--scenario", "peak"), ("scenario", "offline")),
    (("predict", "--gpu", "A30", "--llm", LLAMA, "--scenario", "server"), ("request_rate_per_s",)),
    (("predict", "--gpu", "A30", "--gpu-spec", "x.yaml", "--llm", LLAMA, "--scenario", "offline"), ("--gpu",)),
    (("recommend", "--llm", LLAMA, "--scenario", "server_high", "--max-itl-ms", "25", "--gpus", "A30,B900"),
     ("unknown GPU 'B900'",)),
    (("recommend", "--llm", LLAMA, "--scenario", "server_high", "--max-itl-ms", "-1"), ("positive",)),
    (("recommend", "--llm", LLAMA, "--scenario", "offline", "--max-itl-ms", "25", "--pue", "0.8"), ("--pue",)),
    (("recommend", "--llm", LLAMA, "--scenario", "offline", "--max-itl-ms", "25", "--confidence", "120"),
     ("--confidence",)),
    (("recommend", "--llm", LLAMA, "--scenario", "offline", "--max-itl-ms", "25", "--objective", "energy-cost"),
     ("--price-per-kwh",)),
    (("recommend", "--llm", LLAMA, "--scenario", "offline", "--max-itl-ms", "25", "--price-per-kwh", "0.2",
      "--objective", "total-cost"), ("--gpu-price-per-hour",)),
    (("recommend", "--llm", LLAMA, "--scenario", "offline", "--max-itl-ms", "25", "--price-per-kwh", "-1"),
     ("--price-per-kwh",)),
    (("predict", "--gpu", "A30", "--llm", LLAMA, "--scenario", "offline", "--level", "30"), ("--level",)),
])
def test_expected_errors_are_clean(env, args, fragments):
    (env / "x.yaml").write_text("tdp_w: 1\n")
    assert_clean_error(run(*args), *fragments)


@pytest.mark.parametrize("flag, meant", [("--tensor-parallel", "--gpus-per-replica"), ("-tp", "--gpus-per-replica"),
                                         ("--pipeline-parallel-size", "--pipeline-parallel"),
                                         ("--max-num-seqs", "--concurrency"), ("--request-rate", "--rate"),
                                         ("--kv-cache-dtype", "--kv-precision"), ("--n-gpus", "--gpus-per-replica"),
                                         ("--max-tokens", "--output-tokens"), ("--request-rate-per-s", "--rate")])
def test_an_engines_flag_is_told_the_option_that_says_it(flag, meant, monkeypatch):
    """vLLM's and SGLang's flags a planner carries over get the option of ours that means the same, not click's
    nearest spelling (--expert-parallel for --tensor-parallel); our own misspelt flag still gets click's."""
    monkeypatch.setenv("COLUMNS", "300")  # the error box on one line
    for command in ("predict", "recommend"):
        result = run(command, "--llm", LLAMA, flag, "8")
        assert_clean_error(result, f"'--{flag.lstrip('-')}'", "no such option")
        text = result.stderr or result.output
        assert re.search(f"did you mean {meant}[ :]", text) and "Possible options" not in text, text
    assert_clean_error(run("predict", "--gpus-per-replca", "2"), "--gpus-per-replica")


@pytest.mark.parametrize("args", [("tp",), ("catalog", "tp"), ("search", "n-gpus"), ("max_num_seqs",)])
def test_an_unknown_command_named_like_an_engines_flag_is_an_unknown_command(args, monkeypatch):
    """A command name is not an option: `wattgpu tp` is no such command (it was told of --tp, as the option is);
    a misspelt command still gets click's suggestion, and the flag as an option still its hint."""
    monkeypatch.setenv("COLUMNS", "300")
    result = run(*args)
    assert_clean_error(result, f"No such command {args[-1]!r}")
    assert "did you mean --" not in (result.stderr or result.output)
    assert_clean_error(run("catalog", "lsit"), "No such command 'lsit'", "Did you mean 'list'")
    assert_clean_error(run("predict", "--llm", LLAMA, "--tp", "8"), "'--tp'", "did you mean --gpus-per-replica")


def test_python_dash_m_runs_the_same_command_line():
    """`python -m wattgpu.cli` is `wattgpu` (it imported the module and did nothing, exit 0), its usage errors
    included."""
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "wattgpu.cli", "predict", "--tp", "8"], capture_output=True,
                          text=True, timeout=60, check=False, env={**os.environ, "COLUMNS": "300"})
    assert done.returncode == 2 and "did you mean --gpus-per-replica" in done.stderr, done.stderr
    listed = subprocess.run([sys.executable, "-m", "wattgpu.cli", "--help"], capture_output=True, text=True,
                            timeout=60, check=False)
    assert listed.returncode == 0 and "Usage: wattgpu" in listed.stdout and "recommend" in listed.stdout


def test_no_engine_word_hides_an_option_of_ours():
    """The words told as another option (workload.FLAG_WORDS) are no option of any command: click normalizes every
    option name through them, ours included. And every option the table points to (workload.FIELD_OPTIONS, written
    beside the commands' own definitions) is one of ours: a renamed option cannot leave the table pointing nowhere."""
    import typer

    from wattgpu.workload import FIELD_OPTIONS, FLAG_WORDS

    def options(command):
        for param in command.params:
            yield from (o.lstrip("-").replace("-", "_") for o in param.opts if o.startswith("-"))
        for sub in getattr(command, "commands", {}).values():
            yield from options(sub)

    ours = set(options(typer.main.get_command(app)))
    assert {"gpus_per_replica", "rate", "concurrency", "pipeline_parallel"} <= ours  # the walk reaches the options
    assert not ours & set(FLAG_WORDS), ours & set(FLAG_WORDS)
    pointed = {option.split()[0].lstrip("-").replace("-", "_") for option, _ in FIELD_OPTIONS.values()}
    assert pointed <= ours, pointed - ours


def test_spec_file_errors_name_the_field(env):
    no_tdp = gpu_spec_yaml(env, tdp_w=None)
    assert_clean_error(run("predict", "--gpu-spec", str(no_tdp), "--llm", LLAMA, "--scenario", "offline"), "tdp_w")
    typo = env / "typo.yaml"
    typo.write_text(gpu_spec_yaml(env).read_text() + "bandwith_gb_s: 300\n")
    assert_clean_error(run("predict", "--gpu-spec", str(typo), "--llm", LLAMA, "--scenario", "offline"), "bandwith_gb_s")
    bad_cfg = llm_config_json(env, num_hidden_layers="many")
    assert_clean_error(run("predict", "--gpu", "A30", "--llm-config", str(bad_cfg), "--scenario", "offline"),
                       "config.json", "num_hidden_layers", "many")  # the key as the config writes it


def test_missing_models_is_a_clean_error(env, monkeypatch):
    monkeypatch.setenv("WATTGPU_MODELS", str(env / "nowhere"))
    assert_clean_error(run("recommend", "--llm", LLAMA, "--scenario", "offline", "--max-itl-ms", "1"), "dvc repro")


# ------------------------------------------------------------------------------------------------ catalog


@pytest.fixture()
def project(pipeline, tmp_path, monkeypatch) -> Path:
    """A tmp project root holding copies of the catalogs."""
    for rel in (paths.GPU_CATALOG, paths.LLM_CATALOG_TABLE):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pipeline / rel, tmp_path / rel)
    (tmp_path / paths.LLM_CONFIG_DIR).mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("WATTGPU_ROOT", str(tmp_path))
    return tmp_path


def test_add_gpu_appends_a_validated_entry_and_keeps_comments(project):
    from wattgpu.catalogs.gpus import load_gpu_catalog

    before = (project / paths.GPU_CATALOG).read_text()
    spec = gpu_spec_yaml(project, key="ACME X1", display_name="ACME X1 24 GB")
    res = run("catalog", "add-gpu", str(spec))
    assert res.exit_code == 0, res.output
    assert "dvc repro" in res.stdout
    after = (project / paths.GPU_CATALOG).read_text()
    assert after.startswith(before)  # appended: every comment survives
    cat = load_gpu_catalog(project / paths.GPU_CATALOG)
    assert cat.keys[-1] == "ACME X1" and cat.get("ACME X1").tdp_w == 72.0


def test_add_gpu_rejects_duplicates_and_bad_fields_leaving_the_file(project):
    before = (project / paths.GPU_CATALOG).read_text()
    assert_clean_error(run("catalog", "add-gpu", str(gpu_spec_yaml(project, key="NVIDIA L4"))), "key")
    assert_clean_error(run("catalog", "add-gpu", str(gpu_spec_yaml(project, key="ACME X2", tdp_w=-5.0))), "tdp_w")
    assert_clean_error(run("catalog", "add-gpu", str(gpu_spec_yaml(project, key="ACME X3", aliases=["A30"]))), "aliases")
    assert (project / paths.GPU_CATALOG).read_text() == before


def test_added_gpu_is_predicted_from_its_spec(project, models_dir, monkeypatch):
    monkeypatch.setenv("WATTGPU_MODELS", str(models_dir))
    monkeypatch.setenv("WATTGPU_CACHE", str(project / "cache"))
    assert run("catalog", "add-gpu", str(gpu_spec_yaml(project, key="ACME X1"))).exit_code == 0
    res = run("predict", "--gpu", "acme x1", "--llm", LLAMA, "--scenario", "server_low", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["prediction"]["gpu"] == "ACME X1"


def test_add_llm_copies_a_validated_config(project):
    cfg = llm_config_json(project, _name_or_path="acme/llama-clone-8b")
    res = run("catalog", "add-llm", str(cfg))
    assert res.exit_code == 0, res.output
    dest = project / paths.LLM_CONFIG_DIR / "acme--llama-clone-8b.json"
    assert json.loads(dest.read_text())["num_hidden_layers"] == 32 and "8.03 B" in res.stdout
    assert_clean_error(run("catalog", "add-llm", str(cfg)), "already in the catalog")
    assert_clean_error(run("catalog", "add-llm", str(llm_config_json(project)), "--name", "no-org"), "org/model")
    bad = llm_config_json(project, num_hidden_layers=0)
    assert_clean_error(run("catalog", "add-llm", str(bad), "--name", "acme/broken"), "num_hidden_layers")
    assert not (project / paths.LLM_CONFIG_DIR / "acme--broken.json").exists()


def test_catalog_list_and_show_still_work(env):
    assert "NVIDIA A30" in run("catalog", "list", "gpus").stdout
    shown = run("catalog", "show", "a30", "--json")
    assert shown.exit_code == 0 and json.loads(shown.stdout)["memory_gb"] == 24.0


# ------------------------------------------------------------------------------------------------ case study


def test_casestudy_markdown(env):
    res = run("casestudy", "--llm", LLAMA, "--markdown")
    assert res.exit_code == 0, res.output
    assert "| NVIDIA L4 | server_low |" in res.stdout and "paper_replica" in res.stdout
    assert "least-energy GPU meeting 25 ms" in res.stdout


def test_results_prints_the_verdict_and_the_champions(tmp_path, monkeypatch):
    cell = {"nested_mdape": 2.0, "replica_mdape": 3.0, "beats_replica": True}  # FIXTURE figures
    verdict = {"all_beat_replica": False, "power": {"logo": {"offline": cell, "server": {**cell, "nested_mdape": 4.0,
                                                                                       "beats_replica": False}}}}
    (tmp_path / "reports/search").mkdir(parents=True)
    (tmp_path / "reports/search/verdict.json").write_text(json.dumps(verdict))
    (tmp_path / "models").mkdir()
    (tmp_path / "models/registry.json").write_text(json.dumps({"power": {
        "name": "wattgpu-power", "version": 2, "champion_version": 1, "decision": "kept champion"}}))
    monkeypatch.setenv("WATTGPU_ROOT", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "200")
    res = run("results")
    assert res.exit_code == 0, res.output
    assert "2.0 %" in res.stdout and "NO" in res.stdout and "champion v1" in res.stdout
    monkeypatch.setenv("WATTGPU_ROOT", str(tmp_path / "elsewhere"))
    assert run("results").exit_code != 0


# ------------------------------------------------------------------------------------------------ the registered champions


def test_predict_and_recommend_through_the_registered_physics_champions(pipeline, tmp_path, monkeypatch):
    """The models `dvc repro` registers (the search's winners, physics-informed) answer through the CLI."""
    monkeypatch.setenv("WATTGPU_MODELS", str(pipeline / "models"))
    monkeypatch.setenv("WATTGPU_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("WATTGPU_ROOT", str(pipeline))
    meta = json.loads((pipeline / "models/power/meta.json").read_text())
    assert meta["origin"] == "search" and meta["algorithm"] == json.loads(
        (pipeline / "reports/search/best_power.json").read_text())["algorithm"]
    res = run("predict", "--gpu", "H100 NVL", "--llm", LLAMA, "--scenario", "server_high", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert 50 < out["prediction"]["power_w"] < 400 and 1 < out["prediction"]["itl_ms"] < 50  # a 400 W card
    assert out["models"]["power"].startswith("wattgpu-power v") and "@champion" in out["models"]["power"]
    rec = json.loads(run("recommend", "--llm", LLAMA, "--scenario", "server_high", "--max-itl-ms", "25", "--gpus",
                         MEASURED_GPUS, "--json").stdout)
    assert rec["pick"] is not None and {r["gpu"] for r in rec["excluded"]} >= {"Tesla T4"}


def test_a_load_of_ones_own_says_which_defaults_shaped_its_answer(env):
    asked = ("predict", "--gpu", "A30", "--llm", LLAMA, "--concurrency", "8")
    text = run(*asked).stdout
    line = next(x for x in text.splitlines() if x.startswith("defaults"))
    assert "prompt_tokens 14 by default" in line and "--prompt-tokens" in line and "output_tokens 220" in line
    answer = json.loads(run(*asked, "--prompt-tokens", "900", "--json").stdout)
    assert [d.split()[0] for d in answer["defaults"]] == ["output_tokens"]
    preset = json.loads(run("predict", "--gpu", "A30", "--llm", LLAMA, "--scenario", "server_high", "--json").stdout)
    assert preset["defaults"] == []  # a preset is Watt Counts' own workload, lengths included
    rec = run("recommend", "--llm", LLAMA, "--max-itl-ms", "80", "--gpus", "A30,L4", "--rate", "0.5", "--json")
    assert [d.split()[0] for d in json.loads(rec.stdout)["defaults"]] == ["prompt_tokens", "output_tokens"]
    src, dst = env / "in.csv", env / "preds.csv"
    src.write_text(f"gpu,llm,scenario,concurrency,prompt_tokens\nA30,{LLAMA},,8,\nA30,{LLAMA},,8,500\n"
                   f"A30,{LLAMA},offline,,\n")
    assert run("predict", "--input", str(src), "--output", str(dst)).exit_code == 0
    notes = pd.read_csv(dst)["defaults"].fillna("").tolist()
    assert [n.split(" ", 1)[0] for n in notes] == ["prompt_tokens", "output_tokens", ""]  # row 2: the offline preset
