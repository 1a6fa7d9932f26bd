"""The federated query engine: one SQL query over tables of any number of sources.

A query is checked (``safety.check_sql``), planned (``planner.plan_query``: the catalog
tables it reads, their needed columns and pushable filters), its tables are read from their
sources as Arrow and registered in a per-query DuckDB cursor under generated names, and the
rewritten SQL runs with a LIMIT of one row more than asked, so a cut result is known to be
cut (``truncated``). One DuckDB connection serves the engine, configured once: memory limit,
threads, external access off (no files, URLs, extensions, ATTACH) and then locked so no query
can change it. The time limit covers reading the sources' metadata, reading their rows and
DuckDB's own work.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import math
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import duckdb
import pyarrow as pa
from sqlglot import exp
from sqlglot.errors import ParseError

from dagwright.data.catalog import Catalog, TableRef
from dagwright.data.connector import TableInfo
from dagwright.data.planner import Plan, plan_query
from dagwright.data.safety import DIALECT, check_sql
from dagwright.data.streams import SourceStream
from dagwright.errors import DataError, DataSourceError, QueryError

T = TypeVar("T")
RESULT_BATCH_ROWS = 65_536


@dataclass(frozen=True)
class QueryLimits:
    max_rows: int = 10_000
    timeout_s: float = 30.0
    memory_limit: str = "2GB"
    threads: int = 2


@dataclass
class ResultColumn:
    name: str
    type: str  # DuckDB's type name


@dataclass
class SourceRead:
    """What one query fetched from one table: the evidence of what was pushed down."""

    source: str
    schema: str
    table: str
    columns: tuple[str, ...]
    filters: tuple[str, ...]  # the filters the source applied
    rows: int  # rows the source delivered


@dataclass
class QueryResult:
    sql: str  # as given
    executed_sql: str  # as DuckDB ran it (registered names, the row limit)
    columns: list[ResultColumn]
    table: pa.Table
    truncated: bool  # more rows than row_limit exist; table holds the first row_limit
    row_limit: int
    duration_s: float
    reads: list[SourceRead]

    def records(self) -> list[dict[str, Any]]:
        """The rows as JSON-ready dicts: dates and times as ISO text, decimals as floats,
        durations as seconds, binary as text (UTF-8, else base64), NaN and infinities as text.
        A repeated column name gets a suffix (_2...)."""
        keys: list[str] = []
        for name in self.table.column_names:
            key, n = name, 1
            while key in keys:
                n += 1
                key = f"{name}_{n}"
            keys.append(key)
        columns = [column.to_pylist() for column in self.table.columns]
        return [
            {key: json_value(values[row]) for key, values in zip(keys, columns, strict=True)}
            for row in range(self.table.num_rows)
        ]


def json_value(value: Any) -> Any:
    """One value as JSON takes it."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, datetime.date | datetime.time):  # datetime is a date
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, pa.MonthDayNano):  # an interval: its parts, not a bare triple
        return {"months": value.months, "days": value.days, "seconds": value.nanoseconds / 1e9}
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return base64.b64encode(value).decode()
    if isinstance(value, list | tuple):
        return [json_value(item) for item in value]
    if isinstance(value, dict):
        return {str(key): json_value(item) for key, item in value.items()}
    return str(value)  # UUIDs, intervals...


class QueryEngine:
    """Runs SQL over the catalog's tables. Thread-safe: each query has its own cursor."""

    def __init__(self, catalog: Catalog, limits: QueryLimits = QueryLimits()) -> None:
        self.catalog = catalog
        self.limits = limits
        self._connection = duckdb.connect(
            ":memory:",
            config={
                "memory_limit": limits.memory_limit,
                "threads": limits.threads,
                "enable_external_access": False,
                # Python variables are not tables (DuckDB would find a DataFrame by name).
                "python_enable_replacements": False,
                "autoinstall_known_extensions": False,
                "autoload_known_extensions": False,
            },
        )
        # From here no statement can change the settings (SET is refused by DuckDB itself).
        self._connection.execute("SET lock_configuration = true")
        self._lock = threading.Lock()

    def close(self) -> None:
        self._connection.close()

    def query(
        self, sql: str, *, max_rows: int | None = None, timeout_s: float | None = None
    ) -> QueryResult:
        """Runs one read-only query. At most ``max_rows`` rows come back; more is not an
        error: ``truncated`` says so. SqlRefusedError, DataSourceError or QueryError
        (``query_failed``, ``query_timeout``, ``query_memory``) otherwise."""
        started = time.monotonic()
        row_limit = self.limits.max_rows if max_rows is None else max_rows
        if row_limit < 0:
            raise ValueError(f"max_rows must be at least 0, not {row_limit}")
        limit_s = self.limits.timeout_s if timeout_s is None else timeout_s
        deadline = started + limit_s
        tree = check_sql(sql)
        prefix = f"_dw{secrets.token_hex(3)}_"
        plan, streams = _bounded(lambda: self._prepare(tree, prefix, deadline), deadline, limit_s)
        _limit(plan, row_limit + 1)
        executed_sql = plan.tree.sql(dialect=DIALECT)
        with self._lock:
            cursor = self._connection.cursor()
        timer = threading.Timer(max(0.0, deadline - time.monotonic()), cursor.interrupt)
        timer.daemon = True
        timer.start()
        try:
            for scan, stream in zip(plan.scans, streams, strict=True):
                source = stream.reader() if scan.stream else stream.table()
                cursor.register(scan.name, source)
            relation = cursor.sql(executed_sql)
            columns = [
                ResultColumn(name, str(type_))
                for name, type_ in zip(relation.columns, relation.types, strict=True)
            ]
            table, truncated = _fetch(relation, row_limit)
        except (duckdb.Error, DataError) as exc:
            raise _failure(exc, plan, streams, deadline, limit_s) from exc
        finally:
            timer.cancel()
            for stream in streams:
                stream.close()
            cursor.close()
        reads = [
            SourceRead(
                scan.ref.source,
                scan.ref.schema,
                scan.ref.table,
                scan.columns,
                tuple(str(f) for f in stream.splits[0].filters) if stream.splits else (),
                stream.rows,
            )
            for scan, stream in zip(plan.scans, streams, strict=True)
        ]
        return QueryResult(
            sql,
            executed_sql,
            columns,
            table,
            truncated,
            row_limit,
            time.monotonic() - started,
            reads,
        )

    def tables(self) -> list[TableRef]:
        """Every table of every source."""
        return self.catalog.table_refs()

    def table_info(self, qualified: str) -> TableInfo:
        """The metadata of ``source.schema.table`` (or ``source.table``)."""
        return self.catalog.table_info(self._resolve(qualified))

    def sample(
        self, qualified: str, n: int = 5, columns: Sequence[str] | None = None
    ) -> QueryResult:
        """The first ``n`` rows of a table (of some of its columns)."""
        ref = self._resolve(qualified)
        info = self.catalog.table_info(ref)
        try:
            chosen = [info.column(name).name for name in columns or ()]
        except KeyError as exc:
            raise QueryError(f"{ref}: {exc.args[0]}", code="query_failed") from exc
        select = ", ".join(exp.to_identifier(name, quoted=True).sql(DIALECT) for name in chosen)
        return self.query(f"SELECT {select or '*'} FROM {ref.sql} LIMIT {int(n)}", max_rows=n)

    def _resolve(self, qualified: str) -> TableRef:
        try:
            parts = [part.name for part in exp.to_table(qualified, dialect=DIALECT).parts]
            return self.catalog.resolve(parts)
        except (ValueError, ParseError) as exc:
            raise DataSourceError(
                f"{qualified!r} is not a table of the catalog: {exc}", code="table_not_found"
            ) from exc

    def _prepare(
        self, tree: exp.Query, prefix: str, deadline: float
    ) -> tuple[Plan, list[SourceStream]]:
        """The plan and a stream per scan (metadata and splits come from the sources)."""
        plan = plan_query(tree, self.catalog, prefix)
        streams = []
        for scan in plan.scans:
            connector = self.catalog.source(scan.ref.source)
            splits = connector.splits(scan.ref.schema, scan.ref.table, scan.columns, scan.filters)
            schema = scan.info.arrow_schema(scan.columns)
            streams.append(SourceStream(connector, splits, schema, deadline, str(scan.ref)))
        return plan, streams


def _bounded(work: Callable[[], T], deadline: float, limit_s: float) -> T:
    """``work()`` on a thread of its own, given up at the deadline (a source that does not
    answer cannot hold the query past its time; the thread ends with the source's own
    timeout)."""
    outcome: list[T] = []
    failure: list[BaseException] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:
            failure.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name="dagwright-prepare", daemon=True).start()
    if not done.wait(max(0.0, deadline - time.monotonic())):
        raise QueryError(
            f"the query ran past its time limit ({limit_s:g} s) while reading the sources'"
            " metadata",
            code="query_timeout",
        )
    if failure:
        raise failure[0]
    return outcome[0]


def _limit(plan: Plan, rows: int) -> None:
    """Caps the query at ``rows`` rows: the outermost LIMIT becomes the smaller of its own
    and ``rows``; a query whose limit is not a plain number of rows (PERCENT, WITH TIES, an
    expression) is wrapped."""
    tree = plan.tree
    limit = tree.args.get("limit")
    if isinstance(tree, exp.Select | exp.SetOperation) and limit is None:
        tree.set("limit", exp.Limit(expression=exp.Literal.number(rows)))
        return
    if (
        isinstance(limit, exp.Limit)
        and not limit.args.get("limit_options")
        and isinstance(limit.expression, exp.Literal)
        and not limit.expression.is_string
        and str(limit.expression.this).isdigit()
    ):
        limit.set("expression", exp.Literal.number(min(int(limit.expression.this), rows)))
        return
    plan.tree = exp.select("*").from_(tree.subquery("_dw_result")).limit(rows)


def _fetch(relation: duckdb.DuckDBPyRelation, row_limit: int) -> tuple[pa.Table, bool]:
    """At most ``row_limit`` rows, and whether there were more."""
    reader = relation.to_arrow_reader(batch_size=max(1, min(row_limit + 1, RESULT_BATCH_ROWS)))
    batches, count = [], 0
    for batch in reader:
        batches.append(batch)
        count += batch.num_rows
        if count > row_limit:
            break
    table = pa.Table.from_batches(batches, schema=reader.schema)
    return table.slice(0, row_limit), count > row_limit


def _failure(
    exc: BaseException, plan: Plan, streams: list[SourceStream], deadline: float, limit_s: float
) -> DataError:
    """The error to report: a source's own failure first (DuckDB only wraps it), then a
    timeout, the memory limit, or DuckDB's message with registered names put back."""
    errors = [stream.error for stream in streams if stream.error is not None]
    for stream in streams:
        # The error leaves with the query's frames in its traceback; a worker still blocked
        # on a slow source holds its stream, which must not keep them (and DuckDB's objects).
        stream.error = None
    if errors:
        return errors[0]
    if isinstance(exc, DataError):
        return exc
    message = str(exc)
    for scan in plan.scans:
        message = message.replace(scan.name, str(scan.ref))
    if isinstance(exc, duckdb.InterruptException) or time.monotonic() >= deadline:
        return QueryError(
            f"the query ran past its time limit ({limit_s:g} s)", code="query_timeout"
        )
    if isinstance(exc, duckdb.OutOfMemoryException):
        return QueryError(
            f"the query needs more memory than allowed: {message}", code="query_memory"
        )
    return QueryError(message, code="query_failed")
