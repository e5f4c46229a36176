"""The settings mypy's Django plugin loads (pyproject.toml): the test settings plus the
client library's outbox app, so that its models and the settings it reads are known."""

from __future__ import annotations

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "homing_client.django"]

# What a producer project sets for the outbox relay (client/README.md).
HOMING_URL = "http://127.0.0.1:9"
HOMING_API_KEY = ""

# What tests/e2e/payments_app, a receiver project of its own, reads from its settings.
LOST_RESPONSE_MARKER = ""
HOMING_WEBHOOK_SECRET = ""
