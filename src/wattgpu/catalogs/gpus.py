"""The GPU catalog: one validated spec-sheet entry per GPU variant, looked up by key or alias.

The catalog lives in `data/catalogs/gpus.yaml` as `gpus: [<entry>, ...]`; each entry is a `GpuSpec`.
Names are matched case- and whitespace-insensitively, so "h100 nvl" finds "NVIDIA H100 NVL".
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from wattgpu import paths
from wattgpu.catalogs.base import NamedCatalog, normalize_name, validate_entry  # noqa: F401 (re-exported)
from wattgpu.errors import CatalogError
from wattgpu.fields import GPU_SPEC, name_field

FormFactor = Literal["SXM", "PCIe", "OAM", "superchip"]
_LIST_FIELDS = ("aliases", "source_urls")


class GpuSpec(BaseModel):
    """Public spec-sheet figures of one GPU variant; units are in the field names."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    key: str = name_field()  # canonical name: what NVML (or the vendor's SMI) reports
    display_name: str = Field(min_length=1)
    vendor: str = Field(min_length=1)
    architecture: str = Field(min_length=1)
    release_year: int = GPU_SPEC["release_year"].field()
    tdp_w: float = GPU_SPEC["tdp_w"].field()  # board (or module) power limit
    memory_gb: float = GPU_SPEC["memory_gb"].field()
    memory_type: str = Field(min_length=1)
    memory_bus_bits: int = GPU_SPEC["memory_bus_bits"].field()
    memory_bandwidth_gb_s: float = GPU_SPEC["memory_bandwidth_gb_s"].field()
    # Clocks and FP32 are null where the vendor publishes none (Gaudi, some AMD base clocks, B200).
    base_clock_mhz: float | None = GPU_SPEC["base_clock_mhz"].field()
    boost_clock_mhz: float | None = GPU_SPEC["boost_clock_mhz"].field()
    sm_count: int = GPU_SPEC["sm_count"].field()  # SMs (NVIDIA), CUs (AMD), Xe cores or TPCs (Intel)
    fp16_tensor_tflops: float = GPU_SPEC["fp16_tensor_tflops"].field()  # dense FP16/BF16 matrix, no sparsity
    fp32_tflops: float | None = GPU_SPEC["fp32_tflops"].field()  # non-tensor (vector) FP32
    transistors_m: float | None = GPU_SPEC["transistors_m"].field(default=None)
    process_nm: float | None = GPU_SPEC["process_nm"].field(default=None)
    l2_cache_mb: float | None = GPU_SPEC["l2_cache_mb"].field(default=None)
    # GPU-to-GPU bandwidth per GPU, both directions together (NVIDIA's NVLink convention): the vendor's headline
    # NVLink / Infinity Fabric / scale-up figure, else the PCIe link. Every catalogued GPU gives it (with its source);
    # None only for a spec that does not, which the features read as PCIe Gen4 x16 (physics.PCIE_GEN4_X16_GB_S).
    interconnect_bandwidth_gb_s: float | None = GPU_SPEC["interconnect_bandwidth_gb_s"].field(default=None)
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
    text = p.read_text(encoding="utf-8")
    try:
        return _parsed(text)
    except CatalogError:
        return _parse_text(text, str(p))  # the same error, naming the file


@functools.lru_cache(maxsize=8)
def _parsed(text: str) -> GpuCatalog:
    """Parsed once per file content, wherever it lies (the project's catalog and a model folder's copy are the same
    text: one parse, ~25 ms, per process)."""
    return _parse_text(text, "<text>")


def _parse_text(text: str, source: str) -> GpuCatalog:
    """With libyaml's parser where present (the pure-Python one costs ~0.15 s a file)."""
    try:
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise CatalogError(source, "<file>", f"not valid YAML: {exc}") from None
    return parse_gpu_catalog(doc, source=source)


_HEADER = (
    "# GPU catalog: one entry per GPU variant, from public spec sheets (see source_urls of each entry).\n"
    "# Units are in field names. fp16_tensor_tflops is DENSE FP16/BF16 matrix throughput (no sparsity).\n"
    "# interconnect_bandwidth_gb_s: GPU-to-GPU bandwidth per GPU, both directions together (NVLink's convention).\n"
    "# Validated by wattgpu.catalogs.gpus.GpuSpec; null only where a field is optional.\n"
)


def dump_gpu_catalog(cat: GpuCatalog, path: Path | str) -> None:
    """Write `cat` as YAML in the layout `load_gpu_catalog` reads (comments are not preserved)."""
    doc = {"gpus": [spec.to_mapping() for spec in cat]}
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)
    Path(path).write_text(_HEADER + text, encoding="utf-8")
