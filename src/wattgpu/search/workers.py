"""A search worker: joins the studies a search stage runs (same names: same data, code and configuration) in the
shared storage and takes their trials until every study has its budget; start as many as there are cores or
machines, at any time. The stage itself only needs its own processes: it waits for studies others still run.
"""

from __future__ import annotations

import time
import warnings
import zlib

from wattgpu.search import storage
from wattgpu.search.nested import StudyTask, run_study


def worker_offset() -> int:
    """This process's sampler-seed offset (> 0, the stage's own processes use 0): distinct per host and pid, so
    that workers of one study draw different configurations."""
    return zlib.crc32(storage.WORKER_ID.encode()) % (2**31 - 2) + 1


def work(tasks: list[StudyTask], poll_s: float | None = None) -> int:
    """Take trials of every study of `tasks` in turn (a full study is skipped), then revisit the studies whose last
    trials other workers still run, until every study has its budget. Returns the studies visited."""
    import optuna
    from threadpoolctl import threadpool_limits

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    offset, poll_s = worker_offset(), poll_s or min(storage.heartbeat_s(), 2)
    pending = [(task, plan) for task in tasks for plan in task.plans]
    total, started = len(pending), time.perf_counter()
    while pending:
        left = []
        for task, plan in pending:
            objective = task.objective(plan)
            with threadpool_limits(task.settings.n_jobs):
                study = run_study(task, plan, objective, worker=offset, wait=False)
            if storage.spent(study)[0] < task.settings.n_trials:
                left.append((task, plan))
        if left and len(left) == len(pending):
            time.sleep(poll_s)  # nothing to take: other workers' last trials are running
        if len(left) < len(pending):
            print(f"search worker {storage.WORKER_ID}: {total - len(left)}/{total} studies have their budget "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
        pending = left
    return total
