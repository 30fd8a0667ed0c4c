"""Stage `casestudy`: the paper's case study (Llama-3.1-8B, server loads, 25 ms ITL target) from the nested LOGO
folds of the search and the replica's -> reports/casestudy/casestudy.{md,csv} (what the README shows)."""

from __future__ import annotations

from wattgpu import paths
from wattgpu.evaluation.casestudy import DEFAULT_LLM, load_case
from wattgpu.io import write_csv
from wattgpu.reporting.casestudy import to_markdown

OUT_DIR = paths.REPORTS_DIR / "casestudy"
MAX_ITL_MS = 25.0  # the paper's latency target


def main() -> None:
    root = paths.project_root()
    table, _ = load_case(DEFAULT_LLM, MAX_ITL_MS, root=root)
    out = paths.resolve(OUT_DIR, root)
    write_csv(out / "casestudy.csv", table)
    text = to_markdown(table, MAX_ITL_MS)
    (out / "casestudy.md").write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
