"""What the `wattgpu` commands share: the workload options of predict and recommend, the command group that keeps
command names as typed, the token normalization that tells an engine's flag apart, and the handler that turns expected
errors into one line."""

from __future__ import annotations

import functools
import inspect

import typer
from typer.core import TyperGroup

from wattgpu import workload
from wattgpu.errors import WattgpuError, os_error_line


class Commands(TyperGroup):
    """Command names as typed (click passes unknown ones through engine_flag: `wattgpu tp` got --tp's hint)."""

    def resolve_command(self, ctx, args):
        normalize, ctx.token_normalize_func = ctx.token_normalize_func, None
        try:
            return super().resolve_command(ctx, args)
        finally:
            ctx.token_normalize_func = normalize


def engine_flag(token: str) -> str:
    """Click's token normalization (every option name, ours included): the name unchanged, but an engine's flag or a
    request body's field name (workload.FLAG_WORDS) is a usage error naming the option that says it here."""
    if (field := workload.FLAG_WORDS.get(token.lower().replace("-", "_"))) is None:
        return token
    option, meaning = workload.FIELD_OPTIONS[field]
    raise typer.BadParameter(f"wattgpu has no such option; did you mean {option}: {meaning}?",
                             param_hint=f"'--{token}'")


def user_errors(func):
    """Turn the project's expected errors into `error: ...` + exit 2 (no traceback)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except WattgpuError as exc:
            typer.secho(f"error: {exc}", fg="red", err=True)
            raise typer.Exit(2) from None
        except OSError as exc:  # a full disk, a directory where a file goes, no permission: one line, no traceback
            typer.secho(f"error: {os_error_line(exc)}", fg="red", err=True)
            raise typer.Exit(2) from None

    return wrapper


ModelsOpt = typer.Option(None, "--models", envvar="WATTGPU_MODELS",
                         help="folder holding power/ and itl/ model folders [default: models/]")
ScenarioHelp = " | ".join(workload.SCENARIOS) + " (needs --rate); or --concurrency N"
RateOpt = typer.Option(None, "--rate", help="requests per second (Poisson) [default: " + ", ".join(
    f"{k} {v:g}" for k, v in workload.SERVER_RATES.items()) + "]")
PromptOpt = typer.Option(None, "--prompt-tokens", help=f"mean prompt tokens [default: {workload.DEFAULTS['prompt_tokens']:g}]")
OutputOpt = typer.Option(None, "--output-tokens", help=f"mean output tokens [default: {workload.DEFAULTS['output_tokens']:g}]")
NGpusOpt = typer.Option(None, "--gpus-per-replica", help="GPUs serving one replica, tensor x pipeline parallel (the "
                        f"request field n_gpus) [default: {workload.DEFAULTS['n_gpus']:g}]")
ConcOpt = typer.Option(None, "--concurrency", help="requests in flight (a closed batch; beyond the KV cache's fit they wait); or --rate")
PpOpt = typer.Option(None, "--pipeline-parallel", help="pipeline stages of the replica's GPUs [default: 1]")
PrecOpt, ExpertPrecOpt, KvPrecOpt, EngineOpt, VersionOpt = (  # --precision ... --engine-version
    typer.Option(None, "--" + k.replace("_", "-"), help=workload.HELP[k]) for k in workload.HELP)
# the replica's shape (no source measured it: answered from the physics, flagged): workload.SHAPE_HELP
EpOpt, SpecOpt, SpecDraftOpt, SpecAcceptOpt = (
    typer.Option(None, "--" + k.replace("_", "-"), help=workload.SHAPE_HELP[k])
    for k in ("expert_parallel", "speculative", "spec_draft_tokens", "spec_accept_length"))
DpAttnOpt = typer.Option(False, "--dp-attention", help=workload.SHAPE_HELP["dp_attention"])
# workload.workload's arguments, each a predict / recommend option of the same name (but n_gpus: --gpus-per-replica)
WORKLOAD_OPTIONS = tuple(name for name in inspect.signature(workload.workload).parameters if name != "n_gpus")


def workload_of(options: dict) -> dict:
    """The request's workload fields from a command's options (its locals())."""
    return workload.workload(n_gpus=options["gpus_per_replica"], **{k: options[k] for k in WORKLOAD_OPTIONS})

JsonOpt = typer.Option(False, "--json", help="machine-readable output")
LlmOpt = typer.Option(None, "--llm", help="a catalog LLM name or alias")
LlmConfigOpt = typer.Option(None, "--llm-config", exists=True, dir_okay=False, help="a Hugging Face config.json")
NoCacheOpt = typer.Option(False, "--no-cache", help="do not read or write the prediction cache")
