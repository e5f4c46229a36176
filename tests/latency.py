"""How soon deliveries start, as a tenant sees it: events posted at a steady pace through
the real API, and when a receiver first saw each of them (webhook-id is the event id)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable

from tests.receivers import Receiver


def paced(count: int, interval: float, send: Callable[[int], str]) -> dict[str, float]:
    """Call `send(n)` every `interval` seconds (on a fixed beat, so a slow call does not
    push the rest back); each returned event id with the time.time() it returned."""
    accepted: dict[str, float] = {}
    start = time.monotonic()
    for n in range(count):
        time.sleep(max(0.0, start + n * interval - time.monotonic()))
        event_id = send(n)
        accepted[event_id] = time.time()
    return accepted


def post_event(actor, event_type: str, n: int) -> str:
    """POST /api/v1/events as `actor`; the new event's id (after its 202)."""
    response = actor.client.post(
        "/api/v1/events", {"type": event_type, "data": {"n": n}}, format="json"
    )
    assert response.status_code == 202, response.content
    return response.json()["id"]


def first_sight(receiver: Receiver) -> dict[str, float]:
    """Each webhook-id with when the receiver first saw it."""
    seen: dict[str, float] = {}
    for request in list(receiver.requests):
        webhook_id = request.headers.get("webhook-id", "")
        seen[webhook_id] = min(request.at, seen.get(webhook_id, math.inf))
    return seen


def wait_for_ids(receiver: Receiver, ids: Iterable[str], timeout: float) -> None:
    """Until the receiver has seen every id, or `timeout`: the caller judges what came."""
    wanted = set(ids)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not wanted <= first_sight(receiver).keys():
        time.sleep(0.05)


def start_delays(accepted: dict[str, float], receiver: Receiver) -> list[float]:
    """Seconds from each event's 202 to its first request; inf for one never seen."""
    seen = first_sight(receiver)
    return [seen.get(event_id, math.inf) - at for event_id, at in accepted.items()]


def p99(values: list[float]) -> float:
    """The nearest-rank 99th percentile (with under 100 values, the largest)."""
    ordered = sorted(values)
    return ordered[math.ceil(0.99 * len(ordered)) - 1]
