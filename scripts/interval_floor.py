"""How narrow can honest 80 % bands be with today's point predictions? Reads the nested outer-test predictions
(reports/search/<regime>/predictions.csv, `nested_selection`) and prints, per target:

- `committed`: the committed bands (reports/search/<regime>/interval_coverage_by_gpu.csv): groups under 0.65
  coverage and the median of the groups' median relative width, the issue's two criteria;
- `oracle`: the median relative width if every (held-out GPU, group) had the half-width of its OWN 80 % (or 65 %)
  quantile of |log error|, a width no calibration can beat without knowing the held-out GPU's errors: the floor
  that the width criteria meet only if the point predictions improve;
- `bins x floor`: bands from the other held-out GPUs' outer residuals (leave-one-GPU-out over the outer folds, a
  proxy for the inner-fold calibration), per bin (the workload group, or the source x load group) with the
  group-conditional floor at a few quantiles across GPUs of their own 80 % quantiles (the rule before stop 40), or
  `every`, the served rule (modeling/intervals.group_floor: the widest across GPUs of their own 80 - 15 % quantiles):
  the trade-off between groups left under 0.65 and the median width.

Groups with 20+ rows, accelerator families never measured (Intel) left out as the served model abstains there.

    python scripts/interval_floor.py [--regime logo]
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pandas as pd

from wattgpu import paths
from wattgpu.modeling import intervals

LEVEL, FLOOR, MIN_ROWS = 0.8, 0.65, 20


def rel_width(q):
    return 2 * np.sinh(q)  # (e^q - e^-q): (hi - lo) / prediction of a band pred x exp(+-q)


def residuals(regime: str) -> pd.DataFrame:
    p = pd.read_csv(paths.project_root() / "reports" / "search" / regime / "predictions.csv")
    p = p[(p["model"] == "nested_selection") & p["y_pred"].notna() & ~p["gpu"].str.contains("Intel")].copy()
    load = p["scenario_label"].str.replace(r"_(high|low)$", "", regex=True)
    p["group"] = np.where(p["source"] == "wattcounts_processed", load, p["source"])
    p["workload"] = np.select([load == "offline", load == "server"], ["offline", "server"], "closed")
    p["s"] = np.log(p["y_true"] / p["y_pred"])
    return p


def proxy(p: pd.DataFrame, bin_col: str, agg: float | str | None) -> pd.DataFrame:
    out = []
    for gpu in p["gpu"].unique():
        cal, test = p[p["gpu"] != gpu], p[p["gpu"] == gpu]
        for b, tb in test.groupby(bin_col):
            cb = cal[cal[bin_col] == b]
            if len(cb) < 10:
                continue
            q = np.quantile(np.abs(cb["s"]), LEVEL)
            if agg == "every":  # the served rule: every GPU keeps LEVEL - UNIT_SLACK of its rows inside
                q = max(q, intervals.group_floor(cb["s"].to_numpy(), cb["gpu"].to_numpy(dtype=object), LEVEL))
            else:
                per = [np.quantile(np.abs(x["s"]), LEVEL) for _, x in cb.groupby("gpu") if len(x) >= 5]
                if agg is not None and len(per) >= 3:
                    q = max(q, float(np.quantile(per, agg)))
            for group, tg in tb.groupby("group"):
                out.append({"gpu": gpu, "group": group, "n": len(tg), "covered": int((np.abs(tg["s"]) <= q).sum()),
                            "width": rel_width(q) * len(tg)})
    r = pd.DataFrame(out).groupby(["gpu", "group"]).sum()
    return r.assign(coverage=r["covered"] / r["n"], width=r["width"] / r["n"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--regime", default="logo")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    p = residuals(args.regime)
    committed = pd.read_csv(paths.project_root() / "reports" / "search" / args.regime / "interval_coverage_by_gpu.csv")
    committed = committed[(committed["level"] == 80) & (committed["n_rows"] >= MIN_ROWS)]
    rows = []
    for target, t in p.groupby("target"):
        c = committed[committed["target"] == target]
        rows.append({"target": target, "bands": "committed", "groups": len(c),
                     "under 0.65": int(((c["coverage"] < FLOOR) & (c["abstained"] < 1)).sum()),
                     "median width": c["median_rel_width"].median()})
        own = t.groupby(["gpu", "group"])["s"].agg(["size", lambda s: np.quantile(np.abs(s), LEVEL),
                                                   lambda s: np.quantile(np.abs(s), FLOOR)])
        own = own[own["size"] >= MIN_ROWS]
        for col, name in ((1, "oracle: own 80 % quantile"), (2, "oracle: own 65 % quantile")):
            rows.append({"target": target, "bands": name, "groups": len(own), "under 0.65": 0,
                         "median width": float(np.median(rel_width(own.iloc[:, col])))})
        for bin_col in ("workload", "group"):
            for agg in (None, 0.67, 0.9, 1.0, "every"):
                r = proxy(t, bin_col, agg)
                r = r[r["n"] >= MIN_ROWS]
                rows.append({"target": target, "bands": f"bins {bin_col} x floor {agg}", "groups": len(r),
                             "under 0.65": int((r["coverage"] < FLOOR).sum()), "median width": r["width"].median()})
    print(f"{args.regime.upper()}: 80 % bands per (held-out GPU, group) with {MIN_ROWS}+ rows")
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.2f}"))


if __name__ == "__main__":
    main()
