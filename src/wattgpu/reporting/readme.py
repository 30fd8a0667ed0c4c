"""The README's generated blocks: every figure and pasted output in the README comes from a report the pipeline
wrote (committed under reports/), through this module, never typed by hand.

In README.md a block sits between `<!-- generated: NAME -->` and `<!-- end generated: NAME -->`.
`python -m wattgpu.reporting.readme` rewrites them from the reports (`make readme`); `--check` lists the stale
ones and exits 1 (the test suite runs the same check). `wattgpu results --markdown` prints every block.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

from wattgpu import paths

START, END = "<!-- generated: {} -->", "<!-- end generated: {} -->"


def _read(root: Path, rel: Path) -> str:
    path = paths.resolve(rel, root)
    if not path.exists():
        raise FileNotFoundError(f"{rel} not found: run `dvc repro` first")
    return path.read_text(encoding="utf-8")


def results(root: Path) -> str:
    """Nested MdAPE of what the search registers beside the paper replica, per target and regime."""
    verdict = json.loads(_read(root, paths.SEARCH_DIR / "verdict.json"))
    lines = ["| target | regime | nested selection offline / server | paper replica offline / server (same folds) |",
             "|---|---|---:|---:|"]
    for target in ("power", "itl"):
        for regime, cells in verdict.get(target, {}).items():
            setup = json.loads(_read(root, paths.SEARCH_DIR / regime / "metrics.json"))["setup"]
            label = regime.upper() + (f" ({setup['max_pairs']} pairs)" if setup.get("max_pairs") else "")
            def cell(c: dict, key: str) -> str:  # bold where the nested selection is the better of the two
                text = f"{c[key]:.1f} %"
                return f"**{text}**" if (key == "nested_mdape") == c["beats_replica"] else text

            scen = [cells[k] for k in ("offline", "server") if k in cells]
            lines.append(f"| {'ITL' if target == 'itl' else target} | {label} | "
                         + " / ".join(cell(c, "nested_mdape") for c in scen) + " | "
                         + " / ".join(cell(c, "replica_mdape") for c in scen) + " |")
    beats = "beats" if verdict.get("all_beat_replica") else "does NOT beat"
    lines += ["", f"The nested selection {beats} the paper replica in every cell (`all_beat_replica: "
                  f"{str(bool(verdict.get('all_beat_replica'))).lower()}` in `reports/search/verdict.json`)."]
    return "\n".join(lines)


def by_source(root: Path) -> str:
    """The nested selection's MdAPE per source under each regime (reports/search/by_source.json)."""
    data = json.loads(_read(root, paths.SEARCH_DIR / "by_source.json"))
    sources = sorted({s for regimes in data.values() for cells in regimes.values() for s in cells} - {"all"})
    lines = ["| target | regime | " + " | ".join(sources) + " | all rows |", "|---|---|" + "---:|" * (len(sources) + 1)]
    for target in ("power", "itl"):
        for regime, cells in data.get(target, {}).items():
            row = [f"{cells[s]:.1f} %" if s in cells else "–" for s in [*sources, "all"]]
            lines.append(f"| {'ITL' if target == 'itl' else target} | {regime.upper()} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def interval_coverage(root: Path) -> str:
    """Measured coverage and median relative width of the conformal intervals on outer-test rows, per regime,
    target and scenario group (reports/search/intervals.json)."""
    data = json.loads(_read(root, paths.SEARCH_DIR / "intervals.json"))
    groups = ("offline", "server", "source:llm_inference_bench", "source:mlenergy_legacy", "source:mlenergy_v2", "all")
    names = {"offline": "WC offline", "server": "WC server", "source:llm_inference_bench": "LLM-Inference-Bench",
             "source:mlenergy_legacy": "ML.ENERGY legacy", "source:mlenergy_v2": "ML.ENERGY v2", "all": "all rows"}
    lines = ["| target | regime | " + " | ".join(names[g] for g in groups) + " |", "|---|---|" + "---:|" * len(groups)]

    def cell(c: dict | None) -> str:
        if not c or c["80"]["coverage"] is None or c["80"]["n_rows"] == 0:
            return "–"
        a, b = c["80"], c["90"]
        text = f"{100 * a['coverage']:.0f} / {100 * b['coverage']:.0f} %"
        if a["median_rel_width"] is not None:
            text += f" (×{1 + a['median_rel_width']:.2f})"
        if a["abstained"]:
            text += f", abstains on {100 * a['abstained']:.0f} %"
        return text

    for target in ("power", "itl"):
        for regime, cells in data.items():
            if target in cells:
                lines.append(f"| {'ITL' if target == 'itl' else target} | {regime.upper()} | "
                             + " | ".join(cell(cells[target].get(g)) for g in groups) + " |")
    off = [f"{'ITL' if t == 'itl' else t} {r.upper()} {names[g]} ({100 * c['80']['coverage']:.0f} %)"
           for t in ("power", "itl") for r in ("logo", "lolo") for g in ("offline", "server")
           if (c := data.get(r, {}).get(t, {}).get(g)) and c["80"]["coverage"] is not None
           and abs(c["80"]["coverage"] - 0.8) > 0.05]
    lines += ["", "Paper-scenario cells under LOGO and LOLO more than 5 points from 80 % at the 80 % level: "
              + (", ".join(off) if off else "none") + "."]
    lines += ["", "Each cell: the share of held-out rows whose measurement falls inside the 80 % / 90 % interval (a row "
              "the model abstains on counts as outside), (×w) the 80 % band's median width as 1 + (hi - lo) / "
              "prediction, and the share of rows it abstains on."]
    return "\n".join(lines)


def _regimes(root: Path) -> dict[str, dict]:
    """Each search regime's metrics (reports/search/<regime>/metrics.json), in the verdict's order."""
    return {p.parent.name: json.loads(p.read_text(encoding="utf-8"))
            for p in sorted(paths.resolve(paths.SEARCH_DIR, root).glob("*/metrics.json"))}


def interval_groups(root: Path) -> str:
    """Coverage of the 80 % bands per held-out GPU and LLM family (each regime's `interval_groups`)."""
    from wattgpu.reporting.leaderboard import coverage_table

    return coverage_table(_regimes(root)).rstrip("\n")


def search_depth(root: Path) -> str:
    """How much each regime's studies searched, and how often a seeded first trial stayed the best."""
    from wattgpu.reporting.leaderboard import depth_lines

    return "\n".join(f"- {regime.upper()}:\n" + "\n".join(f"  - {line}" for line in depth_lines(res))
                     for regime, res in _regimes(root).items())


def _text(rel: Path) -> Callable[[Path], str]:
    return lambda root: "```text\n" + _read(root, rel).rstrip("\n") + "\n```"


BLOCKS: dict[str, Callable[[Path], str]] = {
    "results": results,
    "by-source": by_source,
    "intervals": interval_coverage,
    "interval-groups": interval_groups,
    "search-depth": search_depth,
    "workload-example": _text(paths.REPORTS_DIR / "examples" / "workload.txt"),
    "data-report": lambda root: _read(root, paths.DATA_REPORT.with_suffix(".md")).split("\n", 2)[2].strip(),
    "predict-example": _text(paths.REPORTS_DIR / "examples" / "predict.txt"),
    "recommend-example": _text(paths.REPORTS_DIR / "examples" / "recommend.txt"),
    "casestudy": lambda root: _read(root, paths.REPORTS_DIR / "casestudy" / "casestudy.md").strip(),
    # measurements on the machine named in each file, written by the commands the README shows (`make bench`,
    # scripts/benchmark_workers.py, scripts/bench_ui.py): machine-dependent, committed beside the reports, never typed
    "bench": _text(paths.REPORTS_DIR / "benchmarks" / "bench.txt"),
    "workers-benchmark": _text(paths.REPORTS_DIR / "benchmarks" / "workers.txt"),
    "ui-bench": _text(paths.REPORTS_DIR / "benchmarks" / "ui.txt"),
}


def _pattern(name: str) -> re.Pattern:
    return re.compile(re.escape(START.format(name)) + r"\n(.*?)\n?" + re.escape(END.format(name)), re.S)


def update(text: str, root: Path) -> str:
    """`text` with every generated block that it holds rewritten from the reports under `root`."""
    for name, render in BLOCKS.items():
        pattern = _pattern(name)
        if pattern.search(text):
            body = render(root)
            text = pattern.sub(lambda _: f"{START.format(name)}\n{body}\n{END.format(name)}", text)
    return text


def stale(text: str, root: Path) -> list[str]:
    """The blocks of `text` that differ from what the reports under `root` give."""
    return [name for name in BLOCKS if (m := _pattern(name).search(text)) and m.group(1).strip() != BLOCKS[name](root).strip()]


def render_all(root: Path) -> str:
    return "".join(f"{START.format(n)}\n{render(root)}\n{END.format(n)}\n\n" for n, render in BLOCKS.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="list stale blocks, exit 1 if any; write nothing")
    args = parser.parse_args()
    root = paths.project_root()
    readme = root / "README.md"
    text = readme.read_text(encoding="utf-8")
    if args.check:
        names = stale(text, root)
        print("stale README blocks: " + ", ".join(names) if names else "README blocks up to date")
        sys.exit(1 if names else 0)
    readme.write_text(update(text, root), encoding="utf-8")
    print(f"updated {readme}")


if __name__ == "__main__":
    main()
