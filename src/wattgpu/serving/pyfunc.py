"""The MLflow pyfunc model: one target's model folder behind `mlflow models serve`.

Requests are validated here, by `wattgpu.request.validate` (through the Predictor), not by MLflow's signature enforcement: that one
drops unknown columns silently (a typo such as `prompt_token` would get the default), lets text through
where a number belongs, and reports a missing column with the whole frame and schema in the message. So
the logged signature declares the outputs only; the request fields are documented in the MLmodel file
(`metadata.request_fields`) and by the input example. A bad request raises `MlflowException` with
INVALID_PARAMETER_VALUE, which the scoring server answers with HTTP 400 and a JSON body holding
`error_code`, `message`, `field`, `row` and `detail`, never a stack trace; any other failure is logged on
the server and answered with a 500 that carries no trace either.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from importlib.metadata import version as package_version
from pathlib import Path

import mlflow
import pandas as pd
from mlflow.exceptions import MlflowException
from mlflow.models import ModelSignature
from mlflow.protos.databricks_pb2 import INTERNAL_ERROR, INVALID_PARAMETER_VALUE
from mlflow.types.schema import ColSpec, Schema

from wattgpu import fields, workload
from wattgpu.modeling.store import load_predictor
from wattgpu.request import RequestError

_logger = logging.getLogger(__name__)

OUTPUT = {"power": "power_w", "itl": "itl_s"}  # the served column per target, unit in its name
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
        return out[list(output_columns(self.target))]


def as_requests(model_input):
    """A frame or a list of request mappings; one mapping (the `inputs` format with scalars) is one request."""
    if isinstance(model_input, pd.DataFrame | list):
        return model_input
    if isinstance(model_input, Mapping):
        return [model_input]
    raise RequestError(None, "-", "send `dataframe_records`: a list of request objects")


def request_rejected(exc: RequestError) -> MlflowException:
    """HTTP 400 with the field and row as their own JSON keys (the scoring server prefixes `message` with
    the input frame; `detail` keeps our sentence alone)."""
    return MlflowException(str(exc), error_code=INVALID_PARAMETER_VALUE, field=exc.field, row=exc.row,
                           detail=str(exc))


def output_columns(target: str) -> tuple[str, ...]:
    """The served columns: the prediction, its conformal interval at the request's `level` (`_lo`, `_hi`: null
    where the model abstains) and `interval` (a note: widened for extrapolation, or why it abstains)."""
    out = OUTPUT[target]
    return ("gpu", "llm", "scenario", "concurrency", out, f"{out}_lo", f"{out}_hi", "level", "interval")


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
            "interval": "empty, or why the interval is wider (extrapolating) or absent (abstains)"}


def signature(target: str) -> ModelSignature:
    """Outputs only: inputs are validated by the model itself (see the module docstring)."""
    types = {"gpu": "string", "llm": "string", "scenario": "string", "interval": "string"}
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
        "precision": {"type": "string", "allowed": list(workload.PRECISION_BYTES)},
        "engine": {"type": "string", "allowed": list(workload.ENGINES)},
        "engine_version": {"type": "string", "note": "e.g. 0.11; newer than any measured is answered and flagged"},
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
