"""Sequence numbers: 1, 2, 3, … per endpoint, without gaps, in commit order.

Deliveries take their numbers in the transaction that creates them, from the endpoint's
`SequenceCounter` row: one upsert adds how many deliveries it creates and returns the new
last number. The row stays locked until that transaction ends, so the next creator for
the endpoint waits and numbers after these only once they are committed: nobody sees a
sequence while a lower one of its endpoint is uncommitted, and a rollback gives its
numbers back. Counters are locked in endpoint id order, so transactions creating
deliveries for the same endpoints (a fan-out, a batch) cannot deadlock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from django.db import connection, transaction
from django.db.models import F

from deliveries.models import SequenceCounter

# The upsert reserving one number per row of `source` (a relation with an endpoint_id
# column), answering (endpoint_id, last). The ORDER BY is the lock order: rows are
# inserted, and conflicting ones locked, in it.
COUNTERS_UPSERT = """
    INSERT INTO {table} (endpoint_id, last, purged_through)
    SELECT endpoint_id, count(*), 0 FROM {source}
    GROUP BY endpoint_id ORDER BY endpoint_id
    ON CONFLICT (endpoint_id) DO UPDATE SET last = {table}.last + EXCLUDED.last
    RETURNING endpoint_id, last
"""


def counters_upsert_sql(source: str) -> str:
    """COUNTERS_UPSERT over `source` (PostgreSQL), e.g. in a statement's WITH list."""
    return COUNTERS_UPSERT.format(table=SequenceCounter._meta.db_table, source=source)


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
        sql = counters_upsert_sql("unnest(%s::text[]) AS c(endpoint_id)")
        with connection.cursor() as cursor:
            cursor.execute(sql, [list(endpoint_ids)])
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
