"""Answers given before: the text of a `predict` or `recommend` answer, remembered under everything that shaped it,
so that the same question asked again is answered without importing pandas, the catalogs or the models (a cached
`wattgpu predict` in ~0.2 s instead of ~0.5 s; `make bench` times both).

Everything that shapes an answer is in its key, so that a change is a miss and never a stale answer:
- the command and every option as parsed (a file option also by its content's hash);
- the files it reads, by path, size and modification time: the model folder, the project's catalogs
  (data/catalogs/) and LLM table, the package's modules; the folders Python imports libraries from (installing or
  upgrading a library changes their modification time); the Python and the project root;
- what rich reads to draw a table: whether each standard stream is a terminal and its size, and the environment
  variables that set colours and width (RENDER_ENV).

One SQLite file (ANSWERS_FILE) in the prediction cache's folder, the newest ANSWERS_KEPT kept. `--no-cache` neither
reads nor writes it; an error is never remembered; a read-only home means no memo, the same answers.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wattgpu import paths
from wattgpu.planning.cache import cache_dir, connect, package_stamp, stamps

ANSWERS_FILE = "answers.sqlite"
ANSWERS_KEPT = 2_000  # the newest written are kept
RENDER_ENV = ("TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES", "TTY_COMPATIBLE",
              "TTY_INTERACTIVE", "CLICOLOR", "CLICOLOR_FORCE", "JUPYTER_COLUMNS", "JUPYTER_LINES")
# the options naming files the answer reads; `models` is a folder, stamped with its files
FILE_OPTIONS = ("gpu_spec", "llm_config")


def _terminal(fd: int) -> tuple[bool, tuple[int, int] | None]:
    try:
        size = tuple(os.get_terminal_size(fd))
    except (OSError, ValueError):
        size = None
    try:
        return os.isatty(fd), size
    except OSError:
        return False, size


def _content(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _folder_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*")) if folder.is_dir() else [folder]


def question_key(command: str, options: dict[str, Any]) -> str:
    """The key of a question: its command, options and everything else that shapes its answer (the module's
    docstring)."""
    root = paths.project_root()
    models = paths.models_folder(options.get("models"), root)
    read = [*_folder_files(models), *_folder_files(root / paths.CATALOG_DIR), root / paths.LLM_CATALOG_TABLE]
    shaped = {
        "command": command,
        "options": {k: str(v) if isinstance(v, Path) else v for k, v in sorted(options.items())},
        "contents": {k: _content(options.get(k)) for k in FILE_OPTIONS},
        "root": str(root), "files": stamps(read), "code": package_stamp(),
        "python": [sys.version, sys.executable],
        "imports": stamps_of_folders(library_folders()),
        "render": [[_terminal(fd) for fd in (0, 1, 2)], {k: os.environ.get(k) for k in RENDER_ENV}],
    }
    return hashlib.sha256(json.dumps(shaped, sort_keys=True, default=str).encode()).hexdigest()


def library_folders() -> list[str]:
    """The folders Python imports libraries from: sys.path but its first entry where that is the script's folder or
    the current one (`python -m`, `python -c`: its modification time moves with every file written beside it, and it
    holds no library a command imports; the package's own modules are stamped file by file)."""
    return sys.path if sys.flags.safe_path else sys.path[1:]


def stamps_of_folders(folders: list[str]) -> list[tuple[str, int]]:
    """(folder, modification time) of each folder Python imports from (an install adds or removes entries)."""
    out = []
    for folder in folders:
        try:
            out.append((folder, os.stat(folder or ".").st_mtime_ns))
        except OSError:
            continue
    return out


def recall(key: str) -> str | None:
    """The answer remembered under `key`, or None."""
    path = cache_dir() / ANSWERS_FILE
    if not path.exists():
        return None
    try:
        with connect(path, read_only=True) as db:
            found = db.execute("SELECT value FROM answers WHERE key = ?", (key,)).fetchone()
    except sqlite3.Error:  # unreadable or from another layout: answered anew
        return None
    return None if found is None else str(found[0])


def remember(key: str, text: str) -> None:
    """Keep `text` under `key` (and the newest ANSWERS_KEPT answers)."""
    path = cache_dir() / ANSWERS_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with connect(path, read_only=False) as db:
            db.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            db.execute("INSERT OR REPLACE INTO answers (key, value) VALUES (?, ?)", (key, text))
            db.execute("DELETE FROM answers WHERE rowid <= (SELECT MAX(rowid) FROM answers) - ?", (ANSWERS_KEPT,))
    except (OSError, sqlite3.Error):
        pass  # a read-only home: no memo, same answers


def remembered(command: str, skip: Callable[[dict[str, Any]], bool]) -> Callable:
    """A command that returns its answer's text (printed here) answers a question asked before from the memo.
    `skip(options)`: questions that neither read nor write it (`--no-cache`, a batch); their command prints itself
    and returns None."""

    def wrap(func: Callable[..., str | None]) -> Callable[..., None]:
        @functools.wraps(func)
        def wrapper(**options: Any) -> None:
            key = None if skip(options) else question_key(command, options)
            text = recall(key) if key else None
            if text is None:
                text = func(**options)
                if text is None:
                    return
                if key:
                    remember(key, text)
            sys.stdout.write(text)
            sys.stdout.flush()

        return wrapper

    return wrap
