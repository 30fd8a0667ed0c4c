"""Shared fixtures. Rows built here are hand-written FIXTURES, never measurements."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "1")


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def raw_dir(root) -> Path:
    path = root / "data" / "raw"
    if not (path / "wattcounts").exists():
        pytest.skip("raw data not pulled: run `dvc pull` (make test does)")
    return path
