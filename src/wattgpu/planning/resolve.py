"""What a user names, resolved: catalog names (the models' catalogs first, then the project's newer ones), GPU spec
files and LLM config.json files, into request fields (wattgpu.request) plus the spec and where it came from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from wattgpu import fields, paths
from wattgpu.catalogs.gpus import GpuCatalog, load_gpu_catalog
from wattgpu.catalogs.llms import LlmCatalog, llm_spec_from_hf_config, load_llm_catalog, unique_keys
from wattgpu.errors import CatalogError, UnknownNameError, WattgpuError
from wattgpu.request import spec_problems

CATALOG_ONLY_FIELDS = ("key", "display_name", "aliases", "source_urls", "source_url", "notes")


def project_gpus() -> GpuCatalog:
    """The project's GPU catalog (data/catalogs/gpus.yaml): newer than the models' copy after `catalog add-gpu`."""
    return load_gpu_catalog(paths.resolve(paths.GPU_CATALOG))


def project_llms() -> LlmCatalog | None:
    """The project's LLM table (None before `dvc repro catalog`)."""
    path = paths.resolve(paths.LLM_CATALOG_TABLE)
    return load_llm_catalog(path) if path.exists() else None


def gpu_fields(spec) -> dict[str, Any]:
    """A GpuSpec as request fields (gpu_*), for a GPU the models' catalog does not know."""
    out = {f"gpu_{k}": getattr(spec, k) for k in [*fields.GPU_SPEC, *fields.GPU_SPEC_TEXT]
           if getattr(spec, k, None) is not None}
    return {**out, "gpu_name": spec.key}


def llm_fields(spec) -> dict[str, Any]:
    """An LlmSpec as request fields (llm_*), for an LLM the models' catalog does not know."""
    out = {f"llm_{k}": getattr(spec, k)
           for k in [*fields.LLM_CONFIG_REQUIRED, *fields.LLM_CONFIG_OPTIONAL, *fields.LLM_CONFIG_TEXT]
           if getattr(spec, k, None) is not None}
    return {**out, "llm_name": spec.key}


def read_gpu_spec_file(path: Path) -> dict[str, Any]:
    """A GPU spec YAML in the catalog's field names (one entry, or `gpus: [entry]`) -> request fields."""
    entry = _one_entry(load_yaml(path), path)
    numeric = fields.GPU_SPEC
    allowed = [*numeric, *fields.GPU_SPEC_TEXT, *CATALOG_ONLY_FIELDS]
    for k in entry:
        if k not in allowed:
            raise WattgpuError(f"{path}: unknown field {k!r}; GPU spec fields are the catalog's: {', '.join(allowed)}")
    missing = [k for k in fields.GPU_SPEC_REQUIRED if entry.get(k) is None]
    if missing:
        raise WattgpuError(f"{path}: field {missing[0]!r} is required (needs {', '.join(fields.GPU_SPEC_REQUIRED)})")
    spec = {k: v for k, v in entry.items() if (k in numeric or k in fields.GPU_SPEC_TEXT) and v is not None}
    problems = spec_problems("gpu", spec)  # named as the file writes them (tdp_w), not as the request (gpu_tdp_w)
    if problems:
        raise WattgpuError(f"{path}: " + "; ".join(map(str, problems)))
    out = {f"gpu_{k}": v for k, v in spec.items()}
    return {**out, "gpu_name": str(entry.get("key") or entry.get("display_name") or path.stem)}


def load_yaml(path: Path):
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise WattgpuError(f"{path}: cannot read: {exc}") from None
    except yaml.YAMLError as exc:
        raise WattgpuError(f"{path}: not valid YAML: {exc}") from None


def _one_entry(doc, path: Path) -> dict[str, Any]:
    found = entries(doc, path)
    if len(found) != 1:
        raise WattgpuError(f"{path}: expected one GPU entry, found {len(found)}")
    return found[0]


def entries(doc, path: Path) -> list[dict[str, Any]]:
    """A YAML document holding one entry (a mapping) or `gpus: [entry, ...]`."""
    if isinstance(doc, dict) and set(doc) == {"gpus"}:
        doc = doc["gpus"]
    items = doc if isinstance(doc, list) else [doc]
    if not items or not all(isinstance(e, dict) for e in items):
        raise WattgpuError(f"{path}: expected a mapping of GPU fields (or `gpus:` with a list of them)")
    return items


def read_llm_config(path: Path, name: str | None = None):
    """A Hugging Face config.json -> (key, LlmSpec); the key is `name`, else the config's `_name_or_path`."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=unique_keys)
    except (OSError, UnicodeDecodeError) as exc:
        raise WattgpuError(f"{path}: cannot read: {exc}") from None
    except ValueError as exc:  # json.JSONDecodeError is one; unique_keys raises it for a key given twice
        raise WattgpuError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(config, dict):
        raise WattgpuError(f"{path}: a config.json holds one JSON object")
    if name is not None and not name.strip():
        raise WattgpuError(f"LLM name {name!r} (field 'key') is empty: give --name org/model")
    key = str(name or config.get("_name_or_path") or f"custom LLM ({path.name})")
    try:
        return key, config, llm_spec_from_hf_config(key, config, None, f"config.json: {path}")
    except CatalogError as exc:
        raise WattgpuError(f"{path}: {exc}") from None


class Resolved(NamedTuple):
    """A GPU or LLM as request fields, with its spec (GpuSpec / LlmSpec; a GPU spec file's fields as a dict) and
    where it came from."""

    fields: dict[str, Any]
    spec: Any
    origin: str


def resolve_gpu(name: str, model_gpus: GpuCatalog, project: GpuCatalog) -> Resolved:
    """By name where the models know it, else the project catalog's spec."""
    try:
        key = model_gpus.resolve(name)
        return Resolved({"gpu": key}, model_gpus.get(key), "catalog")
    except UnknownNameError:
        spec = project.get(name)  # raises with suggestions from the (larger) project catalog
        return Resolved(gpu_fields(spec), spec, "spec from data/catalogs/gpus.yaml (newer than the models)")


def resolve_llm(name: str, model_llms: LlmCatalog, project: LlmCatalog | None) -> Resolved:
    """The models' catalog, else the project table, else its config.json in data/catalogs/llm_configs."""
    try:
        key = model_llms.resolve(name)
        return Resolved({"llm": key}, model_llms.get(key), "catalog")
    except UnknownNameError as exc:
        if project is not None and name in project:
            spec = project.get(name)
            return Resolved(llm_fields(spec), spec, "config from data/processed/llm_catalog.csv (newer than the models)")
        path = paths.resolve(paths.LLM_CONFIG_DIR) / f"{name.replace('/', '--', 1)}.json"
        if "/" in name and path.exists():
            _, _, spec = read_llm_config(path, name)
            return Resolved(llm_fields(spec), spec, f"config from {paths.LLM_CONFIG_DIR / path.name}")
        raise exc from None


def gpu_choice(gpu: str | None, gpu_spec: Path | None, model_gpus: GpuCatalog) -> Resolved:
    """--gpu NAME or --gpu-spec FILE.yaml, exactly one."""
    if (gpu is None) == (gpu_spec is None):
        raise WattgpuError("give exactly one of --gpu NAME or --gpu-spec FILE.yaml")
    if gpu is not None:
        return resolve_gpu(gpu, model_gpus, project_gpus())
    spec_fields = own_label(read_gpu_spec_file(gpu_spec), "gpu_name", model_gpus, gpu_spec)
    return Resolved(spec_fields, spec_fields, f"spec file {gpu_spec}")


def llm_choice(llm: str | None, llm_config: Path | None, model_llms: LlmCatalog) -> Resolved:
    """--llm NAME or --llm-config config.json, exactly one."""
    if (llm is None) == (llm_config is None):
        raise WattgpuError("give exactly one of --llm NAME or --llm-config config.json")
    if llm is not None:
        return resolve_llm(llm, model_llms, project_llms())
    _, _, spec = read_llm_config(llm_config)
    return Resolved(own_label(llm_fields(spec), "llm_name", model_llms, llm_config), spec, f"config file {llm_config}")


def own_label(spec_fields: dict[str, Any], label: str, catalog, path: Path) -> dict[str, Any]:
    """A spec file's request fields, its `label` (gpu_name, llm_name) suffixed with the file's name where it names an
    entry of the models' catalog (a config.json's _name_or_path of a catalog LLM): the file's own fields are what the
    user asks about (they may differ from the entry's), and a request refuses a spec labelled as a catalog entry."""
    if spec_fields.get(label) in catalog:
        return {**spec_fields, label: f"{spec_fields[label]} ({path.name})"}
    return spec_fields


def known_to_models(records: list[dict], model_gpus: GpuCatalog, model_llms: LlmCatalog) -> list[dict]:
    """Rows naming a GPU or LLM the models' catalogs lack but the project's has: send its spec instead."""
    gpus, llms = project_gpus(), project_llms()
    out = []
    for r in records:
        r = dict(r)
        g, l = r.get("gpu"), r.get("llm")
        if isinstance(g, str) and g not in model_gpus and g in gpus:
            r.pop("gpu")
            r.update(gpu_fields(gpus.get(g)))
        if isinstance(l, str) and l not in model_llms and llms is not None and l in llms:
            r.pop("llm")
            r.update(llm_fields(llms.get(l)))
        out.append(r)
    return out


def required_llms() -> LlmCatalog:
    """The project's LLM table, or an error saying how to build it."""
    llms = project_llms()
    if llms is None:
        raise WattgpuError(f"{paths.resolve(paths.LLM_CATALOG_TABLE)} not found: run `dvc repro catalog` first")
    return llms


def catalog_entry(name: str):
    """The project's GPU or LLM (GpuSpec / LlmSpec) named `name`; an unknown name lists close matches of both."""
    try:
        return project_gpus().get(name)
    except UnknownNameError as gpu_err:
        try:
            return required_llms().get(name)
        except UnknownNameError as llm_err:
            hints = [*gpu_err.suggestions, *llm_err.suggestions]
            hint = f"; did you mean {', '.join(repr(h) for h in hints)}?" if hints else ""
            raise WattgpuError(f"no GPU or LLM named {name!r}{hint}") from None
