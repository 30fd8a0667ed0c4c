"""Reading raw files strictly: a malformed file raises RawDataError naming the file, the line and the field."""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from wattgpu.errors import RawDataError


def read_csv_checked(
    path: Path,
    numeric: Mapping[str, bool] | list[str] = (),
    text: list[str] | tuple[str, ...] = (),
    sep: str = ",",
) -> pd.DataFrame:
    """Read a CSV whose `numeric` and `text` columns must exist; numbers must parse.

    `numeric` maps column -> whether a blank cell is allowed (a list means blanks are not allowed).
    Line numbers are 1-based file lines (header = line 1), so an error points where an editor does.
    Blank lines are skipped, as pandas does, but line numbers still count them.
    """
    numeric = dict.fromkeys(numeric, False) if not isinstance(numeric, Mapping) else dict(numeric)
    path = Path(path)
    if not path.exists():
        raise RawDataError(path, None, "-", "file not found")
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh, delimiter=sep)
        try:
            header = next(reader)
        except StopIteration:
            raise RawDataError(path, 1, "-", "empty file, expected a header line") from None
        rows, lines = [], []
        for row in reader:
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise RawDataError(path, reader.line_num, "-", f"{len(row)} fields, header has {len(header)}")
            rows.append(row)
            lines.append(reader.line_num)
    for col in [*numeric, *text]:
        if col not in header:
            raise RawDataError(path, 1, col, f"missing column; header is {header}")
    df = pd.DataFrame(rows, columns=header)
    df["_line"] = lines
    for col, blank_ok in numeric.items():
        values = pd.to_numeric(df[col].str.strip().replace("", None), errors="coerce")
        bad = values.isna() & ~((df[col].str.strip() == "") & blank_ok)
        if bad.any():
            i = bad.idxmax()
            raise RawDataError(path, int(df.at[i, "_line"]), col, f"not a number: {df.at[i, col]!r}")
        df[col] = values.astype("float64")
    return df
