"""A stored secret no key of HOMING_ENCRYPTION_KEY opens (the key changed without a
rotation) never turns a read into a 500: alice's "lost" endpoint was saved under a key
that is gone, her "fine" one under the current key. The API shows the lost fields as
null and names them in `unreadable`; asking for them on purpose is a 409 saying how to
replace them; replacing them works."""

from __future__ import annotations

import pytest

from tests.certificates import Authority
from tests.factories import endpoint_via_api, endpoint_via_api_with_lost_key
from webhooks.models import Endpoint

FILTER = {"type": "invoice.paid"}
HEADERS = {"Authorization": "Bearer alice-token"}
AUTH = {
    "type": "oauth2_client_credentials",
    "token_url": "http://127.0.0.1:9/token",
    "client_id": "alice",
    "client_secret": "alice-client-secret",
}


@pytest.fixture(scope="module")
def authority() -> Authority:
    return Authority()


@pytest.fixture
def lost(alice, settings, authority) -> str:
    return endpoint_via_api_with_lost_key(
        alice,
        settings,
        filter=FILTER,
        headers=HEADERS,
        auth=AUTH,
        tls_client_certificate=authority.client_pem("alice-client"),
    )["id"]


@pytest.fixture
def fine(alice, lost) -> str:
    return endpoint_via_api(alice, filter=FILTER, headers=HEADERS)["id"]


def test_a_read_shows_the_lost_fields_as_null_and_names_them(alice, lost, fine):
    shown = alice.client.get(f"/api/v1/endpoints/{lost}")
    assert shown.status_code == 200
    body = shown.json()
    assert body["filter"] is None and body["headers"] is None
    assert body["tls_client_certificate_info"] is None
    assert body["auth"]["client_id"] == "alice"  # what is not encrypted is still shown
    assert body["unreadable"] == ["secret", "headers", "filter", "auth", "tls_client_certificate"]

    other = alice.client.get(f"/api/v1/endpoints/{fine}").json()
    assert (other["filter"], other["headers"], other["unreadable"]) == (FILTER, HEADERS, [])


def test_a_list_with_a_lost_endpoint_still_lists_every_endpoint(alice, lost, fine):
    listed = alice.client.get("/api/v1/endpoints")
    assert listed.status_code == 200
    by_id = {item["id"]: item for item in listed.json()["results"]}
    assert set(by_id) == {lost, fine}
    assert by_id[lost]["filter"] is None and "filter" in by_id[lost]["unreadable"]
    assert by_id[fine]["filter"] == FILTER


def test_the_lost_secret_answers_409_until_it_is_rotated(alice, lost):
    refused = alice.client.get(f"/api/v1/endpoints/{lost}/secret")
    assert refused.status_code == 409
    body = refused.json()
    assert (body["code"], body["field"]) == ("unreadable", "signing secret")
    assert "HOMING_ENCRYPTION_KEY" in body["message"] and "Rotate it" in body["message"]

    rotated = alice.client.post(f"/api/v1/endpoints/{lost}/rotate-secret")
    assert rotated.status_code == 200
    assert alice.client.get(f"/api/v1/endpoints/{lost}/secret").json() == rotated.json()
    # The lost secret signs nothing: not kept in its grace, where the worker would wait
    # for a key to open it (and send nothing) until the grace ended.
    assert Endpoint.objects.get(pk=lost).previous_secrets == []
    assert "secret" not in alice.client.get(f"/api/v1/endpoints/{lost}").json()["unreadable"]


def test_changing_the_signing_scheme_of_a_lost_secret_gives_a_new_one(alice, lost):
    patched = alice.client.patch(f"/api/v1/endpoints/{lost}", {"signing": "ed25519"}, format="json")
    assert patched.status_code == 200, patched.content
    answer = alice.client.get(f"/api/v1/endpoints/{lost}/secret").json()
    assert answer["secret"].startswith("whsk_") and answer["public_key"].startswith("whpk_")


def test_trying_the_lost_filter_answers_409_naming_it_and_a_given_one_is_tried(alice, lost):
    event = {"type": "invoice.paid", "data": {}}
    refused = alice.client.post(
        f"/api/v1/endpoints/{lost}/filter-test", {"event": event}, format="json"
    )
    assert refused.status_code == 409
    assert refused.json()["field"] == "filter" and "give `filter`" in refused.json()["message"]
    tried = alice.client.post(
        f"/api/v1/endpoints/{lost}/filter-test", {"filter": FILTER, "event": event}, format="json"
    )
    assert tried.status_code == 200 and tried.json()["matches"] is True


def test_replacing_the_lost_fields_makes_them_readable_again(alice, lost, authority):
    patched = alice.client.patch(
        f"/api/v1/endpoints/{lost}",
        {
            "filter": FILTER,
            "headers": HEADERS,
            "auth": AUTH,
            "tls_client_certificate": authority.client_pem("alice-client"),
        },
        format="json",
    )
    assert patched.status_code == 200
    body = patched.json()
    assert body["unreadable"] == ["secret"]  # rotated on its own (above)
    assert body["filter"] == FILTER and body["headers"] == HEADERS
    assert body["tls_client_certificate_info"]["subject"] == "CN=alice-client"
