"""Homing settings: every value comes from the environment (see .env.example)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import environ

from config.env import (
    choice,
    duration,
    embedded_secret_key,
    env,
    number,
    proxy_url,
    read_dotenv,
    schedule,
)
from config.logs import logging_config
from core.tracing import tracing_wanted

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

read_dotenv(BASE_DIR)

# No DATABASE_URL means the embedded set-up (SQLite and the file broker under var/), a
# developer's machine: DEBUG defaults on and a secret key is made once in var/, so every
# manage.py command works in any shell as `make run` prints it. A DATABASE_URL means
# production: DEBUG defaults off and a missing SECRET_KEY stops start-up.
EMBEDDED = not env.str("DATABASE_URL", default="")
DEBUG = env.bool("DEBUG", default=EMBEDDED)
SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    if not EMBEDDED:
        raise environ.ImproperlyConfigured(
            "SECRET_KEY must be set when DATABASE_URL is set (a production database)"
        )
    SECRET_KEY = embedded_secret_key(VAR_DIR)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["*"] if DEBUG else ["localhost", "127.0.0.1"])
# Behind a TLS-terminating proxy (docs/deploy.md): trust its X-Forwarded-Proto/-Host/-For.
# Without this, Django sees plain http behind an https proxy and refuses every form's
# POST (login included) on the origin check. Only for a web process that nothing but the
# proxy can reach: the headers are believed as sent.
HOMING_TRUST_PROXY = env.bool("HOMING_TRUST_PROXY", default=False)
if HOMING_TRUST_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    USE_X_FORWARDED_HOST = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    # A year, the usual value for a site that is https only. No includeSubDomains: other
    # names under the same domain are not ours to pin. Sent on https answers only.
    SECURE_HSTS_SECONDS = 365 * 24 * 3600
# No script reads either cookie (forms carry the CSRF token), so both stay out of its reach.
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = True
# Origins (scheme://host[:port]) allowed to post forms besides the request's own host, e.g.
# when the proxy's public name differs from the Host it forwards.
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
for origin in CSRF_TRUSTED_ORIGINS:
    if "://" not in origin:
        raise environ.ImproperlyConfigured(
            f"CSRF_TRUSTED_ORIGINS: {origin!r} needs its scheme (https://{origin})"
        )
# Origins allowed to embed the consumer portal in an iframe (CSP frame-ancestors); none by
# default. Checked here because each one is copied into a response header.
HOMING_PORTAL_FRAME_ANCESTORS = env.list("HOMING_PORTAL_FRAME_ANCESTORS", default=[])
for origin in HOMING_PORTAL_FRAME_ANCESTORS:
    if not re.fullmatch(r"https?://[A-Za-z0-9.*-]+(:[0-9]{1,5})?", origin):
        raise environ.ImproperlyConfigured(
            f"HOMING_PORTAL_FRAME_ANCESTORS: {origin!r} is not an origin (https://host[:port])"
        )

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "core",
    "webhooks",
    "deliveries",
    "dlq",
    "console",
    "portal",
]

MIDDLEWARE = [
    "config.request_id.RequestIdMiddleware",  # first: every answer carries X-Request-ID
    "config.nul_guard.NulGuardMiddleware",  # a NUL byte would reach PostgreSQL: 400/404
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "console.access.security_headers",  # Content-Security-Policy of the staff console
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
APPEND_SLASH = False  # API clients POST to exact paths; a redirect would drop the body

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'homing.sqlite3'}"),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web, worker and scheduler share one file: wait for locks instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"timeout": 20, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL;"}
    )
else:
    # Reuse connections across requests; health checks drop ones a restart broke,
    # without a round trip per request (core/postgresql).
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        DATABASES["default"]["ENGINE"] = "core.postgresql"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env.str("REDIS_URL", default="")

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
WHITENOISE_USE_FINDERS = True  # serve app static files without collectstatic in development
# The staff console's login page (Django admin keeps its own at /admin/login/).
# Flash messages live in the session (server side): the console shows a rotated secret
# in one, and the default cookie storage would send it to the browser in a cookie.
MESSAGE_STORAGE = "django.contrib.messages.storage.session.SessionStorage"
LOGIN_URL = "console:login"
LOGIN_REDIRECT_URL = "console:dashboard"
X_FRAME_OPTIONS = "DENY"

# OpenTelemetry's OTEL_* variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME,
# OTEL_TRACES_SAMPLER, …) are read by its SDK from the environment, a .env file included
# (read above); core/tracing.py builds a tracer in web and worker only when they name an
# exporter endpoint. Shown here, read-only, for `manage.py diffsettings` and tests.
HOMING_TRACING = tracing_wanted(os.environ)

# LOG_FORMAT=json: one JSON object per line, with request and delivery ids (config/logs.py).
LOG_FORMAT = env.str("LOG_FORMAT", default="text")
LOGGING_CONFIG = "config.logs.configure"
try:
    LOGGING = logging_config(log_format=LOG_FORMAT, level=env.str("LOG_LEVEL", default="INFO"))
except ValueError as exc:
    raise environ.ImproperlyConfigured(str(exc)) from None

# --- REST API -------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["webhooks.api.authentication.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["webhooks.api.permissions.IsTenant"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "api.negotiation.FirstRendererFallback",  # no 406
    "DEFAULT_PAGINATION_CLASS": "api.pagination.NewestFirstPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "api.schema.ApiSchema",  # declares each operation's errors
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Homing API",
    "DESCRIPTION": "Webhook delivery: endpoints, events, deliveries and the dead-letter queue.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",  # bundled assets: the docs page works offline
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "api.schema.link_lists_to_items",  # list -> item links (stateful clients, fuzzers)
    ],
}

# --- Celery ---------------------------------------------------------------------------
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
else:
    # No server needed: messages are files under var/broker, shared by local processes.
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(VAR_DIR / "broker" / "out"),
        "data_folder_out": str(VAR_DIR / "broker" / "out"),
        "processed_folder": str(VAR_DIR / "broker" / "processed"),
        # kombu keeps its exchange table here; its default is the working directory.
        "control_folder": str(VAR_DIR / "broker" / "control"),
        "store_processed": False,
    }
CELERY_TASK_ACKS_LATE = True  # a message is removed only after its task ran
CELERY_TASK_REJECT_ON_WORKER_LOST = True  # a killed worker's message is redelivered
CELERY_WORKER_PREFETCH_MULTIPLIER = 1  # a busy worker does not hoard messages
CELERY_TASK_IGNORE_RESULT = True  # no result backend: the database holds all state
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Celery's Django fixup closes every database connection around each task unless this
# is set: a new PostgreSQL backend per message cost more than the deliveries did.
CELERY_DB_REUSE_MAX = 1000
if REDIS_URL:
    # Redelivery of unacked messages; the scheduler's lease sweep recovers work much
    # sooner, so this only has to exceed the longest task.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}

# --- Homing ---------------------------------------------------------------------------
HOMING_RETRY_SCHEDULE = schedule("HOMING_RETRY_SCHEDULE", default="1s,5s,30s,5m,30m,2h,8h,24h")
HOMING_RETRY_JITTER = number("HOMING_RETRY_JITTER", default=0.2, minimum=0, maximum=1)
HOMING_DELIVERY_TIMEOUT = duration("HOMING_DELIVERY_TIMEOUT", default="10")
# Attempts in flight at once in one worker process (coroutines, not threads); one
# endpoint gets at most half. See README "Settings".
HOMING_SEND_CONCURRENCY = int(
    number("HOMING_SEND_CONCURRENCY", default=400, minimum=1, maximum=100_000)
)
HOMING_ALLOW_PRIVATE_NETWORKS = env.bool("HOMING_ALLOW_PRIVATE_NETWORKS", default=DEBUG)
# Every webhook, token request and TLS handshake goes through this proxy as a CONNECT
# tunnel ("" = none); it then resolves receivers' names (docs/deploy.md, "Egress proxy").
HOMING_EGRESS_PROXY = proxy_url("HOMING_EGRESS_PROXY")
HOMING_MAX_PAYLOAD_BYTES = env.int("HOMING_MAX_PAYLOAD_BYTES", default=262144)
HOMING_MAX_BATCH_EVENTS = env.int("HOMING_MAX_BATCH_EVENTS", default=1000)
# The whole body of POST /events/batch (each event also within HOMING_MAX_PAYLOAD_BYTES).
HOMING_MAX_BATCH_BYTES = env.int("HOMING_MAX_BATCH_BYTES", default=8 * 1024 * 1024)
HOMING_IDEMPOTENCY_TTL = duration("HOMING_IDEMPOTENCY_TTL", default="24h")
HOMING_SECRET_ROTATION_GRACE = duration("HOMING_SECRET_ROTATION_GRACE", default="24h")
# Finished events older than this are purged with their deliveries (dlq/services/retention.py).
HOMING_RETENTION = duration("HOMING_RETENTION", default="30d")
# PostgreSQL: the time span of one partition of events, deliveries and attempts; retention
# drops whole partitions (deliveries/lifecycle/partitions.py).
HOMING_PARTITION_INTERVAL = duration("HOMING_PARTITION_INTERVAL", default="1d")
# Django refuses larger bodies before our own 413 check could name the limit.
DATA_UPLOAD_MAX_MEMORY_SIZE = max(
    HOMING_MAX_PAYLOAD_BYTES * 2, HOMING_MAX_BATCH_BYTES * 2, 2_621_440
)

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3" or not REDIS_URL:
    # The embedded set-up keeps its database and broker files here.
    for folder in (VAR_DIR, VAR_DIR / "broker" / "out", VAR_DIR / "broker" / "processed"):
        folder.mkdir(parents=True, exist_ok=True)
SPECTACULAR_SETTINGS["SERVE_PERMISSIONS"] = ["rest_framework.permissions.AllowAny"]
# Keys that encrypt endpoint secrets at rest, comma-separated: the first encrypts, all
# decrypt (rotation: README). Empty: one key derived from SECRET_KEY.
HOMING_ENCRYPTION_KEY = env.list("HOMING_ENCRYPTION_KEY", default=[])
# /metrics requires `Authorization: Bearer <token>` when this is set.
HOMING_METRICS_TOKEN = env.str("HOMING_METRICS_TOKEN", default="")
HOMING_MAX_ENDPOINTS_PER_TENANT = int(
    number("HOMING_MAX_ENDPOINTS_PER_TENANT", default=100, minimum=1, maximum=1_000_000)
)
# Endpoints consumer credentials (a consumer key, a portal session) may create for their
# owner; the tenant's own key is bound by the tenant's limit only.
HOMING_MAX_ENDPOINTS_PER_OWNER = int(
    number("HOMING_MAX_ENDPOINTS_PER_OWNER", default=20, minimum=1, maximum=1_000_000)
)
# Backpressure (deliveries/intake/backpressure.py): events one tenant may post per second
# (empty: no limit) and unfinished deliveries it may have; over either, 429. A tenant's
# own figures (manage.py tenant_limits) override these.
HOMING_TENANT_EVENT_RATE = (
    None
    if env.str("HOMING_TENANT_EVENT_RATE", default="").strip().lower() in ("", "none")
    else int(number("HOMING_TENANT_EVENT_RATE", default=0, minimum=1, maximum=10**9))
)
HOMING_TENANT_MAX_BACKLOG = int(
    number("HOMING_TENANT_MAX_BACKLOG", default=1_000_000, minimum=1, maximum=10**12)
)
# Events whose type has a schema in the catalog: `off` (not checked), `warn` (accepted,
# counted in homing_events_invalid_total), `enforce` (400 naming the failing path).
HOMING_VALIDATE_EVENTS = choice(
    "HOMING_VALIDATE_EVENTS", default="off", choices=("off", "warn", "enforce")
)

# Endpoint health (CONTRACT section 4): the circuit opens after this many consecutive
# retryable failures, is probed once per interval, and an endpoint failing for
# HOMING_DEACTIVATE_AFTER (counted from failing_since) is deactivated.
HOMING_CIRCUIT_FAILURES = int(
    number("HOMING_CIRCUIT_FAILURES", default=10, minimum=1, maximum=1_000_000)
)
HOMING_CIRCUIT_PROBE_INTERVAL = duration("HOMING_CIRCUIT_PROBE_INTERVAL", default="30s")
HOMING_DEACTIVATE_AFTER = duration("HOMING_DEACTIVATE_AFTER", default="5d")
# How long the first delivery of an ordering key may fail while the later ones wait:
# then it dies, and the key moves on (CONTRACT section 4).
HOMING_ORDERING_MAX_BLOCK = duration("HOMING_ORDERING_MAX_BLOCK", default="1h")
# Attempts in flight to one endpoint across every worker (Redis; in-process without it).
HOMING_ENDPOINT_CONCURRENCY = int(
    number("HOMING_ENDPOINT_CONCURRENCY", default=50, minimum=1, maximum=100_000)
)
# One tenant's deliveries hold at most this share of a worker's in-flight capacity, so
# another tenant's work finds places free however slow the first one's endpoints are.
HOMING_TENANT_SHARE = number("HOMING_TENANT_SHARE", default=0.5, minimum=0.01, maximum=1)
# While first attempts wait, retries take at most this share of a worker's sends.
HOMING_RETRY_BUDGET = number("HOMING_RETRY_BUDGET", default=0.2, minimum=0.01, maximum=1)
