"""`python -m wattgpu.cli ...`: the same command line as `wattgpu ...`."""

from wattgpu.cli import app

app(prog_name="wattgpu")
