"""`wattgpu search worker --regime <name>`: runs `python -m wattgpu.stages.search worker <name>` in a process of its
own, so that the `wattgpu` command line (predict, recommend) imports nothing of the search."""

from __future__ import annotations

import subprocess
import sys

import typer

search_app = typer.Typer(no_args_is_help=True, help="Search workers sharing a PostgreSQL storage (README).")


@search_app.command("worker")
def worker(regime: str = typer.Option(..., "--regime", help="a key of params.yaml search.regimes, or best")) -> None:
    """Join the studies of search@<regime> for this data and code version in the shared storage
    ($WATTGPU_OPTUNA_STORAGE) and take trials until every study has its budget; start one per core or machine."""
    raise typer.Exit(subprocess.call([sys.executable, "-m", "wattgpu.stages.search", "worker", regime]))
