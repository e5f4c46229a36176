"""Django's PostgreSQL backend with a health check that sends nothing to the server.

Connections live across requests (CONN_MAX_AGE), and health checks drop the ones a
PostgreSQL restart broke. Django's check is a `SELECT 1` before the first query of every
request: for a single-event POST, whose write is one statement, that doubled the round
trips and cost the web process a twentieth of its CPU. The server writes nothing to an
idle connection unless it is going away (its "terminating connection" message, then the
end of the stream), so a socket with nothing to read is healthy; only a readable one is
checked the old way.
"""

from __future__ import annotations

import select

from django.db.backends.postgresql import base
from psycopg.pq import TransactionStatus


class DatabaseWrapper(base.DatabaseWrapper):
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
