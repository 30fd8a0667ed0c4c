"""Prediction requests: one strict request model, validated for a whole batch at once, then resolved (the GPU and
LLM by catalog name or by their own specs) into canonical rows, ready for `features.engineer`. The one entry for
every request: CLI, batch CSV, the planner and HTTP.

A request is a mapping (one row of a frame) with:
- `gpu`: a catalog name or alias, or else the GPU's spec fields `gpu_<field>` (fields.GPU_SPEC_REQUIRED at least;
  the others are optional: `gpu_interconnect_bandwidth_gb_s`, GPU-to-GPU bandwidth both ways, left out is read as
  a PCIe Gen4 x16 link, physics.PCIE_GEN4_X16_GB_S = 64 GB/s, by the tensor-parallel all-reduce term);
- `llm`: a catalog name or alias, or else the LLM's config fields `llm_<field>` (fields.LLM_CONFIG_REQUIRED at least);
- the load, one of: `concurrency` (requests in flight; a step decodes those the KV cache and engine admit),
  `request_rate_per_s` (Poisson arrivals, with `scenario` absent or `server`), or a preset `scenario`: offline |
  server_low | server_high;
- optional: `level` (the prediction interval's confidence, a fraction, default 0.8), `prompt_tokens`,
  `output_tokens`, `n_gpus` (GPUs per replica), `pipeline_parallel`, `precision`, `engine`, `engine_version`
  (defaults: workload.DEFAULTS, the LLM's own precision, vLLM at the newest measured version);
- optional precisions (workload.PRECISION_BYTES, KV_PRECISIONS): `precision` the weights' (bf16 | fp16 | fp8 | int8
  | int4 | nvfp4 | mxfp4); `expert_precision` a mixture of experts' routed experts' where they are stored otherwise
  (e.g. precision fp8, expert_precision nvfp4; default: `precision`; an error for a dense LLM); `kv_precision` the
  KV cache's (bf16 | fp16 | fp8 | int8; default: the weights' 16-bit type, fp16 for fp16 weights else bf16, as
  engines keep a 16-bit KV cache under quantised weights unless told otherwise);
- `engine` may be one no source measured (workload.ENGINE_PROXIES: sglang): it is answered as the nearest measured
  family's release and flagged (modeling.coverage.engine_notes); its version defaults to its current release;
- optional, the replica's shape (workload.REPLICA_SHAPE; no source measured it: answered as the same replica without
  it, the ITL scaled by the physics, physics.replica_step_s, and flagged, modeling.coverage.shape_note): `n_gpus` is
  the GPUs per replica (the CLI's --gpus-per-replica); `expert_parallel` N (default 1) spreads a mixture of experts'
  routed experts over N of its tensor-parallel GPUs (N divides them and the expert count; an error for a dense LLM
  or an unknown expert count); `dp_attention` (true / false, default false) runs attention data-parallel over the
  tensor-parallel GPUs (needs 2 or more); `speculative` (none | mtp | eagle | ngram, default none) with
  `spec_draft_tokens` and `spec_accept_length` (mean tokens a step emits per sequence, > 1 and <= draft tokens + 1;
  defaults per method: workload.SPECULATIVE; either without a method is an error); `mtp` needs an LLM with
  multi-token-prediction layers (the catalog's mtp_layers, a spec's llm_mtp_layers; not checked where unknown).

Strict (`Request`, a pydantic model built from the one table of ranges, wattgpu.fields): an unknown field is an
error with a "did you mean"; a number must be a number (not text, not a bool), finite, inside its range and whole
where it counts things; text must be printable (no newline or control character) and at most
fields.TEXT_MAX_CHARS long. The rules between fields (a catalog name or spec fields; one load; active <= total
parameters; attention heads divide the hidden size unless head_dim is given, fields.LLM_DIVIDES; pipeline stages
divide the GPUs; on vLLM and SGLang the tensor-parallel GPUs split the attention heads evenly, as those engines require
at start-up (workload.splits_heads); a text field beside a catalog name, gpu_architecture or llm_family or a gpu_name
label, agrees with the entry, as it would otherwise be ignored; ...) run on the whole batch at once, vectorised. A
frame that gives a column twice is an error naming it. `read_csv` reads requests from CSV text the same way for the
batch CLI and HTTP `text/csv`: text fields stay text (a label 1234, engine_version 0.10), a text cell in a number
column is that row's error only, and each row keeps the line of the file it begins on.

Absent: a field left out, null (None) or blank text is absent and takes its default ("missing" where it is
required). A DataFrame (a CSV read into one, an HTTP `dataframe_records` body) marks an empty cell with NaN, so
in a frame NaN means absent and nothing else; in a list of mappings (the CLI, MLflow's `inputs` format) an
explicit NaN or inf is an error.

`validate_batch` answers what it can: the canonical rows of the good requests and every bad row's errors (row,
field, what is allowed), with input rows = accepted + rejected. `validate` is all or nothing (one request, the
planner): it raises `BatchRequestError`, a `RequestError` naming the first bad row and field and listing the rest.
"""

from __future__ import annotations

import csv
import difflib
import functools
import io
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np
import pandas as pd
from pydantic import ConfigDict, Field, Strict, StringConstraints, TypeAdapter, ValidationError
from typing_extensions import NotRequired, TypedDict

from wattgpu import fields, physics
from wattgpu.arrays import frame as block_frame
from wattgpu.arrays import per_distinct
from wattgpu.catalogs.base import normalize_name
from wattgpu.errors import UnknownNameError, WattgpuError, shown
from wattgpu.features import GPU_FIELDS, LLM_FIELDS, kv_bytes_per_sequence, replica_fit_ratio
from wattgpu.workload import (
    BODY_WORDS,
    CURRENT_RELEASES,
    DEFAULT_ENGINE,
    DEFAULT_ENGINE_VERSION,
    DEFAULTS,
    ENGINE_PROXIES,
    ENGINES,
    FIELD_OPTIONS,
    HEAD_SHARDED_ENGINES,
    KV_PRECISIONS,
    PRECISION_BYTES,
    SCENARIOS,
    SERVER_RATES,
    SPECULATIVE,
    SPECULATIVE_CHOICES,
    default_kv_precision,
    engine_in_version,
    head_split_sizes,
    measured_engine,
    nearest_load,
    offline_concurrency,
    spec_defaults,
    splits_heads,
    version_number,
)

MAX_LISTED_ERRORS = 20  # errors spelled out in one message (the rest are counted)


# ------------------------------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class Part:
    """The GPU or the LLM of a request: its name field, spec fields and the canonical columns it resolves to."""

    kind: str
    numeric: tuple[str, ...]
    required: tuple[str, ...]
    text: tuple[str, ...]
    canonical: tuple[str, ...]  # features.GPU_FIELDS / LLM_FIELDS
    at_most: tuple[tuple[str, str], ...]  # fields.GPU_AT_MOST / LLM_AT_MOST
    divides: tuple[fields.Divides, ...] = ()  # fields.LLM_DIVIDES

    @property
    def prefix(self) -> str:
        return f"{self.kind}_"


GPU = Part("gpu", tuple(fields.GPU_SPEC), fields.GPU_SPEC_REQUIRED, fields.GPU_SPEC_TEXT, GPU_FIELDS,
           fields.GPU_AT_MOST)
LLM = Part("llm", (*fields.LLM_CONFIG_REQUIRED, *fields.LLM_CONFIG_OPTIONAL), fields.LLM_CONFIG_REQUIRED,
           fields.LLM_CONFIG_TEXT, LLM_FIELDS, fields.LLM_AT_MOST, fields.LLM_DIVIDES)
GPU_SPEC_OPTIONAL = tuple(k for k in fields.GPU_SPEC if k not in fields.GPU_SPEC_REQUIRED)

# Every numeric request field and its range; the fields chosen from a list; the free-text fields.
BOUNDS: dict[str, fields.Bounds] = {
    **fields.WORKLOAD, "level": fields.INTERVAL_LEVEL,
    **{f"gpu_{k}": fields.GPU_SPEC[k] for k in GPU.numeric}, **{f"llm_{k}": fields.LLM_CONFIG[k] for k in LLM.numeric},
}
CHOICES: dict[str, tuple[str, ...]] = {"scenario": tuple(SCENARIOS), "precision": tuple(PRECISION_BYTES),
                                       "expert_precision": tuple(PRECISION_BYTES), "kv_precision": KV_PRECISIONS,
                                       "engine": ENGINES, "speculative": SPECULATIVE_CHOICES}
FLAGS = fields.WORKLOAD_FLAGS  # true / false: a bool, 1 / 0 or text (true, false, yes, no, ...)
TEXT = ("gpu", "llm", "engine_version", *(f"{p.prefix}{k}" for p in (GPU, LLM) for k in (*p.text, "name")))


def _number_type(b: fields.Bounds):
    return Annotated[float | None, Strict(), Field(ge=b.lo, le=b.hi, allow_inf_nan=False,
                                                   multiple_of=1 if b.integer else None)]


_Text = Annotated[str, Strict(), StringConstraints(max_length=fields.TEXT_MAX_CHARS, pattern=fields.PRINTABLE)]
_TYPES: dict[str, Any] = {**{k: _number_type(b) for k, b in BOUNDS.items()},
                          **{k: _Text | None for k in (*CHOICES, *TEXT)}, **{k: bool | None for k in FLAGS}}
# The request model: every field optional (the rules between fields come after), no other field allowed. Text is
# stripped, and blank text is absent; the choices (CHOICES) are matched case-insensitively, on whole columns.
Request = TypedDict("Request", {k: NotRequired[t] for k, t in _TYPES.items()}, total=False)  # type: ignore[misc]
Request.__pydantic_config__ = ConfigDict(extra="forbid", str_strip_whitespace=True)  # type: ignore[attr-defined]
KNOWN_FIELDS = frozenset(_TYPES)
_BATCH = TypeAdapter(list[Request])


# ------------------------------------------------------------------------------------------------- errors


@dataclass(frozen=True)
class RowError:
    """One problem of one request: its row (0-based, in input order; None for a lone request), field, what is wrong
    and what is allowed."""

    row: int | None
    field: str
    problem: str

    def __str__(self) -> str:
        where = f"row {self.row}, " if self.row is not None else ""
        return f"{where}field {self.field!r}: {self.problem}"


class RequestError(WattgpuError, ValueError):
    """A request that cannot be answered; names the row and the field."""

    def __init__(self, row: int | None, field: str, problem: str):
        self.row, self.field = row, field
        super().__init__(str(RowError(row, field, problem)))


class BatchRequestError(RequestError):
    """Requests that cannot be answered: every error (`errors`), the first one's row and field as `row`, `field`.
    The message names each distinct (field, problem) once, at its first row, with the other rows that have it (a
    misspelt column of a 1,000-row batch is one sentence, not a thousand); at most MAX_LISTED_ERRORS of them."""

    def __init__(self, errors: list[RowError], n_rows: int):
        self.errors, self.n_rows = list(errors), n_rows
        self.rejected = sorted({e.row for e in errors if e.row is not None})
        groups: dict[tuple[str, str], list[RowError]] = {}
        for e in self.errors:
            groups.setdefault((e.field, e.problem), []).append(e)
        first = self.errors[0]  # its row and field are the exception's own: its sentence says the problem alone
        said = [(g[0].problem if i == 0 else str(g[0])) + _also_rows(g[1:]) for i, g in enumerate(groups.values())]
        more = len(said) - MAX_LISTED_ERRORS
        super().__init__(first.row, first.field, "; ".join(said[:MAX_LISTED_ERRORS])
                         + (f"; and {more} more errors" if more > 0 else ""))


def _also_rows(others: list[RowError]) -> str:
    """' (also rows 3, 7-12)': the other rows with the same error, runs of rows as ranges; '' where there are none."""
    rows = sorted({e.row for e in others if e.row is not None})
    if not rows:
        return ""
    runs, start = [], rows[0]
    for prev, row in zip(rows, [*rows[1:], None]):
        if row != prev + 1:
            runs.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = row
    return f" (also row{'s' if len(rows) > 1 else ''} {', '.join(runs)})"


@functools.lru_cache(maxsize=1024)
def _unknown_field(name: str) -> str:
    """What an unknown field is told: the field a flag or engine setting of that name is (workload.BODY_WORDS, also
    when misspelt: `tensor_paralel` is tensor_parallel's n_gpus, not pipeline_parallel), else the nearest field's
    name."""
    said = name.strip().lower().replace("-", "_")
    words = sorted({*KNOWN_FIELDS, *BODY_WORDS})
    close = difflib.get_close_matches(said, words, n=1, cutoff=0.6) if len(name) <= 100 else []
    field = BODY_WORDS.get(said) or (BODY_WORDS.get(close[0]) if close else None)
    if field:
        return f"unknown field; did you mean {field!r} ({FIELD_OPTIONS[field][1]})?"
    if close:
        return f"unknown field; did you mean {close[0]!r}?"
    return f"unknown field; allowed: {', '.join(sorted(KNOWN_FIELDS))}"


_RANGE = "{value:g} is outside the allowed range [{lo:g}, {hi:g}]"
_PROBLEMS = {  # pydantic's error type -> the sentence, saying what is allowed
    "greater_than_equal": _RANGE, "less_than_equal": _RANGE,
    "multiple_of": "must be a whole number, got {value:g}",
    "finite_number": "must be a finite number, got {value}",
    "float_type": "must be a number, got {kind} {shown}",
    "string_type": "must be text, got {kind} {shown}",
    "string_too_long": "text of {length:,} characters, at most {max} allowed: {shown}",
    "string_pattern_mismatch": "must be printable text (no newline or other control character), got {shown}",
    "bool_parsing": "must be true or false (also 1 / 0, yes / no), got {kind} {shown}",
    "bool_type": "must be true or false (also 1 / 0, yes / no), got {kind} {shown}",
}


def _problem(field: str, err: dict) -> str:
    """A pydantic error as a sentence that says what is allowed (echoing at most ~80 characters of the input)."""
    kind, value = err["type"], err.get("input")
    if kind == "extra_forbidden":
        return _unknown_field(field)
    b = BOUNDS.get(field, fields.Bounds(-math.inf, math.inf))
    template = _PROBLEMS.get(kind, "{msg}")
    return template.format(value=value, shown=shown(value), kind=type(value).__name__, lo=b.lo, hi=b.hi,
                           length=len(value) if isinstance(value, str) else 0, max=fields.TEXT_MAX_CHARS,
                           msg=err["msg"])


def _model_errors(exc: ValidationError) -> list[RowError]:
    out = []
    for err in exc.errors(include_url=False):
        loc = err["loc"]
        if len(loc) < 2:
            out.append(RowError(int(loc[0]), "-", "each request must be an object of fields"))
        else:
            out.append(RowError(int(loc[0]), str(loc[1]), _problem(str(loc[1]), err)))
    return out


class _Errors:
    """Errors collected over a batch, by row; rows with errors leave the later steps."""

    def __init__(self):
        self.items: list[RowError] = []

    def add(self, mask, rows: pd.Index, field, problem) -> None:
        """Flag the rows where `mask`; `field` and `problem` are text, or callables of the row's position."""
        for i in np.flatnonzero(np.asarray(mask, dtype=bool)):
            self.items.append(RowError(int(rows[i]), field(i) if callable(field) else field,
                                       problem(i) if callable(problem) else problem))

    def rows(self) -> set[int]:
        return {e.row for e in self.items}


# ------------------------------------------------------------------------------------------------- batches


@dataclass(frozen=True)
class Validated:
    """A validated batch: the canonical rows of the accepted requests (in input order, index 0..k-1), their input
    row numbers, and every rejected row's errors. n = accepted + rejected, always."""

    rows: pd.DataFrame
    accepted: np.ndarray
    errors: tuple[RowError, ...]
    n: int

    @property
    def rejected(self) -> list[int]:
        return sorted({e.row for e in self.errors})

    def error(self) -> BatchRequestError:
        return BatchRequestError(list(self.errors), self.n)

    def error_texts(self) -> pd.Series:
        """Per input row: None where answered, else its errors ("field 'x': problem; ...")."""
        texts: dict[int, list[str]] = {}
        for e in self.errors:
            texts.setdefault(e.row, []).append(str(RowError(None, e.field, e.problem)))
        return pd.Series([("; ".join(texts[i]) if i in texts else None) for i in range(self.n)], dtype=object)

    def answers(self, predictions: pd.DataFrame) -> pd.DataFrame:
        """`predictions` (one per accepted row) spread over every input row, with an `error` column (null where
        answered)."""
        out = predictions.set_axis(self.accepted, axis=0).reindex(range(self.n))
        out["error"] = self.error_texts().to_numpy()
        return out


def _no_column_twice(columns: pd.Index) -> None:
    """A column given twice is an error naming it (a frame would keep one of its values and ignore the other)."""
    twice = columns[columns.duplicated()]
    if len(twice):
        at = [i for i, c in enumerate(columns) if c == twice[0]]
        raise RequestError(None, str(twice[0]), f"column given {len(at)} times (positions {', '.join(map(str, at))}); "
                                                "give each field once")


def _records(requests: pd.DataFrame | Iterable[Mapping]) -> list:
    """A frame's rows without their absent (NaN) cells; a list of mappings as it is. A frame that gives a column
    twice (e.g. a `dataframe_split` body) is an error naming it: one of its values would be ignored."""
    if isinstance(requests, pd.DataFrame):
        _no_column_twice(requests.columns)
        names, values = list(requests.columns), requests.to_numpy(object).tolist()
        given = requests.notna().to_numpy()
        if given.all():
            return [dict(zip(names, row)) for row in values]
        return [{k: v for k, v, g in zip(names, row, m) if g} for row, m in zip(values, given.tolist())]
    return list(requests)


def _columns(valid: list[dict]) -> dict[str, np.ndarray]:
    """Validated requests as one array per field (NaN / None where absent): the rules below run on whole columns."""
    n, present = len(valid), set().union(*valid) if valid else set()
    cols = {}
    for k in _TYPES:
        number = k in BOUNDS
        if k in present:
            cols[k] = np.array([r.get(k) for r in valid], dtype=float if number else object)
            if not number:
                cols[k][cols[k] == ""] = None  # blank text: absent
        else:
            cols[k] = np.full(n, np.nan) if number else np.full(n, None, dtype=object)
    return cols


def validate_batch(requests: pd.DataFrame | list[Mapping], gpus, llms) -> Validated:
    """Requests -> canonical rows (gpu, llm, workload, gpu_*, llm_*) of the good ones, ready for features.engineer,
    and every bad row's errors."""
    records = _records(requests)
    if not records:
        raise RequestError(None, "requests", "no rows: send at least one request")
    n = len(records)
    errors = _Errors()
    try:
        valid = _BATCH.validate_python(records)
    except ValidationError as exc:
        errors.items = _model_errors(exc)
        bad = errors.rows()
        valid = _BATCH.validate_python([records[i] for i in range(n) if i not in bad])
    rows = np.setdiff1d(np.arange(n), list(errors.rows()))
    cols = _columns(valid)
    out = {**_resolve(cols, rows, GPU, gpus, errors), **_resolve(cols, rows, LLM, llms, errors),
           **_workload(cols, rows, errors)}
    keep = ~np.isin(rows, list(errors.rows()))
    out, rows = {k: out[k][keep] for k in _COLUMNS}, rows[keep]
    own = out["llm_weight_precision"]  # "": the weights as published (e.g. gpt-oss's MXFP4 experts), else 16-bit
    own = np.where(np.isin(own, list(PRECISION_BYTES)), own, "bf16")
    out["precision"] = np.where(out["precision"] != "", out["precision"], own).astype(object)
    _precisions(out, rows, errors)  # the rules that need the LLM and the weights' precision
    _replica_shape(out, rows, errors)  # expert parallel: the LLM's experts
    keep = ~np.isin(rows, list(errors.rows()))
    out, rows = {k: v[keep] for k, v in out.items()}, rows[keep]
    _offline_concurrency(out)
    return Validated(block_frame(out, _COLUMNS), rows, tuple(sorted(errors.items, key=lambda e: e.row)), n)


def validate(requests: pd.DataFrame | list[Mapping], gpus, llms) -> pd.DataFrame:
    """Every request's canonical row; any bad request raises BatchRequestError (naming every bad row's fields)."""
    batch = validate_batch(requests, gpus, llms)
    if batch.errors:
        raise batch.error()
    return batch.rows


def validate_one(variants: list[Mapping], gpus, llms) -> pd.DataFrame:
    """The canonical rows of one question asked several ways (the same request at each interval level, or on each
    GPU): any error raises BatchRequestError naming each distinct (field, problem) once, without row numbers, as the
    one request a user sent."""
    batch = validate_batch(variants, gpus, llms)
    if batch.errors:
        once = dict.fromkeys((e.field, e.problem) for e in batch.errors)
        raise BatchRequestError([RowError(None, f, p) for f, p in once], 1)
    return batch.rows


def check_workload(w: Mapping[str, Any]) -> None:
    """A workload's fields (no GPU or LLM yet) by the same model and rules; raises RequestError naming the field."""
    errors = _Errors()
    try:
        valid = _BATCH.validate_python([dict(w)])
    except ValidationError as exc:
        errors.items = _model_errors(exc)
    else:
        _workload(_columns(valid), np.zeros(1, dtype=int), errors)
    if errors.items:
        raise RequestError(None, errors.items[0].field, errors.items[0].problem)


def spec_problems(kind: str, spec: Mapping[str, Any]) -> list[RowError]:
    """A GPU's spec-sheet fields or an LLM's config fields in their own names (`tdp_w`, as a spec YAML writes them,
    not the request's `gpu_tdp_w`), checked as a request's are (type, range, the rules between them): one error per
    bad field (row None), naming it as given."""
    part = {"gpu": GPU, "llm": LLM}[kind]
    errors = _Errors()
    try:
        valid = _BATCH.validate_python([{part.prefix + k: v for k, v in spec.items()}])
    except ValidationError as exc:
        errors.items = _model_errors(exc)
    else:
        _spec_rules(_columns(valid), np.zeros(1, dtype=int), part, errors, name=lambda f: f)
    return [RowError(None, e.field.removeprefix(part.prefix), e.problem) for e in errors.items]


# ------------------------------------------------------------------------------------------------- CSV


TEXT_FIELDS = (*CHOICES, *TEXT)  # read from a CSV as text: a label such as 1234, or engine_version 0.10, stays text


def read_csv(text: str) -> tuple[pd.DataFrame, list[int]]:
    """Requests from CSV text (a header, then one request per row), and the line of the text where each row begins.
    As `validate_batch` reads a frame: an empty cell is absent. The text fields (TEXT_FIELDS) stay text, whatever
    they look like; in a number column each cell that reads as a number is one, and a cell that does not keeps its
    text, so that only its own row is rejected. Raises pandas' ParserError / EmptyDataError where it is no CSV."""
    header = next(csv.reader(io.StringIO(text)), [])
    _no_column_twice(pd.Index([h.strip() for h in header]))  # pandas would rename the second `x` to `x.1`
    frame = pd.read_csv(io.StringIO(text), dtype={k: str for k in TEXT_FIELDS})
    for k in frame.columns.intersection(list(BOUNDS)):
        if frame[k].dtype == object:  # some cell is not a number: the others are
            numbers = pd.to_numeric(frame[k], errors="coerce")
            frame[k] = numbers.astype(object).where(numbers.notna() | frame[k].isna(), frame[k])
    return frame, row_lines(text)


def row_lines(text: str) -> list[int]:
    """The line (1-based) of CSV `text` where each data row begins, as pandas reads rows: a blank (or blank-looking)
    line is no row, and a quoted field may span lines."""
    reader = csv.reader(io.StringIO(text))
    starts, end = [], 0
    for record in reader:
        if len(record) > 1 or (record and record[0].strip()):
            starts.append(end + 1)
        end = reader.line_num
    return starts[1:]  # the first is the header


# ------------------------------------------------------------------------------------------------- the rules


def _first(given: np.ndarray, names: list[str]) -> np.ndarray:
    """Per row of a (rows x fields) mask, the name of the first field where it holds."""
    return np.asarray(names, dtype=object)[given.argmax(axis=1)]


def _resolve(cols: dict[str, np.ndarray], rows: np.ndarray, part: Part, catalog, errors: _Errors) -> dict:
    """The GPU (or LLM) of each row, by catalog name or by its spec fields -> `gpu` and gpu_<canonical> columns."""
    kind, prefix = part.kind, part.prefix
    name, label = cols[kind], cols[f"{prefix}name"]
    spec_names = [f"{prefix}{k}" for k in part.numeric]
    given = np.column_stack([~np.isnan(cols[c]) for c in spec_names])
    spec, named = given.any(axis=1), pd.notna(name)
    first = _first(given, spec_names)
    errors.add(named & spec, rows, lambda i: first[i],
               f"give either {kind!r} (a catalog name) or {prefix}* spec fields, not both")
    needs = ", ".join(prefix + r for r in part.required)
    errors.add(~named & ~spec, rows, kind, f"missing: give a catalog name or the {prefix}* fields ({needs})")
    by_name, by_spec = named & ~spec, spec & ~named
    # by name: each distinct name resolved once
    keys, unknown = {}, {}
    for nm in set(name[by_name]):
        try:
            keys[nm] = catalog.resolve(nm)
        except UnknownNameError as exc:
            unknown[nm] = str(exc)
    key = np.array([keys.get(nm) for nm in name], dtype=object) if by_name.any() else np.full(len(name), None)
    errors.add(by_name & pd.isna(key), rows, kind, lambda i: unknown[name[i]])
    # by spec: the required fields, a label that is no catalog name, and the order between fields
    req_names = [f"{prefix}{k}" for k in part.required]
    missing = np.column_stack([np.isnan(cols[c]) for c in req_names])
    gap = _first(missing, req_names)
    errors.add(by_spec & missing.any(axis=1), rows, lambda i: gap[i],
               f"missing (or NaN), and required when no catalog name is given (needs {needs})")
    taken = {lb for lb in set(label[by_spec & pd.notna(label)]) if lb in catalog}
    errors.add(by_spec & np.isin(label, list(taken)), rows, f"{prefix}name",
               lambda i: f"{shown(label[i])} is a catalog {kind.upper()}: send {kind!r} instead, or choose another "
                         "label")
    _spec_rules(cols, rows, part, errors)
    found = pd.notna(key)
    _beside_name(cols, rows, part, catalog, np.where(by_name & found, key, None), errors)
    # the canonical columns: the catalog's entry, or the given spec (text fields "unknown" where not given)
    table = catalog.field_table(part.canonical)
    pos = table.index.get_indexer(np.where(found, key, table.index[0] if len(table) else None))
    out = {}
    for f in part.canonical:
        entry = table[f].to_numpy()[pos] if len(table) else np.full(len(name), None)
        col = cols.get(f"{prefix}{f}")
        if col is not None and f in part.text:
            entry = np.where(found, entry, np.where(pd.notna(col), col, "unknown"))
        elif col is not None:
            entry = np.where(found, entry, col)
        out[f"{prefix}{f}"] = entry if f in part.text or f == "is_moe" else entry.astype(float)
    if kind == "llm":
        total, active = out["llm_total_params_b"], out["llm_active_params_b"]
        active = np.where(found | ~np.isnan(active), active, total)
        out["llm_is_moe"] = np.where(found, out["llm_is_moe"], active < total).astype(bool)
        out["llm_active_params_b"] = active
    out[kind] = np.where(found, key, np.where(pd.notna(label), label, f"custom {kind.upper()}"))
    return out


def _spec_rules(cols: dict[str, np.ndarray], rows: np.ndarray, part: Part, errors: _Errors, name=None) -> None:
    """The rules between a GPU's or an LLM's spec fields (fields.GPU_AT_MOST, LLM_AT_MOST, LLM_DIVIDES), on whole
    columns; each broken one names the first field of its rule, as `name` words it (default: the request's
    gpu_ / llm_ field)."""
    prefix = part.prefix
    name = name or (lambda f: prefix + f)
    with np.errstate(invalid="ignore"):
        for lo, hi in part.at_most:
            a, b = cols[prefix + lo], cols[prefix + hi]
            errors.add(a > b, rows, name(lo),
                       lambda i, a=a, b=b, hi=hi: f"{a[i]:g} exceeds {name(hi)} {b[i]:g} (at most equal)")
        for rule in part.divides:
            a, b = cols[prefix + rule.divisor], cols[prefix + rule.multiple]
            exempt = ~np.isnan(cols[prefix + rule.unless]) if rule.unless else np.zeros(len(a), dtype=bool)
            errors.add(~np.isnan(a) & ~np.isnan(b) & ~exempt & (np.fmod(b, a) != 0), rows, name(rule.divisor),
                       lambda i, a=a, b=b, rule=rule: rule.problem(a[i], b[i], name))


def _beside_name(cols: dict[str, np.ndarray], rows: np.ndarray, part: Part, catalog, key: np.ndarray,
                 errors: _Errors) -> None:
    """Text fields given beside a catalog name (`key`: the entry per row, None where not named) must be that entry's,
    as names are compared (case and spaces aside): a label (gpu_name) one of its names, an architecture, vendor,
    family, ... its own. Otherwise they would be ignored: the catalog entry is what is predicted."""
    kind, prefix = part.kind, part.prefix
    named = pd.notna(key)
    if not named.any():
        return
    label = cols[f"{prefix}name"]
    at = np.flatnonzero(named & pd.notna(label))
    same = {(label[i], key[i]): label[i] in catalog and catalog.resolve(label[i]) == key[i] for i in at}
    errors.add(np.isin(np.arange(len(key)), [i for i in at if not same[(label[i], key[i])]]), rows, f"{prefix}name",
               lambda i: f"{shown(label[i])} is not a name of {key[i]!r}, the catalog {kind.upper()} that {kind!r} "
                         f"names: leave {prefix}name out (the answer names {key[i]!r}), or send the {prefix}* spec "
                         f"fields instead of {kind!r}")
    table = catalog.field_table(part.text)
    for f in part.text:
        given, field = cols[prefix + f], prefix + f
        at = np.flatnonzero(named & pd.notna(given))
        entry = {i: table.at[key[i], f] for i in at}
        wrong = [i for i in at if not isinstance(entry[i], str) or normalize_name(entry[i]) != normalize_name(given[i])]
        errors.add(np.isin(np.arange(len(key)), wrong), rows, field,
                   lambda i, f=f, field=field, entry=entry, given=given: (
                       f"{shown(given[i])} contradicts {key[i]!r}, the catalog {kind.upper()} that {kind!r} names"
                       + (f", whose {f} is {entry[i]!r}" if isinstance(entry[i], str) else f", which records no {f}")
                       + f": leave {field} out, or send the {prefix}* spec fields instead of {kind!r}"))


def _workload(cols: dict[str, np.ndarray], rows: np.ndarray, errors: _Errors) -> dict:
    """The request's workload in the training table's vocabulary: a closed batch of `concurrency` requests, Poisson
    arrivals at `request_rate_per_s` (requests in flight solved by the predictor) or a preset (`scenario`)."""
    for k, allowed in CHOICES.items():  # case-insensitive; each distinct value looked at once
        lower = {v: v.lower() for v in set(cols[k]) if v is not None}
        cols[k] = np.array([lower.get(v) for v in cols[k]], dtype=object)
        wrong = {v for v in lower.values() if v not in allowed}
        errors.add(np.isin(cols[k], list(wrong)), rows, k, lambda i, k=k: _not_a_choice(k, cols[k][i]))
    scenario, conc, rate = cols["scenario"], cols["concurrency"], cols["request_rate_per_s"]
    has_s, has_c, has_r = pd.notna(scenario), ~np.isnan(conc), ~np.isnan(rate)
    offline = scenario == "offline"
    preset = np.isin(scenario, list(SERVER_RATES))
    errors.add(has_c & (has_s | has_r), rows, lambda i: "scenario" if has_s[i] else "request_rate_per_s",
               "give either `concurrency` (a closed batch) or a scenario / request rate")
    errors.add(~has_c & offline & has_r, rows, "request_rate_per_s", "not used offline (max throughput); leave it out")
    errors.add(~has_c & ~has_s & ~has_r, rows, "scenario",
               f"missing: give `concurrency`, `request_rate_per_s` or a scenario ({', '.join(SCENARIOS)})")
    errors.add(~has_c & (scenario == "server") & ~has_r, rows, "request_rate_per_s",
               "required for scenario 'server' (Poisson requests/s)")
    errors.add(~has_c & preset & has_r, rows, "request_rate_per_s",
               lambda i: f"{scenario[i]!r} sets its own rate; use scenario 'server'")
    server = ~has_c & ~offline
    rate = np.where(server, np.where(preset, [SERVER_RATES.get(s, np.nan) for s in scenario], rate), np.nan)
    # The paper's models know the two loads as labels; a custom rate maps to the nearer one (log scale).
    labels = {r: nearest_load(r) for r in set(rate[server & ~preset & ~np.isnan(rate)])}
    label = np.where(preset, scenario, [labels.get(r) for r in rate])
    kinds = [has_c, offline]
    out = {
        "scenario": np.select(kinds, ["fixed_concurrency", "offline"], "server").astype(object),
        "scenario_label": np.select(kinds, ["concurrency", "offline"], label).astype(object),
        "concurrency_from": np.select(kinds, ["given", "offline rule"], "solved from the rate").astype(object),
        "concurrency": np.where(has_c, conc, np.nan),
        "request_rate_per_s": rate.astype(float),
    }
    for k, col in (("prompt_tokens", "prompt_tokens_mean"), ("output_tokens", "output_tokens_mean"),
                   ("n_gpus", "n_gpus"), ("pipeline_parallel", "pipeline_parallel")):
        out[col] = np.where(np.isnan(cols[k]), DEFAULTS.get(k, 1), cols[k])
    n_gpus, pp = out["n_gpus"], out["pipeline_parallel"]
    errors.add(n_gpus % pp != 0, rows, "pipeline_parallel",
               lambda i: f"{pp[i]:g} does not divide n_gpus {n_gpus[i]:g} (GPUs per replica = tensor x pipeline "
                         "parallel)")
    out["tensor_parallel"] = n_gpus // pp
    out["precision"] = np.where(pd.notna(cols["precision"]), cols["precision"], "").astype(object)  # "": the LLM's
    for k in ("expert_precision", "kv_precision"):  # "": the default, set once the weights' precision is known
        out[k] = np.where(pd.notna(cols[k]), cols[k], "").astype(object)
    _engine_in_version(cols, rows, errors)
    out["engine"] = np.where(pd.notna(cols["engine"]), cols["engine"], DEFAULT_ENGINE).astype(object)
    version = cols["engine_version"]
    unread = per_distinct(lambda v: v is not None and math.isnan(version_number(v)), version, dtype=bool)
    errors.add(unread, rows, "engine_version",
               lambda i: f"must be a release like '0.11', '0.14.1' or '1.2.0rc1' (an engine written apart before it: "
                         f"'vllm 0.11.0'), got {shown(version[i])}")
    # vLLM: the newest measured release; an engine no source measured: its current release; others: unstated
    default = np.select([out["engine"] == DEFAULT_ENGINE, np.isin(out["engine"], list(ENGINE_PROXIES))],
                        [DEFAULT_ENGINE_VERSION, [CURRENT_RELEASES.get(e, "") for e in out["engine"]]], "")
    out["engine_version"] = np.where(pd.notna(version), version, default).astype(object)
    out["level"] = np.where(np.isnan(cols["level"]), fields.DEFAULT_INTERVAL_LEVEL, cols["level"])
    _shape_workload(cols, out, rows, errors)
    return out


def _engine_in_version(cols: dict[str, np.ndarray], rows: np.ndarray, errors: _Errors) -> None:
    """An `engine_version` may name its engine first, as the CLI's help writes releases ('vllm 0.11.0'): the engine word
    is taken off the version, sets `engine` where the request leaves it out, and is an error where it is no engine or
    another engine than `engine` (never read as a release of the wrong engine)."""
    version, engine = cols["engine_version"], cols["engine"]
    split = per_distinct(lambda v: (None, None) if v is None else engine_in_version(v), version, dtype=object)
    word, bare = (np.array([pair[j] for pair in split], dtype=object) for j in (0, 1))
    named = pd.notna(word)
    if not named.any():
        return
    known = named & np.isin(word, ENGINES)
    errors.add(named & ~known, rows, "engine_version",
               lambda i: f"{shown(version[i])}: {word[i]!r} is not an engine ({', '.join(ENGINES)}); give the "
                         f"release alone, e.g. {bare[i]!r}, and the engine as `engine`")
    other = known & pd.notna(engine) & np.isin(engine, ENGINES) & (word != engine)
    errors.add(other, rows, "engine_version",
               lambda i: f"{shown(version[i])} is a release of {word[i]}, but engine is {engine[i]!r}: give "
                         f"{bare[i]!r} alone for {engine[i]}, or engine {word[i]!r}")
    cols["engine"] = np.where(known & pd.isna(engine), word, engine)
    cols["engine_version"] = np.where(named, bare, version)


def _stages_phrase(out: dict[str, np.ndarray]) -> Callable[[int], str]:
    """Row i -> ' (n_gpus N / pipeline_parallel P)' where the replica has pipeline stages (how its tensor-parallel
    size came about), else ''."""
    n_gpus, pp = out["n_gpus"], out["pipeline_parallel"]
    return lambda i: "" if pp[i] == 1 else f" (n_gpus {n_gpus[i]:g} / pipeline_parallel {pp[i]:g})"


def _shape_workload(cols: dict[str, np.ndarray], out: dict[str, np.ndarray], rows: np.ndarray, errors: _Errors) -> None:
    """The replica's shape (workload.REPLICA_SHAPE) and its rules that need no LLM, into `out`: expert parallel N
    divides the tensor-parallel GPUs (at most all of them); DP attention needs two or more of them; a speculative
    method's draft tokens and accept length (defaults: workload.SPECULATIVE), given only with a method, the accept
    length more than 1 and at most draft tokens + 1."""
    n_gpus, tp = out["n_gpus"], out["tensor_parallel"]
    ep = np.where(np.isnan(cols["expert_parallel"]), 1.0, cols["expert_parallel"])
    stages = _stages_phrase(out)
    errors.add(ep > n_gpus, rows, "expert_parallel",
               lambda i: f"{ep[i]:g} is more than the replica's {n_gpus[i]:g} GPUs (n_gpus): expert parallel spreads "
                         "the experts over some or all of them")
    errors.add((ep <= n_gpus) & (tp % ep != 0), rows, "expert_parallel",
               lambda i: f"{ep[i]:g} does not divide the replica's {tp[i]:g} tensor-parallel GPUs{stages(i)}")
    out["expert_parallel"] = ep
    dp = np.array([bool(v) if v is not None else False for v in cols["dp_attention"]], dtype=bool)
    errors.add(dp & (tp < 2), rows, "dp_attention",
               lambda i: f"needs 2 or more tensor-parallel GPUs{stages(i) or ' (n_gpus)'}, got {tp[i]:g}: on one GPU "
                         "attention is whole already")
    out["dp_attention"] = dp
    method = np.where(pd.notna(cols["speculative"]), cols["speculative"], "none").astype(object)
    draft, accept = cols["spec_draft_tokens"], cols["spec_accept_length"]
    off = method == "none"
    for k, given in (("spec_draft_tokens", ~np.isnan(draft)), ("spec_accept_length", ~np.isnan(accept))):
        errors.add(off & given, rows, k, f"needs `speculative` ({' | '.join(SPECULATIVE)}): without a method no "
                                         "token is drafted")
    errors.add(~off & (accept <= 1), rows, "spec_accept_length",
               lambda i: f"must be more than 1 (tokens a step emits per sequence, the bonus token included; 1 is no "
                         f"gain from speculating), got {accept[i]:g}")
    on = ~off & np.isin(method, list(SPECULATIVE))
    resolved = [spec_defaults(m, d, a) if o else (np.nan, np.nan) for m, d, a, o in zip(method, draft, accept, on)]
    d_all = np.array([r[0] for r in resolved], dtype=float)
    a_all = np.array([r[1] for r in resolved], dtype=float)
    with np.errstate(invalid="ignore"):
        errors.add(on & (accept > d_all + 1), rows, "spec_accept_length",
                   lambda i: f"{accept[i]:g} exceeds spec_draft_tokens + 1 = {d_all[i] + 1:g} (a step emits at most "
                             f"its {d_all[i]:g} draft token{'s' if d_all[i] > 1 else ''} and the bonus token)"
                             + ("" if not np.isnan(draft[i]) else f"; {method[i]} drafts {d_all[i]:g} by default: "
                                "give spec_draft_tokens for more"))
    out["speculative"], out["spec_draft_tokens"], out["spec_accept_length"] = method, d_all, a_all


_COLUMNS = ["gpu", "llm", "scenario", "scenario_label", "concurrency_from", "concurrency", "request_rate_per_s",
            "prompt_tokens_mean", "output_tokens_mean", "n_gpus", "pipeline_parallel", "tensor_parallel", "precision",
            "expert_precision", "kv_precision", "engine", "engine_version", "level", "expert_parallel", "dp_attention",
            "speculative", "spec_draft_tokens", "spec_accept_length", *(f"gpu_{f}" for f in GPU_FIELDS),
            *(f"llm_{f}" for f in LLM_FIELDS)]


def _not_a_choice(field: str, value: str) -> str:
    """A value outside CHOICES[field]: what is allowed, the closest allowed value, and the precisions' own hints."""
    allowed = CHOICES[field]
    text = f"{shown(value)} is not one of {', '.join(allowed)}"
    if field.endswith("precision") and "+" in value:  # e.g. 'fp8+nvfp4-experts'
        return (f"{text}; a mixture of experts stored at two precisions is given as `precision` (the rest, e.g. "
                "fp8) and `expert_precision` (its routed experts, e.g. nvfp4)")
    if field == "kv_precision" and value in PRECISION_BYTES:
        return f"{text}: a KV cache at {value} is not modelled (the engines here keep it at 8 bits or more)"
    close = difflib.get_close_matches(value, allowed, n=1, cutoff=0.6) if len(value) <= 100 else []
    return f"{text}; did you mean {close[0]!r}?" if close else text


def _precisions(out: dict[str, np.ndarray], rows: np.ndarray, errors: _Errors) -> None:
    """The precisions' defaults and the rules between them and the LLM (in place, on the columns): an
    `expert_precision` needs routed experts (a mixture of experts); left out, the experts are at `precision`; the KV
    cache is at the weights' 16-bit type unless `kv_precision` says otherwise."""
    given = out["expert_precision"] != ""
    with np.errstate(invalid="ignore"):
        moe = out["llm_is_moe"].astype(bool) & (out["llm_active_params_b"] < out["llm_total_params_b"]) \
            & (out["llm_num_experts"] > 1)
    errors.add(given & ~moe & (out["expert_precision"] != out["precision"]), rows, "expert_precision",
               lambda i: f"{out['llm'][i]!r} has no routed experts to size (a dense LLM, or a mixture of experts "
                         "whose active parameters or expert count is not known): leave expert_precision out, its "
                         "weights are all at `precision`")
    out["expert_precision"] = np.where(given, out["expert_precision"], out["precision"]).astype(object)
    defaults = {p: default_kv_precision(p) for p in set(out["precision"])}
    out["kv_precision"] = np.where(out["kv_precision"] != "", out["kv_precision"],
                                   [defaults[p] for p in out["precision"]]).astype(object)


def _replica_shape(out: dict[str, np.ndarray], rows: np.ndarray, errors: _Errors) -> None:
    """The replica-shape rules that need the LLM: expert parallel needs routed experts (a mixture of experts whose
    expert count is known) and divides their count; `speculative: mtp` needs the LLM's multi-token-prediction layers
    (an LLM whose config has none is refused; one whose count is not known, a spec without llm_mtp_layers, is
    answered); on vLLM and SGLang, without DP attention, the tensor-parallel GPUs split the attention heads evenly
    (workload.splits_heads; not checked where the heads are not known)."""
    mtp = out["llm_mtp_layers"].astype(float)
    errors.add((out["speculative"] == "mtp") & (mtp == 0), rows, "speculative",
               lambda i: f"mtp drafts with the LLM's multi-token-prediction layers, and {out['llm'][i]!r} has none "
                         "(mtp_layers 0: its config.json sets no num_nextn_predict_layers, mtp_num_hidden_layers or "
                         "num_mtp_modules): choose eagle or ngram, or leave speculative out")
    ep, experts = out["expert_parallel"], out["llm_num_experts"].astype(float)
    with np.errstate(invalid="ignore"):
        moe = out["llm_is_moe"].astype(bool) & (out["llm_active_params_b"] < out["llm_total_params_b"]) \
            & (experts > 1)
        errors.add((ep > 1) & ~moe, rows, "expert_parallel",
                   lambda i: f"{out['llm'][i]!r} has no routed experts to spread over GPUs (a dense LLM, or a mixture "
                             "of experts whose expert count is not known: give llm_num_experts): leave expert_parallel "
                             "out")
        errors.add((ep > 1) & moe & (experts % ep != 0), rows, "expert_parallel",
                   lambda i: f"{ep[i]:g} does not divide {out['llm'][i]!r}'s {experts[i]:g} routed experts "
                             "(llm_num_experts): each GPU holds the same number of whole experts")
    # vLLM and SGLang shard attention by whole heads (workload.HEAD_SHARDED_ENGINES); DP attention runs it whole
    heads, kv = out["llm_num_attention_heads"].astype(float), out["llm_num_kv_heads"].astype(float)
    tp, stages = out["tensor_parallel"], _stages_phrase(out)
    sharded = np.isin(out["engine"], HEAD_SHARDED_ENGINES) & ~out["dp_attention"] & (tp > 1) & ~np.isnan(heads)

    def unsplit(i: int) -> str:
        kv_heads = "" if np.isnan(kv[i]) or kv[i] == heads[i] else f" and {kv[i]:g} KV heads"
        sizes = ", ".join(map(str, head_split_sizes(heads[i], kv[i])))
        return (f"{tp[i]:g} tensor-parallel GPUs{stages(i)} do not split {out['llm'][i]!r}'s {heads[i]:g} attention "
                f"heads{kv_heads} evenly: {out['engine'][i]} shards attention by whole heads (each GPU the same number "
                f"of query heads, and of KV heads or of copies of one) and refuses it at start-up; tensor-parallel "
                f"sizes it accepts: {sizes} (pipeline_parallel stages for more GPUs, or dp_attention)")

    errors.add(sharded & ~splits_heads(heads, kv, tp), rows, "n_gpus", unsplit)


def _offline_concurrency(out: dict[str, np.ndarray]) -> None:
    """Offline rows get the requests in flight an offline run holds (workload.offline_concurrency); in place, on the
    columns."""
    at = np.flatnonzero(out["scenario"] == "offline")
    if not len(at):
        return
    llm = block_frame({f"llm_{f}": out[f"llm_{f}"][at] for f in LLM_FIELDS})
    total = out["llm_total_params_b"][at]
    experts = physics.moe_expert_params_b(total, out["llm_active_params_b"][at], out["llm_experts_per_token"][at],
                                          out["llm_num_experts"][at])
    weights = physics.weights_gb(total, np.array([PRECISION_BYTES[p] for p in out["precision"][at]]), experts,
                                 np.array([PRECISION_BYTES[p] for p in out["expert_precision"][at]]))
    kv_value = np.array([physics.kv_bytes_per_value(p) for p in out["kv_precision"][at]])
    tokens = out["prompt_tokens_mean"][at] + out["output_tokens_mean"][at]  # the whole request
    kv = kv_bytes_per_sequence(llm, tokens, kv_value)
    if out["dp_attention"][at].any():  # DP attention splits the KV cache by sequence: so many more (or fewer) fit
        kv = kv / replica_fit_ratio(pd.DataFrame({k: v[at] for k, v in out.items()}), tokens)
    # an engine no source measured takes the cap of the release it is answered as (workload.measured_engine)
    versions = per_distinct(lambda e, v: measured_engine(e, v)[1], out["engine"][at], out["engine_version"][at],
                            dtype=object)
    concurrency = out["concurrency"].copy()
    concurrency[at] = offline_concurrency(out["gpu_memory_gb"][at], out["n_gpus"][at], np.asarray(weights, float),
                                          kv.to_numpy(float), out["gpu"][at], versions)
    out["concurrency"] = concurrency
