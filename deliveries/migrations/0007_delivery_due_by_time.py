from django.db import migrations, models

from core.migration_operations import AddIndexOnline, RemoveIndexOnline


class Migration(migrations.Migration):
    atomic = False  # CONCURRENTLY cannot run inside a transaction

    dependencies = [
        ("deliveries", "0006_delivery_endpoint_due"),
    ]

    operations = [
        AddIndexOnline(
            model_name="delivery",
            index=models.Index(
                fields=["next_attempt_at"],
                name="delivery_due_by_time",
                condition=models.Q(status="pending", attempt_count__gte=0),
            ),
        ),
        RemoveIndexOnline(model_name="delivery", name="delivery_due"),
    ]
