"""Fixtures shared by the whole suite.

PostgreSQL and Redis are real servers started by `tests/harness.py` (`make test`),
which exports DATABASE_URL and REDIS_URL before Django loads.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest
from django.conf import settings

if TYPE_CHECKING:
    from pytest_django.fixtures import Settings as SettingsFixture
    from rest_framework.test import APIClient

    from webhooks.models import Tenant

# process_guard: a test that starts a process without the e2e marker fails.
# pytester: the guard's own test runs a small pytest session inside this one.
pytest_plugins = ["tests.process_guard", "pytester"]


@pytest.fixture(scope="session")
def redis_url() -> str:
    url = os.environ.get("REDIS_URL", "")
    if not url.startswith("redis://"):
        pytest.exit("Run the suite with `make test`: it starts PostgreSQL and Redis for it.")
    return url


@pytest.fixture
def postgres_dsn(django_db_blocker: object) -> str:
    """A libpq URL of the test database (pytest-django's `test_` one)."""
    db = settings.DATABASES["default"]
    return f"postgresql://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


@pytest.fixture(autouse=True)
def _flush_redis(redis_url: str) -> None:
    import redis

    redis.Redis.from_url(redis_url).flushdb()


@pytest.fixture(autouse=True)
def _allow_loopback_endpoints(settings: SettingsFixture) -> None:
    # Test receivers listen on 127.0.0.1; the guard itself is tested with it switched on.
    settings.HOMING_ALLOW_PRIVATE_NETWORKS = True


@dataclass
class Actor:
    """A tenant with an API client that sends its key."""

    tenant: Tenant
    key: str
    client: APIClient


@pytest.fixture
def make_actor(db: None) -> Callable[[str], Actor]:
    from rest_framework.test import APIClient

    from webhooks.services.tenants import tenant_create

    def make(name: str) -> Actor:
        tenant, key = tenant_create(name=name)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        return Actor(tenant=tenant, key=key, client=client)

    return make


@pytest.fixture
def alice(make_actor: Callable[[str], Actor]) -> Actor:
    return make_actor("Alice Payments")


@pytest.fixture
def bob(make_actor: Callable[[str], Actor]) -> Actor:
    return make_actor("Bob Shipping")
