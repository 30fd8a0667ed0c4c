"""Typed parameters: `params.yaml` parsed into pydantic models that reject unknown keys.

Each stage reads only its own section (plus `base`), so DVC reruns only the stages whose keys changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from wattgpu.errors import WattgpuError


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
    kind: Literal["group_kfold", "row_kfold", "logo", "lolo", "lopo"]
    n_splits: int = Field(5, ge=2)
    max_pairs: int | None = Field(None, ge=1)  # lopo: evaluate a seeded sample of pairs (None = all)


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
    load_rho: dict[str, float] = {"offline": 0.9, "server_low": 0.2, "server_high": 0.6}
    roofline_offline_batch: float = 256.0
    replica: Replica = Replica()
    n_jobs: int = 2


class Params(Strict):
    base: Base = Base()
    ingest: Ingest = Ingest()
    evaluate: Evaluate | None = None
    search: dict[str, Any] | None = None
    registry: dict[str, Any] | None = None
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
