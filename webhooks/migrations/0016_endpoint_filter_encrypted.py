"""Endpoint.filter encrypted at rest, like the endpoint's other secrets (CONTRACT section 2):
the column becomes text holding a Fernet token of the filter's compact JSON (core.crypto,
keyed by HOMING_ENCRYPTION_KEY), "" for none (webhooks/services/endpoint_filters.py).

PostgreSQL refuses to change the type of a column that a trigger's WHEN names, so the
routing trigger of 0013 is dropped for the change and made again after it, unchanged.
Steps: drop the trigger; jsonb → text (nullable); encrypt every filter; "" for none, not
null; the trigger again. Reversible: decrypted back to jsonb.
"""

import json

from django.db import migrations, models

from core import crypto

DROP_TRIGGER = "DROP TRIGGER IF EXISTS endpoint_routing_update ON webhooks_endpoint;"
CREATE_TRIGGER = """
CREATE TRIGGER endpoint_routing_update AFTER UPDATE ON webhooks_endpoint
    FOR EACH ROW WHEN (
        OLD.is_active IS DISTINCT FROM NEW.is_active
        OR OLD.event_types IS DISTINCT FROM NEW.event_types
        OR OLD.filter IS DISTINCT FROM NEW.filter
        OR OLD.tenant_id IS DISTINCT FROM NEW.tenant_id
        OR OLD.id IS DISTINCT FROM NEW.id
    ) EXECUTE FUNCTION webhooks_routing_bump();
"""


def drop_trigger(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP_TRIGGER)


def create_trigger(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP_TRIGGER + CREATE_TRIGGER)


def encrypt_filters(apps, schema_editor):
    Endpoint = apps.get_model("webhooks", "Endpoint")
    for endpoint in Endpoint.all_objects.exclude(filter=None).iterator(chunk_size=500):
        spec = json.loads(endpoint.filter)  # the jsonb's text
        sealed = "" if spec is None else crypto.encrypt(
            json.dumps(spec, ensure_ascii=False, separators=(",", ":"))
        )
        Endpoint.all_objects.filter(pk=endpoint.pk).update(filter=sealed)
    _checks_now(schema_editor)


def decrypt_filters(apps, schema_editor):
    Endpoint = apps.get_model("webhooks", "Endpoint")
    Endpoint.all_objects.filter(filter="").update(filter=None)
    for endpoint in Endpoint.all_objects.exclude(filter=None).iterator(chunk_size=500):
        plain = crypto.decrypt(endpoint.filter)
        Endpoint.all_objects.filter(pk=endpoint.pk).update(filter=plain)
    _checks_now(schema_editor)


def _checks_now(schema_editor):
    # The updates left the deferred foreign-key checks pending, and PostgreSQL alters no
    # table with pending trigger events (the next step's ALTER TABLE).
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")


class Migration(migrations.Migration):
    dependencies = [
        ("webhooks", "0015_event_trace_context"),
    ]

    operations = [
        migrations.RunPython(drop_trigger, create_trigger),
        migrations.AlterField(
            model_name="endpoint",
            name="filter",
            field=models.TextField(blank=True, null=True),  # noqa: DJ001 (a step: not null below)
        ),
        migrations.RunPython(encrypt_filters, decrypt_filters, elidable=False),
        migrations.AlterField(
            model_name="endpoint",
            name="filter",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.RunPython(create_trigger, drop_trigger),
    ]
