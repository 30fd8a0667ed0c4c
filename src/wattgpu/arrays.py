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
