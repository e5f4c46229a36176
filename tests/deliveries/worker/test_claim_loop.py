"""The claim loop cannot hold leases longer than they last: its statements time out, and
the watchdog's patience with one piece of its work is below a lease."""

from __future__ import annotations

import pytest
from django.db import connection

from deliveries.lifecycle.policy import current_policy
from deliveries.worker.claim_loop import STATEMENT_TIMEOUT, claim_patience
from deliveries.worker.supervisor import WORK_PATIENCE_SECONDS
from deliveries.worker.worker import Worker
from tests.databases import postgresql_only


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_the_claim_loop_s_connection_has_a_statement_timeout_on_every_new_connection() -> None:
    worker = Worker(capacity=4)
    try:
        for _ in range(2):  # a reconnect after an outage starts without it: set again
            worker.claims.prepare_connection()
            with connection.cursor() as cursor:
                cursor.execute("SHOW statement_timeout")
                assert cursor.fetchone()[0] == STATEMENT_TIMEOUT
            connection.close()
    finally:
        worker.close()


def test_the_watchdog_loses_patience_with_the_claim_loop_before_a_lease_lapses() -> None:
    lease = current_policy().lease_seconds
    assert claim_patience(lease) < lease
    assert claim_patience(lease) < WORK_PATIENCE_SECONDS  # the others' patience: 60 s
