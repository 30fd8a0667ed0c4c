"""A self-contained HTML report of the stage outputs under reports/: evaluation tables, plots, the search
leaderboard and GPU rankings for one LLM. One file, inline CSS, images as base64 PNG data URIs, no scripts
and no external references, so it opens offline in any browser and can be mailed around.

`render` is pure (sections in, HTML text out); `write_report` gathers the sections from disk.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from wattgpu import paths
from wattgpu.workload import SCENARIO_GROUPS, SERVER_LOADS

EVALUATE_DIR = paths.EVALUATE_DIR
LEADERBOARD = paths.SEARCH_DIR / "leaderboard.md"
PLOTS = (("predicted_vs_measured.png", "Predicted vs measured"), ("per_gpu_power.png", "Power MdAPE per GPU"),
         ("per_gpu_itl.png", "ITL MdAPE per GPU"))
CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;max-width:1200px;
     padding:0 1rem;color:#1d2330;line-height:1.45}
h1{font-size:1.7rem;margin-bottom:.2rem} h2{margin-top:2.2rem;border-bottom:2px solid #dde3ee;padding-bottom:.2rem}
h3{margin-top:1.4rem} .meta{color:#667} nav a{margin-right:1rem}
table{border-collapse:collapse;margin:.6rem 0 1.2rem;font-size:.86rem}
th,td{border:1px solid #d5dbe5;padding:.25rem .5rem;text-align:right} th{background:#eef2f8}
td:first-child,th:first-child,td.text{text-align:left}
tr:nth-child(even) td{background:#f8fafc} tr.good td{background:#e9f7ee} tr.bad td{background:#fdf0ef}
img{max-width:100%;border:1px solid #e3e7ef;margin:.4rem 0} figure{margin:0 0 1rem}
figcaption{color:#556;font-size:.85rem} .note{color:#445;font-size:.9rem;max-width:75em}
pre{background:#f4f6fa;padding:.6rem;overflow-x:auto}
"""


@dataclass
class Section:
    """One titled part of the report: blocks of already-rendered HTML."""

    title: str
    blocks: list[str] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.title.lower()).strip("-")


def esc(v) -> str:
    return html.escape(str(v), quote=True)


def table_html(frame: pd.DataFrame, row_class: pd.Series | None = None, text_cols: tuple[str, ...] = ()) -> str:
    """A frame of display-ready values as an HTML table (values escaped)."""
    head = "".join(f"<th>{esc(c)}</th>" for c in frame.columns)
    rows = []
    for i, (_, r) in enumerate(frame.iterrows()):
        cls = f' class="{esc(row_class.iloc[i])}"' if row_class is not None and row_class.iloc[i] else ""
        cells = "".join(f'<td class="text">{esc(v)}</td>' if c in text_cols else f"<td>{esc(v)}</td>"
                        for c, v in r.items())
        rows.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def image_html(png: bytes, caption: str) -> str:
    """A PNG embedded as a base64 data URI."""
    data = base64.b64encode(png).decode("ascii")
    return f'<figure><img alt="{esc(caption)}" src="data:image/png;base64,{data}"><figcaption>{esc(caption)}</figcaption></figure>'


def _inline(s: str) -> str:
    """Escaped text with **bold** and `code`."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", esc(s)))


def _cell(tag: str, text: str, align: list[str], j: int) -> str:
    style = f' style="text-align:{align[j]}"' if j < len(align) else ""
    return f"<{tag}{style}>{_inline(text)}</{tag}>"


def markdown_html(text: str) -> str:
    """The subset of markdown our stages write: headings, pipe tables, bullet lists, code fences, paragraphs."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        line = lines[i].rstrip()
        if line.startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out.append(f"<pre>{esc(chr(10).join(lines[i + 1:j]))}</pre>")
            i = j + 1
        elif line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")) + 2, 6)  # the report's own h2 sits above
            out.append(f"<h{level}>{_inline(line.lstrip('#').strip())}</h{level}>")
            i += 1
        elif line.startswith("|"):
            rows, align = [], []
            while i < len(lines) and lines[i].startswith("|"):
                cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
                if all(re.fullmatch(r":?-{3,}:?", c) for c in cells):  # the separator row: column alignment
                    align = ["right" if c.endswith(":") and not c.startswith(":") else
                             "center" if c.startswith(":") and c.endswith(":") else "left" for c in cells]
                else:
                    rows.append(cells)
                i += 1
            if rows:
                head = "".join(_cell("th", c, align, j) for j, c in enumerate(rows[0]))
                body = "".join("<tr>" + "".join(_cell("td", c, align, j) for j, c in enumerate(r)) + "</tr>"
                               for r in rows[1:])
                out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        elif line.startswith(("- ", "* ")):
            items = []
            while i < len(lines) and lines[i].startswith(("- ", "* ")):
                items.append(f"<li>{_inline(lines[i][2:])}</li>")
                i += 1
            out.append(f"<ul>{''.join(items)}</ul>")
        elif line.strip():
            para = []
            while i < len(lines) and lines[i].strip() and not lines[i].startswith(("#", "|", "```", "- ", "* ")):
                para.append(lines[i].strip())
                i += 1
            out.append(f"<p>{_inline(' '.join(para))}</p>")
        else:
            i += 1
    return "\n".join(out)


def render(title: str, subtitle: str, sections: list[Section]) -> str:
    """The whole document."""
    nav = " ".join(f'<a href="#{s.anchor}">{esc(s.title)}</a>' for s in sections)
    body = "\n".join(f'<h2 id="{s.anchor}">{esc(s.title)}</h2>\n' + "\n".join(s.blocks) for s in sections)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body>\n"
            f'<h1>{esc(title)}</h1><p class="meta">{esc(subtitle)}</p><nav>{nav}</nav>\n{body}\n</body></html>\n')


# ---------------------------------------------------------------------------------------------------------
# sections from the stage outputs


def _metrics_long(root: Path) -> tuple[pd.DataFrame, list[str]]:
    """Every regime's metrics (all_metrics.csv from the tables stage, else each regime's metrics.json)."""
    from wattgpu.reporting.tables import long_frame

    folder = paths.resolve(EVALUATE_DIR, root)
    regimes = sorted(p.parent.name for p in folder.glob("*/metrics.json"))
    order = [r for r in ("cv5", "cv5_rows", "logo", "lolo", "lopo") if r in regimes]
    order += [r for r in regimes if r not in order]
    csv = folder / "all_metrics.csv"
    if csv.exists():
        long = pd.read_csv(csv)
        order = [r for r in order if r in set(long["regime"])] or list(dict.fromkeys(long["regime"]))
        return long, order
    results = {r: json.loads((folder / r / "metrics.json").read_text()) for r in order}
    return long_frame(results, scenarios=tuple(SCENARIO_GROUPS)), order


def evaluation_section(root: Path) -> Section:
    """The tables stage's layout (Table 2 / Table 3 of the paper, plus per server load), as HTML."""
    from wattgpu.reporting.tables import paper_table, to_markdown

    sec = Section("Evaluation")
    long, order = _metrics_long(root)
    if long.empty:
        sec.blocks.append('<p class="note">No evaluation metrics yet: run <code>dvc repro</code>.</p>')
        return sec
    sec.blocks.append('<p class="note">MdAPE and ranking metrics of predictions for rows each model never saw under '
                      "each cross-validation regime (LOGO: unseen GPU, LOLO: unseen LLM, LOPO: both). Baselines learn "
                      "nothing, so they appear once. Paper MdAPE: the published LOGO figure.</p>")
    for target, title in (("power", "Mean power (W per GPU)"), ("itl", "Inter-token latency")):
        for scen, label in ((("offline", "server"), ""), (SERVER_LOADS, ", per server load")):
            part = long[(long["target"] == target) & long["scenario"].isin(scen)]
            if len(part):
                sec.blocks.append(markdown_html(to_markdown(paper_table(part, target, order), title + label, "")))
    return sec


def plots_section(root: Path) -> Section:
    sec = Section("Plots")
    folder = paths.resolve(EVALUATE_DIR, root)
    _, order = _metrics_long(root)
    for regime in order:
        figs = [image_html((folder / regime / f).read_bytes(), f"{regime}: {label}")
                for f, label in PLOTS if (folder / regime / f).exists()]
        if figs:
            sec.blocks.append(f"<h3>{esc(regime)}</h3>" + "".join(figs))
    if not sec.blocks:
        sec.blocks.append('<p class="note">No plots yet: run <code>dvc repro</code>.</p>')
    return sec


def intervals_section(root: Path) -> Section | None:
    """Measured coverage of the conformal intervals per regime (the README's table) and their plots."""
    from wattgpu.reporting.readme import interval_coverage

    folder = paths.resolve(paths.SEARCH_DIR, root)
    if not (folder / "intervals.json").exists():
        return None
    sec = Section("Prediction intervals: measured coverage", [markdown_html(interval_coverage(root))])
    for name, label in (("interval_coverage_by_gpu.png", "coverage of the 80 % intervals per held-out GPU (LOGO)"),
                        ("interval_band.png", "measured / predicted against the predicted 80 % band (LOGO)")):
        if (folder / "plots" / name).exists():
            sec.blocks.append(image_html((folder / "plots" / name).read_bytes(), label))
    return sec


def leaderboard_section(root: Path) -> Section | None:
    path = paths.resolve(LEADERBOARD, root)
    if not path.exists():
        return None
    return Section("Search leaderboard", [markdown_html(path.read_text(encoding="utf-8"))])


def ranking_plot(case: pd.DataFrame, llm: str) -> bytes:
    """Grouped bars: measured vs LOGO-predicted power per GPU, one panel per scenario (PNG bytes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scenarios = list(dict.fromkeys(case["scenario"]))
    fig, axes = plt.subplots(1, len(scenarios), figsize=(5 * len(scenarios), 4.2), squeeze=False)
    for ax, scen in zip(axes[0], scenarios):
        d = case[case["scenario"] == scen].sort_values("power_measured_w")
        x = range(len(d))
        ax.bar([i - 0.2 for i in x], d["power_measured_w"], width=0.4, label="measured")
        ax.bar([i + 0.2 for i in x], d["power_predicted_w"], width=0.4, label="predicted (LOGO)")
        ax.set_xticks(list(x), [g.replace("NVIDIA ", "").replace("Tesla ", "") for g in d["gpu"]], rotation=50,
                      ha="right", fontsize=8)
        ax.set_title(scen)
        ax.set_ylabel("mean power per GPU (W)")
        ax.legend(fontsize=8)
    fig.suptitle(f"{llm}: GPUs ranked by measured power")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def ranking_section(case: pd.DataFrame | None, llm: str, max_itl_ms: float) -> Section:
    from wattgpu.evaluation.casestudy import verdicts

    sec = Section(f"GPU rankings: {llm}")
    if case is None or case.empty:
        sec.blocks.append(f'<p class="note">No LOGO predictions for {esc(llm)}.</p>')
        return sec
    sec.blocks.append(f'<p class="note">Each GPU\'s prediction comes from a model trained without that GPU '
                      f"(leave-one-GPU-out). GPUs sorted by measured power within each scenario; server rows whose "
                      f"measured ITL meets {max_itl_ms:g} ms are green, those missing it red (offline ITL is the run's "
                      f"duration over all generated tokens, not a latency). Energy per token: server = W / "
                      f"(requests/s x output tokens); offline = W x ITL.</p>")
    for model, t in case.groupby("model", sort=False):
        t = t.copy()
        t["rank meas."] = t.groupby("scenario")["power_measured_w"].rank(method="min").astype(int)
        t["rank pred."] = t.groupby("scenario")["power_predicted_w"].rank(method="min").astype(int)
        shown = pd.DataFrame({
            "GPU": t["gpu"], "scenario": t["scenario"],
            "W meas.": t["power_measured_w"].map("{:.0f}".format), "W pred.": t["power_predicted_w"].map("{:.0f}".format),
            "err": t["power_error_pct"].map("{:+.0f} %".format),
            "rank meas.": t["rank meas."], "rank pred.": t["rank pred."],
            "ITL ms meas.": t["itl_measured_ms"].map("{:.2f}".format),
            "ITL ms pred.": t["itl_predicted_ms"].map("{:.2f}".format),
            "J/token meas.": t["energy_measured_j"].map("{:.3g}".format),
            "J/token pred.": t["energy_predicted_j"].map("{:.3g}".format),
        })
        classes = t["meets_measured"].map(lambda m: "" if m is None else ("good" if m else "bad"))
        sec.blocks.append(f"<h3>{esc(model)}</h3>" + table_html(shown.reset_index(drop=True),
                                                                 classes.reset_index(drop=True), ("GPU", "scenario")))
        server = t[t["scenario"].isin(SERVER_LOADS)]
        checks = pd.DataFrame([{"check": v.claim, "measured": v.measured, "predicted": v.predicted,
                                "verdict": v.verdict} for v in verdicts(server, max_itl_ms)])
        if len(checks):
            sec.blocks.append(table_html(checks, text_cols=tuple(checks.columns)))
        sec.blocks.append(image_html(ranking_plot(t, llm), f"{llm}, {model}: measured vs LOGO-predicted power"))
    return sec


def write_report(out: Path, case: pd.DataFrame | None, llm: str, max_itl_ms: float, root: Path | None = None) -> Path:
    """Gather the sections from reports/ and write the HTML file."""
    from wattgpu.tracking import git_commit

    root = root or paths.project_root()
    sections = [evaluation_section(root), plots_section(root)]
    for extra in (intervals_section(root), leaderboard_section(root)):
        if extra is not None:
            sections.append(extra)
    sections.append(ranking_section(case, llm, max_itl_ms))
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = render("wattgpu report", f"generated {stamp} from reports/ at commit {git_commit(root)[:10]}", sections)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out
