"""Custom header values encrypted at rest, like secrets; endpoints deleted in the background.

Header values (often credentials) are stored as Fernet tokens under their plain names
(core.crypto, keyed by HOMING_ENCRYPTION_KEY); the data step encrypts every existing one.

`deleted_at` marks an endpoint whose DELETE has answered while a background job removes
its deliveries in batches (deliveries/lifecycle/endpoint_backlogs.py); `objects` hides it.
"""

import django.db.models.manager
from django.db import migrations, models

from core import crypto


def encrypt_headers(apps, schema_editor):
    Endpoint = apps.get_model("webhooks", "Endpoint")
    for endpoint in Endpoint.objects.exclude(headers={}).iterator(chunk_size=500):
        encrypted = {name: crypto.encrypt(value) for name, value in endpoint.headers.items()}
        Endpoint.objects.filter(pk=endpoint.pk).update(headers=encrypted)


def decrypt_headers(apps, schema_editor):
    Endpoint = apps.get_model("webhooks", "Endpoint")
    for endpoint in Endpoint.objects.exclude(headers={}).iterator(chunk_size=500):
        plain = {name: crypto.decrypt(token) for name, token in endpoint.headers.items()}
        Endpoint.objects.filter(pk=endpoint.pk).update(headers=plain)


class Migration(migrations.Migration):
    dependencies = [
        ("webhooks", "0008_event_ordering_key"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="endpoint",
            options={"base_manager_name": "all_objects", "default_manager_name": "objects"},
        ),
        migrations.AlterModelManagers(
            name="endpoint",
            managers=[
                ("all_objects", django.db.models.manager.Manager()),
                ("objects", django.db.models.manager.Manager()),
            ],
        ),
        migrations.AddField(
            model_name="endpoint",
            name="deleted_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="endpoint",
            index=models.Index(
                condition=models.Q(("deleted_at__isnull", False)),
                fields=["deleted_at"],
                name="endpoint_deleting",
            ),
        ),
        migrations.RunPython(encrypt_headers, decrypt_headers, elidable=False),
    ]
