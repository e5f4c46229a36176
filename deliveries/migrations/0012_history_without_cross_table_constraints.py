"""What partitioning history (0013) needs of the schema, on every database: no foreign
key constraint between the history tables (each drops its partitions on its own), and
the catch-up feed's (endpoint, sequence) index no longer unique (a unique index of a
partitioned table must contain its key; the locked counter gives each number once)."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("deliveries", "0011_endpoint_minutes")]

    operations = [
        migrations.AlterField(
            model_name="delivery",
            name="event",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=models.deletion.CASCADE,
                related_name="deliveries",
                to="webhooks.event",
            ),
        ),
        migrations.AlterField(
            model_name="attempt",
            name="delivery",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=models.deletion.CASCADE,
                related_name="attempts",
                to="deliveries.delivery",
            ),
        ),
        migrations.RemoveConstraint(model_name="delivery", name="delivery_endpoint_sequence"),
        migrations.AddIndex(
            model_name="delivery",
            index=models.Index(fields=["endpoint", "sequence"], name="delivery_endpoint_sequence"),
        ),
    ]
