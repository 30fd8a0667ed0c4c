"""Extending the catalogs the way a user does: validated GPU entries appended to data/catalogs/gpus.yaml (its
comments kept), an LLM's config.json copied to data/catalogs/llm_configs/. Nothing is written unless the result
reads back valid."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from wattgpu import paths
from wattgpu.catalogs.gpus import GpuSpec, load_gpu_catalog
from wattgpu.catalogs.llms import LlmCatalog, LlmSpec, read_config_file
from wattgpu.errors import WattgpuError

ADDED_MARK = "# ---------------------------------------------------------------- added by `wattgpu catalog add-gpu`\n"
# Each part of an LLM's key `org/model`, as Hugging Face allows a repo id's (huggingface_hub.utils.validate_repo_id):
# letters, digits, '-', '_', '.'; no '--' or '..'; not starting or ending with '-' or '.'; at most 96 characters. So
# the key is also a safe file name, `org--model.json`, in the config folder: no path segment, no space.
HF_NAME_PART = re.compile(r"^(?!.*(?:--|\.\.))(?![-.])[A-Za-z0-9._-]{1,96}(?<![-.])$")
HF_NAME_RULE = ("letters, digits, '-', '_' or '.', no '--' or '..', not starting or ending with '-' or '.', at most "
                "96 characters")
# A new GPU's key or alias: words of letters, digits and - . ( ) + _ (each with a letter or digit), single spaces.
GPU_NAME = re.compile(r"^[\w().+-]+( [\w().+-]+)*$")


def add_gpus(entries: list[dict], label: str, catalog: Path | None = None) -> tuple[Path, list[GpuSpec], int]:
    """Validate `entries` (catalog field names) and append them: (catalog path, the new specs, GPUs after)."""
    path = paths.resolve(catalog if catalog is not None else paths.GPU_CATALOG)
    current = load_gpu_catalog(path)
    new = []
    for i, entry in enumerate(entries):
        spec = GpuSpec.from_mapping(entry, str(entry.get("key") or f"{label} #{i + 1}"))
        for field, name in (("key", spec.key), *(("aliases", a) for a in spec.aliases)):
            if not GPU_NAME.match(name) or not all(any(c.isalnum() for c in w) for w in name.split(" ")):
                raise WattgpuError(f"{label}: GPU {spec.key!r}, field {field!r}: {name!r} must be words of letters, "
                                   "digits and - . ( ) + _, each with a letter or digit, separated by single spaces "
                                   "(no '/', no leading, trailing or double space)")
        current = current.with_spec(spec)  # a key or alias already in the catalog is a CatalogError naming it
        new.append(spec)
    original = path.read_text(encoding="utf-8")
    text = yaml.safe_dump([s.to_mapping() for s in new], sort_keys=False, allow_unicode=True, width=100)
    path.write_text(original + ("" if original.endswith("\n") else "\n") + ADDED_MARK + text, encoding="utf-8")
    try:
        reloaded = load_gpu_catalog(path)
        if reloaded.keys != current.keys:
            raise WattgpuError(f"{path}: the appended entries did not read back as written")
    except Exception:
        path.write_text(original, encoding="utf-8")  # leave the catalog as it was
        raise
    return path, new, len(reloaded)


def add_llm(config_file: Path, key: str, spec: LlmSpec, known: LlmCatalog | None) -> Path:
    """Copy a validated config.json (`spec`, read from it under `key`) into the config folder: its path there."""
    org, sep, model = key.partition("/")
    if not sep or not all(HF_NAME_PART.match(part) for part in (org, model)):
        raise WattgpuError(f"LLM name {key!r} (field 'key') must look like org/model, each part {HF_NAME_RULE}, as "
                           "on Hugging Face (pass --name org/model)")
    folder = paths.resolve(paths.LLM_CONFIG_DIR)
    dest = folder / f"{org}--{model}.json"
    if dest.exists():
        raise WattgpuError(f"{key!r} is already in the catalog ({dest})")
    if known is not None and key in known:
        raise WattgpuError(f"{key!r} is already in the catalog (as {known.resolve(key)!r})")
    folder.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(config_file.read_bytes())
    try:
        read_config_file(dest)  # the catalog stage's own reader: file name and _wattgpu keys
        if known is not None:
            known.with_spec(spec)  # an alias already used by another LLM is a CatalogError naming it
    except Exception:
        dest.unlink()
        raise
    return dest
