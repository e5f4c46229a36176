from __future__ import annotations

from typing import ClassVar

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [
        ("homing_receiver", "0001_initial"),
    ]

    operations: ClassVar[list[migrations.operations.base.Operation]] = [
        migrations.CreateModel(
            name="SequenceMark",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("endpoint_id", models.CharField(max_length=255, unique=True)),
                ("last_contiguous", models.BigIntegerField(default=0)),
            ],
            options={
                "db_table": "homing_receiver_sequence_mark",
            },
        ),
        migrations.CreateModel(
            name="SeenSequence",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("endpoint_id", models.CharField(max_length=255)),
                ("sequence", models.BigIntegerField()),
            ],
            options={
                "db_table": "homing_receiver_seen_sequence",
                "constraints": [
                    models.UniqueConstraint(
                        fields=("endpoint_id", "sequence"),
                        name="homing_receiver_seen_sequence_unique",
                    )
                ],
            },
        ),
    ]
