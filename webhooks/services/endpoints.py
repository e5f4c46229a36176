from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.exceptions import HomingError
from deliveries.services.creation import deliveries_create_for_event
from deliveries.services.lifecycle import deliveries_kill_for_endpoint
from deliveries.signing import generate_secret
from webhooks.models import Endpoint, Event, Tenant

if TYPE_CHECKING:
    from deliveries.models import Delivery

ENDPOINT_FIELDS = ("url", "description", "event_types", "rate_limit", "headers", "is_active")
TEST_EVENT_TYPE = "homing.test"


class EndpointInactive(HomingError):
    status_code = 409


def endpoint_create(*, tenant: Tenant, **fields: Any) -> Endpoint:
    return Endpoint.objects.create(tenant=tenant, secret=generate_secret(), **fields)


@transaction.atomic
def endpoint_update(*, endpoint: Endpoint, **fields: Any) -> Endpoint:
    was_active = endpoint.is_active
    for name, value in fields.items():
        if name not in ENDPOINT_FIELDS:
            raise ValueError(f"{name} is not an updatable endpoint field")
        setattr(endpoint, name, value)
    endpoint.save(update_fields=[*fields, "updated_at"])
    if was_active and not endpoint.is_active:
        deliveries_kill_for_endpoint(endpoint_id=endpoint.id, reason="endpoint deactivated")
    return endpoint


def endpoint_delete(*, endpoint: Endpoint) -> None:
    endpoint.delete()


def endpoint_rotate_secret(*, endpoint: Endpoint) -> Endpoint:
    """New signing secret; the old one keeps signing too for the rotation grace period."""
    grace = timedelta(seconds=settings.HOMING_SECRET_ROTATION_GRACE)
    endpoint.previous_secret = endpoint.secret
    endpoint.previous_secret_expires_at = timezone.now() + grace
    endpoint.secret = generate_secret()
    endpoint.save(
        update_fields=["secret", "previous_secret", "previous_secret_expires_at", "updated_at"]
    )
    return endpoint


def endpoint_signing_secrets(*, endpoint: Endpoint) -> list[str]:
    """Every secret that signs now: the current one, and the previous one in its grace."""
    secrets = [endpoint.secret]
    expires = endpoint.previous_secret_expires_at
    if endpoint.previous_secret and expires and expires > timezone.now():
        secrets.append(endpoint.previous_secret)
    return secrets


@transaction.atomic
def endpoint_send_test(*, endpoint: Endpoint) -> tuple[Event, Delivery]:
    """A `homing.test` event delivered to this endpoint only, whatever its event_types:
    the way to check a new endpoint's URL and signature verification end to end."""
    if not endpoint.is_active:
        raise EndpointInactive("The endpoint is deactivated; activate it to send a test event.")
    event = Event.objects.create(
        tenant_id=endpoint.tenant_id, type=TEST_EVENT_TYPE, data={"test": True}
    )
    [delivery] = deliveries_create_for_event(event=event, endpoints=[endpoint])
    return event, delivery
