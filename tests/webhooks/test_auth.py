from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from webhooks.models import ApiKey

ROUTES = [
    ("get", "/api/v1/endpoints"),
    ("post", "/api/v1/endpoints"),
    ("get", "/api/v1/events"),
    ("post", "/api/v1/events"),
    ("get", "/api/v1/events/evt_x"),
    ("get", "/api/v1/endpoints/ep_x"),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.parametrize("header", [None, "Bearer hom_wrong", "Basic abc", "Bearer "])
def test_a_missing_or_wrong_key_gets_401(db, method, path, header):
    client = APIClient()
    if header:
        client.credentials(HTTP_AUTHORIZATION=header)
    response = getattr(client, method)(path, {}, format="json")
    assert response.status_code == 401
    assert response.json()["message"]


def test_only_a_hash_of_the_key_is_stored(alice):
    stored = ApiKey.objects.get(tenant=alice.tenant)
    assert alice.key not in stored.key_hash and len(stored.key_hash) == 64
    assert alice.client.get("/api/v1/endpoints").status_code == 200


def test_a_revoked_key_gets_401(alice):
    from webhooks.services.tenants import api_key_revoke

    assert alice.client.get("/api/v1/endpoints").status_code == 200  # now cached
    api_key_revoke(api_key=ApiKey.objects.get(tenant=alice.tenant))
    assert alice.client.get("/api/v1/endpoints").status_code == 401
