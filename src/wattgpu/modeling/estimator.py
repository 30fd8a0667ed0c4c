"""A regressor on a feature set that learns an encoded target and predicts in natural units."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn import config_context
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OrdinalEncoder, StandardScaler
from sklearn.utils.validation import check_is_fitted

from wattgpu.arrays import float_matrix, floats, frame, per_distinct
from wattgpu.features import CONCURRENCY_FEATURES, FeatureSet, concurrency_sweep
from wattgpu.modeling.targets import ITL, LIMIT_INPUTS, Target
from wattgpu.workload import answering_family


def preprocessor(features: FeatureSet, scale: bool = False) -> ColumnTransformer:
    """Numeric: mean-impute (and optionally scale); categorical: ordinal codes, unseen -> -1."""
    num_steps = [("impute", SimpleImputer(strategy="mean", keep_empty_features=True))]
    if scale:
        num_steps.append(("scale", StandardScaler()))
    parts = [("num", Pipeline(num_steps), list(features.numeric))]
    if features.categorical:
        cat = Pipeline(
            [
                ("impute", SimpleImputer(strategy="constant", fill_value="missing")),
                ("encode", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1)),
            ]
        )
        parts.append(("cat", cat, list(features.categorical)))
    return ColumnTransformer(parts, verbose_feature_names_out=False)


VERSION, GENERATION = "engine_version_num", "engine_generation"  # features.engineer's release and its generation


def measured_releases(rows: pd.DataFrame) -> dict[str, list[tuple[float, float]]]:
    """Engine -> the (generation, release) pairs among `rows`, sorted (empty when the rows carry no release)."""
    if VERSION not in rows or GENERATION not in rows or "engine" not in rows:
        return {}
    pairs = rows[["engine", GENERATION, VERSION]].dropna().drop_duplicates()
    return {str(e): sorted((float(g), float(v)) for g, v in zip(grp[GENERATION], grp[VERSION]))
            for e, grp in pairs.groupby("engine")}


def nearest_release(generation: float, version: float, measured: list[tuple[float, float]]) -> float:
    """The measured release a request for `version` (of `generation`) is answered as: itself when measured; else the
    newest measured release of its generation at or below it, or the oldest above it; where its generation was never
    measured, the newest release of the newest measured generation below it (else the oldest measured). Never a
    number between two measured releases: those came from different labs, and a model would interpolate their
    levels."""
    same = [v for g, v in measured if g == generation]
    if same:
        below = [v for v in same if v <= version]
        return max(below) if below else min(same)
    older = [(g, v) for g, v in measured if g < generation]
    return max(older)[1] if older else min(measured)[1]


def as_measured_release(rows: pd.DataFrame, measured: dict[str, list[tuple[float, float]]]) -> pd.DataFrame:
    """Rows whose engine release the model was not trained on, asked at the measured release `nearest_release`
    names (the generation it assumes follows from it; coverage flags a release newer than every measured one); other
    rows unchanged. A release left unstated stays so (the model imputes it as it did in training)."""
    if not measured or VERSION not in rows or GENERATION not in rows or "engine" not in rows:
        return rows
    # an engine no source measured is featured as its measured family's release (workload.ENGINE_PROXIES)
    engine = per_distinct(answering_family, rows["engine"], dtype=object)
    gen, ver = rows[GENERATION].to_numpy(dtype=float), rows[VERSION].to_numpy(dtype=float, copy=True)
    asked = np.isfinite(ver) & np.isfinite(gen)
    unmeasured = np.zeros(len(rows), dtype=bool)
    for e, m in measured.items():
        unmeasured |= asked & (engine == e) & ~np.isin(ver, [v for _, v in m])
    for i in np.flatnonzero(unmeasured):
        ver[i] = nearest_release(gen[i], ver[i], measured[engine[i]])
    return rows.assign(**{VERSION: ver}) if unmeasured.any() else rows


def _filled(x: np.ndarray, fill: np.ndarray) -> np.ndarray:
    """The numeric inputs with NaN mean-imputed (`fill`), column-major as ColumnTransformer hands them on: the same
    sums, bit for bit, as the pipeline's own transform."""
    return np.asfortranarray(np.where(np.isnan(x), fill, x))


class TargetRegressor(RegressorMixin, BaseEstimator):
    """Fit `regressor` on `features` of rows to the encoded target; predict decodes to W or s."""

    def __init__(self, features: FeatureSet, target: Target, regressor, scale: bool = False):
        self.features = features
        self.target = target
        self.regressor = regressor
        self.scale = scale

    def fit(self, rows: pd.DataFrame, y=None) -> TargetRegressor:
        y = rows[self.target.column] if y is None else y
        z = self.target.encode(rows, y)
        self.measured_releases_ = measured_releases(rows)
        self.pipeline_ = Pipeline(
            [("prep", preprocessor(self.features, self.scale)), ("model", clone(self.regressor))]
        )
        self.pipeline_.fit(self._frame(rows), z)
        return self

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        check_is_fitted(self, "pipeline_")
        asked = as_measured_release(rows, getattr(self, "measured_releases_", {}))
        fill = self._imputed()
        # fit validated the parameters and the imputers handle NaN: a request need not pay for the checks again
        with config_context(assume_finite=True, skip_parameter_validation=True):
            if fill is None:
                z = self.pipeline_.predict(self._frame(asked))
            else:  # numeric inputs, mean-imputed only: the preprocessor's own transform, without its frames
                z = self.pipeline_.named_steps["model"].predict(_filled(self._numeric(asked), fill))
        return self.target.decode(rows, z)

    def at_concurrency(self, rows: pd.DataFrame):
        """(positions, concurrency) -> `predict(with_concurrency(rows.iloc[positions], concurrency))`, the same
        numbers, with the inputs that do not depend on the requests in flight built once (the Poisson fixed point,
        predictor.solve_concurrency, asks the same rows at many); None where that shortcut does not apply (inputs
        not all numeric and mean-imputed, or a target other than ITL, whose decoding reads more of the rows)."""
        check_is_fitted(self, "pipeline_")
        fill = self._imputed()
        if fill is None or self.target != ITL:
            return None
        x = self._numeric(as_measured_release(rows, getattr(self, "measured_releases_", {})))
        moving = [(j, col) for j, col in enumerate(self.features.numeric) if col in CONCURRENCY_FEATURES]
        sweep = concurrency_sweep(rows)
        # what ITL's decoding reads besides CONCURRENCY_FEATURES (targets.Target.limits: the step's memory floor)
        fixed = {col: rows[col].to_numpy() for col in LIMIT_INPUTS if col in rows and col not in CONCURRENCY_FEATURES}
        model = self.pipeline_.named_steps["model"]
        with config_context(assume_finite=True, skip_parameter_validation=True):
            # a regressor whose concurrency-free part can be kept (modeling.steptime: the boosted factor) keeps it
            kept = model.at_context(_filled(x, fill)) if hasattr(model, "at_context") else None

        def predict(positions: np.ndarray, concurrency) -> np.ndarray:
            moved = sweep(positions, concurrency)
            xs = x[positions]
            for j, col in moving:
                xs[:, j] = moved[col]
            xs = _filled(xs, fill)
            with config_context(assume_finite=True, skip_parameter_validation=True):
                z = kept(positions, xs) if kept is not None else model.predict(xs)
            decoding = frame({**{k: v[positions] for k, v in fixed.items()},
                              **{k: v for k, v in moved.items() if k in LIMIT_INPUTS}})
            return self.target.decode(decoding, z)

        return predict

    def _imputed(self) -> np.ndarray | None:
        """The means the preprocessor fills missing inputs with, where imputing is all it does (numeric features, not
        scaled: ColumnTransformer's output is then the inputs with NaN filled); None otherwise."""
        prep = self.pipeline_.named_steps["prep"]
        steps = prep.named_transformers_["num"].named_steps
        if self.features.categorical or list(steps) != ["impute"] or prep.remainder != "drop":
            return None
        return steps["impute"].statistics_

    def _numeric(self, rows: pd.DataFrame) -> np.ndarray:
        """The numeric feature columns as one float matrix (anything unparseable NaN), as `_frame` builds them."""
        return float_matrix(rows, self.features.numeric)

    def _frame(self, rows: pd.DataFrame) -> pd.DataFrame:
        """The feature columns, numeric ones as float (anything unparseable NaN), categorical ones as text; built in
        one go (column by column assignment into a copy cost more than the model's own prediction)."""
        numeric = set(self.features.numeric)
        columns = {col: floats(rows[col]) if col in numeric else rows[col].astype(str) for col in self.features.columns}
        return pd.DataFrame(columns, index=rows.index)

    def feature_importances(self) -> pd.Series:
        model = self.pipeline_.named_steps["model"]
        names = self.pipeline_.named_steps["prep"].get_feature_names_out()
        values = getattr(model, "feature_importances_", None)
        if values is None:
            coef = getattr(model, "coef_", None)
            values = np.abs(np.ravel(coef)) if coef is not None else np.full(len(names), np.nan)
        return pd.Series(values, index=names).sort_values(ascending=False)
