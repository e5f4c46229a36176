"""Work a request hands to a background thread instead of waiting on a round trip.

A `Gatherer` passes whatever has queued up to its handler in one call, `linger` seconds
after the first item came: a request does not wait on the handler, and under load
hundreds of requests share one call (one wake-up message, one counter update) instead of
waking the thread, and making a round trip, once each.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")


class Gatherer(Generic[T]):
    def __init__(
        self, handle: Callable[[list[T]], None], *, name: str, most: int, linger: float
    ) -> None:
        """`handle` gets at most `most` items per call, in the order they were put."""
        self._handle = handle
        self._most = most
        self._linger = linger
        self._name = name
        self._queue: queue.SimpleQueue[T] = queue.SimpleQueue()
        self._unfinished = 0  # put and not handled yet
        self._finished = threading.Condition()
        threading.Thread(target=self._run, name=name, daemon=True).start()
        atexit.register(self.flush)  # e.g. a gunicorn worker restarting

    def put(self, item: T) -> None:
        with self._finished:
            self._unfinished += 1
        self._queue.put(item)

    def flush(self, timeout: float = 5.0) -> None:
        """Handle what is still queued, in the calling thread, and wait (at most `timeout`
        seconds) for what the background thread is handling."""
        while True:
            try:
                first = self._queue.get_nowait()
            except queue.Empty:
                break
            self._hand_over(first)
        with self._finished:
            self._finished.wait_for(lambda: self._unfinished == 0, timeout)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            time.sleep(self._linger)  # let more come
            self._hand_over(first)

    def _hand_over(self, first: T) -> None:
        items = [first]
        while len(items) < self._most:
            try:
                items.append(self._queue.get_nowait())
            except queue.Empty:
                break
        try:
            self._handle(items)
        except Exception:
            # The handlers log their own failures; this keeps the thread alive whatever.
            logger.exception("%s could not handle %d items", self._name, len(items))
        finally:
            with self._finished:
                self._unfinished -= len(items)
                self._finished.notify_all()
