"""Log lines for people (`LOG_FORMAT=text`) or for a log pipeline (`json`).

With `json` every line of every process (web, worker, scheduler, commands) is one JSON
object with `time`, `level`, `logger`, `message`, plus the ids a line is about: lines
logged while serving an API request carry its `request_id`; lines about a delivery pass
`tenant_id`, `event_id`, `delivery_id`, `endpoint_id` through `extra=`
(deliveries/log_context.py).
"""

from __future__ import annotations

import logging
import logging.config
from contextvars import ContextVar
from typing import Any

from pythonjsonlogger.core import RESERVED_ATTRS

# The id of the API request this thread is serving (set by config.request_id).
request_id: ContextVar[str | None] = ContextVar("request_id", default=None)

FORMATS = ("text", "json")
JSON_FORMAT: dict[str, Any] = {
    "fmt": ["levelname", "name", "message"],
    "rename_fields": {"levelname": "level", "name": "logger"},
    "timestamp": "time",  # ISO 8601 in UTC
    # Django's request object and server_time are not data for a log pipeline.
    "reserved_attrs": [*RESERVED_ATTRS, "request", "server_time"],
}


class RequestIdFilter(logging.Filter):
    """Stamps the current request's id on each record logged while serving it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            current = request_id.get()
            if current is None:
                # django.request logs a 4xx/5xx after the middleware has returned; the
                # request it passes along still knows its id.
                current = getattr(getattr(record, "request", None), "request_id", None)
            if current is not None:
                record.request_id = current
        return True


def logging_config(*, log_format: str, level: str) -> dict[str, Any]:
    """The LOGGING setting; Celery's worker is told to use it too (config/celery.py)."""
    if log_format not in FORMATS:
        raise ValueError(f"LOG_FORMAT must be one of {', '.join(FORMATS)}, not {log_format!r}")
    formatters = {
        "text": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "pythonjsonlogger.json.JsonFormatter", **JSON_FORMAT},
    }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": "config.logs.RequestIdFilter"}},
        "formatters": {log_format: formatters[log_format]},
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": log_format,
                "filters": ["request_id"],
            }
        },
        "root": {"handlers": ["console"], "level": level},
    }


def configure(config: dict[str, Any]) -> None:
    """Django's LOGGING_CONFIG (and Celery's, through its setup_logging signal): Python
    warnings become log lines too, so that with LOG_FORMAT=json nothing prints raw text."""
    logging.config.dictConfig(config)
    logging.captureWarnings(True)
