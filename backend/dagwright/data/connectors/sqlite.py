"""SQLite files, opened read-only (``mode=ro``), one connection per call so threads never
share one. One schema, ``main``. Keys come from ``PRAGMA table_info`` and
``PRAGMA foreign_key_list``.

SQLite columns have declared types, not types: the Arrow type follows SQLite's own affinity
rules (INT -> int64, CHAR/CLOB/TEXT -> string, REAL/FLOA/DOUB -> float64, BLOB -> binary,
anything else numeric -> float64), after three names SQLite has no affinity for but everyone
uses: BOOL(EAN) -> bool, DATE -> date32, DATETIME/TIMESTAMP -> timestamp. A column declared
with no type (views' computed columns) takes the type of its first 1,000 values. A value that
does not fit its column's type is a ``bad_value`` error naming the column.

``path`` must be absolute and, symlinks and ``..`` resolved, under a source root
(``SourcePaths``; never the server's own database): checked when the source is made and
again before each connection, which opens the resolved path.
"""

from __future__ import annotations

import datetime
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Self
from urllib.parse import quote

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from dagwright.data.connector import ColumnInfo, Connector, Filter, ForeignKey, Split, TableInfo
from dagwright.data.connectors.common import (
    BATCH_ROWS,
    NO_LOCAL_PATHS,
    SourcePaths,
    rows_to_batch,
    sql_pushable,
    sql_splits,
)
from dagwright.errors import DataSourceError
from dagwright.registry.services import Secrets

SCHEMA = "main"
# Values looked at to type a column declared without a type.
SAMPLE_ROWS = 1000


class SqliteConfig(BaseModel):
    """``path``: the database file."""

    model_config = ConfigDict(extra="forbid")

    path: str


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def declared_type(declared: str) -> pa.DataType | None:
    """The Arrow type of a declared column type; None for no declared type."""
    name = declared.upper()
    if not name.strip():
        return None
    base = name.split("(")[0].strip()
    if base in ("BOOL", "BOOLEAN"):
        return pa.bool_()
    if base == "DATE":
        return pa.date32()
    if base in ("DATETIME", "TIMESTAMP"):
        return pa.timestamp("us")
    if "INT" in name:
        return pa.int64()
    if any(word in name for word in ("CHAR", "CLOB", "TEXT")):
        return pa.string()
    if "BLOB" in name:
        return pa.binary()
    return pa.float64()  # REAL, FLOAT, DOUBLE and NUMERIC affinity alike


def _sampled_type(kinds: set[str]) -> pa.DataType:
    """The type of an untyped column from the storage classes of its values."""
    kinds.discard("null")
    if kinds == {"integer"}:
        return pa.int64()
    if kinds and kinds <= {"integer", "real"}:
        return pa.float64()
    if kinds == {"blob"}:
        return pa.binary()
    return pa.string()


def _converter(type_: pa.DataType) -> Callable[[Any], Any] | None:
    """How a stored value becomes what Arrow takes for ``type_`` (None: as it is)."""
    if pa.types.is_date32(type_):
        return lambda value: datetime.date.fromisoformat(value) if isinstance(value, str) else value
    if pa.types.is_timestamp(type_):
        return lambda value: (
            datetime.datetime.fromisoformat(value) if isinstance(value, str) else value
        )
    if pa.types.is_boolean(type_):
        return lambda value: bool(value) if isinstance(value, int) else value
    if pa.types.is_string(type_):
        return lambda value: value if isinstance(value, str) else str(value)
    return None


class SqliteConnector(Connector):
    kind = "sqlite"
    config_model = SqliteConfig
    reads_local_paths: ClassVar[bool] = True  # create_connector passes it a SourcePaths

    def __init__(self, source: str, path: str | Path, paths: SourcePaths) -> None:
        """SourcePathError when ``path`` is not allowed by ``paths``."""
        super().__init__(source)
        self.paths = paths
        self.given = Path(path).expanduser()
        self.path = self.paths.check(path, source)
        # The last metadata read per table: splits() builds its statement from it.
        self._infos: dict[str, TableInfo] = {}

    @classmethod
    def from_config(
        cls,
        source: str,
        config: Mapping[str, Any],
        secrets: Secrets,
        *,
        paths: SourcePaths | None = None,
    ) -> Self:
        """``paths``: the folders the source may read (none when not given)."""
        return cls(
            source,
            SqliteConfig.model_validate(config).path,
            NO_LOCAL_PATHS if paths is None else paths,
        )

    def schemas(self) -> list[str]:
        return [SCHEMA]

    def tables(self, schema: str) -> list[str]:
        if schema != SCHEMA:
            return []
        with self._open() as connection:
            rows = connection.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
                " AND name NOT LIKE 'sqlite_%' ORDER BY name"
            ).fetchall()
        return [row[0] for row in rows]

    def table_info(self, schema: str, table: str) -> TableInfo:
        if schema != SCHEMA:
            raise self.not_found(schema, table)
        with self._open() as connection:
            pragma = connection.execute(
                'SELECT name, type, "notnull", pk FROM pragma_table_info(?)', (table,)
            ).fetchall()
            if not pragma:
                raise self.not_found(schema, table)
            columns = []
            for name, declared, notnull, _pk in pragma:
                type_ = declared_type(declared)
                if type_ is None:
                    type_ = _sampled_type(self._storage_classes(connection, table, name))
                columns.append(ColumnInfo(name, type_, declared or "", not notnull))
            keys = sorted((pk, name) for name, _declared, _notnull, pk in pragma if pk)
            foreign = connection.execute(
                'SELECT id, "table", "from", "to" FROM pragma_foreign_key_list(?) ORDER BY id, seq',
                (table,),
            ).fetchall()
            foreign_keys = self._foreign_keys(connection, foreign)
            rows = connection.execute(f"SELECT count(*) FROM {quote_identifier(table)}")
            row_count = int(rows.fetchone()[0])
        info = TableInfo(
            schema,
            table,
            tuple(columns),
            primary_key=tuple(name for _pk, name in keys),
            foreign_keys=foreign_keys,
            row_estimate=row_count,
        )
        self._infos[table] = info
        return info

    def splits(
        self, schema: str, table: str, columns: Sequence[str], filters: Sequence[Filter] = ()
    ) -> list[Split]:
        info = self._infos.get(table) or self.table_info(schema, table)
        pushed = [f for f in filters if sql_pushable(f, info.column(f.column).type)]
        select = ", ".join(quote_identifier(c) for c in columns)
        # One split: the file is local and SQLite reads it with one thread anyway.
        return sql_splits(
            info,
            columns,
            pushed,
            (None, [(None, None)]),
            f"SELECT {select} FROM {quote_identifier(table)}",
            quote_identifier,
            lambda _n: "?",
            converters=tuple(_converter(info.column(c).type) for c in columns),
        )

    def read(self, split: Split) -> Iterator[pa.RecordBatch]:
        schema: pa.Schema = split.detail["schema"]
        with self._open() as connection:
            cursor = connection.execute(split.detail["query"], split.detail["params"])
            while rows := cursor.fetchmany(BATCH_ROWS):
                yield rows_to_batch(
                    rows,
                    schema,
                    split.detail["converters"],
                    lambda i: f"{self.source}.{split.schema}.{split.table}.{split.columns[i]}",
                )

    @staticmethod
    def _foreign_keys(
        connection: sqlite3.Connection, rows: list[tuple[Any, ...]]
    ) -> tuple[ForeignKey, ...]:
        grouped: dict[int, list[tuple[Any, ...]]] = {}
        for row in rows:
            grouped.setdefault(row[0], []).append(row)
        keys = []
        for parts in grouped.values():
            ref_table = parts[0][1]
            ref_columns = [part[3] for part in parts]
            if any(column is None for column in ref_columns):
                # REFERENCES parent without columns: the parent's primary key.
                ref_columns = [
                    row[0]
                    for row in connection.execute(
                        "SELECT name FROM pragma_table_info(?) WHERE pk > 0 ORDER BY pk",
                        (ref_table,),
                    )
                ]
            keys.append(
                ForeignKey(tuple(part[2] for part in parts), SCHEMA, ref_table, tuple(ref_columns))
            )
        return tuple(keys)

    def _storage_classes(self, connection: sqlite3.Connection, table: str, column: str) -> set[str]:
        rows = connection.execute(
            f"SELECT DISTINCT typeof(v) FROM (SELECT {quote_identifier(column)} AS v"
            f" FROM {quote_identifier(table)} LIMIT {SAMPLE_ROWS})"
        ).fetchall()
        return {row[0] for row in rows}

    @contextmanager
    def _open(self) -> Iterator[sqlite3.Connection]:
        """A read-only connection, closed afterwards; sqlite3 errors become DataSourceErrors
        (sqlite3's own context manager only ends the transaction). The path is resolved and
        checked again first: it may have become a symlink since the source was made."""
        try:
            path = self.paths.check(self.given, self.source, strict=True)
        except OSError:
            path = None
        if path is None or not path.is_file():
            raise DataSourceError(
                f"source {self.source!r} is unreachable: {self.given} is not a file",
                code="source_unreachable",
                source=self.source,
            )
        try:
            connection = sqlite3.connect(
                f"file:{quote(str(path))}?mode=ro", uri=True, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise self._error(exc) from exc
        try:
            yield connection
        except sqlite3.Error as exc:
            raise self._error(exc) from exc
        finally:
            connection.close()

    def _error(self, exc: sqlite3.Error) -> DataSourceError:
        code = "table_not_found" if "no such table" in str(exc) else "source_unreachable"
        return DataSourceError(f"source {self.source!r}: {exc}", code=code, source=self.source)
