"""One HTTP endpoint for both champions: `make serve`, or `python -m wattgpu.serving.app [--port 5000]`.

MLflow's own scoring app (`mlflow.pyfunc.scoring_server.init`, what `mlflow models serve` runs) answers
`POST /invocations` in every format MLflow accepts (JSON `dataframe_records`, `dataframe_split`, `inputs`,
`instances`; `text/csv`; Parquet), with the power champion's pyfunc model joined to the ITL champion's: each row
gets power and ITL with their intervals (serving.pyfunc.output_columns("both")). `Guard`, an ASGI layer around it,
keeps bad bodies cheap and clean: a body over `max_body_bytes` gets 413 before it is read, a JSON body that does
not parse, repeats a key, carries a key MLflow would drop (anything but one format and `params`; any `params`: the
model takes none) or a whole number too large for any field gets a one-line 400 naming what is wrong (the field,
and the row where there is one), and no error body carries MLflow's `stack_trace` (the cause's last line is kept in
`message`). Two bodies are handed on in the form that reaches the model as sent: `instances` rows as `inputs`
(MLflow turns `instances` rows into columns and refuses rows whose fields differ) and a CSV read by
`wattgpu.request.read_csv` (text fields stay text, a text cell in a number column is that row's error only) as
`dataframe_split`. Rows of objects (`dataframe_records`, `inputs` or `instances` as a list of objects, the common
case) go from `Guard` to the model itself, already parsed: MLflow would parse the body a second time and build a frame
the model does not need; the answer is MLflow's JSON, byte for byte, and a rejected request's error body names the
field and row in `message` too, without MLflow's echo of the input frame. uvicorn binds 127.0.0.1 only, with one worker
process per CPU this process may use unless `--workers` says otherwise (`default_workers`).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import logging
import math
import os
import string

from wattgpu import paths, tracking
from wattgpu.config import Registry, load_params

_logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 8 * 2**20  # about 40,000 request rows of JSON; a larger batch is split by the client
MAX_MESSAGE_CHARS = 500  # an error message longer than this is cut (it may echo a large bad value)
HOST = "127.0.0.1"
# Worker processes when none is asked: one per CPU this process may run on, at most this many (each holds its own
# copy of the models: `make bench` prints the server's memory). A worker answers one request at a time (Python's
# GIL), so on a machine of n cores one worker leaves n - 1 of them idle under load (`python scripts/benchmark.py
# --sections serving --workers 1` against the default shows what that costs).
MAX_DEFAULT_WORKERS = 8
# How `main` hands its settings to the uvicorn workers it starts (each imports `create_app` afresh): JSON,
# {"uris": {target: model URI}, "max_body_bytes": N}. Set by `main`, not a user setting.
SERVE_ENV = "WATTGPU_SERVE"


def champion_uris(registry: Registry | None = None, alias: str = "champion") -> dict[str, str]:
    """target -> `models:/<registered name>@<alias>`, the names from `registry`, else from the project's params.yaml
    (`registry.names`: the names `dvc repro` registered under), else the defaults."""
    if registry is None:
        params = paths.resolve(paths.PARAMS)
        registry = load_params(params).registry if params.exists() else Registry()
    names = registry.names
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

    settings = json.loads(os.environ.get(SERVE_ENV) or "{}")
    scoring_server.predictions_to_json = predictions_to_json  # the same bytes, in half the time (below)
    model = load_champions(settings.get("uris") or champion_uris())
    return Guard(scoring_server.init(model), int(settings.get("max_body_bytes", MAX_BODY_BYTES)),
                 model.unwrap_python_model())


def predictions_to_json(raw_predictions, output, metadata=None):
    """MLflow's `scoring_server.predictions_to_json`, byte for byte, written with `json.dumps`: MLflow's `json.dump`
    streams through the standard library's pure-Python encoder, `json.dumps` uses its C encoder (a 1,000-row answer
    serialised in about half the time). The app this module serves writes its answers with it; MLflow's own
    (`mlflow models serve`) is left as it is."""
    from mlflow.exceptions import MlflowException
    from mlflow.pyfunc import scoring_server
    from mlflow.utils.proto_json_utils import NumpyEncoder

    if metadata and "predictions" in metadata:
        raise MlflowException.invalid_parameter_value("metadata cannot contain 'predictions' key")
    import pandas as pd

    frame = isinstance(raw_predictions, pd.DataFrame) and raw_predictions.columns.is_unique
    predictions = records(raw_predictions) if frame else \
        scoring_server._get_jsonable_obj(raw_predictions, pandas_orient="records")
    output.write(json.dumps({"predictions": predictions, **(metadata or {})}, cls=NumpyEncoder))


def records(answer) -> list[dict]:
    """`answer.to_dict(orient="records")`, what MLflow serialises, for a frame of distinct column labels, built from
    whole columns: `tolist` turns each column's values into Python's own (float, int, bool, str, None) at once, where
    pandas boxes them one cell at a time; the same keys (`columns.tolist()`, as pandas takes them) and values, so the
    same JSON."""
    columns = answer.columns.tolist()
    return [dict(zip(columns, row)) for row in zip(*(answer[c].to_numpy().tolist() for c in columns))]


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


FORMATS = ("dataframe_records", "dataframe_split", "inputs", "instances")  # MLflow's JSON request formats
# A whole number of LONG_DIGITS digits or more may be too large for a float: such a body is read with its numbers as
# text. Found as a run of that many '0's after every digit becomes '0' and every other byte ' ' (bytes.translate and a
# substring search, both in C, where the regular expression \d{300} tried a match at every digit).
LONG_DIGITS = 300
_DIGITS_AS_ZERO = bytes(ord("0") if chr(i) in string.digits else ord(" ") for i in range(1 << 8))  # byte -> byte


def has_long_number(body: bytes) -> bool:
    """Whether `body` holds a run of LONG_DIGITS or more ASCII digits."""
    return b"0" * LONG_DIGITS in body.translate(_DIGITS_AS_ZERO)


class BodyProblem(Exception):
    """Why a body is refused (400): the message, and the field and row it names where it names one."""

    def __init__(self, message: str, field: str | None = None, row: int | None = None):
        super().__init__(message)
        self.message, self.field, self.row = message, field, row


class _Digits(str):
    """A whole number of more digits than Python converts (sys.get_int_max_str_digits), kept as its text."""


def _whole(text: str) -> int | _Digits:
    return int(text) if len(text) < 4000 else _Digits(text)


def _read_json(body: bytes, long_numbers: bool = False):
    try:
        return json.loads(body, object_pairs_hook=_no_duplicates, **({"parse_int": _whole} if long_numbers else {}))
    except json.JSONDecodeError as exc:
        raise BodyProblem(f"body is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except UnicodeDecodeError:
        raise BodyProblem("body is not valid UTF-8 JSON") from None
    except RecursionError:
        raise BodyProblem("body is not valid JSON: nested too deeply") from None
    except ValueError as exc:
        duplicate = "duplicate JSON key" in str(exc)
        raise BodyProblem(_short(exc if duplicate else f"body is not valid JSON: {exc}")) from None


def _field_problem(row: int | None, field: str, problem: str) -> BodyProblem:
    from wattgpu.request import RowError

    return BodyProblem(_short(RowError(row, field, problem)), field, row)


def checked_json(body: bytes) -> tuple[bytes, list[dict] | None]:
    """A JSON request body as MLflow's scoring app should get it, or BodyProblem naming what is wrong: it parses
    with every key once; it holds one request format and, at most, an empty `params` (MLflow would drop any other
    key, and the model takes no parameter: each row's fields go in the rows); no whole number is too large for a
    float (MLflow would fail on the frame without naming it). `instances` rows (a list of objects) come back as
    `inputs`. Second: the request rows where the body holds a non-empty list of objects (`dataframe_records`,
    `inputs`, `instances`), which `Guard` hands to the model as they are; else None."""
    long_numbers = has_long_number(body)
    doc = _read_json(body, long_numbers)
    if not isinstance(doc, dict):
        raise BodyProblem(f"body must be a JSON object with one of {', '.join(FORMATS)}, got a {type(doc).__name__}")
    unknown = [k for k in doc if k not in (*FORMATS, "params")]
    if unknown:
        raise _field_problem(None, unknown[0], f"unknown key of the body (MLflow would ignore it); the body holds one "
                             f"of {', '.join(FORMATS)} (each row's fields, e.g. level, go in the rows)")
    formats = [k for k in doc if k in FORMATS]
    if len(formats) != 1:
        raise BodyProblem(f"body must hold exactly one of {', '.join(FORMATS)}, got {len(formats)}")
    params = doc.get("params")
    if params is not None and params != {}:
        first = next(iter(params), "") if isinstance(params, dict) else ""
        raise _field_problem(None, f"params.{first}" if first else "params",
                             "unknown parameter: this model takes none (each row's fields, e.g. level, go in the rows)")
    fmt = formats[0]
    if long_numbers:
        for row, field, value in _cells(fmt, doc[fmt]):
            if isinstance(value, _Digits) or isinstance(value, int) and not isinstance(value, bool) \
                    and not _fits_float(value):
                from wattgpu.request import BOUNDS

                b = BOUNDS.get(field)
                allowed = f"outside the allowed range [{b.lo:g}, {b.hi:g}]" if b else "too large for any number"
                digits = len(str(value).lstrip("-"))
                raise _field_problem(row, str(field), f"a {digits:,}-digit whole number, {allowed}")
    data = doc[fmt]
    rows = data if fmt != "dataframe_split" and isinstance(data, list) and data \
        and all(isinstance(r, dict) for r in data) else None
    if fmt == "instances" and rows is not None:
        return json.dumps({"inputs": data}).encode(), rows
    if fmt == "dataframe_records" and rows is not None:  # a frame's cells: null or NaN is a field not given
        rows = [{k: v for k, v in r.items() if not (v is None or isinstance(v, float) and math.isnan(v))} for r in rows]
    return body, rows


def _fits_float(value: int) -> bool:
    try:
        float(value)
    except OverflowError:
        return False
    return True


def _cells(fmt: str, data):
    """(row, field, value) of each cell of a request format's data (rows of objects, columns, or split)."""
    if fmt == "dataframe_split" and isinstance(data, dict):
        columns = data.get("columns") or []
        for i, values in enumerate(data.get("data") or []):
            for j, v in enumerate(values if isinstance(values, list) else [values]):
                yield i, (columns[j] if j < len(columns) else j), v
    elif isinstance(data, list):
        for i, r in enumerate(data):
            yield from ((i, k, v) for k, v in (r.items() if isinstance(r, dict) else ()))
    elif isinstance(data, dict):
        for k, column in data.items():
            yield from ((i, k, v) for i, v in enumerate(column if isinstance(column, list) else [column]))


def csv_as_json(body: bytes) -> bytes:
    """A CSV body as the JSON `dataframe_split` body of the same requests, read by wattgpu.request.read_csv (text
    fields stay text; a cell that is no number, in a number column, stays text: its row's error only)."""
    import pandas as pd

    from wattgpu.request import RequestError, read_csv

    try:
        frame, _ = read_csv(body.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise BodyProblem("body is not valid UTF-8 CSV") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise BodyProblem(_short(f"body is not a readable CSV: {exc}")) from None
    except RequestError as exc:
        raise BodyProblem(_short(exc), exc.field, exc.row) from None
    cells = frame.astype(object).where(frame.notna(), None)  # exact numbers (to_json rounds to 10 digits), null
    split = {"columns": [str(c) for c in frame.columns], "data": cells.to_numpy().tolist()}
    return json.dumps({"dataframe_split": split}, default=lambda v: v.item()).encode()


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
    """ASGI layer around the scoring app for `POST /invocations`: body size cap, JSON checks, clean errors; rows of
    objects answered by `model` (the served pyfunc's python model) directly, where one is given."""

    def __init__(self, app, max_body_bytes: int = MAX_BODY_BYTES, model=None):
        self.app, self.max_body_bytes, self.model = app, max_body_bytes, model

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
        given_type = headers.get(b"content-type", b"")
        content_type = given_type.split(b";")[0].strip().lower()
        rows = None
        try:
            if content_type == b"application/json":
                body, rows = checked_json(body)
            elif content_type == b"text/csv":
                body = csv_as_json(body)
                scope = {**scope, "headers": [(k, b"application/json" if k.lower() == b"content-type" else v)
                                              for k, v in scope["headers"]]}
        except BodyProblem as exc:
            return await reply(send, 400, exc.message, exc.field, exc.row)
        if rows is not None and self.model is not None and _utf8(given_type):
            return await self.answer(send, rows)
        if len(body) != int(length):
            scope = {**scope, "headers": [(k, str(len(body)).encode() if k.lower() == b"content-length" else v)
                                          for k, v in scope["headers"]]}
        return await self.app(scope, _replay(body, receive), _cleaning(send))

    async def answer(self, send, rows: list[dict]) -> None:
        """What MLflow's scoring app answers for these rows (its `invocations`: the model's predictions as its JSON,
        an MlflowException as its error body, 504 past MLFLOW_SCORING_SERVER_REQUEST_TIMEOUT), without parsing the
        body again or building a frame; the prediction runs in a thread, as MLflow's does, so /ping stays answered."""
        from mlflow.environment_variables import MLFLOW_SCORING_SERVER_REQUEST_TIMEOUT
        from mlflow.exceptions import MlflowException

        try:
            answer = await asyncio.wait_for(asyncio.to_thread(self.model.predict, None, rows),
                                            MLFLOW_SCORING_SERVER_REQUEST_TIMEOUT.get())
        except MlflowException as exc:
            body = clean_error(exc.serialize_as_json().encode())
            return await _send(send, exc.get_http_status_code(), body)
        except TimeoutError:
            return await _send(send, 504, clean_error(b"Request processing time exceeded limit"))
        except Exception:  # the model turns its own failures into MlflowException; anything else is ours
            _logger.exception("answering rows failed")
            return await _send(send, 500, json.dumps({"error_code": "INTERNAL_ERROR", "message": "internal error "
                                                      "while predicting; the server log has the details"}).encode())
        out = io.StringIO()
        predictions_to_json(answer, out)
        return await _send(send, 200, out.getvalue().encode())


def _utf8(content_type: bytes) -> bool:
    """Whether a Content-Type has no parameter but `charset=utf-8` (MLflow answers any other with 415)."""
    params = [p.strip().lower() for p in content_type.split(b";")[1:]]
    return all(p.replace(b" ", b"") == b"charset=utf-8" for p in params)


async def _send(send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": _json_headers([], len(body))})
    await send({"type": "http.response.body", "body": body, "more_body": False})


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


async def reply(send, status: int, message: str, field: str | None = None, row: int | None = None) -> None:
    """A one-line JSON error, MLflow's shape (`error_code`, `message`), and where it names one the field and row as
    a rejected request's (serving.pyfunc.request_rejected): `field`, `row`, `detail`."""
    code = "RESOURCE_LIMIT_EXCEEDED" if status == 413 else "BAD_REQUEST"
    named = {"field": field, "row": row, "detail": message} if field is not None else {}
    await _send(send, status, json.dumps({"error_code": code, "message": message, **named}).encode())


def default_workers() -> int:
    """Worker processes when none is asked: the CPUs this process may run on (its affinity, not the machine's count),
    at most MAX_DEFAULT_WORKERS, at least 1."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(usable, MAX_DEFAULT_WORKERS))


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=None,
                        help=f"uvicorn worker processes, each loading the models (default: one per usable CPU, at most "
                             f"{MAX_DEFAULT_WORKERS}; here {default_workers()})")
    parser.add_argument("--alias", default="champion", help="registry alias to serve for both targets")
    parser.add_argument("--max-body-bytes", type=int, default=MAX_BODY_BYTES)
    args = parser.parse_args(argv)
    os.environ[SERVE_ENV] = json.dumps({"uris": champion_uris(alias=args.alias), "max_body_bytes": args.max_body_bytes})
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    workers = default_workers() if args.workers is None else args.workers
    if workers < 1:
        parser.error(f"--workers must be at least 1, got {workers}")
    uvicorn.run("wattgpu.serving.app:create_app", factory=True, host=HOST, port=args.port, workers=workers,
                log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
