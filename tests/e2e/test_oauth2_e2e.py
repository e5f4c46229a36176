"""A real worker, a real token server and a receiver that wants its tokens: one token
request for many webhooks, a fresh one when the receiver refuses the old token."""

from __future__ import annotations

import pytest

from tests.factories import endpoint_via_api, event_via_api
from tests.processes import wait_until
from tests.token_server import TokenServer, bearer_behaviour

pytestmark = pytest.mark.e2e


@pytest.fixture
def tokens():
    server = TokenServer().start()
    yield server
    server.stop()


def test_webhooks_carry_a_shared_token_refreshed_after_a_401(
    alice, homing, receiver_factory, tokens
):
    receiver = receiver_factory(bearer_behaviour(tokens))
    auth = {
        "type": "oauth2_client_credentials",
        "token_url": tokens.url,
        "client_id": tokens.client_id,
        "client_secret": tokens.client_secret,
    }
    endpoint_via_api(alice, receiver.url, auth=auth)
    homing("worker")
    events = [event_via_api(alice) for _ in range(10)]
    receiver.wait_for(10)
    assert tokens.fetches == 1
    assert {r.headers["authorization"] for r in receiver.requests} == {"Bearer tok-1"}

    tokens.rotate()
    late = event_via_api(alice)
    path = f"/api/v1/deliveries/{late['deliveries'][0]['id']}"
    wait_until(lambda: alice.client.get(path).json()["status"] == "succeeded")
    detail = alice.client.get(path).json()
    assert detail["attempt_count"] == 1  # the refresh happened within the one attempt
    [refused, accepted] = [r for r in receiver.requests if r.headers["webhook-id"] == late["id"]]
    assert refused.headers["authorization"] == "Bearer tok-1"
    assert accepted.headers["authorization"] == "Bearer tok-2-rotated"
    assert tokens.fetches == 2 and len(events) == 10
