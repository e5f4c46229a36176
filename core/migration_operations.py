"""Migration operations shared by the apps."""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations


class AddIndexOnline(AddIndexConcurrently):
    """CREATE INDEX CONCURRENTLY on PostgreSQL: no write lock on a live table.
    SQLite (the embedded set-up) has no such thing and needs none."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)
        else:
            migrations.AddIndex.database_forwards(
                self, app_label, schema_editor, from_state, to_state
            )

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)
        else:
            migrations.AddIndex.database_backwards(
                self, app_label, schema_editor, from_state, to_state
            )


class RemoveIndexOnline(RemoveIndexConcurrently):
    """DROP INDEX CONCURRENTLY on PostgreSQL; a plain DROP INDEX on SQLite."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)
        else:
            migrations.RemoveIndex.database_forwards(
                self, app_label, schema_editor, from_state, to_state
            )

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)
        else:
            migrations.RemoveIndex.database_backwards(
                self, app_label, schema_editor, from_state, to_state
            )
