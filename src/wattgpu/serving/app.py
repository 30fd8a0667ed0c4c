"""One HTTP endpoint for both champions: `make serve`, or `python -m wattgpu.serving.app [--port 5000]`.

MLflow's own scoring app (`mlflow.pyfunc.scoring_server.init`, what `mlflow models serve` runs) answers
`POST /invocations` in every format MLflow accepts (JSON `dataframe_records`, `dataframe_split`, `inputs`,
`instances`; `text/csv`; Parquet), with the power champion's pyfunc model joined to the ITL champion's: each row
gets power and ITL with their intervals (serving.pyfunc.output_columns("both")). `Guard`, an ASGI layer around it,
keeps bad bodies cheap and clean: a body over `max_body_bytes` gets 413 before it is read, a JSON body that does
not parse or repeats a key gets a one-line 400 naming what is wrong, and no error body carries MLflow's
`stack_trace` (the cause's last line is kept in `message`). uvicorn binds 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import os

from wattgpu import tracking
from wattgpu.config import Registry

MAX_BODY_BYTES = 8 * 2**20  # about 40,000 request rows of JSON; a larger batch is split by the client
MAX_MESSAGE_CHARS = 500  # an error message longer than this is cut (it may echo a large bad value)
HOST = "127.0.0.1"
ENV_MAX_BODY = "WATTGPU_MAX_BODY_BYTES"


def champion_uris(registry: Registry | None = None, alias: str = "champion") -> dict[str, str]:
    """target -> `models:/<registered name>@<alias>`."""
    names = (registry or Registry()).names
    return {target: f"models:/{name}@{alias}" for target, name in names.items()}


def load_champions(uris: dict[str, str]):
    """The power model's MLflow pyfunc with the ITL champion joined to it (one Predictor for both targets)."""
    import mlflow

    uri = tracking.tracking_uri()
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    served = mlflow.pyfunc.load_model(uris["power"])
    itl = mlflow.pyfunc.load_model(uris["itl"])
    served.unwrap_python_model().serve_with(itl.unwrap_python_model())
    return served


def create_app():
    """The ASGI app uvicorn runs (a factory: each worker loads the models once)."""
    from mlflow.pyfunc import scoring_server

    uris = json.loads(os.environ["WATTGPU_SERVE_URIS"]) if os.environ.get("WATTGPU_SERVE_URIS") else champion_uris()
    return Guard(scoring_server.init(load_champions(uris)),
                 int(os.environ.get(ENV_MAX_BODY, MAX_BODY_BYTES)))


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict:
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate JSON key {_short(key, 80)!r} in one object (give each field once)")
        out[key] = value
    return out


def _short(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def json_problem(body: bytes) -> str | None:
    """Why a JSON body cannot be read (one line), or None when it parses with every key once."""
    try:
        json.loads(body, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        return f"body is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
    except UnicodeDecodeError:
        return "body is not valid UTF-8 JSON"
    except (ValueError, RecursionError) as exc:
        return _short(exc) if "duplicate JSON key" in str(exc) else "body is not valid JSON: nested too deeply"
    return None


def clean_error(body: bytes) -> bytes:
    """An error body without `stack_trace`: MLflow's message cut to one line, with the cause's last line where
    MLflow kept it only in the trace (e.g. why a CSV did not parse). Our own errors (`detail`) stay as they are."""
    try:
        error = json.loads(body)
    except ValueError:
        error = None
    if not isinstance(error, dict):
        return json.dumps({"error_code": "BAD_REQUEST", "message": _short(body.decode("utf-8", "replace"))}).encode()
    trace = error.pop("stack_trace", None)
    if "detail" not in error:
        message = str(error.get("message", "")).strip().splitlines()
        first = message[0] if message else ""
        cause = [line.strip() for line in str(trace or "").splitlines() if line.strip()][-1:]
        told = [c for c in cause if c.split(": ", 1)[-1] not in first]  # MLflow's message may quote it already
        error["message"] = _short(" ".join([first, *(f"({c})" for c in told)]))
    return json.dumps(error).encode()


class Guard:
    """ASGI layer around the scoring app for `POST /invocations`: body size cap, JSON checks, clean errors."""

    def __init__(self, app, max_body_bytes: int = MAX_BODY_BYTES):
        self.app, self.max_body_bytes = app, max_body_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] != "/invocations" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        too_big = f"request body over {self.max_body_bytes} bytes: split the batch"
        length = headers.get(b"content-length", b"0")
        if not length.isdigit():
            return await reply(send, 400, "Content-Length is not a number")
        if int(length) > self.max_body_bytes:
            return await reply(send, 413, too_big)
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > self.max_body_bytes:
                return await reply(send, 413, too_big)
        body = b"".join(chunks)
        content_type = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        if content_type == b"application/json" and (problem := json_problem(body)):
            return await reply(send, 400, problem)
        return await self.app(scope, _replay(body, receive), _cleaning(send))


def _replay(body: bytes, receive):
    """The receive channel with the body already read handed out first."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed():
        return pending.pop() if pending else await receive()

    return replayed


def _cleaning(send):
    """A send channel that passes answers below 400 through and rewrites error bodies (clean_error)."""
    held: dict = {}

    async def sending(message):
        if message["type"] == "http.response.start" and message["status"] >= 400:
            held["start"], held["body"] = message, []
            return None
        if message["type"] != "http.response.body" or "start" not in held:
            return await send(message)
        held["body"].append(message.get("body", b""))
        if message.get("more_body", False):
            return None
        body = clean_error(b"".join(held["body"]))
        start = held.pop("start")
        await send({**start, "headers": _json_headers(start.get("headers", []), len(body))})
        return await send({"type": "http.response.body", "body": body, "more_body": False})

    return sending


def _json_headers(headers, length: int) -> list:
    keep = [(k, v) for k, v in headers if k.lower() not in (b"content-length", b"content-type")]
    return [*keep, (b"content-type", b"application/json"), (b"content-length", str(length).encode())]


async def reply(send, status: int, message: str) -> None:
    """A one-line JSON error, MLflow's shape (`error_code`, `message`)."""
    code = "RESOURCE_LIMIT_EXCEEDED" if status == 413 else "BAD_REQUEST"
    body = json.dumps({"error_code": code, "message": message}).encode()
    await send({"type": "http.response.start", "status": status, "headers": _json_headers([], len(body))})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes (each loads the models)")
    parser.add_argument("--alias", default="champion", help="registry alias to serve for both targets")
    parser.add_argument("--max-body-bytes", type=int, default=MAX_BODY_BYTES)
    args = parser.parse_args(argv)
    os.environ["WATTGPU_SERVE_URIS"] = json.dumps(champion_uris(alias=args.alias))
    os.environ[ENV_MAX_BODY] = str(args.max_body_bytes)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    uvicorn.run("wattgpu.serving.app:create_app", factory=True, host=HOST, port=args.port, workers=args.workers,
                log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
