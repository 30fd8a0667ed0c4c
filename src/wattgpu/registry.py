"""Model registry: champion / challenger by MLflow aliases, promotion by figures from the same evaluation.

A new version always gets the alias `challenger` (the newest candidate). It also becomes `champion` when
- there is no champion yet, or
- its score, the mean of its offline and server MdAPE (%) on the primary regime, is lower than the
  champion's by more than `min_improvement_pp`, both figures coming from the same evaluation (same regime,
  same training rows). A mean rather than "both not worse": offline and server errors are on one scale
  (percent), and a model that trades 0.1 pp offline for 3 pp server is better for every user we know of.
- the champion's figures come from another evaluation and `promote_if_not_comparable` is set (the newest
  evaluation stands; the decision says so).
The decision, its reason and both sets of figures are written on the version (tags and description).
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass

import pandas as pd

from wattgpu.config import Registry

CHAMPION, CHALLENGER = "champion", "challenger"
_FIGURE_TAGS = {"regime": "eval.regime", "offline_mdape": "eval.offline_mdape",
                "server_mdape": "eval.server_mdape", "rows_md5": "eval.rows_md5"}


@dataclass(frozen=True)
class Figures:
    """A model's held-out error on one evaluation: regime, training rows (fingerprint), MdAPE in %."""

    regime: str
    offline_mdape: float
    server_mdape: float
    rows_md5: str

    @property
    def score(self) -> float:
        """Mean of offline and server MdAPE (%): lower is better."""
        return (self.offline_mdape + self.server_mdape) / 2

    def comparable(self, other: Figures) -> bool:
        return self.regime == other.regime and self.rows_md5 == other.rows_md5

    def to_tags(self) -> dict[str, str]:
        return {**{tag: str(getattr(self, f)) for f, tag in _FIGURE_TAGS.items()}, "eval.score": f"{self.score:.6g}"}

    @classmethod
    def from_tags(cls, tags: dict[str, str]) -> Figures | None:
        """The figures written by to_tags, or None for a version registered without them."""
        try:
            return cls(tags[_FIGURE_TAGS["regime"]], float(tags[_FIGURE_TAGS["offline_mdape"]]),
                       float(tags[_FIGURE_TAGS["server_mdape"]]), tags[_FIGURE_TAGS["rows_md5"]])
        except (KeyError, ValueError):
            return None

    def summary(self) -> dict:
        return {**asdict(self), "score": round(self.score, 6)}


@dataclass(frozen=True)
class Decision:
    promote: bool
    verdict: str  # first champion | promoted | kept champion | promoted, not comparable | kept, not comparable
    reason: str


INTERVALS_TAG = "intervals"  # "conformal" on a version whose model folder carries interval calibration


def decide(challenger: Figures, champion: Figures | None, rule: Registry, champion_version: str | None = None,
           adds_intervals: bool = False) -> Decision:
    """Whether the challenger becomes champion, and why (pure). `adds_intervals`: the challenger gives prediction
    intervals and the champion does not; then figures no worse than the champion's are enough."""
    if champion_version is None:
        return Decision(True, "first champion", f"no champion yet; score {challenger.score:.3f} %")
    cv = f"v{champion_version}"
    if champion is None or not challenger.comparable(champion):
        why = ("it has no recorded figures" if champion is None else
               f"its figures are from regime {champion.regime!r}, rows {champion.rows_md5[:8]}; "
               f"the challenger's from regime {challenger.regime!r}, rows {challenger.rows_md5[:8]}")
        if rule.promote_if_not_comparable:
            return Decision(True, "promoted, not comparable", f"champion {cv} cannot be compared ({why}); the newest evaluation stands")
        return Decision(False, "kept, not comparable", f"champion {cv} cannot be compared ({why}); promote by hand after review")
    gain = champion.score - challenger.score
    figures = (f"mean MdAPE {challenger.score:.3f} % vs champion {cv} {champion.score:.3f} % on {challenger.regime} "
               f"(offline {challenger.offline_mdape:.3f} vs {champion.offline_mdape:.3f}, "
               f"server {challenger.server_mdape:.3f} vs {champion.server_mdape:.3f})")
    if gain > rule.min_improvement_pp:
        return Decision(True, "promoted", f"{figures}: better by {gain:.3f} pp")
    if adds_intervals and gain >= -1e-9:
        return Decision(True, "promoted", f"{figures}: no worse, and it adds the prediction intervals {cv} lacks")
    return Decision(False, "kept champion", f"{figures}: not better by more than {rule.min_improvement_pp:g} pp")


def rows_md5(rows: pd.DataFrame) -> str:
    """Fingerprint of training rows (values and column names, row order included)."""
    h = hashlib.md5(",".join(map(str, rows.columns)).encode())
    h.update(pd.util.hash_pandas_object(rows, index=False).to_numpy().tobytes())
    return h.hexdigest()


def register_version(client, name: str, model_uri: str, figures: Figures, rule: Registry,
                     tags: dict[str, str] | None = None, model_description: str | None = None) -> dict:
    """Register `model_uri` as a new version of `name`, set aliases by `decide`, record the decision on it."""
    import mlflow

    champion_version = champion = None
    adds_intervals = (tags or {}).get(INTERVALS_TAG) == "conformal"
    if client.search_registered_models(filter_string=f"name = '{name}'"):
        champion_version = client.get_registered_model(name).aliases.get(CHAMPION)
    if champion_version is not None:
        champion_tags = client.get_model_version(name, champion_version).tags
        champion = Figures.from_tags(champion_tags)
        adds_intervals &= champion_tags.get(INTERVALS_TAG) != "conformal"
    decision = decide(figures, champion, rule, champion_version, adds_intervals)

    version = mlflow.register_model(model_uri, name, tags={**(tags or {}), **figures.to_tags()}).version
    if model_description:
        client.update_registered_model(name, description=model_description)
    for key, value in {"decision": decision.verdict, "decision.reason": decision.reason,
                       "compared_with": f"v{champion_version}" if champion_version else "none"}.items():
        client.set_model_version_tag(name, version, key, value)
    client.update_model_version(name, version, description=f"{decision.verdict}: {decision.reason}")
    client.set_registered_model_alias(name, CHALLENGER, version)
    if decision.promote:
        client.set_registered_model_alias(name, CHAMPION, version)
    return {
        "name": name, "version": int(version), "alias": CHAMPION if decision.promote else CHALLENGER,
        "champion_version": int(version if decision.promote else champion_version),
        "decision": decision.verdict, "reason": decision.reason, "figures": figures.summary(),
        "compared_with": {"version": int(champion_version), **champion.summary()} if champion else None,
    }
