"""GET /metrics in the Prometheus text format (counters from Redis, gauges from SQL)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from core import counters
from deliveries.selectors import queue_gauges

OUTCOMES = ("success", "retryable", "fatal")


def _family(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    lines += [f"{name}{labels} {value:g}" for labels, value in samples]
    return lines


def metrics(request: HttpRequest) -> HttpResponse:
    counts = counters.read_all()
    gauges = queue_gauges()
    lines = [
        *_family(
            "homing_attempts_total",
            "counter",
            "Delivery attempts by outcome.",
            [(f'{{outcome="{o}"}}', counts.get(f"attempts_{o}", 0)) for o in OUTCOMES],
        ),
        *_family(
            "homing_deliveries",
            "gauge",
            "Deliveries by status.",
            [(f'{{status="{s}"}}', n) for s, n in gauges.deliveries_by_status.items()],
        ),
        *_family(
            "homing_dead_letters",
            "gauge",
            "Dead letters not replayed yet.",
            [("", gauges.dead_letters_waiting)],
        ),
        *_family(
            "homing_dead_letter_oldest_age_seconds",
            "gauge",
            "Age of the oldest dead letter not replayed yet.",
            [("", round(gauges.oldest_dead_letter_age, 3))],
        ),
        *_family(
            "homing_delivery_lag_seconds",
            "gauge",
            "How late the most overdue pending attempt is.",
            [("", round(gauges.delivery_lag, 3))],
        ),
        *_family(
            "homing_idempotency_replays_total",
            "counter",
            "Requests answered from a stored Idempotency-Key response.",
            [("", counts.get("idempotency_replays", 0))],
        ),
        *_family(
            "homing_idempotency_conflicts_total",
            "counter",
            "Idempotency-Key requests refused (409 in progress, 422 other body).",
            [("", counts.get("idempotency_conflicts", 0))],
        ),
    ]
    return HttpResponse(
        "\n".join(lines) + "\n", content_type="text/plain; version=0.0.4; charset=utf-8"
    )
