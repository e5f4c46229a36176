from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandParser
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from dlq.models import DeadLetter
from dlq.services.replay import dead_letters_replay
from webhooks.models import Endpoint, Tenant

# Dead letters per transaction: a large replay commits (and reports) as it goes.
BATCH_SIZE = 200


class Command(BaseCommand):
    help = (
        "Replay the matching dead letters that were not replayed yet (each delivery starts a "
        "fresh retry schedule, same webhook-id). The last line printed is the count alone. "
        "Without a filter, --all is required."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", help="only this tenant's (ten_...)")
        parser.add_argument("--endpoint", help="only this endpoint's (ep_...)")
        parser.add_argument("--event-type", help="only events of this exact type")
        parser.add_argument("--since", help="only those dead since this ISO date or datetime")
        parser.add_argument("--all", action="store_true", help="replay every waiting one")
        parser.add_argument("--dry-run", action="store_true", help="count, change nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        letters = self._matching(options)
        ids = list(letters.order_by("dead_at", "id").values_list("id", flat=True))
        if options["dry_run"]:
            self.stdout.write(f"Would replay {len(ids)} dead letters (dry run).")
            self.stdout.write(str(len(ids)))
            return
        replayed = 0
        for start in range(0, len(ids), BATCH_SIZE):
            batch = DeadLetter.objects.filter(pk__in=ids[start : start + BATCH_SIZE])
            replayed += dead_letters_replay(dead_letters=batch.select_related("endpoint"))
            if len(ids) > BATCH_SIZE:
                self.stdout.write(f"... {min(start + BATCH_SIZE, len(ids))}/{len(ids)} done")
        skipped = len(ids) - replayed
        if skipped:
            self.stdout.write(f"Skipped {skipped}: endpoint inactive or replayed meanwhile.")
        self.stdout.write(f"Replayed {replayed} dead letters.")
        self.stdout.write(str(replayed))

    def _matching(self, options: dict[str, Any]) -> QuerySet[DeadLetter]:
        filters = ("tenant", "endpoint", "event_type", "since")
        if not any(options[name] for name in filters) and not options["all"]:
            self._refuse(
                "No filter given: pass --tenant, --endpoint, --event-type or --since, "
                "or --all to replay every waiting dead letter."
            )
        letters = DeadLetter.objects.filter(replayed_at__isnull=True)
        if any(field.name == "discarded_at" for field in DeadLetter._meta.get_fields()):
            letters = letters.filter(discarded_at__isnull=True)
        if tenant := options["tenant"]:
            if not Tenant.objects.filter(pk=tenant).exists():
                self._refuse(f"No tenant with id {tenant!r}.")
            letters = letters.filter(tenant_id=tenant)
        if endpoint := options["endpoint"]:
            if not Endpoint.objects.filter(pk=endpoint).exists():
                self._refuse(f"No endpoint with id {endpoint!r}.")
            letters = letters.filter(endpoint_id=endpoint)
        if event_type := options["event_type"]:
            letters = letters.filter(event_type=event_type)
        if since := options["since"]:
            letters = letters.filter(dead_at__gte=self._moment(since))
        return letters

    def _moment(self, text: str) -> datetime:
        try:
            moment = parse_datetime(text)
            if moment is None and (day := parse_date(text)) is not None:
                moment = datetime(day.year, day.month, day.day)
        except ValueError:
            moment = None
        if moment is None:
            self._refuse(f"--since: {text!r} is not an ISO date or datetime (2026-01-31T12:00Z).")
        if timezone.is_naive(moment):
            moment = timezone.make_aware(moment, UTC)
        return moment

    def _refuse(self, message: str) -> NoReturn:
        self.stderr.write(message)
        raise SystemExit(2)
