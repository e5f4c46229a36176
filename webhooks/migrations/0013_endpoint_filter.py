"""Endpoint.filter, and the routing trigger taught that it alters routing: a cached
routing must not keep routing by a filter that was changed (deliveries/intake/routing.py)."""

from django.db import migrations, models

TRIGGER_WITH_FILTER = """
DROP TRIGGER IF EXISTS endpoint_routing_update ON webhooks_endpoint;
CREATE TRIGGER endpoint_routing_update AFTER UPDATE ON webhooks_endpoint
    FOR EACH ROW WHEN (
        OLD.is_active IS DISTINCT FROM NEW.is_active
        OR OLD.event_types IS DISTINCT FROM NEW.event_types
        OR OLD.filter IS DISTINCT FROM NEW.filter
        OR OLD.tenant_id IS DISTINCT FROM NEW.tenant_id
        OR OLD.id IS DISTINCT FROM NEW.id
    ) EXECUTE FUNCTION webhooks_routing_bump();
"""

TRIGGER_WITHOUT_FILTER = """
DROP TRIGGER IF EXISTS endpoint_routing_update ON webhooks_endpoint;
CREATE TRIGGER endpoint_routing_update AFTER UPDATE ON webhooks_endpoint
    FOR EACH ROW WHEN (
        OLD.is_active IS DISTINCT FROM NEW.is_active
        OR OLD.event_types IS DISTINCT FROM NEW.event_types
        OR OLD.tenant_id IS DISTINCT FROM NEW.tenant_id
        OR OLD.id IS DISTINCT FROM NEW.id
    ) EXECUTE FUNCTION webhooks_routing_bump();
"""


def with_filter(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(TRIGGER_WITH_FILTER)


def without_filter(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(TRIGGER_WITHOUT_FILTER)


class Migration(migrations.Migration):
    dependencies = [
        ("webhooks", "0012_endpoint_transport_options"),
    ]

    operations = [
        migrations.AddField(
            model_name="endpoint",
            name="filter",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.RunPython(with_filter, without_filter),
    ]
