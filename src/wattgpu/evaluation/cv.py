"""Cross-validation regimes, all in one place. Each yields folds of row positions.

- group_kfold: k folds; all rows of a (GPU, LLM) pair (every replicate and scenario) stay on one side.
- row_kfold:   the paper notebook's plain shuffled KFold over rows (replicates leak across folds).
- logo:        leave one GPU out (with `groups`: one of that many seeded groups of GPUs at a time).
- lolo:        leave one LLM out (with `groups`: one of that many seeded groups of LLMs at a time).
- lopo:        leave one (GPU, LLM) pair out, after removing every row of that GPU *and* of that LLM
               from training: a new GPU and a new model at once.
- loso:        leave one source (lab) out: train on the other labs' measurements, test on one lab's (its engine,
               workloads and measurement method unseen).
- loeo:        leave one engine generation out: each generation of an engine family measured in more than one
               (workload.engine_generation_groups: vLLM's V0 and V1 engines) held out in turn, trained on every other
               row (the family's other generations included): the engine a planner asks about is newer, or older,
               than the measured ones. Rows of a family measured in one generation are never tested.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold, KFold

from wattgpu.config import Regime, Search
from wattgpu.errors import WattgpuError
from wattgpu.modeling.targets import itl_learning_rows
from wattgpu.workload import engine_generation_groups


@dataclass(frozen=True)
class Fold:
    name: str
    train: np.ndarray  # row positions
    test: np.ndarray


def _leave_one_out(values: np.ndarray) -> Iterator[Fold]:
    for key in sorted(pd.unique(values)):
        test = np.flatnonzero(values == key)
        yield Fold(str(key), np.flatnonzero(values != key), test)


def _leave_group_out(values: np.ndarray, n_groups: int, seed: int) -> Iterator[Fold]:
    """The distinct keys shuffled (seeded) into `n_groups` groups; each group held out once (named by its first key
    and how many it holds)."""
    unique = np.array(sorted(pd.unique(values)), dtype=object)
    order = np.random.default_rng(seed).permutation(len(unique))
    for part in np.array_split(order, min(n_groups, len(unique))):
        group = unique[np.sort(part)]
        test = np.isin(values, group)
        yield Fold(f"{group[0]} (+{len(group) - 1})" if len(group) > 1 else str(group[0]),
                   np.flatnonzero(~test), np.flatnonzero(test))


def folds(rows: pd.DataFrame, regime: Regime, seed: int = 42) -> list[Fold]:
    """Folds of `rows` (which need `gpu` and `llm` columns) under `regime`."""
    n = len(rows)
    if regime.kind == "row_kfold":
        kf = KFold(n_splits=regime.n_splits, shuffle=True, random_state=seed)
        return [Fold(f"fold{i}", tr, te) for i, (tr, te) in enumerate(kf.split(np.arange(n)))]
    if regime.kind == "group_kfold":
        pair = rows["gpu"].astype(str) + "|" + rows["llm"].astype(str)
        gkf = GroupKFold(n_splits=regime.n_splits, shuffle=True, random_state=seed)
        return [Fold(f"fold{i}", tr, te) for i, (tr, te) in enumerate(gkf.split(np.arange(n), groups=pair))]
    if regime.kind in ("logo", "lolo") and regime.groups is not None:
        return list(_leave_group_out(group_keys(rows, regime.kind), regime.groups, seed))
    if regime.kind in ("logo", "lolo", "loso"):
        return list(_leave_one_out(group_keys(rows, regime.kind)))
    if regime.kind == "loeo":
        return _leave_generation_out(rows)
    if regime.kind == "lopo":
        gpu, llm = rows["gpu"].to_numpy(), rows["llm"].to_numpy()
        pairs = sorted(set(zip(gpu, llm)))
        if regime.max_pairs is not None and regime.max_pairs < len(pairs):
            pick = np.random.default_rng(seed).choice(len(pairs), size=regime.max_pairs, replace=False)
            pairs = [pairs[i] for i in sorted(pick)]
        out = []
        for g, m in pairs:
            test = np.flatnonzero((gpu == g) & (llm == m))
            train = np.flatnonzero((gpu != g) & (llm != m))
            out.append(Fold(f"{g}|{m}", train, test))
        return out
    raise ValueError(f"unknown regime kind {regime.kind!r}")


def _leave_generation_out(rows: pd.DataFrame) -> list[Fold]:
    """One fold per engine generation of a family measured in more than one (vLLM's V0 and V1 engines): that
    generation's rows held out, every other row trained on. A family measured in one generation only is never held out:
    without it nothing tells the fold what a generation changes, only what an unmeasured family would be."""
    keys, family = group_keys(rows, "loeo"), rows["engine"].astype(str).to_numpy()
    generations = pd.Series(keys).groupby(family).nunique()
    held = np.isin(family, generations.index[generations > 1])
    return [Fold(str(k), np.flatnonzero(keys != k), np.flatnonzero(keys == k)) for k in sorted(set(keys[held]))]


def group_keys(rows: pd.DataFrame, kind: str) -> np.ndarray:
    """The group each row belongs to under a leave-one-group-out regime (logo, lolo, loso, loeo): its GPU, LLM, lab,
    or engine generation (workload.engine_generation_groups; rows without `engine_version`: each family's first)."""
    if kind == "loeo":
        versions = rows["engine_version"].to_numpy() if "engine_version" in rows else np.full(len(rows), "", object)
        return engine_generation_groups(rows["engine"].to_numpy(), versions)
    return rows[{"logo": "gpu", "lolo": "llm", "loso": "lab"}[kind]].to_numpy(dtype=object)


def outer_regime(search: Search, name: str) -> Regime:
    """The search regime `name` as declared, with the profile's LOPO pair sample: what the search's outer folds (and
    the registry's gate, on the same rows) are built from."""
    if name not in search.regimes:
        raise WattgpuError(f"unknown search regime {name!r}; params.yaml search.regimes has {sorted(search.regimes)}")
    regime = search.regimes[name]
    if regime.kind == "lopo":
        regime = regime.model_copy(update={"max_pairs": search.active.max_pairs})
    return regime


def check_disjoint(rows: pd.DataFrame, regime: Regime, fold: Fold) -> None:
    """Assert the regime's promise: nothing of the held-out group is in training."""
    train, test = rows.iloc[fold.train], rows.iloc[fold.test]
    if regime.kind in ("logo", "lopo"):
        assert not set(train["gpu"]) & set(test["gpu"]), f"{fold.name}: GPU seen in training"
    if regime.kind in ("lolo", "lopo"):
        assert not set(train["llm"]) & set(test["llm"]), f"{fold.name}: LLM seen in training"
    if regime.kind in ("loso", "loeo"):
        assert not set(group_keys(train, regime.kind)) & set(group_keys(test, regime.kind)), \
            f"{fold.name}: its {'lab' if regime.kind == 'loso' else 'engine generation'} seen in training"
    if regime.kind == "group_kfold":
        pairs = lambda f: set(zip(f["gpu"], f["llm"]))
        assert not pairs(train) & pairs(test), f"{fold.name}: (GPU, LLM) pair on both sides"


def _held_out_keys(rows: pd.DataFrame) -> dict[str, np.ndarray]:
    """What a fold can hold out, per row: its GPU, LLM, lab, engine generation, (GPU, LLM) pair and configuration."""
    gpu, llm = rows["gpu"].astype(str).to_numpy(), rows["llm"].astype(str).to_numpy()
    return {"gpu": gpu, "llm": llm, "lab": rows["lab"].astype(str).to_numpy(),
            "generation": group_keys(rows, "loeo").astype(str), "pair": gpu + "|" + llm,
            "configuration": rows["config_id"].astype(str).to_numpy()}


def beside_training(extra: pd.DataFrame, rows: pd.DataFrame, train: np.ndarray) -> pd.DataFrame:
    """The rows of `extra` (measured without the target `rows` have: LLM-Inference-Bench's latency-only runs beside
    the power rows) that a model fitted on `rows.iloc[train]` may also learn from: those that share no GPU, LLM, lab,
    engine generation, (GPU, LLM) pair or configuration with a row of `rows` left out of training (a held-out group,
    and under LOPO the rows dropped beside it), whatever the regime that left it out. With every row in training,
    all of `extra`."""
    held = np.ones(len(rows), dtype=bool)
    held[np.asarray(train, dtype=int)] = False
    if not held.any() or extra.empty:
        return extra
    ours, theirs = _held_out_keys(rows), _held_out_keys(extra)
    keep = np.ones(len(extra), dtype=bool)
    for kind, values in ours.items():  # membership by hash table (pandas' isin): np.isin sorts text, 5 x slower
        left_out = values[held]
        out = pd.unique(left_out[~pd.Series(left_out).isin(values[~held]).to_numpy()])  # only outside training
        keep &= ~pd.Series(theirs[kind]).isin(out).to_numpy()
    return extra[keep]


def fit_fold(estimator, rows: pd.DataFrame, train: np.ndarray, extra: pd.DataFrame | None = None):
    """`estimator` fitted on `rows.iloc[train]`; one that learns its step time from latency-only rows as well (the
    `steppower` candidate: `learns_step_time`) also gets the rows of `extra` this fold may learn from
    (beside_training)."""
    training = rows.iloc[train]
    if extra is None or not getattr(estimator, "learns_step_time", False):
        return estimator.fit(training)
    return estimator.fit(training, step_rows=beside_training(extra, rows, train))


def itl_training_rows(rows: pd.DataFrame, train: np.ndarray, extra: pd.DataFrame | None = None) -> pd.DataFrame:
    """What an ITL model of this fold learns from: the training rows that have an ITL, and the rows of `extra` the
    fold may learn from (beside_training)."""
    beside = None if extra is None or extra.empty else beside_training(extra, rows, train)
    return itl_learning_rows(rows.iloc[train], beside)
