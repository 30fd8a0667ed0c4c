"""The bad-input corpus (tests/bad_inputs/corpus.yaml) through the real entry points, on the test pipeline's
champions: HTTP (the endpoint `make serve` starts, on 127.0.0.1), the CLI and batch CSV. What each case must get, and
the runner, are in scripts/bad_input_corpus.py (the benchmark prints its totals). The totals per entry point are
printed and written to `bad_input_totals.json` in the test's temporary folder.
"""

from __future__ import annotations

import json

import pytest
from bad_input_corpus import CASES, champion_server, corpus_summary, problems

pytestmark = pytest.mark.slow


# ------------------------------------------------------------------------------------------------- the tests

TOTALS: dict[str, list[int]] = {}


@pytest.fixture(scope="module")
def server(pipeline, tmp_path_factory):
    with champion_server(pipeline) as srv:
        yield srv
    out = tmp_path_factory.getbasetemp() / "bad_input_totals.json"
    out.write_text(json.dumps(TOTALS, indent=1))
    print(f"\n{corpus_summary(TOTALS)} (totals in {out})")


def test_the_corpus_covers_every_entry_point():
    counts = {e: sum(c["entry"] == e for c in CASES) for e in ("http", "cli", "batch_csv")}
    assert sum(counts.values()) == len(CASES) >= 60 and min(counts.values()) >= 5, counts


@pytest.mark.parametrize("case", [pytest.param(c, id=c["name"]) for c in CASES])
def test_a_bad_input_is_answered_cleanly(case, pipeline, server, tmp_path):
    found = problems(case, pipeline, server, tmp_path)
    t = TOTALS.setdefault(case["entry"], [0, 0])
    t[0] += 1
    t[1] += not found
    assert found == []
