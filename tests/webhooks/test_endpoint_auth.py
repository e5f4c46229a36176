"""`auth`: OAuth2 client credentials, checked on save, the client secret write-only and
stored encrypted."""

from __future__ import annotations

import json

from django.db import connection

URL = "http://127.0.0.1:9/hooks"
AUTH = {
    "type": "oauth2_client_credentials",
    "token_url": "https://auth.example.com/oauth/token",
    "client_id": "homing",
    "client_secret": "s3cr3t-value",
    "scope": "webhooks",
}


def create(actor, **fields):
    return actor.client.post("/api/v1/endpoints", {"url": URL, **fields}, format="json")


def stored_auth(endpoint_id: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT auth::text FROM webhooks_endpoint WHERE id = %s", [endpoint_id])
        return cursor.fetchone()[0]


def test_auth_is_shown_without_its_client_secret_and_stored_encrypted(alice):
    created = create(alice, auth=AUTH)
    assert created.status_code == 201, created.content
    shown = {k: v for k, v in AUTH.items() if k != "client_secret"} | {"audience": None}
    body = created.json()
    assert body["auth"] == shown
    detail = alice.client.get(f"/api/v1/endpoints/{body['id']}").json()
    assert detail["auth"] == shown and "s3cr3t-value" not in json.dumps(detail)
    assert "s3cr3t-value" not in stored_auth(body["id"])


def test_a_patch_without_the_client_secret_keeps_it(alice):
    body = create(alice, auth=AUTH).json()
    before = stored_auth(body["id"])
    changed = {k: v for k, v in AUTH.items() if k != "client_secret"} | {"scope": "other"}
    patched = alice.client.patch(
        f"/api/v1/endpoints/{body['id']}", {"auth": changed}, format="json"
    )
    assert patched.status_code == 200 and patched.json()["auth"]["scope"] == "other"
    assert (
        json.loads(stored_auth(body["id"]))["client_secret"] == json.loads(before)["client_secret"]
    )
    cleared = alice.client.patch(f"/api/v1/endpoints/{body['id']}", {"auth": None}, format="json")
    assert cleared.json()["auth"] is None


def test_bad_auth_is_refused_naming_the_field(alice):
    cases = {
        "auth.type": {**AUTH, "type": "basic"},
        "auth.token_url": {**AUTH, "token_url": "ftp://auth.example.com/"},
        "auth.client_id": {**AUTH, "client_id": ""},
        "auth.client_secret": {k: v for k, v in AUTH.items() if k != "client_secret"},
        "auth.password": {**AUTH, "password": "x"},
        "auth": "a string",
    }
    for field, auth in cases.items():
        response = create(alice, auth=auth)
        assert response.status_code == 400, (field, response.content)
        assert field in response.content.decode(), (field, response.content)


def test_a_token_url_on_a_private_network_is_refused_like_an_endpoint_url(alice, settings):
    settings.HOMING_ALLOW_PRIVATE_NETWORKS = False
    response = create(
        alice,
        url="https://93.184.215.14/hooks",
        auth={**AUTH, "token_url": "http://10.0.0.1/token"},
    )
    assert response.status_code == 400 and "auth.token_url" in response.content.decode()
