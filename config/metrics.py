"""GET /metrics in the Prometheus text format (counters from Redis, gauges from SQL).

Answers 200 whatever is down: a family whose source cannot be read is left out (and
logged), so a Redis outage shows as missing series rather than as a failed scrape of
everything else. Gauges read a bounded number of rows whatever the tables' sizes
(exact counts up to a bound through partial indexes, planner estimates beyond) and are
cached a few seconds (config.gauges): a scrape costs no table scan. With
HOMING_METRICS_TOKEN set it wants `Authorization: Bearer <token>`.
"""

from __future__ import annotations

import hmac
import logging

import redis
from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse

from config.gauges import queue_gauges_cached
from core import counters
from deliveries.lifecycle.attempt_stats import DURATION_BOUNDS_MS, DURATION_COLUMNS

logger = logging.getLogger(__name__)

OUTCOMES = ("success", "retryable", "fatal")


def _family(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    lines += [f"{name}{labels} {value:g}" for labels, value in samples]
    return lines


def _authorized(request: HttpRequest) -> bool:
    token = settings.HOMING_METRICS_TOKEN
    if not token:
        return True
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    # Constant-time: the comparison must not tell how much of a guess was right.
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), token.encode()
    )


def _counter_lines() -> list[str]:
    try:
        counts = counters.read_all()
    except (redis.RedisError, OSError, DatabaseError):
        logger.warning("metrics: counters unavailable, left out", exc_info=True)
        return []
    return [
        *_family(
            "homing_attempts_total",
            "counter",
            "Delivery attempts by outcome.",
            [(f'{{outcome="{o}"}}', counts.get(f"attempts_{o}", 0)) for o in OUTCOMES],
        ),
        *_family(
            "homing_attempt_duration_seconds",
            "histogram",
            "Delivery attempt durations by outcome (the whole attempt: DNS to answer).",
            _duration_samples(counts),
        ),
        *_family(
            "homing_events_total",
            "counter",
            "Events accepted.",
            [("", counts.get("events", 0))],
        ),
        *_family(
            "homing_events_invalid_total",
            "counter",
            "Events accepted although their data fails their type's schema "
            "(HOMING_VALIDATE_EVENTS=warn).",
            [("", counts.get("events_invalid", 0))],
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


def _duration_samples(counts: dict[str, int]) -> list[tuple[str, float]]:
    """Cumulative buckets, sum and count per outcome, from the shared counters
    (deliveries/lifecycle/attempt_stats.attempt_duration_counts)."""
    samples: list[tuple[str, float]] = []
    bounds = [f"{bound / 1000:g}" for bound in DURATION_BOUNDS_MS] + ["+Inf"]
    for outcome in OUTCOMES:
        seen = 0
        for bound, column in zip(bounds, DURATION_COLUMNS, strict=True):
            seen += counts.get(f"duration_{outcome}_{column}", 0)
            samples.append((f'_bucket{{outcome="{outcome}",le="{bound}"}}', seen))
        total_ms = counts.get(f"duration_{outcome}_sum_ms", 0)
        samples.append((f'_sum{{outcome="{outcome}"}}', total_ms / 1000))
        samples.append((f'_count{{outcome="{outcome}"}}', seen))
    return samples


def _gauge_lines() -> list[str]:
    try:
        gauges = queue_gauges_cached()
    except DatabaseError:
        logger.warning("metrics: queue gauges unavailable, left out", exc_info=True)
        return []
    return [
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
            "homing_open_circuits",
            "gauge",
            "Endpoints whose circuit is open or half-open.",
            [("", gauges.open_circuits)],
        ),
    ]


def metrics(request: HttpRequest) -> HttpResponse:
    if not _authorized(request):
        response = JsonResponse({"message": "Use 'Authorization: Bearer <metrics token>'."})
        response.status_code = 401
        response["WWW-Authenticate"] = "Bearer"
        return response
    lines = [*_counter_lines(), *_gauge_lines()]
    return HttpResponse(
        "\n".join(lines) + "\n", content_type="text/plain; version=0.0.4; charset=utf-8"
    )
