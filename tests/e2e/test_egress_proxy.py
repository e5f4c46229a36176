"""A real worker behind a real egress proxy (tinyproxy, HOMING_EGRESS_PROXY): webhooks
arrive from the proxy's address; a deny rule fails the delivery with the proxy's reason
and leaves the endpoint's circuit alone."""

from __future__ import annotations

import shutil

import pytest

from tests.factories import endpoint_via_api, event_via_api
from tests.processes import wait_until
from tests.proxies import PROXY_PEER, TinyProxy
from webhooks.models import Endpoint

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not shutil.which("tinyproxy", path="/usr/bin:/usr/sbin"), reason="no tinyproxy"
    ),
]


@pytest.fixture
def proxy(tmp_path):
    started = TinyProxy(tmp_path / "proxy", deny_hosts=("blocked.example",)).start()
    yield started
    started.stop()


def test_webhooks_go_through_the_proxy_and_a_deny_rule_fails_them_retryably(
    alice, homing, receiver_factory, proxy
):
    receiver = receiver_factory()
    endpoint_via_api(alice, receiver.url, event_types=["order.paid"])
    denied = endpoint_via_api(
        alice, receiver.url.replace("127.0.0.1", "blocked.example"), event_types=["order.paid"]
    )
    homing("worker", HOMING_EGRESS_PROXY=proxy.url)
    event = event_via_api(alice, event_type="order.paid")

    [request] = receiver.wait_for(1)
    assert request.peer == PROXY_PEER and request.headers["webhook-id"] == event["id"]
    by_endpoint = {d["endpoint_id"]: d["id"] for d in event["deliveries"]}
    path = f"/api/v1/deliveries/{by_endpoint[denied['id']]}"
    # Recorded and waiting for its retry (read in one answer: a retry a second later
    # claims it again, `delivering` with the same last_error), never dead: retryable.
    seen: list[dict] = []

    def waiting_for_retry() -> bool:
        seen.append(alice.client.get(path).json())
        assert seen[-1]["status"] != "dead"
        return seen[-1]["status"] == "pending" and seen[-1]["last_error"] != ""

    wait_until(waiting_for_retry)
    refused = seen[-1]
    port = receiver.url.split(":")[2].split("/")[0]
    assert refused["last_error"] == (
        f"the proxy refused CONNECT blocked.example:{port}: HTTP 403 Filtered"
    )
    # The proxy's refusal is not the receiver's failure: its circuit count stays at 0.
    assert Endpoint.objects.get(pk=denied["id"]).consecutive_failures == 0
    assert len(receiver.requests) == 1
