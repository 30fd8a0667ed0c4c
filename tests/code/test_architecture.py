"""The layout keeps its promises: dependencies point one way, each concept has one definition, every DVC stage
depends on exactly the code it runs, and fingerprints ignore prose."""

from __future__ import annotations

import io
import shutil
import tokenize
from pathlib import Path

import pytest
import yaml

from wattgpu import codehash
from wattgpu.stages.code import STAGES

SRC = codehash.SOURCE_ROOT / "wattgpu"
MODULES = sorted(
    ".".join(p.relative_to(codehash.SOURCE_ROOT).with_suffix("").parts).removesuffix(".__init__")
    for p in SRC.rglob("*.py"))

# data -> features -> modeling -> evaluation/search -> registry -> serving/CLI. A module may import its own
# layer and the layers below; the stages (thin DVC entries), the CLI and the planner page (wattgpu.ui) sit on
# top, the renderers beside them.
LAYERS = [
    ("base", ("wattgpu", "wattgpu.paths", "wattgpu.errors", "wattgpu.fields", "wattgpu.workload", "wattgpu.physics",
              "wattgpu.config", "wattgpu.codehash", "wattgpu.tracking", "wattgpu.arrays")),
    ("data", ("wattgpu.catalogs", "wattgpu.sources", "wattgpu.io")),
    ("features", ("wattgpu.features", "wattgpu.request")),
    ("modeling", ("wattgpu.modeling",)),
    ("evaluation/search", ("wattgpu.evaluation", "wattgpu.search")),
    ("registry", ("wattgpu.registry",)),
    ("serving/planning", ("wattgpu.serving", "wattgpu.planning")),
    ("reporting", ("wattgpu.reporting",)),
    ("entries", ("wattgpu.stages", "wattgpu.cli", "wattgpu.ui")),
]


def layer(module: str) -> int:
    best = None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (best is None or len(p) > len(best[1])):
                best = (i, p)
    assert best is not None, f"{module} is in no layer"
    return best[0]


def test_every_module_imports_only_its_own_layer_and_below():
    wrong = [f"{m} ({LAYERS[layer(m)][0]}) imports {d} ({LAYERS[layer(d)][0]})"
             for m in MODULES for d in codehash.direct_imports(m) if layer(d) > layer(m)]
    assert wrong == []


def test_serving_and_the_cli_need_nothing_from_the_search_and_numbers_need_no_renderer():
    for entry in ("wattgpu.serving.pyfunc", "wattgpu.serving.model_code", "wattgpu.cli"):
        assert [m for m in codehash.closure([entry]) if m.startswith("wattgpu.search")] == [], entry
    computing = [m for m in MODULES if layer(m) < layer("wattgpu.reporting")]
    for m in computing:
        assert [d for d in codehash.closure([m]) if d.startswith("wattgpu.reporting")] == [], m


def test_the_cli_is_a_thin_layer():
    # option declarations and one call per command (predict and recommend share ~20 workload options)
    assert len((SRC / "cli" / "__init__.py").read_text().splitlines()) < 300


def _literals(kind: int) -> dict[str, list[str]]:
    """Every token of `kind` (tokenize.STRING / NUMBER) in the package, with the files it appears in."""
    found: dict[str, list[str]] = {}
    for path in SRC.rglob("*.py"):
        for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
            if tok.type == kind:
                found.setdefault(tok.string.strip("\"'"), []).append(path.relative_to(SRC).as_posix())
    return found


def test_scenario_names_and_the_offline_batch_are_defined_once():
    strings, numbers = _literals(tokenize.STRING), _literals(tokenize.NUMBER)
    for name in ("server_low", "server_high"):
        assert set(strings[name]) == {"workload.py"}, name
    # 256 is also transformers' Gemma 3 head_dim default (catalogs/hf_config.CONFIG_CLASS_DEFAULTS), not a batch
    assert set(numbers["256"]) - {"catalogs/hf_config.py"} == {"workload.py"}
    assert set(numbers["0.017"]) == {"workload.py"}


def test_catalog_specs_requests_and_config_parsing_share_one_table_of_ranges():
    from wattgpu import fields
    from wattgpu.catalogs.gpus import GpuSpec
    from wattgpu.catalogs.llms import LlmSpec

    for spec, table in ((GpuSpec, fields.GPU_SPEC), (LlmSpec, fields.LLM_CONFIG)):
        schema = spec.model_json_schema()["properties"]
        for name, prop in schema.items():
            if name in table:
                options = prop.get("anyOf", [prop])
                lo = [o["minimum"] for o in options if "minimum" in o]
                hi = [o["maximum"] for o in options if "maximum" in o]
                assert (lo, hi) == ([table[name].lo], [table[name].hi]), f"{spec.__name__}.{name}"
    numbers = _literals(tokenize.NUMBER)
    for bound in ("2000", "20_000", "10_000", "1_000_000", "100_000_000"):  # the table's distinctive bounds
        assert set(numbers.get(bound, [])) <= {"fields.py"}, bound


# ------------------------------------------------------------------------------------------------ DVC stages


def dvc_stages(root: Path) -> dict:
    return yaml.safe_load((root / "dvc.yaml").read_text())["stages"]


def test_every_stage_depends_on_its_code_fingerprint_and_on_no_source_folder(root):
    stages = dvc_stages(root)
    assert set(stages) == {"code", *STAGES}
    for name, stage in stages.items():
        body = stage.get("do", stage)
        deps = body.get("deps", [])
        if name == "code":
            assert deps == ["src/wattgpu"]
            continue
        assert f"reports/code/{name}.json" in deps, name
        assert not [d for d in deps if d.startswith("src/")], name
        cmd = " ".join(body["cmd"].split())
        module = STAGES[name]
        assert (f"python -m {module}" in cmd) or (module == "wattgpu.cli" and " wattgpu " in f" {cmd} "), name


def test_a_docstring_edit_changes_no_fingerprint_and_a_code_edit_changes_the_stages_that_import_it(tmp_path):
    root = tmp_path / "src"
    shutil.copytree(codehash.SOURCE_ROOT / "wattgpu", root / "wattgpu", ignore=shutil.ignore_patterns("__pycache__"))
    before = {s: codehash.digest([m], root) for s, m in STAGES.items()}
    nested = root / "wattgpu" / "search" / "nested.py"
    text = nested.read_text()
    nested.write_text(text.replace('"""Nested evaluation:', '"""Nested (edited prose) evaluation:', 1)
                      .replace("# the objective", "# the objective, reworded"))
    assert {s: codehash.digest([m], root) for s, m in STAGES.items()} == before
    estimator = root / "wattgpu" / "modeling" / "estimator.py"
    estimator.write_text(estimator.read_text().replace('strategy="mean"', 'strategy="median"'))
    after = {s: codehash.digest([m], root) for s, m in STAGES.items()}
    changed = {s for s in STAGES if after[s] != before[s]}
    assert {"evaluate", "search", "register"} <= changed  # examples reruns on the models register rewrites
    assert not changed & {"catalog", "ingest", "tables", "search_leaderboard"}


def test_the_prediction_cache_fingerprint_covers_the_estimators_code():
    from wattgpu.planning.cache import PREDICTION_CODE

    covered = codehash.closure(PREDICTION_CODE)
    for module in ("wattgpu.modeling.estimator", "wattgpu.modeling.trendboost", "wattgpu.modeling.targets",
                   "wattgpu.modeling.predictor", "wattgpu.features", "wattgpu.request", "wattgpu.physics"):
        assert module in covered


@pytest.mark.slow
@pytest.mark.parametrize("stage, args", [("catalog", []), ("ingest", []), ("tables", []),
                                         ("search_leaderboard", []), ("casestudy", [])])
def test_a_stage_run_imports_only_fingerprinted_code_and_reads_only_declared_deps(pipeline_files, stage, args):
    """Run the stage in a copy of the test pipeline's clone with an audit hook: every wattgpu module it imports is
    in its fingerprint, and every project file it opens for reading is one of its dvc.yaml deps (or params.yaml)."""
    import json
    import subprocess
    import sys

    from tests.integration.helpers import env

    pipeline = pipeline_files
    probe = pipeline / f"probe-{stage}.json"
    script = (
        "import json, os, runpy, sys\n"
        "opened = set()\n"
        "def hook(event, a):\n"
        "    if event == 'open' and isinstance(a[0], str) and (a[1] is None or 'r' in str(a[1])):\n"
        "        opened.add(os.path.abspath(a[0]))\n"
        "sys.addaudithook(hook)\n"
        f"sys.argv = ['{STAGES[stage]}', *{args!r}]\n"
        f"runpy.run_module('{STAGES[stage]}', run_name='__main__')\n"
        "mods = sorted(m for m in sys.modules if m == 'wattgpu' or m.startswith('wattgpu.'))\n"
        f"json.dump({{'modules': mods, 'opened': sorted(opened)}}, open({str(probe)!r}, 'w'))\n"
    )
    subprocess.run([sys.executable, "-c", script], cwd=pipeline, env=env(), check=True, capture_output=True)
    seen = json.loads(probe.read_text())
    probe.unlink()
    fingerprint = json.loads((pipeline / f"reports/code/{stage}.json").read_text())["modules"]
    assert set(seen["modules"]) <= set(fingerprint)
    declared = [pipeline / d for d in dvc_stages(pipeline)[stage]["deps"]] + [pipeline / "params.yaml"]
    project = [Path(p) for p in seen["opened"] if Path(p).is_relative_to(pipeline) and Path(p).is_file()
               and not Path(p).is_relative_to(pipeline / "src") and "mlruns" not in Path(p).parts]
    undeclared = [p for p in project
                  if not any(p == d or p.is_relative_to(d) for d in declared) and not _written_by(p, stage, pipeline)]
    assert project and undeclared == [], undeclared


def _written_by(path: Path, stage: str, root: Path) -> bool:
    """The stage's own outputs (a stage may read back what it wrote)."""
    body = dvc_stages(root)[stage]
    outs = []
    for key in ("outs", "metrics", "plots"):
        for o in body.get(key, []):
            outs.append(root / (o if isinstance(o, str) else next(iter(o))))
    return any(path == o or path.is_relative_to(o) for o in outs)
