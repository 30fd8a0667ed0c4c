"""Measured idle power per GPU (the paper's nvidia-smi readings), used only by the paper replica."""

from __future__ import annotations

from pathlib import Path

import yaml


def load_idle_power(path: Path, gpus) -> dict[str, float]:
    """{catalog key: idle W} from `data/catalogs/gpu_idle_power.yaml`; names resolve through `gpus`."""
    raw = yaml.safe_load(Path(path).read_text())["idle_power_w"]
    return {gpus.resolve(name): float(w) for name, w in raw.items()}
