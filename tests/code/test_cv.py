"""CV regimes keep their promise on a hand-written grid of FIXTURE rows (3 GPUs x 4 LLMs x 2 replicates)."""

import itertools

import numpy as np
import pandas as pd
import pytest

from wattgpu.config import Regime
from wattgpu.evaluation.cv import Fold, beside_training, check_disjoint, folds

ROWS = pd.DataFrame(
    [{"gpu": g, "llm": m, "rep": r, "lab": "lab1" if g == "A" else "lab2" if m in "wx" else "lab3"}
     for g, m, r in itertools.product("ABC", "wxyz", range(2))]
)


@pytest.mark.parametrize("kind", ["group_kfold", "row_kfold", "logo", "lolo", "lopo", "loso"])
def test_every_row_is_tested_exactly_once_and_groups_never_leak(kind):
    regime = Regime(kind=kind, n_splits=3)
    fs = folds(ROWS, regime, seed=1)
    tested = sorted(i for f in fs for i in f.test)
    assert tested == list(range(len(ROWS)))
    for f in fs:
        assert not set(f.train) & set(f.test)
        check_disjoint(ROWS, regime, f)


@pytest.mark.parametrize(("kind", "column"), [("logo", "gpu"), ("lolo", "llm")])
def test_grouped_logo_and_lolo_hold_out_whole_gpus_or_llms_a_group_at_a_time(kind, column):
    """`groups` puts the GPUs (LLMs) into that many seeded groups: each row tested once, a GPU never on both sides."""
    fs = folds(ROWS, Regime(kind=kind, groups=2), seed=1)
    assert len(fs) == 2
    assert sorted(i for f in fs for i in f.test) == list(range(len(ROWS)))
    held = [set(ROWS.iloc[f.test][column]) for f in fs]
    assert sorted(len(h) for h in held) == ([1, 2] if kind == "logo" else [2, 2])
    for f, h in zip(fs, held):
        assert not h & set(ROWS.iloc[f.train][column])
    assert [list(f.test) for f in fs] == [list(f.test) for f in folds(ROWS, Regime(kind=kind, groups=2), seed=1)]


@pytest.mark.parametrize("kind", ["loso", "lopo", "group_kfold"])
def test_groups_on_a_regime_that_does_not_group_gpus_or_llms_is_refused(kind):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="groups"):
        Regime(kind=kind, groups=3)


def test_lopo_removes_the_gpu_and_the_llm_from_training():
    fs = folds(ROWS, Regime(kind="lopo"), seed=1)
    assert len(fs) == 12
    f = next(f for f in fs if f.name == "A|w")
    train = ROWS.iloc[f.train]
    assert "A" not in set(train.gpu) and "w" not in set(train.llm)
    assert len(train) == 2 * 3 * 2  # 2 GPUs x 3 LLMs x 2 replicates


def test_group_kfold_keeps_replicates_together_and_is_seeded():
    a = folds(ROWS, Regime(kind="group_kfold", n_splits=3), seed=7)
    b = folds(ROWS, Regime(kind="group_kfold", n_splits=3), seed=7)
    assert [list(f.test) for f in a] == [list(f.test) for f in b]
    for f in a:
        test = ROWS.iloc[f.test]
        assert (test.groupby(["gpu", "llm"]).size() == 2).all()


def test_lopo_sample_of_pairs():
    assert len(folds(ROWS, Regime(kind="lopo", max_pairs=5), seed=3)) == 5


def test_check_disjoint_catches_a_leak():
    import numpy as np

    from wattgpu.evaluation.cv import Fold

    leak = Fold("bad", np.arange(0, 10), np.arange(5, 12))
    with pytest.raises(AssertionError):
        check_disjoint(ROWS, Regime(kind="logo"), leak)


def test_loso_holds_out_one_lab_and_trains_on_the_others():
    fs = folds(ROWS, Regime(kind="loso"), seed=1)
    assert [f.name for f in fs] == ["lab1", "lab2", "lab3"]
    for f in fs:
        assert set(ROWS["lab"].iloc[f.test]) == {f.name} and f.name not in set(ROWS["lab"].iloc[f.train])
        assert len(f.train) + len(f.test) == len(ROWS)


def test_loeo_holds_out_each_generation_of_a_family_measured_in_several_and_nothing_else():
    """vLLM measured in its V0 and V1 engines: each held out in turn, trained on the other and on every other engine;
    llama.cpp (one generation) is never held out; an unstated release counts as the family's first generation."""
    rows = pd.DataFrame({"gpu": list("ABCDEF"), "llm": list("wxyzwx"),
                         "engine": ["vllm", "vllm", "vllm", "llama.cpp", "tensorrt-llm", "vllm"],
                         "engine_version": ["0.5.4", "0.14.1", "0.11.0", "", "0.12.0", None]})
    fs = folds(rows, Regime(kind="loeo"), seed=1)
    assert [(f.name, sorted(f.test), sorted(f.train)) for f in fs] == [
        ("vllm V0 engine", [0, 5], [1, 2, 3, 4]), ("vllm V1 engine", [1, 2], [0, 3, 4, 5])]
    for f in fs:
        check_disjoint(rows, Regime(kind="loeo"), f)
    with pytest.raises(AssertionError, match="engine generation"):
        check_disjoint(rows, Regime(kind="loeo"), Fold("leak", np.array([0, 1]), np.array([5])))


def test_loeo_inner_folds_hold_out_engine_generations():
    from wattgpu.search.nested import inner_folds

    rows = pd.DataFrame({"gpu": list("ABCDEF"), "llm": list("wxyzwx"),
                         "engine": ["vllm", "vllm", "llama.cpp", "llama.cpp", "tensorrt-llm", "deepspeed"],
                         "engine_version": ["0.5.4", "0.5.2", "", "", "0.12.0", ""]})
    inner = inner_folds(rows, Regime(kind="loeo"), 0, seed=1)  # 0 splits: one fold per generation
    assert sorted(sorted(f.test) for f in inner) == [[0, 1], [2, 3], [4], [5]]


# FIXTURE rows measured without the target (a latency-only run): on the grid's GPUs and labs, and on a GPU ("D") and an
# LLM ("v") the target rows never have
LATENCY_ONLY = pd.DataFrame(
    [{"gpu": g, "llm": m, "lab": lab, "engine": "vllm", "engine_version": "0.5.4", "config_id": f"x-{g}-{m}-{lab}"}
     for g, m, lab in itertools.product("AD", "wv", ("lab1", "lab3"))])


@pytest.mark.parametrize("kind", ["group_kfold", "logo", "lolo", "lopo", "loso", "loeo"])
def test_rows_beside_training_never_bring_back_a_held_out_group(kind):
    """Whatever the regime, the latency-only rows a fold may learn from keep its promise (check_disjoint on the
    training rows with them): a latency-only row of the held-out GPU, LLM, lab, engine generation or (GPU, LLM) pair
    never joins a fold's training."""
    rows = ROWS.assign(engine="vllm", engine_version=np.where(ROWS["gpu"] == "C", "0.14.1", "0.5.4"),
                       config_id=[f"{g}-{m}-{r}" for g, m, r in zip(ROWS.gpu, ROWS.llm, ROWS.rep)])
    regime = Regime(kind=kind, n_splits=3)
    for f in folds(rows, regime, seed=1):
        kept = beside_training(LATENCY_ONLY, rows, f.train)
        both = pd.concat([rows, kept], ignore_index=True)
        check_disjoint(both, regime, Fold(f.name, np.r_[f.train, np.arange(len(rows), len(both))], f.test))

def test_rows_beside_training_by_hand():
    """Held out: GPU A (LOGO) drops the latency-only rows on A, keeps those on D (a GPU with no target rows); lab1
    (LOSO) drops lab1's rows on any GPU; every row in training keeps them all."""
    rows = ROWS.assign(engine="vllm", engine_version="0.5.4", config_id=range(len(ROWS)))
    gpu_a = np.flatnonzero(rows["gpu"] != "A")
    assert set(beside_training(LATENCY_ONLY, rows, gpu_a)["gpu"]) == {"D"}
    lab1 = np.flatnonzero(rows["lab"] != "lab1")
    assert set(beside_training(LATENCY_ONLY, rows, lab1)["lab"]) == {"lab3"}
    assert beside_training(LATENCY_ONLY, rows, np.arange(len(rows))).equals(LATENCY_ONLY)
