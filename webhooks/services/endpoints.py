from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from core import crypto
from core.crypto import UNREADABLE, opened
from core.exceptions import HomingError, InvalidInput, StoredValueUnreadable
from webhooks.models import Endpoint, Tenant
from webhooks.secrets import ED25519, HMAC_SHA256, generate_secret, public_key, signing_of
from webhooks.services.endpoint_auth import endpoint_auth_check
from webhooks.services.endpoint_certificates import endpoint_certificate_check
from webhooks.services.endpoint_filters import filter_sealed
from webhooks.services.endpoint_rules import endpoint_fields_check
from webhooks.signals import endpoint_retired

HEALTH_CLEARED = {
    "circuit_state": Endpoint.Circuit.CLOSED,
    "consecutive_failures": 0,
    "failing_since": None,
    "disabled_reason": "",
    "probe_at": None,
}
ENDPOINT_FIELDS = (
    "url",
    "description",
    "event_types",
    "rate_limit",
    "headers",
    "is_active",
    "owner",
    "signing",
    "auth",
    "filter",
    "tls_client_certificate",
)
# Each secret still in its grace adds a signature to every request; a burst of rotations
# keeps the newest this many (a receiver lagging further behind than that is lost).
MAX_PREVIOUS_SECRETS = 10
TEST_EVENT_TYPE = "homing.test"


class EndpointInactive(HomingError):
    """Something only an active endpoint can do (a test event, a retry): activate it first."""

    status_code = 409


def endpoint_create(*, tenant: Tenant, by_consumer: bool = False, **fields: Any) -> Endpoint:
    """A new endpoint with a fresh (encrypted) secret; refuses bad fields and the limits
    (the owner's too when `by_consumer`: a consumer key or portal session made it)."""
    _check_names(fields)
    fields = endpoint_fields_check(fields=fields)
    if "url" not in fields:
        raise InvalidInput("url", "This field is required.")
    if "headers" in fields:
        fields["headers"] = _headers_encrypted(fields["headers"])
    if "auth" in fields:
        fields["auth"] = endpoint_auth_check(auth=fields["auth"])
    if "filter" in fields:
        fields["filter"] = filter_sealed(fields["filter"])
    if "tls_client_certificate" in fields:
        pem = fields["tls_client_certificate"]
        fields["tls_client_certificate"] = endpoint_certificate_check(pem=pem)
    with transaction.atomic():
        # The tenant row lock serialises creations of one tenant, so two concurrent
        # requests cannot both take the last place under the limit.
        Tenant.objects.select_for_update().filter(pk=tenant.pk).first()
        endpoint_limit_check(tenant=tenant)
        if by_consumer:
            endpoint_owner_limit_check(tenant=tenant, owner=fields.get("owner"))
        secret = generate_secret(fields.get("signing", HMAC_SHA256))
        return Endpoint.objects.create(tenant=tenant, secret=crypto.encrypt(secret), **fields)


def endpoint_limit_check(*, tenant: Tenant) -> None:
    """Refuse one endpoint more than HOMING_MAX_ENDPOINTS_PER_TENANT: many endpoints of
    one tenant on one victim URL would turn each event into that many POSTs."""
    limit = settings.HOMING_MAX_ENDPOINTS_PER_TENANT
    if Endpoint.objects.filter(tenant=tenant).count() >= limit:
        raise InvalidInput(
            "endpoints",
            f"A tenant has at most {limit} endpoints "
            "(HOMING_MAX_ENDPOINTS_PER_TENANT); delete one first.",
        )


def endpoint_owner_limit_check(*, tenant: Tenant, owner: str | None) -> None:
    """Refuse a consumer one endpoint more than HOMING_MAX_ENDPOINTS_PER_OWNER for its
    owner, so that one customer cannot take every place the tenant has."""
    limit = settings.HOMING_MAX_ENDPOINTS_PER_OWNER
    if Endpoint.objects.filter(tenant=tenant, owner=owner).count() >= limit:
        raise InvalidInput(
            "endpoints",
            f"An owner has at most {limit} endpoints "
            "(HOMING_MAX_ENDPOINTS_PER_OWNER); delete one first.",
        )


@transaction.atomic
def endpoint_update(*, endpoint: Endpoint, **fields: Any) -> Endpoint:
    """Change fields, in one short transaction whatever the backlog: deactivating stops
    claims at once, and a background job parks the pending deliveries in the dead-letter
    queue afterwards (deliveries/lifecycle/endpoint_backlogs.py, told by `endpoint_retired`)."""
    _check_names(fields)
    fields = endpoint_fields_check(fields=fields)
    was_active = Endpoint.objects.filter(pk=endpoint.pk).values_list("is_active", flat=True).get()
    if "headers" in fields:
        fields["headers"] = _headers_encrypted(fields["headers"])
    if "auth" in fields:
        fields["auth"] = endpoint_auth_check(auth=fields["auth"], stored=endpoint.auth)
    if "filter" in fields:
        fields["filter"] = filter_sealed(fields["filter"])
    if "tls_client_certificate" in fields:  # null or "" removes it
        pem = fields["tls_client_certificate"]
        fields["tls_client_certificate"] = endpoint_certificate_check(pem=pem)
    signing = fields.get("signing")
    if signing is not None and signing != _signing_now(endpoint):
        # A new scheme needs a new secret; the old one keeps signing through the grace
        # as after a rotation, so receivers can move over without losing webhooks.
        _rotate(endpoint, signing=signing)
    if fields.get("is_active") is True:
        # Re-activating is the manual recovery: a clean bill of health, circuit closed.
        fields = {**fields, **HEALTH_CLEARED}
    for name, value in fields.items():
        setattr(endpoint, name, value)
    endpoint.save(update_fields=[*fields, "updated_at"])
    if was_active and not endpoint.is_active:
        endpoint_retired.send(sender=Endpoint, endpoint_id=endpoint.id)
    return endpoint


def _check_names(fields: dict[str, Any]) -> None:
    for name in fields:
        if name not in ENDPOINT_FIELDS:
            raise ValueError(f"{name} is not an updatable endpoint field")


def endpoint_delete(*, endpoint: Endpoint) -> None:
    """Gone for the tenant at once (404, hidden everywhere, nothing more claimed or
    routed to it); its deliveries, attempts and dead letters, then the row itself, are
    removed afterwards by a background job in bounded batches. One short UPDATE however
    deep the backlog, so the request never waits on it or on a recorder."""
    now = timezone.now()
    with transaction.atomic():
        marked = Endpoint.objects.filter(pk=endpoint.pk).update(
            is_active=False, deleted_at=now, updated_at=now
        )
        if marked:
            endpoint_retired.send(sender=Endpoint, endpoint_id=endpoint.pk)


def endpoint_secret(*, endpoint: Endpoint) -> str:
    """The current signing secret in plain text (create, rotate and GET …/secret); a 409
    saying to rotate it when no configured key opens it."""
    secret = opened(lambda: crypto.decrypt(endpoint.secret))
    if secret is UNREADABLE:
        raise StoredValueUnreadable(
            "signing secret",
            "Rotate it (rotate-secret) to get a new one, then give it to the receiver.",
        )
    return secret


def _signing_now(endpoint: Endpoint) -> str:
    """The scheme the current secret signs with; the column's when it cannot be read (a
    change of scheme then rotates, which is also the way out of an unreadable secret)."""
    scheme = opened(lambda: signing_of(crypto.decrypt(endpoint.secret)))
    return endpoint.signing if scheme is UNREADABLE else scheme


def endpoint_public_key(*, endpoint: Endpoint) -> str | None:
    """The `whpk_` public key receivers verify an Ed25519 endpoint's `v1a` with (None
    for an HMAC endpoint: its secret is shared)."""
    secret = endpoint_secret(endpoint=endpoint)
    return public_key(secret) if signing_of(secret) == ED25519 else None


@transaction.atomic
def endpoint_rotate_secret(*, endpoint: Endpoint) -> Endpoint:
    """New signing secret of the endpoint's scheme; every replaced one keeps signing until
    its own grace ends."""
    return _rotate(endpoint, signing=endpoint.signing)


def _rotate(endpoint: Endpoint, *, signing: str) -> Endpoint:
    now = timezone.now()
    grace = timedelta(seconds=settings.HOMING_SECRET_ROTATION_GRACE)
    locked = Endpoint.objects.select_for_update().get(pk=endpoint.pk)  # concurrent rotations
    retired = {"secret": locked.secret, "expires_at": (now + grace).isoformat()}
    # A secret no configured key opens signs nothing, and kept in its grace it would hold
    # back every delivery of the endpoint (a worker sends only when it opens them all):
    # rotating is the way out of an unreadable secret, so it is not kept.
    keep = [
        item
        for item in [retired, *locked.previous_secrets]
        if _expiry(item) > now and _readable(item["secret"])
    ]
    endpoint.previous_secrets = keep[:MAX_PREVIOUS_SECRETS]
    endpoint.secret = crypto.encrypt(generate_secret(signing))
    endpoint.save(update_fields=["secret", "previous_secrets", "updated_at"])
    return endpoint


def endpoint_headers(*, endpoint: Endpoint) -> dict[str, str]:
    """The custom headers in plain text (sent with each webhook, shown to the tenant).
    Their values are stored encrypted like secrets: they are often credentials."""
    return headers_decrypted(endpoint.headers)


def headers_decrypted(headers: dict[str, str] | None) -> dict[str, str]:
    """Stored header values (Fernet tokens under their plain names) in plain text."""
    return {name: crypto.decrypt(token) for name, token in (headers or {}).items()}


def _headers_encrypted(headers: dict[str, str]) -> dict[str, str]:
    return {name: crypto.encrypt(value) for name, value in headers.items()}


def endpoint_signing_secrets(*, endpoint: Endpoint) -> list[str]:
    """Every secret that signs now, decrypted: the current one, then those in their grace."""
    return [crypto.decrypt(token) for token in [endpoint.secret, *_in_grace(endpoint)]]


def endpoint_secrets_in_grace(*, endpoint: Endpoint) -> int:
    """How many replaced secrets still sign besides the current one (nothing decrypted)."""
    return len(_in_grace(endpoint))


def _in_grace(endpoint: Endpoint) -> list[str]:
    if not endpoint.previous_secrets:  # the usual case, asked on every attempt
        return []
    now = timezone.now()
    return [item["secret"] for item in endpoint.previous_secrets or [] if _expiry(item) > now]


def _readable(token: str) -> bool:
    return opened(lambda: crypto.decrypt(token)) is not UNREADABLE


def _expiry(item: dict[str, str]) -> datetime:
    parsed = parse_datetime(item.get("expires_at", ""))
    return parsed if parsed is not None else timezone.now()


def endpoint_secrets_reencrypt() -> int:
    """Re-encrypt every stored secret, header value, OAuth2 client secret, client
    certificate and filter with the first HOMING_ENCRYPTION_KEY; returns how many endpoints (the key
    rotation command). Row by row, each in its own short transaction."""
    done = 0
    for pk in Endpoint.all_objects.values_list("pk", flat=True).iterator(chunk_size=500):
        with transaction.atomic():
            endpoint = Endpoint.all_objects.select_for_update().filter(pk=pk).first()
            if endpoint is None:
                continue
            endpoint.secret = crypto.reencrypt(endpoint.secret)
            endpoint.previous_secrets = [
                {**item, "secret": crypto.reencrypt(item["secret"])}
                for item in endpoint.previous_secrets or []
            ]
            endpoint.headers = {
                name: crypto.reencrypt(token) for name, token in (endpoint.headers or {}).items()
            }
            if endpoint.auth and endpoint.auth.get("client_secret"):
                secret = crypto.reencrypt(endpoint.auth["client_secret"])
                endpoint.auth = {**endpoint.auth, "client_secret": secret}
            if endpoint.tls_client_certificate:
                endpoint.tls_client_certificate = crypto.reencrypt(endpoint.tls_client_certificate)
            if endpoint.filter:
                endpoint.filter = crypto.reencrypt(endpoint.filter)
            endpoint.save(
                update_fields=[
                    "secret",
                    "previous_secrets",
                    "headers",
                    "auth",
                    "tls_client_certificate",
                    "filter",
                ]
            )
        done += 1
    return done
