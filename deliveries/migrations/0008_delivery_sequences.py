import django.db.models.deletion
from django.db import migrations, models

# Deliveries made before sequences existed are numbered in the order they were created,
# per endpoint, and each endpoint's counter starts after its highest number. (SQLite
# has UPDATE … FROM since 3.33.)
NUMBER_EXISTING = [
    """
    UPDATE deliveries_delivery SET sequence = numbered.n FROM (
        SELECT id, row_number() OVER (PARTITION BY endpoint_id ORDER BY created_at, id) AS n
        FROM deliveries_delivery
    ) AS numbered WHERE deliveries_delivery.id = numbered.id
    """,
    """
    INSERT INTO deliveries_sequencecounter (endpoint_id, last, purged_through)
    SELECT endpoint_id, max(sequence), 0 FROM deliveries_delivery GROUP BY endpoint_id
    """,
]


def number_existing(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        for statement in NUMBER_EXISTING:
            cursor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [
        ("deliveries", "0007_delivery_due_by_time"),
        ("webhooks", "0006_routing_version"),
    ]

    operations = [
        migrations.CreateModel(
            name="SequenceCounter",
            fields=[
                (
                    "endpoint",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="+",
                        serialize=False,
                        to="webhooks.endpoint",
                    ),
                ),
                ("last", models.BigIntegerField(default=0)),
                ("purged_through", models.BigIntegerField(default=0)),
            ],
        ),
        migrations.AddField(
            model_name="delivery",
            name="sequence",
            field=models.BigIntegerField(null=True),
        ),
        migrations.RunPython(number_existing, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="delivery",
            name="sequence",
            field=models.BigIntegerField(),
        ),
        migrations.AddConstraint(
            model_name="delivery",
            constraint=models.UniqueConstraint(
                fields=("endpoint", "sequence"), name="delivery_endpoint_sequence"
            ),
        ),
    ]
