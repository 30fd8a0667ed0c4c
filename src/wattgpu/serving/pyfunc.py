"""The MLflow pyfunc model: one target's model folder behind `mlflow models serve`.

Requests are validated here, by `wattgpu.request.validate` (through the Predictor), not by MLflow's signature enforcement: that one
drops unknown columns silently (a typo such as `prompt_token` would get the default), lets text through
where a number belongs, and reports a missing column with the whole frame and schema in the message. So
the logged signature declares the outputs only; the request fields are documented in the MLmodel file
(`metadata.request_fields`) and by the input example. In a batch each good row is answered and each bad
row gets its `error` (null on answered rows); when no row is good, `MlflowException` with
INVALID_PARAMETER_VALUE, which the scoring server answers with HTTP 400 and a JSON body holding
`error_code`, `message`, `field`, `row`, `detail` and every row's `errors`, never a stack trace; any other failure is logged on
the server and answered with a 500 that carries no trace either.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping, Sequence
from importlib.metadata import version as package_version
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.models import ModelSignature
from mlflow.protos.databricks_pb2 import INTERNAL_ERROR, INVALID_PARAMETER_VALUE
from mlflow.types.schema import ColSpec, Schema

from wattgpu import fields, workload
from wattgpu.arrays import frame
from wattgpu.modeling.predictor import joined
from wattgpu.modeling.store import load_predictor
from wattgpu.request import MAX_LISTED_ERRORS, BatchRequestError, RequestError

_logger = logging.getLogger(__name__)

OUTPUT = {"power": "power_w", "itl": "itl_s"}  # the served column per target, unit in its name
BOTH = "both"  # the power champion served with the ITL champion (serving.app): every row gets both targets
MODEL_CODE = Path(__file__).with_name("model_code.py")


class WattgpuModel(mlflow.pyfunc.PythonModel):
    """Predict one target (`power` or `itl`) for request rows; the target comes from `model_config`."""

    def __init__(self, target: str | None = None):
        self.target = target

    def load_context(self, context) -> None:
        target = self.target or (context.model_config or {}).get("target")
        if target not in OUTPUT:
            raise MlflowException(f"model_config.target must be one of {sorted(OUTPUT)}, got {target!r}")
        self.target = target
        folder = context.artifacts["model_dir"]
        # The ITL model solves the requests in flight of a Poisson load; the power model carries its companion.
        itl = folder if target == "itl" else context.artifacts.get("itl_dir")
        self.predictor_ = load_predictor(folder if target == "power" else None, itl)

    def serve_with(self, itl: WattgpuModel) -> None:
        """Answer both targets: this power model with `itl`'s ITL model (its own champion) joined to it."""
        if self.target != "power" or itl.target != "itl":
            raise ValueError(f"serve_with joins a power model to an ITL model, got {self.target} and {itl.target}")
        self.predictor_ = joined(self.predictor_, itl.predictor_)
        self.target = BOTH

    # A DataFrame hint: MLflow infers no signature from it (a list-of-model hint would switch serving to the
    # `inputs`-only format); other inputs are accepted too, see as_requests.
    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.DataFrame:
        try:
            out = self.predictor_.predict(as_requests(model_input))
        except RequestError as exc:
            raise request_rejected(exc) from None
        except Exception:
            _logger.exception("prediction failed")
            raise MlflowException("internal error while predicting; the server log has the details",
                                  error_code=INTERNAL_ERROR) from None
        return with_nulls(out, output_columns(self.target))


def with_nulls(answer: pd.DataFrame, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """The answer's `columns` (default: all) with None where a value is missing (a rejected row's predictions, a
    bound where the model abstains) or not finite: MLflow writes None as JSON null, but NaN as a bare `NaN`, which
    strict JSON parsers (browsers, jq) refuse. Only the columns holding such a value change (to object); whole
    columns at once, the frame built once (arrays.frame)."""
    out = {}
    for c in answer.columns if columns is None else columns:
        values = answer[c].to_numpy()
        if values.dtype.kind == "f":
            bad = ~np.isfinite(values)
        elif values.dtype == object:  # text with NaN (a rejected row), or a stray float
            bad = (pd.isna(values) & (values != None)) | (values == math.inf) | (values == -math.inf)  # noqa: E711
        else:
            bad = None
        if bad is not None and bad.any():
            values = values.astype(object)
            values[bad] = None
        out[c] = values
    return frame(out, index=answer.index)


def as_requests(model_input):
    """MLflow's request formats as requests: `dataframe_records` / `dataframe_split` / CSV / Parquet arrive as a
    frame (an empty cell, NaN, is absent); `inputs` and `instances` as a list of mappings or a mapping of columns,
    their values wrapped in numpy arrays; a mapping of scalars is one request."""
    if isinstance(model_input, pd.DataFrame):
        return model_input
    if isinstance(model_input, list) and all(isinstance(r, Mapping) for r in model_input):
        return [{k: _plain(v) for k, v in r.items()} for r in model_input]
    if isinstance(model_input, Mapping):
        values = {k: _plain(v) for k, v in model_input.items()}
        columns = [v for v in values.values() if isinstance(v, list)]
        if columns and len(columns) == len(values) and len({len(c) for c in columns}) == 1:
            return pd.DataFrame(values)  # a mapping of equal-length columns (`instances`, `inputs` by column)
        return [values]
    raise RequestError(None, "-", "send a list of request objects (`dataframe_records`, `inputs` or `instances`)")


def _plain(value):
    """A numpy scalar or array (how MLflow hands over `inputs` / `instances` values) as plain Python."""
    return value.tolist() if isinstance(value, np.ndarray | np.generic) else value


def request_rejected(exc: RequestError) -> MlflowException:
    """HTTP 400 with the field and row as their own JSON keys (the scoring server prefixes `message` with
    the input frame; `detail` keeps our sentence alone), and for a batch every row's error (the first
    MAX_LISTED_ERRORS of them; echoed values cut to ~80 characters)."""
    rows = {}
    if isinstance(exc, BatchRequestError):
        rows = {"errors": [vars(e) for e in exc.errors[:MAX_LISTED_ERRORS]], "n_errors": len(exc.errors),
                "rejected_rows": len(exc.rejected), "input_rows": exc.n_rows}
    return MlflowException(str(exc), error_code=INVALID_PARAMETER_VALUE, field=exc.field, row=exc.row,
                           detail=str(exc), **rows)


def output_columns(target: str) -> tuple[str, ...]:
    """The served columns: the prediction, its conformal interval at the request's `level` (`_lo`, `_hi`: null
    where the model abstains) and `interval` (a note: widened for extrapolation, or why it abstains); for BOTH
    (serving.app), power's and ITL's."""
    outs = OUTPUT.values() if target == BOTH else (OUTPUT[target],)
    return ("gpu", "llm", "scenario", "concurrency", *(c for out in outs for c in (out, f"{out}_lo", f"{out}_hi")),
            "level", "interval", "error")


def response_fields(target: str) -> dict[str, str]:
    """What each served column means, for the MLmodel file."""
    out = OUTPUT[target]
    unit = {"power_w": "W per GPU", "itl_s": "s between tokens of one request"}[out]
    return {"gpu": "catalog key or the spec's name", "llm": "catalog key or the config's name",
            "scenario": "workload label", "concurrency": "requests in flight (given, offline rule or solved)",
            out: f"prediction ({unit})",
            f"{out}_lo": "lower bound of the conformal interval at `level` (null: the model abstains)",
            f"{out}_hi": "upper bound of the conformal interval at `level` (null: the model abstains)",
            "level": "the interval's confidence (the request's `level`, default 0.8)",
            "interval": "empty, or why the interval is wider (extrapolating) or absent (abstains)",
            "error": "null where answered; else why the row was rejected (field: problem), its other columns null"}


def signature(target: str) -> ModelSignature:
    """Outputs only: inputs are validated by the model itself (see the module docstring)."""
    types = {"gpu": "string", "llm": "string", "scenario": "string", "interval": "string", "error": "string"}
    return ModelSignature(outputs=Schema([ColSpec(types.get(c, "double"), c) for c in output_columns(target)]))


def request_fields() -> dict[str, dict]:
    """Every request field with its type and allowed range (wattgpu.fields), for the MLmodel file."""
    def numbers(prefix, table, names, required=()):
        return {f"{prefix}{k}": {"type": "integer" if table[k].integer else "double", "range": table[k].as_list(),
                                 **({"required_with_specs": True} if k in required else {})} for k in names}

    llm_numeric = (*fields.LLM_CONFIG_REQUIRED, *fields.LLM_CONFIG_OPTIONAL)
    return {
        "scenario": {"type": "string", "required": True, "allowed": list(workload.SCENARIOS)},
        "level": {"type": "double", "range": fields.INTERVAL_LEVEL.as_list(),
                  "note": "confidence of the returned interval (<target>_lo, <target>_hi); default 0.8"},
        "gpu": {"type": "string", "note": "catalog name or alias; else give the gpu_* spec fields"},
        "llm": {"type": "string", "note": "catalog name or alias; else give the llm_* config fields"},
        **numbers("", fields.WORKLOAD, fields.WORKLOAD),
        "precision": {"type": "string", "allowed": list(workload.PRECISION_BYTES),
                      "note": "the weights'; default: the LLM's own, else bf16"},
        "expert_precision": {"type": "string", "allowed": list(workload.PRECISION_BYTES),
                             "note": "a mixture of experts' routed experts (e.g. nvfp4 with precision fp8); default: "
                                     "precision; an error for a dense LLM"},
        "kv_precision": {"type": "string", "allowed": list(workload.KV_PRECISIONS),
                         "note": "the KV cache's; default: the weights' 16-bit type (fp16 for fp16 weights, else bf16)"},
        "engine": {"type": "string", "allowed": list(workload.ENGINES),
                   "note": "; ".join(f"{e}: no source measured it, answered as {p[0]} {p[1]} and flagged in `interval`"
                                     for e, p in workload.ENGINE_PROXIES.items())},
        "engine_version": {"type": "string", "note": "e.g. 0.11; newer than any measured is answered and flagged"},
        "dp_attention": {"type": "boolean", "note": workload.SHAPE_HELP["dp_attention"]},
        "speculative": {"type": "string", "allowed": list(workload.SPECULATIVE_CHOICES),
                        "note": workload.SHAPE_HELP["speculative"]},
        **{k: {**v, "note": workload.SHAPE_HELP[k] + "; no source measured it: answered from the physics and flagged "
                            "in `interval`"}
           for k, v in numbers("", fields.WORKLOAD, ("expert_parallel", "spec_draft_tokens",
                                                     "spec_accept_length")).items()},
        **numbers("gpu_", fields.GPU_SPEC, fields.GPU_SPEC, fields.GPU_SPEC_REQUIRED),
        **{f"gpu_{k}": {"type": "string"} for k in (*fields.GPU_SPEC_TEXT, "name")},
        **numbers("llm_", fields.LLM_CONFIG, llm_numeric, fields.LLM_CONFIG_REQUIRED),
        **{f"llm_{k}": {"type": "string"} for k in (*fields.LLM_CONFIG_TEXT, "name")},
    }


# The logged input example: one request by catalog names, one for a GPU given by its spec sheet.
EXAMPLE_REQUESTS = [
    {"gpu": "NVIDIA H100 NVL", "llm": "meta-llama/Llama-3.1-8B-Instruct", "scenario": "offline"},
    {"gpu_name": "my accelerator", "gpu_tdp_w": 350.0, "gpu_memory_gb": 48.0, "gpu_memory_bandwidth_gb_s": 864.0,
     "gpu_fp16_tensor_tflops": 181.0, "gpu_release_year": 2023.0, "llm": "Qwen/Qwen2.5-7B-Instruct",
     "scenario": workload.SERVER_LOADS[-1], "output_tokens": 200.0},
]
# A power model served without the ITL model is given the requests in flight instead of a Poisson rate.
POWER_ONLY_EXAMPLE_REQUESTS = [
    EXAMPLE_REQUESTS[0],
    {**{k: v for k, v in EXAMPLE_REQUESTS[1].items() if k != "scenario"}, "concurrency": 8.0},
]


def log_model(target: str, folder: Path, itl_folder: Path | None = None):
    """Log a model folder as a pyfunc model in the active run (models from code; the folder is an artifact). A power
    model also carries the ITL model folder it is served with (`itl_folder`): a request with a Poisson rate needs
    the ITL model to solve for the requests in flight."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    artifacts = {"model_dir": str(folder), **({"itl_dir": str(itl_folder)} if itl_folder is not None else {})}
    return mlflow.pyfunc.log_model(
        name=target,
        python_model=str(MODEL_CODE),
        model_config={"target": target},
        artifacts=artifacts,
        signature=signature(target),
        input_example=pd.DataFrame(
            POWER_ONLY_EXAMPLE_REQUESTS if target == "power" and itl_folder is None else EXAMPLE_REQUESTS),
        metadata={"request_fields": request_fields(), "response_fields": response_fields(target)},
        # wattgpu itself must be installed where the model is served (`--env-manager local`).
        pip_requirements=[f"mlflow=={package_version('mlflow')}", f"wattgpu=={package_version('wattgpu')}"],
    )
