
import core.ids
import functools
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('deliveries', '0004_attempt_minutes'),
        ('dlq', '0001_initial'),
        ('webhooks', '0002_delete_counter'),
    ]

    operations = [
        migrations.CreateModel(
            name='ReplayJob',
            fields=[
                ('id', models.CharField(default=functools.partial(core.ids.new_id, *('rpj',), **{}), editable=False, max_length=32, primary_key=True, serialize=False)),
                ('criteria', models.JSONField(default=dict)),
                ('status', models.CharField(choices=[('running', 'Running'), ('finished', 'Finished')], default='running', max_length=16)),
                ('total', models.PositiveIntegerField(default=0)),
                ('done', models.PositiveIntegerField(default=0)),
                ('replayed', models.PositiveIntegerField(default=0)),
                ('cursor', models.CharField(blank=True, default='', max_length=32)),
                ('requested_by', models.CharField(blank=True, default='', max_length=150)),
                ('created_at', models.DateTimeField()),
                ('updated_at', models.DateTimeField()),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
            ],
        ),
        migrations.AddField(
            model_name='deadletter',
            name='discarded_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name='deadletter',
            index=models.Index(condition=models.Q(('discarded_at__isnull', True)), fields=['-dead_at', '-id'], name='deadletter_queue'),
        ),
        migrations.AddIndex(
            model_name='deadletter',
            index=models.Index(condition=models.Q(('discarded_at__isnull', True)), fields=['endpoint', '-dead_at'], name='deadletter_endpoint_dead'),
        ),
        migrations.AddIndex(
            model_name='deadletter',
            index=models.Index(condition=models.Q(('discarded_at__isnull', True), ('replayed_at__isnull', True)), fields=['tenant', 'dead_at'], name='deadletter_waiting_tenant'),
        ),
        migrations.AddIndex(
            model_name='deadletter',
            index=models.Index(condition=models.Q(('discarded_at__isnull', True), ('replayed_at__isnull', True)), fields=['endpoint', 'dead_at'], name='deadletter_waiting_endpoint'),
        ),
        migrations.AddIndex(
            model_name='deadletter',
            index=models.Index(condition=models.Q(('discarded_at__isnull', True), ('replayed_at__isnull', True)), fields=['event_type', 'dead_at'], name='deadletter_waiting_type'),
        ),
        migrations.AddIndex(
            model_name='deadletter',
            index=models.Index(condition=models.Q(('discarded_at__isnull', True), ('replayed_at__isnull', True)), fields=['dead_at', 'id'], name='deadletter_queue_waiting'),
        ),
        migrations.AddIndex(
            model_name='replayjob',
            index=models.Index(condition=models.Q(('status', 'running')), fields=['updated_at'], name='replayjob_running'),
        ),
    ]
