"""A routing version per tenant, bumped by triggers on every endpoint change that alters
routing (deliveries/intake/routing.py says why). PostgreSQL only: other databases read
the endpoints on every ingestion and never cache."""

import django.db.models.deletion
from django.db import migrations, models

CREATE = """
CREATE SEQUENCE webhooks_routing_version_seq;

CREATE FUNCTION webhooks_routing_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        INSERT INTO webhooks_routingversion (tenant_id, version)
        VALUES (OLD.tenant_id, nextval('webhooks_routing_version_seq'))
        ON CONFLICT (tenant_id) DO UPDATE SET version = EXCLUDED.version;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO webhooks_routingversion (tenant_id, version)
        VALUES (NEW.tenant_id, nextval('webhooks_routing_version_seq'))
        ON CONFLICT (tenant_id) DO UPDATE SET version = EXCLUDED.version;
    END IF;
    RETURN NULL;
END $$;

-- Every insert and delete; updates only when what routing reads changed (the workers
-- update health columns all the time, which must not invalidate every cache).
CREATE TRIGGER endpoint_routing_insert_delete AFTER INSERT OR DELETE ON webhooks_endpoint
    FOR EACH ROW EXECUTE FUNCTION webhooks_routing_bump();
CREATE TRIGGER endpoint_routing_update AFTER UPDATE ON webhooks_endpoint
    FOR EACH ROW WHEN (
        OLD.is_active IS DISTINCT FROM NEW.is_active
        OR OLD.event_types IS DISTINCT FROM NEW.event_types
        OR OLD.tenant_id IS DISTINCT FROM NEW.tenant_id
        OR OLD.id IS DISTINCT FROM NEW.id
    ) EXECUTE FUNCTION webhooks_routing_bump();
"""

DROP = """
DROP TRIGGER IF EXISTS endpoint_routing_update ON webhooks_endpoint;
DROP TRIGGER IF EXISTS endpoint_routing_insert_delete ON webhooks_endpoint;
DROP FUNCTION IF EXISTS webhooks_routing_bump();
DROP SEQUENCE IF EXISTS webhooks_routing_version_seq;
"""


def create_triggers(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop_triggers(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):

    dependencies = [
        ("webhooks", "0005_endpoint_health"),
    ]

    operations = [
        migrations.CreateModel(
            name="RoutingVersion",
            fields=[
                (
                    "tenant",
                    models.OneToOneField(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="+",
                        serialize=False,
                        to="webhooks.tenant",
                    ),
                ),
                ("version", models.BigIntegerField()),
            ],
        ),
        migrations.RunPython(create_triggers, drop_triggers),
    ]
