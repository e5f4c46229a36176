"""The claim loop cannot hold leases longer than they last: its statements time out, and
the watchdog's patience with one piece of its work is below a lease."""

from __future__ import annotations

import dataclasses
import threading

import pytest
from django.db import connection

from deliveries.lifecycle.policy import current_policy
from deliveries.worker.claim_loop import STATEMENT_TIMEOUT, claim_patience
from deliveries.worker.supervisor import CHECK_SECONDS, WORK_PATIENCE_SECONDS, Supervisor
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
    # The worker's own watchdog, as it is wired: a claim loop stuck in one claim since
    # `began` is reported before its leases lapse, a check interval to spare.
    lease = current_policy().lease_seconds
    worker = Worker(capacity=4)  # not started: no thread, no connection
    try:
        [claims] = [w for w in worker._watched() if w.name == "claims"]
        assert claims.heartbeat is worker.claims.heartbeat
        assert claims.patience == claim_patience(lease)
        alive = dataclasses.replace(claims, thread=threading.current_thread)
        with worker.claims.heartbeat.working():
            began = worker.claims.heartbeat.since
            assert began is not None
            supervisor = Supervisor(
                watched=[alive],
                ping_loop=lambda answer: answer(),
                clock=lambda: began + lease - CHECK_SECONDS - 0.1,
                exit_process=lambda code: None,
            )
            assert (supervisor.check() or "").startswith("the claims thread has been stuck")
    finally:
        worker.close()
    assert claim_patience(lease) < WORK_PATIENCE_SECONDS  # the others' patience: 60 s
