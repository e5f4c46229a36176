"""Sequence numbers: 1, 2, 3, … per endpoint, without gaps, in commit order.

Deliveries take their numbers in the transaction that creates them, from the endpoint's
`SequenceCounter` row: one upsert adds how many deliveries it creates and returns the new
last number. The row stays locked until that transaction ends, so the next creator for
the endpoint waits and numbers after these only once they are committed: nobody sees a
sequence while a lower one of its endpoint is uncommitted, and a rollback gives its
numbers back. Counters are locked in endpoint id order, so transactions creating
deliveries for the same endpoints (a fan-out, a batch) cannot deadlock. On PostgreSQL
the upsert is ingest_sql.SEQUENCES_TAKE here, and the `sequences` entry of ingestion's
one statement (ingest_sql.INGEST_GATED and its variants) there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from django.db import connection, transaction
from django.db.models import F

from deliveries.intake.ingest_sql import SEQUENCES_TAKE
from deliveries.models import SequenceCounter


def sequences_numbered(endpoint_ids: Sequence[str], last: Mapping[str, int]) -> list[int]:
    """Each new delivery's number, given its endpoint (in creation order) and each
    endpoint's last number after the reservation: the endpoint's deliveries take the
    numbers up to `last` in the order they are listed (a batch's order)."""
    following = {
        endpoint: last[endpoint] - count + 1 for endpoint, count in Counter(endpoint_ids).items()
    }
    numbers = []
    for endpoint in endpoint_ids:
        numbers.append(following[endpoint])
        following[endpoint] += 1
    return numbers


def sequences_take(endpoint_ids: Sequence[str]) -> list[int]:
    """Reserve the numbers of new deliveries to these endpoints (one item per delivery,
    in creation order), in the caller's transaction: create the deliveries in it too."""
    if not endpoint_ids:
        return []
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(SEQUENCES_TAKE, {"endpoint_ids": list(endpoint_ids)})
            last = dict(cursor.fetchall())
    else:  # the embedded database (SQLite): its first write locks out other writers
        last = {}
        with transaction.atomic():
            for endpoint, count in sorted(Counter(endpoint_ids).items()):
                counters = SequenceCounter.objects.filter(endpoint_id=endpoint)
                if not counters.update(last=F("last") + count):
                    SequenceCounter.objects.create(endpoint_id=endpoint, last=count)
                last[endpoint] = counters.values_list("last", flat=True).get()
    return sequences_numbered(endpoint_ids, last)
