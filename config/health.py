"""GET /healthz: 200 while the database answers, the body naming the broker's state too.

Web processes keep accepting events while Redis (the broker) is down: events and their
deliveries are committed to PostgreSQL, and workers find them once the broker is back
(the scheduler's sweep, the workers' poll). A load balancer that dropped every web node
for a Redis outage would turn a delivery delay into refused events, so only the database
makes this answer 503 (CONTRACT section 2).
"""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, JsonResponse

from core.celery import app

# A health check must answer quickly even when the broker hangs.
BROKER_TIMEOUT_SECONDS = 1


def _database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except Exception:
        return False


def _broker_ok() -> bool:
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=BROKER_TIMEOUT_SECONDS)
        return True
    except Exception:
        return False


def healthz(request: HttpRequest) -> JsonResponse:
    database, broker = _database_ok(), _broker_ok()
    body: dict[str, str] = {
        "database": "ok" if database else "down",
        "broker": "ok" if broker else "down",
    }
    if not database:
        body["message"] = "database not answering"
        return JsonResponse(body, status=503)
    if not broker:
        body["message"] = "broker not answering: events are accepted, deliveries wait for it"
    return JsonResponse(body)
