"""SQL the ORM does not build for us, from model metadata only (never from input)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection, models


def insert_statement(
    model: type[models.Model], objs: Sequence[models.Model]
) -> tuple[str, list[Any]]:
    """A multi-row INSERT of every concrete field, values prepared as the ORM would
    (so columns added later keep their defaults); to compose into a larger statement."""
    fields = model._meta.concrete_fields
    columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    params = [
        field.get_db_prep_save(field.pre_save(obj, True), connection)
        for obj in objs
        for field in fields
    ]
    values = ", ".join([row] * len(objs))
    table = model._meta.db_table  # names from the model, values all bound: no input in SQL
    return f"INSERT INTO {table} ({columns}) VALUES {values}", params  # noqa: S608
