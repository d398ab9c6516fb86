"""bench.ab: which baseline ref is measured, and what of it is unpacked."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench.ab import BASELINE_ENV, DEFAULT_BASELINE, RUNTIME_DIRS, BaselineError, baseline_ref, extract


def test_the_flag_wins_over_the_environment_which_wins_over_the_default() -> None:
    assert baseline_ref("v1", {BASELINE_ENV: "v2"}) == "v1"
    assert baseline_ref(None, {BASELINE_ENV: " v2 "}) == "v2"
    assert baseline_ref(None, {BASELINE_ENV: ""}) == DEFAULT_BASELINE
    assert baseline_ref(None, {}) == DEFAULT_BASELINE


def test_extract_unpacks_the_runtime_packages_of_the_ref_only(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True)
    commit = extract("HEAD", tmp_path)
    assert commit == head.stdout.strip()
    assert (tmp_path / RUNTIME_DIRS[0] / "asya" / "sidecar.py").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({d.split("/")[0] for d in RUNTIME_DIRS})


def test_a_ref_that_names_no_commit_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BaselineError, match=r"baseline ref 'no-such-ref-x' is no commit.*ASYA_BENCH_BASELINE"):
        extract("no-such-ref-x", tmp_path)
