"""Stage `catalog`: validate the GPU catalog and build the LLM catalog from config.json files + the config table."""

from __future__ import annotations

import pandas as pd

from wattgpu import paths
from wattgpu.catalogs.gpus import load_gpu_catalog
from wattgpu.catalogs.llms import build_llm_catalog
from wattgpu.io import write_csv, write_json

CONFIG_TABLE = paths.RAW_DIR / "wattgpu-catalogs" / "model_features.csv"
PUBLISHED = paths.CATALOG_DIR / "llm_published_params.yaml"
REPORT = paths.REPORTS_DIR / "catalog" / "catalog_report.json"
MISMATCHES = paths.REPORTS_DIR / "catalog" / "param_count_check.csv"


def main() -> None:
    root = paths.project_root()
    gpus = load_gpu_catalog(paths.resolve(paths.GPU_CATALOG, root))
    llms, mismatches = build_llm_catalog(
        paths.resolve(CONFIG_TABLE, root), paths.resolve(paths.LLM_CONFIG_DIR, root), paths.resolve(PUBLISHED, root)
    )
    frame = llms.to_frame().sort_values("key").reset_index(drop=True)
    write_csv(paths.resolve(paths.LLM_CATALOG_TABLE, root), frame)
    write_csv(paths.resolve(MISMATCHES, root), pd.DataFrame(mismatches))
    report = {
        "gpus": len(gpus),
        "llms": len(frame),
        "llms_moe": int(frame["is_moe"].astype(bool).sum()),
        "param_count_mismatches_over_10pct": len(mismatches),
    }
    write_json(paths.resolve(REPORT, root), report)
    print(f"catalog: {report['gpus']} GPUs, {report['llms']} LLMs ({report['llms_moe']} MoE), "
          f"{len(mismatches)} parameter-count mismatches > 10 % (see {MISMATCHES})")


if __name__ == "__main__":
    main()
