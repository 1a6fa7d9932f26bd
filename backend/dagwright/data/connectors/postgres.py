"""PostgreSQL through ADBC, which returns Arrow and streams it (``fetch_record_batch``).

Connections come from a small pool, one thread at a time on each (never shared), read-only
at the session level (``default_transaction_read_only``). Metadata comes from pg_catalog: comments
(``obj_description``/``col_description``), primary and foreign keys, and the planner's row
estimate (``pg_class.reltuples``). A read selects only the asked columns with the pushable
filters as bound parameters; tables with more rows than ``split_rows`` and an integer primary
key are read as up to ``max_splits`` key ranges in parallel.

Types: integers, floats, booleans, text, dates, times, timestamps (with and without time
zone), intervals, bytea and arrays of the simple ones map directly; ``numeric(p,s)`` becomes
decimal(p,s) (p <= 38; wider or unconstrained numeric and money become float64); anything else
(uuid, json, enums, network types, geometry...) is read as text, cast at the source.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar, Self
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

import adbc_driver_manager
import adbc_driver_manager.dbapi
import adbc_driver_postgresql.dbapi  # type: ignore[import-untyped]
import pyarrow as pa

from dagwright.data.connector import ColumnInfo, Connector, Filter, ForeignKey, Split, TableInfo
from dagwright.data.connectors.common import (
    ConnectionPool,
    DatabaseConfig,
    SourcePaths,
    plan_ranges,
    sql_pushable,
    sql_splits,
)
from dagwright.errors import DataSourceError
from dagwright.registry.services import Secrets
from dagwright.secrets import Redactor

# Types ADBC returns as the Arrow type we expose (arrays of these too).
DIRECT: dict[str, pa.DataType] = {
    "int2": pa.int16(),
    "int4": pa.int32(),
    "int8": pa.int64(),
    "float4": pa.float32(),
    "float8": pa.float64(),
    "bool": pa.bool_(),
    "text": pa.string(),
    "varchar": pa.string(),
    "bpchar": pa.string(),
    "name": pa.string(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us"),
    "timestamptz": pa.timestamp("us", tz="UTC"),
    "time": pa.time64("us"),
    "interval": pa.month_day_nano_interval(),
    "bytea": pa.binary(),
}
MAX_DECIMAL_PRECISION = 38  # DuckDB's and decimal128's
# Bytes per batch ADBC aims at (its default, 16 MB, is coarse for streaming into a query
# that may stop early or run out of time).
BATCH_BYTES = 4 << 20

AUTH_FAILURE = re.compile(
    r"password authentication failed|role \".*\" does not exist|no pg_hba\.conf entry"
    r"|authentication failed|password must be|SQLSTATE: 28|SQLSTATE: 42501",
    re.IGNORECASE,
)
# System schemas: never exposed, even when named in ``schemas``.
SYSTEM_SCHEMAS = ("pg_catalog", "information_schema")

_RELATION = """
    SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
"""
_TABLE = f"""
    SELECT c.relkind, c.reltuples::float8 AS reltuples,
           obj_description(c.oid, 'pg_class') AS comment
    FROM pg_class c WHERE c.oid = ({_RELATION})
"""
_COLUMNS = f"""
    SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS source_type,
           a.attnotnull AS notnull, col_description(a.attrelid, a.attnum) AS comment,
           coalesce(bt.typname, t.typname) AS base,
           coalesce(bt.typtype, t.typtype)::text AS typtype,
           CASE WHEN t.typtype = 'd' THEN t.typtypmod ELSE a.atttypmod END AS typmod,
           et.typname AS element
    FROM pg_attribute a
    JOIN pg_type t ON t.oid = a.atttypid
    LEFT JOIN pg_type bt ON t.typtype = 'd' AND bt.oid = t.typbasetype
    LEFT JOIN pg_type et ON et.oid = coalesce(bt.typelem, t.typelem)
        AND coalesce(bt.typcategory, t.typcategory) = 'A'
    WHERE a.attrelid = ({_RELATION}) AND a.attnum > 0 AND NOT a.attisdropped
    ORDER BY a.attnum
"""
_PRIMARY_KEY = f"""
    SELECT a.attname AS name
    FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
    WHERE i.indrelid = ({_RELATION}) AND i.indisprimary
    ORDER BY array_position(i.indkey::int2[], a.attnum)
"""
_FOREIGN_KEYS = f"""
    SELECT con.conname AS name, rn.nspname AS ref_schema, rc.relname AS ref_table,
           la.attname AS column_name, ra.attname AS ref_column
    FROM pg_constraint con
    JOIN pg_class rc ON rc.oid = con.confrelid
    JOIN pg_namespace rn ON rn.oid = rc.relnamespace
    CROSS JOIN LATERAL unnest(con.conkey, con.confkey) WITH ORDINALITY AS k(lnum, rnum, ord)
    JOIN pg_attribute la ON la.attrelid = con.conrelid AND la.attnum = k.lnum
    JOIN pg_attribute ra ON ra.attrelid = con.confrelid AND ra.attnum = k.rnum
    WHERE con.contype = 'f' AND con.conrelid = ({_RELATION})
    ORDER BY con.conname, k.ord
"""


class PostgresConfig(DatabaseConfig):
    """``url``: postgresql://user@host:port/database. ``schemas``: the schemas to expose
    (default: every non-system schema the user may use)."""

    SCHEMES = ("postgresql", "postgres")


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def column_type(
    base: str, typtype: str, typmod: int, element: str | None
) -> tuple[pa.DataType, str]:
    """The Arrow type of a PostgreSQL column and the select expression (``{}`` is the quoted
    column) that makes ADBC return it."""
    if base in DIRECT:
        return DIRECT[base], "{}"
    if element is not None:
        if element in DIRECT and element != "interval":
            return pa.list_(DIRECT[element]), "{}"
        return pa.string(), "{}::text"
    if base == "numeric":
        precision, scale = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF
        if typmod >= 0 and precision <= MAX_DECIMAL_PRECISION:
            # ADBC returns numeric as an opaque string: text, then Arrow parses it.
            return pa.decimal128(precision, scale), "{}::text"
        return pa.float64(), "{}::float8"
    if base == "money":
        return pa.float64(), "{}::numeric::float8"
    if base == "oid":
        return pa.int64(), "{}::int8"
    return pa.string(), "{}::text"  # enums (typtype 'e'), uuid, json, inet, geometry...


class PostgresConnector(Connector):
    kind = "postgres"
    config_model = PostgresConfig
    reaches_servers: ClassVar[bool] = True  # create_connector passes it a SourcePaths

    def __init__(
        self,
        source: str,
        config: PostgresConfig,
        password: str | None = None,
        paths: SourcePaths | None = None,
    ) -> None:
        super().__init__(source)
        self._paths = paths
        self.config = config
        self._password = password
        self._redact = Redactor([password] if password else [])
        parts = urlsplit(config.url)
        self.where = f"PostgreSQL at {parts.hostname}:{parts.port or 5432}{parts.path}"
        # The last metadata read per table and its select expressions: splits() builds its
        # statements from them rather than reading the catalog again.
        self._plans: dict[tuple[str, str], tuple[TableInfo, dict[str, str]]] = {}
        self._pool: ConnectionPool[adbc_driver_manager.dbapi.Connection] = ConnectionPool(
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
        settings = PostgresConfig.model_validate(config)
        if paths is not None:
            paths.check_server(settings.url, settings.schemas, source)
        password = secrets.get(settings.password_secret) if settings.password_secret else None
        return cls(source, settings, password, paths)

    def schemas(self) -> list[str]:
        rows = self._query(
            "SELECT nspname FROM pg_namespace WHERE has_schema_privilege(oid, 'USAGE')"
            " AND nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema' ORDER BY 1"
        )
        names = [row["nspname"] for row in rows]
        if self.config.schemas is not None:
            names = [name for name in self.config.schemas if name in names]
        return names

    def tables(self, schema: str) -> list[str]:
        if not self._exposed(schema):
            return []
        rows = self._query(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f')"
            " AND NOT c.relispartition ORDER BY 1",
            [schema],
        )
        return [row["relname"] for row in rows]

    def table_info(self, schema: str, table: str) -> TableInfo:
        if not self._exposed(schema):
            raise self.not_found(schema, table, f"schema {schema} is not exposed")
        with self._connect() as connection:
            found = self._run(connection, _TABLE, [schema, table])
            if not found:
                raise self.not_found(schema, table)
            columns = self._run(connection, _COLUMNS, [schema, table])
            primary_key = self._run(connection, _PRIMARY_KEY, [schema, table])
            foreign = self._run(connection, _FOREIGN_KEYS, [schema, table])
        infos, selects = [], {}
        for row in columns:
            type_, select = column_type(row["base"], row["typtype"], row["typmod"], row["element"])
            infos.append(
                ColumnInfo(
                    row["name"], type_, row["source_type"], not row["notnull"], row["comment"]
                )
            )
            selects[row["name"]] = select.format(quote_identifier(row["name"]))
        estimate = found[0]["reltuples"]
        info = TableInfo(
            schema,
            table,
            tuple(infos),
            primary_key=tuple(row["name"] for row in primary_key),
            foreign_keys=_foreign_keys(foreign),
            # -1: never analysed; views have no estimate.
            row_estimate=int(estimate) if estimate >= 0 and found[0]["relkind"] != "v" else None,
            comment=found[0]["comment"],
        )
        self._plans[(schema, table)] = (info, selects)
        return info

    def splits(
        self, schema: str, table: str, columns: Sequence[str], filters: Sequence[Filter] = ()
    ) -> list[Split]:
        if (schema, table) not in self._plans:
            self.table_info(schema, table)
        info, selects = self._plans[(schema, table)]
        pushed = [f for f in filters if sql_pushable(f, info.column(f.column).type)]
        table_sql = f"{quote_identifier(schema)}.{quote_identifier(table)}"

        def bounds(key: str) -> tuple[int | None, int | None]:
            row = self._query(
                f"SELECT min({quote_identifier(key)}) AS low,"
                f" max({quote_identifier(key)}) AS high FROM {table_sql}"
            )[0]
            return row["low"], row["high"]

        ranges = plan_ranges(info, self.config.split_rows, self.config.max_splits, bounds)
        select = ", ".join(f"{selects[c]} AS {quote_identifier(c)}" for c in columns)
        return sql_splits(
            info,
            columns,
            pushed,
            ranges,
            f"SELECT {select} FROM {table_sql}",
            quote_identifier,
            lambda n: f"${n}",
        )

    def read(self, split: Split) -> Iterator[pa.RecordBatch]:
        schema: pa.Schema = split.detail["schema"]
        with self._connect() as connection:
            cursor = connection.cursor()
            try:
                cursor.adbc_statement.set_options(
                    **{"adbc.postgresql.batch_size_hint_bytes": str(BATCH_BYTES)}
                )
                self._execute(cursor, split.detail["query"], list(split.detail["params"]))
                for batch in cursor.fetch_record_batch():
                    arrays = [
                        batch.column(i).cast(schema.field(i).type) for i in range(len(schema))
                    ]
                    yield pa.RecordBatch.from_arrays(arrays, schema=schema)
            except adbc_driver_manager.Error as exc:
                raise self._error(exc) from exc
            finally:
                cursor.close()

    def _exposed(self, schema: str) -> bool:
        if schema in SYSTEM_SCHEMAS or schema.startswith("pg_"):
            return False
        return self.config.schemas is None or schema in self.config.schemas

    def _uri(self) -> str:
        parts = urlsplit(self.config.url)
        netloc = parts.netloc
        if self._password is not None:
            user, _, host = netloc.rpartition("@")
            netloc = f"{user}:{quote(self._password, safe='')}@{host}"
        query = urlencode(
            {
                "connect_timeout": str(self.config.connect_timeout_s),
                "application_name": "dagwright",
                # Belt and braces: dagwright only reads, and the session says so.
                "options": "-c default_transaction_read_only=on",
            },
            quote_via=quote,  # libpq reads '+' literally, not as a space
        )
        query = f"{parts.query}&{query}" if parts.query else query
        return urlunsplit(("postgresql", netloc, parts.path, query, ""))

    @contextmanager
    def _connect(self) -> Iterator[adbc_driver_manager.dbapi.Connection]:
        try:
            with self._pool.connection() as connection:
                yield connection
        except adbc_driver_manager.Error as exc:  # connecting failed
            raise self._error(exc) from exc

    def _open(self) -> adbc_driver_manager.dbapi.Connection:
        if self._paths is not None:  # again: the host name may resolve elsewhere now
            self._paths.check_server(self.config.url, self.config.schemas, self.source)
        connection: adbc_driver_manager.dbapi.Connection = adbc_driver_postgresql.dbapi.connect(
            self._uri(), autocommit=True
        )
        return connection

    def close(self) -> None:
        self._pool.close()

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self._connect() as connection:
            return self._run(connection, sql, params)

    def _run(
        self, connection: adbc_driver_manager.dbapi.Connection, sql: str, params: Sequence[Any]
    ) -> list[dict[str, Any]]:
        cursor = connection.cursor()
        try:
            self._execute(cursor, sql, params)
            rows: list[dict[str, Any]] = cursor.fetch_arrow_table().to_pylist()
            return rows
        except adbc_driver_manager.Error as exc:
            raise self._error(exc) from exc
        finally:
            cursor.close()

    @staticmethod
    def _execute(cursor: adbc_driver_manager.dbapi.Cursor, sql: str, params: Sequence[Any]) -> None:
        cursor.execute(sql, parameters=list(params) if params else None)

    def _error(self, exc: adbc_driver_manager.Error) -> DataSourceError:
        """The driver's error with the source named and the password removed."""
        message = self._redact(str(exc)).strip()
        if AUTH_FAILURE.search(message):
            code = "source_auth"
        elif "SQLSTATE: 42P01" in message:
            code = "table_not_found"
        elif "Failed to connect" in message or "SQLSTATE: 08" in message:
            code = "source_unreachable"
        else:
            code = "source_error"
        verb = "is unreachable" if code == "source_unreachable" else "failed"
        return DataSourceError(
            f"source {self.source!r} ({self.where}) {verb}: {message}",
            code=code,
            source=self.source,
        )


def _foreign_keys(rows: list[dict[str, Any]]) -> tuple[ForeignKey, ...]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(row["name"], []).append(row)
    return tuple(
        ForeignKey(
            tuple(part["column_name"] for part in parts),
            parts[0]["ref_schema"],
            parts[0]["ref_table"],
            tuple(part["ref_column"] for part in parts),
        )
        for parts in grouped.values()
    )
