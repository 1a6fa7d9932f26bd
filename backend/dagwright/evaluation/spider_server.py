"""A Spider database loaded into PostgreSQL or MySQL / MariaDB, for packs served from a
database server rather than the embedded engine: one schema (database) per Spider database,
tables from the pack's MySQL DDL (translated by sqlglot, keys left out as in the SQLite
build) and rows copied from the SQLite file built from the pack's CSVs (so NULL markers and
values are read once, the same way).

A table whose rows do not fit its declared types (the packs have "1.0" in INTEGER columns
and words in numeric ones), or whose types PostgreSQL lacks, is made again with every
column TEXT and copied as text: a database that loads, with what it holds visible, rather
than a refusal.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagwright.errors import DataSourceError, InputError

if TYPE_CHECKING:
    import psycopg
    from psycopg import sql


SERVER_KINDS = {
    "postgresql": "postgres",
    "postgres": "postgres",
    "mysql": "mysql",
    "mariadb": "mysql",
}


def server_kind(url: str) -> str:
    """The data source kind serving a URL: postgres or mysql."""
    kind = SERVER_KINDS.get(url.partition("://")[0])
    if kind is None:
        raise InputError(f"server URL {url!r}: postgresql://... or mysql://... (mariadb://...)")
    return kind


def load_into_server(database_dir: Path, built: Path, url: str, schema: str) -> str:
    """Loads the database into the server at `url`; returns the source kind serving it."""
    kind = server_kind(url)
    if kind == "postgres":
        load_into_postgres(database_dir, built, url, schema)
    else:
        load_into_mysql(database_dir, built, url, schema)
    return kind


def _creates(
    database_dir: Path, schema: str, dialect: str = "postgres"
) -> list[tuple[str, str, list[str]]]:
    """(table, CREATE TABLE in `dialect`, column names) per table of the DDL."""
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
        found.append((table.name, create.sql(dialect=dialect), [c.name for c in columns]))
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


def load_into_mysql(database_dir: Path, built: Path, url: str, database: str) -> None:
    """Replaces `database` on the MySQL / MariaDB server at `url` (its password, if any, in
    MYSQL_PWD, as MySQL's own clients read it) with the database of `database_dir`."""
    import os
    from urllib.parse import unquote, urlsplit

    import pymysql

    parts = urlsplit(url)
    try:
        connection = pymysql.connect(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 3306,
            user=unquote(parts.username or "root"),
            password=os.environ.get("MYSQL_PWD", ""),
            autocommit=True,
            charset="utf8mb4",
        )
    except pymysql.err.OperationalError as exc:
        raise DataSourceError(
            f"MySQL at {url} is unreachable: {exc}", "source_unreachable"
        ) from None
    source = sqlite3.connect(f"file:{built}?mode=ro", uri=True)
    quoted = "`" + database.replace("`", "``") + "`"
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {quoted}")
            cursor.execute(f"CREATE DATABASE {quoted} CHARACTER SET utf8mb4")
            for table, create, columns in _creates(database_dir, database, "mysql"):
                rows = source.execute(f'SELECT * FROM "{table}"').fetchall()
                name = f"{quoted}.`{table.replace('`', '``')}`"
                marks = ", ".join(["%s"] * len(columns))
                try:
                    cursor.execute(create)
                    cursor.executemany(f"INSERT INTO {name} VALUES ({marks})", rows)
                except pymysql.err.MySQLError:
                    # As in PostgreSQL: rows that do not fit their types go in TEXT columns.
                    cursor.execute(f"DROP TABLE IF EXISTS {name}")
                    text = ", ".join(f"`{c.replace('`', '``')}` TEXT" for c in columns)
                    cursor.execute(f"CREATE TABLE {name} ({text})")
                    cursor.executemany(
                        f"INSERT INTO {name} VALUES ({marks})",
                        [tuple(_text(v) for v in row) for row in rows],
                    )
    finally:
        source.close()
        connection.close()
