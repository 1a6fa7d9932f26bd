"""A Spider database loaded into PostgreSQL, for packs served from a database server rather
than the embedded engine: one schema per database, tables from the pack's MySQL DDL
(translated by sqlglot, keys left out as in the SQLite build) and rows copied from the SQLite
file built from the pack's CSVs (so NULL markers and values are read once, the same way).

A table whose rows do not fit its declared types (the packs have "1.0" in INTEGER columns
and words in numeric ones), or whose types PostgreSQL lacks, is made again with every
column TEXT and copied as text: a database that loads, with what it holds visible, rather
than a refusal.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagwright.errors import DataSourceError

if TYPE_CHECKING:
    import psycopg
    from psycopg import sql


def _creates(database_dir: Path, schema: str) -> list[tuple[str, str, list[str]]]:
    """(table, CREATE TABLE in PostgreSQL's dialect, column names) per table of the DDL."""
    import sqlglot
    from sqlglot import exp

    found = []
    ddl = (database_dir / "schema.sql").read_text(encoding="utf-8")
    for create in sqlglot.parse(ddl, read="mysql"):
        if not isinstance(create, exp.Create) or not isinstance(create.this, exp.Schema):
            continue
        table = create.this.this
        table.set("db", exp.to_identifier(schema))
        table.set("catalog", None)
        columns = [e for e in create.this.expressions if isinstance(e, exp.ColumnDef)]
        for column in columns:
            column.set("constraints", [])
            kind = column.args.get("kind")
            if isinstance(kind, exp.DataType) and kind.this in exp.DataType.INTEGER_TYPES:
                kind.set("expressions", [])  # MySQL's display width, INT(11): not a type
        create.this.set("expressions", columns)
        found.append((table.name, create.sql(dialect="postgres"), [c.name for c in columns]))
    return found


def load_into_postgres(database_dir: Path, built: Path, url: str, schema: str) -> None:
    """Replaces `schema` on the server at `url` with the database of `database_dir`, whose
    SQLite build is `built`."""
    import psycopg
    from psycopg import sql

    try:
        connection = psycopg.connect(url, autocommit=True)
    except psycopg.OperationalError as exc:
        raise DataSourceError(
            f"PostgreSQL at {url} is unreachable: {exc}", "source_unreachable"
        ) from None
    source = sqlite3.connect(f"file:{built}?mode=ro", uri=True)
    try:
        target = sql.Identifier(schema)
        connection.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(target))
        connection.execute(sql.SQL("CREATE SCHEMA {}").format(target))
        for table, create, columns in _creates(database_dir, schema):
            rows = source.execute(f'SELECT * FROM "{table}"').fetchall()
            name = sql.Identifier(schema, table)
            try:
                with connection.transaction():
                    connection.execute(create)
                    _copy(connection, name, rows)
            except psycopg.Error:
                # Values that do not fit the declared types (or a type PostgreSQL does not
                # have): every column TEXT instead.
                text_columns = sql.SQL(", ").join(
                    sql.SQL("{} text").format(sql.Identifier(c)) for c in columns
                )
                with connection.transaction():
                    connection.execute(sql.SQL("CREATE TABLE {} ({})").format(name, text_columns))
                    _copy(connection, name, [tuple(_text(v) for v in row) for row in rows])
    finally:
        source.close()
        connection.close()


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _copy(
    connection: psycopg.Connection[Any], name: sql.Identifier, rows: list[tuple[Any, ...]]
) -> None:
    from psycopg import sql

    with connection.cursor().copy(sql.SQL("COPY {} FROM STDIN").format(name)) as copy:
        for row in rows:
            copy.write_row(row)
