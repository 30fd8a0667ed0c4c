"""Where the search's Optuna studies live, and how any number of processes share one study's trial budget.

Embedded (the default): one sqlite file per (target, algorithm) under optuna/, one process per study, as `make run`
has always done. Shared: one PostgreSQL database named by `WATTGPU_OPTUNA_STORAGE` (which wins) or params.yaml
`search.storage`, a `postgresql://` URL; stage processes and `wattgpu search worker`s on any machine then take
trials from the same studies (the study names carry the data and code fingerprint, so only workers of the same
version meet). Neither the URL nor the heartbeat enters a study's fingerprint or DVC's parameters: where the
trials run does not change what a study is.

The budget holds exactly, whatever the number of workers: a trial is counted and created under the study's
PostgreSQL advisory lock (Optuna's MaxTrialsCallback counts only finished trials, so concurrent workers overshoot
it), and a worker that dies mid-trial stops sending heartbeats, so its trial turns FAIL and is enqueued again with
the same parameters (Optuna's RetryHeartbeatStaleTrialCallback): the study ends with the trials it would have had.
"""

from __future__ import annotations

import functools
import os
import socket
import time
import warnings
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

from wattgpu.errors import WattgpuError

ENV = "WATTGPU_OPTUNA_STORAGE"
HEARTBEAT_ENV = "WATTGPU_OPTUNA_HEARTBEAT_S"  # seconds between a running trial's heartbeats; stale after twice that
DEFAULT_HEARTBEAT_S = 10
SERVER_SCHEMES = ("postgresql://", "postgresql+psycopg://")
SQLITE = "sqlite:///"
LOCK_NAMESPACE = 0x77617474  # first key of the two-key advisory lock ("watt"), the second is the study's name
ERROR_ATTR = "error"  # user attribute of a trial whose objective raised a caught error: it used its budget slot
WORKER_ATTR = "worker"  # user attribute: host:pid of the process that ran the trial
WORKER_ID = f"{socket.gethostname()}:{os.getpid()}"
RETRIES = 2  # a trial whose worker died is run again (same parameters) at most this often: a study must not hang on
# a trial that kills every worker that takes it


def server_url(configured: str | None) -> str | None:
    """The shared storage's URL: $WATTGPU_OPTUNA_STORAGE, else params.yaml `search.storage`; None: embedded."""
    url, field = (os.environ[ENV], ENV) if os.environ.get(ENV) else (configured, "params.yaml search.storage")
    if url is not None and not url.startswith(SERVER_SCHEMES):
        raise WattgpuError(f"{field}: {url.split('://')[0]!r} storage is not supported; give a postgresql:// URL "
                           "(e.g. postgresql://wattgpu@127.0.0.1:5432/optuna) or leave it unset for sqlite files")
    return url


def study_storage(configured: str | None, sqlite_file: Path) -> str:
    """The storage URL of one study: the shared server, else its sqlite file."""
    return server_url(configured) or as_url(sqlite_file)


def as_url(where: str | Path) -> str:
    """A storage URL; a bare path is a sqlite file (StudyTask.storage may be either)."""
    return where if isinstance(where, str) else f"{SQLITE}{where}"


def shared(url: str) -> bool:
    return not url.startswith(SQLITE)


def heartbeat_s() -> int:
    raw = os.environ.get(HEARTBEAT_ENV, str(DEFAULT_HEARTBEAT_S))
    if not raw.isdigit() or int(raw) < 1:
        raise WattgpuError(f"{HEARTBEAT_ENV}={raw!r}: give a whole number of seconds >= 1")
    return int(raw)


@functools.cache
def _server(url: str, heartbeat: int):
    """One RDBStorage per process and URL (an engine and a schema check each). Workers starting together on a new
    database may race to create Optuna's tables: the loser retries once they exist."""
    from optuna.exceptions import ExperimentalWarning
    from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
    from sqlalchemy.exc import IntegrityError, ProgrammingError

    driver_url = url.replace("postgresql://", "postgresql+psycopg://", 1)  # psycopg 3, not SQLAlchemy's psycopg2
    warnings.filterwarnings("ignore", category=ExperimentalWarning)  # heartbeats: experimental since Optuna 2.9
    for attempt in range(3):
        try:
            return RDBStorage(driver_url, engine_kwargs={"pool_pre_ping": True}, heartbeat_interval=heartbeat,
                              heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=RETRIES))
        except (IntegrityError, ProgrammingError):
            if attempt == 2:
                raise
            time.sleep(1.0)


def open_storage(where: str | Path):
    """What optuna.create_study takes: the sqlite URL as it always was (its folder made), or the shared RDBStorage
    with heartbeats."""
    url = as_url(where)
    if not shared(url):
        Path(url.removeprefix(SQLITE)).parent.mkdir(parents=True, exist_ok=True)
        return url
    return _server(url, heartbeat_s())


class StudyLock:
    """A PostgreSQL advisory lock on one study name, held by one connection until `release` (idempotent); nothing
    for sqlite, where one process owns each study."""

    def __init__(self, url: str, study_name: str):
        self.conn = None
        if shared(url):
            from sqlalchemy import text

            self.conn = _server(url, heartbeat_s()).engine.connect()
            key = zlib.crc32(study_name.encode()) - 2**31  # int4, as pg_advisory_lock(int, int) wants
            self.unlock = lambda: self.conn.execute(text("SELECT pg_advisory_unlock(:a, :b)"), {"a": LOCK_NAMESPACE,
                                                                                                "b": key})
            self.conn.execute(text("SELECT pg_advisory_lock(:a, :b)"), {"a": LOCK_NAMESPACE, "b": key})

    def release(self) -> None:
        if self.conn is not None:
            try:
                self.unlock()
            finally:
                self.conn.close()
                self.conn = None


def _states():
    from optuna.trial import TrialState

    return TrialState


def spent(study, with_heartbeat: bool = True) -> tuple[int, int]:
    """(trials that used their budget slot: complete, pruned, or failed by a caught error; trials that still hold
    one: running or waiting). A trial failed for a lost heartbeat holds none. Without heartbeats (sqlite: one
    process per study) a RUNNING trial is one an interrupted run left behind, and holds none either."""
    S = _states()
    done = holding = 0
    for t in study.get_trials(deepcopy=False):
        if t.state in (S.COMPLETE, S.PRUNED) or (t.state == S.FAIL and ERROR_ATTR in t.user_attrs):
            done += 1
        elif t.state == S.WAITING or (t.state == S.RUNNING and with_heartbeat):
            holding += 1
    return done, holding


class _Trial:
    """The objective as run for one claimed trial: releases the study lock once Optuna has created the trial (the
    lock covers counting and creating, never the fit), records the worker, marks caught errors as spent."""

    def __init__(self, objective: Callable, lock: StudyLock, catch: tuple[type[Exception], ...]):
        self.objective, self.lock, self.catch = objective, lock, catch

    def __call__(self, trial) -> float:
        self.lock.release()
        trial.set_user_attr(WORKER_ATTR, WORKER_ID)
        try:
            return self.objective(trial)
        except self.catch as exc:
            trial.set_user_attr(ERROR_ATTR, repr(exc)[:300])
            raise


def take_trials(url: str, study, objective: Callable, budget: int, first_trials: Sequence[dict] = (),
                callbacks: Sequence[Callable] = (), catch: tuple[type[Exception], ...] = ()) -> int:
    """Run `study`'s trials in this process while its budget has room; returns the trials this process ran.

    Under the study's lock: fail trials whose worker stopped beating, enqueue `first_trials` into a study that has
    none, count, and let Optuna create (or pop a waiting) trial; the lock is released as the objective starts.
    """
    import optuna

    S, beating = _states(), shared(url)
    ran = 0
    while True:
        lock = StudyLock(url, study.study_name)
        try:
            if beating:
                optuna.storages.fail_stale_trials(study)
            if not study.get_trials(deepcopy=False):
                for params in first_trials[:budget]:
                    study.enqueue_trial(params)
            done, holding = spent(study, beating)
            waiting = study.get_trials(deepcopy=False, states=(S.WAITING,))
            if not waiting and done + holding >= budget:
                return ran
            study.optimize(_Trial(objective, lock, catch), n_trials=1, callbacks=list(callbacks), catch=catch)
            ran += 1
        finally:
            lock.release()


def run_to_budget(where: str | Path, study, objective: Callable, budget: int, first_trials: Sequence[dict] = (),
                  callbacks: Sequence[Callable] = (), catch: tuple[type[Exception], ...] = (),
                  wait: bool = True) -> bool:
    """Take trials; with `wait`, then wait for other workers' running trials (or their heartbeats to go stale, and
    take their places) until the whole budget is spent. True when it is."""
    url = as_url(where)
    while True:
        take_trials(url, study, objective, budget, first_trials, callbacks, catch)
        if spent(study, shared(url))[0] >= budget or not shared(url):
            return True
        if not wait:
            return False
        time.sleep(min(heartbeat_s(), 2))
