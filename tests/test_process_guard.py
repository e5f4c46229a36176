"""The guard in tests/process_guard.py, run on a small suite of its own (pytester): a test
without the e2e marker that starts a process fails with a message saying what to do; the
same code under the marker passes."""

from __future__ import annotations

import pytest

INNER_SUITE = """
import multiprocessing
import os
import subprocess

import pytest


@pytest.fixture(scope="session")
def server_started_by_a_session_fixture():
    subprocess.run(["true"], check=True)


def test_unmarked_subprocess_run():
    subprocess.run(["true"], check=True)


def test_unmarked_os_system():
    os.system("true")


def test_unmarked_multiprocessing():
    process = multiprocessing.Process(target=print)
    process.start()
    process.join()


def test_unmarked_test_of_a_session_fixture(server_started_by_a_session_fixture):
    pass


def test_unmarked_test_without_processes():
    assert subprocess.list2cmdline(["a b"]) == '"a b"'


@pytest.mark.e2e
def test_marked_subprocess_run():
    assert subprocess.run(["true"]).returncode == 0
"""


@pytest.fixture
def inner_outcomes(pytester: pytest.Pytester) -> dict[str, tuple[str, str]]:
    """{test name: (outcome, failure text)} of the inner suite, setup failures included."""
    pytester.makepyfile(test_inner=INNER_SUITE)
    # In-process, without pytest-django: the inner suite needs neither Django nor a database.
    recorder = pytester.inline_run(
        "-p", "tests.process_guard", "-p", "no:django", "-p", "no:cacheprovider"
    )
    outcomes: dict[str, tuple[str, str]] = {}
    for report in recorder.getreports("pytest_runtest_logreport"):
        name = report.nodeid.split("::")[-1]
        if report.failed or name not in outcomes:
            outcomes[name] = (report.outcome, report.longreprtext)
    return outcomes


def test_a_test_without_the_e2e_marker_cannot_start_a_process(inner_outcomes):
    assert {name: outcome for name, (outcome, _) in inner_outcomes.items()} == {
        "test_unmarked_subprocess_run": "failed",
        "test_unmarked_os_system": "failed",
        "test_unmarked_multiprocessing": "failed",
        "test_unmarked_test_of_a_session_fixture": "failed",  # in setup: an error
        "test_unmarked_test_without_processes": "passed",
        "test_marked_subprocess_run": "passed",
    }
    for outcome, text in inner_outcomes.values():
        if outcome == "failed":
            assert "ProcessStartedWithoutE2EMarker" in text


def test_the_failure_names_the_test_the_command_and_the_fix(inner_outcomes):
    _, text = inner_outcomes["test_unmarked_subprocess_run"]
    assert (
        "test_inner.py::test_unmarked_subprocess_run started a process (true) but is not "
        "marked @pytest.mark.e2e" in text
    )
    assert "add `pytestmark = pytest.mark.e2e` to the module" in text


def test_the_guard_is_on_again_after_an_e2e_test(inner_outcomes):
    # This test is unmarked too: the inner e2e test must not have left the guard open.
    import subprocess

    from tests.process_guard import ProcessStartedWithoutE2EMarker

    with pytest.raises(ProcessStartedWithoutE2EMarker):
        subprocess.run(["true"])
