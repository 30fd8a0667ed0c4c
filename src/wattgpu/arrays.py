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
    same columns, dtypes and values, built one block per dtype: pandas checks and copies a dict's arrays one at a time,
    which for a request's 61 canonical columns costs more than stacking them. Arrays of any other kind (text, dates)
    go through pandas as they are."""
    import pandas as pd

    order = list(columns) if order is None else list(order)
    arrays = [np.asarray(columns[c]) for c in order]
    if not order or any(a.ndim != 1 or a.dtype.kind not in BLOCK_KINDS or len(a) != len(arrays[0]) for a in arrays):
        return pd.DataFrame(columns, columns=order, index=index)
    groups: dict[np.dtype, list[int]] = {}
    for i, a in enumerate(arrays):
        groups.setdefault(a.dtype, []).append(i)
    parts = [pd.DataFrame(np.column_stack([arrays[i] for i in at]), columns=[order[i] for i in at], index=index,
                          copy=False) for at in groups.values()]
    out = pd.concat(parts, axis=1, copy=False) if len(parts) > 1 else parts[0]
    return out if len(groups) == 1 or list(out.columns) == order else out[order]
