"""Transfer check: power candidates with fixed settings (each one's first trial in params.yaml), a lab (LOSO) or a GPU
(LOGO) held out, every held-out row asked through the served path (modeling.predictor.served_predictions: a Poisson
load's requests in flight solved by an ITL model fitted on the same training rows). Prints MdAPE % per source and
pooled, beside the 0.9 x TDP baseline. No tuning, no selection: a quick look at how a candidate transfers, not the
nested figures of `dvc repro` (reports/search/by_source.csv).

    python scripts/transfer_check.py [--regimes loso logo] [--candidates workload steppower lightgbm]
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pandas as pd

from wattgpu import paths
from wattgpu.catalogs.gpus import load_gpu_catalog
from wattgpu.catalogs.llms import load_llm_catalog
from wattgpu.config import load_params
from wattgpu.evaluation import baselines
from wattgpu.evaluation.runner import prepare_rows, target_rows
from wattgpu.io import read_table
from wattgpu.modeling.algorithms import make_estimator
from wattgpu.modeling.predictor import served_predictions

GROUP = {"loso": "lab", "logo": "gpu"}


def first_trial(params, algorithm: str) -> tuple[str, dict]:
    space = params.search.algorithms[algorithm]
    hp = dict(space.first_trials[0])
    return hp.pop("feature_set", space.feature_sets[0]), hp


def mdape(y: np.ndarray, pred: np.ndarray) -> float:
    return float(100 * np.median(np.abs(pred / y - 1)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--regimes", nargs="+", default=["loso", "logo"], choices=sorted(GROUP))
    parser.add_argument("--candidates", nargs="+", default=["workload", "steppower", "lightgbm"])
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=UserWarning)
    root = paths.project_root()
    params = load_params(root / paths.PARAMS)
    gpus, llms = load_gpu_catalog(root / paths.GPU_CATALOG), load_llm_catalog(root / paths.LLM_CATALOG_TABLE)
    rows = prepare_rows(read_table(root / paths.MEASUREMENTS), gpus, llms, source=params.search.source,
                        dense_only=params.search.dense_only, offline_batch=params.evaluate.roofline_offline_batch)
    power, itl_rows = target_rows(rows, "power"), target_rows(rows, "itl")
    seed = params.base.seed
    itl_set, itl_hp = first_trial(params, params.search.default_algorithm)
    y = power["power_w_per_gpu"].to_numpy(dtype=float)
    table = []
    for regime in args.regimes:
        key = GROUP[regime]
        pred = {c: np.full(len(power), np.nan) for c in args.candidates}
        for group in sorted(power[key].unique()):
            test = (power[key] == group).to_numpy()
            itl = make_estimator(params.search.default_algorithm, "itl", itl_set, itl_hp, seed=seed).fit(
                itl_rows[itl_rows[key] != group])
            for c in args.candidates:
                feature_set, hp = first_trial(params, c)
                model = make_estimator(c, "power", feature_set, hp, seed=seed,
                                       load_rho=params.evaluate.load_rho).fit(power[~test])
                pred[c][test] = served_predictions(power[test], {"itl": itl, "power": model})[1]["power"]
        pred["baseline: 0.9 x TDP"] = baselines.tdp90(power)
        for name, p in pred.items():
            cells = {s: mdape(y[(power["source"] == s).to_numpy()], p[(power["source"] == s).to_numpy()])
                     for s in sorted(power["source"].unique())}
            table.append({"regime": regime.upper(), "model": name, **cells, "all rows": mdape(y, p)})
    out = pd.DataFrame(table)
    print("power MdAPE % (first-trial settings, served path):")
    print(out.to_string(index=False, float_format=lambda v: f"{v:.1f}"))


if __name__ == "__main__":
    main()
