"""The gatherer behind the publisher and the counters: nothing put is lost or handled twice."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from core import background
from core.background import Gatherer


@pytest.fixture(autouse=True)
def _forget_test_gatherers() -> Iterator[None]:
    # Every Gatherer joins the module's registry, whose gatherers the next Worker.start()
    # starts: a test's own must not outlive it (a stray "test-gatherer" thread otherwise
    # appears in whichever worker test runs next in this process).
    registered = list(background._every)
    yield
    for gatherer in background._every[len(registered) :]:
        gatherer.close(timeout=2)
    background._every[:] = registered


def test_everything_put_is_handled_once_in_order_and_gathered_under_load():
    calls: list[list[int]] = []
    slow_start = threading.Event()

    def handle(items: list[int]) -> None:
        slow_start.wait(1)  # the first call blocks so the rest pile up behind it
        calls.append(items)

    gatherer = Gatherer(handle, name="test-gatherer", most=50, linger=0)
    gatherer.start()
    for n in range(200):
        gatherer.put(n)
    slow_start.set()
    gatherer.flush()
    assert [n for items in calls for n in items] == list(range(200))
    assert all(len(items) <= 50 for items in calls)
    assert len(calls) < 20  # gathered, not one call per item


def test_flush_waits_for_what_the_thread_is_handling():
    handled: list[int] = []

    def handle(items: list[int]) -> None:
        time.sleep(0.2)
        handled.extend(items)

    gatherer = Gatherer(handle, name="test-gatherer", most=10, linger=0)
    gatherer.start()
    gatherer.put(1)
    time.sleep(0.05)  # the thread has taken it and is in the middle of handling it
    gatherer.flush()
    assert handled == [1]


def test_a_failing_handler_does_not_stop_the_thread(caplog):
    handled: list[int] = []

    def handle(items: list[int]) -> None:
        if 0 in items:
            raise RuntimeError("boom")
        handled.extend(items)

    gatherer = Gatherer(handle, name="test-gatherer", most=1, linger=0)
    gatherer.start()
    gatherer.put(0)
    gatherer.flush()
    gatherer.put(1)
    gatherer.flush()
    assert handled == [1]
    assert "test-gatherer could not handle 1 items" in caplog.text


def test_what_comes_while_it_lingers_shares_one_call():
    calls: list[list[int]] = []
    gatherer = Gatherer(calls.append, name="test-gatherer", most=10, linger=0.3)
    gatherer.start()
    gatherer.put(1)
    time.sleep(0.1)
    gatherer.put(2)
    time.sleep(0.5)
    assert calls == [[1, 2]]


def test_until_its_owner_starts_it_the_caller_handles_each_item():
    calls: list[list[int]] = []
    gatherer = Gatherer(calls.append, name="test-gatherer", most=10, linger=0.3)
    gatherer.put(1)
    assert calls == [[1]] and gatherer.thread is None  # no thread was started for it


def test_close_handles_what_was_put_then_ends_the_thread():
    calls: list[list[int]] = []
    gatherer = Gatherer(calls.append, name="test-gatherer", most=10, linger=0.2)
    gatherer.start()
    thread = gatherer.thread
    gatherer.put(1)
    gatherer.put(2)
    gatherer.close(timeout=2)
    assert [n for items in calls for n in items] == [1, 2]
    assert thread is not None and not thread.is_alive() and gatherer.thread is None
    gatherer.put(3)  # closed: handled by the caller again
    assert calls[-1] == [3]
