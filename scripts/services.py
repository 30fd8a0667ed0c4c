"""`make services` / `make services-stop`: PostgreSQL, an MLflow tracking server on it and optuna-dashboard, all on
127.0.0.1, their data under .services/ (git-ignored), their process ids in .services/pids.json.

  python scripts/services.py start   start what is not running; print the URLs and what a worker exports
  python scripts/services.py stop    stop them (PostgreSQL last); the data stays for the next start

PostgreSQL is the operating system's (`initdb` / `pg_ctl` on PATH; as root they run as the `postgres` user) or,
where there is none, the `pgserver` package's, which listens on a unix socket in its data folder only (this
machine only). Ports: $WATTGPU_PG_PORT (5432), $WATTGPU_MLFLOW_PORT (5001: `make serve` has 5000),
$WATTGPU_DASHBOARD_PORT (8080).
$WATTGPU_PG_LISTEN (default 127.0.0.1) is the addresses PostgreSQL listens on: see the README's multi-machine recipe.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests

from wattgpu import paths, tracking
from wattgpu.search import storage

HOST = "127.0.0.1"
DIR = paths.project_root() / ".services"
PIDS = DIR / "pids.json"
USER = "wattgpu"  # the database superuser initdb creates (trust on local connections; see the README for others)
DATABASES = ("optuna", "mlflow")  # apart: both keep an alembic_version table
BIN = Path(sys.executable).parent


def ports() -> dict[str, int]:
    return {name: int(os.environ.get(f"WATTGPU_{name.upper()}_PORT", default))
            for name, default in (("pg", 5432), ("mlflow", 5001), ("dashboard", 8080))}


def as_postgres(cmd: list[str]) -> list[str]:
    """initdb and the server refuse to run as root: there they run as the OS's `postgres` user."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def start_postgres(port: int) -> dict:
    """The OS's PostgreSQL when it is installed, else pgserver's; returns how to reach and stop it."""
    data = DIR / "postgres"
    if shutil.which("initdb") and shutil.which("pg_ctl"):
        if not (data / "PG_VERSION").exists():
            data.mkdir(parents=True, exist_ok=True)
            if os.geteuid() == 0:
                shutil.chown(data, "postgres")
            subprocess.run(as_postgres(["initdb", "-D", str(data), "-U", USER, "--auth=trust", "-E", "UTF8"]),
                           check=True, stdout=subprocess.DEVNULL)
        listen = os.environ.get("WATTGPU_PG_LISTEN", HOST)
        subprocess.run(as_postgres(["pg_ctl", "-D", str(data), "-l", str(data / "server.log"), "-w", "-o",
                                    f"-h {listen} -p {port} -k {data}", "start"]), check=True)
        return {"kind": "os", "data": str(data), "url": f"postgresql://{USER}@{HOST}:{port}"}
    import pgserver

    server = pgserver.get_server(data, cleanup_mode=None)  # keeps running after this process
    return {"kind": "pgserver", "data": str(data), "url": server.get_uri().rsplit("/", 1)[0].split("?")[0],
            "socket": server.get_uri().split("?host=")[1]}


def database_url(pg: dict, db: str, driver: str = "postgresql") -> str:
    url = f"{pg['url']}/{db}".replace("postgresql://", f"{driver}://", 1)
    return url + (f"?host={pg['socket']}" if "socket" in pg else "")


def create_databases(pg: dict) -> None:
    import psycopg

    with psycopg.connect(database_url(pg, "postgres"), autocommit=True) as conn:
        have = {row[0] for row in conn.execute("SELECT datname FROM pg_database")}
        for db in DATABASES:
            if db not in have:
                conn.execute(f'CREATE DATABASE "{db}"')  # a name from DATABASES above, never from input


def launch(name: str, cmd: list[str]) -> int:
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    log = (DIR / f"{name}.log").open("a")
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True).pid


def wait_for(url: str, what: str, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if requests.get(url, timeout=2).status_code < 500:
                return
        except requests.RequestException:
            pass
        time.sleep(1)
    raise SystemExit(f"{what} did not answer on {url} within {timeout_s:.0f} s: see {DIR / (what + '.log')}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def start() -> None:
    if PIDS.exists():
        state = json.loads(PIDS.read_text())
        if all(alive(state[k]) for k in ("mlflow", "dashboard")):
            return report(state)
        stop()
    DIR.mkdir(exist_ok=True)
    port = ports()
    pg = start_postgres(port["pg"])
    create_databases(pg)
    optuna_url = database_url(pg, "optuna")
    storage.open_storage(optuna_url)  # Optuna's tables, before any worker or the dashboard races to make them
    state = {"postgres": pg, "ports": port, "optuna": optuna_url}
    state["mlflow"] = launch("mlflow", [str(BIN / "mlflow"), "server", "--backend-store-uri",
                                        database_url(pg, "mlflow", "postgresql+psycopg"), "--artifacts-destination",
                                        str(DIR / "mlflow-artifacts"), "--host", HOST, "--port", str(port["mlflow"]),
                                        "--workers", "2"])
    state["dashboard"] = launch("dashboard", [str(BIN / "optuna-dashboard"),
                                              database_url(pg, "optuna", "postgresql+psycopg"), "--host", HOST,
                                              "--port", str(port["dashboard"])])
    PIDS.write_text(json.dumps(state, indent=2) + "\n")
    wait_for(f"http://{HOST}:{port['mlflow']}/health", "mlflow")
    wait_for(f"http://{HOST}:{port['dashboard']}/", "dashboard")
    report(state)


def report(state: dict) -> None:
    port = state["ports"]
    print(f"PostgreSQL ({state['postgres']['kind']}): {state['optuna']} (data: {state['postgres']['data']})\n"
          f"MLflow UI and tracking server: http://{HOST}:{port['mlflow']}\n"
          f"Optuna dashboard:              http://{HOST}:{port['dashboard']}\n\n"
          f"Every worker and `dvc repro` that should use them exports:\n"
          f"  export {storage.ENV}={state['optuna']}\n"
          f"  export {tracking.SERVER_ENV[0]}=http://{HOST}:{port['mlflow']}\n"
          f"then: wattgpu search worker --regime logo   (or dvc repro)")


def stop() -> None:
    if not PIDS.exists():
        return print("no services recorded in .services/pids.json")
    state = json.loads(PIDS.read_text())
    for name in ("dashboard", "mlflow"):
        pid = state.get(name)
        if pid and alive(pid):
            os.killpg(pid, signal.SIGTERM)  # each was started in its own process group
            deadline = time.monotonic() + 15
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if alive(pid):
                os.killpg(pid, signal.SIGKILL)
        print(f"stopped {name}")
    pg = state["postgres"]
    if pg["kind"] == "os":
        subprocess.run(as_postgres(["pg_ctl", "-D", pg["data"], "-m", "fast", "-w", "stop"]), check=False)
    else:
        import pgserver

        pgserver.get_server(pg["data"], cleanup_mode="stop").cleanup()
    print("stopped PostgreSQL")
    PIDS.unlink()


if __name__ == "__main__":
    {"start": start, "stop": stop}[sys.argv[1] if len(sys.argv) > 1 else "start"]()
