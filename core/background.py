"""Work a request hands to a background thread instead of waiting on a round trip.

A `Gatherer` passes whatever has queued up to its handler in one call, `linger` seconds
after the first item came: a request does not wait on the handler, and under load
hundreds of requests share one call (one wake-up message, one counter update) instead of
waking the thread, and making a round trip, once each.

Gatherers are created at import, without a thread: until their process's owner starts
them (`start_gatherers`: the worker's `Worker.start()`, the web process's gunicorn
worker), `put` hands each item to the handler in the caller's thread, as a script, the
scheduler or a test needs. The owner stops them with `close_gatherers`.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")
CLOSE_SECONDS = 5.0

_STOP = object()  # put by close(): the thread ends after what was put before it


class Gatherer(Generic[T]):
    def __init__(
        self, handle: Callable[[list[T]], None], *, name: str, most: int, linger: float
    ) -> None:
        """`handle` gets at most `most` items per call, in the order they were put."""
        self.name = name
        self._handle = handle
        self._most = most
        self._linger = linger
        self._queue: queue.SimpleQueue[T | object] = queue.SimpleQueue()
        self._unfinished = 0  # put and not handled yet
        self._finished = threading.Condition()
        self._thread: threading.Thread | None = None
        _every.append(self)

    @property
    def thread(self) -> threading.Thread | None:
        """The background thread while started (its owner watches it)."""
        return self._thread

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError(f"{self.name} is already started")
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def close(self, timeout: float = CLOSE_SECONDS) -> None:
        """Stop the thread once it has handled what was put, then handle inline again."""
        with self._finished:
            thread, self._thread = self._thread, None
        if thread is None:
            return
        self._queue.put(_STOP)
        thread.join(timeout)
        self.flush(timeout)  # what it left (if it died or did not finish in time)

    def put(self, item: T) -> None:
        with self._finished:  # not while close() stops the thread
            started = self._thread is not None
            if started:
                self._unfinished += 1
                self._queue.put(item)
        if not started:
            self._hand_over(item)  # nobody started a thread here: the caller handles it

    def flush(self, timeout: float = CLOSE_SECONDS) -> None:
        """Handle what is still queued, in the calling thread, and wait (at most `timeout`
        seconds) for what the background thread is handling."""
        while True:
            try:
                first = self._queue.get_nowait()
            except queue.Empty:
                break
            if first is not _STOP:
                self._hand_over(first, counted=True)
        with self._finished:
            self._finished.wait_for(lambda: self._unfinished <= 0, timeout)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is _STOP:
                return
            time.sleep(self._linger)  # let more come
            self._hand_over(first, counted=True)

    def _hand_over(self, first: T | object, *, counted: bool = False) -> None:
        items = [first]
        while counted and len(items) < self._most:
            try:
                more = self._queue.get_nowait()
            except queue.Empty:
                break
            if more is _STOP:
                self._queue.put(_STOP)  # for the thread, after this call
                break
            items.append(more)
        try:
            self._handle(items)  # type: ignore[arg-type]  # _STOP never gets here
        except Exception:
            # The handlers log their own failures; this keeps the thread alive whatever.
            logger.exception("%s could not handle %d items", self.name, len(items))
        finally:
            if counted:
                with self._finished:
                    self._unfinished -= len(items)
                    self._finished.notify_all()


_every: list[Gatherer[Any]] = []  # of any item type


def start_gatherers() -> list[Gatherer[Any]]:
    """Start the threads of the gatherers not started yet, and return those: the caller
    owns them and closes them (at exit at the latest, so that nothing put is lost when
    the process ends normally)."""
    started = [gatherer for gatherer in _every if gatherer.thread is None]
    for gatherer in started:
        gatherer.start()
    atexit.register(close_gatherers, started)
    return started


def close_gatherers(gatherers: list[Gatherer[Any]]) -> None:
    for gatherer in gatherers:
        gatherer.close()
