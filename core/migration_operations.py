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
    """CREATE INDEX CONCURRENTLY on PostgreSQL, CREATE INDEX on SQLite.

    A partitioned table (history, DESIGN.md 25) takes no CONCURRENTLY index of its own:
    the index is made ON ONLY the table (invalid, empty), then CONCURRENTLY on each
    partition (named after it: `<index>_p2026…`) and attached, which makes it valid.
    Partitions made later get it when they are attached."""

    plain = migrations.AddIndex

    def database_forwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        model = to_state.apps.get_model(app_label, self.model_name)
        table = model._meta.db_table
        partitions = _partitions_of(schema_editor, table)
        if partitions is None:
            super().database_forwards(app_label, schema_editor, from_state, to_state)
            return
        quote = schema_editor.quote_name
        statement = str(self.index.create_sql(model, schema_editor))
        on_table = f" ON {quote(table)} "
        assert on_table in statement, statement
        schema_editor.execute(statement.replace(on_table, f" ON ONLY {quote(table)} ", 1))
        for partition in partitions:
            suffix = partition.removeprefix(table)
            child = f"{self.index.name[: 63 - len(suffix)]}{suffix}"
            schema_editor.execute(
                statement.replace("CREATE INDEX ", "CREATE INDEX CONCURRENTLY ", 1)
                .replace(quote(self.index.name), quote(child), 1)
                .replace(on_table, f" ON {quote(partition)} ", 1)
                .replace(f"{quote(table)}.", f"{quote(partition)}.")
            )
            schema_editor.execute(
                f"ALTER INDEX {quote(self.index.name)} ATTACH PARTITION {quote(child)}"
            )

    def database_backwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        model = from_state.apps.get_model(app_label, self.model_name)
        if _partitions_of(schema_editor, model._meta.db_table) is None:
            super().database_backwards(app_label, schema_editor, from_state, to_state)
        else:  # dropped with its partitions' (no CONCURRENTLY on a partitioned table)
            schema_editor.execute(
                f"DROP INDEX IF EXISTS {schema_editor.quote_name(self.index.name)}"
            )


def _partitions_of(schema_editor: BaseDatabaseSchemaEditor, table: str) -> list[str] | None:
    """The partitions of `table` if it is a partitioned PostgreSQL table, else None."""
    if schema_editor.connection.vendor != "postgresql":
        return None
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_class p"
            " LEFT JOIN pg_inherits i ON i.inhparent = p.oid"
            " LEFT JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE p.relname = %s AND p.relkind = 'p' AND pg_table_is_visible(p.oid)"
            " ORDER BY c.relname",
            [table],
        )
        rows = cursor.fetchall()
    if not rows:
        return None
    return [name for (name,) in rows if name is not None]


class RemoveIndexOnline(_ConcurrentlyOnPostgres, RemoveIndexConcurrently):
    """DROP INDEX CONCURRENTLY on PostgreSQL, DROP INDEX on SQLite."""

    plain = migrations.RemoveIndex
