"""The registered champions as a planner sees them, without loading the estimators: the folder, the catalogs the
models resolve names in, their versions, the input ranges they were trained on and the ITL model's error."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wattgpu import paths
from wattgpu.catalogs.gpus import GpuCatalog
from wattgpu.catalogs.llms import LlmCatalog
from wattgpu.errors import WattgpuError
from wattgpu.modeling import coverage
from wattgpu.modeling.store import META, TARGET_DIRS, read_catalogs, read_meta

NEAR_TARGET = 0.10  # close call: predicted ITL this near the target (when meta.json has no LOGO server MdAPE)


@dataclass(frozen=True)
class ModelSet:
    """models/power and models/itl (or another folder holding both)."""

    folder: Path
    gpus: GpuCatalog
    llms: LlmCatalog
    metas: dict[str, dict[str, Any]]
    registry: dict[str, Any]

    @classmethod
    def load(cls, folder: Path | None = None) -> ModelSet:
        folder = paths.models_folder(folder)
        for t in TARGET_DIRS:
            if not (folder / t / META).exists():
                raise WattgpuError(f"no {t} model at {folder / t}: run `dvc repro` (the register stage writes "
                                   "models/power and models/itl) or pass --models DIR")
        registry = folder / "registry.json"
        return cls(folder, *read_catalogs(folder / "power"), {t: read_meta(folder / t) for t in TARGET_DIRS},
                   json.loads(registry.read_text()) if registry.exists() else {})

    @property
    def versions(self) -> dict[str, str]:
        """The registry's name, version and alias where the folder has a registry.json (the register stage's),
        else meta.json's version or algorithm (as modeling.store.load_predictor)."""
        out = {}
        for t, meta in self.metas.items():
            label = str(meta.get("version", meta.get("algorithm", "?")))
            entry = self.registry.get(t) if isinstance(self.registry.get(t), dict) else {}
            if entry.get("name") and entry.get("version") is not None:
                if entry.get("champion_version") is not None:  # the register stage keeps the champion in the folder
                    label = f"{entry['name']} v{entry['champion_version']} @champion ({label})"
                else:
                    alias = f" @{entry['alias']}" if entry.get("alias") else ""
                    label = f"{entry['name']} v{entry['version']}{alias} ({label})"
            out[t] = label
        return out

    @property
    def training_ranges(self) -> dict[str, list[float]]:
        """The input ranges both models were trained on (meta.json `training_ranges`; {} for older folders)."""
        return coverage.narrowest(m.get("training_ranges") or {} for m in self.metas.values())

    @property
    def itl_error(self) -> float:
        """The ITL model's server MdAPE on unseen GPUs (meta.json's evaluation figures), as a fraction."""
        mdape = (self.metas["itl"].get("evaluation") or {}).get("server_mdape")
        return float(mdape) / 100 if isinstance(mdape, (int, float)) and mdape > 0 else NEAR_TARGET
