"""Model registry: champion / challenger by MLflow aliases, and the gate between them (`judge`): no challenger
becomes champion without a comparison with the champion on the same held-out folds, the first champion excepted.

The evaluation (`gate`): the primary regime's outer folds as the search builds them, on the challenger's training
table, fingerprinted by `Evaluation` (rows, folds, search profile and budget, code). The scores (`rescore`): per
fold, a configuration (algorithm, feature set, hyperparameters: fixed, not tuned again) is refitted on the fold's
training rows and predicts its test rows the way they are served (a Poisson row's requests in flight solved by the
ITL model: its own, or for a power model the served ITL configuration's, fitted on the fold); the fold's score is the search's own (search.nested.score: geometric mean
of the per-group MdAPE, %). Every version records its own per-fold scores on its evaluation (`own_fold_scores` in its
decision record, `recorded_scores`). The champion's per-fold scores on the challenger's folds are:
- another configuration: its configuration refitted by today's code (both scored on the test rows both predict);
- the same configuration, recorded on the same rows and folds (only the code, profile or trial budget differ): its
  recorded scores, against the challenger's fresh ones: what the code change did to that configuration;
- the same configuration on other rows or folds: its configuration refitted by today's code (the only code that can
  run), which scores it exactly as the challenger (a tie).
The comparison is fair between the two, not an unbiased estimate of either: both configurations were tuned on data
overlapping these test rows (the challenger on all of this table, the champion on an earlier one). The unbiased
figures are the nested ones in reports/search, recorded beside them.

The rule (`decide`), over the paired per-fold differences d = challenger - champion (lower is better), margin =
max(min_gain_pp, se_multiple x standard error of d):
- no champion yet: first champion, the only promotion without a comparison;
- the same configuration, code and evaluation as the champion: kept, nothing to compare (no refits, no promotion);
- the same configuration otherwise: refreshed (promoted) when mean(d) <= +margin (no worse within the noise: the
  served model is then one today's code fitted on today's rows), else kept (today's code fits it worse);
- another configuration: promoted when mean(d) < -margin; one that adds the prediction intervals the champion lacks:
  promoted when mean(d) <= +margin (no worse within the noise);
- else kept. A one-sided Wilcoxon signed-rank p-value is recorded as further evidence; it does not decide.
A `Decision` that promotes without a `Comparison` (the first champion excepted) cannot be made: it raises.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, fields

import numpy as np
import pandas as pd

from wattgpu.config import Params, Registry, Replica, XgbParams
from wattgpu.evaluation.cv import Fold, fit_fold, folds, itl_training_rows, outer_regime
from wattgpu.evaluation.metrics import score_groups
from wattgpu.evaluation.predictions import ID_COLUMNS
from wattgpu.modeling import intervals
from wattgpu.modeling.algorithms import make_estimator
from wattgpu.modeling.predictor import served_predictions
from wattgpu.modeling.replica import paper_model, paper_target
from wattgpu.modeling.targets import TARGETS
from wattgpu.search.nested import score

CHAMPION, CHALLENGER = "champion", "challenger"
INTERVALS_TAG = "intervals"  # "conformal" on a version whose model folder carries interval calibration
CONFIG_TAG = "config.sha"  # Configuration.sha of the version's configuration
REPLICA_ALGORITHM = "paper_replica"


@dataclass(frozen=True)
class Evaluation:
    """What per-fold scores depend on besides the configuration. Scores of one configuration are the same when all of
    these agree (the gate's identical case); a recorded set stands against fresh ones when the rows and folds agree
    (`same_rows_and_folds`): what differs then is the code (or the search that chose the configuration)."""

    regime: str
    rows_md5: str  # the training table (data version): ids and target of every row, in order
    folds_md5: str  # the outer folds: names and test rows
    profile: str  # the search profile and its trial budget that chose the configuration
    n_trials: int
    code: str  # the register stage's code fingerprint (reports/code/register.json)
    # what solves a Poisson test row's requests in flight (the served path): "self" (an ITL model solves its own),
    # the sha of the ITL configuration fitted per fold beside a power model, or "none"
    solver: str = "none"

    def differences(self, other: Evaluation | None) -> list[str]:
        if other is None:
            return ["no recorded evaluation"]
        return [f.name for f in fields(self) if getattr(self, f.name) != getattr(other, f.name)]

    def same_rows_and_folds(self, other: Evaluation | None) -> bool:
        return other is not None and not {"regime", "rows_md5", "folds_md5", "solver"} & set(self.differences(other))

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
            n_jobs: int = 1, n_workers: int = 1, itl: Configuration | None = None,
            step_rows: pd.DataFrame | None = None) -> dict[str, dict[str, float]]:
    """{name: {fold: score}}: each configuration refitted on each fold's training rows (within its domain) and
    scored on the fold's test rows that every configuration predicts (search.nested.score). Folds without such
    test rows are left out, for every configuration alike. Configurations with the same `sha` are fitted once and
    share their scores (the same fits). The fits run `n_workers` at a time (threads: the boosting libraries release
    the GIL), each on `n_jobs` threads; the scores depend on neither.

    Test rows are predicted the way they are served (modeling.predictor.served_predictions): a Poisson row's requests
    in flight are solved by the ITL model (an ITL configuration by itself; a power configuration by `itl`, fitted on
    each fold's training rows once for every configuration), never taken from the measured latency. `step_rows`: rows
    with an ITL and without the target, which the ITL model and a power model's step time learn from beside each fold's
    training rows where they share no held-out group with it (evaluation.cv.beside_training)."""
    from joblib import Parallel, delayed
    from threadpoolctl import threadpool_limits

    common = np.logical_and.reduce([c.domain(rows) for c in configurations.values()])
    unique = {c.sha: c for c in configurations.values()}
    live = [fold for fold in folds if common[fold.test].any()]
    with threadpool_limits(1, user_api="blas"):  # process-wide, before the fit threads start: one BLAS thread each
        return _rescore(rows, live, configurations, unique, common, seed, n_jobs, n_workers, itl, step_rows)


def _rescore(rows, live, configurations, unique, common, seed, n_jobs, n_workers, itl, step_rows):
    from joblib import Parallel, delayed

    solvers: dict[str, object] = {}
    if itl is not None and any(_needs_solver(c) for c in unique.values()):
        fitted = Parallel(n_jobs=n_workers, prefer="threads")(
            delayed(_fit_solver)(rows, itl, fold.train, seed, n_jobs, step_rows) for fold in live)
        solvers = {fold.name: model for fold, model in zip(live, fitted)}
    tasks = [(sha, fold.name, fold.train[c.domain(rows)[fold.train]], fold.test[common[fold.test]])
             for fold in live for sha, c in unique.items()]
    scores = Parallel(n_jobs=n_workers, prefer="threads")(
        delayed(_fold_score)(rows, unique[sha], train, test, seed, n_jobs, solvers.get(name), step_rows)
        for sha, name, train, test in tasks)
    by_sha: dict[str, dict[str, float]] = {sha: {} for sha in unique}
    for (sha, fold, _, _), value in zip(tasks, scores):
        by_sha[sha][fold] = value
    return {name: dict(by_sha[c.sha]) for name, c in configurations.items()}


def _needs_solver(config: Configuration) -> bool:
    """A learned model of another target than ITL needs an ITL model for a Poisson row's requests in flight (the
    paper replica takes the request rate itself)."""
    return config.target != "itl" and config.algorithm != REPLICA_ALGORITHM


def _fit_solver(rows: pd.DataFrame, itl: Configuration, train: np.ndarray, seed: int, n_jobs: int,
                step_rows: pd.DataFrame | None = None):
    """`itl` fitted on the fold's training rows that have an ITL and the step rows beside them (in its domain)."""
    learn = itl_training_rows(rows, train, step_rows)
    return itl.estimator(seed, n_jobs).fit(learn[itl.domain(learn)])


def _fold_score(rows: pd.DataFrame, config: Configuration, train: np.ndarray, test: np.ndarray, seed: int,
                n_jobs: int, solver=None, step_rows: pd.DataFrame | None = None) -> float:
    _, pred = served_fold(rows, config, train, test, seed, n_jobs, solver, step_rows)
    y = rows[TARGETS[config.target].column].to_numpy(dtype=float)
    return round(score(y[test], pred, score_groups(rows)[test]), 6)


def served_fold(rows: pd.DataFrame, config: Configuration, train: np.ndarray, test: np.ndarray, seed: int,
                n_jobs: int, solver=None, step_rows: pd.DataFrame | None = None) -> tuple[pd.DataFrame, np.ndarray]:
    """`config` fitted on the rows at `train` (and the step rows beside them): the rows at `test` as they are served
    and its predictions there, in the target's units (modeling.predictor.served_predictions, a Poisson row's requests
    in flight solved by `solver`, an ITL model fitted on the same rows; the paper replica takes the request rate
    itself)."""
    learn, factor = config.learning_rows(rows)
    model = fit_fold(config.estimator(seed, n_jobs), learn, train, step_rows)
    if config.algorithm == REPLICA_ALGORITHM:
        with np.errstate(over="ignore", invalid="ignore"):
            return rows.iloc[test], np.asarray(model.predict(learn.iloc[test]), dtype=float) * factor[test]
    models = {config.target: model, **({"itl": solver} if solver is not None and _needs_solver(config) else {})}
    served, pred = served_predictions(rows.iloc[test], models)
    return served, pred[config.target]


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


FIRST = "first champion"


@dataclass(frozen=True)
class Decision:
    promote: bool
    verdict: str  # first champion | promoted | refreshed | kept champion | kept champion, identical configuration
    reason: str
    comparison: Comparison | None = None  # what it was decided on (None: first champion, or kept as identical)

    def __post_init__(self):
        if self.promote and self.verdict != FIRST and (self.comparison is None or not self.comparison.challenger):
            raise ValueError(f"{self.verdict!r}: a challenger is promoted only on a comparison with the champion")


def decide(comparison: Comparison | None, rule: Registry, champion_version: str | None = None,
           identical: bool = False, adds_intervals: bool = False, same_configuration: bool = False) -> Decision:
    """Whether the challenger becomes champion, and why (pure; the rules in the module docstring). `identical`: the
    champion has the challenger's configuration, code and evaluation; `same_configuration`: its configuration,
    with other code or on another evaluation; `adds_intervals`: the challenger gives prediction intervals and the
    champion does not. Without a champion the comparison is not needed; otherwise, unless `identical`, it is:
    deciding without one raises."""
    if champion_version is None:
        return Decision(True, FIRST, "no champion yet")
    cv = f"v{champion_version}"
    if identical:
        return Decision(False, "kept champion, identical configuration",
                        f"champion {cv} has the challenger's configuration, code and evaluation: nothing to compare")
    if comparison is None or not comparison.challenger:
        raise ValueError("a challenger is promoted or refused only on a comparison with the champion on at least one "
                         "fold")
    gain, margin, se = -comparison.mean_difference, comparison.margin(rule), comparison.standard_error
    figures = (f"mean per-fold score {comparison.mean('challenger'):.3f} vs champion {cv} "
               f"{comparison.mean('champion'):.3f} over {len(comparison.challenger)} paired folds; difference "
               f"{-gain:+.3f}, standard error {se:.3f}, margin {margin:.3f} (max of {rule.min_gain_pp:g} and "
               f"{rule.se_multiple:g} SE)")
    if same_configuration:
        if -gain <= margin:
            return Decision(True, "refreshed", f"{figures}: {cv}'s configuration fitted by today's code on today's "
                                               "rows, no worse within the margin, replaces it", comparison)
        return Decision(False, "kept champion", f"{figures}: {cv}'s configuration fitted by today's code is worse by "
                                                "more than the margin", comparison)
    if gain > margin:
        return Decision(True, "promoted", f"{figures}: better by more than the margin", comparison)
    if adds_intervals and -gain <= margin:
        return Decision(True, "promoted", f"{figures}: no worse within the margin, and it adds the prediction "
                                          f"intervals {cv} lacks", comparison)
    return Decision(False, "kept champion", f"{figures}: not better by more than the margin", comparison)


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
# The gate: the challenger's evaluation, the champion's scores on it, the decision and its record


@dataclass(frozen=True)
class Candidate:
    """A configuration to register, where it comes from and its held-out figures on the primary regime (nested:
    the unbiased ones, recorded beside the gate's paired scores)."""

    origin: str  # "search" or "paper_replica fallback"
    configuration: Configuration
    regime: str
    offline_mdape: float
    server_mdape: float

    def nested(self) -> dict:
        return {"regime": self.regime, "offline_mdape": self.offline_mdape, "server_mdape": self.server_mdape}


@dataclass(frozen=True)
class Incumbent:
    """The champion: its version, configuration, recorded evaluation, whether it gives intervals, and its own
    per-fold scores on that evaluation as recorded on its version (None where none were)."""

    version: str
    configuration: Configuration
    evaluation: Evaluation | None
    intervals: bool
    fold_scores: dict[str, float] | None = None

    def scores_on(self, evaluation: Evaluation) -> dict[str, float] | None:
        """Its recorded per-fold scores where they stand on `evaluation`'s rows and folds, else None."""
        return self.fold_scores if self.fold_scores and evaluation.same_rows_and_folds(self.evaluation) else None


@dataclass(frozen=True)
class Gate:
    """The challenger's evaluation, on which the champion is scored: its rows, outer folds and fingerprint."""

    rows: pd.DataFrame
    folds: list[Fold]
    evaluation: Evaluation
    seed: int
    n_jobs: int  # threads per fit
    n_workers: int  # fits side by side
    load_rho: tuple[tuple[str, float], ...] = ()  # evaluate.load_rho, for a champion folder without `configuration`
    itl: Configuration | None = None  # the served ITL configuration: solves a power model's Poisson rows (served path)
    step_rows: pd.DataFrame | None = None  # rows with an ITL and no target, beside `rows` (rescore)

    def scores(self, configurations: dict[str, Configuration]) -> dict[str, dict[str, float]]:
        return rescore(self.rows, self.folds, configurations, self.seed, self.n_jobs, self.n_workers, self.itl,
                       self.step_rows)

    def calibration(self, config: Configuration, folds: list[Fold]) -> intervals.Calibration:
        """Conformal scores of `config` on `folds` of `rows` (grouped folds of every row: register's calibration
        folds), each held-out row predicted as served (served_fold: a power model's Poisson rows at the requests in
        flight that `itl`, fitted on the same fold's rows, solves)."""

        def predict_fold(fold: Fold) -> tuple[pd.DataFrame, np.ndarray]:
            solver = (_fit_solver(self.rows, self.itl, fold.train, self.seed, self.n_jobs, self.step_rows)
                      if self.itl is not None and _needs_solver(config) else None)
            return served_fold(self.rows, config, fold.train, fold.test, self.seed, self.n_jobs, solver,
                               self.step_rows)

        y = self.rows[TARGETS[config.target].column].to_numpy(dtype=float)
        return intervals.calibrate(predict_fold, self.rows, y, folds)


def gate(target: str, rows: pd.DataFrame, cand: Candidate, params: Params, code: str,
         itl: Configuration | None = None, step_rows: pd.DataFrame | None = None) -> Gate:
    """The primary regime's outer folds as the search builds them (nested_plan: every fold with training rows),
    on `rows`; a paper-replica fallback: its `evaluate` regime, untuned (profile "none", no trials). `code`: the
    fingerprint of the code that fits and scores (the register stage's); `itl`: the ITL configuration served beside
    a power model, which solves its Poisson rows' requests in flight on each fold; `step_rows`: the rows with an ITL
    and no target (evaluation.runner.step_rows) those folds may also learn a step time from."""
    s, ev, seed = params.search, params.evaluate, params.base.seed
    if s is not None and cand.regime in s.regimes:
        regime, profile, n_trials = outer_regime(s, cand.regime), s.profile, s.active.n_trials
    else:
        regime, profile, n_trials = ev.regimes[cand.regime], "none", 0
    outer = [f for f in folds(rows, regime, seed) if len(f.train)]
    solver = "self" if target == "itl" else (itl.sha if itl is not None else "none")
    scored = rows[[*ID_COLUMNS, TARGETS[target].column]]
    if step_rows is not None:  # what the folds learn from besides: in the data version too
        scored = pd.concat([scored, step_rows[[*ID_COLUMNS, TARGETS["itl"].column]]], ignore_index=True)
    evaluation = Evaluation(cand.regime, rows_md5(scored), folds_md5(outer), profile, n_trials, code, solver)
    n_jobs, n_workers = (s.n_jobs, s.n_workers) if s is not None else (1, 1)
    return Gate(rows, outer, evaluation, seed, n_jobs, n_workers, tuple(sorted(ev.load_rho.items())),
                None if target == "itl" else itl, step_rows)


def judge(cand: Candidate, champion: Incumbent | None, check: Gate, rule: Registry,
          adds_intervals: bool) -> tuple[Decision, dict]:
    """The decision on `cand` and its record (as in reports/register/decision.json). The challenger is scored on
    `check`'s folds and compared with the champion's scores there (recorded, for the same configuration on the same
    rows and folds; else its configuration refitted by today's code). Without a champion, only the challenger's own
    scores are fitted (recorded on its version, `own_fold_scores`, for a later comparison); when the champion has the
    challenger's configuration, code and evaluation, nothing is fitted (its recorded scores carry over)."""
    config = cand.configuration
    same = champion is not None and champion.configuration.sha == config.sha
    identical = same and champion.evaluation == check.evaluation
    comparison, basis, own = None, None, None
    if champion is None:
        own = check.scores({CHALLENGER: config})[CHALLENGER]
    elif identical:
        own = champion.fold_scores
    else:
        recorded = champion.scores_on(check.evaluation) if same else None
        if recorded:
            own = check.scores({CHALLENGER: config})[CHALLENGER]
            if list(own) == list(recorded):
                comparison, basis = Comparison(own, recorded), f"recorded on v{champion.version}"
        if comparison is None:
            scores = check.scores({CHALLENGER: config, CHAMPION: champion.configuration})
            comparison, basis = Comparison(scores[CHALLENGER], scores[CHAMPION]), "refitted by today's code"
            same_domain = np.array_equal(config.domain(check.rows), champion.configuration.domain(check.rows))
            own = own or (scores[CHALLENGER] if same_domain else check.scores({CHALLENGER: config})[CHALLENGER])
    decision = decide(comparison, rule, champion.version if champion else None, identical, adds_intervals,
                      same_configuration=same and not identical)

    def scored(per_fold: dict[str, float] | None) -> dict:
        mean = round(float(np.mean(list(per_fold.values()))), 6) if per_fold else None
        return {"fold_scores": per_fold, "mean_score": mean}

    record = {
        "name": rule.names[config.target], "decision": decision.verdict, "reason": decision.reason,
        "evaluation": asdict(check.evaluation),
        "challenger": {"origin": cand.origin, "configuration": config.to_json(), "nested": cand.nested(),
                       **scored(comparison.challenger if comparison else own if champion is None else None),
                       "own_fold_scores": own},
        "champion": None if champion is None else {
            "version": int(champion.version), "configuration": champion.configuration.to_json(),
            "recorded_evaluation": asdict(champion.evaluation) if champion.evaluation else None,
            "differs_in": check.evaluation.differences(champion.evaluation),
            **scored(comparison.champion if comparison else None), "fold_scores_from": basis},
        "test": comparison.evidence(rule) if comparison else None,
    }
    return decision, record


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


def recorded_scores(tags: dict[str, str]) -> dict[str, float] | None:
    """A version's own per-fold scores on its evaluation, from its decision record (None where it has none)."""
    try:
        scores = json.loads(tags[RECORD_TAG])["challenger"].get("own_fold_scores")
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return {str(k): float(v) for k, v in scores.items()} if isinstance(scores, dict) and scores else None


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
