"""gunicorn's own log lines (start-up, access log) in the format LOG_FORMAT names.

gunicorn logs through handlers of its own, set up before Django loads; with
`LOG_FORMAT=json` this logger class gives them the JSON formatter, and each access-log
line the request's id (the X-Request-ID the response carries) as a field.
"""

from __future__ import annotations

import os
from typing import Any

from gunicorn.glogging import Logger
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

    def access(self, resp: Any, req: Any, environ: dict[str, Any], request_time: Any) -> None:
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
