"""The predictor every entry point uses (CLI, batch CSV, the served model): one way through,
requests -> validate (once) -> features -> models -> derived outputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from wattgpu import physics
from wattgpu.arrays import frame
from wattgpu.features import accelerator_families, engineer, has_replica_shape, replica_shape_ratio, with_concurrency
from wattgpu.modeling import coverage, intervals
from wattgpu.modeling.targets import TARGETS
from wattgpu.request import RequestError, Validated, validate, validate_batch
from wattgpu.sources.schema import MEASURED_CONCURRENCY
from wattgpu.workload import default_max_num_seqs

OUTPUT_COLUMNS = ("power_w", "itl_s", "itl_ms", "tokens_per_s", "system_tokens_per_s", "energy_per_token_j",
                  "concurrency", "overloaded")
BOUNDED = ("power_w", "itl_s", "itl_ms", "system_tokens_per_s", "energy_per_token_j")  # each gets _lo and _hi
INTERVAL_COLUMNS = ("level", *(f"{c}_{end}" for c in BOUNDED for end in ("lo", "hi")), "interval")
MAX_CACHED_LEVELS = 100  # interval half-width tables kept per Predictor (a request may ask for any level)
FIXED_POINT_STEPS = 40  # iterations of requests-in-flight = rate x output tokens x ITL(requests in flight)


def _demand(rows: pd.DataFrame) -> np.ndarray:
    """Generated tokens a Poisson load asks for per second: rate x output tokens per request."""
    return (rows["request_rate_per_s"] * rows["output_tokens_mean"]).to_numpy(dtype=float)


def _cap(rows: pd.DataFrame) -> np.ndarray:
    """The most requests a Poisson load keeps decoding per row: features' `running_cap` (the sequences the KV cache
    holds and, for vLLM's V1 engine, its default max_num_seqs; no engine cap is assumed for engines whose default is
    not known). Where that is unbounded (unfeatured rows, weights that leave no room) vLLM's default max_num_seqs
    bounds it. Arrivals beyond are `overloaded`."""
    cap = rows["running_cap"].to_numpy(dtype=float) if "running_cap" in rows else np.full(len(rows), np.inf)
    if np.isfinite(cap).all():
        return cap
    return np.where(np.isfinite(cap), cap, default_max_num_seqs(rows["gpu_memory_gb"].to_numpy(dtype=float),
                                                                 rows["gpu"].to_numpy(), rows["engine_version"].to_numpy()))


def shaped_itl(model) -> callable:
    """The ITL the served path answers, from an ITL model (featured rows -> s): its prediction times what the row's
    replica shape (expert parallel, DP attention, speculative decoding; no measured row has them) does to the step
    time at the row's requests in flight (features.replica_shape_ratio, physics.replica_itl_ratio; exactly 1 where
    the row has none). The one place the ratio is applied: the requests in flight a Poisson rate implies
    (solve_concurrency) and every answer (CLI, batch, HTTP, the planner) use this ITL."""
    def itl(featured: pd.DataFrame) -> np.ndarray:
        return np.asarray(model.predict(featured), dtype=float) * replica_shape_ratio(featured)

    def at_concurrency(featured: pd.DataFrame):
        """(positions, concurrency) -> itl(with_concurrency(featured.iloc[positions], concurrency)): the model's own
        shortcut (estimator.TargetRegressor.at_concurrency) where it has one and no row has a replica shape (whose
        ratio depends on the requests in flight), else the rows re-featured at each concurrency."""
        fast = getattr(model, "at_concurrency", None)
        fast = fast(featured) if fast is not None and not has_replica_shape(featured).any() else None
        if fast is not None:
            return lambda positions, concurrency: np.asarray(fast(positions, concurrency), dtype=float)
        return refeatured(itl, featured)

    itl.at_concurrency = at_concurrency
    return itl


def refeatured(itl, featured: pd.DataFrame):
    """(positions, concurrency) -> `itl` (featured rows -> s) of `featured.iloc[positions]` re-featured at
    `concurrency` requests in flight (features.with_concurrency)."""
    return lambda positions, concurrency: np.asarray(itl(with_concurrency(featured.iloc[positions], concurrency)),
                                                     dtype=float)


def derived_outputs(rows: pd.DataFrame, power_w: np.ndarray, itl_s: np.ndarray,
                    overloaded: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Throughput and energy per token from predicted power (per GPU) and per-request ITL, tied through the
    sequences decoding (Little's law): system tokens/s = min(requests in flight, running sequences) / ITL;
    `tokens_per_s` is one running stream's, 1 / ITL; energy per token = W per GPU x GPUs / system tokens/s
    (physics.energy_per_token_j). `overloaded`: per row, whether its arrivals outpace the replica (default: none).
    OUTPUT_COLUMNS -> an array each."""
    concurrency = rows["concurrency"].to_numpy(dtype=float)
    # the sequences each step decodes (features: physics.running_sequences); requests beyond them wait their turn
    running = rows["running_sequences"].to_numpy(dtype=float) if "running_sequences" in rows else concurrency
    system_tps = np.minimum(concurrency, running) / itl_s
    return {
        "power_w": np.asarray(power_w, dtype=float),
        "itl_s": itl_s,
        "itl_ms": itl_s * 1e3,
        "tokens_per_s": 1.0 / itl_s,
        "system_tokens_per_s": system_tps,
        "energy_per_token_j": physics.energy_per_token_j(power_w, rows["n_gpus"].to_numpy(dtype=float), system_tps),
        "concurrency": concurrency,
        "overloaded": np.zeros(len(rows), bool) if overloaded is None else np.asarray(overloaded, dtype=bool),
    }


@dataclass
class Predictor:
    """Fitted power and ITL estimators (natural-unit predictions) with the catalogs they resolve names in.

    `idle_power_w` (catalog GPU key -> measured idle W) feeds the paper replica's idle-power feature; a GPU
    without a measured idle power (any GPU given by spec) gets NaN there, which the model mean-imputes.
    `offline_batch`: the sequences decoded together offline that the models were trained with (meta.json).
    """

    models: dict[str, object]
    gpus: object
    llms: object
    offline_batch: float
    versions: dict[str, str] = field(default_factory=dict)
    idle_power_w: Mapping[str, float] = field(default_factory=dict)
    calibration: dict[str, intervals.Calibration] = field(default_factory=dict)  # target -> conformal scores
    training_ranges: dict[str, dict[str, list]] = field(default_factory=dict)  # target -> its rows' ranges
    _widths: dict[tuple[str, float], np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    def validate(self, requests) -> pd.DataFrame:
        """Canonical rows (request.validate) against the models' catalogs; raises RequestError naming row and field."""
        return validate(requests, self.gpus, self.llms)

    def validate_batch(self, requests) -> Validated:
        """The good requests' canonical rows and every bad row's errors (request.validate_batch)."""
        return validate_batch(requests, self.gpus, self.llms)

    def features(self, rows: pd.DataFrame) -> pd.DataFrame:
        """Validated rows with the measured idle power of catalog GPUs and every engineered feature."""
        idle = np.array([self.idle_power_w.get(g, np.nan) for g in rows["gpu"]], dtype=float)
        return engineer(rows, offline_batch=self.offline_batch, inputs={"gpu_idle_power_w": idle})

    def _itl(self, featured: pd.DataFrame) -> np.ndarray:
        return shaped_itl(self.models["itl"])(featured)

    def solve_concurrency(self, featured: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
        """Featured rows at the requests in flight their Poisson rate implies (`solve_concurrency`, with this
        Predictor's ITL model), and ITL(C) where the last step predicted it (NaN elsewhere)."""
        todo = featured["concurrency"].isna().to_numpy() & featured["request_rate_per_s"].notna().to_numpy()
        if todo.any() and "itl" not in self.models:
            raise RequestError(int(np.flatnonzero(todo)[0]), "concurrency",
                               "a Poisson load's requests in flight come from the ITL model, which this power model "
                               "was served without: give `concurrency` (requests in flight), or serve it beside the "
                               "ITL model")
        return solve_concurrency(featured, shaped_itl(self.models.get("itl")))

    def predict_rows(self, rows: pd.DataFrame) -> pd.DataFrame:
        """Predictions for validated rows: gpu, llm, scenario and OUTPUT_COLUMNS. A Poisson row is `overloaded`
        where its arrivals outpace the replica at the engine's cap (its requests in flight are then the cap)."""
        rows, itl = self.solve_concurrency(self.features(rows))
        nan = np.full(len(rows), np.nan)
        power = np.asarray(self.models["power"].predict(rows), dtype=float) if "power" in self.models else nan
        unknown = np.isnan(itl)
        if "itl" in self.models and unknown.any():
            itl[unknown] = self._itl(rows if unknown.all() else rows[unknown])
        overloaded = rows["request_rate_per_s"].notna().to_numpy()
        if overloaded.any():
            overloaded[overloaded] = (_demand(rows[overloaded]) * itl[overloaded]
                                      > _cap(rows[overloaded]) * (1 + 1e-6))
        point = derived_outputs(rows, power, itl, overloaded)
        return frame({"gpu": rows["gpu"].to_numpy(), "llm": rows["llm"].to_numpy(),
                      "scenario": rows["scenario_label"].to_numpy(), **point, **self.intervals(rows, point)})

    def intervals(self, rows: pd.DataFrame, point: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """INTERVAL_COLUMNS for featured rows at each row's `level` (modeling.intervals): power and ITL from their
        conformal scores; throughput from the ITL bounds through the requests in flight (a Poisson load below the
        engine's cap serves its arrivals whatever the ITL: no band); energy per token combines the power and
        throughput bounds (conservative: both at their worst). NaN bounds: no calibration, or the model abstains.
        `point`: derived_outputs' arrays; returns INTERVAL_COLUMNS -> an array each."""
        n = len(rows)
        level = (rows["level"] if "level" in rows else pd.Series(intervals.DEFAULT_LEVEL, index=rows.index))
        level = level.to_numpy(dtype=float)
        group = intervals.workload_group(rows)
        out = {"level": level}
        # an engine no source measured: answered as its nearest measured family, said in every row's note
        engines = rows["engine"].astype(str).to_numpy() if "engine" in rows else np.full(n, "")
        versions = rows["engine_version"].to_numpy() if "engine_version" in rows else np.full(n, "")
        notes = [[note] if (note := coverage.engine_note(e, v)) else [] for e, v in zip(engines, versions)]
        # a replica shape no source measured: answered from the physics, its ITL ratio said in the note
        ratio = replica_shape_ratio(rows)
        for i, note in coverage.shape_notes(rows, ratio).items():
            notes[i].append(note)
        family = accelerator_families(rows)
        for target, column in (("power", "power_w"), ("itl", "itl_s")):
            lo, hi = np.full(n, np.nan), np.full(n, np.nan)
            cal = self.calibration.get(target)
            if cal is not None and target in self.models:
                extrap = coverage.outside_mask(rows, self.training_ranges.get(target, {}))
                novel = intervals.novel_family(rows, cal.families, family) if cal.families else np.zeros(n, dtype=bool)
                y = np.asarray(point[column], dtype=float)
                low, high = TARGETS[target].limits(rows)
                if target == "itl":  # the replica's shape scales the step the floor bounds (speculation: below it)
                    low = low * ratio
                for lv in np.unique(level):
                    at = level == lv
                    q = self._half_widths(target, float(lv))[group[at] * 2 + extrap[at]]
                    q = np.where(novel[at], np.inf, q)  # an accelerator family never measured: abstain
                    lo[at], hi[at] = intervals.band(y[at], q, (low[at], high[at]))
                for i in np.flatnonzero(extrap & ~novel):
                    notes[i].append(f"{target} wider: extrapolating")
                for i in np.flatnonzero(~np.isfinite(lo) & np.isfinite(y)):
                    notes[i].append(intervals.abstain_reason(target, family[i]) if novel[i] else
                                    f"{target} abstains: too few calibration rows this far out for a "
                                    f"{intervals.level_key(level[i])} % interval")
            out[f"{column}_lo"], out[f"{column}_hi"] = lo, hi
        out["itl_ms_lo"], out["itl_ms_hi"] = out["itl_s_lo"] * 1e3, out["itl_s_hi"] * 1e3
        concurrency = np.asarray(point["concurrency"], dtype=float)
        if "running_sequences" in rows:
            concurrency = np.minimum(concurrency, rows["running_sequences"].to_numpy(float))
        arrivals = rows["request_rate_per_s"].notna().to_numpy() & ~np.asarray(point["overloaded"], dtype=bool)
        tps = np.asarray(point["system_tokens_per_s"], dtype=float)
        out["system_tokens_per_s_lo"] = np.where(arrivals, tps, concurrency / out["itl_s_hi"])
        out["system_tokens_per_s_hi"] = np.where(arrivals, tps, concurrency / out["itl_s_lo"])
        gpus = rows["n_gpus"].to_numpy(float)
        out["energy_per_token_j_lo"] = physics.energy_per_token_j(out["power_w_lo"], gpus, out["system_tokens_per_s_hi"])
        out["energy_per_token_j_hi"] = physics.energy_per_token_j(out["power_w_hi"], gpus, out["system_tokens_per_s_lo"])
        out["interval"] = np.array(["; ".join(sorted(set(n_))) for n_ in notes], dtype=object).reshape(n)
        return {c: out[c] for c in INTERVAL_COLUMNS}

    def _half_widths(self, target: str, level: float) -> np.ndarray:
        """The log-scale half-width at `level` per (workload group, extrapolating) bin, index group x 2 +
        extrapolating (intervals.half_widths, group-conditional floor included; inf: abstain); an accelerator family
        unseen in training abstains in `intervals` whatever its bin. Fitted once per target and level."""
        key = (target, level)
        if key not in self._widths:
            if len(self._widths) > MAX_CACHED_LEVELS:  # levels come from requests: keep the cache bounded
                self._widths.clear()
            bins = np.arange(2 * len(intervals.WORKLOAD_GROUPS))
            self._widths[key] = intervals.half_widths(self.calibration[target], bins // 2, bins % 2 == 1, level)
        return self._widths[key]

    def predict(self, requests) -> pd.DataFrame:
        """One answer per request, in input order: a rejected row has null predictions and its `error` (null on
        answered rows). Raises BatchRequestError, naming every row's error, only when no row can be answered."""
        batch = self.validate_batch(requests)
        if not len(batch.rows):
            raise batch.error()
        return batch.answers(self.predict_rows(batch.rows))


def as_served(rows: pd.DataFrame) -> pd.DataFrame:
    """Measured rows as a user asks them before deploying (featured rows in, featured rows out): a Poisson load
    gives its request rate, not its requests in flight (a source derives those from the measured latency, by
    Little's law), so `concurrency` is left for `solve_concurrency`; a closed batch whose source reports the
    measured mean batch is asked at the batch the engine was set to (`concurrency_setting`, e.g. max_num_seqs).
    Only rows whose `concurrency_derivation` is measured (sources.schema.MEASURED_CONCURRENCY) change.
    Every other input is what the user sets (batch, prompt and output tokens, GPUs, engine) or derives from specs
    (the offline run's requests in flight)."""
    c = rows["concurrency"].to_numpy(dtype=float, copy=True)
    measured = rows["concurrency_derivation"].isin(MEASURED_CONCURRENCY).to_numpy() if "concurrency_derivation" \
        in rows else np.zeros(len(rows), dtype=bool)
    arrivals = rows["request_rate_per_s"].notna().to_numpy()
    c[measured & arrivals] = np.nan  # solved from the rate
    setting = rows["concurrency_setting"].to_numpy(dtype=float) if "concurrency_setting" in rows else c * np.nan
    c[measured & ~arrivals] = setting[measured & ~arrivals]
    return with_concurrency(rows, c)


def solve_concurrency(featured: pd.DataFrame, itl) -> tuple[pd.DataFrame, np.ndarray]:
    """Featured rows with Poisson arrivals and no `concurrency` get the requests in flight their rate implies, by
    Little's law: the fixed point of C = rate x output tokens x ITL(C), with `itl` (featured rows -> ITL in s) the
    ITL model, found by iteration from zero requests (ITL never falls as C rises, so the iteration climbs to the
    smallest fixed point), capped by the engine's cap (vLLM's default max_num_seqs). Each step recomputes only the
    features that depend on C (features.with_concurrency; an `itl` from shaped_itl builds the others once, its
    `at_concurrency`) and predicts only the rows that have not converged.
    Returns the rows at their C and ITL(C) where the last step predicted it (NaN elsewhere), so that it is not
    predicted again. The one definition of a Poisson load's requests in flight: serving and evaluation both call
    it."""
    todo = featured["concurrency"].isna().to_numpy() & featured["request_rate_per_s"].notna().to_numpy()
    itl_at = np.full(len(featured), np.nan)
    if not todo.any():
        return featured, itl_at
    sub = featured[todo]
    demand, cap = _demand(sub), _cap(sub)
    c, at_c = np.zeros(len(sub)), np.full(len(sub), np.nan)
    active = np.arange(len(sub))
    ask = itl.at_concurrency(sub) if hasattr(itl, "at_concurrency") else refeatured(itl, sub)
    for _ in range(FIXED_POINT_STEPS):
        at_c[active] = ask(active, c[active])
        new = np.minimum(demand[active] * at_c[active], cap[active])
        moving = ~np.isclose(new, c[active], rtol=1e-4, atol=1e-9)
        c[active[moving]], at_c[active[moving]] = new[moving], np.nan  # ITL at the new C is not known yet
        active = active[moving]
        if not len(active):
            break
    concurrency = featured["concurrency"].to_numpy(dtype=float, copy=True)
    concurrency[todo], itl_at[todo] = c, at_c
    return with_concurrency(featured, concurrency), itl_at


def served_predictions(rows: pd.DataFrame, models: Mapping[str, object]) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """What the served path answers for measured (featured) rows: asked `as_served`, a Poisson load's requests in
    flight solved with `models["itl"]`, then each model in `models` (target -> fitted estimator) predicts at that
    concurrency. Returns the rows at their served concurrency and {target: predictions}. Evaluation scores these,
    so that a reported error is the error of what the Predictor serves (Predictor.predict_rows follows the same
    steps)."""
    asked = as_served(rows)
    needs_itl = asked["concurrency"].isna().to_numpy() & asked["request_rate_per_s"].notna().to_numpy()
    if needs_itl.any() and "itl" not in models:
        raise ValueError("a Poisson load's requests in flight need an ITL model")
    itl_model = models.get("itl")
    served, itl_at = solve_concurrency(asked, shaped_itl(itl_model) if itl_model is not None else None)
    out = {}
    for target, model in models.items():
        with np.errstate(over="ignore", invalid="ignore"):
            pred = shaped_itl(model)(served) if target == "itl" else np.asarray(model.predict(served), dtype=float)
        if target == "itl":  # ITL at the solved C where the solver's last step computed it (the same number)
            pred = np.where(np.isnan(itl_at), pred, itl_at)
        out[target] = pred
    return served, out


def joined(power: Predictor, itl: Predictor) -> Predictor:
    """`power`'s power model with `itl`'s ITL model (each target's own champion), one Predictor for both: the ITL
    model also solves a Poisson load's requests in flight for the power model."""
    if power.offline_batch != itl.offline_batch:
        raise ValueError(f"the models disagree on offline_batch ({power.offline_batch} vs {itl.offline_batch}): "
                         "retrain together")

    def both(name: str) -> dict:
        return {**{k: v for k, v in getattr(power, name).items() if k != "itl"},
                **{k: v for k, v in getattr(itl, name).items() if k == "itl"}}

    return dataclasses.replace(power, models=both("models"), versions=both("versions"),
                               calibration=both("calibration"), training_ranges=both("training_ranges"), _widths={})
