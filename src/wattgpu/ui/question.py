"""The planner page's question: every form field as text (a JSON body or the shareable URL's query string), parsed
into what `wattgpu predict` and `recommend` take, and every error tied to the form field it names.

The field names are the CLI's option names (`--gpus-per-replica` is `gpus_per_replica`), so an error that names a
flag or a request field lands beside the input that sets it.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from wattgpu import workload
from wattgpu.errors import WattgpuError
from wattgpu.planning import planner, resolve
from wattgpu.request import RequestError

MAX_COMPARED = 8  # GPUs one comparison draws
# workload.workload's arguments, each a form field of the same name (but n_gpus: gpus_per_replica), as in the CLI
WORKLOAD_FIELDS = tuple(name for name in inspect.signature(workload.workload).parameters if name != "n_gpus")


class Question(BaseModel):
    """One question as the page's form holds it; a blank field is absent (the CLI's default applies)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    mode: Literal["ask", "compare", "recommend"] = "ask"
    gpu: str | None = None  # a catalog name or alias
    gpu_spec: str | None = None  # or a GPU spec YAML, pasted
    gpus: str | None = None  # comma-separated catalog names: compared beside `gpu`; recommend: the candidates
    llm: str | None = None
    llm_config: str | None = None  # or a Hugging Face config.json, pasted or uploaded
    scenario: str | None = None
    concurrency: float | None = None
    rate: float | None = None
    prompt_tokens: float | None = None
    output_tokens: float | None = None
    gpus_per_replica: int | None = None
    pipeline_parallel: int | None = None
    precision: str | None = None
    expert_precision: str | None = None
    kv_precision: str | None = None
    engine: str | None = None
    engine_version: str | None = None
    expert_parallel: int | None = None
    dp_attention: bool | None = None
    speculative: str | None = None
    spec_draft_tokens: int | None = None
    spec_accept_length: float | None = None
    levels: str | None = None  # interval levels, comma-separated (percent or fraction); default 80, 90
    max_itl_ms: float | None = None  # the latency target: recommend's question, a line on the curves
    confidence: float = 80.0
    max_power_w: float | None = None
    power_scope: str = "gpu"
    pue: float = 1.0
    price_per_kwh: float | None = None
    gpu_price_per_hour: float | None = None
    objective: str = "energy"

    @model_validator(mode="before")
    @classmethod
    def _blank_is_absent(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if not (v is None or isinstance(v, str) and not v.strip())}
        return data

    def workload(self) -> dict[str, Any]:
        """The request's workload fields, as the CLI builds them from its options."""
        return workload.workload(n_gpus=self.gpus_per_replica, **{k: getattr(self, k) for k in WORKLOAD_FIELDS})

    def level_fractions(self) -> list[float]:
        given = [v for v in (self.levels or "").replace(";", ",").split(",") if v.strip()]
        with blame("levels"):
            values = [_number(v, "levels") for v in given]
        return [planner.level_fraction(v, "--level") for v in values] or list(planner.DEFAULT_LEVELS)

    def gpu_names(self) -> list[str]:
        return [n.strip() for n in (self.gpus or "").split(",") if n.strip()]

    def constraints(self) -> planner.Constraints:
        if self.max_itl_ms is None:
            raise FieldError("max_itl_ms", "a recommendation needs a latency target (ITL, ms)")
        return planner.Constraints(self.max_itl_ms, planner.level_fraction(self.confidence, "--confidence"),
                                   self.max_power_w, self.power_scope)

    def costs(self) -> planner.Costs:
        return planner.Costs(self.pue, self.price_per_kwh, self.gpu_price_per_hour, self.objective)


FIELDS = tuple(Question.model_fields)
# A flag in an error message -> the form field that sets it (the CLI's option names, but two)
FLAG_FIELDS = {**{"--" + f.replace("_", "-"): f for f in FIELDS}, "--power-budget-scope": "power_scope",
               "--level": "levels"}
REQUEST_FIELDS = {"n_gpus": "gpus_per_replica", "request_rate_per_s": "rate"}  # request field -> form field
FLAG = re.compile(r"--[a-z][a-z-]*")


class FieldError(WattgpuError):
    """An error the page shows beside one form field (`field`; None: above the form)."""

    def __init__(self, field: str | None, message: str):
        self.field = field
        super().__init__(message)


def parse(data: Any) -> Question:
    """The question in a JSON body or a query string; a bad value is a FieldError naming its field."""
    if not isinstance(data, dict):
        raise FieldError(None, "the question is a JSON object of form fields")
    try:
        return Question.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else None
        if err["type"] == "extra_forbidden":
            raise FieldError(None, f"unknown field {field!r}; the fields are: {', '.join(FIELDS)}") from None
        raise FieldError(field, f"{field}: {err['msg']}") from None


def _number(text: str, field: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise FieldError(field, f"{text.strip()!r} is not a number") from None


def field_of(exc: WattgpuError, q: Question | None) -> str | None:
    """The form field an error is about: its own (FieldError), the request field it names (RequestError), or the
    first flag its message names; None when it names none."""
    if isinstance(exc, FieldError):
        return exc.field
    if isinstance(exc, RequestError) and exc.field:
        f = REQUEST_FIELDS.get(exc.field, exc.field)
        if f == "level":
            return "confidence" if q is not None and q.mode == "recommend" else "levels"
        for side in ("gpu", "llm"):
            if f == side or f.startswith(side + "_"):
                given_text = q is not None and getattr(q, "gpu_spec" if side == "gpu" else "llm_config")
                return ("gpu_spec" if side == "gpu" else "llm_config") if given_text else side
        if f in FIELDS:
            return f
    flag = FLAG.search(str(exc))
    return FLAG_FIELDS.get(flag.group()) if flag else None


@contextlib.contextmanager
def blame(field: str):
    """Any project error raised inside is about `field`."""
    try:
        yield
    except FieldError:
        raise
    except WattgpuError as exc:
        raise FieldError(field, str(exc)) from None


@contextlib.contextmanager
def pasted(text: str | None, name: str):
    """`text` as a file called `name` (the resolve functions read files; their messages then name `name`)."""
    if text is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="wattgpu-ui-") as folder:
        path = Path(folder) / name
        path.write_text(text, encoding="utf-8")
        try:
            yield path
        except WattgpuError as exc:
            exc.args = (str(exc).replace(f"{folder}/", ""),)  # the message names the pasted file, not the folder
            raise


def gpu(q: Question, model_gpus) -> resolve.Resolved:
    """The question's GPU: a catalog name (`gpu`) or a pasted spec YAML (`gpu_spec`), as `predict` resolves one."""
    with pasted(q.gpu_spec, "pasted-gpu-spec.yaml") as spec, blame("gpu_spec" if q.gpu_spec else "gpu"):
        return resolve.gpu_choice(q.gpu, spec, model_gpus)


def llm(q: Question, model_llms) -> resolve.Resolved:
    """The question's LLM: a catalog name (`llm`) or a pasted config.json (`llm_config`), as `predict` resolves one."""
    with pasted(q.llm_config, "config.json") as config, blame("llm_config" if q.llm_config else "llm"):
        return resolve.llm_choice(q.llm, config, model_llms)


def compared_gpus(q: Question, model_gpus) -> list[resolve.Resolved]:
    """The GPUs a comparison draws: the question's GPU (if any), then `gpus`, each once, at most MAX_COMPARED."""
    out = [gpu(q, model_gpus)] if q.gpu or q.gpu_spec else []
    project = resolve.project_gpus()
    with blame("gpus"):
        out += [resolve.resolve_gpu(n, model_gpus, project) for n in q.gpu_names()]
    by_label: dict[str, resolve.Resolved] = {}
    for g in out:
        by_label.setdefault(label(g), g)  # each once, where first named
    unique = list(by_label.values())
    if not unique:
        raise FieldError("gpus", "name a GPU, or add up to 8 GPUs to compare")
    if len(unique) > MAX_COMPARED:
        raise FieldError("gpus", f"compare up to {MAX_COMPARED} GPUs at once, got {len(unique)}")
    return unique


def label(g: resolve.Resolved) -> str:
    """A resolved GPU's name: its catalog key, or the spec's name."""
    return str(g.fields.get("gpu") or g.fields.get("gpu_name"))


def recommend_names(q: Question) -> list[str] | None:
    """The catalog GPUs a recommendation ranks (`recommend --gpus`): `gpus` where given, else the whole catalog."""
    if not q.gpu_names():
        return None
    project = resolve.project_gpus()
    with blame("gpus"):
        return list(dict.fromkeys(project.resolve(n) for n in q.gpu_names()))
