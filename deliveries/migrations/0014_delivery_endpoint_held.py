from django.db import migrations, models

from core.migration_operations import AddIndexOnline


class Migration(migrations.Migration):
    atomic = False  # CONCURRENTLY cannot run inside a transaction

    dependencies = [
        ("deliveries", "0013_partitioned_history"),
    ]

    operations = [
        AddIndexOnline(
            model_name="delivery",
            index=models.Index(
                fields=["endpoint"],
                name="delivery_endpoint_held",
                condition=models.Q(status="held"),
            ),
        ),
    ]
