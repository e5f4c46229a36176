"""Settings of the payments receiver: the test passes everything through the environment."""

from __future__ import annotations

import environ

env = environ.Env()

SECRET_KEY = "payments-app-test-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
USE_TZ = True

# Only the receiver library's app: its ProcessedWebhook table already exists in the
# test database (tests.settings installs the app). payments_received is created by
# the test with raw SQL, so this project has no migrations of its own.
INSTALLED_APPS = ["homing_receiver.django"]
MIDDLEWARE = ["tests.e2e.payments_app.middleware.lose_first_success"]
ROOT_URLCONF = "tests.e2e.payments_app.urls"
WSGI_APPLICATION = "tests.e2e.payments_app.wsgi.application"

DATABASES = {"default": env.db("DATABASE_URL")}

HOMING_WEBHOOK_SECRET = env.str("HOMING_WEBHOOK_SECRET")
# A file the first successful answer creates; its existence tells every gunicorn
# worker that one response has already been "lost".
LOST_RESPONSE_MARKER = env.str("LOST_RESPONSE_MARKER")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(levelname)s %(name)s %(message)s"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "plain"}},
    # The test reads the duplicate notice ("Skipped duplicate webhook <id>") from here.
    "loggers": {"homing_receiver": {"handlers": ["stderr"], "level": "INFO"}},
}
