"""Real servers on 127.0.0.1 answering the registered champions: `mlflow models serve` for the power model (good
requests get 200 and W, bad ones a clean 400 that names the field), and the endpoint `make serve` starts
(serving.app: power and ITL in one answer, equal to the in-process Predictor's; malformed CSV, Parquet and JSON
bodies get a one-line 4xx without a stack trace). Servers are stopped by their process group in every case."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from wattgpu import tracking
from wattgpu.config import Registry
from harness import Server

pytestmark = pytest.mark.slow

H100 = {"gpu": "NVIDIA H100 NVL", "llm": "meta-llama/Llama-3.1-8B-Instruct"}
SPEC = {"gpu_tdp_w": 350, "gpu_memory_gb": 48, "gpu_memory_bandwidth_gb_s": 864, "gpu_fp16_tensor_tflops": 181,
        "gpu_release_year": 2023, "llm": "Qwen/Qwen2.5-7B-Instruct"}
BAD = {  # name: (body, the field the answer must name)
    "unknown GPU without specs": ({**H100, "gpu": "RTX 9999", "scenario": "offline"}, "gpu"),
    "no GPU and no specs": ({"llm": H100["llm"], "scenario": "offline"}, "gpu"),
    "no scenario": (H100, "scenario"),
    "extra field": ({**H100, "scenario": "offline", "prompt_token": 100}, "prompt_token"),
    "wrong type": ({**SPEC, "gpu_tdp_w": "abc", "scenario": "offline"}, "gpu_tdp_w"),
    "NaN": ({**SPEC, "gpu_tdp_w": math.nan, "scenario": "offline"}, "gpu_tdp_w"),
    "negative": ({**H100, "scenario": "server_low", "prompt_tokens": -5}, "prompt_tokens"),
    "absurd": ({**SPEC, "gpu_tdp_w": 1e9, "scenario": "offline"}, "gpu_tdp_w"),
    "unknown scenario": ({**H100, "scenario": "batch"}, "scenario"),
    "interval level out of range": ({**H100, "scenario": "offline", "level": 1.5}, "level"),
}


@pytest.fixture(scope="module")
def published(ingested, tmp_path_factory):
    """Both targets' champions published to a fresh MLflow store (its URI), the way the register stage does."""
    from wattgpu.config import Regime, load_params
    from wattgpu.evaluation.runner import target_rows
    from wattgpu.registry import Candidate, Configuration, gate
    from wattgpu.search.nested import inner_folds
    from wattgpu.stages.register import catalogs, code, publish, training_table

    tmp = tmp_path_factory.mktemp("serving")
    mp = pytest.MonkeyPatch()
    mp.setenv("WATTGPU_MLRUNS", str(tmp / "mlruns"))
    try:
        tracking.setup("wattgpu-test")
        params = load_params(ingested / "params.yaml")
        table = training_table(ingested, None, False, params.evaluate, catalogs(ingested))
        # The kind of model the search registers: the workload model on every source (src/wattgpu/modeling), the
        # ITL model first: the power model is served with it (it solves a Poisson load's requests in flight).
        hp = {"linear_scope": "arrivals", "alpha": 100.0, "n_estimators": 40, "learning_rate": 0.1, "num_leaves": 7,
              "min_child_samples": 5, "reg_lambda": 0.01, "colsample_bytree": 1.0}
        served_itl = None
        for target in ("itl", "power"):
            rows = target_rows(table, target).groupby(["source", "gpu"]).head(40).reset_index(drop=True)
            config = Configuration(target, "workload", "workload", hp,
                                   {"offline_batch": 256.0, "load_rho": dict(params.evaluate.load_rho)}, None, False)
            cand = Candidate("test", config, "logo", 5.0, 15.0)  # FIXTURE nested figures: recorded, never compared
            folds = inner_folds(rows, Regime(kind="logo"), 3, seed=0)  # calibration: GPU groups held out
            publish(target, rows, cand, Registry(), tmp / "models" / target, catalogs(ingested),
                    {"offline_batch": 256.0}, gate(target, rows, cand, params, code(), served_itl), folds)
            served_itl = config  # the power model is scored with the ITL model it is served beside
        yield tracking.tracking_uri()
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def server(published):
    with Server("models:/wattgpu-power@champion", published) as srv:
        yield srv


@pytest.fixture(scope="module")
def champions(published):
    with Server.champions(published) as srv:
        yield srv


def post(server, body):
    return server.post({"dataframe_records": body} if isinstance(body, list) else body)


def test_a_good_request_gets_200_and_a_plausible_power(server):
    r = post(server, [{**H100, "scenario": "offline"}, {**SPEC, "scenario": "server_high"}])
    assert r.status_code == 200, r.text
    preds = r.json()["predictions"]
    assert [p["gpu"] for p in preds] == ["NVIDIA H100 NVL", "custom GPU"]
    assert 40 <= preds[0]["power_w"] <= 400 * 1.3 and 35 <= preds[1]["power_w"] <= 350 * 1.3
    # offline: the requests an offline run holds; Poisson: solved from the rate with the companion ITL model
    assert preds[0]["concurrency"] >= 1 and 0 < preds[1]["concurrency"] < preds[0]["concurrency"]


def test_the_answer_carries_its_interval_and_the_schema_documents_it(server):
    import mlflow

    r = post(server, [{**H100, "scenario": "offline"}, {**H100, "scenario": "offline", "level": 0.95}])
    assert r.status_code == 200, r.text
    at80, at95 = r.json()["predictions"]
    assert at80["level"] == 0.8 and at95["level"] == 0.95 and at80["interval"] == ""
    assert 0 < at80["power_w_lo"] < at80["power_w"] < at80["power_w_hi"]
    # wider at 95 %: below, and above up to the GPU's TDP, where a band is clipped (targets.Target.limits)
    assert at95["power_w_lo"] < at80["power_w_lo"] and at95["power_w_hi"] >= at80["power_w_hi"]
    info = mlflow.models.get_model_info("models:/wattgpu-power@champion")
    outputs = [c.name for c in info.signature.outputs.inputs]
    assert {"power_w", "power_w_lo", "power_w_hi", "level", "interval"} <= set(outputs)
    assert "power_w_lo" in info.metadata["response_fields"] and "level" in info.metadata["request_fields"]


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_request_gets_a_clean_400_naming_the_field(server, case):
    body, field = BAD[case]
    r = post(server, [body])
    assert r.status_code == 400, r.text
    answer = r.json()
    assert answer["field"] == field and f"field {field!r}" in answer["detail"]
    assert "Traceback" not in r.text and "stack_trace" not in answer


@pytest.mark.parametrize("raw", ["", "hello", json.dumps({}), json.dumps({"dataframe_records": []}),
                                 json.dumps({"dataframe_records": [{}]})])
def test_empty_or_malformed_bodies_get_a_clean_400(server, raw):
    r = server.post_raw(raw)
    assert r.status_code == 400 and "Traceback" not in r.text and "stack_trace" not in r.json()


def test_the_served_champions_answer_power_and_itl_as_the_predictor_does(champions, published):
    from wattgpu.serving.app import champion_uris, load_champions

    requests = [{**H100, "scenario": "offline"}, {**H100, "scenario": "server_high", "level": 0.9},
                {**SPEC, "scenario": "server_low"}, {**H100, "concurrency": 8, "n_gpus": 2}]
    r = post(champions, requests)
    assert r.status_code == 200, r.text
    served = pd.DataFrame(r.json()["predictions"])
    expected = load_champions(champion_uris()).unwrap_python_model().predictor_.predict(requests)
    for column in ("power_w", "power_w_lo", "power_w_hi", "itl_s", "itl_s_lo", "itl_s_hi", "concurrency", "level"):
        np.testing.assert_allclose(served[column].to_numpy(float), expected[column].to_numpy(float), rtol=1e-9,
                                   err_msg=column)
    assert served["gpu"].tolist() == expected["gpu"].tolist()
    assert (served["itl_s"] > 0).all() and (served["power_w"] > 0).all()


def test_the_served_champions_take_csv_and_parquet(champions):
    frame = pd.DataFrame([{**H100, "scenario": "offline"}, {**H100, "scenario": "server_low"}])
    by_json = post(champions, frame.to_dict("records")).json()["predictions"]
    for body, kind in ((frame.to_csv(index=False), "text/csv"), (frame.to_parquet(), PARQUET)):
        r = champions.post_raw(body, kind)
        assert r.status_code == 200, r.text
        assert [p["power_w"] for p in r.json()["predictions"]] == pytest.approx([p["power_w"] for p in by_json])


def test_rows_of_objects_answered_directly_are_mlflows_answer(champions):
    """Rows of objects go from the app's guard to the model (serving.app.Guard.answer), rows by column through
    MLflow's own scoring app: the same rows, a bad one among them, get the same bytes either way; a request with no
    good row gets a one-line 400 naming the field and row, without MLflow's echo of the input frame."""
    rows = [{**H100, "scenario": "offline", "level": None}, {**H100, "scenario": "server_low", "level": 0.9},
            {**H100, "scenario": "offlin"}, {**SPEC, "scenario": "server_high", "output_tokens": 300}]
    frame = pd.DataFrame(rows)
    split = {"dataframe_split": {"columns": list(frame.columns), "data": frame.astype(object).where(
        frame.notna(), None).to_numpy().tolist()}}
    by_mlflow = champions.post_raw(json.dumps(split))
    assert by_mlflow.status_code == 200, by_mlflow.text
    for fmt in ("dataframe_records", "inputs", "instances"):
        r = champions.post_raw(json.dumps({fmt: rows}))
        assert r.status_code == 200, r.text
        assert r.content == by_mlflow.content, fmt
    # in a frame's records, NaN is a cell not given (README), as MLflow's frame had it
    nan_level = json.dumps({"dataframe_records": [{**row, "level": math.nan} if i == 0 else row
                                                  for i, row in enumerate(rows)]})
    assert champions.post_raw(nan_level).content == by_mlflow.content
    assert json.loads(by_mlflow.content)["predictions"][2]["error"].startswith("field 'scenario'")
    r = champions.post_raw(json.dumps({"dataframe_records": [{**H100, "scenario": "offlin"}]}))
    answer = r.json()
    assert r.status_code == 400 and answer["field"] == "scenario" and answer["row"] == 0
    assert answer["message"].startswith("row 0, field 'scenario'") and "\n" not in answer["message"]


PARQUET = "application/vnd.apache.parquet"
MALFORMED = {  # name: (body, content type, what the one-line message must say)
    "CSV with an open quote": ('gpu,llm\n"NVIDIA H100 NVL,x\n', "text/csv", "CSV"),
    "CSV with ragged rows": ("gpu,llm,scenario\na,b,c\nd,e,f,g,h\n", "text/csv", "CSV"),
    "CSV not UTF-8": (b"gpu,llm\n\xff\xfe,\x80\n", "text/csv", "UTF-8"),
    "Parquet that is not": (b"PAR1 this is not a parquet file", PARQUET, "Parquet"),
    "truncated Parquet": (None, PARQUET, "Parquet"),
    "JSON cut short": ('{"dataframe_records": [{"gpu": "NVIDIA', "application/json", "not valid JSON"),
    "JSON with a trailing comma": ('{"dataframe_records": [{"gpu": "x"},]}', "application/json", "not valid JSON"),
    "JSON duplicate key": ('{"dataframe_records": [{"gpu": "NVIDIA H100 NVL", "gpu": "RTX 4090", "llm": "x", '
                           '"scenario": "offline"}]}', "application/json", "duplicate JSON key 'gpu'"),
    "JSON not UTF-8": (b'{"dataframe_records": [{"gpu": "\xff"}]}', "application/json", "UTF-8"),
    "JSON nested too deep": ("[" * 100_000 + "]" * 100_000, "application/json", "JSON"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_bodies_get_a_one_line_4xx_without_a_stack_trace(champions, case):
    body, kind, says = MALFORMED[case]
    if body is None:
        body = pd.DataFrame([{**H100, "scenario": "offline"}]).to_parquet()[:-20]
    r = champions.post_raw(body, kind)
    assert 400 <= r.status_code < 500, r.text
    answer = r.json()
    assert "stack_trace" not in answer and "Traceback" not in r.text
    assert says in answer["message"] and "\n" not in answer["message"] and len(answer["message"]) <= 500


def test_a_body_over_the_cap_is_refused_before_it_is_read(champions):
    from wattgpu.serving.app import MAX_BODY_BYTES

    r = champions.post_raw(b" " * (MAX_BODY_BYTES + 1))
    assert r.status_code == 413 and "split the batch" in r.json()["message"]
