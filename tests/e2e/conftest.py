from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

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
