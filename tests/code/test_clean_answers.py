"""Every bad input answered cleanly (issue 25), on the FIXTURE catalogs of test_predict and hand-written requests, CSV
files and config.json files (never measurements); no pipeline, no server (tests/integration/test_bad_input.py runs
the corpus through the real entry points). One test per kind, Hypothesis where the inputs are many:

- partial answers are strict JSON (null, never a bare NaN);
- valid requests answered: `instances` rows with different fields, a number-looking label in a CSV;
- nothing silently ignored: `params` and other body keys, a text field beside a catalog name, a column given twice;
- inconsistent configs refused: attention heads that do not divide the hidden size (unless head_dim is given);
- bad names refused by `catalog add-llm` / `add-gpu`;
- the right thing blamed: a huge whole number, a text cell in a number column of a CSV, an MoE's
  num_experts_per_tok, a spec YAML's own key;
- rough edges: one error once for several interval levels, a rejected row's real file line, the output path checked
  before predicting, the defaults that shaped an answer said in it.
"""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.code.test_predict import BY_NAME, GPU_SPEC, GPUS, LLM_CONFIG, LLMS, fixture_predictor
from tests.conftest import ROOT
from wattgpu import paths, workload
from wattgpu.catalogs.hf_config import architecture_from_config
from wattgpu.errors import CatalogError, WattgpuError
from wattgpu.request import (
    BOUNDS,
    BatchRequestError,
    RequestError,
    read_csv,
    row_lines,
    spec_problems,
    validate,
    validate_batch,
    validate_one,
)

settings.register_profile("wattgpu", max_examples=60, deadline=None)
settings.load_profile("wattgpu")

LLAMA_CONFIG = {  # the shape of a Llama-3.1-8B config.json (public), the fields that matter
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
}


def strict(text: str):
    """json.loads that refuses NaN and Infinity, as browsers and jq do."""
    def refuse(constant):
        raise ValueError(f"bare {constant} in JSON")

    return json.loads(text, parse_constant=refuse)


def errors_of(requests) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for e in validate_batch(requests, GPUS, LLMS).errors:
        out.setdefault(e.row, set()).add(e.field)
    return out


# ------------------------------------------------------------------------------------------------- strict JSON


def served_json(requests) -> str:
    """What the scoring server writes for these requests: the served model's answer through MLflow's own encoder."""
    from mlflow.pyfunc.scoring_server import predictions_to_json

    from wattgpu.serving.pyfunc import BOTH, WattgpuModel

    model = WattgpuModel("power")
    model.predictor_, model.target = fixture_predictor(), BOTH
    buf = io.StringIO()
    predictions_to_json(model.predict(None, pd.DataFrame(requests)), buf)
    return buf.getvalue()


def test_a_partial_answer_is_strict_json_with_null_for_what_is_missing():
    answer = strict(served_json([BY_NAME, {**BY_NAME, "n_gpus": 0}]))["predictions"]
    assert answer[0]["power_w"] > 0 and answer[0]["error"] is None and answer[0]["power_w_lo"] is None  # abstains
    assert answer[1]["power_w"] is None and answer[1]["gpu"] is None and "n_gpus" in answer[1]["error"]


CELLS = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5), st.booleans())


@given(st.lists(st.fixed_dictionaries({"gpu": CELLS, "power_w": CELLS, "level": st.floats(0.5, 0.99)}), min_size=1,
                max_size=8))
def test_any_answer_frame_serves_as_strict_json(rows):
    from mlflow.pyfunc.scoring_server import predictions_to_json

    from wattgpu.serving.pyfunc import with_nulls

    frame = pd.DataFrame(rows)
    buf = io.StringIO()
    predictions_to_json(with_nulls(frame), buf)
    back = strict(buf.getvalue())["predictions"]
    for got, sent in zip(back, rows):
        for k, v in sent.items():
            missing = v is None or isinstance(v, float) and not math.isfinite(v)
            assert (got[k] is None) if missing else got[k] == v


@given(st.lists(st.fixed_dictionaries({"gpu": CELLS, "power_w": CELLS, "level": st.floats(0.5, 0.99),
                                       "overloaded": st.booleans(), "n": st.integers(-2**40, 2**40)}), min_size=1,
                max_size=8))
def test_the_served_app_writes_mlflows_answer_byte_for_byte(rows):
    """serving.app.predictions_to_json (the C encoder) writes what MLflow's scoring server writes (the Python one)."""
    from mlflow.pyfunc import scoring_server

    from wattgpu.serving import app
    from wattgpu.serving.pyfunc import with_nulls

    frame = with_nulls(pd.DataFrame(rows))
    ours, mlflows = io.StringIO(), io.StringIO()
    app.predictions_to_json(frame, ours)
    scoring_server.predictions_to_json(frame, mlflows)
    assert ours.getvalue() == mlflows.getvalue()
    strict(ours.getvalue())


@pytest.mark.parametrize("labels", [[0, 1, 2], ["gpu", 7, "level"], ["gpu", "gpu", "level"]])
def test_the_served_app_writes_mlflows_answer_whatever_the_column_labels(labels):
    """Number labels (written as JSON text keys) and a label given twice (pandas keeps the last) come out of
    serving.app.predictions_to_json as MLflow's scoring server writes them."""
    from mlflow.pyfunc import scoring_server

    from wattgpu.serving import app

    frame = pd.DataFrame([["A30", 3, 0.8], [None, -1, 0.5]], columns=labels)
    ours, mlflows = io.StringIO(), io.StringIO()
    app.predictions_to_json(frame, ours)
    scoring_server.predictions_to_json(frame, mlflows)
    assert ours.getvalue() == mlflows.getvalue()


# ------------------------------------------------------------------------------------------------- valid requests


def test_instances_rows_with_different_fields_reach_the_model_row_by_row():
    from wattgpu.serving.app import checked_json
    from wattgpu.serving.pyfunc import as_requests

    rows = [BY_NAME, {**GPU_SPEC, "llm": "dense8", "scenario": "offline", "gpu_name": "my card"}]
    checked, direct = checked_json(json.dumps({"instances": rows}).encode())
    body = json.loads(checked)
    assert body == {"inputs": rows}  # the same rows: MLflow's `instances` parser would make columns of them
    assert direct == rows  # and the rows the app's guard hands to the model itself
    batch = validate_batch(as_requests(body["inputs"]), GPUS, LLMS)
    assert not batch.errors and list(batch.rows["gpu"]) == ["FIXTURE GPU X1", "my card"]


LABELS = st.one_of(st.integers(-10**6, 10**9).map(str), st.floats(0, 1e6, allow_nan=False).map(repr),
                   st.sampled_from(["0.10", "007", "1e3", "12.50", "0x10", "true", "1_000"]))


@given(LABELS, st.sampled_from(["0.10", "0.11", "1.0", "0.14.1"]))
def test_a_csv_label_or_version_that_looks_like_a_number_stays_the_text_written(label, version):
    text = (f"gpu_name,gpu_tdp_w,gpu_memory_gb,gpu_memory_bandwidth_gb_s,gpu_fp16_tensor_tflops,gpu_release_year,"
            f"llm,scenario,engine_version\n{label},350,48,864,181,2023,dense8,offline,{version}\n")
    frame, _ = read_csv(text)
    assert frame.loc[0, "gpu_name"] == label and frame.loc[0, "engine_version"] == version
    batch = validate_batch(frame, GPUS, LLMS)
    assert not batch.errors, batch.errors
    assert batch.rows.loc[0, "gpu"] == label and batch.rows.loc[0, "engine_version"] == version


# ------------------------------------------------------------------------------------------------- never ignored


@pytest.mark.parametrize("body,field", [
    ({"dataframe_records": [BY_NAME], "params": {"levle": 0.9}}, "params.levle"),
    ({"dataframe_records": [BY_NAME], "params": {"level": 0.9}}, "params.level"),
    ({"dataframe_records": [BY_NAME], "level": 0.9}, "level"),
    ({"inputs": [BY_NAME], "dataframe_record": [BY_NAME]}, "dataframe_record"),
])
def test_params_and_other_body_keys_mlflow_would_drop_are_errors_naming_them(body, field):
    from wattgpu.serving.app import BodyProblem, checked_json

    with pytest.raises(BodyProblem) as exc:
        checked_json(json.dumps(body).encode())
    assert exc.value.field == field and f"field {field!r}" in exc.value.message
    assert checked_json(json.dumps({"dataframe_records": [BY_NAME], "params": {}}).encode())[1] == [BY_NAME]  # empty


TEXT_BESIDE_NAME = {  # field -> what the catalog entry says (test_predict's FIXTURE entries)
    "gpu_architecture": "Hopper", "gpu_vendor": "NVIDIA", "gpu_memory_type": "HBM3", "gpu_form_factor": "SXM",
    "llm_family": "llama", "llm_weight_precision": "bf16",
}
WORDS = st.text(st.characters(whitelist_categories=("L", "N")), min_size=1, max_size=12)


@given(st.sampled_from(sorted(TEXT_BESIDE_NAME)), WORDS, st.booleans())
def test_a_text_field_beside_a_catalog_name_must_agree_with_the_entry(field, other, same):
    entry = TEXT_BESIDE_NAME[field]
    value = f" {entry.upper()} " if same else other  # the entry's own value in another case and spacing agrees
    agrees = same or other.casefold() == entry.casefold()
    found = errors_of([{**BY_NAME, field: value}])
    assert found == ({} if agrees else {0: {field}}), found


@pytest.mark.parametrize("field,value,ok", [
    ("gpu_name", "x1", True), ("gpu_name", "FIXTURE gpu x1", True), ("gpu_name", "my card", False),
    ("llm_name", "dense8", True), ("llm_name", "fixture/moe-16b", False),
])
def test_a_label_beside_a_catalog_name_must_be_one_of_its_names(field, value, ok):
    assert errors_of([{**BY_NAME, field: value}]) == ({} if ok else {0: {field}})


def test_a_column_given_twice_is_an_error_naming_it():
    frame = pd.DataFrame([["x1", "dense8", "offline", "server_low"]], columns=["gpu", "llm", "scenario", "scenario"])
    with pytest.raises(RequestError) as exc:  # `dataframe_split` with a repeated column: the last would win
        validate_batch(frame, GPUS, LLMS)
    assert exc.value.field == "scenario" and "2 times" in str(exc.value)
    with pytest.raises(RequestError) as exc:  # a CSV header: pandas would rename the second to `scenario.1`
        read_csv("gpu,llm,scenario,scenario\nx1,dense8,offline,server_low\n")
    assert exc.value.field == "scenario"


# ------------------------------------------------------------------------------------------------- consistent configs


@given(st.integers(1, 128), st.integers(64, 16384), st.booleans())
def test_attention_heads_divide_the_hidden_size_unless_head_dim_is_given(heads, hidden, with_head_dim):
    req = {**BY_NAME, "llm": None, **LLM_CONFIG, "llm_hidden_size": hidden, "llm_num_attention_heads": heads,
           "llm_num_kv_heads": 1, **({"llm_head_dim": 128} if with_head_dim else {})}
    found = errors_of([{k: v for k, v in req.items() if v is not None}])
    assert found == ({} if with_head_dim or hidden % heads == 0 else {0: {"llm_num_attention_heads"}}), found
    config = {**LLAMA_CONFIG, "hidden_size": hidden, "num_attention_heads": heads, "num_key_value_heads": 1,
              **({"head_dim": 128} if with_head_dim else {})}
    if with_head_dim or hidden % heads == 0:
        architecture_from_config("org/x", config)
    else:
        with pytest.raises(CatalogError) as exc:
            architecture_from_config("org/x", config)
        assert exc.value.field == "num_attention_heads" and "head_dim" in str(exc.value)


def test_kv_heads_divide_the_attention_heads():
    req = {"gpu": "x1", **LLM_CONFIG, "llm_num_attention_heads": 28, "scenario": "offline"}
    assert errors_of([{**req, "llm_num_kv_heads": 3}, {**req, "llm_num_kv_heads": 4}]) == {0: {"llm_num_kv_heads"}}
    with pytest.raises(CatalogError) as exc:
        architecture_from_config("org/x", {**LLAMA_CONFIG, "num_key_value_heads": 5})
    assert exc.value.field == "num_key_value_heads"  # the key as config.json writes it


# ------------------------------------------------------------------------------------------------- names


@pytest.mark.parametrize("name", ["org/..", "../evil", "org/../x", "org/.", "./x", "org/a/b", "/abs", "org/",
                                  "org/my model", " org/model", "org/model ", "org\\x/y", "org/x--y", "org/-x",
                                  "org/x.", "org/" + "x" * 97])
def test_add_llm_refuses_names_that_are_no_hugging_face_repo_id(name, tmp_path, monkeypatch):
    from wattgpu.catalogs.edit import add_llm

    monkeypatch.setenv("WATTGPU_ROOT", str(tmp_path))
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA_CONFIG))
    with pytest.raises(WattgpuError, match="org/model"):
        add_llm(config, name, None, None)
    assert not (tmp_path / "data").exists()  # nothing written anywhere


@given(st.text(max_size=30))
def test_add_llm_writes_only_a_plain_file_in_the_config_folder(name):
    from wattgpu.catalogs.edit import HF_NAME_PART

    org, sep, model = name.partition("/")
    if sep and HF_NAME_PART.match(org) and HF_NAME_PART.match(model):
        file = f"{org}--{model}.json"
        assert "/" not in file and "\\" not in file and ".." not in file and file.strip() == file


@pytest.mark.parametrize("key,ok", [("ACME X1", True), ("ACME X1 (PCIe)", True), ("../x", False), ("a/b", False),
                                    (" ACME", False), ("ACME  X1", False), ("..", False), ("ACME\tX1", False)])
def test_add_gpu_refuses_path_like_or_badly_spaced_names(key, ok, tmp_path):
    from wattgpu.catalogs.edit import add_gpus

    catalog = tmp_path / "gpus.yaml"
    original = (ROOT / paths.GPU_CATALOG).read_text(encoding="utf-8")
    catalog.write_text(original, encoding="utf-8")
    entry = {"key": key, "display_name": "X", "vendor": "ACME", "architecture": "A", "release_year": 2024,
             "tdp_w": 300.0, "memory_gb": 48.0, "memory_type": "GDDR6", "memory_bus_bits": 384,
             "memory_bandwidth_gb_s": 864.0, "base_clock_mhz": None, "boost_clock_mhz": None, "sm_count": 100,
             "fp16_tensor_tflops": 180.0, "fp32_tflops": None, "form_factor": "PCIe",
             "source_urls": ["https://example.com/x"]}
    if ok:
        assert add_gpus([entry], "spec.yaml", catalog)[1][0].key == key
    else:
        with pytest.raises(WattgpuError, match="key"):
            add_gpus([entry], "spec.yaml", catalog)
        assert catalog.read_text(encoding="utf-8") == original


# ------------------------------------------------------------------------------------------------- who is blamed


FORMS = ("dataframe_records", "dataframe_split", "inputs", "instances", "inputs_columns")


def body_with(form: str, rows: list[dict]) -> str:
    if form == "dataframe_split":
        cols = list(dict.fromkeys(k for r in rows for k in r))
        return json.dumps({form: {"columns": cols, "data": [[r.get(c) for c in cols] for r in rows]}})
    if form == "inputs_columns":
        cols = list(dict.fromkeys(k for r in rows for k in r))
        return json.dumps({"inputs": {c: [r.get(c) for r in rows] for c in cols}})
    return json.dumps({form: rows})


@given(st.sampled_from(FORMS), st.sampled_from(sorted(k for k in BOUNDS)), st.integers(310, 5000), st.booleans(),
       st.integers(0, 3))
def test_a_huge_whole_number_is_refused_naming_its_field_and_row(form, field, digits, negative, row):
    from wattgpu.serving.app import BodyProblem, checked_json

    rows = [dict(BY_NAME) for _ in range(4)]
    rows[row][field] = "HUGE"
    body = body_with(form, rows).replace('"HUGE"', ("-" if negative else "") + "9" * digits)
    with pytest.raises(BodyProblem) as exc:
        checked_json(body.encode())
    assert (exc.value.field, exc.value.row) == (field, row)
    assert f"row {row}, field {field!r}" in exc.value.message and f"{digits:,}-digit" in exc.value.message


@given(st.lists(st.tuples(st.integers(0, 700), st.sampled_from([b",", b" ", b".", b"e", b"-", b"\xd9\xa3", b"a"])),
                max_size=6))
def test_a_long_number_is_found_exactly_where_a_run_of_that_many_digits_is(runs):
    """has_long_number (translate and a substring search) against the regular expression it replaced: a run of
    LONG_DIGITS ASCII digits or more, wherever it sits (a non-ASCII digit, as Arabic-Indic three, is no digit)."""
    import re

    from wattgpu.serving.app import LONG_DIGITS, has_long_number

    body = b"".join(b"7" * n + sep for n, sep in runs)
    assert has_long_number(body) == bool(re.search(rb"[0-9]{%d}" % LONG_DIGITS, body))


def test_the_server_starts_one_worker_per_usable_cpu_and_refuses_none():
    """By default one worker per CPU the process may run on (its affinity, not the machine's count); `--workers 0` is
    refused before any model is loaded."""
    import subprocess
    import sys

    probe = ("import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
             "from wattgpu.serving.app import default_workers; print(default_workers())")
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True).stdout.strip() == "1"
    refused = subprocess.run([sys.executable, "-m", "wattgpu.serving.app", "--workers", "0"], capture_output=True,
                             text=True, timeout=60, check=False)
    assert refused.returncode == 2 and "--workers must be at least 1, got 0" in refused.stderr


WORD = st.text(st.characters(whitelist_categories=("L",)), min_size=1, max_size=8).filter(
    lambda w: w.strip().lower() not in ("nan", "na", "null", "none", "inf", "infinity", "n", "nat"))


@given(st.lists(st.one_of(st.integers(1, 10_000).map(str), WORD), min_size=1, max_size=12))
def test_a_text_cell_in_a_number_column_of_a_csv_blames_its_row_only(cells):
    text = "gpu,llm,scenario,prompt_tokens\n" + "".join(f"x1,dense8,offline,{c}\n" for c in cells)
    frame, _ = read_csv(text)
    batch = validate_batch(frame, GPUS, LLMS)
    words = [i for i, c in enumerate(cells) if not c.isdigit()]
    assert batch.rejected == words and {e.field for e in batch.errors} <= {"prompt_tokens"}
    assert list(batch.rows["prompt_tokens_mean"]) == [float(c) for c in cells if c.isdigit()]


def test_an_moe_with_more_experts_per_token_than_experts_names_the_config_key():
    config = {**LLAMA_CONFIG, "model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 9}
    with pytest.raises(CatalogError) as exc:
        architecture_from_config("org/moe", config)
    assert exc.value.field == "num_experts_per_tok" and "num_local_experts 8" in str(exc.value)
    with pytest.raises(CatalogError) as exc:
        architecture_from_config("org/x", {**LLAMA_CONFIG, "num_hidden_layers": 0})
    assert exc.value.field == "num_hidden_layers"  # every range error: the key as written, not num_layers


def test_a_spec_yaml_error_names_the_key_the_file_writes(tmp_path):
    from wattgpu.planning.resolve import read_gpu_spec_file

    spec = {"tdp_w": 350, "memory_gb": 48, "memory_bandwidth_gb_s": 864, "fp16_tensor_tflops": 181,
            "release_year": 2023}
    for change, field in (({"tdp_w": 5}, "tdp_w"), ({"release_year": "soon"}, "release_year"),
                          ({"base_clock_mhz": 2000, "boost_clock_mhz": 1000}, "base_clock_mhz")):
        path = tmp_path / "gpu.yaml"
        path.write_text(json.dumps({**spec, **change}))  # JSON is YAML
        with pytest.raises(WattgpuError) as exc:
            read_gpu_spec_file(path)
        assert f"field {field!r}" in str(exc.value) and "gpu_" not in str(exc.value), exc.value
    assert [e.field for e in spec_problems("gpu", {**spec, "boost_clock_mhz": 1000, "base_clock_mhz": 2000})] == [
        "base_clock_mhz"]


# ------------------------------------------------------------------------------------------------- rough edges


def test_one_request_at_several_levels_names_each_error_once():
    variants = [{**BY_NAME, "llm": "dense8", "expert_parallel": 2, "n_gpus": 2, "level": lv} for lv in (0.8, 0.9, 0.95)]
    with pytest.raises(BatchRequestError) as exc:
        validate_one(variants, GPUS, LLMS)
    assert str(exc.value).count("expert_parallel") == 2 and "row" not in str(exc.value)  # field name + its hint
    assert exc.value.row is None and len(exc.value.errors) == 1


def test_an_error_on_many_rows_is_said_once_with_its_rows_and_each_row_keeps_its_own():
    requests = [{**BY_NAME, "prompt_token": 5} for _ in range(30)] + [{**BY_NAME, "n_gpus": 0}] \
        + [{**BY_NAME, "prompt_token": 5}, {**BY_NAME, "prompt_token": 5}]
    with pytest.raises(BatchRequestError) as exc:
        validate(requests, GPUS, LLMS)
    message = str(exc.value)
    assert message.count("did you mean 'prompt_tokens'") == 1 and "(also rows 1-29, 31-32)" in message
    assert "row 30, field 'n_gpus': 0 is outside the allowed range" in message
    assert (exc.value.row, exc.value.field) == (0, "prompt_token") and message.startswith("row 0, field 'prompt_token'")
    assert [e.row for e in exc.value.errors] == list(range(33)) and exc.value.rejected == list(range(33))


@pytest.mark.parametrize("name, field", [("gpus_per_replica", "n_gpus"), ("gpus-per-replica", "n_gpus"),
                                         ("tensor_parallel", "n_gpus"), ("rate", "request_rate_per_s"),
                                         ("max_num_seqs", "concurrency"), ("batch_size", "concurrency"),
                                         ("tensor_paralel", "n_gpus"), ("Tensor-Parallel", "n_gpus"),
                                         ("max_num_seq", "concurrency"), ("tensor_parallel_size", "n_gpus"),
                                         ("tp", "n_gpus"), ("kv_cache_dtype", "kv_precision"),
                                         ("input_len", "prompt_tokens"), ("dtype", "precision"),
                                         ("enable_expert_parallel", "expert_parallel")])
def test_a_flag_or_engine_setting_name_is_pointed_to_the_field_that_says_it(name, field):
    """Words no string distance links (difflib offers nothing or a wrong field, e.g. expert_parallel for
    tensor_parallel; pipeline_parallel for a misspelt tensor_paralel): the command line's flag names and the engines'
    settings are pointed to their field, misspelt too."""
    with pytest.raises(RequestError) as exc:
        validate([{**BY_NAME, name: 8}], GPUS, LLMS)
    assert exc.value.field == name and f"unknown field; did you mean {field!r} (" in str(exc.value)
    assert "allowed:" not in str(exc.value)


@st.composite
def csv_with_blank_lines(draw):
    """A CSV whose rows may be preceded by blank or whitespace-only lines and hold a quoted field that spans lines."""
    lines, rows = ["gpu,llm,note"], []
    for i in range(draw(st.integers(1, 8))):
        lines += [draw(st.sampled_from(["", "   ", "\t"])) for _ in range(draw(st.integers(0, 2)))]
        note = '"two\nlines"' if draw(st.booleans()) else "plain"
        rows.append("\n".join(lines).count("\n") + 2)  # the 1-based line where row i begins
        lines.append(f"row{i},dense8,{note}")
    return "\n".join(lines) + "\n", rows


@given(csv_with_blank_lines())
def test_a_rows_line_is_the_line_of_the_file_it_begins_on(case):
    text, expected = case
    frame = pd.read_csv(io.StringIO(text))
    assert row_lines(text) == expected and len(frame) == len(expected)
    assert all(text.splitlines()[line - 1].startswith(f"row{i},") for i, line in enumerate(expected))


def test_the_output_path_is_checked_before_anything_is_predicted(tmp_path):
    from wattgpu.planning.service import check_writable, predict_csv

    src = tmp_path / "in.csv"
    src.write_text("gpu,llm,scenario\nx1,dense8,offline\n")
    with pytest.raises(WattgpuError, match="--output"):  # models=None: it never got as far as predicting
        predict_csv(None, src, src / "preds.csv")
    check_writable(tmp_path / "new" / "preds.csv", "--output")
    assert not (tmp_path / "new" / "preds.csv").exists()  # checking leaves no file behind


@pytest.mark.parametrize("w,noted", [
    ({"concurrency": 8}, ["prompt_tokens", "output_tokens"]),
    ({"request_rate_per_s": 0.5, "scenario": "server"}, ["prompt_tokens", "output_tokens"]),
    ({"concurrency": 8, "prompt_tokens": 900}, ["output_tokens"]),
    ({"concurrency": 8, "prompt_tokens": 900, "output_tokens": 300}, []),
    ({"scenario": "server_high"}, []),  # a preset is Watt Counts' workload, its lengths included
    ({"concurrency": float("nan"), "scenario": "offline"}, []),  # a CSV's empty cell: absent
])
def test_the_defaults_that_shape_a_load_of_ones_own_are_said_in_the_answer(w, noted):
    notes = workload.default_notes(w)
    assert [n.split()[0] for n in notes] == noted
    assert all(f"{workload.DEFAULTS[k]:g} by default" in n for k, n in zip(noted, notes))


def test_the_nan_in_a_row_means_absent_in_the_defaults_too():
    assert workload.default_notes({"concurrency": np.float64(4.0), "prompt_tokens": np.nan})[0].startswith(
        "prompt_tokens 14")
