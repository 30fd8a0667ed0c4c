"""The README's figures and pasted outputs are the committed reports' (wattgpu.reporting.readme), and every
command it shows exists."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from wattgpu.cli import app
from wattgpu.reporting import readme


def test_the_generated_blocks_match_the_committed_reports(root):
    text = (root / "README.md").read_text()
    assert [n for n in readme.BLOCKS if readme.START.format(n) in text] == list(readme.BLOCKS)
    assert readme.stale(text, root) == [], "run `make readme` after `make run` and commit the reports"


def test_every_wattgpu_command_the_readme_shows_exists(root):
    text = (root / "README.md").read_text()
    shown = set(re.findall(r"^(?:\$ )?wattgpu ([a-z-]+)(?: ([a-z-]+))?", text, flags=re.M))
    assert shown
    runner = CliRunner()
    for command, sub in shown:
        args = [command, *([sub] if command == "catalog" and sub else []), "--help"]
        assert runner.invoke(app, args).exit_code == 0, args


def test_every_environment_variable_the_code_reads_is_in_the_readme_table():
    """The README's "Environment variables" table lists each WATTGPU_* variable the package, the scripts or the
    Makefile use, and nothing they no longer use."""
    from tests.conftest import ROOT

    code = [*(ROOT / "src").rglob("*.py"), *(ROOT / "scripts").glob("*.py"), ROOT / "Makefile"]
    used = {v for f in code for v in re.findall(r"\bWATTGPU_[A-Z_]+\b", f.read_text())}
    text = (ROOT / "README.md").read_text()
    table = text.split("## Environment variables\n", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`(WATTGPU_[A-Z_]+)`", table))
    assert len(used) >= 10 and used == listed
