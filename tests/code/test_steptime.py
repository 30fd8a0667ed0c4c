"""The decode-step ITL model's fit converges and does not depend on the machine's threads. Rows come from the test
pipeline's real measurements; fits are FIXTURES, never reported."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from wattgpu import paths
from wattgpu.catalogs.gpus import load_gpu_catalog
from wattgpu.catalogs.llms import load_llm_catalog
from wattgpu.evaluation.runner import prepare_rows, target_rows
from wattgpu.io import read_table
from wattgpu.modeling import steptime
from wattgpu.modeling.algorithms import make_estimator

HP = {"alpha": 30, "n_estimators": 30, "learning_rate": 0.1, "num_leaves": 7, "min_child_samples": 20,
      "reg_lambda": 1.0, "colsample_bytree": 1.0}


@pytest.fixture(scope="module")
def rows(ingested):
    gpus, llms = load_gpu_catalog(ingested / paths.GPU_CATALOG), load_llm_catalog(ingested / paths.LLM_CATALOG_TABLE)
    table = prepare_rows(read_table(ingested / paths.MEASUREMENTS), gpus, llms, source=None, dense_only=False,
                         offline_batch=256)
    return target_rows(table, "itl")


def fitted(rows, **kw):
    """A fresh fit (not the process's cached weights): the TargetRegressor and its StepTimeRegressor."""
    steptime._SOLVED.clear()
    model = make_estimator("workload", "itl", "workload", {**HP, **kw}, seed=42).fit(rows)
    return model, model.pipeline_.named_steps["model"]


@pytest.fixture(scope="module")
def one_thread(rows):
    """A fresh fit on every ITL row, one thread, a ConvergenceWarning raised as an error: (estimator, step model).
    Shared by the tests below (each fit of the 10,000 rows takes seconds)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", steptime.ConvergenceWarning)
        with threadpool_limits(1):
            return fitted(rows)


def test_the_step_fit_converges_and_says_so(one_thread):
    _, step = one_thread
    assert step.convergence_["converged"] and step.convergence_["evaluations"] < steptime.MAX_EVALUATIONS


def test_the_step_fit_is_the_same_under_any_thread_count(rows, one_thread):
    one, step_one = one_thread
    with threadpool_limits(2):
        two, step_two = fitted(rows)
    np.testing.assert_array_equal(step_one.theta_, step_two.theta_)
    sample = rows.iloc[::97]
    np.testing.assert_array_equal(one.predict(sample), two.predict(sample))


def test_a_fit_stopped_early_warns(rows, monkeypatch):
    monkeypatch.setattr(steptime, "MAX_EVALUATIONS", 3)
    with pytest.warns(steptime.ConvergenceWarning, match="did not converge"):
        _, step = fitted(rows.iloc[:2000])
    assert not step.convergence_["converged"]


def test_reused_fits_are_the_fits(rows, one_thread):
    """A trial that differs only in the boosted factor reuses the converged weights: the same numbers as a refit."""
    steptime._SOLVED.clear()
    first = make_estimator("workload", "itl", "workload", HP, seed=42).fit(rows).pipeline_.named_steps["model"]
    assert len(steptime._SOLVED) == 1
    again = make_estimator("workload", "itl", "workload", {**HP, "num_leaves": 15}, seed=42).fit(rows)
    assert len(steptime._SOLVED) == 1  # no second solve
    np.testing.assert_array_equal(again.pipeline_.named_steps["model"].theta_, first.theta_)
    np.testing.assert_array_equal(one_thread[1].theta_, first.theta_)  # another cold fit gives the same weights


def test_the_booster_answers_as_the_regressor_does():
    """modeling.boosting.predict reads the trees the way LGBMRegressor.predict does, bit for bit, on a real fit (a
    FIXTURE of random inputs); a matrix of the wrong width is refused."""
    from lightgbm import LGBMRegressor

    from wattgpu.modeling import boosting

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 6))
    y = X[:, 0] * 2 + np.sin(X[:, 1]) + rng.normal(scale=0.1, size=400)
    model = LGBMRegressor(n_estimators=60, num_leaves=7, verbose=-1, n_jobs=1, deterministic=True,
                          force_row_wise=True).fit(X, y)
    ask = np.vstack([rng.normal(size=(50, 6)), np.full((1, 6), np.nan)])  # NaN goes down the trees' default side
    np.testing.assert_array_equal(boosting.predict(model, ask), model.predict(ask))
    assert np.ptp(boosting.predict(model, ask)) > 1.0  # the trees answer, not a constant
    with pytest.raises(ValueError, match="6 columns"):
        boosting.predict(model, ask[:, :5])


def test_the_transfer_checks_step_decomposition_adds_up_to_the_prediction(rows, one_thread):
    """scripts/transfer_check.py --terms splits an ITL into each decode-step term's physical time x its learned
    weight, times the boosted factor: on a real fit those parts multiply back to the model's own prediction (where the
    memory-bound floor does not clip it), and the physical times are features' own (not the weighted ones)."""
    from transfer_check import step_terms

    from wattgpu.features import with_concurrency

    model, _ = one_thread
    some = rows.iloc[::50]
    asked = with_concurrency(some, some["concurrency"].to_numpy(dtype=float) * 3)  # off the loads it was fitted on
    parts = step_terms(model, asked)
    names = [t.removeprefix("log_").removesuffix("_s") for t in steptime.TERMS]
    rebuilt = parts["boosted factor"] * sum(parts[f"{n} weighted ms"] for n in names) / 1e3
    predicted = model.predict(asked)
    floor = model.target.limits(asked)[0]
    free = predicted > floor * (1 + 1e-9)
    assert free.mean() > 0.9
    np.testing.assert_allclose(rebuilt[free], predicted[free], rtol=1e-9)
    np.testing.assert_allclose(parts["weights_step ms"], asked["weights_step_s"].to_numpy() * 1e3, rtol=1e-12)
    for n in names:
        np.testing.assert_allclose(parts[f"{n} weighted ms"], parts[f"{n} ms"] * parts[f"{n} weight"], rtol=1e-12)
        assert np.ptp(np.log(parts[f"{n} weight"])) > 0  # each weight depends on the row (its z), not only a constant


def test_a_stored_step_model_keeps_the_weight_inputs_it_was_fitted_on(rows, one_thread, monkeypatch):
    """A fitted model records the columns its weights depend on, so a stored champion answers the same after the
    code's WEIGHT_INPUTS change; one stored before it recorded them says it must be refitted (not a stack trace)."""
    import copy

    from wattgpu.errors import WattgpuError

    model, step = one_thread
    sample = rows.iloc[::97]
    before = model.predict(sample)
    older = copy.deepcopy(model)
    del older.pipeline_.named_steps["model"].weight_inputs_
    monkeypatch.setattr(steptime, "WEIGHT_INPUTS", step.weight_inputs_[:-1])
    np.testing.assert_array_equal(model.predict(sample), before)
    with pytest.raises(WattgpuError, match="fitted by an older wattgpu; refit it"):
        older.predict(sample)


def test_a_stored_solve_is_the_solve_and_other_processes_reuse_it(rows, one_thread, tmp_path, monkeypatch):
    """With the stage's store open, a solve is written once; a process without it in memory (the memo cleared, as
    in a spawned worker or a later stage) reads the same weights instead of solving; a file that does not read is
    solved again and rewritten."""
    monkeypatch.setattr(steptime, "SOLVED_STORE", steptime.SolvedStore())
    steptime.SOLVED_STORE.open(tmp_path)
    _, step = fitted(rows)
    stored = list(tmp_path.glob("*/*.npz"))
    assert len(stored) == 1 and stored[0].parent.parent == tmp_path
    np.testing.assert_array_equal(step.theta_, one_thread[1].theta_)

    def no_solve(*_args):
        raise AssertionError("solved again although the store holds this fit")

    with monkeypatch.context() as m:
        m.setattr(steptime, "_solve", no_solve)
        _, again = fitted(rows)  # fitted() clears the memo first
    np.testing.assert_array_equal(again.theta_, one_thread[1].theta_)
    assert again.convergence_ == one_thread[1].convergence_

    stored[0].write_bytes(b"not an npz")
    _, healed = fitted(rows)
    np.testing.assert_array_equal(healed.theta_, one_thread[1].theta_)
    with np.load(stored[0], allow_pickle=False) as reread:
        np.testing.assert_array_equal(reread["theta"], one_thread[1].theta_)


def test_the_store_keeps_solves_apart_per_code_and_libraries(tmp_path, monkeypatch):
    """Another steptime.py (or NumPy, SciPy) is another folder: a stored solve is never the answer of other code."""
    store = steptime.SolvedStore()
    store.open(tmp_path)
    here = store.folder
    source = tmp_path / "steptime.py"
    source.write_text(steptime.Path(steptime.__file__).read_text() + "\n# an edit\n")
    monkeypatch.setattr(steptime, "__file__", str(source))
    store.open(tmp_path)
    assert store.folder != here and store.folder.parent == here.parent == tmp_path
    store.open(None)
    assert store.folder is None and store.get("k", lambda: (np.zeros(1), {}))[0].tolist() == [0.0]
