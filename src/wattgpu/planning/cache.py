"""Planner predictions cached per model version, so repeated queries answer without loading the models.

One SQLite file per fingerprint (every model file, plus the code of every module that shapes a prediction, prose
ignored: wattgpu.codehash) under $WATTGPU_CACHE, else $XDG_CACHE_HOME/wattgpu, else ~/.cache/wattgpu, keyed by the
request, so that a query reads its own rows and not the whole cache (a JSON file of the precomputed grid took 0.16 s
to parse per `wattgpu predict`). A read-only home means no cache, same answers.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sqlite3
import stat
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wattgpu import codehash

if TYPE_CHECKING:  # pandas and the model store are imported where a miss is predicted: wattgpu.planning.answers
    import pandas as pd  # reads the cache folder and its SQLite helpers without them

CACHE_MAX_ENTRIES = 50_000  # the newest written are kept
# Files kept per kind, the newest written: each retrained model set (or code change) starts a new predictions file and
# a new code-digest memo, and the old ones would otherwise pile up in the user's cache folder for good.
CACHE_MAX_FILES = 4  # predictions-<fingerprint>.sqlite: a few model sets side by side (projects sharing the folder)
CODE_MEMOS_KEPT = 4  # code-<stamp>.txt
SQL_VARIABLES = 500  # keys per SELECT (SQLite's bound-parameter limit is 999 on old builds)
# The model folder loader and the estimators it unpickles: their code (and what it imports) shapes a prediction.
PREDICTION_CODE = ("wattgpu.modeling.store", "wattgpu.modeling.algorithms", "wattgpu.modeling.replica")


def cache_dir() -> Path:
    env = os.environ.get("WATTGPU_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "wattgpu"


def prune(folder: Path, pattern: str, keep: int) -> None:
    """Remove all but the `keep` newest files (by modification time) matching `pattern` in `folder`; a file another
    process removed meanwhile is skipped."""
    def mtime(f: Path) -> int:
        try:
            return f.stat().st_mtime_ns
        except OSError:
            return -1

    for f in sorted(folder.glob(pattern), key=mtime, reverse=True)[keep:]:
        f.unlink(missing_ok=True)


def stamps(files) -> list[tuple[str, int, int]]:
    """(path, size, modification time in ns) of each of `files` that is a file (what an edit or a rewrite changes)."""
    out = []
    for f in files:
        try:
            st = os.stat(f)
        except OSError:  # gone meanwhile, or unreadable: left out (the stamp differs from when it was there)
            continue
        if stat.S_ISREG(st.st_mode):
            out.append((str(f), st.st_size, st.st_mtime_ns))
    return out


def package_stamp() -> list[tuple[str, int, int]]:
    """The stamps of every module file of the package."""
    return stamps(sorted(Path(codehash.__file__).parent.rglob("*.py")))


@functools.lru_cache(maxsize=1)
def _code_digest() -> str:
    """The prediction code's digest (codehash.digest: parsing ~30 modules, ~0.7 s), once per process and kept on disk
    beside the predictions under a stamp of every module file's path, size and modification time, so that a new
    process (one `wattgpu predict`) reads it instead while no file of the package has changed."""
    stamp = hashlib.sha256(repr(package_stamp()).encode())
    memo = cache_dir() / f"code-{stamp.hexdigest()[:20]}.txt"
    try:
        known = memo.read_text().strip()
        if known and all(c in "0123456789abcdef" for c in known):
            return known
    except OSError:
        pass
    digest = codehash.digest(PREDICTION_CODE)
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        memo.write_text(digest)
        prune(memo.parent, "code-*.txt", CODE_MEMOS_KEPT)
    except OSError:  # a read-only home: no memo, same digest
        pass
    return digest


def fingerprint(folder: Path) -> str:
    """Hash of every model file and of the code that turns requests into predictions."""
    from wattgpu.modeling.store import TARGET_DIRS

    h = hashlib.sha256()
    for t in TARGET_DIRS:
        for f in sorted((folder / t).iterdir()):
            if f.is_file():
                h.update(f"{t}/{f.name}".encode())
                h.update(f.read_bytes())
    h.update(_code_digest().encode())
    return h.hexdigest()[:20]


@contextmanager
def connect(path: Path, read_only: bool) -> Iterator[sqlite3.Connection]:
    """A connection to the cache file, in one transaction (committed on success), closed after."""
    target = f"{path.resolve().as_uri()}?mode=ro" if read_only else str(path)
    with closing(sqlite3.connect(target, uri=read_only, timeout=10)) as db, db:
        yield db


def _key(request: dict[str, Any]) -> str:
    return json.dumps(request, sort_keys=True, default=str)


class PredictionCache:
    """Predictions keyed by request, in one SQLite file per model fingerprint under the user's cache folder; `entries`
    holds the ones this object has read or predicted."""

    def __init__(self, folder: Path, enabled: bool = True):
        self.folder, self.enabled = folder, enabled
        self.path = cache_dir() / f"predictions-{fingerprint(folder)}.sqlite"
        self.entries: dict[str, dict] = {}

    def _read(self, keys: list[str]) -> None:
        """Load the cached predictions among `keys` (those not read yet) into `entries`."""
        wanted = [k for k in dict.fromkeys(keys) if k not in self.entries]
        if not (self.enabled and wanted and self.path.exists()):
            return
        try:
            with connect(self.path, read_only=True) as db:
                for start in range(0, len(wanted), SQL_VARIABLES):
                    part = wanted[start:start + SQL_VARIABLES]
                    found = db.execute(f"SELECT key, value FROM predictions WHERE key IN ({','.join('?' * len(part))})",
                                       part)
                    self.entries.update((k, json.loads(v)) for k, v in found)
        except (sqlite3.Error, json.JSONDecodeError):  # unreadable or from an older layout: predict again
            pass

    def missing(self, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The requests not cached yet, each once."""
        keyed = {_key(r): r for r in requests}
        self._read(list(keyed))
        return [r for k, r in keyed.items() if k not in self.entries]

    def predict(self, requests: list[dict[str, Any]], rows: pd.DataFrame, extra: list[dict[str, Any]] = (),
                progress: Callable[[int], None] | None = None, chunk: int = 1024) -> list[dict[str, Any]]:
        """Predictions for `requests`, whose validated rows (wattgpu.request.validate, in the same order) are `rows`:
        from the cache where possible, else from the models (loaded only then). `extra` requests are predicted
        alongside on a miss (e.g. the same query in the other presets) so that the next query hits."""
        keys = [_key(r) for r in requests]
        self._read(keys)
        todo = list({k: i for i, k in enumerate(keys) if k not in self.entries}.values())
        if todo:
            import pandas as pd

            from wattgpu.modeling.store import load_predictor

            predictor = load_predictor(self.folder / "power", self.folder / "itl")
            asked = set(keys)
            others = [r for r in self.missing(list(extra)) if _key(r) not in asked]
            todo_rows = rows.iloc[todo].reset_index(drop=True)
            if others:
                todo_rows = pd.concat([todo_rows, predictor.validate(others)], ignore_index=True)
            todo_keys = [keys[i] for i in todo] + [_key(r) for r in others]
            for start in range(0, len(todo_rows), chunk):
                part = predictor.predict_rows(todo_rows.iloc[start:start + chunk])
                for k, row in zip(todo_keys[start:start + chunk], part.to_dict("records")):
                    self.entries[k] = row
                if progress:
                    progress(len(part))
            if self.enabled:
                self._save(todo_keys)
        return [self.entries[k] for k in keys]

    def _save(self, keys: list[str]) -> None:
        """Write the predictions of `keys` (one transaction: a concurrent reader sees all of them or none) and keep
        the newest CACHE_MAX_ENTRIES, and the CACHE_MAX_FILES newest prediction files."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with connect(self.path, read_only=False) as db:
                db.execute("CREATE TABLE IF NOT EXISTS predictions (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                db.executemany("INSERT OR REPLACE INTO predictions (key, value) VALUES (?, ?)",
                               [(k, json.dumps(self.entries[k])) for k in keys])
                db.execute("DELETE FROM predictions WHERE rowid <= (SELECT MAX(rowid) FROM predictions) - ?",
                           (CACHE_MAX_ENTRIES,))
            for legacy in self.path.parent.glob("predictions-*.json"):  # the JSON layout before: never read again
                legacy.unlink(missing_ok=True)
            prune(self.path.parent, "predictions-*.sqlite", CACHE_MAX_FILES)
        except (OSError, sqlite3.Error):
            pass  # a read-only home: no cache, same answers
