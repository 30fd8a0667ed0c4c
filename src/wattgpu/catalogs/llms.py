"""The LLM catalog: one validated `LlmSpec` per LLM, built the way a user extends it.

Two inputs, both flattened Hugging Face configs:
- `data/catalogs/llm_configs/<org>--<name>.json`: a model's `config.json` (key `<org>/<name>`), plus the
  optional keys `_wattgpu_note` (e.g. "fine-tune of X; these are X's config fields") and `_wattgpu_aliases`;
- the paper's config table (`wattgpu-catalogs/model_features.csv`, `;`-separated, one row per `model_name`).

Parameter counts are computed from the config (`count_params`) and cross-checked against a published
count (`llm_published_params.yaml`, or the table's `total_b_params`): the catalog keeps the published
count where there is one and records which (`params_source`); gaps above 10 % go to the report.
"""

from __future__ import annotations

import functools
import io
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from wattgpu import paths, physics
from wattgpu.catalogs.base import NamedCatalog, normalize_name, validate_entry  # one matching rule for every catalog
from wattgpu.catalogs.hf_config import (
    Architecture,
    NotCountable,
    architecture_from_config,
    attention_params_b,
    count_or_none,
    count_params,
    present,
)
from wattgpu.errors import CatalogError, UnknownNameError
from wattgpu.fields import LLM_AT_MOST, LLM_CONFIG, LLM_DIVIDES, name_field

TABLE_SOURCE = "wattgpu-catalogs/model_features.csv"
MISMATCH_THRESHOLD = 0.10  # relative gap between computed and published counts worth reporting
NOTE_KEY, ALIASES_KEY = "_wattgpu_note", "_wattgpu_aliases"  # the only non-HF keys a config file may hold

# The same LLM under another name in another dataset, for keys that come from the config table.
TABLE_ALIASES: dict[str, tuple[str, ...]] = {
    "meta-llama/Llama-3.1-8B-Instruct": ("meta-llama/Meta-Llama-3.1-8B-Instruct",),  # ML.ENERGY v2
    "meta-llama/Llama-2-13b-chat-hf": ("metaai/Llama-2-13b-chat-hf",),  # ML.ENERGY legacy
}



class LlmSpec(BaseModel):
    """The config facts of one LLM that a prediction uses; parameter counts in billions."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str = name_field()
    total_params_b: float = LLM_CONFIG["total_params_b"].field()
    active_params_b: float = LLM_CONFIG["active_params_b"].field()  # per token; equals total for dense models
    num_layers: int = LLM_CONFIG["num_layers"].field()  # decoder layers (an encoder-decoder's encoder is not counted here)
    hidden_size: int = LLM_CONFIG["hidden_size"].field()
    num_attention_heads: int | None = LLM_CONFIG["num_attention_heads"].field()  # None: attention-free (Mamba, RWKV)
    num_kv_heads: int | None = LLM_CONFIG["num_kv_heads"].field()
    head_dim: int | None = LLM_CONFIG["head_dim"].field()  # None: hidden_size // num_attention_heads
    intermediate_size: int | None = LLM_CONFIG["intermediate_size"].field()  # per expert for MoE
    vocab_size: int = LLM_CONFIG["vocab_size"].field()
    max_position_embeddings: int | None = LLM_CONFIG["max_position_embeddings"].field()
    family: str = Field(min_length=1)  # HF model_type
    is_moe: bool
    num_experts: int | None = LLM_CONFIG["num_experts"].field()
    experts_per_token: int | None = LLM_CONFIG["experts_per_token"].field()
    dtype: str = Field(min_length=1)  # torch_dtype of the checkpoint; "unspecified" where the config has none
    weight_precision: str = "bf16"  # how the published weights are stored (quantization_config, else dtype)
    # Layers caching the whole context (None: every layer without a sliding window, none with one); the other layers
    # cache the last `sliding_window` tokens (None: no sliding-window layer; a catalog written before the window was
    # recorded lacks the column, and keeps its old meaning: only the kv_layers cache anything).
    kv_layers: int | None = LLM_CONFIG["kv_layers"].field(default=None)
    sliding_window: int | None = LLM_CONFIG["sliding_window"].field(default=None)
    kv_values_per_layer: int | None = LLM_CONFIG["kv_values_per_layer"].field(default=None)  # None: 2 x kv heads x head dim
    # linear-attention / state-space layers' fixed state per sequence (None: none, every token mixer is attention)
    state_values_per_sequence: int | None = LLM_CONFIG["state_values_per_sequence"].field(default=None)
    # multi-token-prediction layers (0: none in the config; None: not known, e.g. a catalog written before they were
    # recorded): `speculative: mtp` needs one or more
    mtp_layers: int | None = LLM_CONFIG["mtp_layers"].field(default=None)
    # the token-mixing layers' parameters counted from the config (hf_config.attention_params_b; None: not counted,
    # e.g. a catalog written before they were, or a layer kind without a rule): dp_attention_params_b uses them
    attention_params_b: float | None = LLM_CONFIG["attention_params_b"].field(default=None)
    params_source: Literal["published", "computed", "table"]
    computed_params_b: float | None = LLM_CONFIG["total_params_b"].field()  # from the config; None where not computable
    source: str
    aliases: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> LlmSpec:
        for lo, hi in LLM_AT_MOST:
            a, b = getattr(self, lo), getattr(self, hi)
            if a is not None and b is not None and a > b * (1 + 1e-9):
                raise ValueError(f"{lo} {a} exceeds {hi} {b}")
        for rule in LLM_DIVIDES:
            a, b = getattr(self, rule.divisor), getattr(self, rule.multiple)
            if not rule.holds(a, b, getattr(self, rule.unless) if rule.unless else None):
                raise ValueError(rule.problem(a, b))
        if not self.is_moe and not math.isclose(self.active_params_b, self.total_params_b, rel_tol=1e-9):
            raise ValueError("a dense model has active_params_b == total_params_b")
        if self.num_attention_heads is None and self.num_kv_heads is not None:
            raise ValueError("num_kv_heads is set but num_attention_heads is not")
        if self.num_attention_heads is not None and self.num_kv_heads is None:
            raise ValueError("num_kv_heads is missing (use num_attention_heads for multi-head attention)")
        if any(not a.strip() for a in self.aliases):
            raise ValueError("aliases must be non-empty strings")
        return self

    @property
    def names(self) -> tuple[str, ...]:
        """The key followed by every alias."""
        return (self.key, *self.aliases)

    @property
    def resolved_head_dim(self) -> int | None:
        if self.num_attention_heads is None:
            return None
        return self.head_dim if self.head_dim is not None else self.hidden_size // self.num_attention_heads

    def kv_cache_layout(self) -> tuple[float, float, float, float]:
        """(full layers, sliding-window layers, window tokens or NaN, values per layer): physics.kv_cache_layout."""
        def num(v):
            return np.nan if v is None else float(v)

        return tuple(float(x) for x in physics.kv_cache_layout(
            self.num_layers, num(self.num_attention_heads), num(self.num_kv_heads), num(self.head_dim),
            self.hidden_size, num(self.kv_layers), num(self.kv_values_per_layer), num(self.sliding_window)))

    def kv_cache_bytes_per_token(self, bytes_per_value: float = physics.BYTES_FP16) -> float:
        """KV cache per token of a context shorter than every sliding window: every attention layer (full and
        sliding) x 2 (K and V) x kv_heads x head_dim (or the latent) x bytes; 0 if attention-free. Longer contexts:
        kv_cache_bytes_per_sequence.

        For hybrids (nemotron_h) every layer is counted, so this is an upper bound.
        """
        full, sliding, _, values = self.kv_cache_layout()
        return float(physics.kv_bytes_per_token(full + sliding, values, bytes_per_value))

    def kv_cache_bytes_per_sequence(self, context_tokens: float,
                                    bytes_per_value: float = physics.BYTES_FP16) -> float:
        """KV cache of one sequence at `context_tokens`, sliding-window layers capped at their window, + the
        linear-attention / state-space layers' fixed state (physics.kv_bytes_per_sequence); attention-free: the state
        only."""
        return float(physics.kv_bytes_per_sequence(context_tokens, *self.kv_cache_layout(), bytes_per_value,
                                                   float(self.state_values_per_sequence or 0)))

    def dp_attention_params_b(self) -> float:
        """Parameters (billions) DP attention holds whole on every GPU (physics.dp_attention_params_b): the count
        from the config where the catalog has it, else the estimate from the attention's shape; 0 attention-free."""
        full, sliding, _, values = self.kv_cache_layout()
        heads = self.num_attention_heads or 0
        counted = np.nan if self.attention_params_b is None else self.attention_params_b
        return float(physics.dp_attention_params_b(counted, full + sliding, self.hidden_size, heads,
                                                   self.resolved_head_dim or 0, 0.0 if math.isnan(values) else values))

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any], entry: str) -> LlmSpec:
        """Validate one entry; a failure becomes a `CatalogError` naming `entry` and the field."""
        return validate_entry(cls, d, entry)



# ---------------------------------------------------------------------------------------------------------
# specs from a config.json and from the config table


def llm_spec_from_hf_config(
    key: str,
    config: Mapping[str, Any],
    published_params_b: float | None = None,
    source: str = "",
    *,
    published_active_b: float | None = None,
) -> LlmSpec:
    """One `LlmSpec` from a HF config; the published count (if given) wins over the computed one."""
    arch = architecture_from_config(key, config)
    try:
        computed: tuple[float, float] | None = count_params(arch, key)
    except NotCountable:
        if published_params_b is None:
            raise
        computed = None
    aliases = _aliases(key, config)

    if published_params_b is not None:
        total = float(published_params_b)
        if published_active_b is not None:
            active = float(published_active_b)
        elif arch.is_moe:
            if computed is None:
                raise CatalogError(key, "active_params_b", "a mixture of experts needs a published active count")
            active = computed[1]
        else:
            active = total
        params_source = "published"
    else:
        total, active = computed  # type: ignore[misc]
        params_source = "computed"
    return LlmSpec.from_mapping(
        {**_spec_fields(arch), "key": key, "total_params_b": total, "active_params_b": active,
         "params_source": params_source, "computed_params_b": computed[0] if computed else None,
         "source": source, "aliases": aliases},
        key,
    )


def _spec_fields(arch: Architecture) -> dict[str, Any]:
    return {
        "num_layers": arch.num_layers, "hidden_size": arch.hidden_size,
        "num_attention_heads": arch.num_attention_heads, "num_kv_heads": arch.num_kv_heads,
        "head_dim": arch.head_dim, "intermediate_size": arch.expert_intermediate_size or arch.intermediate_size,
        "vocab_size": arch.vocab_size, "max_position_embeddings": arch.max_position_embeddings,
        "family": arch.family, "is_moe": arch.is_moe, "num_experts": arch.num_experts,
        "experts_per_token": arch.experts_per_token, "dtype": arch.dtype, "weight_precision": arch.weight_precision,
        "kv_layers": arch.kv_layers, "kv_values_per_layer": arch.kv_values_per_layer,
        "sliding_window": arch.sliding_window, "state_values_per_sequence": arch.state_values_per_sequence or None,
        "mtp_layers": arch.mtp_layers, "attention_params_b": attention_params_b(arch),
    }


def read_config_table(path: Path | str) -> pd.DataFrame:
    """The paper's flattened config table (`;`-separated, one row per `model_name`)."""
    return pd.read_csv(path, sep=";", low_memory=False)


def _row_config(row: Mapping[str, Any]) -> dict[str, Any]:
    """A table row as a config dict: empty cells dropped, whole floats made ints (pandas widens int columns)."""
    out = {}
    for k, v in row.items():
        if not present(v):
            continue
        if hasattr(v, "item"):
            v = v.item()
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        out[str(k)] = v
    return out


def _table_float(model: str, row: Mapping[str, Any], col: str) -> float:
    v = row.get(col)
    if not present(v):
        raise CatalogError(model, col, "missing")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise CatalogError(model, col, f"expected a number, got {v!r}") from None
    bounds = LLM_CONFIG["total_params_b"]
    if not bounds.lo <= f <= bounds.hi:
        raise CatalogError(model, col, f"{f} is outside the plausible range [{bounds.lo:g}, {bounds.hi:g}] billion")
    return f


def specs_from_config_table(table: pd.DataFrame) -> tuple[list[LlmSpec], list[dict[str, Any]]]:
    """One spec per table row (keyed by `model_name`) and the rows of the parameter-count report."""
    for col in ("model_name", "total_b_params", "active_b_params", "model_type"):
        if col not in table.columns:
            raise CatalogError(TABLE_SOURCE, col, "column missing from the config table")
    specs, report = [], []
    for row in table.to_dict(orient="records"):
        model = str(row["model_name"]).strip()
        if not present(row["model_name"]) or not model:
            raise CatalogError(TABLE_SOURCE, "model_name", "empty model name")
        total, active = _table_float(model, row, "total_b_params"), _table_float(model, row, "active_b_params")
        if active > total:
            raise CatalogError(model, "active_b_params", f"{active} exceeds total_b_params {total}")
        arch = architecture_from_config(model, _row_config(row))
        computed = count_or_none(arch, model)
        fields = {**_spec_fields(arch), "is_moe": active < total or arch.is_moe}
        specs.append(LlmSpec.from_mapping(
            {**fields, "key": model, "total_params_b": total, "active_params_b": active, "params_source": "table",
             "computed_params_b": computed[0] if computed else None, "source": TABLE_SOURCE,
             "aliases": TABLE_ALIASES.get(model, ())},
            model,
        ))
        if computed:
            report += _gaps(model, computed, total, active if active < total else None, "table")
    return specs, report


def _gaps(key: str, computed: tuple[float, float], total: float, active: float | None, ref: str) -> list[dict]:
    rows = []
    for field, mine, theirs in (("total_params_b", computed[0], total), ("active_params_b", computed[1], active)):
        if theirs is None:
            continue
        gap = (mine - theirs) / theirs
        if abs(gap) > MISMATCH_THRESHOLD:
            rows.append({"key": key, "field": field, "computed_b": round(mine, 3), "published_b": theirs,
                         "reference": ref, "rel_gap": round(gap, 4)})
    return rows


# ---------------------------------------------------------------------------------------------------------
# published counts and config files


class PublishedCount(BaseModel):
    """A parameter count stated by the model's developer, with where it is stated."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    total_b: float = LLM_CONFIG["total_params_b"].field()
    active_b: float | None = LLM_CONFIG["active_params_b"].field(default=None)  # MoE only
    source_url: str = Field(min_length=8)
    note: str = ""


def load_published_params(path: Path | str) -> dict[str, PublishedCount]:
    """`{name: PublishedCount}` from `llm_published_params.yaml` (a mapping keyed by LLM key or alias)."""
    doc = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    if not isinstance(doc, Mapping):
        raise CatalogError(str(path), "<file>", "expected a mapping of LLM name -> {total_b, source_url, ...}")
    out = {}
    for name, entry in doc.items():
        try:
            out[str(name)] = PublishedCount.model_validate(entry)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise CatalogError(str(name), ".".join(str(p) for p in err["loc"]) or "<entry>", err["msg"]) from None
    return out


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`json.loads(..., object_pairs_hook=unique_keys)`: a key given twice in one object is an error, not "the
    last one wins"."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"key {k!r} appears more than once in one JSON object")
        out[k] = v
    return out


def key_from_filename(path: Path) -> str:
    """`<org>--<name>.json` -> `<org>/<name>`."""
    org, sep, name = path.stem.partition("--")
    if not sep or not org or not name:
        raise CatalogError(path.name, "<file name>", "expected <org>--<name>.json")
    return f"{org}/{name}"


def read_config_file(path: Path) -> tuple[str, dict[str, Any]]:
    key = key_from_filename(path)
    try:
        config = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=unique_keys)
    except json.JSONDecodeError as exc:
        raise CatalogError(key, "<file>", f"{path.name} is not valid JSON: {exc}") from None
    except ValueError as exc:  # a key given twice
        raise CatalogError(key, "<file>", f"{path.name}: {exc}") from None
    if not isinstance(config, dict):
        raise CatalogError(key, "<file>", f"{path.name} must hold a JSON object")
    unknown = [k for k in config if k.startswith("_wattgpu") and k not in (NOTE_KEY, ALIASES_KEY)]
    if unknown:
        raise CatalogError(key, unknown[0], f"unknown wattgpu key; allowed: {NOTE_KEY}, {ALIASES_KEY}")
    _aliases(key, config)
    return key, config


def _aliases(key: str, config: Mapping[str, Any]) -> tuple[str, ...]:
    aliases = config.get(ALIASES_KEY, ())
    if isinstance(aliases, str) or not isinstance(aliases, (list, tuple)) or not all(
        isinstance(a, str) and a.strip() for a in aliases
    ):
        raise CatalogError(key, ALIASES_KEY, "expected a list of non-empty names")
    return tuple(aliases)


def _display_path(path: Path) -> str:
    try:
        return path.resolve().relative_to(paths.project_root()).as_posix()
    except ValueError:
        return path.as_posix()


# ---------------------------------------------------------------------------------------------------------
# the catalog


class LlmCatalog(NamedCatalog[LlmSpec]):
    """An immutable, ordered set of `LlmSpec`s with a case- and whitespace-insensitive key-and-alias index."""

    kind = "LLM"

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> LlmCatalog:
        """Inverse of `to_frame` (e.g. after a CSV round trip)."""
        missing = [c for c, f in LlmSpec.model_fields.items() if c not in frame.columns and f.is_required()]
        if missing:
            raise CatalogError("LLM catalog table", missing[0], "column missing")
        specs = []
        for i, row in enumerate(frame[[c for c in LlmSpec.model_fields if c in frame.columns]].to_dict(orient="records")):
            d = {k: (None if not present(v) else v.item() if hasattr(v, "item") else v) for k, v in row.items()}
            d["aliases"] = tuple(a.strip() for a in str(d["aliases"] or "").split(";") if a.strip())
            d["source"] = d["source"] or ""
            specs.append(LlmSpec.from_mapping(d, str(d.get("key") or f"row {i + 1}")))
        return cls(specs)


def build_llm_catalog(
    config_table: Path | None, config_dir: Path, published: Path | None
) -> tuple[LlmCatalog, list[dict[str, Any]]]:
    """The catalog from the config table (if any) and every `<org>--<name>.json` in `config_dir`.

    Returns the catalog and the parameter-count report: one row per (LLM, field) whose computed count
    differs from the published one (or the table's) by more than 10 %.
    """
    specs, report = ([], []) if config_table is None else specs_from_config_table(read_config_table(config_table))
    files = [read_config_file(p) for p in sorted(Path(config_dir).glob("*.json"))]

    counts = load_published_params(published) if published is not None else {}
    names = {normalize_name(n): s.key for s in specs for n in s.names}
    for key, config in files:
        for n in (key, *_aliases(key, config)):
            names.setdefault(normalize_name(n), key)
    by_key: dict[str, PublishedCount] = {}
    for name, count in counts.items():
        key = names.get(normalize_name(name))
        if key is None:
            raise UnknownNameError("LLM", name, [n for s in specs for n in s.names] + [k for k, _ in files])
        by_key[key] = count

    table_keys = {s.key for s in specs}
    for key in sorted(table_keys & by_key.keys()):
        raise CatalogError(key, "published", "the config table already gives this LLM's count")
    for key, config in files:
        if key in table_keys:
            raise CatalogError(key, "key", "defined both in the config table and in the config directory")
        count = by_key.get(key)
        path = Path(config_dir) / f"{key.replace('/', '--', 1)}.json"
        spec = llm_spec_from_hf_config(
            key, config, count.total_b if count else None, f"config.json: {_display_path(path)}",
            published_active_b=count.active_b if count else None,
        )
        specs.append(spec)
        computed = count_or_none(architecture_from_config(key, config), key) if count else None
        if computed:
            report += _gaps(key, computed, count.total_b, count.active_b, "published")
    return LlmCatalog(specs), report


def load_llm_catalog(path: Path | str | None = None) -> LlmCatalog:
    """The catalog as written by the `catalog` stage (default: `data/processed/llm_catalog.csv`)."""
    p = paths.resolve(path if path is not None else paths.LLM_CATALOG_TABLE)
    return _catalog_from_csv(p.read_bytes())


@functools.lru_cache(maxsize=8)
def _catalog_from_csv(data: bytes) -> LlmCatalog:
    """Read once per file content (the project's table and a model folder's copy are the same bytes)."""
    return LlmCatalog.from_frame(pd.read_csv(io.BytesIO(data), keep_default_na=True, na_values=[""]))
