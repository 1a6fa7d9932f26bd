"""MySQL-protocol databases (MySQL, MariaDB, TiDB) through PyMySQL.

Connections come from a small pool, one thread at a time on each (never shared), with the
session time zone at UTC, so TIMESTAMP columns read as UTC instants. Reads use an unbuffered
cursor (``SSCursor``) and turn rows into Arrow batches of 10,000; they select only the asked
columns with the pushable filters as bound parameters, and split large tables with an integer
primary key into key ranges read in parallel. Metadata comes from information_schema
(comments, keys, ``TABLE_ROWS`` as the row estimate).

Types: integers (unsigned too), floats, DECIMAL(p,s) (p <= 38; wider: float64), text types,
ENUM, SET and JSON as string, binary types, DATE, DATETIME, TIMESTAMP (UTC), TIME as a
duration (MySQL times may be negative or past 24 h), YEAR, BIT as an integer; spatial types as
their WKT text (``ST_AsText``); anything else as text (``CAST(... AS CHAR)``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Self
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pymysql
import pymysql.cursors

from dagwright.data.connector import ColumnInfo, Connector, Filter, ForeignKey, Split, TableInfo
from dagwright.data.connectors.common import (
    BATCH_ROWS,
    ConnectionPool,
    DatabaseConfig,
    SourcePaths,
    plan_ranges,
    rows_to_batch,
    sql_pushable,
    sql_splits,
)
from dagwright.errors import DataSourceError
from dagwright.registry.services import Secrets
from dagwright.secrets import Redactor

SYSTEM_SCHEMAS = ("information_schema", "mysql", "performance_schema", "sys")
MAX_DECIMAL_PRECISION = 38
# Error numbers: refused credentials or privileges, a missing table, no connection.
AUTH_ERRORS = {1044, 1045, 1142, 1143, 1227, 1698}
NOT_FOUND_ERRORS = {1146}
UNREACHABLE_ERRORS = {1049, 2002, 2003, 2005, 2006, 2013}

INTEGERS: dict[str, tuple[pa.DataType, pa.DataType]] = {  # signed, unsigned
    "tinyint": (pa.int8(), pa.uint8()),
    "smallint": (pa.int16(), pa.uint16()),
    "mediumint": (pa.int32(), pa.uint32()),
    "int": (pa.int32(), pa.uint32()),
    "integer": (pa.int32(), pa.uint32()),
    "bigint": (pa.int64(), pa.uint64()),
}
TEXT = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json"}
BINARY = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
SPATIAL = {
    "geometry",
    "point",
    "linestring",
    "polygon",
    "multipoint",
    "multilinestring",
    "multipolygon",
    "geometrycollection",
}


class MysqlConfig(DatabaseConfig):
    """``url``: mysql://user@host:port/database. ``schemas``: the databases to expose; by
    default the URL's database, or every non-system database when the URL names none."""

    SCHEMES = ("mysql", "mariadb", "tidb")


@dataclass(frozen=True, slots=True)
class _Column:
    """How one column is selected and converted."""

    type: pa.DataType
    select: str  # {} is the quoted column
    convert: Callable[[Any], Any] | None = None


def quote_identifier(name: str) -> str:
    # '%' is doubled because PyMySQL formats the statement with the parameters ("%s").
    return "`" + name.replace("`", "``").replace("%", "%%") + "`"


def _not_a_date(value: Any) -> Any:
    # Zero dates ('0000-00-00') come back as text: they are no date at all.
    return None if isinstance(value, str) else value


def column_type(  # noqa: C901, PLR0912
    data_type: str, column_type: str, precision: int | None, scale: int | None
) -> _Column:
    """The Arrow type of a column from information_schema.COLUMNS."""
    data_type = data_type.lower()
    if data_type in INTEGERS:
        signed, unsigned = INTEGERS[data_type]
        return _Column(unsigned if "unsigned" in column_type.lower() else signed, "{}")
    if data_type == "float":
        return _Column(pa.float32(), "{}")
    if data_type in ("double", "real"):
        return _Column(pa.float64(), "{}")
    if data_type in ("decimal", "numeric"):
        if precision is not None and precision <= MAX_DECIMAL_PRECISION:
            return _Column(pa.decimal128(precision, scale or 0), "{}")
        return _Column(pa.float64(), "{}", float)
    if data_type in TEXT:
        return _Column(pa.string(), "{}")
    if data_type in BINARY:
        return _Column(pa.binary(), "{}")
    if data_type == "date":
        return _Column(pa.date32(), "{}", _not_a_date)
    if data_type == "datetime":
        return _Column(pa.timestamp("us"), "{}", _not_a_date)
    if data_type == "timestamp":
        return _Column(pa.timestamp("us", tz="UTC"), "{}", _not_a_date)
    if data_type == "time":
        return _Column(pa.duration("us"), "{}")
    if data_type == "year":
        return _Column(pa.int16(), "{}")
    if data_type == "bit":
        return _Column(pa.int64(), "{}", lambda value: int.from_bytes(value, "big"))
    if data_type in SPATIAL:
        return _Column(pa.string(), "ST_AsText({})")
    return _Column(pa.string(), "CAST({} AS CHAR)")


class MysqlConnector(Connector):
    kind = "mysql"
    config_model = MysqlConfig
    reaches_servers: ClassVar[bool] = True  # create_connector passes it a SourcePaths

    def __init__(
        self,
        source: str,
        config: MysqlConfig,
        password: str | None = None,
        paths: SourcePaths | None = None,
    ) -> None:
        super().__init__(source)
        self._paths = paths
        self.config = config
        self._password = password
        self._redact = Redactor([password] if password else [])
        parts = urlsplit(config.url)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 3306
        self._user = unquote(parts.username or "root")
        self._database = unquote(parts.path.lstrip("/")) or None
        self.where = f"MySQL protocol at {self._host}:{self._port}"
        # The last metadata read per table and how its columns are read (see postgres.py).
        self._plans: dict[tuple[str, str], tuple[TableInfo, dict[str, _Column]]] = {}
        # A read stopped early leaves its connection mid-result: the pool closes it rather
        # than reuse it (closing, unlike closing the unbuffered cursor, reads no more rows).
        self._pool: ConnectionPool[pymysql.connections.Connection[Any]] = ConnectionPool(
            self._open, lambda connection: connection.close()
        )

    @classmethod
    def from_config(
        cls,
        source: str,
        config: Mapping[str, Any],
        secrets: Secrets,
        *,
        paths: SourcePaths | None = None,
    ) -> Self:
        """``paths``: its ``store`` is the server's own database, which the source may not
        reach (checked here and on every connection); None: no such check."""
        settings = MysqlConfig.model_validate(config)
        if paths is not None:
            paths.check_server(settings.url, settings.schemas, source)
        password = secrets.get(settings.password_secret) if settings.password_secret else None
        return cls(source, settings, password, paths)

    def schemas(self) -> list[str]:
        if self.config.schemas is not None:
            return list(self.config.schemas)
        if self._database is not None:
            return [self._database]
        rows = self._query("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA ORDER BY 1")
        return [row[0] for row in rows if row[0].lower() not in SYSTEM_SCHEMAS]

    def tables(self, schema: str) -> list[str]:
        if not self._exposed(schema):
            return []
        rows = self._query(
            "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s ORDER BY 1",
            [schema],
        )
        return [row[0] for row in rows]

    def table_info(self, schema: str, table: str) -> TableInfo:
        if not self._exposed(schema):
            raise self.not_found(schema, table, f"schema {schema} is not exposed")
        where = "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s"
        with self._connect() as connection:
            found = self._run(
                connection,
                "SELECT TABLE_TYPE, TABLE_ROWS, TABLE_COMMENT"
                f" FROM information_schema.TABLES {where}",
                [schema, table],
            )
            if not found:
                raise self.not_found(schema, table)
            columns = self._run(
                connection,
                "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, NUMERIC_PRECISION,"
                f" NUMERIC_SCALE, COLUMN_COMMENT FROM information_schema.COLUMNS {where}"
                " ORDER BY ORDINAL_POSITION",
                [schema, table],
            )
            keys = self._run(
                connection,
                "SELECT CONSTRAINT_NAME, COLUMN_NAME, REFERENCED_TABLE_SCHEMA,"
                " REFERENCED_TABLE_NAME, REFERENCED_COLUMN_NAME"
                f" FROM information_schema.KEY_COLUMN_USAGE {where}"
                " ORDER BY CONSTRAINT_NAME, ORDINAL_POSITION",
                [schema, table],
            )
        infos, plans = [], {}
        for name, data_type, full_type, nullable, precision, scale, comment in columns:
            plan = column_type(data_type, full_type, precision, scale)
            plans[name] = plan
            infos.append(ColumnInfo(name, plan.type, full_type, nullable == "YES", comment or None))
        table_type, rows, comment = found[0]
        info = TableInfo(
            schema,
            table,
            tuple(infos),
            primary_key=tuple(row[1] for row in keys if row[0] == "PRIMARY"),
            foreign_keys=_foreign_keys(keys),
            row_estimate=None if rows is None else int(rows),
            # Views' comment is the word VIEW.
            comment=(comment or None) if table_type != "VIEW" else None,
        )
        self._plans[(schema, table)] = (info, plans)
        return info

    def splits(
        self, schema: str, table: str, columns: Sequence[str], filters: Sequence[Filter] = ()
    ) -> list[Split]:
        if (schema, table) not in self._plans:
            self.table_info(schema, table)
        info, plans = self._plans[(schema, table)]
        pushed = [f for f in filters if sql_pushable(f, info.column(f.column).type)]
        table_sql = f"{quote_identifier(schema)}.{quote_identifier(table)}"

        def bounds(key: str) -> tuple[int | None, int | None]:
            quoted = quote_identifier(key)
            low, high = self._query(f"SELECT min({quoted}), max({quoted}) FROM {table_sql}")[0]
            return low, high

        ranges = plan_ranges(info, self.config.split_rows, self.config.max_splits, bounds)
        select = ", ".join(
            f"{plans[c].select.format(quote_identifier(c))} AS {quote_identifier(c)}"
            for c in columns
        )
        return sql_splits(
            info,
            columns,
            pushed,
            ranges,
            f"SELECT {select} FROM {table_sql}",
            quote_identifier,
            lambda _n: "%s",
            converters=tuple(plans[c].convert for c in columns),
        )

    def read(self, split: Split) -> Iterator[pa.RecordBatch]:
        schema: pa.Schema = split.detail["schema"]
        converters = split.detail["converters"]
        with self._connect() as connection:
            cursor = connection.cursor(pymysql.cursors.SSCursor)
            try:
                cursor.execute(split.detail["query"], tuple(split.detail["params"]))
                while rows := cursor.fetchmany(BATCH_ROWS):
                    yield rows_to_batch(
                        rows,
                        schema,
                        converters,
                        lambda i: f"{self.source}.{split.schema}.{split.table}.{split.columns[i]}",
                    )
                cursor.close()  # every row read: the connection can serve again
            except pymysql.MySQLError as exc:
                raise self._error(exc) from exc
            except GeneratorExit:
                # Stopped early: the pool closes the connection. PyMySQL would otherwise try
                # to read the rest of the result when it is collected, on a closed socket.
                result = getattr(cursor, "_result", None)
                if result is not None:
                    result.unbuffered_active = False
                raise

    def _exposed(self, schema: str) -> bool:
        if schema.lower() in SYSTEM_SCHEMAS:
            return False
        if self.config.schemas is not None:
            return schema in self.config.schemas
        return self._database is None or schema == self._database

    @contextmanager
    def _connect(self) -> Iterator[pymysql.connections.Connection[Any]]:
        try:
            with self._pool.connection() as connection:
                yield connection
        except pymysql.MySQLError as exc:
            raise self._error(exc) from exc

    def _open(self) -> pymysql.connections.Connection[Any]:
        if self._paths is not None:  # again: the host name may resolve elsewhere now
            self._paths.check_server(self.config.url, self.config.schemas, self.source)
        return pymysql.connect(
            host=self._host,
            port=self._port,
            user=self._user,
            password=self._password or "",
            connect_timeout=self.config.connect_timeout_s,
            charset="utf8mb4",
            autocommit=True,
            init_command="SET time_zone = '+00:00'",
        )

    def close(self) -> None:
        self._pool.close()

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._connect() as connection:
            return self._run(connection, sql, params)

    def _run(
        self, connection: pymysql.connections.Connection[Any], sql: str, params: Sequence[Any]
    ) -> list[tuple[Any, ...]]:
        try:
            with connection.cursor() as cursor:
                cursor.execute(sql, tuple(params))
                return list(cursor.fetchall())
        except pymysql.MySQLError as exc:
            raise self._error(exc) from exc

    def _error(self, exc: pymysql.MySQLError) -> DataSourceError:
        """The driver's error with the source named and the password removed."""
        number = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
        message = self._redact(str(exc.args[1]) if len(exc.args) > 1 else str(exc))
        if number in AUTH_ERRORS:
            code = "source_auth"
        elif number in NOT_FOUND_ERRORS:
            code = "table_not_found"
        elif number in UNREACHABLE_ERRORS or number is None:
            code = "source_unreachable"
        else:
            code = "source_error"
        verb = "is unreachable" if code == "source_unreachable" else "failed"
        return DataSourceError(
            f"source {self.source!r} ({self.where}) {verb}: {message} (error {number})",
            code=code,
            source=self.source,
        )


def _foreign_keys(rows: list[tuple[Any, ...]]) -> tuple[ForeignKey, ...]:
    grouped: dict[str, list[tuple[Any, ...]]] = {}
    for row in rows:
        if row[3] is not None:
            grouped.setdefault(row[0], []).append(row)
    return tuple(
        ForeignKey(
            tuple(part[1] for part in parts),
            parts[0][2],
            parts[0][3],
            tuple(part[4] for part in parts),
        )
        for parts in grouped.values()
    )
