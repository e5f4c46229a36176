"""homing_client.django as an app: its migration and its admin, in a Django of their own.

Homing's own settings do not install the app, so these run in a subprocess: a small
project with the admin, on a database of its own on the test PostgreSQL server.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from django.conf import settings

from tests.client.stack import create_database
from tests.parallel import worker_database_name
from tests.processes import ROOT, process_env

pytestmark = pytest.mark.e2e  # runs a Django of its own in a subprocess

SCRIPT = textwrap.dedent(
    """
    import os

    import django
    import environ
    from django.conf import settings

    settings.configure(
        INSTALLED_APPS=[
            "django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
            "django.contrib.sessions", "django.contrib.messages", "homing_client.django",
        ],
        DATABASES={"default": environ.Env().db_url_config(os.environ["ADMIN_APP_DATABASE_URL"])},
        MIDDLEWARE=[
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "django.contrib.messages.middleware.MessageMiddleware",
        ],
        TEMPLATES=[{
            "BACKEND": "django.template.backends.django.DjangoTemplates",
            "APP_DIRS": True,
            "OPTIONS": {"context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]},
        }],
        ROOT_URLCONF=__name__, SECRET_KEY="test", USE_TZ=True, ALLOWED_HOSTS=["testserver"],
    )
    django.setup()
    from django.contrib import admin
    from django.urls import path
    urlpatterns = [path("admin/", admin.site.urls)]

    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client
    from homing_client.django import oldest_pending_age_seconds, publish_on_commit
    from homing_client.django.models import OutboxEvent

    call_command("makemigrations", "homing_client", "--check", "--dry-run", verbosity=0)
    call_command("migrate", verbosity=0)

    failed = publish_on_commit("order.created", {"n": 1})
    sent = publish_on_commit("order.created", {"n": 2})
    OutboxEvent.objects.filter(pk=failed).update(status="failed", last_error="HTTP 413: too big")
    OutboxEvent.objects.filter(pk=sent).update(status="sent", event_id="evt_1")
    assert oldest_pending_age_seconds() == 0.0

    User.objects.create_superuser("staff", "staff@example.com", "pw")
    browser = Client()
    browser.login(username="staff", password="pw")
    page = browser.get("/admin/homing_client/outboxevent/?status__exact=failed")
    assert page.status_code == 200 and failed in page.text and sent not in page.text
    answer = browser.post(
        "/admin/homing_client/outboxevent/",
        {"action": "send_again", "_selected_action": [failed, sent]},
        follow=True,
    )
    assert "1 row(s) queued again." in answer.text
    statuses = dict(OutboxEvent.objects.values_list("id", "status"))
    assert statuses == {failed: "pending", sent: "sent"}, statuses
    assert OutboxEvent.objects.get(pk=failed).last_error == ""
    assert oldest_pending_age_seconds() > 0
    assert browser.get("/admin/homing_client/outboxevent/add/").status_code == 403
    print("ok")
    """
)


@pytest.fixture
def admin_app_dsn(django_db_setup: None) -> str:
    db = settings.DATABASES["default"]
    server = f"postgresql://{db['USER']}@{db['HOST']}:{db['PORT']}"
    name = worker_database_name("homing_producer_admin")  # one per xdist worker
    create_database(f"{server}/postgres", name)
    return f"{server}/{name}"


def test_the_migration_matches_the_model_and_the_admin_queues_failed_rows_again(
    admin_app_dsn: str,
) -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env=process_env(DJANGO_SETTINGS_MODULE="", ADMIN_APP_DATABASE_URL=admin_app_dsn),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.stdout.strip() == "ok", result.stdout + result.stderr
