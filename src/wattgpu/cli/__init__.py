"""The `wattgpu` command line: predict, recommend a GPU, the case study, catalogs, results and the HTML report.

A thin layer: each command parses its options and calls one module (wattgpu.planning, wattgpu.catalogs.edit,
wattgpu.reporting), imported by the command that needs it: `wattgpu --help` and a question answered before
(wattgpu.planning.answers) import no pandas, catalog or model. Expected errors print `error: ...` on stderr and exit
with code 2, never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from wattgpu import paths, workload
from wattgpu.cli.options import (
    Commands,
    ConcOpt,
    DpAttnOpt,
    EngineOpt,
    EpOpt,
    ExpertPrecOpt,
    JsonOpt,
    KvPrecOpt,
    LlmConfigOpt,
    LlmOpt,
    ModelsOpt,
    NGpusOpt,
    NoCacheOpt,
    OutputOpt,
    PpOpt,
    PrecOpt,
    PromptOpt,
    RateOpt,
    ScenarioHelp,
    SpecAcceptOpt,
    SpecDraftOpt,
    SpecOpt,
    VersionOpt,
    engine_flag,
    user_errors,
    workload_of,
)
from wattgpu.errors import WattgpuError
from wattgpu.planning import answers
from wattgpu.stages.worker_cli import search_app

app = typer.Typer(cls=Commands, no_args_is_help=True, add_completion=False, help=__doc__.split("\n\n")[0],
                  pretty_exceptions_show_locals=False, context_settings={"token_normalize_func": engine_flag})
catalog_app = typer.Typer(cls=Commands, no_args_is_help=True, help="GPU and LLM catalogs: list, show, add.")
app.add_typer(catalog_app, name="catalog")
app.add_typer(search_app, name="search", cls=Commands)


@app.command("predict")
@user_errors
@answers.remembered("predict", skip=lambda o: o["no_cache"] or o["input_csv"] is not None
                    or o["output_csv"] is not None)
def predict_cmd(
    gpu: str = typer.Option(None, "--gpu", help="a catalog GPU name or alias"),
    gpu_spec: Path = typer.Option(None, "--gpu-spec", exists=True, dir_okay=False,
                                  help="a GPU spec YAML in the catalog's field names (data/catalogs/gpus.yaml)"),
    llm: str = LlmOpt, llm_config: Path = LlmConfigOpt,
    scenario: str = typer.Option(None, "--scenario", help=ScenarioHelp), concurrency: float = ConcOpt,
    rate: float = RateOpt, prompt_tokens: float = PromptOpt, output_tokens: float = OutputOpt,
    gpus_per_replica: int = NGpusOpt, pipeline_parallel: int = PpOpt, precision: str = PrecOpt,
    expert_precision: str = ExpertPrecOpt, kv_precision: str = KvPrecOpt, engine: str = EngineOpt,
    engine_version: str = VersionOpt, expert_parallel: int = EpOpt, dp_attention: bool = DpAttnOpt,
    speculative: str = SpecOpt, spec_draft_tokens: int = SpecDraftOpt, spec_accept_length: float = SpecAcceptOpt,
    as_json: bool = JsonOpt, models: Path = ModelsOpt,
    input_csv: Path = typer.Option(None, "--input", exists=True, dir_okay=False,
                                   help="batch: a CSV of requests (columns as documented in wattgpu.request)"),
    output_csv: Path = typer.Option(None, "--output", help="batch: predictions CSV (rejected rows: <output>.rejected.csv)"),
    levels: list[float] = typer.Option(None, "--level", help="prediction interval level, in percent (80) or as a "
                                       "fraction (0.8), 50-99; repeat for several [default: 80 and 90]"),
    no_cache: bool = NoCacheOpt,
) -> str | None:
    """Predict mean power (W per GPU), ITL (ms), tokens/s and energy per token (J) for one GPU, LLM and workload,
    each with its prediction interval at every --level."""
    from wattgpu.planning import planner, resolve, service
    from wattgpu.planning.models import ModelSet
    from wattgpu.reporting import console

    fractions = [planner.level_fraction(v, "--level") for v in levels or ()] or list(planner.DEFAULT_LEVELS)
    model_set = ModelSet.load(models)
    if input_csv is not None or output_csv is not None:
        service.check_batch_options(input_csv, output_csv, named=(gpu, gpu_spec, llm, llm_config, scenario),
                                    levels=levels)
        with console.progress_bar("predicting") as advance:
            done = service.predict_csv(model_set, input_csv, output_csv, progress=advance)
        return typer.echo(done, err=True)
    w = workload_of(locals())
    answer = service.predict_one(model_set, resolve.gpu_choice(gpu, gpu_spec, model_set.gpus), resolve.llm_choice(
        llm, llm_config, model_set.llms), w, fractions, use_cache=not no_cache)
    return (console.predict_json(answer) if as_json else console.predict_text(answer)) + "\n"


@app.command("recommend")
@user_errors
@answers.remembered("recommend", skip=lambda o: o["no_cache"])
def recommend_cmd(
    llm: str = LlmOpt, llm_config: Path = LlmConfigOpt,
    scenario: str = typer.Option(None, "--scenario", help=ScenarioHelp), concurrency: float = ConcOpt,
    max_itl_ms: float = typer.Option(..., "--max-itl-ms", help="latency target: mean inter-token latency (ms)"),
    gpus: str = typer.Option(None, "--gpus", help="comma-separated GPU names to consider [default: the whole catalog]"),
    confidence: float = typer.Option(80.0, "--confidence", help="a GPU meets --max-itl-ms when the upper bound of "
                                     "its ITL interval at this level (percent, 50-99; or 0.5-0.99) does"),
    max_power_w: float = typer.Option(None, "--max-power-w", help="power budget (W), judged at the upper bound of "
                                      "the power interval; per GPU, or per replica with --power-budget-scope replica"),
    power_scope: str = typer.Option("gpu", "--power-budget-scope",
                                    help="gpu: --max-power-w per GPU | replica: for the GPUs of one replica "
                                    "together (W per GPU x GPUs per replica)"),
    pue: float = typer.Option(1.0, "--pue", help="power usage effectiveness (facility / IT power, >= 1): scales "
                              "the energy and its cost"),
    price_per_kwh: float = typer.Option(None, "--price-per-kwh", help="electricity price, currency per kWh"),
    gpu_price_per_hour: float = typer.Option(None, "--gpu-price-per-hour",
                                             help="price of one GPU-hour (same currency), for every GPU"),
    objective: str = typer.Option("energy", "--objective", help="rank the GPUs that meet the constraints by "
                                  "energy (kWh per million tokens) | energy-cost (needs --price-per-kwh) | "
                                  "total-cost (energy + GPU hours; needs both prices)"),
    rate: float = RateOpt, prompt_tokens: float = PromptOpt, output_tokens: float = OutputOpt,
    gpus_per_replica: int = NGpusOpt, pipeline_parallel: int = PpOpt, precision: str = PrecOpt,
    expert_precision: str = ExpertPrecOpt, kv_precision: str = KvPrecOpt, engine: str = EngineOpt,
    engine_version: str = VersionOpt, expert_parallel: int = EpOpt, dp_attention: bool = DpAttnOpt,
    speculative: str = SpecOpt, spec_draft_tokens: int = SpecDraftOpt, spec_accept_length: float = SpecAcceptOpt,
    as_json: bool = JsonOpt, models: Path = ModelsOpt, no_cache: bool = NoCacheOpt,
) -> str:
    """Rank the GPUs that can hold the LLM by --objective (default: energy per million tokens), among those meeting
    --max-itl-ms at the --confidence upper bound and the power budget; energy and costs per million generated
    tokens come with their intervals."""
    from wattgpu.planning import planner, resolve, service
    from wattgpu.planning.models import ModelSet
    from wattgpu.reporting import console

    constraints = planner.Constraints(max_itl_ms, planner.level_fraction(confidence, "--confidence"), max_power_w,
                                      power_scope)
    costs = planner.Costs(pue, price_per_kwh, gpu_price_per_hour, objective)
    model_set = ModelSet.load(models)
    names = [n.strip() for n in gpus.split(",") if n.strip()] if gpus is not None else None
    answer = service.recommend(model_set, resolve.llm_choice(llm, llm_config, model_set.llms), workload_of(locals()),
                               constraints, names, costs, use_cache=not no_cache)
    return console.recommend_json(answer) + "\n" if as_json else console.recommendation_text(answer)


@app.command("ui")
@user_errors
def ui_cmd(host: str = typer.Option("127.0.0.1", "--host", help="address to bind (127.0.0.1: this machine only)"),
           port: int = typer.Option(8765, "--port"), models: Path = ModelsOpt) -> None:
    """Serve the planner page (ask, compare GPUs, recommend; offline) on http://HOST:PORT from the champions."""
    from wattgpu.ui.app import serve
    serve(host, port, models)


@app.command("precompute")
@user_errors
def precompute_cmd(models: Path = ModelsOpt) -> None:
    """Predict every catalog GPU x LLM x preset (default workload) once per model version, so that `wattgpu
    predict` and `recommend` answer from the cache without loading the models."""
    from wattgpu.planning import service
    from wattgpu.planning.models import ModelSet
    from wattgpu.reporting import console

    with console.progress_bar("predicting") as advance:
        total, new, path = service.precompute(ModelSet.load(models), progress=advance)
    typer.echo(f"{total} predictions ({new} new) cached in {path}")


@app.command("casestudy")
@user_errors
def casestudy_cmd(
    llm: str = typer.Option("meta-llama/Llama-3.1-8B-Instruct", "--llm", help="a catalog LLM name or alias"),
    max_itl_ms: float = typer.Option(25.0, "--max-itl-ms", help="latency target for the 'meets' columns (ms)"),
    markdown: bool = typer.Option(False, "--markdown", help="print markdown (as in the README)"),
    models: str = typer.Option(None, "--models",
                               help="comma-separated models, or 'all' [default: nested_selection,paper_replica]"),
) -> None:
    """The paper's case study: measured vs leave-one-GPU-out predicted power and ITL in the server scenarios."""
    from wattgpu.evaluation.casestudy import load_case  # here: the other commands do not need it (~15 ms)
    from wattgpu.reporting import casestudy, console
    chosen = [m.strip() for m in models.split(",") if m.strip()] if models else None
    table, key = load_case(llm, max_itl_ms, models=chosen)
    if markdown:
        typer.echo(casestudy.to_markdown(table, max_itl_ms))
    else:
        console.print_casestudy(table, key, max_itl_ms)


@app.command("report")
@user_errors
def report_cmd(
    output: Path = typer.Option(Path("reports/report.html"), "--output", help="where to write the HTML file"),
    llm: str = typer.Option("meta-llama/Llama-3.1-8B-Instruct", "--llm", help="LLM for the GPU rankings"),
    max_itl_ms: float = typer.Option(25.0, "--max-itl-ms", help="latency target in the case-study section (ms)"),
) -> None:
    """Write a self-contained HTML report (tables, plots, leaderboard, GPU rankings); works offline."""
    from wattgpu.evaluation.casestudy import load_case
    from wattgpu.reporting import html

    try:
        case, key = load_case(llm, max_itl_ms, ("offline", *workload.SERVER_LOADS))
    except WattgpuError as exc:
        case, key = None, f"{llm} ({exc})"
    out = html.write_report(paths.resolve(output), case, key, max_itl_ms)
    typer.echo(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, self-contained: open it in any browser, offline)")


def _report_file(path: Path, stage: str) -> Path:
    if not (path := paths.resolve(path)).exists():
        raise WattgpuError(f"{path} not found: run `dvc repro` (stage {stage}) first")
    return path


@app.command("data-report")
@user_errors
def data_report() -> None:
    """Print the ingest stage's data report (rows kept / quarantined per source and reason)."""
    typer.echo(_report_file(paths.DATA_REPORT.with_suffix(".md"), "ingest").read_text())


@app.command("results")
@user_errors
def results_cmd(markdown: bool = typer.Option(False, "--markdown", help="the README's generated sections")) -> None:
    """The headline: nested MdAPE of what the search registers beside the paper replica (reports/search/
    verdict.json), and the registered champions (models/registry.json)."""
    from wattgpu.reporting import console, readme

    if markdown:
        return typer.echo(readme.render_all(paths.project_root()), nl=False)
    verdict = json.loads(_report_file(paths.SEARCH_DIR / "verdict.json", "search_leaderboard").read_text())
    registry = paths.resolve(paths.MODELS_DIR / "registry.json")
    console.print_results(verdict, json.loads(registry.read_text()) if registry.exists() else None)


@catalog_app.command("list")
@user_errors
def catalog_list(kind: str = typer.Argument("gpus", help="gpus or llms")) -> None:
    """List catalog entries with their key figures."""
    from wattgpu.planning import resolve
    from wattgpu.reporting import console

    if kind not in ("gpus", "llms"):
        raise WattgpuError(f"kind must be 'gpus' or 'llms', not {kind!r}")
    console.print_catalog((resolve.project_gpus() if kind == "gpus" else resolve.required_llms()).to_frame(), kind)


@catalog_app.command("show")
@user_errors
def catalog_show(name: str, as_json: bool = typer.Option(False, "--json", help="machine-readable output")) -> None:
    """Show one GPU or LLM (looked up by name or alias) with every field and its source."""
    from wattgpu.planning import resolve
    from wattgpu.reporting import console

    data = resolve.catalog_entry(name).model_dump(mode="json")
    typer.echo(json.dumps(data, indent=2) if as_json else console.entry_text(data))


@catalog_app.command("add-gpu")
@user_errors
def catalog_add_gpu(
    spec_file: Path = typer.Argument(..., exists=True, dir_okay=False,
                                     help="YAML: one entry in the catalog's field names, or `gpus: [entries]`"),
    catalog: Path = typer.Option(None, "--catalog", help="the GPU catalog to extend [default: data/catalogs/gpus.yaml]"),
) -> None:
    """Validate GPU entries and append them to the GPU catalog (its comments are kept)."""
    from wattgpu.catalogs import edit
    from wattgpu.planning import resolve

    path, new, total = edit.add_gpus(resolve.entries(resolve.load_yaml(spec_file), spec_file), spec_file.name, catalog)
    typer.echo("".join(f"added {s.key!r} to {path} ({total} GPUs)\n" for s in new) + "`wattgpu predict/recommend` "
               "use its spec now; `dvc repro` picks it up (models retrain when their inputs change).")


@catalog_app.command("add-llm")
@user_errors
def catalog_add_llm(
    config_file: Path = typer.Argument(..., exists=True, dir_okay=False, help="a Hugging Face config.json"),
    name: str = typer.Option(None, "--name", help="org/model [default: the config's _name_or_path]"),
) -> None:
    """Validate a config.json and copy it to data/catalogs/llm_configs/<org>--<name>.json."""
    from wattgpu.catalogs import edit
    from wattgpu.planning import resolve

    key, _, spec = resolve.read_llm_config(config_file, name)
    dest = edit.add_llm(config_file, key, spec, resolve.project_llms())
    typer.echo(f"added {key!r} as {dest}: {spec.total_params_b:.2f} B parameters (computed from the config), "
               f"{spec.num_layers} layers, family {spec.family}; `dvc repro` adds it to the LLM table (to pin a "
               "published parameter count, add it to data/catalogs/llm_published_params.yaml).")
