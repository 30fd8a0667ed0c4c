"""The GPU catalog: the real file loads and resolves every measured GPU; bad entries fail by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from wattgpu import paths
from wattgpu.catalogs.gpus import GpuCatalog, GpuSpec, dump_gpu_catalog, load_gpu_catalog
from wattgpu.errors import CatalogError, UnknownNameError

REPO_ROOT = Path(__file__).resolve().parents[2]

# gpu_type values in Watt Counts (the names NVML reports).
WATT_COUNTS_GPUS = [
    "NVIDIA H100 NVL", "NVIDIA H200", "NVIDIA L40S", "NVIDIA A100-SXM4-40GB",
    "Tesla V100-SXM2-32GB", "NVIDIA A30", "NVIDIA L4", "Tesla T4",
]
# Names the other datasets use, and the variant each must resolve to.
DATASET_NAMES = {
    "NVIDIA H100 PCIe": "NVIDIA H100 PCIe",
    "NVIDIA GeForce RTX 3090": "NVIDIA GeForce RTX 3090",
    "NVIDIA GeForce RTX 4090": "NVIDIA GeForce RTX 4090",
    "A100-SXM4-40GB": "NVIDIA A100-SXM4-40GB",
    "H100 80GB HBM3": "NVIDIA H100 80GB HBM3",
    "A100": "NVIDIA A100-SXM4-40GB",
    "A40": "NVIDIA A40",
    "V100": "Tesla V100-SXM2-32GB",
    "Nvidia A100 GPU": "NVIDIA A100-SXM4-40GB",
    "Nvidia H100 GPU": "NVIDIA H100 80GB HBM3",
    "Nvidia GH200 GPU": "NVIDIA GH200 480GB",
    "AMD MI250 GPU": "AMD Instinct MI250",
    "AMD MI300X GPU": "AMD Instinct MI300X",
    "Habana Gaudi2": "Intel Gaudi 2",
    "Intel Max 1550": "Intel Data Center GPU Max 1550",
    "Intel PVC GPU": "Intel Data Center GPU Max 1550",
}


@pytest.fixture(scope="module")
def catalog() -> GpuCatalog:
    return load_gpu_catalog(paths.resolve(paths.GPU_CATALOG, root=REPO_ROOT))


def test_real_catalog_is_large_and_unique(catalog):
    assert len(catalog) >= 20
    assert len(set(catalog.keys)) == len(catalog)
    assert all(isinstance(s, GpuSpec) for s in catalog)


@pytest.mark.parametrize("name", WATT_COUNTS_GPUS)
def test_every_watt_counts_gpu_is_a_key(catalog, name):
    assert catalog.resolve(name) == name


@pytest.mark.parametrize("name,key", DATASET_NAMES.items())
def test_dataset_names_resolve_to_the_decided_variant(catalog, name, key):
    assert catalog.resolve(name) == key


def test_sambanova_is_not_a_gpu(catalog):
    with pytest.raises(UnknownNameError):
        catalog.resolve("SambaNova SN40L")


def test_alias_case_and_whitespace_insensitive(catalog):
    assert catalog.resolve("H100 NVL") == "NVIDIA H100 NVL"
    assert catalog.resolve("  h100   nvl ") == "NVIDIA H100 NVL"
    assert catalog.resolve("h100nvl") == "NVIDIA H100 NVL"
    assert catalog.get("H100 NVL").memory_gb == 94


def test_measured_variants_carry_their_power_limit(catalog):
    # Watt Counts measures mean power up to 676 W on "NVIDIA H200" and 394 W on the H100 NVL.
    assert catalog.get("NVIDIA H200").tdp_w == 700 and catalog.get("NVIDIA H200").form_factor == "SXM"
    assert catalog.get("NVIDIA H100 NVL").tdp_w == 400


def test_unknown_name_suggests_close_matches(catalog):
    with pytest.raises(UnknownNameError) as exc:
        catalog.resolve("NVIDIA H100 NVLL")
    assert "NVIDIA H100 NVL" in exc.value.suggestions
    assert "did you mean" in str(exc.value)


def test_frame_has_one_row_per_gpu_and_every_field(catalog):
    df = catalog.to_frame()
    assert len(df) == len(catalog)
    assert list(df.columns) == list(GpuSpec.model_fields)
    row = df.set_index("key").loc["NVIDIA H100 NVL"]
    assert "H100 NVL" in row["aliases"].split("; ")


def test_dump_round_trips(catalog, tmp_path):
    out = tmp_path / "gpus.yaml"
    dump_gpu_catalog(catalog, out)
    again = load_gpu_catalog(out)
    assert list(again) == list(catalog)


def test_with_spec_adds_and_rejects_clashes(catalog):
    spec = catalog.get("Tesla T4").model_copy(update={"key": "Test GPU", "aliases": ("tgpu",)})
    bigger = catalog.with_spec(spec)
    assert len(bigger) == len(catalog) + 1 and bigger.resolve("TGPU") == "Test GPU"
    assert "Test GPU" not in catalog
    with pytest.raises(CatalogError) as exc:
        catalog.with_spec(spec.model_copy(update={"aliases": ("T4",)}))
    assert "Test GPU" in str(exc.value) and "aliases" in str(exc.value)


# ---------------------------------------------------------------- validation on tiny files

GOOD = """\
- key: Tiny GPU
  display_name: Tiny 8 GB
  vendor: NVIDIA
  architecture: Ampere
  release_year: 2021
  tdp_w: 150
  memory_gb: 8
  memory_type: GDDR6
  memory_bus_bits: 256
  memory_bandwidth_gb_s: 448
  base_clock_mhz: 1000
  boost_clock_mhz: 1500
  sm_count: 40
  fp16_tensor_tflops: 50
  fp32_tflops: 15
  form_factor: PCIe
  aliases: [tiny]
  source_url: https://example.org/tiny
"""


def _write(tmp_path: Path, entries: str) -> Path:
    p = tmp_path / "gpus.yaml"
    p.write_text("gpus:\n" + entries, encoding="utf-8")
    return p


def _error(tmp_path: Path, entries: str) -> CatalogError:
    with pytest.raises(CatalogError) as exc:
        load_gpu_catalog(_write(tmp_path, entries))
    return exc.value


def test_tiny_good_catalog_loads(tmp_path):
    cat = load_gpu_catalog(_write(tmp_path, GOOD))
    spec = cat.get("TINY")
    assert spec.source_urls == ("https://example.org/tiny",) and spec.l2_cache_mb is None


def test_missing_field(tmp_path):
    err = _error(tmp_path, GOOD.replace("  tdp_w: 150\n", ""))
    assert (err.entry, err.field) == ("Tiny GPU", "tdp_w")
    assert "Tiny GPU" in str(err) and "tdp_w" in str(err)


def test_unknown_field(tmp_path):
    err = _error(tmp_path, GOOD + "  tdp_watts: 150\n")
    assert err.entry == "Tiny GPU" and err.field == "tdp_watts"
    assert "tdp_watts" in str(err)


def test_wrong_type(tmp_path):
    err = _error(tmp_path, GOOD.replace("sm_count: 40", "sm_count: forty"))
    assert (err.entry, err.field) == ("Tiny GPU", "sm_count")


def test_absurd_tdp(tmp_path):
    err = _error(tmp_path, GOOD.replace("tdp_w: 150", "tdp_w: 150000"))
    assert (err.entry, err.field) == ("Tiny GPU", "tdp_w")
    assert "Tiny GPU" in str(err) and "tdp_w" in str(err)


def test_boost_below_base(tmp_path):
    err = _error(tmp_path, GOOD.replace("boost_clock_mhz: 1500", "boost_clock_mhz: 900"))
    assert (err.entry, err.field) == ("Tiny GPU", "boost_clock_mhz")
    assert "below base" in str(err)


def test_duplicate_alias_across_entries(tmp_path):
    other = GOOD.replace("key: Tiny GPU", "key: Other GPU")  # same alias "tiny"
    err = _error(tmp_path, GOOD + other)
    assert err.entry == "Other GPU" and err.field == "aliases"
    assert "Tiny GPU" in str(err)


def test_alias_equal_to_another_key(tmp_path):
    other = GOOD.replace("key: Tiny GPU", "key: Other GPU").replace("[tiny]", "[tiny gpu]")
    err = _error(tmp_path, GOOD.replace("[tiny]", "[]") + other)
    assert err.entry == "Other GPU" and err.field == "aliases"


def test_duplicate_key(tmp_path):
    err = _error(tmp_path, GOOD + GOOD.replace("[tiny]", "[]"))
    assert err.entry == "Tiny GPU" and err.field == "key"


def test_from_mapping_names_entry_without_file():
    with pytest.raises(CatalogError) as exc:
        GpuSpec.from_mapping({"key": "X"}, entry="spec.yaml")
    assert exc.value.entry == "spec.yaml" and exc.value.field == "display_name"


def test_the_same_text_is_parsed_once_and_an_error_still_names_its_file(tmp_path):
    """The project's catalog and a model folder's copy are one text: one parse per process (a cached `wattgpu
    predict` reads both); a broken file is still named in its own error, wherever the same text was read before."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    first, second = _write(a, GOOD), _write(b, GOOD)
    assert load_gpu_catalog(first) is load_gpu_catalog(second)
    broken = "gpus: [\n"
    (a / "gpus.yaml").write_text(broken), (b / "gpus.yaml").write_text(broken)
    for path in (a / "gpus.yaml", b / "gpus.yaml"):
        with pytest.raises(CatalogError) as exc:
            load_gpu_catalog(path)
        assert str(path) in str(exc.value) and "not valid YAML" in str(exc.value)
