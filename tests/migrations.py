"""Move the test database between migrations, for tests of a data migration."""

from __future__ import annotations

from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate(targets: list[tuple[str, str]]) -> Apps:
    """Migrate to `targets`; the historical models as of them."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def latest() -> list[tuple[str, str]]:
    """The leaf migration of every app: where a test leaves the database."""
    executor = MigrationExecutor(connection)
    return executor.loader.graph.leaf_nodes()
