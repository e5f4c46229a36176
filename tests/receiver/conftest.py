"""Receiver-only fixtures. redis_url and the Django database come from tests/conftest.py."""

from __future__ import annotations

import base64
import os
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from homing_receiver import DedupStore, Feed, MemoryStore, RedisStore, Webhook

from tests.receiver.feed_server import API_KEY, ENDPOINT_ID, FeedServer, make_message


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: takes seconds (builds a venv, spawns processes)")


@pytest.fixture
def secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(24)).decode()


@pytest.fixture
def webhook(secret: str) -> Webhook:
    return Webhook(secret)


@pytest.fixture
def sign_headers(webhook: Webhook) -> Callable[..., dict[str, str]]:
    """Headers a Standard Webhooks sender would send for *body*, signed with `secret`."""

    def sign(
        body: bytes | str,
        *,
        msg_id: str | None = None,
        timestamp: float | None = None,
        signer: Webhook | None = None,
    ) -> dict[str, str]:
        msg_id = msg_id or f"msg_{uuid.uuid4().hex}"
        ts = int(time.time() if timestamp is None else timestamp)
        return {
            "webhook-id": msg_id,
            "webhook-timestamp": str(ts),
            "webhook-signature": (signer or webhook).sign(msg_id, ts, body),
        }

    return sign


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[Any]:
    import redis

    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def redis_prefix(redis_client: Any) -> Iterator[str]:
    # A prefix per test instead of FLUSHDB: other suites may share this Redis.
    prefix = f"test:receiver:{uuid.uuid4().hex}:"
    yield prefix
    for key in redis_client.scan_iter(match=prefix + "*"):
        redis_client.delete(key)


@pytest.fixture
def redis_store(redis_client: Any, redis_prefix: str) -> RedisStore:
    return RedisStore(redis_client, prefix=redis_prefix, sequence_prefix=redis_prefix + "seq:")


@pytest.fixture
def django_store(transactional_db: None) -> DedupStore:
    # transactional_db: claims must really commit, as other threads and processes
    # read them over their own connections.
    from homing_receiver.django import DjangoStore

    return DjangoStore()


@pytest.fixture(
    params=[
        "memory",
        "redis",
        # The mark, not just the dynamic fixture request below, is what makes
        # pytest-django create the test database: it only looks at static requests.
        pytest.param("django", marks=pytest.mark.django_db(transaction=True)),
    ]
)
def store(request: pytest.FixtureRequest) -> DedupStore:
    if request.param == "memory":
        return MemoryStore()
    return request.getfixturevalue(f"{request.param}_store")


@pytest.fixture
def event_id() -> str:
    return f"msg_{uuid.uuid4().hex}"


@pytest.fixture
def feed_server() -> Iterator[FeedServer]:
    """alice's endpoint's catch-up feed, holding sequences 1..250."""
    server = FeedServer([make_message(n) for n in range(1, 251)]).start()
    yield server
    server.close()


@pytest.fixture
def feed(feed_server: FeedServer) -> Feed:
    # Short backoff and timeout keep the retry tests quick.
    return Feed(feed_server.base_url, API_KEY, ENDPOINT_ID, timeout=2, retry_for=10, backoff=0.05)
