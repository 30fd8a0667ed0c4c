"""The `wattgpu` command line: predict, recommend a GPU, the case study, catalogs and the HTML report.

Expected errors (an unknown name, a bad field, a missing file) print `error: ...` on stderr and exit with
code 2, never a traceback. Heavy imports (the models' libraries) happen only on paths that need them, so
that `wattgpu recommend` answers in well under two seconds once its predictions are cached.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

import typer

from wattgpu import paths
from wattgpu.errors import WattgpuError
from wattgpu.prediction_cache import TARGET_DIRS, PredictionCache, predict_cached

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__.split("\n\n")[0],
                  pretty_exceptions_show_locals=False)
catalog_app = typer.Typer(no_args_is_help=True, help="GPU and LLM catalogs: list, show, add.")
app.add_typer(catalog_app, name="catalog")

MODELS_DIR = Path("models")  # the registered champions: models/power/ and models/itl/ (register stage)
STANDARD_SCENARIOS = ("offline", "server_low", "server_high")
NEAR_TARGET = 0.10  # close call: predicted ITL this near the target (when meta.json has no LOGO server MdAPE)
CATALOG_ONLY_FIELDS = ("key", "display_name", "aliases", "source_urls", "source_url", "notes")


def fail(message: str) -> None:
    typer.secho(f"error: {message}", fg="red", err=True)
    raise typer.Exit(2)


def user_errors(func):
    """Turn the project's expected errors into `error: ...` + exit 2 (no traceback)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except WattgpuError as exc:
            fail(str(exc))

    return wrapper


# ---------------------------------------------------------------------------------------------------------
# options shared by predict and recommend

ModelsOpt = typer.Option(None, "--models", envvar="WATTGPU_MODELS",
                         help="folder holding power/ and itl/ model folders [default: models/]")
ScenarioOpt = typer.Option(..., "--scenario", help="offline | server_low | server_high | server (needs --rate)")
RateOpt = typer.Option(None, "--rate", help="requests per second (Poisson); server_low/high default 0.017/0.33")
PromptOpt = typer.Option(None, "--prompt-tokens", help="mean prompt tokens per request [default: 14]")
OutputOpt = typer.Option(None, "--output-tokens", help="mean generated tokens per request [default: 220]")
NGpusOpt = typer.Option(None, "--gpus-per-replica", help="GPUs serving one model replica [default: 1]")
JsonOpt = typer.Option(False, "--json", help="machine-readable output")
LlmOpt = typer.Option(None, "--llm", help="a catalog LLM name or alias")
LlmConfigOpt = typer.Option(None, "--llm-config", exists=True, dir_okay=False, help="a Hugging Face config.json")
NoCacheOpt = typer.Option(False, "--no-cache", help="do not read or write the prediction cache")


def _workload(scenario: str, rate: float | None, prompt: float | None, output: float | None,
              n_gpus: int | None) -> dict[str, Any]:
    w = {"scenario": scenario, "request_rate_per_s": rate, "prompt_tokens": prompt, "output_tokens": output,
         "n_gpus": n_gpus}
    return {k: v for k, v in w.items() if v is not None}


def _filled_workload(w: dict[str, Any]) -> dict[str, Any]:
    """The workload with the defaults the predictor applies, for display and the memory rule."""
    from wattgpu.predict import SCENARIOS, WORKLOAD_DEFAULTS

    out = {**WORKLOAD_DEFAULTS, **w}
    if "request_rate_per_s" not in out and SCENARIOS.get(w["scenario"]) is not None:
        out["request_rate_per_s"] = SCENARIOS[w["scenario"]]
    return out


def _describe_workload(w: dict[str, Any]) -> str:
    w = _filled_workload(w)
    rate = f"{w['request_rate_per_s']:g} req/s, " if "request_rate_per_s" in w else "max throughput, "
    n = int(w["n_gpus"])
    return (f"{w['scenario']}: {rate}{w['prompt_tokens']:g} prompt + {w['output_tokens']:g} output tokens per "
            f"request, {n} GPU{'s' if n > 1 else ''} per replica")


# ---------------------------------------------------------------------------------------------------------
# resolving what the user named: catalog names, spec files, config files


def _models_dir(models: Path | None) -> Path:
    folder = paths.resolve(models if models is not None else MODELS_DIR)
    for t in TARGET_DIRS:
        if not (folder / t / "meta.json").exists():
            raise WattgpuError(f"no {t} model at {folder / t}: run `dvc repro` (the register stage writes "
                               "models/power and models/itl) or pass --models DIR")
    return folder


def _versions(folder: Path) -> dict[str, str]:
    """Model versions without loading the estimators: the registry's name, version and alias where the folder
    has a registry.json (the register stage's), else meta.json's version or algorithm (as load_predictor)."""
    registry = folder / "registry.json"
    reg = json.loads(registry.read_text()) if registry.exists() else {}
    out = {}
    for t in TARGET_DIRS:
        meta = json.loads((folder / t / "meta.json").read_text())
        label = str(meta.get("version", meta.get("algorithm", "?")))
        entry = reg.get(t) if isinstance(reg.get(t), dict) else {}
        if entry.get("name") and entry.get("version") is not None:
            if entry.get("champion_version") is not None:  # the register stage keeps the champion in the folder
                label = f"{entry['name']} v{entry['champion_version']} @champion ({label})"
            else:
                alias = f" @{entry['alias']}" if entry.get("alias") else ""
                label = f"{entry['name']} v{entry['version']}{alias} ({label})"
        out[t] = label
    return out


def _training_ranges(folder: Path) -> dict[str, list[float]]:
    """The input ranges both models were trained on (meta.json `training_ranges`; {} for older folders)."""
    from wattgpu import coverage

    metas = [json.loads((folder / t / "meta.json").read_text()) for t in TARGET_DIRS]
    return coverage.narrowest(m.get("training_ranges") or {} for m in metas)


def _itl_error(folder: Path) -> float:
    """The ITL model's server MdAPE on unseen GPUs (meta.json's evaluation figures), as a fraction; else NEAR_TARGET."""
    meta = json.loads((folder / "itl" / "meta.json").read_text())
    mdape = (meta.get("evaluation") or {}).get("server_mdape")
    return float(mdape) / 100 if isinstance(mdape, (int, float)) and mdape > 0 else NEAR_TARGET


_GPU_CATALOGS: dict[str, Any] = {}  # file text -> GpuCatalog: the models' copy is usually the project's file


def _gpu_catalog(path: Path):
    """load_gpu_catalog with libyaml's parser (the pure-Python one costs ~0.15 s a file) and parsed once per text."""
    import yaml

    from wattgpu.catalogs.gpus import parse_gpu_catalog

    text = path.read_text(encoding="utf-8")
    if text not in _GPU_CATALOGS:
        try:
            doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except yaml.YAMLError as exc:
            raise WattgpuError(f"{path}: not valid YAML: {exc}") from None
        _GPU_CATALOGS[text] = parse_gpu_catalog(doc, source=str(path))
    return _GPU_CATALOGS[text]


def _model_catalogs(folder: Path):
    """The GPU and LLM catalogs the models were trained with (the predictor resolves names in these)."""
    from wattgpu.catalogs.llms import load_llm_catalog

    return _gpu_catalog(folder / "power" / "gpus.yaml"), load_llm_catalog(folder / "power" / "llm_catalog.csv")


def _project_gpus():
    return _gpu_catalog(paths.resolve(paths.GPU_CATALOG))


def _project_llms():
    """The project's LLM table (None before `dvc repro catalog`)."""
    from wattgpu.catalogs.llms import load_llm_catalog

    path = paths.resolve(paths.LLM_CATALOG_TABLE)
    return load_llm_catalog(path) if path.exists() else None


def gpu_fields(spec) -> dict[str, Any]:
    """A GpuSpec as request fields (gpu_*), for a GPU the models' catalog does not know."""
    from wattgpu.predict import GPU_SPEC_OPTIONAL, GPU_SPEC_REQUIRED, GPU_SPEC_TEXT

    out = {f"gpu_{k}": getattr(spec, k) for k in [*GPU_SPEC_REQUIRED, *GPU_SPEC_OPTIONAL, *GPU_SPEC_TEXT]
           if getattr(spec, k, None) is not None}
    return {**out, "gpu_name": spec.key}


def llm_fields(spec) -> dict[str, Any]:
    """An LlmSpec as request fields (llm_*), for an LLM the models' catalog does not know."""
    from wattgpu.predict import LLM_CONFIG_OPTIONAL, LLM_CONFIG_REQUIRED, LLM_CONFIG_TEXT

    out = {f"llm_{k}": getattr(spec, k) for k in [*LLM_CONFIG_REQUIRED, *LLM_CONFIG_OPTIONAL, *LLM_CONFIG_TEXT]
           if getattr(spec, k, None) is not None}
    return {**out, "llm_name": spec.key}


def read_gpu_spec_file(path: Path) -> dict[str, Any]:
    """A GPU spec YAML in the catalog's field names (one entry, or `gpus: [entry]`) -> request fields."""
    from wattgpu.predict import GPU_SPEC_OPTIONAL, GPU_SPEC_REQUIRED, GPU_SPEC_TEXT

    entry = _one_entry(_load_yaml(path), path)
    numeric = {**GPU_SPEC_REQUIRED, **GPU_SPEC_OPTIONAL}
    allowed = [*numeric, *GPU_SPEC_TEXT, *CATALOG_ONLY_FIELDS]
    for k in entry:
        if k not in allowed:
            raise WattgpuError(f"{path}: unknown field {k!r}; GPU spec fields are the catalog's: {', '.join(allowed)}")
    missing = [k for k in GPU_SPEC_REQUIRED if entry.get(k) is None]
    if missing:
        raise WattgpuError(f"{path}: field {missing[0]!r} is required (needs {', '.join(GPU_SPEC_REQUIRED)})")
    out = {f"gpu_{k}": v for k, v in entry.items() if (k in numeric or k in GPU_SPEC_TEXT) and v is not None}
    return {**out, "gpu_name": str(entry.get("key") or entry.get("display_name") or path.stem)}


def _load_yaml(path: Path):
    import yaml

    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise WattgpuError(f"{path}: cannot read: {exc}") from None
    except yaml.YAMLError as exc:
        raise WattgpuError(f"{path}: not valid YAML: {exc}") from None


def _one_entry(doc, path: Path) -> dict[str, Any]:
    entries = _entries(doc, path)
    if len(entries) != 1:
        raise WattgpuError(f"{path}: expected one GPU entry, found {len(entries)}")
    return entries[0]


def _entries(doc, path: Path) -> list[dict[str, Any]]:
    """A YAML document holding one entry (a mapping) or `gpus: [entry, ...]`."""
    if isinstance(doc, dict) and set(doc) == {"gpus"}:
        doc = doc["gpus"]
    items = doc if isinstance(doc, list) else [doc]
    if not items or not all(isinstance(e, dict) for e in items):
        raise WattgpuError(f"{path}: expected a mapping of GPU fields (or `gpus:` with a list of them)")
    return items


def read_llm_config(path: Path, name: str | None = None):
    """A Hugging Face config.json -> (key, LlmSpec); the key is `name`, else the config's `_name_or_path`."""
    from wattgpu.catalogs.llms import llm_spec_from_hf_config
    from wattgpu.errors import CatalogError

    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise WattgpuError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise WattgpuError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(config, dict):
        raise WattgpuError(f"{path}: a config.json holds one JSON object")
    key = str(name or config.get("_name_or_path") or f"custom LLM ({path.name})")
    try:
        return key, config, llm_spec_from_hf_config(key, config, None, f"config.json: {path}")
    except CatalogError as exc:
        raise WattgpuError(f"{path}: {exc}") from None


def resolve_gpu(name: str, model_gpus, project_gpus) -> tuple[dict[str, Any], Any, str]:
    """(request fields, GpuSpec, origin): by name where the models know it, else the project catalog's spec."""
    from wattgpu.errors import UnknownNameError

    try:
        key = model_gpus.resolve(name)
        return {"gpu": key}, model_gpus.get(key), "catalog"
    except UnknownNameError:
        spec = project_gpus.get(name)  # raises with suggestions from the (larger) project catalog
        return gpu_fields(spec), spec, "spec from data/catalogs/gpus.yaml (newer than the models)"


def resolve_llm(name: str, model_llms, project_llms) -> tuple[dict[str, Any], Any, str]:
    """(request fields, LlmSpec, origin): the models' catalog, else the project table, else its config.json."""
    from wattgpu.errors import UnknownNameError

    try:
        key = model_llms.resolve(name)
        return {"llm": key}, model_llms.get(key), "catalog"
    except UnknownNameError as exc:
        if project_llms is not None and name in project_llms:
            spec = project_llms.get(name)
            return llm_fields(spec), spec, "config from data/processed/llm_catalog.csv (newer than the models)"
        path = paths.resolve(paths.LLM_CONFIG_DIR) / f"{name.replace('/', '--', 1)}.json"
        if "/" in name and path.exists():
            _, _, spec = read_llm_config(path, name)
            return llm_fields(spec), spec, f"config from {paths.LLM_CONFIG_DIR / path.name}"
        raise exc from None


def _gpu_choice(gpu: str | None, gpu_spec: Path | None, model_gpus, project_gpus):
    if (gpu is None) == (gpu_spec is None):
        raise WattgpuError("give exactly one of --gpu NAME or --gpu-spec FILE.yaml")
    if gpu is not None:
        return resolve_gpu(gpu, model_gpus, project_gpus)
    fields = read_gpu_spec_file(gpu_spec)
    return fields, fields, f"spec file {gpu_spec}"


def _llm_choice(llm: str | None, llm_config: Path | None, model_llms, project_llms):
    if (llm is None) == (llm_config is None):
        raise WattgpuError("give exactly one of --llm NAME or --llm-config config.json")
    if llm is not None:
        return resolve_llm(llm, model_llms, project_llms)
    _, _, spec = read_llm_config(llm_config)
    return llm_fields(spec), spec, f"config file {llm_config}"


def _scenario_variants(req: dict[str, Any]) -> list[dict[str, Any]]:
    """The same request in the standard scenarios (none when it sets its own request rate)."""
    if "request_rate_per_s" in req:
        return []
    return [{**req, "scenario": s} for s in STANDARD_SCENARIOS]


# ---------------------------------------------------------------------------------------------------------
# predict


def _memory_line(gpu_spec, llm_spec, w: dict[str, Any]) -> str:
    """The planner's memory rule for one GPU, as one line."""
    import pandas as pd

    from wattgpu.planner import LlmSize, MemoryRule, memory_fit

    mem = gpu_spec["gpu_memory_gb"] if isinstance(gpu_spec, dict) else gpu_spec.memory_gb
    if hasattr(llm_spec, "kv_cache_bytes_per_token"):
        size = LlmSize(llm_spec.total_params_b, llm_spec.kv_cache_bytes_per_token())
    else:
        return ""
    wf = _filled_workload(w)
    fit = memory_fit(pd.DataFrame({"gpu": ["x"], "memory_gb": [float(mem)]}), size,
                     wf["prompt_tokens"] + wf["output_tokens"], int(wf["n_gpus"]), MemoryRule()).iloc[0]
    if fit["fits"]:
        return f"fits: needs {fit['need_gb']:.1f} GB of {fit['usable_gb']:.1f} GB usable ({MemoryRule().describe()})"
    return f"DOES NOT FIT: {fit['reason']}"


@app.command("predict")
@user_errors
def predict_cmd(
    gpu: str = typer.Option(None, "--gpu", help="a catalog GPU name or alias"),
    gpu_spec: Path = typer.Option(None, "--gpu-spec", exists=True, dir_okay=False,
                                  help="a GPU spec YAML in the catalog's field names (data/catalogs/gpus.yaml)"),
    llm: str = LlmOpt,
    llm_config: Path = LlmConfigOpt,
    scenario: str = typer.Option(None, "--scenario", help="offline | server_low | server_high | server (needs --rate)"),
    rate: float = RateOpt,
    prompt_tokens: float = PromptOpt,
    output_tokens: float = OutputOpt,
    gpus_per_replica: int = NGpusOpt,
    as_json: bool = JsonOpt,
    models: Path = ModelsOpt,
    input_csv: Path = typer.Option(None, "--input", exists=True, dir_okay=False,
                                   help="batch: a CSV of requests (columns as documented in wattgpu.predict)"),
    output_csv: Path = typer.Option(None, "--output", help="batch: where to write the predictions CSV"),
    no_cache: bool = NoCacheOpt,
) -> None:
    """Predict mean power (W per GPU), ITL (ms), tokens/s and energy per token (J) for one GPU, LLM and workload."""
    folder = _models_dir(models)
    if input_csv is not None or output_csv is not None:
        if input_csv is None or output_csv is None:
            raise WattgpuError("batch mode needs both --input rows.csv and --output preds.csv")
        if any(v is not None for v in (gpu, gpu_spec, llm, llm_config, scenario)):
            raise WattgpuError("--input takes GPU, LLM and scenario from its columns; drop --gpu/--llm/--scenario")
        _predict_batch(folder, input_csv, output_csv)
        return
    if scenario is None:
        raise WattgpuError("--scenario is required (offline | server_low | server_high | server)")
    model_gpus, model_llms = _model_catalogs(folder)
    g_fields, g_spec, g_origin = _gpu_choice(gpu, gpu_spec, model_gpus, _project_gpus())
    l_fields, l_spec, l_origin = _llm_choice(llm, llm_config, model_llms,
                                             _project_llms() if llm is not None else None)
    w = _workload(scenario, rate, prompt_tokens, output_tokens, gpus_per_replica)
    req = {**g_fields, **l_fields, **w}
    row = predict_cached(folder, [req], use_cache=not no_cache, extra=_scenario_variants(req))[0]
    versions = _versions(folder)
    memory = _memory_line(g_spec, l_spec, w)
    from wattgpu import coverage
    from wattgpu.predict import validate

    ranges = _training_ranges(folder)
    extrapolation = coverage.outside(validate([req], model_gpus, model_llms).iloc[0], ranges) if ranges else None
    if as_json:
        typer.echo(json.dumps({"request": req, "workload": _filled_workload(w), "prediction": row,
                               "memory": memory, "extrapolation": extrapolation, "models": versions},
                              indent=2, default=str))
        return
    lines = [
        ("GPU", f"{row['gpu']}  ({g_origin})"),
        ("LLM", f"{row['llm']}  ({l_origin})"),
        ("workload", _describe_workload(w)),
        ("power", f"{row['power_w']:.1f} W per GPU"),
        ("ITL", f"{row['itl_ms']:.2f} ms  ({row['tokens_per_s']:.1f} tokens/s per request stream)"),
        ("throughput", f"{row['system_tokens_per_s']:.1f} tokens/s in all"),
        ("energy", f"{row['energy_per_token_j']:.3g} J per generated token"),
        ("memory", memory),
        ("coverage", "not recorded with these models" if extrapolation is None else
         ("EXTRAPOLATING: " + "; ".join(extrapolation)) if extrapolation
         else "inside the range of the measured GPUs, LLMs and workloads"),
        ("models", ", ".join(f"{k}: {v}" for k, v in versions.items())),
    ]
    for k, v in lines:
        if v:
            typer.echo(f"{k:<11} {v}")


def _predict_batch(folder: Path, input_csv: Path, output_csv: Path, chunk: int = 256) -> None:
    import pandas as pd
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from wattgpu import coverage
    from wattgpu.model_store import load_predictor
    from wattgpu.predict import validate

    try:
        frame = pd.read_csv(input_csv)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise WattgpuError(f"{input_csv}: not a readable CSV: {exc}") from None
    predictor = load_predictor(folder / "power", folder / "itl")
    records = _known_to_models(frame.to_dict("records"), predictor)
    checked = validate(records, predictor.gpus, predictor.llms)  # every row checked before any work; errors name it
    parts = []
    columns = (TextColumn("predicting"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("rows", total=len(records))
        for start in range(0, len(records), chunk):
            parts.append(predictor.predict(records[start:start + chunk]))
            progress.advance(task, min(chunk, len(records) - start))
    pred = pd.concat(parts, ignore_index=True)
    out = frame.copy()
    out["resolved_gpu"], out["resolved_llm"] = pred["gpu"].to_numpy(), pred["llm"].to_numpy()
    for c in pred.columns.drop(["gpu", "llm", "scenario"]):
        out[c] = pred[c].to_numpy()
    ranges = _training_ranges(folder)
    out["extrapolation"] = ["; ".join(coverage.outside(r, ranges)) for _, r in checked.iterrows()]
    for t, v in predictor.versions.items():
        out[f"model_{t}"] = v
    output_csv = Path(output_csv)
    output_csv.parent.mkdir(parents=True, exist_ok=True)
    out.to_csv(output_csv, index=False, float_format="%.6g", lineterminator="\n")
    typer.echo(f"wrote {len(out)} predictions to {output_csv} "
               f"(models: {', '.join(f'{k}: {v}' for k, v in predictor.versions.items())})", err=True)


def _known_to_models(records: list[dict], predictor) -> list[dict]:
    """Rows naming a GPU or LLM the models' catalogs lack but the project's has: send its spec instead."""
    project_gpus, project_llms = _project_gpus(), _project_llms()
    out = []
    for r in records:
        r = dict(r)
        g, l = r.get("gpu"), r.get("llm")
        if isinstance(g, str) and g not in predictor.gpus and g in project_gpus:
            r.pop("gpu")
            r.update(gpu_fields(project_gpus.get(g)))
        if isinstance(l, str) and l not in predictor.llms and project_llms is not None and l in project_llms:
            r.pop("llm")
            r.update(llm_fields(project_llms.get(l)))
        out.append(r)
    return out


# ---------------------------------------------------------------------------------------------------------
# recommend


@app.command("recommend")
@user_errors
def recommend_cmd(
    llm: str = LlmOpt,
    llm_config: Path = LlmConfigOpt,
    scenario: str = ScenarioOpt,
    max_itl_ms: float = typer.Option(..., "--max-itl-ms", help="latency target: mean inter-token latency (ms)"),
    gpus: str = typer.Option(None, "--gpus", help="comma-separated GPU names to consider [default: the whole catalog]"),
    margin_pct: float = typer.Option(0.0, "--itl-margin-pct",
                                     help="safety margin: require predicted ITL <= target x (1 - margin/100)"),
    rate: float = RateOpt,
    prompt_tokens: float = PromptOpt,
    output_tokens: float = OutputOpt,
    gpus_per_replica: int = NGpusOpt,
    as_json: bool = JsonOpt,
    models: Path = ModelsOpt,
    no_cache: bool = NoCacheOpt,
) -> None:
    """Rank the GPUs that can hold the LLM by predicted energy per token, among those meeting --max-itl-ms."""
    import pandas as pd

    from wattgpu import planner

    if not max_itl_ms > 0:
        raise WattgpuError(f"--max-itl-ms must be positive, got {max_itl_ms:g}")
    if not 0 <= margin_pct < 100:
        raise WattgpuError(f"--itl-margin-pct must be in [0, 100), got {margin_pct:g}")
    folder = _models_dir(models)
    model_gpus, model_llms = _model_catalogs(folder)
    project_gpus = _project_gpus()
    l_fields, l_spec, l_origin = _llm_choice(llm, llm_config, model_llms, _project_llms() if llm else None)
    names = [n.strip() for n in gpus.split(",") if n.strip()] if gpus else project_gpus.keys
    if not names:
        raise WattgpuError("--gpus names no GPU")
    keys = list(dict.fromkeys(project_gpus.resolve(n) for n in names))
    specs = [project_gpus.get(k) for k in keys]
    w = _workload(scenario, rate, prompt_tokens, output_tokens, gpus_per_replica)
    from wattgpu import coverage
    from wattgpu.predict import validate

    wf = _filled_workload(w)
    size = planner.LlmSize(l_spec.total_params_b, l_spec.kv_cache_bytes_per_token())
    fit = planner.memory_fit(pd.DataFrame({"gpu": keys, "memory_gb": [s.memory_gb for s in specs]}), size,
                             wf["prompt_tokens"] + wf["output_tokens"], int(wf["n_gpus"]))
    requests, labels = [], []
    for key, ok in zip(keys, fit["fits"]):
        if ok:
            g_fields, _, _ = resolve_gpu(key, model_gpus, project_gpus)
            requests.append({**g_fields, **l_fields, **w})
            labels.append(key)
    # A bad workload fails here, before loading any model; the rows also tell what lies outside the training data.
    checked = validate(requests, model_gpus, model_llms) if requests else None
    extra = [v for r in requests for v in _scenario_variants(r)]
    rows = predict_cached(folder, requests, use_cache=not no_cache, extra=extra) if requests else []
    pred = pd.DataFrame(rows, columns=["gpu", *planner.PREDICTION_COLUMNS[1:]]).assign(gpu=labels)
    rec = planner.recommend(pred, fit, max_itl_ms, margin_pct / 100)
    itl_error = _itl_error(folder)
    close = planner.near_target(rec.table, max_itl_ms, itl_error)
    versions = _versions(folder)
    llm_name = l_spec.key
    ranges = _training_ranges(folder)  # {} for folders without ranges: no notes
    gpu_notes, shared = {}, []
    if checked is not None:
        gpu_notes = {k: ns for k, (_, r) in zip(labels, checked.iterrows())
                     if (ns := coverage.outside(r, ranges, coverage.GPU_COLUMNS))}
        others = tuple(c for c in coverage.COLUMNS if c not in coverage.GPU_COLUMNS)
        shared = coverage.outside(checked.iloc[0], ranges, others)
    if as_json:
        table = rec.table.astype(object).where(rec.table.notna(), None)
        records = table.to_dict("records")
        typer.echo(json.dumps({
            "llm": llm_name, "llm_origin": l_origin, "workload": wf, "max_itl_ms": max_itl_ms,
            "itl_margin_pct": margin_pct,
            "memory_rule": planner.MemoryRule().describe(), "models": versions, "pick": rec.pick,
            "summary": rec.summary, "near_target": close, "itl_error_pct": round(100 * itl_error, 1),
            "extrapolation": {"workload_and_llm": shared, "gpus": gpu_notes},
            "ranking": [r for r in records if r["status"] in (planner.STATUS_PICK, planner.STATUS_OK)],
            "excluded": [r for r in records if r["status"] not in (planner.STATUS_PICK, planner.STATUS_OK)],
        }, indent=2, default=str))
        return
    _print_recommendation(rec, llm_name, w, versions, close, itl_error, shared, gpu_notes)


def _print_recommendation(rec, llm_name: str, w: dict[str, Any], versions: dict[str, str], close: list[str],
                          itl_error: float, shared: list[str], gpu_notes: dict[str, list[str]]) -> None:
    import pandas as pd
    from rich.console import Console
    from rich.table import Table

    from wattgpu import planner

    def num(v, spec: str) -> str:
        return "" if pd.isna(v) else format(v, spec)

    margin = f" with a {100 * rec.margin:g} % safety margin" if rec.margin else ""
    table = Table(title=f"{llm_name} | {_describe_workload(w)} | ITL target {rec.max_itl_ms:g} ms{margin}",
                  title_justify="left")
    for col, just in (("#", "right"), ("GPU", "left"), ("status", "left"), ("J/token", "right"), ("W/GPU", "right"),
                      ("ITL ms", "right"), ("margin", "right"), ("tok/s", "right"), ("GB need/usable", "right"),
                      ("reason", "left")):
        table.add_column(col, justify=just, overflow="fold")
    styles = {planner.STATUS_PICK: "bold green", planner.STATUS_OK: "", planner.STATUS_SLOW: "yellow",
              planner.STATUS_NO_FIT: "dim"}
    for _, r in rec.table.iterrows():
        flag = " *" if r["gpu"] in close else ""
        table.add_row(
            "" if pd.isna(r["rank"]) else str(r["rank"]), r["gpu"], r["status"] + flag,
            num(r["energy_per_token_j"], ".3g"), num(r["power_w"], ".0f"), num(r["itl_ms"], ".1f"),
            num(r["itl_margin_pct"], "+.0f") + ("%" if r["fits"] else ""), num(r["tokens_per_s"], ".0f"),
            f"{r['need_gb']:.1f}/{r['usable_gb']:.1f}", r["reason"], style=styles.get(r["status"], ""))
    console = Console(width=max(150, Console().width))
    console.print(table)
    console.print(rec.summary)
    if close:
        console.print(f"* predicted ITL within {100 * itl_error:.0f} % of the target (the ITL model's server MdAPE on "
                      f"unseen GPUs): {', '.join(close)}; the verdict could go either way.")
    if shared:
        console.print(f"EXTRAPOLATING for every GPU (outside the measured data): {'; '.join(shared)}.")
    if gpu_notes:
        console.print("extrapolated GPUs (specs outside the range of the measured GPUs'): "
                      + "; ".join(f"{k} ({', '.join(ns)})" for k, ns in gpu_notes.items()) + ".")
    console.print(f"memory rule: {planner.MemoryRule().describe()}.  J/token = W/GPU x GPUs / tokens per s "
                  "(server: rate x output tokens; offline: 1 / ITL).")
    console.print("models: " + ", ".join(f"{k}: {v}" for k, v in versions.items()))


@app.command("precompute")
@user_errors
def precompute_cmd(models: Path = ModelsOpt) -> None:
    """Predict every catalog GPU x LLM x standard scenario (default workload) once per model version, so that
    `wattgpu predict` and `recommend` answer from the cache without loading the models."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    folder = _models_dir(models)
    model_gpus, model_llms = _model_catalogs(folder)
    project_gpus = _project_gpus()
    gpu_requests = [resolve_gpu(k, model_gpus, project_gpus)[0] for k in project_gpus.keys]
    grid = [{**g, "llm": llm, "scenario": s} for g in gpu_requests for llm in model_llms.keys for s in STANDARD_SCENARIOS]
    cache = PredictionCache(folder)
    todo = cache.missing(grid)
    columns = (TextColumn("predicting"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("grid", total=len(todo))
        cache.fill(todo, progress=lambda n: progress.advance(task, n))
    typer.echo(f"{len(grid)} predictions ({len(todo)} new) cached in {cache.path}")


# ---------------------------------------------------------------------------------------------------------
# case study and report


@app.command("casestudy")
@user_errors
def casestudy_cmd(
    llm: str = typer.Option("meta-llama/Llama-3.1-8B-Instruct", "--llm", help="a catalog LLM name or alias"),
    max_itl_ms: float = typer.Option(25.0, "--max-itl-ms", help="latency target for the 'meets' columns (ms)"),
    markdown: bool = typer.Option(False, "--markdown", help="print markdown (as pasted in the README)"),
    models: str = typer.Option(None, "--models",
                               help="comma-separated models, or 'all' [default: nested_selection,paper_replica]"),
) -> None:
    """The paper's case study: measured vs leave-one-GPU-out predicted power and ITL in the server scenarios."""
    from wattgpu import casestudy

    chosen = [m.strip() for m in models.split(",") if m.strip()] if models else None
    table, key = _case_table(llm, max_itl_ms, models=chosen)
    if markdown:
        typer.echo(casestudy.to_markdown(table, max_itl_ms))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(150, Console().width))
    for model, t in table.groupby("model", sort=False):
        rt = Table(title=f"{key}: {model}, each GPU predicted by a model trained without it (LOGO)", title_justify="left")
        for c in ("GPU", "scenario", "W meas.", "W pred.", "ITL ms meas.", "ITL ms pred.", "J/tok meas.",
                  "J/tok pred.", f"<= {max_itl_ms:g} ms meas./pred."):
            rt.add_column(c, justify="left" if c in ("GPU", "scenario") else "right")
        for _, r in t.iterrows():
            rt.add_row(r["gpu"], r["scenario"], f"{r['power_measured_w']:.0f}", f"{r['power_predicted_w']:.0f}",
                       f"{r['itl_measured_ms']:.1f}", f"{r['itl_predicted_ms']:.1f}", f"{r['energy_measured_j']:.2f}",
                       f"{r['energy_predicted_j']:.2f}",
                       f"{'yes' if r['meets_measured'] else 'no'} / {'yes' if r['meets_predicted'] else 'no'}")
        console.print(rt)
        for v in casestudy.verdicts(t, max_itl_ms):
            console.print(f"- {v.claim}: measured {v.measured}, predicted {v.predicted} -> {v.verdict}")


def _case_table(llm: str, max_itl_ms: float, scenarios: tuple[str, ...] = ("server_low", "server_high"),
                models: list[str] | None = None):
    from wattgpu import casestudy
    from wattgpu.io import read_table

    measurements = paths.resolve(paths.MEASUREMENTS)
    if not measurements.exists():
        raise WattgpuError(f"{measurements} not found: run `dvc repro ingest` first")
    pred = casestudy.load_logo_predictions()
    if pred.empty:
        raise WattgpuError("no LOGO predictions under reports/: run `dvc repro evaluate@logo` first")
    pred = casestudy.choose_models(pred, models)
    llms = _project_llms()
    key = llms.resolve(llm) if llms is not None else llm
    table = casestudy.case_table(pred, read_table(measurements), key, max_itl_ms, scenarios)
    if table.empty:
        raise WattgpuError(f"no LOGO predictions for {key!r} in {', '.join(scenarios)} (it was not measured there)")
    return table, key


@app.command("report")
@user_errors
def report_cmd(
    output: Path = typer.Option(Path("reports/report.html"), "--output", help="where to write the HTML file"),
    llm: str = typer.Option("meta-llama/Llama-3.1-8B-Instruct", "--llm", help="LLM for the GPU rankings"),
    max_itl_ms: float = typer.Option(25.0, "--max-itl-ms", help="latency target in the case-study section (ms)"),
) -> None:
    """Write a self-contained HTML report (tables, plots, leaderboard, GPU rankings); works offline."""
    from wattgpu import report

    try:
        case, key = _case_table(llm, max_itl_ms, ("offline", "server_low", "server_high"))
    except WattgpuError as exc:
        case, key = None, f"{llm} ({exc})"
    out = report.write_report(paths.resolve(output), case, key, max_itl_ms)
    typer.echo(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, self-contained: open it in any browser, offline)")


# ---------------------------------------------------------------------------------------------------------
# catalogs


@app.command("data-report")
def data_report() -> None:
    """Print the ingest stage's data report (rows kept / quarantined per source and reason)."""
    path = paths.resolve(paths.DATA_REPORT).with_suffix(".md")
    if not path.exists():
        fail(f"{path} not found: run `dvc repro ingest` first")
    typer.echo(path.read_text())


@app.command("results")
def results_cmd() -> None:
    """The headline: nested MdAPE of what the search registers beside the paper replica (reports/search/
    verdict.json), and the registered champions (models/registry.json)."""
    from rich.console import Console
    from rich.table import Table

    verdict_file = paths.resolve(paths.REPORTS_DIR / "search" / "verdict.json")
    if not verdict_file.exists():
        fail(f"{verdict_file} not found: run `dvc repro` (stage search_leaderboard) first")
    verdict = json.loads(verdict_file.read_text())
    table = Table(title="Nested MdAPE: rows no training, tuning or selection saw", title_justify="left")
    for col in ("target", "regime", "scenario", "nested selection", "paper replica", "beats replica"):
        table.add_column(col, justify="left" if col in ("target", "regime", "scenario") else "right")
    for target in ("power", "itl"):
        for regime, by in verdict.get(target, {}).items():
            for scen, c in by.items():
                table.add_row(target, regime.upper(), scen, f"{c['nested_mdape']:.1f} %", f"{c['replica_mdape']:.1f} %",
                              "yes" if c["beats_replica"] else "NO")
    console = Console(width=max(100, Console().width))
    console.print(table)
    registry_file = paths.resolve(Path("models") / "registry.json")
    if registry_file.exists():
        for target, e in json.loads(registry_file.read_text()).items():
            console.print(f"{e['name']}: champion v{e['champion_version']} (in models/{target}/); "
                          f"newest v{e['version']}: {e['decision']}")
    console.print("every figure: `dvc metrics show`; every algorithm: reports/search/leaderboard.md")


def _gpus():
    try:
        return _project_gpus()
    except WattgpuError as exc:
        fail(str(exc))


def _llms():
    llms = _project_llms()
    if llms is None:
        fail(f"{paths.resolve(paths.LLM_CATALOG_TABLE)} not found: run `dvc repro catalog` first")
    return llms


@catalog_app.command("list")
def catalog_list(kind: str = typer.Argument("gpus", help="gpus or llms")) -> None:
    """List catalog entries with their key figures."""
    from rich.console import Console
    from rich.table import Table

    if kind not in ("gpus", "llms"):
        fail(f"kind must be 'gpus' or 'llms', not {kind!r}")
    frame = (_gpus() if kind == "gpus" else _llms()).to_frame()
    cols = (["key", "vendor", "architecture", "release_year", "tdp_w", "memory_gb", "memory_bandwidth_gb_s",
             "fp16_tensor_tflops"] if kind == "gpus" else
            ["key", "family", "total_params_b", "active_params_b", "num_layers", "hidden_size", "num_kv_heads", "is_moe"])
    table = Table(title=f"{len(frame)} {kind}")
    for c in cols:
        table.add_column(c, overflow="fold")
    for _, r in frame[cols].iterrows():
        table.add_row(*["" if v is None or v != v else str(v) for v in r])
    Console(width=200).print(table)


@catalog_app.command("show")
def catalog_show(name: str, as_json: bool = typer.Option(False, "--json", help="machine-readable output")) -> None:
    """Show one GPU or LLM (looked up by name or alias) with every field and its source."""
    from wattgpu.errors import UnknownNameError

    try:
        spec = _gpus().get(name)
    except UnknownNameError as gpu_err:
        try:
            spec = _llms().get(name)
        except UnknownNameError as llm_err:
            hints = [*gpu_err.suggestions, *llm_err.suggestions]
            hint = f"; did you mean {', '.join(repr(h) for h in hints)}?" if hints else ""
            fail(f"no GPU or LLM named {name!r}{hint}")
    except WattgpuError as exc:
        fail(str(exc))
    data = spec.model_dump(mode="json")
    if as_json:
        typer.echo(json.dumps(data, indent=2))
        return
    width = max(len(k) for k in data)
    for k, v in data.items():
        typer.echo(f"{k.ljust(width)}  {v}")


@catalog_app.command("add-gpu")
@user_errors
def catalog_add_gpu(
    spec_file: Path = typer.Argument(..., exists=True, dir_okay=False,
                                     help="YAML: one entry in the catalog's field names, or `gpus: [entries]`"),
    catalog: Path = typer.Option(None, "--catalog", help="the GPU catalog to extend [default: data/catalogs/gpus.yaml]"),
) -> None:
    """Validate GPU entries and append them to the GPU catalog (its comments are kept)."""
    import yaml

    from wattgpu.catalogs.gpus import GpuSpec, load_gpu_catalog

    path = paths.resolve(catalog if catalog is not None else paths.GPU_CATALOG)
    current = load_gpu_catalog(path)
    new = []
    for i, entry in enumerate(_entries(_load_yaml(spec_file), spec_file)):
        label = str(entry.get("key") or f"{spec_file.name} #{i + 1}")
        spec = GpuSpec.from_mapping(entry, label)
        current = current.with_spec(spec)  # a key or alias already in the catalog is a CatalogError naming it
        new.append(spec)
    original = path.read_text(encoding="utf-8")
    text = yaml.safe_dump([s.to_mapping() for s in new], sort_keys=False, allow_unicode=True, width=100)
    addition = f"# ---------------------------------------------------------------- added by `wattgpu catalog add-gpu`\n{text}"
    path.write_text(original + ("" if original.endswith("\n") else "\n") + addition, encoding="utf-8")
    try:
        reloaded = load_gpu_catalog(path)
        if reloaded.keys != current.keys:
            raise WattgpuError(f"{path}: the appended entries did not read back as written")
    except Exception:
        path.write_text(original, encoding="utf-8")  # leave the catalog as it was
        raise
    for s in new:
        typer.echo(f"added {s.key!r} to {path} ({len(reloaded)} GPUs)")
    typer.echo("`wattgpu predict/recommend` use its spec now; `dvc repro` picks it up (catalog stage; models are "
               "retrained when their inputs change).")


@catalog_app.command("add-llm")
@user_errors
def catalog_add_llm(
    config_file: Path = typer.Argument(..., exists=True, dir_okay=False, help="a Hugging Face config.json"),
    name: str = typer.Option(None, "--name", help="org/model [default: the config's _name_or_path]"),
) -> None:
    """Validate a config.json and copy it to data/catalogs/llm_configs/<org>--<name>.json."""
    from wattgpu.catalogs.llms import read_config_file

    key, _, _ = read_llm_config(config_file, name)
    org, sep, model = key.partition("/")
    if not sep or not org or not model or "/" in model or "--" in org or org.startswith("."):
        raise WattgpuError(f"LLM name {key!r} must look like org/model (pass --name org/model)")
    folder = paths.resolve(paths.LLM_CONFIG_DIR)
    dest = folder / f"{org}--{model}.json"
    if dest.exists():
        raise WattgpuError(f"{key!r} is already in the catalog ({dest})")
    known = _project_llms()
    if known is not None and key in known:
        raise WattgpuError(f"{key!r} is already in the catalog (as {known.resolve(key)!r})")
    data = config_file.read_bytes()
    folder.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)
    try:
        read_config_file(dest)  # the catalog stage's own reader: file name and _wattgpu keys
        spec = read_llm_config(dest, key)[2]
        if known is not None:
            known.with_spec(spec)  # an alias already used by another LLM is a CatalogError naming it
    except Exception:
        dest.unlink()
        raise
    typer.echo(f"added {key!r} as {dest}: {spec.total_params_b:.2f} B parameters (computed from the config), "
               f"{spec.num_layers} layers, family {spec.family}")
    typer.echo("`dvc repro` picks it up: the catalog stage adds it to data/processed/llm_catalog.csv (to pin a "
               "published parameter count, add it to data/catalogs/llm_published_params.yaml).")


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
