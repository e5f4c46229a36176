"""GET /healthz: 200 when the database and the broker answer, 503 naming what does not."""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, JsonResponse

from config.celery import app


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
            conn.ensure_connection(max_retries=1, timeout=2)
        return True
    except Exception:
        return False


def healthz(request: HttpRequest) -> JsonResponse:
    checks = {"database": _database_ok(), "broker": _broker_ok()}
    failing = [name for name, ok in checks.items() if not ok]
    body = {name: "ok" if ok else "unavailable" for name, ok in checks.items()}
    if failing:
        body["message"] = f"{' and '.join(failing)} not answering"
        return JsonResponse(body, status=503)
    return JsonResponse(body)
