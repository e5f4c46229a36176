"""Dead letters outlive their history (DESIGN.md 25).

A dead letter keeps what a replay needs to re-create its event and delivery once
retention has dropped them (the delivery's sequence, attempts and creation time; the
event's data, creation time, ordering key and trace context), and its foreign keys to
the delivery and the event lose their database constraint: dropping a partition of
history neither waits on nor cascades into the queue. The next migration fills the new
fields of the letters already there.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('deliveries', '0011_endpoint_minutes'),
        ('dlq', '0002_discard_and_replay_jobs'),
        ('webhooks', '0015_event_trace_context'),
    ]

    operations = [
        migrations.AddField(
            model_name='deadletter',
            name='attempt_count',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='deadletter',
            name='delivery_created_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='deadletter',
            name='event_created_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='deadletter',
            name='event_data',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='deadletter',
            name='event_ordering_key',
            field=models.CharField(blank=True, max_length=255, null=True),
        ),
        migrations.AddField(
            model_name='deadletter',
            name='event_trace_context',
            field=models.TextField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='deadletter',
            name='sequence',
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='deadletter',
            name='delivery',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='dead_letters', to='deliveries.delivery'),
        ),
        migrations.AlterField(
            model_name='deadletter',
            name='event',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='webhooks.event'),
        ),
    ]
