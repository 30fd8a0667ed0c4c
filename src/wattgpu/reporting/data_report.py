"""Human-readable renderings of stage reports (markdown)."""

from __future__ import annotations

from wattgpu.sources.schema import CONCURRENCY_DERIVATIONS, ITL_DERIVATIONS, MEASURED_CONCURRENCY


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
    coverage = report.get("rows_per_source_and_gpu", {})
    if coverage:
        gpus = sorted({g for by_gpu in coverage.values() for g in by_gpu})
        lines += ["", "Rows per source and GPU:", "", "| GPU | " + " | ".join(coverage) + " |",
                  "|---|" + "---:|" * len(coverage)]
        lines += [f"| {g} | " + " | ".join(str(coverage[s].get(g, "")) for s in coverage) + " |" for g in gpus]
    ranges = report.get("workload_ranges", {})
    if ranges:
        lines += ["", "Workload per source (min / median / max; concurrency = requests in flight, its derivation "
                  "per source in the last column):", "",
                  "| source | concurrency | prompt tokens | output tokens | GPUs per replica (TP x PP) | engines "
                  "(versions) | precision | concurrency from |", "|---|---|---|---|---|---|---|---|"]
        for source, r in ranges.items():
            def span(field):
                v = r.get(field)
                return "-" if not v else " / ".join(f"{x:.3g}" for x in v)
            lines.append(f"| {source} | {span('concurrency')} | {span('prompt_tokens_mean')} | "
                         f"{span('output_tokens_mean')} | {span('n_gpus')} | {', '.join(r['engine'])} "
                         f"({', '.join(r['engine_version']) or 'unstated'}) | {', '.join(r['precision'])} | "
                         f"{', '.join(r['concurrency_derivation'])} |")
    derived = report.get("derivations", {})
    if derived:
        lines += ["", "Derived quantities. Per source, how the per-request ITL target and the requests in flight were "
                  "obtained (rows). A derived ITL target rests on the stated assumption, and the same function "
                  "supplies it at training, evaluation and serving (the offline requests in flight: "
                  "`workload.offline_concurrency`, from the specs). Requests in flight derived from a measured "
                  "latency or batch (marked *measured*) train the models but are never an input of a test row: "
                  "evaluation asks a Poisson row by its rate and solves its requests in flight with the evaluated "
                  "ITL model, as the served Predictor does, and a measured mean batch by the batch the engine was set "
                  "to (`modeling.predictor.as_served`).", "",
                  "| source | ITL target | requests in flight |", "|---|---|---|"]
        for source, d in derived.items():
            itl = "; ".join(f"{k} ({n}): {ITL_DERIVATIONS.get(k, 'not derived')}" for k, n in d["itl_derivation"].items())
            conc = "; ".join(f"{k} ({n}): {CONCURRENCY_DERIVATIONS.get(k, '-')}"
                             + (" *measured*" if k in MEASURED_CONCURRENCY else "")
                             for k, n in d["concurrency_derivation"].items())
            lines.append(f"| {source} | {itl} | {conc} |")
    eng = report.get("engines", {})
    if eng.get("on_gpu"):
        gpu = eng["on_gpu"][0]["gpu"]
        lines += ["", f"Engines and labs on one GPU ({gpu}, in every source), medians per bin of requests in flight: "
                  "power as a share of TDP, per-request ITL as a multiple of the time to stream the weights once, "
                  "generated tokens/s per GPU x billions of active parameters (size-neutral):", "",
                  "| source | engine (version) | in flight | rows | power / TDP | ITL / floor | tokens/s x B params |",
                  "|---|---|---|---:|---:|---:|---:|"]
        for r in eng["on_gpu"]:
            def num(v, spec):
                return "-" if v is None or v != v else format(v, spec)
            lines.append(f"| {r['source']} | {r['engine']} ({r['engine_version'] or 'unstated'}) | "
                         f"{r['concurrency_bin']} | {r['rows']} | {num(r['power_share_of_tdp'], '.2f')} | "
                         f"{num(r['itl_over_floor'], '.2f')} | {num(r['tokens_per_s_per_gpu_per_b'], '.3g')} |")
    if eng.get("paired"):
        lines += ["", "The same GPU, LLM, lengths and batch on another engine (LLM-Inference-Bench), median ratio to "
                  "vLLM:", "", "| engine | configurations | ITL ratio | power configurations | power ratio |",
                  "|---|---:|---:|---:|---:|"]
        for r in eng["paired"]:
            power = "-" if r["power_ratio_median"] != r["power_ratio_median"] else f"{r['power_ratio_median']:.2f}"
            lines.append(f"| {r['engine']} | {r['configurations']} | {r['itl_ratio_median']:.2f} | "
                         f"{r['power_configurations']} | {power} |")
    return "\n".join(lines) + "\n"
