from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.browser import CHROMIUM, CHROMIUM_ARGS, SHOTS
from tests.processes import Process, start_scheduler, start_worker
from tests.receivers import Behaviour, Receiver


@pytest.fixture
def receiver_factory() -> Iterator[Callable[..., Receiver]]:
    started: list[Receiver] = []

    def make(behaviour: Behaviour | None = None) -> Receiver:
        receiver = Receiver(behaviour).start()
        started.append(receiver)
        return receiver

    yield make
    for receiver in started:
        receiver.stop()


@pytest.fixture
def browser() -> Iterator[object]:
    """Headless Chromium (Playwright); skips the test where Debian's chromium is missing."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (make test installs it as root)")
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def homing(transactional_db: None, tmp_path, request) -> Iterator[Callable[..., Process]]:
    """Starts workers and schedulers on demand; stops them (printing their logs on failure)."""
    processes: list[Process] = []

    def start(kind: str = "worker", **kwargs) -> Process:
        starter = start_worker if kind == "worker" else start_scheduler
        kwargs.setdefault("name", f"{kind}{len(processes)}")
        process = starter(tmp_path, **kwargs)
        processes.append(process)
        return process

    yield start
    for process in processes:
        process.stop()
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        for process in processes:
            print(f"----- {process.name} log -----\n{process.log()[-5000:]}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
