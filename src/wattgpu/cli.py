"""The `wattgpu` command line."""

from __future__ import annotations

import json

import typer

from wattgpu import paths
from wattgpu.errors import WattgpuError

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__, pretty_exceptions_show_locals=False)
catalog_app = typer.Typer(no_args_is_help=True, help="GPU and LLM catalogs: list, show, add.")
app.add_typer(catalog_app, name="catalog")


def fail(message: str) -> None:
    typer.secho(f"error: {message}", fg="red", err=True)
    raise typer.Exit(2)


@app.command("data-report")
def data_report() -> None:
    """Print the ingest stage's data report (rows kept / quarantined per source and reason)."""
    path = paths.resolve(paths.DATA_REPORT).with_suffix(".md")
    if not path.exists():
        fail(f"{path} not found: run `dvc repro ingest` first")
    typer.echo(path.read_text())


def _gpus():
    from wattgpu.catalogs.gpus import load_gpu_catalog

    return load_gpu_catalog(paths.resolve(paths.GPU_CATALOG))


def _llms():
    from wattgpu.catalogs.llms import load_llm_catalog

    path = paths.resolve(paths.LLM_CATALOG_TABLE)
    if not path.exists():
        fail(f"{path} not found: run `dvc repro catalog` first")
    return load_llm_catalog(path)


@catalog_app.command("list")
def catalog_list(kind: str = typer.Argument(..., help="gpus or llms")) -> None:
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


def main() -> None:  # pragma: no cover
    app()
