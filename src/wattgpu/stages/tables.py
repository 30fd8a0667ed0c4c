"""Stage `tables`: every regime's metrics gathered into the paper's Table 2 / Table 3 layout."""

from __future__ import annotations

import json

from wattgpu import paths
from wattgpu.config import load_params
from wattgpu.io import write_csv
from wattgpu.reporting.tables import long_frame, paper_table, to_latex, to_markdown
from wattgpu.workload import SCENARIO_GROUPS, SERVER_LOADS

NOTES = {
    "power": "Mean GPU power per GPU (W); learned as power / TDP. MdAPE from rows the model never saw under each "
             "regime. Baselines learn nothing, so one row each. Paper MdAPE: the published LOGO figure.",
    "itl": "Inter-token latency (s), learned on a log scale. Offline ITL = measurement duration / generated tokens "
           "(exact). Server ITL on the processed Watt Counts copy = mean end-to-end latency / mean generated tokens, "
           "which includes the time to first token (that copy has no per-request TTFT); the paper's server ITL is "
           "exact, from the original layout.",
}


def main() -> None:
    root = paths.project_root()
    params = load_params(paths.resolve(paths.PARAMS, root))
    regimes = list(params.evaluate.regimes)
    results = {r: json.loads(paths.resolve(paths.EVALUATE_DIR / r / "metrics.json", root).read_text()) for r in regimes}
    long = long_frame(results, scenarios=tuple(SCENARIO_GROUPS))
    write_csv(paths.resolve(paths.EVALUATE_DIR / "all_metrics.csv", root), long)
    main_scen = long[long["scenario"].isin(["offline", "server"])]
    md = ["# WattGPU evaluation: paper replica and baselines on Watt Counts (dense LLMs)", ""]
    for target, label, title in (("power", "tab:power", "Table 2: mean power"), ("itl", "tab:itl", "Table 3: ITL")):
        table = paper_table(main_scen, target, regimes)
        md.append(to_markdown(table, title, NOTES[target]))
        paths.resolve(paths.EVALUATE_DIR / f"table_{target}.tex", root).write_text(to_latex(table, title, label))
        loads = paper_table(long[long["scenario"].isin(SERVER_LOADS)], target, regimes)
        md.append(to_markdown(loads, f"{title}, per server load", "Same runs, server rows split by request rate."))
    text = "\n".join(md)
    paths.resolve(paths.EVALUATE_DIR / "tables.md", root).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
