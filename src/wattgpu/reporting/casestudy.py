"""The case study as markdown (the README's and `wattgpu casestudy --markdown`): one table per model and the
paper's claims checked under it. Renders wattgpu.evaluation.casestudy's numbers."""

from __future__ import annotations

import numpy as np
import pandas as pd

from wattgpu.evaluation.casestudy import verdicts


def _fmt(v, spec: str) -> str:
    return "–" if v is None or (isinstance(v, float) and np.isnan(v)) else format(v, spec)


def to_markdown(table: pd.DataFrame, max_itl_ms: float) -> str:
    """One markdown table per model: the case-study rows and the verdicts under it."""
    parts = []
    for model, t in table.groupby("model", sort=False):
        lines = [f"**{model}** (LOGO: each GPU predicted by a model trained without it)", "",
                 ("| GPU | scenario | power meas. (W) | power pred. (W) | err | ITL meas. (ms) | ITL pred. (ms) | err "
                  f"| J/token meas. | J/token pred. | ≤ {max_itl_ms:g} ms meas. / pred. |"),
                 "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|:---:|"]
        yes = {True: "yes", False: "no"}
        for _, r in t.iterrows():
            lines.append(
                f"| {r['gpu']} | {r['scenario']} | {_fmt(r['power_measured_w'], '.0f')} | "
                f"{_fmt(r['power_predicted_w'], '.0f')} | {_fmt(r['power_error_pct'], '+.0f')} % | "
                f"{_fmt(r['itl_measured_ms'], '.1f')} | {_fmt(r['itl_predicted_ms'], '.1f')} | "
                f"{_fmt(r['itl_error_pct'], '+.0f')} % | {_fmt(r['energy_measured_j'], '.2f')} | "
                f"{_fmt(r['energy_predicted_j'], '.2f')} | {yes[bool(r['meets_measured'])]} / "
                f"{yes[bool(r['meets_predicted'])]} |")
        lines += ["", "| check | measured | predicted | verdict |", "|---|---|---|:---:|"]
        lines += [f"| {v.claim} | {v.measured} | {v.predicted} | {v.verdict} |" for v in verdicts(t, max_itl_ms)]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"
