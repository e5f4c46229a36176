"""Fill what a dead letter keeps of its history (0003) for the letters already there.

Batches of BATCH letters in id order, each one UPDATE in its own transaction (the
migration is not atomic), reading the delivery and event rows by primary key: a queue
of 100,000 letters never holds one long transaction, and a run killed midway resumes
with the letters still unfilled. A letter whose rows are gone already stays unfilled
(`DeadLetter.kept` is False): a replay then behaves as before.
"""

from django.db import migrations, transaction
from django.db.models import OuterRef, Subquery

BATCH = 1000


def fill_kept_history(apps, schema_editor):
    DeadLetter = apps.get_model("dlq", "DeadLetter")
    Delivery = apps.get_model("deliveries", "Delivery")
    Event = apps.get_model("webhooks", "Event")

    def of_delivery(field):
        return Subquery(Delivery.objects.filter(pk=OuterRef("delivery_id")).values(field)[:1])

    def of_event(field):
        return Subquery(Event.objects.filter(pk=OuterRef("event_id")).values(field)[:1])

    after = ""
    while True:
        ids = list(
            DeadLetter.objects.filter(pk__gt=after, event_created_at__isnull=True)
            .order_by("pk")
            .values_list("pk", flat=True)[:BATCH]
        )
        if not ids:
            return
        after = ids[-1]
        with transaction.atomic():
            DeadLetter.objects.filter(pk__in=ids).update(
                sequence=of_delivery("sequence"),
                attempt_count=of_delivery("attempt_count"),
                delivery_created_at=of_delivery("created_at"),
                event_data=of_event("data"),
                event_created_at=of_event("created_at"),
                event_ordering_key=of_event("ordering_key"),
                event_trace_context=of_event("trace_context"),
            )


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("dlq", "0003_dead_letters_keep_history"),
    ]

    operations = [
        migrations.RunPython(fill_kept_history, migrations.RunPython.noop, elidable=True),
    ]
