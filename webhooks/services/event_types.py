"""The event-type catalog: entries written by the tenant's key, read by its consumers too,
and the check of incoming events against their type's schema (HOMING_VALIDATE_EVENTS)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from django.db import IntegrityError, transaction

from core import counters
from core.exceptions import InvalidInput
from webhooks.models import EventType, Tenant
from webhooks.services.event_input import EVENT_TYPE, RESERVED_TYPE_PREFIX, EventInput
from webhooks.services.event_schemas import data_error, examples_check, schema_check

logger = logging.getLogger(__name__)

FIELDS = ("name", "description", "schema", "examples", "deprecated")
MAX_DESCRIPTION = 5000


def event_type_create(*, tenant: Tenant, **fields: Any) -> EventType:
    fields = _checked(fields, schema=fields.get("schema"))
    if "name" not in fields:
        raise InvalidInput("name", "This field is required.")
    try:
        with transaction.atomic():
            return EventType.objects.create(tenant=tenant, **fields)
    except IntegrityError:
        raise InvalidInput("name", f"{fields['name']!r} is already in the catalog.") from None


def event_type_update(*, event_type: EventType, **fields: Any) -> EventType:
    """Change fields; the examples must satisfy the schema that results (either may change)."""
    if "name" in fields and fields["name"] != event_type.name:
        raise InvalidInput("name", "The name of a catalog entry cannot change.")
    fields = _checked(fields, schema=fields.get("schema", event_type.schema))
    if "schema" in fields and "examples" not in fields:
        examples_check(examples=event_type.examples, schema=fields["schema"])
    for name, value in fields.items():
        setattr(event_type, name, value)
    event_type.save(update_fields=[*fields, "updated_at"])
    return event_type


def event_type_delete(*, event_type: EventType) -> None:
    event_type.delete()


def _checked(fields: dict[str, Any], *, schema: Any) -> dict[str, Any]:
    for name in fields:
        if name not in FIELDS:
            raise ValueError(f"{name} is not an event-type field")
    checked = dict(fields)
    if "name" in checked:
        name = checked["name"]
        if not isinstance(name, str) or not EVENT_TYPE.fullmatch(name):
            raise InvalidInput("name", "Must be 1 to 255 of letters, digits and `_.:-`.")
        if name.startswith(RESERVED_TYPE_PREFIX):
            raise InvalidInput("name", f"Types starting `{RESERVED_TYPE_PREFIX}` are Homing's own.")
    if "description" in checked and len(checked["description"] or "") > MAX_DESCRIPTION:
        raise InvalidInput("description", f"At most {MAX_DESCRIPTION} characters.")
    if "schema" in checked:
        checked["schema"] = schema_check(schema=checked["schema"])
    if "examples" in checked:
        checked["examples"] = examples_check(examples=checked["examples"], schema=schema)
    return checked


def events_data_check(
    *, tenant: Tenant, inputs: Sequence[EventInput], mode: str, batch: bool
) -> None:
    """HOMING_VALIDATE_EVENTS: each event whose type has a schema in the catalog against
    it. `enforce`: the first that fails is a 400 naming it (the batch is refused whole);
    `warn`: counted in homing_events_invalid_total and accepted. One query per request,
    only when the setting is not `off`."""
    if mode == "off":
        return
    types = {item.type for item in inputs}
    schemas = dict(
        EventType.objects.filter(tenant=tenant, name__in=types, schema__isnull=False).values_list(
            "name", "schema"
        )
    )
    if not schemas:
        return
    invalid = 0
    for index, item in enumerate(inputs):
        schema = schemas.get(item.type)
        if schema is None:
            continue
        field = f"events[{index}].data" if batch else "data"
        error = data_error(schema=schema, data=item.data, field=field)
        if error is None:
            continue
        if mode == "enforce":
            raise error
        invalid += 1
    if invalid:
        logger.info("%d events do not satisfy their type's schema (accepted: warn)", invalid)
        counters.increment_soon("events_invalid", invalid)
