"""The adapter registry: source name (params.yaml `ingest.sources`) -> adapter and the raw folder it reads."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from wattgpu.sources.llm_inference_bench import read_llm_inference_bench
from wattgpu.sources.mlenergy import read_mlenergy_legacy, read_mlenergy_v2
from wattgpu.sources.wattcounts import read_wattcounts_processed  # the lead engineer's adapter
from wattgpu.sources.wattcounts_original import read_wattcounts_original


class Adapter(NamedTuple):
    """An adapter and the folder under `data/raw` it reads (None: no default folder, pass a path)."""

    read: Callable[[Path], pd.DataFrame]
    raw_subdir: str | None


# source name -> (adapter, raw subfolder). Unpacks as `read, subdir = ADAPTERS[name]`.
ADAPTERS: dict[str, Adapter] = {
    "wattcounts_processed": Adapter(read_wattcounts_processed, "wattcounts"),
    "mlenergy_v2": Adapter(read_mlenergy_v2, "mlenergy-v2"),
    "mlenergy_legacy": Adapter(read_mlenergy_legacy, "mlenergy-v2"),
    "llm_inference_bench": Adapter(read_llm_inference_bench, "llm-inference-bench"),
    # The original per-request layout is not among our raw datasets; give its path explicitly.
    "wattcounts_original": Adapter(read_wattcounts_original, None),
}
