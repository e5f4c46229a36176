from django.db import migrations, models

from core.migration_operations import AddIndexOnline


class Migration(migrations.Migration):
    atomic = False  # CONCURRENTLY cannot run inside a transaction

    dependencies = [
        ("deliveries", "0005_deliveries_autovacuum"),
    ]

    operations = [
        AddIndexOnline(
            model_name="delivery",
            index=models.Index(
                fields=["endpoint", "next_attempt_at"],
                name="delivery_endpoint_due",
                condition=models.Q(status="pending"),
            ),
        ),
    ]
