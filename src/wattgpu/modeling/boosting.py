"""LightGBM's boosted trees as the models use them: predictions read from the booster itself.

`LGBMRegressor.predict` re-validates its input through scikit-learn and re-derives every training parameter on each
call before it hands the matrix to the booster: on a one-row request, many times the trees' own work (the in-process
figures of `python scripts/benchmark.py`). The models' inputs are already float matrices of the fitted
width, so `predict` calls the booster with the thread count the regressor was fitted with: the same C call, the same
numbers (a regressor's `n_jobs` of None or below 1 is LightGBM's own default, OpenMP's thread count: predictions
are per row, the same on any number of threads).
"""

from __future__ import annotations

import numpy as np
from lightgbm import LGBMRegressor


def predict(model: LGBMRegressor, X: np.ndarray) -> np.ndarray:
    """`model.predict(X)` for a fitted regressor and a float matrix X of its inputs, through its booster."""
    if X.ndim != 2 or X.shape[1] != model.n_features_in_:
        raise ValueError(f"X has shape {X.shape}; the booster takes {model.n_features_in_} columns")
    threads = model.n_jobs if isinstance(model.n_jobs, int) and model.n_jobs > 0 else 0
    return model.booster_.predict(X, num_threads=threads)
