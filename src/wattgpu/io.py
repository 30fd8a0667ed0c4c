"""Disk I/O at the edges: deterministic CSV / JSON writers and the measurement table reader."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from wattgpu.sources.schema import TABLE_COLUMNS, conform


def _clean(obj: Any) -> Any:
    """JSON-safe: NaN/inf become null, numpy scalars become Python numbers."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, float):
        return round(obj, 6)
    return obj


def write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_clean(obj), indent=2, sort_keys=False) + "\n")


def write_csv(path: Path, frame: pd.DataFrame) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False, float_format="%.10g", lineterminator="\n")


def read_table(path: Path) -> pd.DataFrame:
    """The measurement table as written by the ingest stage, with schema dtypes."""
    frame = pd.read_csv(path, keep_default_na=True, na_values=[""], dtype={"engine_version": str})
    return conform(frame, TABLE_COLUMNS)
