"""The GPU catalog: one validated spec-sheet entry per GPU variant, looked up by key or alias.

The catalog lives in `data/catalogs/gpus.yaml` as `gpus: [<entry>, ...]`; each entry is a `GpuSpec`.
Names are matched case- and whitespace-insensitively, so "h100 nvl" finds "NVIDIA H100 NVL".
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from wattgpu import paths
from wattgpu.catalogs.base import NamedCatalog, normalize_name, validate_entry  # noqa: F401 (re-exported)
from wattgpu.errors import CatalogError

FormFactor = Literal["SXM", "PCIe", "OAM", "superchip"]
_LIST_FIELDS = ("aliases", "source_urls")


class GpuSpec(BaseModel):
    """Public spec-sheet figures of one GPU variant; units are in the field names."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    key: str = Field(min_length=1)  # canonical name: what NVML (or the vendor's SMI) reports
    display_name: str = Field(min_length=1)
    vendor: str = Field(min_length=1)
    architecture: str = Field(min_length=1)
    release_year: int = Field(ge=2010, le=2030)
    tdp_w: float = Field(ge=10, le=2000)  # board (or module) power limit
    memory_gb: float = Field(ge=1, le=1024)
    memory_type: str = Field(min_length=1)
    memory_bus_bits: int = Field(ge=32, le=16384)
    memory_bandwidth_gb_s: float = Field(ge=50, le=20000)
    # Clocks and FP32 are null where the vendor publishes none (Gaudi, some AMD base clocks, B200).
    base_clock_mhz: float | None = Field(ge=100, le=4000)
    boost_clock_mhz: float | None = Field(ge=100, le=4000)
    sm_count: int = Field(ge=1, le=1000)  # SMs (NVIDIA), CUs (AMD), Xe cores or TPCs (Intel)
    fp16_tensor_tflops: float = Field(ge=1, le=10000)  # dense FP16/BF16 matrix, no sparsity
    fp32_tflops: float | None = Field(ge=0.1, le=1000)  # non-tensor (vector) FP32
    transistors_m: float | None = Field(default=None, ge=100, le=1_000_000)
    process_nm: float | None = Field(default=None, ge=1, le=100)
    l2_cache_mb: float | None = Field(default=None, ge=0.1, le=1024)
    form_factor: FormFactor
    aliases: tuple[str, ...] = Field(default=(), strict=False)
    source_urls: tuple[str, ...] = Field(min_length=1, strict=False)
    notes: str = ""

    @model_validator(mode="before")
    @classmethod
    def _one_or_many_sources(cls, data: Any) -> Any:
        """Accept `source_url: <url>` as shorthand for `source_urls: [<url>]`."""
        if isinstance(data, Mapping) and "source_url" in data:
            data = dict(data)
            if "source_urls" in data:
                raise ValueError("give source_url or source_urls, not both")
            url = data.pop("source_url")
            data["source_urls"] = [url] if isinstance(url, str) else url
        if isinstance(data, Mapping) and data.get("notes", "") is None:
            data = {**data, "notes": ""}
        return data

    @field_validator("boost_clock_mhz")
    @classmethod
    def _boost_not_below_base(cls, boost: float | None, info: ValidationInfo) -> float | None:
        base = info.data.get("base_clock_mhz")
        if boost is not None and base is not None and boost < base:
            raise ValueError(f"boost clock {boost} MHz is below base clock {base} MHz")
        return boost

    @field_validator("aliases", "source_urls")
    @classmethod
    def _non_empty_strings(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        for v in values:
            if not isinstance(v, str) or not v.strip():
                raise ValueError(f"every item must be a non-empty string, got {v!r}")
        return values

    @property
    def source_url(self) -> str:
        """The first (primary) source."""
        return self.source_urls[0]

    @property
    def names(self) -> tuple[str, ...]:
        """The key followed by every alias."""
        return (self.key, *self.aliases)

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any], entry: str) -> GpuSpec:
        """Validate one catalog entry; a failure becomes a `CatalogError` naming `entry` and the field."""
        return validate_entry(cls, d, entry)

    def to_mapping(self) -> dict[str, Any]:
        """Plain dict in catalog field order (lists for aliases and sources), for YAML."""
        d = self.model_dump()
        for f in _LIST_FIELDS:
            d[f] = list(d[f])
        return d


class GpuCatalog(NamedCatalog[GpuSpec]):
    """An immutable, ordered set of `GpuSpec`s with a case- and whitespace-insensitive key-and-alias index."""

    kind = "GPU"
    list_fields = _LIST_FIELDS


def parse_gpu_catalog(doc: Any, source: str = "GPU catalog") -> GpuCatalog:
    """Validate a loaded YAML document of the form `{gpus: [entry, ...]}`."""
    if not isinstance(doc, Mapping) or set(doc) != {"gpus"} or not isinstance(doc["gpus"], list):
        raise CatalogError(source, "gpus", "the file must hold exactly one top-level key, `gpus`, with a list of entries")
    specs = []
    for i, entry in enumerate(doc["gpus"]):
        label = str(entry.get("key")) if isinstance(entry, Mapping) and entry.get("key") else f"#{i + 1}"
        specs.append(GpuSpec.from_mapping(entry, label))
    return GpuCatalog(specs)


def load_gpu_catalog(path: Path | str | None = None) -> GpuCatalog:
    """Load and validate the GPU catalog (default: `data/catalogs/gpus.yaml` under the project root)."""
    p = paths.resolve(path if path is not None else paths.GPU_CATALOG)
    with open(p, encoding="utf-8") as fh:
        doc = yaml.safe_load(fh)
    return parse_gpu_catalog(doc, source=str(p))


_HEADER = (
    "# GPU catalog: one entry per GPU variant, from public spec sheets (see source_urls of each entry).\n"
    "# Units are in field names. fp16_tensor_tflops is DENSE FP16/BF16 matrix throughput (no sparsity).\n"
    "# Validated by wattgpu.catalogs.gpus.GpuSpec; null only where a field is optional.\n"
)


def dump_gpu_catalog(cat: GpuCatalog, path: Path | str) -> None:
    """Write `cat` as YAML in the layout `load_gpu_catalog` reads (comments are not preserved)."""
    doc = {"gpus": [spec.to_mapping() for spec in cat]}
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)
    Path(path).write_text(_HEADER + text, encoding="utf-8")
