"""Settings of the producer app: the test passes everything through the environment."""

from __future__ import annotations

import environ

env = environ.Env()

SECRET_KEY = "producer-app-test-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
USE_TZ = True
TIME_ZONE = "UTC"

# The outbox is the only app; `orders` is created by the test with raw SQL.
INSTALLED_APPS = ["homing_client.django"]
MIDDLEWARE: list[str] = []
ROOT_URLCONF = "tests.client.producer_app.urls"
WSGI_APPLICATION = "tests.client.producer_app.wsgi.application"

# The producer's own database, on the test PostgreSQL server but separate from Homing's.
DATABASES = {"default": env.db("PRODUCER_DATABASE_URL")}

HOMING_URL = env.str("HOMING_URL", default="http://127.0.0.1:9")
HOMING_API_KEY = env.str("HOMING_API_KEY", default="")
HOMING_TIMEOUT = env.float("HOMING_TIMEOUT", default=10)
HOMING_RELAY_RETRY_FOR = env.float("HOMING_RELAY_RETRY_FOR", default=1)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {"homing_client": {"handlers": ["stderr"], "level": "INFO"}},
}
