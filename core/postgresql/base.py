"""Django's PostgreSQL backend with a health check that sends nothing to the server, and
no JIT compilation (below).

Connections live across requests (CONN_MAX_AGE), and health checks drop the ones a
PostgreSQL restart broke. Django's check is a `SELECT 1` before the first query of every
request: for a single-event POST, whose write is one statement, that doubled the round
trips and cost the web process a twentieth of its CPU. The server writes nothing to an
idle connection unless it is going away (its "terminating connection" message, then the
end of the stream), so a socket with nothing to read is healthy; only a readable one is
checked the old way.

Every connection plans without JIT compilation. On partitioned history the planner's row
estimates for the claim (an UPDATE joined across every partition) pass jit_above_cost
once a few intervals exist, and PostgreSQL then compiled each claim for 2-3 s instead of
running it in 1 ms: deliveries stalled within minutes (bench/README.md, the soak).
Homing's statements are short OLTP ones; none gains from JIT.
"""

from __future__ import annotations

import select

import psycopg
from django.db.backends.postgresql import base
from psycopg.pq import TransactionStatus


class DatabaseWrapper(base.DatabaseWrapper):
    def _configure_connection(self, connection: psycopg.Connection) -> bool:
        commit = super()._configure_connection(connection)  # type: ignore[misc]  # not in the stubs
        with connection.cursor() as cursor:
            cursor.execute("SET jit = off")
        return commit or not connection.autocommit

    def is_usable(self) -> bool:
        if self.connection is None or self.connection.closed:
            return False
        if self.connection.info.transaction_status != TransactionStatus.IDLE:
            return super().is_usable()  # e.g. a failed transaction: only a query tells
        poll = select.poll()
        poll.register(self.connection.fileno(), select.POLLIN)
        if not poll.poll(0):
            return True
        return super().is_usable()
