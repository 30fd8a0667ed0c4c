"""Human-readable renderings of stage reports (markdown)."""

from __future__ import annotations


def data_report_markdown(report: dict) -> str:
    lines = [
        "# Data report",
        "",
        f"Rows kept: **{report['rows_kept']}**, quarantined: **{report['rows_quarantined']}** "
        "(every quarantined row is in data/processed/quarantine.csv with its reason).",
        "",
        "| source | raw rows | kept | quarantined | accounted for | GPUs | LLMs | dense LLMs | ITL empty | quarantine reasons |",
        "|---|---:|---:|---:|:---:|---:|---:|---:|---:|---|",
    ]
    for source, s in report["sources"].items():
        reasons = ", ".join(f"{k}: {v}" for k, v in s["quarantined_by_reason"].items()) or "-"
        lines.append(
            f"| {source} | {s['raw_rows']} | {s['kept']} | {s['quarantined']} | "
            f"{'yes' if s['accounted_for'] else 'NO'} | {s['gpus']} | {s['llms']} | {s['dense_llms']} | "
            f"{s['itl_missing']} | {reasons} |"
        )
    return "\n".join(lines) + "\n"
