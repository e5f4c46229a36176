"""Which database the suite runs against: PostgreSQL (`make test`), or SQLite for the
claims' second pass (the embedded set-up's twin statements, tests/harness.py)."""

from __future__ import annotations

import os

import pytest

ON_SQLITE = os.environ.get("DATABASE_URL", "").startswith("sqlite")

# Tests of what only PostgreSQL has (its plans, its row locks, its statements' text).
postgresql_only = pytest.mark.skipif(ON_SQLITE, reason="PostgreSQL only")
