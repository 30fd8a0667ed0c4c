"""Faults a user meets outside the request itself: a model folder that is missing, incomplete or corrupt, and a
disk with no room for the output. Each is one line on stderr that says what to do, exit 2, no traceback."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.code.test_cli import assert_clean_error, run

ONE = ("predict", "--gpu", "A30", "--llm", "meta-llama/Llama-3.1-8B-Instruct", "--scenario", "offline", "--no-cache")


def broken_copy(models_dir: Path, tmp_path: Path, target: str, file: str, content: bytes | None) -> Path:
    """A copy of the model folders with `target`/`file` replaced by `content` (None: removed)."""
    dest = tmp_path / "broken-models"
    shutil.copytree(models_dir, dest)
    path = dest / target / file
    if content is None:
        path.unlink()
    else:
        path.write_bytes(content)
    return dest


@pytest.mark.parametrize(("target", "file", "content", "says"), [
    ("power", "estimator.joblib", b"\x80\x04truncated", "estimator.joblib is unreadable"),
    ("itl", "estimator.joblib", None, "estimator.joblib missing"),
    ("power", "meta.json", b"{not json", "meta.json is unreadable"),
    ("itl", "meta.json", b"[1, 2]", "meta.json is unreadable"),
    ("power", "llm_catalog.csv", b"", "llm_catalog.csv"),
    ("power", "gpus.yaml", b"gpus: [{key: 1", "gpus.yaml"),
])
def test_a_corrupt_or_incomplete_model_folder_is_one_line_that_says_how_to_rebuild(env, models_dir, tmp_path,
                                                                                     target, file, content, says):
    folder = broken_copy(models_dir, tmp_path, target, file, content)
    result = run(*ONE, "--models", str(folder))
    assert_clean_error(result, says, "make run")
    assert len(result.stderr.strip().splitlines()) <= 3  # one message (the terminal may wrap it)


def test_a_missing_model_folder_says_how_to_build_it(env, tmp_path):
    assert_clean_error(run(*ONE, "--models", str(tmp_path / "nowhere")), "dvc repro")


def test_a_full_disk_is_one_line_and_keeps_no_half_answer_silent(env, tmp_path):
    requests = tmp_path / "requests.csv"
    requests.write_text("gpu,llm,scenario\n" + "A30,meta-llama/Llama-3.1-8B-Instruct,offline\n" * 50)
    result = run("predict", "--input", str(requests), "--output", "/dev/full", "--no-cache")  # ENOSPC on write
    assert_clean_error(result, "no room to write", "free disk space")
