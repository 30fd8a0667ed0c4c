"""The case study as markdown (the README's and `wattgpu casestudy --markdown`): one table per model and the
paper's claims checked under it. Renders wattgpu.evaluation.casestudy's numbers."""

from __future__ import annotations

import numpy as np
import pandas as pd

from wattgpu.evaluation.casestudy import BAND, verdicts


def _fmt(v, spec: str) -> str:
    return "–" if v is None or (isinstance(v, float) and np.isnan(v)) else format(v, spec)


def _band(r: pd.Series, t: str, unit: str, spec: str) -> str:
    """'lo–hi (in)' / '(OUT)', or '–' where the model gives no band."""
    lo, hi, inside = r.get(f"{t}_lo_{unit}"), r.get(f"{t}_hi_{unit}"), r.get(f"{t}_inside_band")
    if inside is None or (isinstance(inside, float) and np.isnan(inside)):
        return "–"
    return f"{_fmt(lo, spec)}–{_fmt(hi, spec)} {'in' if bool(inside) else '**out**'}"


def to_markdown(table: pd.DataFrame, max_itl_ms: float) -> str:
    """One markdown table per model: the case-study rows (with the predicted 80 % band and whether the measurement
    falls inside it) and the verdicts under it."""
    parts = []
    for model, t in table.groupby("model", sort=False):
        lines = [f"**{model}** (LOGO: each GPU predicted by a model trained without it; bands: conformal "
                 f"{BAND} % intervals, `in` when the measurement falls inside)", "",
                 (f"| GPU | scenario | power meas. (W) | power pred. (W) | err | {BAND} % band | ITL meas. (ms) | "
                  f"ITL pred. (ms) | err | {BAND} % band | J/token meas. | J/token pred. | "
                  f"≤ {max_itl_ms:g} ms meas. / pred. |"),
                 "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|"]
        yes = {True: "yes", False: "no"}
        for _, r in t.iterrows():
            lines.append(
                f"| {r['gpu']} | {r['scenario']} | {_fmt(r['power_measured_w'], '.0f')} | "
                f"{_fmt(r['power_predicted_w'], '.0f')} | {_fmt(r['power_error_pct'], '+.0f')} % | "
                f"{_band(r, 'power', 'w', '.0f')} | "
                f"{_fmt(r['itl_measured_ms'], '.1f')} | {_fmt(r['itl_predicted_ms'], '.1f')} | "
                f"{_fmt(r['itl_error_pct'], '+.0f')} % | {_band(r, 'itl', 'ms', '.1f')} | "
                f"{_fmt(r['energy_measured_j'], '.2f')} | "
                f"{_fmt(r['energy_predicted_j'], '.2f')} | {yes[bool(r['meets_measured'])]} / "
                f"{yes[bool(r['meets_predicted'])]} |")
        lines += ["", "| check | measured | predicted | verdict |", "|---|---|---|:---:|"]
        lines += [f"| {v.claim} | {v.measured} | {v.predicted} | {v.verdict} |" for v in verdicts(t, max_itl_ms)]
        if "power_inside_band" in t and t["power_inside_band"].notna().any():
            inside = {k: t[f"{k}_inside_band"].dropna().astype(bool) for k in ("power", "itl")}
            lines += ["", f"Measured inside the predicted {BAND} % band: power {int(inside['power'].sum())} of "
                      f"{len(inside['power'])} (GPU, load) cells, ITL {int(inside['itl'].sum())} of "
                      f"{len(inside['itl'])}."]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"
