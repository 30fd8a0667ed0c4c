"""wattgpu.arrays: per-element work done once per distinct value, with the same answers as doing it per element."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from wattgpu.arrays import floats, per_distinct, text

_CELLS = st.sampled_from(["vllm", "sglang", "0.14.1", "", None, float("nan"), 1.0, 2.5])


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 30).flatmap(lambda n: st.tuples(st.lists(_CELLS, min_size=n, max_size=n),
                                                      st.lists(_CELLS, min_size=n, max_size=n))))
def test_per_distinct_answers_each_element_as_a_call_per_element_would_calling_once_per_distinct_pair(columns):
    a, b = (np.array(c, dtype=object) for c in columns)
    calls = []

    def fn(x, y):
        calls.append((text(x), text(y)))
        return (text(x), text(y), len(calls))

    out = per_distinct(fn, a, b, dtype=object)
    assert out.shape == (len(a),)
    assert [o[:2] for o in out] == [(text(x), text(y)) for x, y in zip(a, b)]
    # one call per distinct pair of cells, as a dict tells them apart (a NaN matches only itself)
    assert len(calls) == len(dict.fromkeys(zip(a.tolist(), b.tolist()))) <= len(a)


def test_per_distinct_keeps_a_float_shape_and_tuples_whole():
    assert per_distinct(lambda m: m * 2, np.array([1.0, 1.0, 3.0])).tolist() == [2.0, 2.0, 6.0]
    four = per_distinct(lambda e: (e, e, 1.0, 2.0), np.array(list("abcd"), dtype=object), dtype=object)
    assert four.shape == (4,) and four[3] == ("d", "d", 1.0, 2.0)  # n tuples of n values: not a matrix
    assert per_distinct(lambda e: e, np.array([], dtype=object)).shape == (0,)


def test_text_and_floats():
    assert [text(v) for v in (None, float("nan"), "", "x", 0.5)] == ["", "", "", "x", "0.5"]
    np.testing.assert_array_equal(floats(pd.Series([1, 2], dtype="int64")), [1.0, 2.0])
    np.testing.assert_array_equal(floats(pd.Series([True, False])), [1.0, 0.0])
    np.testing.assert_array_equal(floats(pd.Series(["1.5", "x", None], dtype=object)), [1.5, np.nan, np.nan])
