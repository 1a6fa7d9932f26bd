"""Reading a database's description for the Selector: from a SQLite file (Spider and BIRD
ship SQLite; keys from the file, or from the pack's MySQL DDL when the file was built
without them), or from tables of the data layer (PostgreSQL, MariaDB, files...)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagwright.methods.mac_sql.schema import Column, Table, base_type, skips_values, value_examples

if TYPE_CHECKING:
    from dagwright.data.engine import QueryEngine

_CREATE = re.compile(r"CREATE TABLE\s+(?:`[^`]+`\.)?`([^`]+)`\s*\((.*?)\n\);", re.S)
_PRIMARY = re.compile(r"PRIMARY KEY\s*\(([^)]*)\)")
_FOREIGN = re.compile(
    r"FOREIGN KEY\s*\(`([^`]+)`\)\s*REFERENCES\s+(?:`[^`]+`\.)?`([^`]+)`\s*\(`([^`]+)`\)"
)


def ddl_keys(ddl: str) -> dict[str, tuple[list[str], list[tuple[str, str, str]]]]:
    """Primary and foreign keys per table from MySQL DDL (the Spider pack's schema.sql)."""
    keys: dict[str, tuple[list[str], list[tuple[str, str, str]]]] = {}
    for name, body in _CREATE.findall(ddl):
        primary = [c.strip().strip("`") for m in _PRIMARY.findall(body) for c in m.split(",")]
        foreign = [(a, b, c) for a, b, c in _FOREIGN.findall(body)]
        keys[name] = (primary, foreign)
    return keys


def full_name(column: str) -> str:
    # Spider's natural column names are not in the pack: the name, '_' as spaces, lowercase.
    return column.replace("_", " ").lower()


def _described(
    name: str,
    columns: list[tuple[str, str]],
    primary: list[str],
    foreign: list[tuple[str, str, str]],
    key_columns: set[str],
    distinct: Any,
    strip_text: bool,
) -> Table:
    described = []
    for column, declared in columns:
        values = ""
        if column not in key_columns and not skips_values(column):
            values = value_examples(distinct(column), base_type(declared), strip_text)
        described.append(Column(column, full_name(column), values))
    return Table(name, described, primary, foreign)


def _key_columns(
    keys: dict[str, tuple[list[str], list[tuple[str, str, str]]]],
) -> dict[str, set[str]]:
    # Both ends of a foreign key are key columns, as in the official count of key ids.
    found: dict[str, set[str]] = {name: set(primary) for name, (primary, _) in keys.items()}
    for name, (_, foreign) in keys.items():
        for column, to_table, to_column in foreign:
            found.setdefault(name, set()).add(column)
            found.setdefault(to_table, set()).add(to_column)
    return found


def sqlite_tables(path: Path, ddl: str | None = None, strip_text: bool = True) -> list[Table]:
    """Every table of the SQLite file, with value examples read from it. Keys come from the
    file's own constraints, or from `ddl` when given."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    connection.text_factory = lambda b: b.decode(errors="ignore")
    try:
        names = [
            row[0]
            for row in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        info = {n: connection.execute(f"PRAGMA table_info(`{n}`)").fetchall() for n in names}
        if ddl is not None:
            keys = ddl_keys(ddl)
        else:
            keys = {
                n: (
                    [row[1] for row in sorted(info[n], key=lambda r: r[5]) if row[5]],
                    [
                        (row[3], row[2], row[4])
                        for row in connection.execute(f"PRAGMA foreign_key_list(`{n}`)")
                    ],
                )
                for n in names
            }
        key_columns = _key_columns(keys)
        tables = []
        for name in names:
            primary, foreign = keys.get(name, ([], []))

            def distinct(column: str, table: str = name) -> list[Any]:
                sql = f"SELECT `{column}` FROM `{table}` GROUP BY `{column}` ORDER BY COUNT(*) DESC"
                return [row[0] for row in connection.execute(sql).fetchall()]

            columns = [(row[1], row[2]) for row in info[name]]
            tables.append(
                _described(
                    name,
                    columns,
                    primary,
                    foreign,
                    key_columns.get(name, set()),
                    distinct,
                    strip_text,
                )
            )
        return tables
    finally:
        connection.close()


def engine_tables(engine: QueryEngine, names: list[str]) -> list[Table]:
    """Tables of the data layer, named as the engine's SQL must name them (source.schema.table),
    with keys from the source's metadata and value examples read through the engine."""
    from sqlglot import exp

    infos = {name: engine.table_info(name) for name in names}
    by_short = {(info.schema, info.name): name for name, info in infos.items()}
    keys: dict[str, tuple[list[str], list[tuple[str, str, str]]]] = {}
    for name, info in infos.items():
        foreign: list[tuple[str, str, str]] = []
        for fk in info.foreign_keys:
            target = by_short.get((fk.ref_schema, fk.ref_table), f"{fk.ref_schema}.{fk.ref_table}")
            foreign.extend(zip(fk.columns, [target] * len(fk.columns), fk.ref_columns, strict=True))
        keys[name] = (list(info.primary_key), foreign)
    key_columns = _key_columns(keys)
    tables = []
    for name, info in infos.items():

        def distinct(column: str, table: str = name) -> list[Any]:
            quoted = exp.to_identifier(column, quoted=True).sql("duckdb")
            sql = f"SELECT {quoted} FROM {table} GROUP BY {quoted} ORDER BY COUNT(*) DESC"
            return [next(iter(row.values())) for row in engine.query(sql, max_rows=100).records()]

        columns = [(c.name, _type_family(c.source_type)) for c in info.columns]
        primary, foreign = keys[name]
        tables.append(
            _described(
                name, columns, primary, foreign, key_columns.get(name, set()), distinct, True
            )
        )
    return tables


def _type_family(source_type: str) -> str:
    """A source's type name in the families the value rules know (SQLite's)."""
    upper = base_type(source_type)
    if upper in ("CHAR", "CHARACTER", "STRING", "TEXT", "VARCHAR", "CHARACTER VARYING"):
        return "TEXT"
    if upper in ("BIGINT", "SMALLINT", "TINYINT", "INTEGER", "INT", "INT4", "INT8", "HUGEINT"):
        return "INTEGER"
    if upper in ("DOUBLE", "FLOAT", "REAL", "DECIMAL", "NUMERIC"):
        return "REAL"
    return upper
