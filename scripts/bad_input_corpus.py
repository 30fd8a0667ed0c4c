"""The bad-input corpus (tests/bad_inputs/corpus.yaml) run through the real entry points: HTTP (the endpoint `make
serve` starts, on 127.0.0.1), the CLI (`wattgpu ...` in a subprocess) and batch CSV (`wattgpu predict --input
--output`), on a project's champions. `tests/integration/test_bad_input.py` asserts every case; the benchmark prints
the totals (`corpus_summary`: "bad-input corpus: N cases, N handled").

Every case must be refused (non-zero exit, 4xx) or, for a batch, answered row by row: the answer names the field
(and row), carries no traceback or `stack_trace`, and answered + rejected = input rows; every HTTP body parses with a
strict JSON parser (no bare NaN or Infinity). A case marked `ok` is a valid input that must be answered in full.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
from pathlib import Path

import pandas as pd
import yaml
from harness import BIN, Server, env

from wattgpu import tracking

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "bad_inputs" / "corpus.yaml"
REPEAT = re.compile(r"<(.) x (\d+)>")  # `<C x N>`: C repeated N times (a value, or inside one)
LLAMA_CONFIG = {  # meta-llama/Llama-3.1-8B-Instruct config.json (public), the fields that matter
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "max_position_embeddings": 131072, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}
GPU_SPEC = {"key": "ACME X9", "display_name": "X9", "vendor": "ACME", "architecture": "A", "release_year": 2024,
            "tdp_w": 300.0, "memory_gb": 48.0, "memory_type": "GDDR6", "memory_bus_bits": 384,
            "memory_bandwidth_gb_s": 864.0, "base_clock_mhz": None, "boost_clock_mhz": None, "sm_count": 100,
            "fp16_tensor_tflops": 180.0, "fp32_tflops": None, "form_factor": "PCIe",
            "source_urls": ["https://example.com/x9"]}  # FIXTURE figures
FILES = {  # `{name}` in a CLI case's args: these files, written to its temporary folder (FIXTURES)
    "llm_config": json.dumps(LLAMA_CONFIG),
    "dup_config": json.dumps(LLAMA_CONFIG)[:-1] + ', "num_hidden_layers": 4}',  # one key twice (the last would win)
    "heads_config": json.dumps({**LLAMA_CONFIG, "num_attention_heads": 30, "num_key_value_heads": 6}),
    "moe_config": json.dumps({**LLAMA_CONFIG, "model_type": "mixtral", "num_local_experts": 8,
                              "num_experts_per_tok": 9}),
    "gpu_spec_low_tdp": json.dumps({k: GPU_SPEC[k] for k in ("tdp_w", "memory_gb", "memory_bandwidth_gb_s",
                                                              "fp16_tensor_tflops", "release_year")} | {"tdp_w": 5}),
    "gpu_slash_key": json.dumps({**GPU_SPEC, "key": "ACME/X9"}),
}


def _expand(value):
    if isinstance(value, str):
        return REPEAT.sub(lambda m: m.group(1) * int(m.group(2)), value)
    if isinstance(value, dict):
        return {k: _expand(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v) for v in value]
    return value


def load_corpus() -> list[dict]:
    return [_expand(c) for c in yaml.safe_load(CORPUS.read_text(encoding="utf-8"))]


CASES = load_corpus()


def _clean(text: str) -> list[str]:
    return [f"a trace in the answer: {w}" for w in ("Traceback", "stack_trace") if w in text]


def _strict(text: str) -> list[str]:
    def refuse(constant):
        raise ValueError(f"a bare {constant}")

    try:
        json.loads(text, parse_constant=refuse)
    except ValueError as exc:
        return [f"not strict JSON ({exc}): {text[:200]}"]
    return []


def _rows_sent(case: dict) -> int:
    if "raw" in case:
        return len(pd.read_csv(io.StringIO(case["raw"])))
    body = case["body"]
    return len(body.get("dataframe_records") or body.get("inputs") or body.get("instances"))


def http_problems(case: dict, server: Server) -> list[str]:
    if "raw" in case:
        r = server.session.post(f"{server.url}/invocations", data=case["raw"].encode(), timeout=60,
                                headers={"Content-Type": case["content_type"]})
    else:
        r = server.post(case["body"])
    problems = _clean(r.text) + _strict(r.text)
    if len(r.content) > case.get("max_body", 100_000):
        problems.append(f"a {len(r.content):,}-byte answer")
    if case.get("partial"):
        if r.status_code != 200:
            return [*problems, f"status {r.status_code}, not 200 with per-row errors: {r.text[:300]}"]
        preds = r.json()["predictions"]
        n = _rows_sent(case)
        rejected = {i for i, p in enumerate(preds) if p.get("error")}
        answered = {i for i, p in enumerate(preds) if not p.get("error") and p.get("power_w") is not None}
        expected = {int(k): f for k, f in case["rows"].items()}
        if len(preds) != n or len(answered) + len(rejected) != n:
            problems.append(f"{n} rows in, {len(answered)} answered + {len(rejected)} rejected out")
        if rejected != set(expected):
            problems.append(f"rejected rows {sorted(rejected)}, expected {sorted(expected)}")
        problems += [f"row {i}: {preds[i].get('error')!r} does not name {f!r}" for i, f in expected.items()
                     if i < len(preds) and f"field {f!r}" not in str(preds[i].get("error"))]
        return problems
    if not 400 <= r.status_code < 500:
        return [*problems, f"status {r.status_code}, not 4xx: {r.text[:300]}"]
    if case.get("field") is None:
        return problems
    answer = r.json()
    if answer.get("field") != case["field"] or f"field {case['field']!r}" not in answer.get("detail", ""):
        problems.append(f"names field {answer.get('field')!r}, not {case['field']!r}: {str(answer)[:300]}")
    if case.get("row") is not None and answer.get("row") != case["row"]:
        problems.append(f"names row {answer.get('row')!r}, not {case['row']}")
    listed = {(e["row"], e["field"]) for e in answer.get("errors", [])}
    problems += [f"row {k} field {f!r} not listed" for k, f in case.get("rows", {}).items() if (int(k), f) not in listed]
    return problems


def _wattgpu(args: list[str], project: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "wattgpu"), *args], cwd=project, env=env(), capture_output=True, text=True,
                          timeout=300)


def cli_problems(case: dict, project: Path, tmp: Path) -> list[str]:
    files = {name: tmp / f"{name}.{'yaml' if name.startswith('gpu') else 'json'}" for name in FILES}
    for name, path in files.items():
        path.write_text(FILES[name])
    res = _wattgpu([a.format(**files) if a.startswith("{") else a for a in case["args"]], project)
    out = res.stdout + res.stderr
    problems = _clean(out)
    if res.returncode == 0:
        problems.append(f"exit 0: {out[-300:]}")
    if case["field"] not in out:
        problems.append(f"does not name {case['field']!r}: {out[-300:]}")
    if case.get("once") and out.count(case["field"]) != 1:
        problems.append(f"names {case['field']!r} {out.count(case['field'])} times, not once: {out[-300:]}")
    return problems


def batch_problems(case: dict, project: Path, tmp: Path) -> list[str]:
    src = tmp / "in.csv"
    src.write_text(case["csv"])
    dst = tmp / "out" if case.get("output_is_dir") else tmp / "preds.csv"
    dst.mkdir(exist_ok=True) if case.get("output_is_dir") else None
    if case.get("output_under_a_file"):
        dst = src / "preds.csv"
    res = _wattgpu(["predict", "--input", str(src), "--output", str(dst)], project)
    out = res.stdout + res.stderr
    problems = _clean(out)
    n = len(pd.read_csv(src))
    if case.get("ok"):
        answered = len(pd.read_csv(dst)) if dst.exists() else 0
        return problems + ([] if res.returncode == 0 and answered == n else
                           [f"exit {res.returncode}, {answered} of {n} rows answered: {out[-300:]}"])
    if res.returncode == 0:
        problems.append(f"exit 0: {out[-300:]}")
    if case.get("output_is_dir") or case.get("output_under_a_file"):
        return problems + ([] if case["field"] in out else [f"does not name {case['field']}: {out[-300:]}"])
    rejected_file = dst.with_name(dst.name + ".rejected.csv")
    rejected = pd.read_csv(rejected_file) if rejected_file.exists() else pd.DataFrame(columns=["row", "field"])
    answered = len(pd.read_csv(dst)) if dst.exists() else 0
    if answered + rejected["row"].nunique() != n:
        problems.append(f"{n} rows in, {answered} answered + {rejected['row'].nunique()} rejected out")
    listed = set(zip(rejected["row"], rejected["field"]))
    problems += [f"row {k} field {f!r} not in {rejected_file.name}" for k, f in case["rows"].items()
                 if (int(k), f) not in listed]
    if set(rejected["row"]) != {int(k) for k in case["rows"]}:  # a good row blamed is a wrong answer too
        problems.append(f"rejected rows {sorted(set(rejected['row']))}, expected {sorted(map(int, case['rows']))}")
    lines = dict(zip(rejected["row"], rejected["line"])) if "line" in rejected else {}
    problems += [f"row {k} listed at line {lines.get(int(k))}, it begins on line {line}"
                 for k, line in case.get("lines", {}).items() if lines.get(int(k)) != line]
    first = min(case["rows"], key=int)
    if f"row {first}, field {case['rows'][first]!r}" not in out:
        problems.append(f"the message does not name row {first}, field {case['rows'][first]!r}: {out[-300:]}")
    return problems


def problems(case: dict, project: Path, server: Server, tmp: Path) -> list[str]:
    """What is wrong with how the entry point answered `case` ([] = handled)."""
    if case["entry"] == "http":
        return http_problems(case, server)
    tmp.mkdir(parents=True, exist_ok=True)
    return cli_problems(case, project, tmp) if case["entry"] == "cli" else batch_problems(case, project, tmp)


def champion_server(project: Path) -> Server:
    """The endpoint `make serve` starts: both champions behind MLflow's scoring app and our guard (body size, JSON
    parse and duplicate keys, no `stack_trace` in any error body)."""
    return Server.champions(f"sqlite:///{tracking.tracking_dir(project) / 'mlflow.db'}")  # this project's store


def corpus_totals(project: Path, tmp: Path) -> dict[str, list[int]]:
    """Entry point -> [cases, handled], running every case (for the benchmark: `corpus_summary`)."""
    totals: dict[str, list[int]] = {}
    with champion_server(project) as server:
        for i, case in enumerate(CASES):
            t = totals.setdefault(case["entry"], [0, 0])
            t[0] += 1
            t[1] += not problems(case, project, server, tmp / str(i))
    return totals


def corpus_summary(totals: dict[str, list[int]]) -> str:
    cases, handled = (sum(t[i] for t in totals.values()) for i in (0, 1))
    parts = ", ".join(f"{e} {h}/{n}" for e, (n, h) in sorted(totals.items()))
    return f"bad-input corpus: {cases} cases, {handled} handled ({parts})"
