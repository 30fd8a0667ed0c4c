"""CI's reproducibility check of main: rerun the default pipeline on a clean clone, then fail when

- `dvc status` is not clean afterwards,
- the rerun's dvc.lock disagrees with the committed one on what a stage is (its command, its parameters, or the
  hash of a source it reads: raw data, catalogs, the code fingerprints), i.e. main's lock was not produced by
  main's code, data and parameters, or
- a committed metric moved beyond its noise. A rerun of the same code on the same data is deterministic (seeded,
  fixed thread counts), so the noise is floating-point jitter between machines: |new - old| <= 1e-6 + 1e-3 x |old|.

    python scripts/verify_main.py              # `make verify`: the full check (a clean clone: every stage reruns)
    python scripts/verify_main.py --lock-only  # `make verify-lock`, what CI runs after the tests: seconds, no rerun

Committed outputs that changed within the noise are listed, not failed. It measures; it is not a unit test.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import repro_timed  # noqa: E402  (a sibling script)

ABS_TOL, REL_TOL = 1e-6, 1e-3
EXPECTED_IN_A_CLEAN_CLONE = ("deleted", "not in cache")  # DVC-cached outputs a fresh clone has not built
DVC = [sys.executable, "-m", "dvc"]


def dvc(*args: str) -> str:
    return subprocess.run([*DVC, *args], check=True, capture_output=True, text=True).stdout


def stage_identity(lock: dict) -> dict[str, dict]:
    """Per stage: its command, parameters and the hashes of the sources it reads (deps no stage writes, and the
    code fingerprints), which together say what the stage is."""
    stages = lock.get("stages", {})
    produced = {o["path"] for s in stages.values() for o in s.get("outs", [])}
    out = {}
    for name, s in stages.items():
        sources = {d["path"]: d.get("md5") for d in s.get("deps", [])
                   if d["path"] not in produced or d["path"].startswith("reports/code/")}
        out[name] = {"cmd": s.get("cmd"), "params": s.get("params", {}), "sources": sources}
    return out


def lock_mismatches(committed: dict, rerun: dict) -> list[str]:
    a, b = stage_identity(committed), stage_identity(rerun)
    problems = [f"stage {n}: in the rerun, not in the committed dvc.lock" for n in sorted(set(b) - set(a))]
    problems += [f"stage {n}: in the committed dvc.lock, not run" for n in sorted(set(a) - set(b))]
    for name in sorted(set(a) & set(b)):
        for part in ("cmd", "params", "sources"):
            if a[name][part] != b[name][part]:
                keys = sorted(k for k in set(a[name][part]) | set(b[name][part])
                              if a[name][part].get(k) != b[name][part].get(k)) if part != "cmd" else []
                problems.append(f"stage {name}: {part} differ{' (' + ', '.join(keys) + ')' if keys else ''}")
    return problems


def moved_metrics(diff: dict, committed_files: set[str]) -> list[str]:
    """`dvc metrics diff --json` entries of committed metric files whose change is beyond the noise (a metric that
    appeared or vanished too). Metrics kept in DVC's cache only (models/registry.json) have no committed value."""
    problems = []
    for path, metrics in diff.items():
        if path not in committed_files:
            continue
        for key, d in metrics.items():
            old, new = d.get("old"), d.get("new")
            if isinstance(old, bool) or isinstance(new, bool) or not all(isinstance(v, int | float) for v in (old, new)):
                if old != new:
                    problems.append(f"{path}: {key} {old!r} -> {new!r}")
                continue
            if not (math.isfinite(old) and math.isfinite(new)):
                if not (math.isnan(old) and math.isnan(new)) and old != new:
                    problems.append(f"{path}: {key} {old} -> {new}")
            elif abs(new - old) > ABS_TOL + REL_TOL * abs(old):
                problems.append(f"{path}: {key} {old:.6g} -> {new:.6g}")
    return problems


def stale_lock(status: dict) -> list[str]:
    """From `dvc status --json` on a clean clone (nothing rerun): what says the committed dvc.lock was not made by
    this code, data and params. A clean clone lacks the DVC-cached outputs (`deleted`, and the same files as deps
    of later stages: `deleted`, `not in cache`), which is expected; a changed command, parameter or source, or a modified committed output,
    is not."""
    problems = []
    for stage, changes in status.items():
        for change in changes:
            if isinstance(change, str):  # "changed command", "always changed", ...
                problems.append(f"stage {stage}: {change}")
                continue
            for kind, entries in change.items():
                if kind == "changed params":
                    problems.append(f"stage {stage}: parameters changed ({', '.join(map(str, entries))})")
                    continue
                bad = {path: how for path, how in (entries.items() if isinstance(entries, dict) else [])
                       if how not in EXPECTED_IN_A_CLEAN_CLONE}
                if bad:
                    problems.append(f"stage {stage}: {kind} {bad}")
    return problems


def lock_only() -> int:
    """The cheap half, for every CI run: no rerun, only whether the committed lock matches the code, data and
    params (the code fingerprints are recomputed first: `dvc repro code` takes seconds)."""
    subprocess.run([*DVC, "repro", "code"], check=True, capture_output=True)
    problems = stale_lock(json.loads(dvc("status", "--json") or "{}"))
    for p in problems:
        print(f"verify: FAIL {p}")
    print("verify: the committed dvc.lock matches this code, data and params" if not problems
          else f"verify: {len(problems)} problem(s): run `make run` and commit dvc.lock with the reports")
    return 1 if problems else 0


def main() -> int:
    if "--lock-only" in sys.argv[1:]:
        return lock_only()
    committed = yaml.safe_load(Path("dvc.lock").read_text())
    rc = repro_timed.main([])
    if rc != 0:
        print(f"verify: dvc repro failed ({rc})")
        return rc
    problems = []
    status = json.loads(dvc("status", "--json") or "{}")
    if status:
        problems.append(f"dvc status is not clean after the rerun: {json.dumps(status)[:2000]}")
    problems += lock_mismatches(committed, yaml.safe_load(Path("dvc.lock").read_text()))
    diff = json.loads(dvc("metrics", "diff", "HEAD", "--json") or "{}")
    tracked = set(subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.split())
    problems += moved_metrics(diff.get("diff", diff), tracked)
    changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                             text=True, check=True).stdout.split("\n")
    changed = [line[3:] for line in changed if line.strip()]
    print(f"verify: committed files the rerun rewrote (within the noise unless listed below): {changed or 'none'}")
    for p in problems:
        print(f"verify: FAIL {p}")
    print("verify: main reproduces" if not problems else f"verify: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
