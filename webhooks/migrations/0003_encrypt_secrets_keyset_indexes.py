"""Endpoint secrets encrypted at rest; lists ordered on the keyset (created_at, id).

The data step encrypts every plain secret (they start with `whsec_`) and moves a
previous secret still in its grace into `previous_secrets`, so a rotation in progress
keeps signing across the upgrade.
"""

from django.db import migrations, models

from core import crypto

PLAIN_PREFIX = "whsec_"


def encrypt_secrets(apps, schema_editor):
    Endpoint = apps.get_model("webhooks", "Endpoint")
    for endpoint in Endpoint.objects.all().iterator(chunk_size=500):
        previous = []
        if endpoint.previous_secret and endpoint.previous_secret_expires_at:
            previous.append(
                {
                    "secret": crypto.encrypt(endpoint.previous_secret),
                    "expires_at": endpoint.previous_secret_expires_at.isoformat(),
                }
            )
        secret = endpoint.secret
        if secret.startswith(PLAIN_PREFIX):
            secret = crypto.encrypt(secret)
        Endpoint.objects.filter(pk=endpoint.pk).update(secret=secret, previous_secrets=previous)


def decrypt_secrets(apps, schema_editor):
    from django.utils.dateparse import parse_datetime

    Endpoint = apps.get_model("webhooks", "Endpoint")
    for endpoint in Endpoint.objects.all().iterator(chunk_size=500):
        fields = {"previous_secret": "", "previous_secret_expires_at": None}
        if endpoint.previous_secrets:
            newest = endpoint.previous_secrets[0]
            fields["previous_secret"] = crypto.decrypt(newest["secret"])
            fields["previous_secret_expires_at"] = parse_datetime(newest["expires_at"])
        secret = endpoint.secret
        if not secret.startswith(PLAIN_PREFIX):
            secret = crypto.decrypt(secret)
        Endpoint.objects.filter(pk=endpoint.pk).update(secret=secret, **fields)


class Migration(migrations.Migration):
    dependencies = [
        ("webhooks", "0002_delete_counter"),
    ]

    operations = [
        migrations.AddField(
            model_name="endpoint",
            name="previous_secrets",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AlterField(
            model_name="endpoint",
            name="secret",
            field=models.TextField(),
        ),
        migrations.RunPython(encrypt_secrets, decrypt_secrets),
        migrations.RemoveField(model_name="endpoint", name="previous_secret"),
        migrations.RemoveField(model_name="endpoint", name="previous_secret_expires_at"),
        migrations.RemoveIndex(model_name="endpoint", name="endpoint_tenant_created"),
        migrations.RemoveIndex(model_name="event", name="event_tenant_created"),
        migrations.RemoveIndex(model_name="event", name="event_tenant_type"),
        migrations.AddIndex(
            model_name="endpoint",
            index=models.Index(
                fields=["tenant", "-created_at", "-id"], name="endpoint_tenant_keyset"
            ),
        ),
        migrations.AddIndex(
            model_name="event",
            index=models.Index(fields=["tenant", "-created_at", "-id"], name="event_tenant_keyset"),
        ),
        migrations.AddIndex(
            model_name="event",
            index=models.Index(
                fields=["tenant", "type", "-created_at", "-id"], name="event_tenant_type_keyset"
            ),
        ),
    ]
