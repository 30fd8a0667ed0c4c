"""Cross-validation regimes, all in one place. Each yields folds of row positions.

- group_kfold: k folds; all rows of a (GPU, LLM) pair (every replicate and scenario) stay on one side.
- row_kfold:   the paper notebook's plain shuffled KFold over rows (replicates leak across folds).
- logo:        leave one GPU out.
- lolo:        leave one LLM out (with `groups`: one of that many seeded groups of LLMs at a time).
- lopo:        leave one (GPU, LLM) pair out, after removing every row of that GPU *and* of that LLM
               from training: a new GPU and a new model at once.
- loso:        leave one source (lab) out: train on the other labs' measurements, test on one lab's (its engine,
               workloads and measurement method unseen).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold, KFold

from wattgpu.config import Regime, Search
from wattgpu.errors import WattgpuError


@dataclass(frozen=True)
class Fold:
    name: str
    train: np.ndarray  # row positions
    test: np.ndarray


def _leave_one_out(keys: pd.Series) -> Iterator[Fold]:
    values = keys.to_numpy()
    for key in sorted(pd.unique(values)):
        test = np.flatnonzero(values == key)
        yield Fold(str(key), np.flatnonzero(values != key), test)


def _leave_group_out(keys: pd.Series, n_groups: int, seed: int) -> Iterator[Fold]:
    """The distinct keys shuffled (seeded) into `n_groups` groups; each group held out once (named by its first key
    and how many it holds)."""
    values = keys.to_numpy()
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
    if regime.kind == "logo":
        return list(_leave_one_out(rows["gpu"]))
    if regime.kind == "lolo":
        if regime.groups is not None:
            return list(_leave_group_out(rows["llm"], regime.groups, seed))
        return list(_leave_one_out(rows["llm"]))
    if regime.kind == "loso":
        return list(_leave_one_out(rows["lab"]))
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
    if regime.kind == "loso":
        assert not set(train["lab"]) & set(test["lab"]), f"{fold.name}: lab seen in training"
    if regime.kind == "group_kfold":
        pairs = lambda f: set(zip(f["gpu"], f["llm"]))  # noqa: E731
        assert not pairs(train) & pairs(test), f"{fold.name}: (GPU, LLM) pair on both sides"
