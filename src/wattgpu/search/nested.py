"""Nested evaluation: per outer fold, an Optuna study on the outer-training rows only picks the hyperparameters
(and, across algorithms, the algorithm); the reported error comes from the outer-test rows alone.

The inner CV is grouped the way the outer regime groups its test rows, so tuning rewards what the regime
measures: leave-GPU-group-out inside LOGO, leave-LLM-group-out inside LOLO, and inside LOPO "block" folds that
hold out a group of GPUs crossed with a (smaller) group of LLMs and train on rows with neither (a new GPU and a
new LLM at once; group k-fold on pairs would let both into inner training and reward interpolation).
"""

from __future__ import annotations

import json
import math
import warnings
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import KFold

from wattgpu.config import AlgorithmSpace, Regime
from wattgpu.evaluation.cv import Fold, fit_fold, folds, group_keys, itl_training_rows
from wattgpu.evaluation.leaderboard import PLAIN_SELECTION, SELECTION
from wattgpu.evaluation.metrics import score_groups
from wattgpu.evaluation.predictions import prediction_frame
from wattgpu.features import accelerator_families
from wattgpu.modeling import coverage, intervals, steptime
from wattgpu.modeling.algorithms import make_estimator
from wattgpu.modeling.predictor import served_predictions
from wattgpu.modeling.targets import TARGETS
from wattgpu.search import storage
from wattgpu.search.space import suggest

FAILED_SCORE = 1e6  # a trial whose predictions are not finite scores this (worse than any real MdAPE)


# ---------------------------------------------------------------------------------------------------------
# folds


def _chunks(keys: np.ndarray, n_splits: int, seed: int) -> list[np.ndarray]:
    """Distinct keys shuffled (seeded) into n_splits groups; 0 or too many splits: one group per key."""
    unique = np.array(sorted(pd.unique(keys)), dtype=object)
    if n_splits <= 0 or n_splits >= len(unique):
        return [np.array([k], dtype=object) for k in unique]
    order = np.random.default_rng(seed).permutation(len(unique))
    return [unique[np.sort(part)] for part in np.array_split(order, n_splits)]


def inner_folds(rows: pd.DataFrame, regime: Regime, n_splits: int, seed: int) -> list[Fold]:
    """Folds of (outer-training) `rows`, positions relative to `rows`, grouped as `regime` groups test rows."""
    gpu, llm = rows["gpu"].to_numpy(dtype=object), rows["llm"].to_numpy(dtype=object)
    out: list[Fold] = []
    if regime.kind in ("logo", "lolo", "loso", "loeo"):
        keys = group_keys(rows, regime.kind)
        for i, group in enumerate(_chunks(keys, n_splits, seed)):
            test = np.isin(keys, group)
            out.append(Fold(f"inner{i}", np.flatnonzero(~test), np.flatnonzero(test)))
    elif regime.kind == "lopo":
        # k GPU groups, each crossed with one of 2k LLM groups: a fold trains on (1 - 1/k)(1 - 1/2k) of the rows
        # (56 % for k = 3), nearer the outer LOPO fold (which holds out one GPU and one LLM) than k x k blocks.
        gpu_groups = _chunks(gpu, n_splits, seed)
        llm_groups = _chunks(llm, 2 * len(gpu_groups), seed + 1)
        for i, (gs, ls) in enumerate(zip(gpu_groups, llm_groups)):
            in_g, in_l = np.isin(gpu, gs), np.isin(llm, ls)
            out.append(Fold(f"inner{i}", np.flatnonzero(~in_g & ~in_l), np.flatnonzero(in_g & in_l)))
    elif regime.kind == "group_kfold":
        pair = rows["gpu"].astype(str).to_numpy() + "|" + rows["llm"].astype(str).to_numpy()
        for i, group in enumerate(_chunks(pair, n_splits or regime.n_splits, seed)):
            test = np.isin(pair, group)
            out.append(Fold(f"inner{i}", np.flatnonzero(~test), np.flatnonzero(test)))
    elif regime.kind == "row_kfold":
        kf = KFold(n_splits=n_splits or regime.n_splits, shuffle=True, random_state=seed)
        out = [Fold(f"inner{i}", tr, te) for i, (tr, te) in enumerate(kf.split(np.arange(len(rows))))]
    else:
        raise ValueError(f"unknown regime kind {regime.kind!r}")
    return [f for f in out if len(f.train) and len(f.test)]


@dataclass(frozen=True)
class OuterPlan:
    """One outer fold and its inner folds, every index a position in the full row frame."""

    outer: Fold
    inner: tuple[Fold, ...]
    # grouped like `inner` (calibration_splits of them): conformal scores; `inner` itself (the same object) when the
    # scores come from the chosen trial's own inner-fold models, with no fit of their own
    calibration: tuple[Fold, ...] = ()

    @property
    def calibrates_on_inner(self) -> bool:
        return self.calibration is self.inner


def nested_plan(rows: pd.DataFrame, regime: Regime, inner_splits: int, seed: int,
                calibration_splits: int | None = None) -> list[OuterPlan]:
    """Outer folds of the regime; inner (and calibration) folds built from each outer fold's training rows only.
    `calibration_splits` None: calibrate on the inner folds themselves (their models are already fitted)."""
    plans = []
    for outer in folds(rows, regime, seed):
        if not len(outer.train):
            continue

        def local(splits: int) -> tuple[Fold, ...]:
            return tuple(Fold(f.name, outer.train[f.train], outer.train[f.test])
                         for f in inner_folds(rows.iloc[outer.train], regime, splits, seed))

        inner = local(inner_splits)
        plans.append(OuterPlan(outer, inner, inner if calibration_splits is None else local(calibration_splits)))
    return plans


def all_rows_plan(rows: pd.DataFrame, regime: Regime, inner_splits: int, seed: int) -> OuterPlan:
    """The final selection: every row is training, the regime's inner CV scores the trials, nothing is held out."""
    everything = np.arange(len(rows))
    inner = tuple(inner_folds(rows, regime, inner_splits, seed))
    return OuterPlan(Fold("all", everything, np.array([], dtype=int)), inner)


# ---------------------------------------------------------------------------------------------------------
# the objective


def score(y_true: np.ndarray, y_pred: np.ndarray, groups: np.ndarray) -> float:
    """Geometric mean of the MdAPE (%) of each group (metrics.score_groups: the paper's offline and server, and each
    other source), so that a relative gain counts the same in every group."""
    y_true, y_pred = np.asarray(y_true, dtype=float), np.asarray(y_pred, dtype=float)
    ape = np.abs(y_pred - y_true) / np.abs(y_true) * 100
    ape = np.where(np.isfinite(ape), ape, FAILED_SCORE)
    groups = np.asarray(groups)
    parts = [float(np.median(ape[groups == g])) for g in np.unique(groups)]
    if not parts:
        return FAILED_SCORE
    return float(math.exp(np.mean(np.log(np.maximum(parts, 1e-9)))))


@dataclass(frozen=True)
class Settings:
    """What every study of one stage run shares."""

    seed: int
    n_trials: int
    n_jobs: int = 1
    pruner_startup_trials: int = 2
    load_rho: tuple[tuple[str, float], ...] = ()


class Objective:
    """Mean inner-fold score of one trial's estimator; reports after each fold so MedianPruner can stop it.

    It keeps the inner-fold models of the best trial it completed (`models[trial number]`, one per inner fold; the
    first of equal scores, as Optuna's best trial; this process's trials only), so that calibrating the chosen trial
    on the inner folds costs no fit of the model itself, and no other trial's models stay in memory.
    `step_rows`: rows with an ITL and without the target (StudyTask.step_rows) that a fold's power model may learn its
    step time from (evaluation.cv.fit_fold).
    """

    def __init__(self, rows: pd.DataFrame, inner: tuple[Fold, ...], target: str, algorithm: str,
                 space: AlgorithmSpace, settings: Settings, step_rows: pd.DataFrame | None = None):
        self.rows, self.inner, self.target, self.algorithm = rows, inner, target, algorithm
        self.space, self.settings, self.step_rows = space, settings, step_rows
        self.y = rows[TARGETS[target].column].to_numpy(dtype=float)
        self.labels = score_groups(rows)
        self.models: dict[int, list] = {}
        self._best: float | None = None

    def estimator(self, feature_set: str, hp: dict):
        s = self.settings
        return make_estimator(self.algorithm, self.target, feature_set, hp, seed=s.seed, n_jobs=s.n_jobs,
                              load_rho=dict(s.load_rho))

    def fit(self, feature_set: str, hp: dict, train: np.ndarray):
        """A fresh estimator fitted on the rows at positions `train` (and the step rows beside them)."""
        return fit_fold(self.estimator(feature_set, hp), self.rows, train, self.step_rows)

    def __call__(self, trial) -> float:
        import optuna

        feature_set, hp = suggest(trial, self.space)
        scores, models = [], []
        for step, fold in enumerate(self.inner):
            model = self.fit(feature_set, hp, fold.train)
            with np.errstate(over="ignore", invalid="ignore"):
                pred = np.asarray(model.predict(self.rows.iloc[fold.test]), dtype=float)
            models.append(model)
            scores.append(score(self.y[fold.test], pred, self.labels[fold.test]))
            trial.report(float(np.mean(scores)), step)
            if trial.should_prune():
                raise optuna.TrialPruned()
        trial.set_user_attr("fold_scores", [float(x) for x in scores])  # for the selection's paired comparison
        value = float(np.mean(scores))
        # minimised; a NaN score (a failed trial in Optuna) is never kept and never stands in a later trial's way
        if not math.isnan(value) and (self._best is None or value < self._best):
            self._best, self.models = value, {trial.number: models}
        return value


# ---------------------------------------------------------------------------------------------------------
# studies


@dataclass(frozen=True)
class StudyTask:
    """One (target, algorithm) over every outer fold of a plan: one worker's unit of work."""

    rows: pd.DataFrame
    plans: tuple[OuterPlan, ...]
    target: str
    algorithm: str
    space: AlgorithmSpace
    settings: Settings
    storage: str | Path  # a storage URL (the shared PostgreSQL server: search/storage.py), or a sqlite file
    fingerprint: str  # configuration + data + code; a changed one starts fresh studies
    # A power task's outer-test rows are predicted the way they are served: a Poisson load's requests in flight
    # solved by an ITL model of the same outer fold (trained on its training rows): `itl_model`, the ITL selection's
    # for that fold, or else one fitted from `itl_config` (algorithm, feature set, hyperparameters).
    itl_model: object | None = None
    itl_config: tuple[str, str, dict] | None = None
    # A power task's rows measured with an ITL and no power (LLM-Inference-Bench's latency runs): what each fold's
    # step time may also learn from, those sharing no held-out group with the fold (evaluation.cv.beside_training).
    step_rows: pd.DataFrame | None = None

    def objective(self, plan: OuterPlan) -> Objective:
        return Objective(self.rows, plan.inner, self.target, self.algorithm, self.space, self.settings, self.step_rows)


@dataclass
class FoldOutcome:
    fold: str
    feature_set: str
    hyperparameters: dict
    inner_score: float
    test: np.ndarray  # positions in the task's rows
    y_pred: np.ndarray
    trials: list[dict] = field(default_factory=list)
    fold_scores: tuple[float, ...] = ()  # the best trial's score on each inner fold (its mean is inner_score)
    # level -> (lo, hi) per test row: conformal bounds calibrated on the inner folds' held-out residuals
    bounds: dict[float, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    model: object | None = None  # the chosen trial refitted on the outer-training rows (None without test rows)
    seeds: int = 0  # the study's first trials were the seeded configurations (params.yaml first_trials)


def study_name(task: StudyTask, fold: str) -> str:
    return f"{task.target}|{task.algorithm}|{fold}|{task.fingerprint}"


def sampler_seed(seed: int, name: str) -> int:
    return (seed + zlib.crc32(name.encode())) % 2**31


def run_study(task: StudyTask, plan: OuterPlan, objective: Objective, progress=None, worker: int = 0,
              wait: bool = True):
    """Create or resume (same name, same storage) the study of one outer fold; top it up to n_trials, in a storage
    any number of workers may share (storage.py); `wait`: until theirs are done too. Worker k > 0 (`wattgpu search
    worker`) samples with the study's seed + k: workers of one study must not draw the same configurations."""
    import optuna

    s = task.settings
    name = study_name(task, plan.outer.name)
    # Seeded by what the study is, not by its fingerprint: an unrelated edit does not reshuffle every study.
    seed = (sampler_seed(s.seed, f"{task.target}|{task.algorithm}|{plan.outer.name}") + worker) % 2**31
    study = optuna.create_study(
        study_name=name, storage=storage.open_storage(task.storage), load_if_exists=True, direction="minimize",
        sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=s.pruner_startup_trials, n_warmup_steps=0),
    )
    done = storage.spent(study)[0]
    if progress is not None and done:
        progress(min(done, s.n_trials))
    callbacks = [lambda _study, _trial: progress(1)] if progress is not None else []
    storage.run_to_budget(task.storage, study, objective, s.n_trials, task.space.first_trials, callbacks,
                          catch=(ValueError, ArithmeticError, np.linalg.LinAlgError), wait=wait)
    return study


def trial_records(study) -> list[dict]:
    return [
        {"number": t.number, "state": t.state.name, "value": t.value, "params": dict(t.params),
         "steps": len(t.intermediate_values)}
        for t in study.get_trials(deepcopy=False)
        if t.state.is_finished()
    ]


def run_task(task: StudyTask, progress=None) -> list[FoldOutcome]:
    """Every outer fold: study on its training rows, refit the best trial there, predict its test rows."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    outcomes = []
    for plan in task.plans:
        assert_inner_inside(plan)
        objective = task.objective(plan)
        study = run_study(task, plan, objective, progress)
        best = study.best_trial
        params = dict(best.params)
        feature_set = params.pop("feature_set", task.space.feature_sets[0])
        test = plan.outer.test
        y_pred, bounds, model = np.array([], dtype=float), {}, None
        if len(test):
            model = objective.fit(feature_set, params, plan.outer.train)
            served, predictions = served_predictions(task.rows.iloc[test],
                                                     serving_models(task, plan.outer.train, model, task.itl_model))
            y_pred = predictions[task.target]
            reuse = objective.models.get(best.number) if plan.calibrates_on_inner else None
            bounds = outer_bounds(task, plan, objective, feature_set, params, y_pred, reuse, served)
        outcomes.append(FoldOutcome(plan.outer.name, feature_set, params, float(best.value), test, y_pred,
                                    trial_records(study), tuple(best.user_attrs.get("fold_scores", ())), bounds,
                                    model, len(task.space.first_trials)))
    return outcomes


def serving_models(task: StudyTask, train: np.ndarray, model, itl=None) -> dict[str, object]:
    """The models that answer a row held out of `train` the way the Predictor serves it: `model` (fitted on `train`),
    and for a power model the ITL model that solves a Poisson load's requests in flight: `itl` where given (the outer
    fold's ITL selection, StudyTask.itl_model), else one fitted from `itl_config` on the rows of `train` that have an
    ITL and the step rows beside them (nothing of the held-out rows)."""
    if task.target == "itl":
        return {"itl": model}
    if itl is None:
        if task.itl_config is None:  # served_predictions says so if a test row needs one
            return {task.target: model}
        itl = _solver(task, train)
    return {"itl": itl, task.target: model}


_SOLVERS: dict[tuple, object] = {}  # the ITL solvers of this process's folds: every power algorithm shares a fold's


def _solver(task: StudyTask, train: np.ndarray):
    """`task.itl_config` fitted on the rows of `train` that have an ITL and the step rows beside them (once per fold
    and process: the power algorithms of one fold share it)."""
    key = (task.target, task.fingerprint, repr(task.itl_config), len(task.rows), zlib.crc32(train.tobytes()),
           len(train))
    if key not in _SOLVERS:
        if len(_SOLVERS) >= 64:
            _SOLVERS.clear()
        algorithm, feature_set, hp = task.itl_config
        _SOLVERS[key] = make_estimator(algorithm, "itl", feature_set, hp, seed=task.settings.seed,
                                       n_jobs=task.settings.n_jobs
                                       ).fit(itl_training_rows(task.rows, train, task.step_rows))
    return _SOLVERS[key]


def outer_bounds(task: StudyTask, plan: OuterPlan, objective: Objective, feature_set: str, params: dict,
                 y_pred: np.ndarray, models: list | None = None,
                 test_rows: pd.DataFrame | None = None) -> dict[float, tuple[np.ndarray, np.ndarray]]:
    """Intervals for the outer-test rows at every intervals.LEVELS: scores from the chosen configuration refitted
    on each calibration fold (outer-training rows only), each held-out row predicted as it is served (a power model's
    Poisson rows at the requests in flight an ITL model fitted on the same fold solves), extrapolation judged against
    the outer-training ranges. `models`: the chosen trial's own models of the calibration folds (the inner folds),
    when this process fitted them; the refits would be the same models (every fit is seeded and single-threaded)."""
    own = dict(zip((f.name for f in plan.inner), models)) if models is not None and plan.calibrates_on_inner else {}

    def predict_fold(fold: Fold) -> tuple[pd.DataFrame, np.ndarray]:
        model = own.get(fold.name)
        model = objective.fit(feature_set, params, fold.train) if model is None else model
        served, predictions = served_predictions(task.rows.iloc[fold.test], serving_models(task, fold.train, model))
        return served, predictions[task.target]

    cal = intervals.calibrate(predict_fold, task.rows, objective.y, plan.calibration or plan.inner)
    test = task.rows.iloc[plan.outer.test] if test_rows is None else test_rows  # as served (predictor.as_served)
    train = task.rows.iloc[plan.outer.train]
    extrap = intervals.extrapolating(test, coverage.training_ranges(train))
    novel = intervals.novel_family(test, set(accelerator_families(train)))  # unseen family: abstain
    group = intervals.workload_group(test)
    limits = TARGETS[task.target].limits(test)
    return {level: intervals.bounds(cal, y_pred, group, extrap, level, novel, limits) for level in intervals.LEVELS}


def assert_inner_inside(plan: OuterPlan) -> None:
    """The nested promise: every inner index (training or scoring) is an outer-training row."""
    train = set(plan.outer.train.tolist())
    for f in (*plan.inner, *plan.calibration):
        assert set(f.train.tolist()) <= train and set(f.test.tolist()) <= train, f"{plan.outer.name}: inner leak"


def displaces(challenger: FoldOutcome, default: FoldOutcome) -> bool:
    """The one-standard-error rule on paired inner folds: `challenger` beats `default` by more than one standard
    error of their per-fold score differences (with one fold: by anything)."""
    a, b = np.asarray(challenger.fold_scores, dtype=float), np.asarray(default.fold_scores, dtype=float)
    if len(a) != len(b) or len(a) == 0:  # no per-fold record: compare the means
        return challenger.inner_score < default.inner_score
    diff = a - b
    se = float(np.std(diff, ddof=1) / math.sqrt(len(diff))) if len(diff) > 1 else 0.0
    return float(np.mean(diff)) + se < 0


def select(outcomes: dict[str, list[FoldOutcome]], default: str | None = None) -> list[tuple[str, FoldOutcome]]:
    """Per outer fold, the algorithm whose best trial scored lowest on the inner CV (ties: first listed).

    With a `default` algorithm, another one replaces it only where it `displaces` it (wins by more than one
    standard error over the inner folds); among those, the lowest inner score. The best of a few noisy trials on
    few inner folds is a biased estimate (the winner's curse), and the bias grows with how flexible the model is;
    the rule keeps a small, uncertain inner win from swapping a structured model for a flexible one.
    """
    by_fold: dict[str, list[tuple[str, FoldOutcome]]] = {}
    for algorithm, results in outcomes.items():
        for r in results:
            by_fold.setdefault(r.fold, []).append((algorithm, r))
    chosen = []
    for _, cands in sorted(by_fold.items()):
        base = next((c for c in cands if c[0] == default), None)
        if base is not None:
            cands = [base] + [c for c in cands if c[0] != default and displaces(c[1], base[1])]
        chosen.append(min(cands, key=lambda c: c[1].inner_score))
    return chosen


def tested_positions(plans: list[OuterPlan]) -> np.ndarray:
    return np.unique(np.concatenate([p.outer.test for p in plans]))


def _assemble(n: int, outcomes: list[FoldOutcome]) -> np.ndarray:
    y_pred = np.full(n, np.nan)
    for o in outcomes:
        y_pred[o.test] = o.y_pred
    return y_pred


def _assemble_bounds(n: int, outcomes: list[FoldOutcome]) -> dict[float, tuple[np.ndarray, np.ndarray]]:
    out = {}
    for level in intervals.LEVELS:
        lo, hi = np.full(n, np.nan), np.full(n, np.nan)
        for o in outcomes:
            if level in o.bounds:
                lo[o.test], hi[o.test] = o.bounds[level]
        out[level] = (lo, hi)
    return out


def compare(rows: pd.DataFrame, target: str, plans: list[OuterPlan], outcomes: dict[str, list[FoldOutcome]],
            algorithms: list[str], references: dict[str, np.ndarray],
            default: str | None = None) -> tuple[pd.DataFrame, dict, list[dict]]:
    """Outer-test predictions of every algorithm, of the nested selection (and of the plain lowest-inner-score
    selection, for comparison) and of the reference models, all on the same rows (the union of the outer test
    folds); how often the selection chose each algorithm; and one record per (algorithm, outer fold) study."""
    tested = tested_positions(plans)
    candidates = {a: outcomes[a] for a in algorithms}
    choice = select(candidates, default)
    chosen = {o.fold: a for a, o in choice}
    preds = {a: _assemble(len(rows), outcomes[a]) for a in algorithms}
    preds[SELECTION] = _assemble(len(rows), [o for _, o in choice])
    if default is not None:
        preds[PLAIN_SELECTION] = _assemble(len(rows), [o for _, o in select(candidates, None)])
    bounds = {a: _assemble_bounds(len(rows), outcomes[a]) for a in algorithms}
    bounds[SELECTION] = _assemble_bounds(len(rows), [o for _, o in choice])
    preds.update(references)
    frame = pd.concat([prediction_frame(rows, target, m, y, bounds.get(m)).iloc[tested] for m, y in preds.items()],
                      ignore_index=True)
    counts = dict(sorted(Counter(a for a, _ in choice).items()))
    y_true = rows[TARGETS[target].column].to_numpy(dtype=float)
    labels = score_groups(rows)
    studies = []
    for algorithm in algorithms:
        for o in outcomes[algorithm]:
            states = Counter(t["state"] for t in o.trials)
            seeded = [t["value"] for t in o.trials if t["number"] < o.seeds and t["state"] == "COMPLETE"]
            studies.append({
                "target": target, "algorithm": algorithm, "fold": o.fold, "selected": chosen.get(o.fold) == algorithm,
                "inner_score": o.inner_score, "inner_fold_scores": json.dumps([round(x, 4) for x in o.fold_scores]),
                "outer_score": score(y_true[o.test], o.y_pred, labels[o.test]) if len(o.test) else np.nan,
                "feature_set": o.feature_set, "hyperparameters": json.dumps(o.hyperparameters, sort_keys=True),
                "trials_complete": states.get("COMPLETE", 0), "trials_pruned": states.get("PRUNED", 0),
                "trials_failed": states.get("FAIL", 0),
                # the best seeded configuration's inner score beside the best found (a search that searches
                # finds better than its seeds)
                "seed_inner_score": min(seeded) if seeded else np.nan,
                "seed_won": bool(seeded) and min(seeded) <= o.inner_score,
            })
    return frame, counts, studies


# ---------------------------------------------------------------------------------------------------------
# running many tasks: worker processes (spawned, so no OpenMP state is forked), progress through a queue

_PROGRESS = None


def _init_worker(queue, step_fits) -> None:
    global _PROGRESS
    _PROGRESS = queue
    steptime.SOLVED_STORE.open(step_fits)  # the parent's: a spawned process starts with none


def _run_in_worker(task: StudyTask) -> list[FoldOutcome]:
    from threadpoolctl import threadpool_limits

    with threadpool_limits(task.settings.n_jobs):
        return run_task(task, progress=_PROGRESS.put if _PROGRESS is not None else None)


def run_tasks(tasks: list[StudyTask], n_workers: int, description: str = "search") -> list[list[FoldOutcome]]:
    """Run every task (in `n_workers` processes when > 1) with one progress bar over all trials.

    Results do not depend on the number of workers: each study has its own seed and storage, each fit a fixed
    number of threads.
    """
    from tqdm import tqdm

    total = sum(len(t.plans) * t.settings.n_trials for t in tasks)
    with tqdm(total=total, desc=description, unit="trial", smoothing=0.05, mininterval=2.0) as bar:
        if n_workers <= 1 or len(tasks) <= 1:
            return [run_task(t, progress=bar.update) for t in tasks]
        import multiprocessing as mp
        import queue as queue_errors
        from concurrent.futures import ProcessPoolExecutor, wait

        ctx = mp.get_context("spawn")
        progress = ctx.Queue()
        with ProcessPoolExecutor(n_workers, mp_context=ctx, initializer=_init_worker,
                                 initargs=(progress, steptime.SOLVED_STORE.root)) as pool:
            futures = [pool.submit(_run_in_worker, t) for t in tasks]
            pending = set(futures)
            while pending:
                _, pending = wait(pending, timeout=0.5)
                while True:
                    try:
                        bar.update(progress.get_nowait())
                    except queue_errors.Empty:
                        break
            return [f.result() for f in futures]
