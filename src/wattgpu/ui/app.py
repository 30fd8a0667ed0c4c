"""The planner page's server (`wattgpu ui`, `make ui`): one HTML page and a JSON API on 127.0.0.1, answered by the
registered champions through wattgpu.ui.answers (the CLI's planning service).

A thin FastAPI app: FastAPI, Starlette and uvicorn come with MLflow already, and a page of plain HTML and one script
needs no front-end build. Everything the page loads is served from here (Plotly's bundle from the installed `plotly`
package), so it works offline. Answers are strict JSON (null where there is no value); an error is one line,
`{"errors": [{"field": ..., "message": ...}]}`, naming the form field it is about; never a stack trace.

    GET  /                      the page; its query string is the question (the page fills the form from it)
    GET  /ping                  "ok" once the champions are loaded
    GET  /api/options           catalog names and the form's choices
    POST /api/ask|compare|recommend   the question as a JSON object of form fields -> the answer
    GET  /api/ask|compare|recommend.csv?<question>   the answer as CSV
"""

from __future__ import annotations

import json
import logging
import math
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles

from wattgpu import workload
from wattgpu.errors import WattgpuError
from wattgpu.planning import planner, resolve
from wattgpu.planning.models import ModelSet
from wattgpu.ui import question
from wattgpu.ui.answers import Planner

HOST, PORT = "127.0.0.1", 8765
STATIC = Path(__file__).with_name("static")
MAX_BODY_BYTES = 2**20  # a question with a pasted config.json is a few kB
log = logging.getLogger("wattgpu.ui")


def plotly_js() -> Path:
    """Plotly's JavaScript bundle as the installed `plotly` package ships it (its offline HTML uses the same file)."""
    return Path(str(resources.files("plotly") / "package_data" / "plotly.min.js"))


def strict(obj: Any) -> Any:
    """`obj` with every non-finite float as None and numpy scalars as Python ones: strict JSON has no NaN."""
    if isinstance(obj, dict):
        return {str(k): strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):  # numpy scalar
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def options(models: ModelSet) -> dict[str, Any]:
    """What the form offers: catalog GPUs (with aliases and memory) and LLMs for the search lists, the choices and
    the CLI's help texts."""
    gpus = resolve.project_gpus()
    project_llms = resolve.project_llms()
    llms = list(dict.fromkeys([*models.llms.keys, *(project_llms.keys if project_llms is not None else [])]))
    return {
        "gpus": [{"key": s.key, "aliases": list(s.aliases), "memory_gb": s.memory_gb} for s in gpus],
        "llms": llms,
        "choices": {"scenario": list(workload.SCENARIOS), "precision": list(workload.WEIGHT_PRECISIONS),
                    "expert_precision": list(workload.WEIGHT_PRECISIONS), "kv_precision": list(workload.KV_PRECISIONS),
                    "engine": list(workload.ENGINES), "speculative": list(workload.SPECULATIVE_CHOICES),
                    "power_scope": list(planner.POWER_SCOPES), "objective": list(planner.OBJECTIVES)},
        "help": {**workload.HELP, **workload.SHAPE_HELP},
        "defaults": {"levels": ", ".join(f"{100 * v:g}" for v in planner.DEFAULT_LEVELS),
                     **{k: v for k, v in workload.DEFAULTS.items() if k != "n_gpus"},
                     "gpus_per_replica": workload.DEFAULTS["n_gpus"]},
        "max_compared": question.MAX_COMPARED,
        "models": models.versions,
    }


def create_app(models_dir: Path | None = None) -> FastAPI:
    """The ASGI app: loads the champions once (the Predictor included), then serves the page and the API."""
    models = ModelSet.load(models_dir)
    planner_ = Planner(models)
    answer = {"ask": planner_.ask, "compare": planner_.compare, "recommend": planner_.recommend}
    app = FastAPI(title="wattgpu planner", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.models = models

    def reply(obj: Any, status: int = 200) -> Response:
        return Response(json.dumps(strict(obj), allow_nan=False), status, media_type="application/json")

    def failure(exc: Exception, q: question.Question | None = None) -> Response:
        if isinstance(exc, WattgpuError):
            return reply({"errors": [{"field": question.field_of(exc, q), "message": str(exc)}]}, 422)
        log.exception("internal error")  # the server's log has the trace; the answer has one line
        return reply({"errors": [{"field": None, "message": f"internal error ({type(exc).__name__}): see the "
                                  "server's log"}]}, 500)

    def answered(mode: str, data: Any, as_csv: bool) -> Response:
        q = None
        try:
            q = question.parse({"mode": mode, **data} if isinstance(data, dict) else data)
            body, table = answer[mode](q)
        except Exception as exc:  # noqa: BLE001 - every error becomes one line for the page
            return failure(exc, q)
        if as_csv:
            return Response(table.to_csv(index=False, float_format="%.6g", lineterminator="\n"), media_type="text/csv",
                            headers={"Content-Disposition": f'attachment; filename="wattgpu-{mode}.csv"'})
        return reply(body)

    @app.get("/")
    def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    @app.get("/ping")
    def ping() -> Response:  # ready: the champions are loaded (scripts/harness.py's PageServer waits for it)
        return Response("ok\n", media_type="text/plain")

    @app.get("/static/plotly.min.js")
    def plotly() -> FileResponse:
        return FileResponse(plotly_js(), media_type="text/javascript")

    @app.get("/api/options")
    def api_options() -> Response:
        return reply(options(models))

    @app.post("/api/{mode}")
    async def api_answer(mode: str, request: Request) -> Response:
        if mode not in answer:
            return reply({"errors": [{"field": None, "message": f"no such question {mode!r}: ask one of "
                                      f"{', '.join(answer)}"}]}, 404)
        raw = await request.body()
        if len(raw) > MAX_BODY_BYTES:
            return reply({"errors": [{"field": None, "message": f"body over {MAX_BODY_BYTES} bytes"}]}, 413)
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            return reply({"errors": [{"field": None, "message": f"the body is not JSON: {exc}"}]}, 400)
        return await run_in_threadpool(answered, mode, data, False)

    @app.get("/api/{mode}.csv")
    async def api_csv(mode: str, request: Request) -> Response:
        if mode not in answer:
            return reply({"errors": [{"field": None, "message": f"no such question {mode!r}"}]}, 404)
        return await run_in_threadpool(answered, mode, dict(request.query_params), True)

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


def serve(host: str = HOST, port: int = PORT, models_dir: Path | None = None) -> None:
    """Load the champions, then serve the page until interrupted (`wattgpu ui`)."""
    import uvicorn

    app = create_app(models_dir)
    versions = ", ".join(f"{k}: {v}" for k, v in app.state.models.versions.items())
    print(f"wattgpu planner on http://{host}:{port}/ (models: {versions}); Ctrl-C stops it", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")
