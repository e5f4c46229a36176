from django.db import migrations, models

from core.migration_operations import AddIndexOnline


class Migration(migrations.Migration):
    atomic = False  # CONCURRENTLY cannot run inside a transaction

    dependencies = [
        ("webhooks", "0003_encrypt_secrets_keyset_indexes"),
    ]

    operations = [
        AddIndexOnline(
            model_name="event",
            index=models.Index(fields=["created_at", "id"], name="event_created"),
        ),
    ]
