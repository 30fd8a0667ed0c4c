"""The planner page's server as a real process on 127.0.0.1, for its browser tests and the benchmark: `wattgpu ui`
on a free port, started and stopped as serving.server.Server starts and stops the model endpoints."""

from __future__ import annotations

import sys
from pathlib import Path

from wattgpu.serving.server import Server


class PageServer(Server):
    """`with PageServer(models_dir) as srv: srv.url` (the environment's WATTGPU_ROOT and WATTGPU_CACHE apply)."""

    def __init__(self, models_dir: Path | None = None, **kwargs):
        super().__init__(None, "", **kwargs)
        self.models_dir = models_dir

    def command(self) -> list[str]:
        models = ["--models", str(self.models_dir)] if self.models_dir is not None else []
        return [str(Path(sys.executable).with_name("wattgpu")), "ui", "--port", str(self.port), *models]
