"""Typed parameters: `params.yaml` parsed into pydantic models that reject unknown keys.

Each stage reads only its own section (plus `base`), so DVC reruns only the stages whose keys changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from wattgpu.errors import WattgpuError
from wattgpu.workload import OFFLINE_MAX_NUM_SEQS, PRESETS


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Base(Strict):
    seed: int = 42
    targets: tuple[str, ...] = ("power", "itl")


class Ingest(Strict):
    sources: tuple[str, ...] = ("wattcounts_processed", "mlenergy_v2", "mlenergy_legacy", "llm_inference_bench")
    max_power_tdp_ratio: float = Field(1.3, gt=0)
    min_power_tdp_ratio: float = Field(0.02, ge=0)
    min_tokens_for_itl: float = Field(2.0, gt=0)
    min_itl_roofline_ratio: float = Field(0.5, ge=0)
    wattcounts_original: str | None = None  # path to the original subset layout, when a user has it


class Regime(Strict):
    kind: Literal["group_kfold", "row_kfold", "logo", "lolo", "lopo", "loso", "loeo"]
    n_splits: int = Field(5, ge=2)
    max_pairs: int | None = Field(None, ge=1)  # lopo: evaluate a seeded sample of pairs (None = all)
    groups: int | None = Field(None, ge=2)  # logo / lolo: this many seeded groups of GPUs / LLMs (None: one each)

    @model_validator(mode="after")
    def _groups_of_gpus_or_llms(self) -> Regime:
        if self.groups is not None and self.kind not in ("logo", "lolo"):
            raise ValueError(f"`groups` groups the GPUs (logo) or LLMs (lolo) held out together, not {self.kind} folds")
        return self


class XgbParams(Strict):
    max_depth: int = 6
    n_estimators: int = 200
    reg_lambda: float = 150.0
    learning_rate: float = 0.3


class Replica(Strict):
    power: XgbParams = XgbParams(max_depth=6, n_estimators=200, reg_lambda=150)
    itl: XgbParams = XgbParams(max_depth=5, n_estimators=100, reg_lambda=100)
    dense_only: bool = True


class Evaluate(Strict):
    source: str = "wattcounts_processed"
    regimes: dict[str, Regime]
    load_rho: dict[str, float] = dict(zip(PRESETS, (0.9, 0.2, 0.6)))  # load-scaled TDP: share of TDP per preset
    roofline_offline_batch: float = float(OFFLINE_MAX_NUM_SEQS)  # sequences decoded together offline
    replica: Replica = Replica()
    n_jobs: int = 2


class Registry(Strict):
    """Final models: MLflow registered-model names and the champion/challenger promotion rule (wattgpu.registry)."""

    names: dict[Literal["power", "itl"], str] = {"power": "wattgpu-power", "itl": "wattgpu-itl"}
    # Regime whose `evaluate` figures stand for the paper-replica fallback (used while the search stage has
    # written no reports/search/best_<target>.json).
    replica_regime: str = "logo"
    # Champion and challenger are scored on the same outer folds; a challenger of another configuration is promoted
    # only when its mean per-fold score is lower by more than the margin: min_gain_pp (points of the score, a
    # geometric mean of MdAPE %) and se_multiple standard errors of the per-fold differences (the noise between
    # folds), whichever is larger; one of the champion's configuration when it is no worse than that margin.
    min_gain_pp: float = Field(0.1, ge=0)
    se_multiple: float = Field(2.0, ge=0)


class SearchProfile(Strict):
    """How much searching: one switch in params.yaml (`search.profile`) picks one of these."""

    n_trials: int = Field(6, ge=1)  # Optuna trials per (target, algorithm, outer fold) study
    inner_folds: int = Field(3, ge=0)  # inner CV folds; 0 = one per group (the regime's own leave-one-out)
    max_pairs: int | None = Field(8, ge=1)  # lopo: seeded sample of outer (GPU, LLM) pairs; None = all
    # conformal calibration folds, grouped like inner_folds (0 = one per group); null: the inner folds themselves,
    # the chosen trial's own inner-fold models (no refit of the model)
    calibration_folds: int | None = Field(6, ge=0)

    algorithms: tuple[str, ...] | None = None  # the candidates this profile searches (null: every one in `algorithms`)

    @property
    def calibration_splits(self) -> int:
        """How many calibration folds a model fitted on all rows uses (the inner folds' count where null)."""
        return self.inner_folds if self.calibration_folds is None else self.calibration_folds


class Hyperparameter(Strict):
    """One dimension of a search space, in Optuna's terms (suggest_int / suggest_float / suggest_categorical)."""

    type: Literal["int", "float", "categorical"]
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False
    choices: tuple[str | bool | int | float, ...] | None = None

    @model_validator(mode="after")
    def _complete(self) -> Hyperparameter:
        if self.type == "categorical":
            if not self.choices:
                raise ValueError("a categorical hyperparameter needs `choices`")
        elif self.low is None or self.high is None or not self.low < self.high:
            raise ValueError(f"an {self.type} hyperparameter needs low < high")
        return self


class AlgorithmSpace(Strict):
    """An algorithm's feature sets, its search space and known-good first trials (enqueued before TPE samples)."""

    feature_sets: tuple[Literal["paper", "physics", "physics_core", "workload"], ...] = ("physics",)
    targets: tuple[Literal["power", "itl"], ...] = ("power", "itl")  # the targets it is a candidate for
    space: dict[str, Hyperparameter]
    first_trials: tuple[dict[str, Any], ...] = ()

    @model_validator(mode="after")
    def _first_trials_in_space(self) -> AlgorithmSpace:
        allowed = set(self.space) | ({"feature_set"} if len(self.feature_sets) > 1 else set())
        for trial in self.first_trials:
            if set(trial) != allowed:
                raise ValueError(f"first trial {trial} must set exactly {sorted(allowed)}")
        return self


AlgorithmName = Literal["xgboost", "lightgbm", "extra_trees", "spline_ridge", "knn", "physics", "workload", "steppower"]


class Search(Strict):
    """Nested Optuna search over algorithms and hyperparameters under each CV regime (stage `search`)."""

    profile: str = "small"
    profiles: dict[str, SearchProfile]
    source: str | None = None  # the rows searched and registered: one source, or every source (null)
    dense_only: bool = False  # leave MoE LLMs out
    primary_regime: str = "logo"  # the regime whose winner is written to reports/search/best_<target>.json
    regimes: dict[str, Regime]
    algorithms: dict[AlgorithmName, AlgorithmSpace]
    default_algorithm: AlgorithmName | None = None  # nested selection: displaced only by a win > 1 SE (nested.select)
    storage: str | None = None  # Optuna studies: null = sqlite files under optuna/; a postgresql:// URL shared by
    # workers on any machine ($WATTGPU_OPTUNA_STORAGE wins; search/storage.py). Not a DVC parameter of any stage.
    pruner_startup_trials: int = Field(2, ge=0)  # MedianPruner: trials that run every inner fold before pruning
    n_workers: int = Field(2, ge=1)  # processes, one (target, algorithm) study sequence each
    n_jobs: int = Field(1, ge=1)  # threads per model fit (fixed: results do not depend on scheduling)

    @model_validator(mode="after")
    def _known_names(self) -> Search:
        if self.profile not in self.profiles:
            raise ValueError(f"profile {self.profile!r} is not one of {sorted(self.profiles)}")
        if self.primary_regime not in self.regimes:
            raise ValueError(f"primary_regime {self.primary_regime!r} is not one of {sorted(self.regimes)}")
        if self.default_algorithm is not None and self.default_algorithm not in self.algorithms:
            raise ValueError(f"default_algorithm {self.default_algorithm!r} is not one of {sorted(self.algorithms)}")
        for name, profile in self.profiles.items():
            unknown = sorted(set(profile.algorithms or ()) - set(self.algorithms))
            if unknown:
                raise ValueError(f"profiles.{name}.algorithms: {unknown} not in `algorithms` ({sorted(self.algorithms)})")
            if profile.algorithms is not None and self.default_algorithm not in (None, *profile.algorithms):
                raise ValueError(f"profiles.{name}.algorithms must include default_algorithm {self.default_algorithm!r}")
        return self

    @property
    def active(self) -> SearchProfile:
        return self.profiles[self.profile]

    @property
    def candidates(self) -> dict[str, AlgorithmSpace]:
        """The algorithms the active profile searches, in `algorithms`' order."""
        chosen = self.active.algorithms
        return {a: space for a, space in self.algorithms.items() if chosen is None or a in chosen}


class Params(Strict):
    base: Base = Base()
    ingest: Ingest = Ingest()
    evaluate: Evaluate | None = None
    search: Search | None = None
    registry: Registry | None = None
    serve: dict[str, Any] | None = None


def load_params(path: Path | str = "params.yaml") -> Params:
    """Parse params.yaml; an unknown or mistyped key is a clear error naming it."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        raise WattgpuError(f"{path}: not found") from None
    try:
        return Params.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise WattgpuError(f"{path}: {where}: {err['msg']}") from None
