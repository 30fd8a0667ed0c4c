"""Stage `code`: one fingerprint per stage of the code it runs (wattgpu.codehash: its modules and everything they
import, each hashed without docstrings) -> reports/code/<stage>.json.

Every other stage depends on its fingerprint file instead of on source folders, so DVC reruns a stage exactly when
code it runs changed: editing a docstring or a comment reruns nothing that trains; editing a module reruns every
stage that imports it.
"""

from __future__ import annotations

from wattgpu import codehash, paths
from wattgpu.io import write_json

OUT_DIR = paths.REPORTS_DIR / "code"
# dvc.yaml stage -> the module its command runs
STAGES = {
    "catalog": "wattgpu.stages.catalog",
    "ingest": "wattgpu.stages.ingest",
    "evaluate": "wattgpu.stages.evaluate",
    "tables": "wattgpu.stages.tables",
    "search": "wattgpu.stages.search",
    "search_best": "wattgpu.stages.search",
    "search_leaderboard": "wattgpu.stages.leaderboard",
    "register": "wattgpu.stages.register",
    "casestudy": "wattgpu.stages.casestudy",
    "examples": "wattgpu.cli",
}


def main() -> None:
    root = paths.project_root()
    for stage, module in STAGES.items():
        fp = codehash.fingerprint([module])
        write_json(paths.resolve(OUT_DIR / f"{stage}.json", root), {"entry": module, "modules": fp})
        print(f"code {stage}: {len(fp)} modules")


if __name__ == "__main__":
    main()
