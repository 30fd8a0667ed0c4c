"""Model registry: champion / challenger by MLflow aliases; a challenger becomes champion only when it beats the
champion by more than the noise, both scored by one procedure on identical rows.

The procedure (`rescore`): per outer fold of the primary regime (the search's outer folds, on the challenger's
training table), each configuration (algorithm, feature set, hyperparameters: fixed, not tuned again) is refitted
on the fold's training rows and predicts its test rows; the fold's score is the search's own (search.nested.score:
geometric mean of the per-group MdAPE, %). Refits of fixed configurations, because the champion's recorded figures
come from another evaluation whenever the data changed (other rows, folds or code); scored again here, both stand
on the same rows and folds. The comparison is fair between the two, not an unbiased estimate of either: both
configurations were tuned on data overlapping these test rows (the challenger on all of this table, the champion
on an earlier one). The unbiased figures are the nested ones in reports/search, recorded beside them.

The rule (`decide`), over the paired per-fold differences d = challenger - champion (lower is better):
- no champion yet: first champion;
- the same configuration (and code) as the champion: kept, nothing to compare (no refits);
- the same configuration with other code: refreshed (promoted without refits), so that the served model is always
  one today's code fitted (a changed feature or estimator must never meet an older pickled model);
- promoted when mean(d) < -margin, margin = max(min_gain_pp, se_multiple x standard error of d);
- a challenger that adds the prediction intervals the champion lacks: promoted when mean(d) <= +margin (no worse
  within the noise);
- else kept. A one-sided Wilcoxon signed-rank p-value is recorded as further evidence; it does not decide.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, fields

import numpy as np
import pandas as pd

from wattgpu.config import Registry, Replica, XgbParams
from wattgpu.evaluation.cv import Fold
from wattgpu.evaluation.metrics import score_groups
from wattgpu.modeling.algorithms import make_estimator
from wattgpu.modeling.replica import paper_model, paper_target
from wattgpu.modeling.targets import TARGETS
from wattgpu.search.nested import score

CHAMPION, CHALLENGER = "champion", "challenger"
INTERVALS_TAG = "intervals"  # "conformal" on a version whose model folder carries interval calibration
CONFIG_TAG = "config.sha"  # Configuration.sha of the version's configuration
REPLICA_ALGORITHM = "paper_replica"


@dataclass(frozen=True)
class Evaluation:
    """What per-fold scores depend on besides the configuration; two sets compare only when all of these agree."""

    regime: str
    rows_md5: str  # the training table (data version): ids and target of every row, in order
    folds_md5: str  # the outer folds: names and test rows
    profile: str  # the search profile and its trial budget that chose the configuration
    n_trials: int
    code: str  # the register stage's code fingerprint (reports/code/register.json)

    def differences(self, other: Evaluation | None) -> list[str]:
        if other is None:
            return ["no recorded evaluation"]
        return [f.name for f in fields(self) if getattr(self, f.name) != getattr(other, f.name)]

    def to_tags(self) -> dict[str, str]:
        return {f"eval.{k}": str(v) for k, v in asdict(self).items()}

    @classmethod
    def from_tags(cls, tags: dict[str, str]) -> Evaluation | None:
        """The evaluation written by to_tags, or None for a version registered without one."""
        try:
            values = {f.name: tags[f"eval.{f.name}"] for f in fields(cls)}
            return cls(**{**values, "n_trials": int(values["n_trials"])})
        except (KeyError, ValueError):
            return None


@dataclass(frozen=True)
class Configuration:
    """What is fitted: the estimator's recipe (as the search's best_<target>.json records it) and the rows it learns
    from (`source`: one source or every source, `dense_only`)."""

    target: str
    algorithm: str
    feature_set: str
    hyperparameters: dict
    physics: dict  # load_rho (the physics power target) and offline_batch (the features)
    source: str | None
    dense_only: bool

    def to_json(self) -> dict:
        return json.loads(json.dumps(asdict(self), sort_keys=True, default=str))

    @property
    def sha(self) -> str:
        return hashlib.sha1(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()[:12]

    @classmethod
    def from_json(cls, d: dict) -> Configuration:
        return cls(**{f.name: d[f.name] for f in fields(cls)})

    def estimator(self, seed: int, n_jobs: int = 1):
        """The unfitted estimator (the paper replica: its XGBoost settings on the paper's feature set)."""
        if self.algorithm == REPLICA_ALGORITHM:
            replica = Replica().model_copy(update={self.target: XgbParams(**self.hyperparameters)})
            return paper_model(self.target, replica, seed, n_jobs)
        return make_estimator(self.algorithm, self.target, self.feature_set, self.hyperparameters, seed=seed,
                              n_jobs=n_jobs, load_rho=self.physics.get("load_rho"))

    def domain(self, rows: pd.DataFrame) -> np.ndarray:
        """The rows it learns from and predicts: its source (every source: None), dense LLMs only if so set."""
        keep = np.ones(len(rows), dtype=bool) if self.source is None else (rows["source"] == self.source).to_numpy()
        return keep & ~rows["is_moe"].astype(bool).to_numpy() if self.dense_only else keep

    def learning_rows(self, rows: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
        """The rows with the target it learns and the factor that turns its prediction into the measured target's
        units (the paper replica learns the paper's ITL definition; every other model the target itself)."""
        if self.algorithm == REPLICA_ALGORITHM:
            return paper_target(rows, self.target)
        return rows, np.ones(len(rows))


def rescore(rows: pd.DataFrame, folds: list[Fold], configurations: dict[str, Configuration], seed: int,
            n_jobs: int = 1, n_workers: int = 1) -> dict[str, dict[str, float]]:
    """{name: {fold: score}}: each configuration refitted on each fold's training rows (within its domain) and
    scored on the fold's test rows that every configuration predicts (search.nested.score). Folds without such
    test rows are left out, for every configuration alike. The fits run `n_workers` at a time (threads: the boosting
    libraries release the GIL), each on `n_jobs` threads; the scores depend on neither."""
    from joblib import Parallel, delayed

    common = np.logical_and.reduce([c.domain(rows) for c in configurations.values()])
    tasks = [(name, c, fold.name, fold.train[c.domain(rows)[fold.train]], fold.test[common[fold.test]])
             for fold in folds for name, c in configurations.items() if common[fold.test].any()]
    scores = Parallel(n_jobs=n_workers, prefer="threads")(
        delayed(_fold_score)(rows, c, train, test, seed, n_jobs) for _, c, _, train, test in tasks)
    out: dict[str, dict[str, float]] = {name: {} for name in configurations}
    for (name, _, fold, _, _), value in zip(tasks, scores):
        out[name][fold] = value
    return out


def _fold_score(rows: pd.DataFrame, config: Configuration, train: np.ndarray, test: np.ndarray, seed: int,
                n_jobs: int) -> float:
    learn, factor = config.learning_rows(rows)
    model = config.estimator(seed, n_jobs).fit(learn.iloc[train])
    with np.errstate(over="ignore", invalid="ignore"):
        pred = np.asarray(model.predict(learn.iloc[test]), dtype=float) * factor[test]
    y = rows[TARGETS[config.target].column].to_numpy(dtype=float)
    return round(score(y[test], pred, score_groups(rows)[test]), 6)


@dataclass(frozen=True)
class Comparison:
    """Paired per-fold scores (lower is better) of the challenger and the champion, on the same folds."""

    challenger: dict[str, float]
    champion: dict[str, float]

    def __post_init__(self):
        if list(self.challenger) != list(self.champion):
            raise ValueError(f"unpaired folds: {list(self.challenger)} vs {list(self.champion)}")

    def mean(self, which: str) -> float:
        """Mean per-fold score of the "challenger" or the "champion"."""
        return float(np.mean(list(getattr(self, which).values())))

    @property
    def differences(self) -> np.ndarray:
        return np.array([self.challenger[f] - self.champion[f] for f in self.challenger], dtype=float)

    @property
    def mean_difference(self) -> float:
        d = self.differences
        return float(np.mean(d)) if len(d) else math.nan

    @property
    def standard_error(self) -> float:
        """Of the mean difference; infinite with fewer than two folds (the noise cannot be measured)."""
        d = self.differences
        return float(np.std(d, ddof=1) / math.sqrt(len(d))) if len(d) > 1 else math.inf

    def margin(self, rule: Registry) -> float:
        return max(rule.min_gain_pp, rule.se_multiple * self.standard_error)

    @property
    def wilcoxon_p(self) -> float | None:
        """One-sided Wilcoxon signed-rank p-value for "the challenger scores lower"; None when it is undefined
        (no fold, or every difference zero)."""
        from scipy.stats import wilcoxon

        d = self.differences
        if not len(d) or not np.any(d):
            return None
        return float(wilcoxon(d, alternative="less").pvalue)

    def evidence(self, rule: Registry) -> dict:
        """The test statistic and its inputs, rounded for a stable decision file."""
        p = self.wilcoxon_p
        return {"folds": len(self.challenger), "statistic": "mean per-fold score difference, challenger - champion",
                "mean_difference": _round(self.mean_difference), "standard_error": _round(self.standard_error),
                "margin": _round(self.margin(rule)), "min_gain_pp": rule.min_gain_pp,
                "se_multiple": rule.se_multiple, "wilcoxon_p_less": None if p is None else _round(p)}


def _round(x: float) -> float | None:
    return round(x, 6) if math.isfinite(x) else None


@dataclass(frozen=True)
class Decision:
    promote: bool
    verdict: str  # first champion | promoted | refreshed | kept champion | kept champion, identical configuration
    reason: str


def decide(comparison: Comparison | None, rule: Registry, champion_version: str | None = None,
           identical: bool = False, adds_intervals: bool = False, new_code: bool = False) -> Decision:
    """Whether the challenger becomes champion, and why (pure). `identical`: the champion has the challenger's
    configuration (and code); `new_code`: the same configuration, fitted by other code; `adds_intervals`: the
    challenger gives prediction intervals and the champion does not."""
    if champion_version is None:
        return Decision(True, "first champion", "no champion yet")
    cv = f"v{champion_version}"
    if identical:
        return Decision(False, "kept champion, identical configuration",
                        f"champion {cv} has the challenger's configuration and code: nothing to compare")
    if new_code:
        return Decision(True, "refreshed", f"champion {cv} has the challenger's configuration but was fitted by other "
                                           "code: the same configuration fitted by today's code replaces it")
    if comparison is None or not comparison.challenger:
        raise ValueError("a challenger is compared with a champion on at least one fold")
    gain, margin, se = -comparison.mean_difference, comparison.margin(rule), comparison.standard_error
    figures = (f"mean per-fold score {comparison.mean('challenger'):.3f} vs champion {cv} "
               f"{comparison.mean('champion'):.3f} over {len(comparison.challenger)} paired folds; difference "
               f"{-gain:+.3f}, standard error {se:.3f}, margin {margin:.3f} (max of {rule.min_gain_pp:g} and "
               f"{rule.se_multiple:g} SE)")
    if gain > margin:
        return Decision(True, "promoted", f"{figures}: better by more than the margin")
    if adds_intervals and -gain <= margin:
        return Decision(True, "promoted", f"{figures}: no worse within the margin, and it adds the prediction "
                                          f"intervals {cv} lacks")
    return Decision(False, "kept champion", f"{figures}: not better by more than the margin")


def rows_md5(rows: pd.DataFrame) -> str:
    """Fingerprint of training rows (values and column names, row order included)."""
    h = hashlib.md5(",".join(map(str, rows.columns)).encode())
    h.update(pd.util.hash_pandas_object(rows, index=False).to_numpy().tobytes())
    return h.hexdigest()


def folds_md5(folds: list[Fold]) -> str:
    """Fingerprint of outer folds: each fold's name and test rows."""
    h = hashlib.md5()
    for f in folds:
        h.update(f"{f.name}:".encode())
        h.update(np.asarray(f.test, dtype=np.int64).tobytes())
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------------------
# MLflow at the edge


def aliases(client, name: str) -> dict[str, str]:
    """{alias: version} of registered model `name` ({} before its first version)."""
    if not client.search_registered_models(filter_string=f"name = '{name}'"):
        return {}
    return {k: str(v) for k, v in client.get_registered_model(name).aliases.items()}


def register_version(client, name: str, model_uri: str, decision: Decision, evaluation: Evaluation,
                     configuration: Configuration, compared_with: str | None, evidence: dict | None = None,
                     tags: dict[str, str] | None = None, model_description: str | None = None) -> str:
    """Register `model_uri` as a new version of `name` with the decision and its evidence on it (tags and
    description); set the aliases (`challenger` always, `champion` when promoted). Returns the new version."""
    import mlflow

    version = str(mlflow.register_model(model_uri, name, tags={
        **(tags or {}), **evaluation.to_tags(), CONFIG_TAG: configuration.sha, "decision": decision.verdict,
        "decision.reason": decision.reason, "compared_with": f"v{compared_with}" if compared_with else "none",
        **{f"decision.{k}": str(v) for k, v in (evidence or {}).items()}}).version)
    if model_description:
        client.update_registered_model(name, description=model_description)
    client.update_model_version(name, version, description=f"{decision.verdict}: {decision.reason}")
    client.set_registered_model_alias(name, CHALLENGER, version)
    if decision.promote:
        client.set_registered_model_alias(name, CHAMPION, version)
    return version


RECORD_TAG = "decision.record"  # the whole decision (as in reports/register/decision.json), JSON
INPUTS_TAG = "decision.inputs"  # fingerprint of everything the decision and the fitted folder depend on


def inputs_sha(inputs: dict) -> str:
    """Fingerprint of a decision's inputs (configuration, evaluation, rule, training and calibration settings)."""
    return hashlib.sha1(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:16]


def reproduced(client, name: str, inputs: str) -> dict | None:
    """The decision recorded on the newest version when it was made from these very inputs and the champion is
    still the one that decision left: running again reproduces it (None otherwise)."""
    current = aliases(client, name)
    if CHALLENGER not in current:
        return None
    tags = client.get_model_version(name, current[CHALLENGER]).tags
    if tags.get(INPUTS_TAG) != inputs or RECORD_TAG not in tags:
        return None
    record = json.loads(tags[RECORD_TAG])
    return record if str(record.get("champion_version")) == current.get(CHAMPION) else None
