"""Migration operations shared by the apps."""

from __future__ import annotations

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.operations.base import Operation
from django.db.migrations.state import ProjectState


class _ConcurrentlyOnPostgres(Operation):
    """CONCURRENTLY on PostgreSQL: no write lock on a live table. SQLite (the embedded
    set-up) has no such thing and needs none: there the plain operation runs."""

    plain: type[migrations.AddIndex] | type[migrations.RemoveIndex]

    def database_forwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)
        else:
            self.plain.database_forwards(self, app_label, schema_editor, from_state, to_state)

    def database_backwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)
        else:
            self.plain.database_backwards(self, app_label, schema_editor, from_state, to_state)


class AddIndexOnline(_ConcurrentlyOnPostgres, AddIndexConcurrently):
    """CREATE INDEX CONCURRENTLY on PostgreSQL, CREATE INDEX on SQLite."""

    plain = migrations.AddIndex


class RemoveIndexOnline(_ConcurrentlyOnPostgres, RemoveIndexConcurrently):
    """DROP INDEX CONCURRENTLY on PostgreSQL, DROP INDEX on SQLite."""

    plain = migrations.RemoveIndex
