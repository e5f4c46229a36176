"""The watchdog, with fake threads and a fake clock: a dead thread, a thread stuck in one
piece of work, or an event loop that does not answer makes the process exit."""

from __future__ import annotations

import threading
import time

import pytest

from deliveries.worker.supervisor import EXIT_CODE, Heartbeat, Supervisor, Watched


class FakeThread(threading.Thread):
    """Never started: alive until the test says otherwise."""

    def __init__(self) -> None:
        super().__init__()
        self.alive = True

    def is_alive(self) -> bool:
        return self.alive


class FakeLoop:
    """An event loop that runs the callbacks it is asked to, while it is not stuck."""

    def __init__(self) -> None:
        self.stuck = False
        self.closed = False
        self.waiting: list = []

    def ping(self, callback) -> None:
        if self.closed:
            raise RuntimeError("Event loop is closed")
        self.waiting.append(callback)

    def turn(self) -> None:
        if not self.stuck:
            for callback in self.waiting:
                callback()
            self.waiting.clear()


@pytest.fixture
def now():
    return [1000.0]


@pytest.fixture
def parts(now):
    claims, recorder, parker = FakeThread(), FakeThread(), FakeThread()
    beat = Heartbeat()
    loop = FakeLoop()
    supervisor = Supervisor(
        watched=[
            Watched("claims", lambda: claims, beat, patience=60),
            Watched("recorder", lambda: recorder),
            Watched("parker", lambda: parker),
        ],
        ping_loop=loop.ping,
        loop_patience=10,
        clock=lambda: now[0],
    )
    return supervisor, {"claims": claims, "recorder": recorder, "parker": parker}, beat, loop


def test_it_is_content_while_every_thread_lives_and_the_loop_answers(parts, now) -> None:
    supervisor, _, _, loop = parts
    for _ in range(30):
        assert supervisor.check() is None
        loop.turn()
        now[0] += 1


@pytest.mark.parametrize("name", ["claims", "recorder", "parker"])
def test_a_dead_thread_is_noticed(parts, name) -> None:
    supervisor, threads, _, _ = parts
    threads[name].alive = False
    assert supervisor.check() == f"the {name} thread died"


def test_a_thread_never_started_counts_as_dead(now) -> None:
    supervisor = Supervisor(
        watched=[Watched("releases", lambda: None)], ping_loop=lambda cb: cb(), clock=lambda: now[0]
    )
    assert supervisor.check() == "the releases thread died"


def test_a_thread_stuck_in_one_piece_of_work_beyond_its_patience_is_noticed(
    parts, now, monkeypatch
) -> None:
    supervisor, _, beat, loop = parts
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    with beat.working():
        now[0] += 59
        loop.turn()
        assert supervisor.check() is None  # slow, within its patience
        now[0] += 2
        assert supervisor.check() == "the claims thread has been stuck for 61 s"
    # Between two pieces of work a thread may wait as long as it likes.
    now[0] += 1000
    loop.turn()
    assert supervisor.check() is None


def test_an_event_loop_that_does_not_answer_a_ping_is_noticed(parts, now) -> None:
    supervisor, _, _, loop = parts
    assert supervisor.check() is None  # ping sent
    loop.turn()
    assert supervisor.check() is None  # answered; another ping sent
    loop.stuck = True
    now[0] += 10
    assert supervisor.check() is None
    now[0] += 1
    assert supervisor.check() == "the event loop has not answered for 11 s"


def test_a_closed_event_loop_is_noticed(parts) -> None:
    supervisor, _, _, loop = parts
    loop.closed = True
    assert supervisor.check() == "the event loop is closed"


def test_the_watchdog_logs_critical_and_exits_non_zero(caplog) -> None:
    claims = FakeThread()
    exited = threading.Event()
    codes: list[int] = []

    def exit_process(code: int) -> None:
        codes.append(code)
        exited.set()

    supervisor = Supervisor(
        watched=[Watched("claims", lambda: claims)],
        ping_loop=lambda cb: cb(),
        check_every=0.01,
        exit_process=exit_process,
    )
    supervisor.start()
    try:
        time.sleep(0.1)
        assert not exited.is_set()
        claims.alive = False
        assert exited.wait(2)
    finally:
        supervisor.close()
    assert codes == [EXIT_CODE] and EXIT_CODE != 0
    [record] = [r for r in caplog.records if r.levelname == "CRITICAL"]
    assert "the claims thread died" in record.getMessage()


def test_a_closed_watchdog_does_not_exit_when_the_threads_stop() -> None:
    claims = FakeThread()
    codes: list[int] = []
    supervisor = Supervisor(
        watched=[Watched("claims", lambda: claims)],
        ping_loop=lambda cb: cb(),
        check_every=0.01,
        exit_process=codes.append,
    )
    supervisor.start()
    supervisor.close()
    claims.alive = False
    time.sleep(0.1)
    assert codes == []
