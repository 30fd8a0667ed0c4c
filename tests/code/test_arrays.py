"""wattgpu.arrays: per-element work done once per distinct value, with the same answers as doing it per element."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from wattgpu.arrays import float_columns, float_matrix, floats, frame, per_distinct, text

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


_KINDS = {  # an array kind -> cells of it
    "float": st.floats(allow_nan=True, allow_infinity=True),
    "bool": st.booleans(),
    "int": st.integers(-2**40, 2**40),
    "object": st.one_of(st.none(), st.text(max_size=3), st.floats(allow_nan=True), st.integers(0, 9)),
    "str": st.text(max_size=3),  # numpy text: not stacked, handed to pandas as it is
}
_DTYPES = {"float": float, "bool": bool, "int": np.int64, "object": object, "str": str}


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 4).flatmap(lambda n: st.lists(
    st.sampled_from(sorted(_KINDS)).flatmap(lambda k: st.lists(_KINDS[k], min_size=n, max_size=n).map(
        lambda cells, k=k: np.array(cells, dtype=_DTYPES[k]))), min_size=1, max_size=8)),
    st.randoms(use_true_random=False))
def test_frame_is_the_frame_pandas_builds_from_the_dict(arrays, rnd):
    columns = {f"c{i}": a for i, a in enumerate(arrays)}
    order = list(columns)
    rnd.shuffle(order)
    index = pd.RangeIndex(10, 10 + len(arrays[0]))
    pd.testing.assert_frame_equal(frame(columns, order, index=index),
                                  pd.DataFrame(columns, columns=order, index=index), check_exact=True)
    pd.testing.assert_frame_equal(frame(columns), pd.DataFrame(columns), check_exact=True)


def test_frame_stacks_one_block_per_dtype():
    columns = {"a": np.array([1.0]), "b": np.array(["x"], dtype=object), "c": np.array([2.0]), "d": np.array([True])}
    built = frame(columns, ["d", "c", "b", "a"])
    assert list(built.columns) == ["d", "c", "b", "a"] and built["c"].iloc[0] == 2.0
    assert built._mgr.nblocks == 3  # floats together, not a block per column as a dict makes


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 4).flatmap(lambda n: st.lists(
    st.sampled_from(sorted(_KINDS)).flatmap(lambda k: st.lists(_KINDS[k], min_size=n, max_size=n).map(
        lambda cells, k=k: np.array(cells, dtype=_DTYPES[k]))), min_size=1, max_size=8)))
def test_columns_read_in_one_pass_are_the_columns_read_one_by_one(arrays):
    rows = pd.DataFrame({f"c{i}": a for i, a in enumerate(arrays)})
    numeric = [c for c in rows if rows[c].dtype.kind in "fiub"]
    read = float_columns(rows)
    assert list(read) == numeric  # text and object columns are left to the caller
    for c in numeric:
        np.testing.assert_array_equal(read[c], rows[c].to_numpy(dtype=float), strict=True)
    # a matrix of chosen columns, in their order and repeated where asked, as `floats` reads each (text: NaN)
    chosen = list(rows)[::-1] + list(rows)[:1]
    expected = np.column_stack([floats(rows[c]) for c in chosen]) if len(rows) else np.empty((0, len(chosen)))
    np.testing.assert_array_equal(float_matrix(rows, chosen), expected, strict=True)


def test_a_nullable_column_reads_its_missing_values_as_nan():
    rows = pd.DataFrame({"a": pd.array([1, None], dtype="Int64"), "b": [0.5, 1.5]})
    np.testing.assert_array_equal(float_columns(rows)["a"], [1.0, np.nan])
    np.testing.assert_array_equal(float_matrix(rows, ["b", "a"]), [[0.5, 1.0], [1.5, np.nan]])
