from __future__ import annotations

import subprocess
import sys

import pytest
from django.db import OperationalError
from django.test import Client

from tests.processes import process_env
from webhooks.models import ApiKey, Tenant


def test_unknown_api_routes_are_json_404(alice):
    for path in ["/api/v1/nope", "/api/v2/events", "/api/"]:
        response = alice.client.get(path)
        assert response.status_code == 404
        assert response["Content-Type"] == "application/json"
        assert "nope" in response.json()["message"] or response.json()["message"]


def test_the_schema_describes_every_route(db):
    response = Client().get("/api/v1/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in [
        "/api/v1/endpoints",
        "/api/v1/endpoints/{id}",
        "/api/v1/events",
        "/api/v1/events/{id}",
        "/api/v1/endpoints/{id}/rotate-secret",
    ]:
        assert path in paths, path


def test_the_docs_page_uses_only_local_assets(db):
    response = Client().get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger-ui" in html.lower()
    assert "cdn" not in html and "https://" not in html.replace("https://github", "")


def test_healthz_is_ok_when_database_and_broker_answer(db):
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"database": "ok", "broker": "ok"}


def test_healthz_stays_200_and_names_the_broker_when_it_is_down(db, settings):
    """Web processes keep accepting events during a Redis outage: a load balancer must
    keep them (it answered 503, dropping every web node)."""
    from config.celery import app

    original = app.conf.broker_url
    app.conf["broker_url"] = "redis://127.0.0.1:1/0"
    try:
        response = Client().get("/healthz")
    finally:
        app.conf["broker_url"] = original
    assert response.status_code == 200
    assert response.json()["database"] == "ok"
    assert response.json()["broker"] == "down"
    assert "broker" in response.json()["message"]


def test_healthz_is_503_when_the_database_does_not_answer(db, monkeypatch):
    from django.db import connection

    def refused(*args, **kwargs):
        raise OperationalError("connection refused")

    with monkeypatch.context() as patched:  # undone before the test database's teardown
        patched.setattr(connection, "cursor", refused)
        response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json()["database"] == "down"
    assert "database" in response.json()["message"]


@pytest.mark.e2e
def test_create_tenant_prints_a_working_key_on_the_last_line(transactional_db, live_server):
    result = subprocess.run(
        [sys.executable, "manage.py", "create_tenant", "Acme Inc"],
        capture_output=True,
        text=True,
        check=True,
        env=process_env(),
    )
    key = result.stdout.strip().splitlines()[-1]
    assert key.startswith("hom_")
    tenant = Tenant.objects.get(name="Acme Inc")
    assert ApiKey.objects.filter(tenant=tenant).count() == 1
    assert key not in ApiKey.objects.get(tenant=tenant).key_hash
    import requests

    response = requests.get(
        f"{live_server.url}/api/v1/endpoints", headers={"Authorization": f"Bearer {key}"}, timeout=5
    )
    assert response.status_code == 200


def test_the_root_leads_staff_to_the_login(db):
    response = Client().get("/")  # the staff console: its login page first
    assert response.status_code == 302 and response["Location"] == "/login/?next=/"
    login = Client().get("/", follow=True)
    assert login.status_code == 200 and b"Sign in" in login.content
