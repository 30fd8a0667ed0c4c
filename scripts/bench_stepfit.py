"""Times the step-time fit (modeling/steptime.py), the robust least-squares solve behind the `workload` ITL candidate that
most of a search trial's time goes to: the candidate's first trial (params.yaml) fitted on every ITL row of the
training table (`dvc repro ingest` first), `--repeat` times in this process with the fit memo cleared. Prints the
median seconds of the whole fit and of its solve, with the solve's evaluations and how it ended. It prints figures;
it is not a test.

    python scripts/bench_stepfit.py               # median of 3 fits
    python scripts/bench_stepfit.py --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

from transfer_check import first_trial

from wattgpu import paths
from wattgpu.evaluation.runner import target_rows
from wattgpu.modeling import steptime
from wattgpu.modeling.algorithms import make_estimator
from wattgpu.stages.search import context


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="fits timed (the median is printed)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=UserWarning)
    ctx = context(paths.project_root(), with_idle_power=False)  # the search stages' own rows
    rows = target_rows(ctx.rows, "itl")
    feature_set, hp = first_trial(ctx.params, "workload")
    solve, solves, reports = steptime._solve, [], []

    def timed(*a):
        start = time.perf_counter()
        theta, report = solve(*a)
        solves.append(time.perf_counter() - start)
        reports.append(report)
        return theta, report

    steptime._solve = timed
    fits = []
    for _ in range(args.repeat):
        steptime._SOLVED.clear()  # a fresh solve each time (the memo would answer the repeats)
        start = time.perf_counter()
        make_estimator("workload", "itl", feature_set, hp, seed=ctx.params.base.seed).fit(rows)
        fits.append(time.perf_counter() - start)
    r = reports[-1]
    print(f"step-time fit on {len(rows):,} ITL rows (workload, first trial), median of {args.repeat}: "
          f"{statistics.median(fits):.2f} s, of which the solve {statistics.median(solves):.2f} s "
          f"({r['evaluations']} evaluations, converged: {r['converged']}, {r['message']})")


if __name__ == "__main__":
    main()
