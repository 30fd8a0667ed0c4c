"""Planner predictions cached per model version, so repeated queries answer without loading the models.

One JSON file per model fingerprint (every model file plus the request-to-feature code) under
$WATTGPU_CACHE, else $XDG_CACHE_HOME/wattgpu, else ~/.cache/wattgpu. A read-only home means no cache, same answers.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

TARGET_DIRS = ("power", "itl")
CACHE_MAX_ENTRIES = 50_000


def _cache_dir() -> Path:
    env = os.environ.get("WATTGPU_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "wattgpu"


def _fingerprint(folder: Path) -> str:
    """Hash of every model file and of the code that turns requests into features."""
    h = hashlib.sha256()
    for t in TARGET_DIRS:
        for f in sorted((folder / t).iterdir()):
            if f.is_file():
                h.update(f"{t}/{f.name}".encode())
                h.update(f.read_bytes())
    for module in ("predict.py", "features.py"):
        h.update((Path(__file__).parent / module).read_bytes())
    return h.hexdigest()[:20]


def _request_key(req: dict[str, Any]) -> str:
    return json.dumps(req, sort_keys=True, default=str)


class PredictionCache:
    """Predictions keyed by request, in one JSON file per model fingerprint under the user's cache folder."""

    def __init__(self, folder: Path, enabled: bool = True):
        self.folder, self.enabled = folder, enabled
        self.path = _cache_dir() / f"predictions-{_fingerprint(folder)}.json"
        self.entries: dict[str, dict] = {}
        if enabled and self.path.exists():
            try:
                self.entries = json.loads(self.path.read_text())
            except (OSError, json.JSONDecodeError):
                self.entries = {}

    def missing(self, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The requests not cached yet, each once."""
        return list({_request_key(r): r for r in requests if _request_key(r) not in self.entries}.values())

    def fill(self, requests: list[dict[str, Any]], chunk: int = 1024, progress=None) -> None:
        """Predict the missing requests (loading the models: the slow part) and save them."""
        todo = self.missing(requests)
        if not todo:
            return
        from wattgpu.model_store import load_predictor

        predictor = load_predictor(self.folder / "power", self.folder / "itl")
        for start in range(0, len(todo), chunk):
            part = todo[start:start + chunk]
            for req, row in zip(part, predictor.predict(part).to_dict("records")):
                self.entries[_request_key(req)] = row
            if progress:
                progress(len(part))
        if self.enabled:
            self._save()

    def get(self, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [self.entries[_request_key(r)] for r in requests]

    def _save(self) -> None:
        entries = self.entries
        if len(entries) > CACHE_MAX_ENTRIES:
            entries = dict(list(entries.items())[-CACHE_MAX_ENTRIES:])
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(entries))
            tmp.replace(self.path)  # atomic: a concurrent reader sees the old or the new file
        except OSError:
            pass  # a read-only home: no cache, same answers


def predict_cached(folder: Path, requests: list[dict[str, Any]], use_cache: bool = True,
                   extra: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Predictions for `requests` (one dict each), from the cache where possible. `extra` requests are predicted
    alongside on a miss (e.g. the other scenarios of the same query) so that the next query hits."""
    cache = PredictionCache(folder, use_cache)
    if cache.missing(requests):
        cache.fill([*requests, *(extra or [])])
    return cache.get(requests)
