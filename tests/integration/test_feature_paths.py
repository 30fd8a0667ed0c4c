"""Serving builds features the way training does, bit for bit, on the pipeline's real training table: one row at a
time (a one-row request) as in one batch (training), and the Poisson fixed point's shortcut (only the features that
depend on the requests in flight recomputed, features.with_concurrency) as engineering anew."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from wattgpu import paths
from wattgpu.config import load_params
from wattgpu.features import CONCURRENCY_FEATURES, attach_specs, engineer, with_concurrency
from wattgpu.io import read_table

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def table(ingested):
    from wattgpu.stages.register import catalogs

    cats = catalogs(ingested)
    rows = attach_specs(read_table(paths.resolve(paths.MEASUREMENTS, ingested)), cats.gpus, cats.llms,
                        cats.idle_power_w)
    return rows, load_params(ingested / "params.yaml").evaluate.roofline_offline_batch


def assert_same_bits(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert list(got.columns) == list(want.columns)
    for col in want.columns:
        a, b = got[col], want[col]
        if a.dtype.kind in "biuf" and b.dtype.kind in "biuf":
            x, y = a.to_numpy(dtype=float), b.to_numpy(dtype=float)
            same = (x.view(np.int64) == y.view(np.int64)) | (np.isnan(x) & np.isnan(y))
            assert same.all(), f"{col}: {int((~same).sum())} rows differ"
        else:
            assert a.reset_index(drop=True).equals(b.reset_index(drop=True)), col


def test_one_row_at_a_time_gives_the_training_features(table):
    rows, offline_batch = table
    whole = engineer(rows, offline_batch=offline_batch)
    # every source, scenario and GPU, a few rows each
    picked = rows.groupby(["source", "scenario", "gpu"], dropna=False).head(2).index
    assert len(picked) >= 20 and rows.loc[picked, "source"].nunique() == rows["source"].nunique()
    one_by_one = pd.concat([engineer(rows.loc[[i]], offline_batch=offline_batch) for i in picked])
    assert_same_bits(one_by_one, whole.loc[picked])


def test_changing_the_requests_in_flight_equals_engineering_anew(table):
    rows, offline_batch = table
    whole = engineer(rows, offline_batch=offline_batch)
    start = engineer(rows.assign(concurrency=1.0), offline_batch=offline_batch)
    assert not np.array_equal(start["log_batch"].to_numpy(), whole["log_batch"].to_numpy())
    assert_same_bits(with_concurrency(start, rows["concurrency"]), whole)
    others = [c for c in whole.columns if c not in (*CONCURRENCY_FEATURES, "concurrency")]
    assert_same_bits(start[others], whole[others])  # nothing else depends on it
