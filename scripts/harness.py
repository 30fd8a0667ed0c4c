"""Real serving processes on 127.0.0.1, for the tests and the benchmarks (a harness, not part of the package):
`mlflow models serve` for one model URI, (`Server.champions`) the endpoint `make serve` starts, both champions
behind one URL (wattgpu.serving.app), or (`PageServer`) the planner page `wattgpu ui` serves.

Started in its own process group (the scoring server runs uvicorn workers as children), it is stopped by
that group's id: SIGTERM, then SIGKILL if it has not exited within `stop_timeout_s`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

BIN = Path(sys.executable).parent  # this environment's executables (wattgpu, mlflow, dvc)
PORT_TRIES = 3  # starts on a new free port when another process took the last one first


def env() -> dict[str, str]:
    """The environment a command of this project runs in, for the tests and the benchmarks: this environment's
    executables first on PATH, telemetry off, and no WATTGPU_ROOT or WATTGPU_MLRUNS inherited (the command works on
    the project folder it runs in)."""
    e = dict(os.environ)
    e["PATH"] = f"{BIN}{os.pathsep}{e.get('PATH', '')}"
    e.update(MLFLOW_DISABLE_TELEMETRY="true", DO_NOT_TRACK="1", DVC_NO_ANALYTICS="1")
    e.pop("WATTGPU_ROOT", None)
    e.pop("WATTGPU_MLRUNS", None)
    return e


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`with Server("models:/wattgpu-power@champion", tracking_uri) as srv: srv.post({...})`."""

    def __init__(self, model_uri: str | None, tracking_uri: str, workers: int = 1, start_timeout_s: float = 90,
                 stop_timeout_s: float = 10):
        self.model_uri, self.tracking_uri, self.workers = model_uri, tracking_uri, workers
        self.start_timeout_s, self.stop_timeout_s = start_timeout_s, stop_timeout_s
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.session = requests.Session()

    @classmethod
    def champions(cls, tracking_uri: str, workers: int = 1, **kwargs) -> Server:
        """The champions of both targets behind one endpoint, started as `make serve` starts it."""
        return cls(None, tracking_uri, workers, **kwargs)

    def command(self) -> list[str]:
        if self.model_uri is None:
            return [sys.executable, "-m", "wattgpu.serving.app", "--port", str(self.port), "--workers",
                    str(self.workers)]
        return [str(BIN / "mlflow"), "models", "serve", "-m", self.model_uri,
                "--env-manager", "local", "--host", "127.0.0.1", "-p", str(self.port), "-w", str(self.workers)]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Server:
        """Start on a free port and wait for /ping. A port another process took between free_port and the server's
        bind (tests run in parallel processes) is retried on a new one, PORT_TRIES times at most."""
        for attempt in range(1, PORT_TRIES + 1):
            try:
                return self._start_once()
            except RuntimeError as exc:
                if attempt == PORT_TRIES or "address already in use" not in str(exc).lower():
                    raise

    def _start_once(self) -> Server:
        self.port = free_port()
        self.log = tempfile.NamedTemporaryFile("w+", prefix="wattgpu-serve-", suffix=".log", delete=False)
        # `mlflow models serve` starts uvicorn from PATH: the environment's own bin folder goes first.
        env = {**os.environ, "MLFLOW_TRACKING_URI": self.tracking_uri, "MLFLOW_REGISTRY_URI": self.tracking_uri,
               "MLFLOW_DISABLE_TELEMETRY": "true", "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
               "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")])}
        self.proc = subprocess.Popen(self.command(), env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = self.log_tail()
                self._drop_log()
                raise RuntimeError(f"`{' '.join(self.command()[:4])}` exited with {self.proc.returncode}:\n{tail}")
            try:
                if self.session.get(f"{self.url}/ping", timeout=1).status_code == 200:
                    return self
            except requests.ConnectionError:
                pass
            time.sleep(0.25)
        self.stop()
        raise TimeoutError(f"no answer on {self.url}/ping within {self.start_timeout_s} s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the group is the server's own: start_new_session=True
            self.proc.wait(self.stop_timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        except ProcessLookupError:
            pass

    def log_tail(self, n: int = 30) -> str:
        self.log.flush()
        return "\n".join(Path(self.log.name).read_text().splitlines()[-n:])

    def post(self, body: dict) -> requests.Response:
        return self.post_raw(json.dumps(body))

    def post_raw(self, data: str | bytes, content_type: str = "application/json") -> requests.Response:
        return self.session.post(f"{self.url}/invocations", data=data, timeout=60,
                                 headers={"Content-Type": content_type})

    def rss_bytes(self) -> int:
        """Resident memory of the server's process group (the server and its workers), from /proc."""
        total = 0
        for status in Path("/proc").glob("[0-9]*/status"):
            try:
                if os.getpgid(int(status.parent.name)) != self.proc.pid:
                    continue
                fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
                total += int(fields.get("VmRSS", "0 kB").split()[0]) * 1024
            except (OSError, ValueError):  # a process that ended meanwhile
                continue
        return total

    def __enter__(self) -> Server:
        return self.start()

    def _drop_log(self) -> None:
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)

    def __exit__(self, *exc) -> None:
        self.stop()
        self.session.close()
        self._drop_log()


class PageServer(Server):
    """The planner page's server: `wattgpu ui` on a free port, started and stopped as the model endpoints are.
    `with PageServer(models_dir) as srv: srv.url` (the environment's WATTGPU_ROOT and WATTGPU_CACHE apply)."""

    def __init__(self, models_dir: Path | None = None, **kwargs):
        super().__init__(None, "", **kwargs)
        self.models_dir = models_dir

    def command(self) -> list[str]:
        models = ["--models", str(self.models_dir)] if self.models_dir is not None else []
        return [str(BIN / "wattgpu"), "ui", "--port", str(self.port), *models]
