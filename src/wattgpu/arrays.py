"""Per-element work done once per distinct value: a batch of thousands of rows has a handful of GPUs, LLMs,
engines and releases, and one row must not pay for a table (a frame, an index) built to find them."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


def text(value) -> str:
    """A cell as text: '' for None and NaN (an absent cell), else str(value)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def floats(column: pd.Series) -> np.ndarray:
    """A column as floats, a cell that is not a number NaN (numbers and booleans as they are, without a parse)."""
    if isinstance(column.dtype, np.dtype) and column.dtype.kind in "fiub":
        return column.to_numpy(dtype=float)
    import pandas as pd  # here: the command line imports this module for its option help, and needs no pandas there

    return pd.to_numeric(column, errors="coerce").astype(float).to_numpy()


def _float_kind(dtype) -> bool:
    return isinstance(dtype, np.dtype) and dtype.kind in "fiub"


def float_columns(rows: pd.DataFrame) -> dict[str, np.ndarray]:
    """Every column of `rows` whose dtype is a number or boolean, as `rows[name].to_numpy(dtype=float)` gives it (a
    missing value NaN), read in one pass: a frame's columns read one by one cost a Series each, and a one-row request
    reads a hundred."""
    picked = rows.select_dtypes(include=["number", "bool"])
    return dict(zip(picked.columns, np.ascontiguousarray(picked.to_numpy(dtype=float, na_value=np.nan).T)))


def float_matrix(rows: pd.DataFrame, columns) -> np.ndarray:
    """`columns` of `rows` as one float matrix (rows x columns, Fortran order), each column as `floats` reads it: in one
    pass where every column is a NumPy number or boolean, else column by column."""
    columns = list(columns)
    picked = rows[columns]
    if all(_float_kind(dtype) for dtype in picked.dtypes):
        return np.asfortranarray(picked.to_numpy(dtype=float))
    out = np.empty((len(rows), len(columns)), order="F")
    for j, col in enumerate(columns):
        out[:, j] = floats(rows[col])
    return out


def per_distinct(fn: Callable, *columns, dtype=float) -> np.ndarray:
    """fn(*elements) for each position of the equal-length `columns`, called once per distinct tuple of elements and
    spread back in order (a 1-d array of `dtype`; `dtype=object` keeps tuples and text as they are)."""
    keys = list(zip(*(np.ravel(np.asarray(c, dtype=object)).tolist() for c in columns)))
    memo: dict = {}
    values = [memo[k] if k in memo else memo.setdefault(k, fn(*k)) for k in keys]
    if dtype is object:
        out = np.empty(len(values), dtype=object)
        out[:] = values
        return out
    return np.array(values, dtype=dtype)


BLOCK_KINDS = "fbiO"  # float, bool, integer and object arrays: stacked into one block per dtype by `frame`


def frame(columns: dict[str, np.ndarray], order: list[str] | None = None, index=None) -> pd.DataFrame:
    """The DataFrame `pd.DataFrame(columns, columns=order, index=index)` builds from equal-length 1-d arrays, with the
    same columns, dtypes and values, built one block per dtype and each block placed where its columns go: pandas
    checks and copies a dict's arrays one at a time, and a frame built per dtype and then put in order copies every
    block again, which for a request's 61 canonical columns cost more than the models' own prediction. The blocks go
    to pandas through its API for libraries that build frames from blocks (`pandas.core.internals.api.make_block`,
    as pyarrow's `to_pandas` does). Arrays of any other kind (text, dates), or an index of another length, go through
    pandas as they are."""
    import pandas as pd
    from pandas.core.internals import BlockManager
    from pandas.core.internals.api import make_block

    order = list(columns) if order is None else list(order)
    arrays = [np.asarray(columns[c]) for c in order]
    n = len(arrays[0]) if arrays else 0
    if (not order or any(a.ndim != 1 or a.dtype.kind not in BLOCK_KINDS or len(a) != n for a in arrays)
            or (index is not None and len(index) != n)):
        return pd.DataFrame(columns, columns=order, index=index)
    groups: dict[np.dtype, list[int]] = {}
    for i, a in enumerate(arrays):
        groups.setdefault(a.dtype, []).append(i)
    blocks = [make_block(np.vstack([arrays[i] for i in at]), placement=np.asarray(at), ndim=2)
              for at in groups.values()]
    rows = pd.RangeIndex(n) if index is None else index if isinstance(index, pd.Index) else pd.Index(index)
    manager = BlockManager(blocks, [pd.Index(order), rows])
    return pd.DataFrame._from_mgr(manager, manager.axes)
