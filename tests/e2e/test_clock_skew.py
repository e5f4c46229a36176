"""A worker whose clock is 10 minutes off still signs with the right time."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time

import pytest
from standardwebhooks.webhooks import Webhook as StandardWebhook

from tests.factories import delivery_of, endpoint_via_api, event_via_api
from tests.harness import FAKETIME_LIBRARY
from tests.processes import wait_until

pytestmark = pytest.mark.e2e

LIBRARIES = glob.glob(FAKETIME_LIBRARY)


def ten_minutes_ahead() -> dict[str, str]:
    return {
        "LD_PRELOAD": LIBRARIES[0],
        "FAKETIME": "+10m",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",  # timeouts and intervals stay true
    }


@pytest.mark.skipif(not LIBRARIES, reason="libfaketime not installed (apt-get install faketime)")
def test_a_worker_ten_minutes_ahead_signs_webhooks_receivers_accept(
    alice, homing, receiver_factory, settings
):
    skewed = ten_minutes_ahead()
    # The skew is real in a process started so: its clock reads ~600 s ahead.
    said = subprocess.run(
        [sys.executable, "-c", "import time; print(time.time())"],
        env={**os.environ, **skewed},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert 590 < float(said) - time.time() < 610

    settings.HOMING_RETRY_SCHEDULE = "1s,1s,1s"
    receiver = receiver_factory()
    endpoint = endpoint_via_api(alice, receiver.url)
    homing("worker", **skewed)
    event = event_via_api(alice)

    [request] = receiver.wait_for(1)
    # True time, not the worker's (600 s ahead): the bound only leaves room for a busy
    # machine between the signing and this line.
    assert abs(int(request.headers["webhook-timestamp"]) - time.time()) < 60
    payload = StandardWebhook(endpoint["secret"]).verify(request.body, request.headers)
    assert payload["id"] == event["id"]
    wait_until(lambda: delivery_of(event).status == "succeeded")
