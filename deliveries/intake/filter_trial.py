"""Trying a filter before saving it: POST /endpoints/{id}/filter-test, the console's and
the portal's filter editors.

The answer comes from webhooks.filters.filter_explain, built by the same compiler as the
routing predicates, so "matches" here is what routing would decide. A consumer tries
filters only against events its own endpoints were sent: another owner's events are not
its to read.
"""

from __future__ import annotations

from typing import Any

from core.exceptions import InvalidInput
from deliveries.models import Delivery
from webhooks.filters import event_document, filter_check, filter_explain
from webhooks.models import Endpoint, Event
from webhooks.scope import Scope
from webhooks.services.endpoint_filters import endpoint_filter_readable
from webhooks.services.event_input import EVENT_TYPE, ORDERING_KEY

SAMPLE_EVENTS = 20  # what the editors try a filter against


def filter_try(
    *,
    scope: Scope,
    endpoint: Endpoint,
    body: dict[str, Any],
) -> tuple[bool, str]:
    """`{filter?, event? | event_id?}` → (matches, explanation). Without `filter`, the
    endpoint's own; exactly one of `event` (an event as posted) and `event_id`."""
    spec = (
        filter_check(body["filter"])
        if "filter" in body
        else endpoint_filter_readable(endpoint=endpoint)  # a 409 when no key opens it
    )
    has_event, has_id = body.get("event") is not None, body.get("event_id") is not None
    if has_event == has_id:
        raise InvalidInput("event", "Give either `event` or `event_id` (one of them).")
    if has_event:
        document = _posted_document(body["event"])
    else:
        event = event_for_trial(scope=scope, event_id=body["event_id"])
        if event is None:
            raise InvalidInput("event_id", "No such event.")
        document = event_document(event.type, event.data, event.ordering_key)
    return filter_explain(spec, document)


def _posted_document(event: Any) -> dict[str, Any]:
    """An event as POST /events takes it (any type, `homing.*` included: a filter may be
    meant for operational events)."""
    if not isinstance(event, dict):
        raise InvalidInput("event", "Must be a JSON object {type, data, ordering_key?}.")
    event_type, data = event.get("type"), event.get("data")
    if not isinstance(event_type, str) or not EVENT_TYPE.fullmatch(event_type):
        raise InvalidInput("event.type", "Must be 1 to 255 of letters, digits and `_.:-`.")
    if not isinstance(data, dict):
        raise InvalidInput("event.data", "Must be a JSON object.")
    key = event.get("ordering_key")
    if key is not None and not (isinstance(key, str) and ORDERING_KEY.fullmatch(key)):
        raise InvalidInput("event.ordering_key", "Must be null or 1 to 255 printable characters.")
    return event_document(event_type, data, key)


def event_for_trial(*, scope: Scope, event_id: Any) -> Event | None:
    """The event, if this scope may read it: the tenant's, and for a consumer one that
    was sent to an endpoint of its owner."""
    if not isinstance(event_id, str):
        raise InvalidInput("event_id", "Must be an event id.")
    return _events(scope).filter(pk=event_id).first()


def events_for_trial(*, scope: Scope, event_type: str) -> list[Event]:
    """The last SAMPLE_EVENTS events of a type this scope may read, newest first."""
    newest = _events(scope).filter(type=event_type).order_by("-created_at", "-id")
    return list(newest[:SAMPLE_EVENTS])


def _events(scope: Scope) -> Any:
    events = Event.objects.filter(tenant_id=scope.tenant_id)
    if scope.owner is None:
        return events
    sent = Delivery.objects.filter(tenant_id=scope.tenant_id, endpoint__owner=scope.owner)
    return events.filter(pk__in=sent.values("event_id"))
