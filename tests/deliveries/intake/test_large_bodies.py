"""Large request bodies are parsed a few at a time per web process: parsed JSON takes up
to 25 times its size, and a burst of large batches must not exhaust the process."""

from __future__ import annotations

import http.client
import json
import threading
from pathlib import Path

import pytest

from deliveries.intake import api as intake
from tests.processes import Web
from webhooks.models import Event

# Within HOMING_MAX_BATCH_BYTES (8 MiB), the most objects a body can hold: 200 MB parsed.
HOSTILE = ('{"events": [' + ",".join(["{}"] * 2_790_000) + "]}").encode()
LARGE_VALID = json.dumps(
    {"events": [{"type": "a.b", "data": {"text": "x" * 2_000}} for _ in range(600)]}
)


def test_a_large_batch_waits_for_a_place_then_is_told_to_come_back(alice, monkeypatch):
    monkeypatch.setattr(intake, "LARGE_BODY_WAIT_SECONDS", 0.2)
    assert len(LARGE_VALID) > intake.LARGE_BODY_BYTES
    for _ in range(intake.LARGE_BODIES_AT_ONCE):  # other requests hold every place
        assert intake._large_bodies.acquire(timeout=1)
    try:
        busy = alice.client.post(
            "/api/v1/events/batch", LARGE_VALID, content_type="application/json"
        )
    finally:
        for _ in range(intake.LARGE_BODIES_AT_ONCE):
            intake._large_bodies.release()
    assert busy.status_code == 503 and busy["Retry-After"] == "1"
    assert "send it again shortly" in busy.json()["message"]
    assert not Event.objects.exists()

    accepted = alice.client.post(
        "/api/v1/events/batch", LARGE_VALID, content_type="application/json"
    )
    assert accepted.status_code == 202 and len(accepted.json()["events"]) == 600


def _post(port: int, key: str, body: bytes, statuses: list[int]) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        connection.request("POST", "/api/v1/events/batch", body=body, headers=headers)
        statuses.append(connection.getresponse().status)
    finally:
        connection.close()


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_burst_of_hostile_batches_does_not_take_the_memory_of_one_each(alice, tmp_path):
    web = Web(tmp_path, "web", threads=6)
    try:
        master = web.process.pid
        [worker] = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        before = _peak_rss_mib(int(worker))
        statuses: list[int] = []
        posts = [
            threading.Thread(target=_post, args=(web.port, alice.key, HOSTILE, statuses))
            for _ in range(6)
        ]
        for post in posts:
            post.start()
        for post in posts:
            post.join()
        grew = _peak_rss_mib(int(worker)) - before
    finally:
        web.process.stop()
    # Each is refused, for its items without a type or, when it waited too long for a
    # place, with a 503; six parsed at once would take ~1,200 MiB.
    assert len(statuses) == 6 and set(statuses) <= {400, 503} and statuses.count(400) >= 2
    assert grew < 3 * 230, f"the web process grew by {grew:.0f} MiB"
