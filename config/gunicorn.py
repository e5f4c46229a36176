"""gunicorn's own log lines in the format LOG_FORMAT names, and the web worker class.

gunicorn logs through handlers of its own, set up before Django loads; with
`LOG_FORMAT=json` this logger class gives them the JSON formatter, and each access-log
line the request's id (the X-Request-ID the response carries) as a field.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from typing import Any

from gunicorn.glogging import Logger
from gunicorn.workers.gthread import ThreadWorker
from pythonjsonlogger.json import JsonFormatter

from config.logs import JSON_FORMAT


class HomingLogger(Logger):
    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        self.json = os.environ.get("LOG_FORMAT", "text") == "json"
        if self.json:
            for log in (self.error_log, self.access_log):
                for handler in log.handlers:
                    handler.setFormatter(JsonFormatter(**JSON_FORMAT))

    def access(
        self, resp: Any, req: Any, environ: MutableMapping[str, Any], request_time: Any
    ) -> None:
        if not self.json:
            super().access(resp, req, environ, request_time)
            return
        if not self.access_log_enabled:
            return
        status = str(resp.status).split(None, 1)[0]
        request_id = dict((k.lower(), v) for k, v in resp.headers).get("x-request-id")
        # Path and method only: the query string and headers (API keys) stay out.
        self.access_log.info(
            "%s %s %s",
            environ.get("REQUEST_METHOD"),
            environ.get("PATH_INFO"),
            status,
            extra={
                "request_id": request_id,
                "method": environ.get("REQUEST_METHOD"),
                "path": environ.get("PATH_INFO"),
                "status": int(status) if status.isdigit() else status,
                "duration_ms": round(request_time.total_seconds() * 1000, 1),
                "remote_addr": environ.get("REMOTE_ADDR"),
                "bytes": getattr(resp, "sent", None),
            },
        )


class BalancedThreadWorker(ThreadWorker):
    """gunicorn's gthread worker, accepting a connection only while a thread is free.

    Every worker of a gunicorn master accepts from the same listening socket, and a
    keep-alive connection stays with the worker that accepted it. gthread accepts
    whatever comes while it can, so a client opening a pool of connections at once (a
    producer, a load balancer, wrk) often had them all accepted by one worker: that
    process was bound by its GIL while the other idled, and a 2-core machine took half
    the events it could (the bench's batch step: one worker at 85% CPU, the other at 0).
    Here a worker whose threads are all busy leaves new connections to the others; they
    wait in the listen backlog only until some thread anywhere is free.
    """

    _accepting: bool  # ThreadWorker's own flag (set_accept_enabled); its stubs omit it

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.handling = 0  # connections in the thread pool (changed on the main thread only)

    def load_wsgi(self) -> None:
        super().load_wsgi()
        from django.apps import apps

        if not apps.ready:  # another WSGI app on this worker class (the bench's ceiling)
            return
        # This process's background threads (the publisher, the counters), started by
        # their owner once Django is loaded; closed at exit (core/background.py). Their
        # modules are imported here, whatever the WSGI application loaded already.
        import core.counters
        import deliveries.wakeups
        from core.background import start_gatherers

        assert core.counters.gatherer and deliveries.wakeups.publisher  # created, not started
        start_gatherers()

    def enqueue_req(self, conn: Any) -> None:
        self.handling += 1
        super().enqueue_req(conn)

    def finish_request(self, conn: Any, fs: Any) -> None:
        self.handling -= 1
        super().finish_request(conn, fs)

    def wait_for_and_dispatch_events(self, timeout: float | None) -> None:
        # run() re-enables accepting on every turn of its loop when under
        # worker_connections; this turns it off again while no thread is free.
        if self._accepting and self.handling >= self.cfg.threads:
            self.set_accept_enabled(False)
        super().wait_for_and_dispatch_events(timeout)
