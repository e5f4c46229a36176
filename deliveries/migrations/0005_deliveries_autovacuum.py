"""Per-table autovacuum and analyze settings for the queue tables (PostgreSQL only).

Why: deliveries change state many times a second (pending -> delivering -> succeeded),
far faster than autovacuum's defaults notice (20 % of the table changed). On stale
statistics, e.g. a table that went from empty to thousands of due rows within a
minute, the planner misjudges the claim queries by orders of magnitude, and dead
tuples bloat the partial indexes claims scan. Analysing after 1 % (at least 1,000
rows) and vacuuming after 2 % keeps both fresh, replacing an ANALYZE the scheduler
used to run every 15 seconds.
"""

from __future__ import annotations

from django.db import migrations

SETTINGS = {
    "deliveries_delivery": (
        "autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000, "
        "autovacuum_analyze_scale_factor = 0.01, autovacuum_analyze_threshold = 1000"
    ),
    "deliveries_attempt": (
        "autovacuum_analyze_scale_factor = 0.02, autovacuum_analyze_threshold = 1000"
    ),
}
RESET = (
    "autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, "
    "autovacuum_analyze_scale_factor, autovacuum_analyze_threshold"
)


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return  # SQLite has no autovacuum settings
    for table, options in SETTINGS.items():
        schema_editor.execute(f"ALTER TABLE {table} SET ({options})")


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in SETTINGS:
        schema_editor.execute(f"ALTER TABLE {table} RESET ({RESET})")


class Migration(migrations.Migration):
    dependencies = [("deliveries", "0004_attempt_minutes")]

    operations = [migrations.RunPython(forwards, backwards)]
