"""Properties of the request validator (wattgpu.request), over generated requests on the FIXTURE catalogs of
test_predict: inside the ranges of wattgpu.fields a request validates; outside, it is rejected naming that field;
a batch answers its good rows and names its bad ones; nothing but the project's error ever escapes."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.code.test_predict import GPUS, LLMS
from wattgpu import fields
from wattgpu.request import KNOWN_FIELDS, RequestError, validate, validate_batch
from wattgpu.workload import PRECISION_BYTES, PRESETS

settings.register_profile("wattgpu", max_examples=60, deadline=None)
settings.load_profile("wattgpu")

WORKLOAD_NUMBERS = ("prompt_tokens", "output_tokens", "concurrency", "request_rate_per_s", "level")
BOUNDS = {**fields.WORKLOAD, "level": fields.INTERVAL_LEVEL}


def inside(b: fields.Bounds):
    if b.integer:
        return st.integers(int(b.lo), int(b.hi)).map(float)
    return st.floats(b.lo, b.hi, allow_nan=False, allow_infinity=False)


def outside(b: fields.Bounds):
    below = st.floats(-1e12, b.lo, exclude_max=True, allow_nan=False) if b.lo > -1e12 else st.nothing()
    return st.one_of(below, st.floats(b.hi, 1e15, exclude_min=True, allow_nan=False),
                     st.sampled_from([math.nan, math.inf, -math.inf]))


@st.composite
def good_request(draw) -> dict:
    """A request that fields.py and the rules between fields allow (catalog names or a GPU by its spec)."""
    req = {"llm": draw(st.sampled_from(["dense8", "fixture/moe-16b"]))}
    if draw(st.booleans()):
        req["gpu"] = "x1"
    else:
        req.update({f"gpu_{k}": draw(inside(fields.GPU_SPEC[k])) for k in fields.GPU_SPEC_REQUIRED})
    load = draw(st.sampled_from(["concurrency", "preset", "server", "rate"]))
    if load == "concurrency":
        req["concurrency"] = draw(inside(fields.WORKLOAD["concurrency"]))
    elif load == "preset":
        req["scenario"] = draw(st.sampled_from(PRESETS))
    else:
        req["request_rate_per_s"] = draw(inside(fields.WORKLOAD["request_rate_per_s"]))
        if load == "server":
            req["scenario"] = "server"
    for k in ("prompt_tokens", "output_tokens", "level"):
        if draw(st.booleans()):
            req[k] = draw(inside(BOUNDS[k]))
    pp = draw(st.sampled_from([1, 2, 4]))
    if draw(st.booleans()):  # vLLM (the default engine): tensor parallel splits the fixtures' 32 heads and 8 KV heads
        tp = draw(st.sampled_from([t for t in (1, 2, 4, 8, 16) if t * pp <= 64]))
    else:  # an engine held to no head rule (workload.HEAD_SHARDED_ENGINES): any tensor-parallel size
        req["engine"], tp = "deepspeed", draw(st.integers(1, 64 // pp))
    req.update(pipeline_parallel=pp, n_gpus=pp * tp)
    if draw(st.booleans()):
        req["precision"] = draw(st.sampled_from(list(PRECISION_BYTES))).upper()
    return req


@given(good_request())
def test_a_request_inside_the_ranges_validates(req):
    row = validate([req], GPUS, LLMS).iloc[0]
    assert row["n_gpus"] == req["n_gpus"] and row["tensor_parallel"] * row["pipeline_parallel"] == req["n_gpus"]
    assert row["level"] == req.get("level", fields.DEFAULT_INTERVAL_LEVEL)


@given(good_request(), st.sampled_from(WORKLOAD_NUMBERS + ("n_gpus", "pipeline_parallel")), st.data())
def test_a_number_outside_its_range_is_rejected_naming_that_field(req, field, data):
    req = {**req, field: data.draw(outside(BOUNDS[field]))}
    batch = validate_batch([req], GPUS, LLMS)
    assert len(batch.rows) == 0 and batch.rejected == [0]
    assert field in {e.field for e in batch.errors}, batch.errors


@given(st.lists(st.tuples(good_request(), st.booleans()), min_size=1, max_size=25))
def test_a_batch_answers_its_good_rows_and_names_its_bad_ones(rows):
    requests = [{**r, "prompt_tokens": -1.0} if bad else r for r, bad in rows]
    bad_rows = [i for i, (_, bad) in enumerate(rows) if bad]
    for form in (requests, pd.DataFrame(requests)):  # a frame: NaN cells are absent
        batch = validate_batch(form, GPUS, LLMS)
        assert len(batch.accepted) + len(batch.rejected) == len(requests)
        assert batch.rejected == bad_rows and list(batch.accepted) == [i for i in range(len(rows)) if i not in bad_rows]
        assert all(e.field == "prompt_tokens" and "[1, 1e+06]" in e.problem for e in batch.errors)
        texts = batch.error_texts()
        assert texts.notna().tolist() == [bad for _, bad in rows]


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
                       lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids, max_size=3),
                       max_leaves=5)
FIELD_NAMES = st.sampled_from(sorted(KNOWN_FIELDS)) | st.text(max_size=15)


@given(st.lists(st.dictionaries(FIELD_NAMES, JSONISH, max_size=8) | JSONISH, min_size=0, max_size=6))
def test_only_the_projects_error_ever_escapes(requests):
    try:
        batch = validate_batch(requests, GPUS, LLMS)
    except RequestError as exc:
        assert exc.field == "requests" and not requests
        return
    assert len(batch.accepted) + len(batch.rejected) == batch.n == len(requests)
    assert all(isinstance(e.row, int) and isinstance(e.field, str) and e.problem for e in batch.errors)
    assert np.isfinite(batch.rows.select_dtypes("number").drop(columns=["concurrency", "request_rate_per_s"],
                                                                errors="ignore").fillna(0).to_numpy(float)).all()
