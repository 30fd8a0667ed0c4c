"""A temporary clone of this project (with the working tree's changes) whose DVC remote is the shared store."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml
from harness import env


def run(cmd: list[str], cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env(), capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def shared_store(root: Path) -> Path:
    """The default remote's URL, resolved the way DVC resolves it (relative to .dvc/)."""
    cfg = (root / ".dvc" / "config").read_text()
    url = next(line.split("=", 1)[1].strip() for line in cfg.splitlines() if line.strip().startswith("url"))
    return (root / ".dvc" / url).resolve()


def clone(root: Path, dest: Path) -> Path:
    """git clone, then overlay tracked and untracked-not-ignored files so uncommitted work is tested too."""
    subprocess.run(["git", "clone", "--quiet", str(root), str(dest)], check=True)
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=root,
                           check=True, capture_output=True, text=True).stdout.split("\0")
    for rel in filter(None, files):
        src = root / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    run(["dvc", "remote", "modify", "--local", "shared", "url", str(shared_store(root))], dest)
    run(["dvc", "config", "--local", "core.analytics", "false"], dest)
    return dest


def shrink_params(path: Path, edit) -> None:
    """Rewrite params.yaml through `edit(dict)` (smaller folds, fewer trees, fewer trials)."""
    params = yaml.safe_load(path.read_text())
    edit(params)
    path.write_text(yaml.safe_dump(params, sort_keys=False))
