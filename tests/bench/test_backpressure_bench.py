"""`make bench`'s last step runs on its own servers (bench/backpressure.py): it must keep
working as the schema grows (it once failed on the deliveries' new `sequence` column,
after every other figure had been printed)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.processes import ROOT


@pytest.mark.e2e
def test_the_backpressure_bench_runs_and_prints_its_figures() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.backpressure", "--backlog", "50", "--rounds", "10"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "backlog count at a limit of 50" in done.stdout
    assert "POST /events 429 backlog_full" in done.stdout
