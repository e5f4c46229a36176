"""What keeps pytest-xdist workers apart when `make test` runs tests in parallel.

pytest-django gives each worker (gw0, gw1, ...) its own PostgreSQL test database
(test_homing_gw0, ...). Redis and the databases tests create themselves are shared
servers, so each worker names its own: Redis database N+1 for worker gwN (0 stays with
runs without xdist), and a `_gwN` suffix on database names. Then no two workers see each
other's rows, queues, locks, rate limits or Celery messages (kombu prefixes its fanout
channels with the Redis database number too).
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

REDIS_DATABASES = 16  # redis-server's default `databases`


def xdist_worker() -> str:
    """This xdist worker's name (gw0, gw1, ...); "" when tests run without xdist."""
    return os.environ.get("PYTEST_XDIST_WORKER", "")


def worker_redis_url(url: str) -> str:
    """*url* pointing at this worker's own Redis database (unchanged outside xdist)."""
    worker = xdist_worker()
    if not worker or not url:
        return url
    number = int(worker.removeprefix("gw")) + 1
    if number >= REDIS_DATABASES:
        raise RuntimeError(
            f"xdist worker {worker} has no Redis database of its own: run fewer workers "
            f"(at most {REDIS_DATABASES - 1})"
        )
    return urlunsplit(urlsplit(url)._replace(path=f"/{number}"))


def worker_database_name(name: str) -> str:
    """A database name of this worker's own, for databases tests create themselves."""
    worker = xdist_worker()
    return f"{name}_{worker}" if worker else name
