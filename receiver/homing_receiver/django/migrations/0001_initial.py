from __future__ import annotations

from typing import ClassVar

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies: ClassVar[list[tuple[str, str]]] = []

    operations: ClassVar[list[migrations.operations.base.Operation]] = [
        migrations.CreateModel(
            name="ProcessedWebhook",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True,
                        primary_key=True,
                        serialize=False,
                        verbose_name="ID",
                    ),
                ),
                ("key", models.CharField(max_length=255, unique=True)),
                (
                    "state",
                    models.CharField(
                        choices=[("in_progress", "In Progress"), ("done", "Done")],
                        max_length=16,
                    ),
                ),
                ("owner", models.CharField(max_length=64)),
                ("expires_at", models.DateTimeField(db_index=True)),
            ],
            options={
                "db_table": "homing_receiver_processed_webhook",
            },
        ),
    ]
