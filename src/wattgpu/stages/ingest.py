"""Stage `ingest`: every source adapter into one validated measurement table plus a quarantine."""

from __future__ import annotations

from pathlib import Path

from wattgpu import paths
from wattgpu.catalogs.gpus import load_gpu_catalog
from wattgpu.catalogs.llms import load_llm_catalog
from wattgpu.config import load_params
from wattgpu.evaluation import engines
from wattgpu.io import write_csv, write_json
from wattgpu.reporting.data_report import data_report_markdown
from wattgpu.sources.adapters import ADAPTERS
from wattgpu.sources.schema import Checks, count_report, finalize, split_sources

REPORT_MD = paths.REPORTS_DIR / "ingest" / "data_report.md"


def build(root, params):
    """Read every configured source and the catalogs; return (table, quarantine, report)."""
    frames, raw_counts = [], {}
    for name in params.sources:
        if name not in ADAPTERS:
            raise SystemExit(f"params.yaml ingest.sources: unknown source {name!r}; known: {sorted(ADAPTERS)}")
        adapter, subdir = ADAPTERS[name]
        frame = adapter(paths.resolve(paths.RAW_DIR / subdir, root))
        frames.append(frame)
        raw_counts[name] = len(frame)
    if params.wattcounts_original:
        adapter, _ = ADAPTERS["wattcounts_original"]
        frame = adapter(paths.resolve(Path(params.wattcounts_original), root))
        frames.append(frame)
        raw_counts["wattcounts_original"] = len(frame)

    gpus = load_gpu_catalog(paths.resolve(paths.GPU_CATALOG, root))
    llms = load_llm_catalog(paths.resolve(paths.LLM_CATALOG_TABLE, root))
    checks = Checks(params.max_power_tdp_ratio, params.min_power_tdp_ratio, params.min_tokens_for_itl,
                    params.min_itl_roofline_ratio)
    table, quarantine = finalize(split_sources(frames), gpus, llms, checks)
    report = count_report(raw_counts, table, quarantine)
    report["engines"] = {"on_gpu": engines.on_gpu(table, gpus, llms).to_dict("records"),
                         "paired": engines.paired(table).to_dict("records")}
    return table, quarantine, report


def main() -> None:
    root = paths.project_root()
    params = load_params(paths.resolve(paths.PARAMS, root)).ingest
    table, quarantine, report = build(root, params)
    write_csv(paths.resolve(paths.MEASUREMENTS, root), table)
    write_csv(paths.resolve(paths.QUARANTINE, root), quarantine)
    write_json(paths.resolve(paths.DATA_REPORT, root), report)
    md = data_report_markdown(report)
    out = paths.resolve(REPORT_MD, root)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(md)
    print(md)


if __name__ == "__main__":
    main()
