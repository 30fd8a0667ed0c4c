"""Physical-limits check: how many measured rows, and how many of each search regime's held-out predictions and 80 %
bands, lie outside what the GPU can physically do (modeling.targets.Target.limits: mean power per GPU at most the
TDP; an ITL no faster than the decode step's weights and KV caches at peak memory bandwidth). Reads the committed
reports/search/<regime>/predictions.csv (nested selection) and the featured measurements; prints counts. It measures;
it is not a test.

    python scripts/limits_check.py [--regimes logo lolo loso loeo lopo] [--reports DIR]
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from wattgpu import paths
from wattgpu.evaluation.leaderboard import SELECTION
from wattgpu.modeling.targets import TARGETS
from wattgpu.sources.schema import KEY, MEASURED_CONCURRENCY
from wattgpu.stages.search import context

TOLERANCE = 1e-9  # relative: a clipped value equals its limit up to rounding


def outside(values: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Where a finite value lies below `low` or above `high` by more than TOLERANCE."""
    v = np.asarray(values, dtype=float)
    with np.errstate(invalid="ignore"):
        return np.isfinite(v) & ((v < low * (1 - TOLERANCE)) | (v > high * (1 + TOLERANCE)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--regimes", nargs="+", default=["logo", "lolo", "loso", "loeo", "lopo"])
    parser.add_argument("--reports", default=None, help="a reports folder (default: the project's reports/)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=UserWarning)
    root = paths.project_root()
    rows = context(root, with_idle_power=False).rows  # the search stages' own rows: no measured idle power
    print("measured rows outside their own limits (the limits of the workload as measured):")
    for name, target in TARGETS.items():
        measured = rows[rows[target.column].notna()]
        low, high = target.limits(measured)
        print(f"  {name}: {int(outside(measured[target.column], low, high).sum()):,} of {len(measured):,}")
    columns = ["target", "regime", "rows", "prediction outside", "80 % low end outside", "80 % high end outside"]
    print("held-out predictions (nested selection) and their 80 % bands outside the limits (ITL: the rows whose "
          "requests in flight were not derived from a measured latency):")
    table = []
    reports = Path(args.reports) if args.reports else root / "reports"
    for regime in args.regimes:
        pred = pd.read_csv(reports / "search" / regime / "predictions.csv")
        pred = pred[pred["model"] == SELECTION]
        for name, target in TARGETS.items():
            mine = pred[pred["target"] == name]
            joined = mine.merge(rows[[*KEY, *rows.columns.difference([*KEY, *mine.columns])]], on=list(KEY),
                                how="left")
            # The ITL floor depends on the requests in flight: where a source derived them from the measured latency
            # (modeling.predictor.as_served), the served ones are not in the file, so those rows are left out.
            if name == "itl":
                joined = joined[~joined["concurrency_derivation"].isin(MEASURED_CONCURRENCY)]
            low, high = target.limits(joined)
            table.append([name, regime, len(joined), *(int(outside(joined[c], low, high).sum())
                                                       for c in ("y_pred", "y_lo_80", "y_hi_80"))])
    print(pd.DataFrame(table, columns=columns).to_string(index=False))


if __name__ == "__main__":
    main()
