"""The federated query engine: one SQL query over tables of any number of sources.

A query is checked (``safety.check_sql``), planned (``planner.plan_query``: the catalog
tables it reads, their needed columns and pushable filters), its tables are read from their
sources as Arrow and registered in a per-query DuckDB cursor under generated names, and the
rewritten SQL runs with a LIMIT of one row more than asked, so a cut result is known to be
cut (``truncated``). One DuckDB connection serves the engine, configured once: memory limit,
threads, external access off (no files, URLs, extensions, ATTACH), no spilling to disk unless
a temporary folder is given (DuckDB would otherwise write to ./.tmp, up to 90% of the disk),
and then locked so no query can change it.

Limits (``QueryLimits``), each refusal a typed error:

- the SQL text: size and bracket depth before it is parsed, then the read-only check
  (``safety.check_sql``: ``sql_too_large``, ``sql_too_deep``, ``sql_refused``);
- time: one deadline covers checking and planning the SQL, reading the sources' metadata and
  rows, and DuckDB's own work. DuckDB is interrupted at the deadline; the caller has its
  answer (``query_timeout``) at the deadline plus ``grace_s`` even when DuckDB is inside a
  call it does not interrupt (one long scalar function), and such an overrunning query
  finishes in the background. While ``max_overruns`` of them still run, new queries are
  refused (``query_busy``), so they cannot pile up;
- memory: DuckDB's ``memory_limit`` bounds what its buffer manager holds (hash tables,
  sorts, aggregates: ``query_memory``). It does not see every allocation (the vectors of
  scalar functions, Arrow copies), so a watchdog samples the process's resident memory every
  20 ms and interrupts a query when it grew by more than ``max_memory_growth`` since the
  query started (``query_memory``); functions that build values larger than their input are
  refused by the check (``safety``, rule 6);
- the result: at most ``max_rows`` rows (more is ``truncated``, not an error) and
  ``max_result_bytes`` of Arrow data (``query_result_too_large``).
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import decimal
import logging
import math
import os
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import duckdb
import pyarrow as pa
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from dagwright.data.catalog import Catalog, TableRef
from dagwright.data.connector import TableInfo
from dagwright.data.limits import QueryLimits
from dagwright.data.planner import Plan, plan_query
from dagwright.data.safety import DIALECT, check_sql
from dagwright.data.scope import SourceScope
from dagwright.data.streams import SourceStream
from dagwright.errors import DataError, DataSourceError, QueryError, SqlRefusedError

T = TypeVar("T")
logger = logging.getLogger(__name__)
# Rows per result batch: small enough that the byte cap is checked before a batch of wide
# rows is large (8,192 rows of 10 kB: 80 MB).
RESULT_BATCH_ROWS = 8_192
# How often the memory watchdog reads the process's resident memory.
WATCH_INTERVAL_S = 0.02
MAX_EXPRESSION_DEPTH = 200


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

    def __init__(self, catalog: Catalog, limits: QueryLimits | None = None) -> None:
        self.catalog = catalog
        self.limits = limits = limits or QueryLimits()
        self._connection = duckdb.connect(
            ":memory:",
            config={
                "memory_limit": limits.memory_limit,
                "threads": limits.threads,
                # Python variables are not tables (DuckDB would find a DataFrame by name).
                "python_enable_replacements": False,
                "autoinstall_known_extensions": False,
                "autoload_known_extensions": False,
                # DuckDB's optimizer is worse than quadratic in the depth of an expression
                # (900 chained additions: 15 s, not interruptible); 200 takes 0.2 s.
                "max_expression_depth": MAX_EXPRESSION_DEPTH,
            },
        )
        # Spilling only where configured, and bounded: DuckDB's default is ./.tmp, up to 90%
        # of the disk, external access off or not. Set before external access is turned off
        # (which forbids changing the temporary folder), then everything is locked: from
        # here no statement can change a setting (SET is refused by DuckDB itself).
        self._connection.execute("SET temp_directory = ?", [limits.temp_directory or ""])
        if limits.temp_directory:
            self._connection.execute(
                "SET max_temp_directory_size = ?", [limits.max_temp_directory_size]
            )
        self._connection.execute("SET enable_external_access = false")
        self._connection.execute("SET lock_configuration = true")
        self._lock = threading.Lock()
        self._overruns = 0  # queries still running past their deadline (see _Run)
        self._stopping = False  # the server is stopping: no query starts (interrupt_queries)
        self._watch = _MemoryWatch()

    def close(self) -> None:
        """Closes DuckDB. Queries still running (a server stopping mid-query: their threads
        are abandoned, workpools.py) are interrupted first and given their grace to let go:
        DuckDB refuses to close a connection a cursor of it is busy on. One that still holds
        it is left to the exiting process, logged rather than failing the shutdown."""
        running = self.interrupt_queries()
        deadline = time.monotonic() + self.limits.grace_s * 5
        for run in running:
            run.done.wait(max(0.0, deadline - time.monotonic()))
        try:
            self._connection.close()
        except duckdb.Error as exc:
            logger.warning("DuckDB was left open at shutdown: a query still holds it (%s)", exc)

    def interrupt_queries(self) -> list[_Run]:
        """Interrupts every query running (the server is stopping): each fails at once with
        ``shutting_down``. Returns them."""
        with self._lock:
            self._stopping = True  # and those about to start are refused (`query`, `_Run`)
        running = self._watch.running()
        for run in running:
            run.interrupt("shutdown")
        return running

    def query(
        self,
        sql: str,
        *,
        max_rows: int | None = None,
        timeout_s: float | None = None,
        scope: SourceScope | None = None,
    ) -> QueryResult:
        """Runs one read-only query. At most ``max_rows`` rows come back; more is not an
        error: ``truncated`` says so. Under a ``scope`` every table the query names must lie
        in it (``table_out_of_scope``, before anything is read). SqlRefusedError
        (``sql_refused``, ``sql_too_large``, ``sql_too_deep``, ``table_out_of_scope``),
        DataSourceError or QueryError (``query_failed``,
        ``query_timeout``, ``query_memory``, ``query_result_too_large``, ``query_busy``)
        otherwise."""
        started = time.monotonic()
        row_limit = self.limits.max_rows if max_rows is None else max_rows
        if row_limit < 0:
            raise ValueError(f"max_rows must be at least 0, not {row_limit}")
        limit_s = self.limits.timeout_s if timeout_s is None else timeout_s
        deadline = started + limit_s
        prefix = f"_dw{secrets.token_hex(3)}_"
        # Checking and planning are Python (sqlglot) and the sources' metadata: on a thread
        # of their own, so the deadline holds for them too.
        plan, streams, executed_sql = _bounded(
            lambda: self._prepare(sql, prefix, deadline, row_limit, scope),
            deadline,
            limit_s,
            discard=lambda prepared: _close_streams(prepared[1]),
        )
        with self._lock:
            if self._stopping:
                _close_streams(streams)
                raise _stopping_error()
            if self._overruns >= self.limits.max_overruns:
                _close_streams(streams)
                raise QueryError(
                    f"{self._overruns} queries that ran past their time limit are still"
                    " finishing; try again in a moment (if this lasts, one of them is stuck in"
                    " a call DuckDB cannot interrupt: restarting the server ends it)",
                    code="query_busy",
                )
            cursor = self._connection.cursor()
        run = _Run(self, cursor, plan, streams, executed_sql, row_limit, deadline, limit_s)
        table, truncated, columns = run.wait(self.limits.grace_s)
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

    def tables(self, scope: SourceScope | None = None) -> list[TableRef]:
        """Every table of every source (of the scope's sources and schemas only)."""
        if scope is not None:
            return scope.tables(self.catalog)
        return self.catalog.table_refs()

    def table_info(self, qualified: str, scope: SourceScope | None = None) -> TableInfo:
        """The metadata of ``source.schema.table`` (or ``source.table``); under a scope,
        SqlRefusedError (``table_out_of_scope``) for a table outside it."""
        return self.catalog.table_info(self._resolve(qualified, scope))

    def sample(
        self,
        qualified: str,
        n: int = 5,
        columns: Sequence[str] | None = None,
        scope: SourceScope | None = None,
    ) -> QueryResult:
        """The first ``n`` rows of a table (of some of its columns), within the scope."""
        ref = self._resolve(qualified, scope)
        info = self.catalog.table_info(ref)
        try:
            chosen = [info.column(name).name for name in columns or ()]
        except KeyError as exc:
            raise QueryError(f"{ref}: {exc.args[0]}", code="query_failed") from exc
        select = ", ".join(exp.to_identifier(name, quoted=True).sql(DIALECT) for name in chosen)
        return self.query(
            f"SELECT {select or '*'} FROM {ref.sql} LIMIT {int(n)}", max_rows=n, scope=scope
        )

    def _resolve(self, qualified: str, scope: SourceScope | None = None) -> TableRef:
        try:
            parts = [part.name for part in exp.to_table(qualified, dialect=DIALECT).parts]
            if scope is not None:  # before the catalog is asked: its errors list names
                scope.check_name(parts, self.catalog)
            ref = self.catalog.resolve(parts)
            if scope is not None:
                scope.check(ref)
            return ref
        except (ValueError, ParseError, TokenError) as exc:  # TokenError: an unclosed quote
            raise DataSourceError(
                f"{qualified!r} is not a table of the catalog: {exc}", code="table_not_found"
            ) from exc

    def _prepare(
        self, sql: str, prefix: str, deadline: float, row_limit: int, scope: SourceScope | None
    ) -> tuple[Plan, list[SourceStream], str]:
        """The checked and planned query, a stream per scan (metadata and splits come from
        the sources) and the SQL DuckDB will run."""
        tree = check_sql(
            sql, max_bytes=self.limits.max_sql_bytes, max_depth=self.limits.max_sql_depth
        )
        try:
            plan = plan_query(tree, self.catalog, prefix, scope)
            _limit(plan, row_limit + 1)
            executed_sql = plan.tree.sql(dialect=DIALECT)
        except RecursionError as exc:  # a tree the parser took but the planner cannot walk
            raise SqlRefusedError(
                "the SQL is nested too deeply to be planned; flatten it, with WITH for instance",
                code="sql_too_deep",
            ) from exc
        streams = []
        for scan in plan.scans:
            connector = self.catalog.source(scan.ref.source)
            splits = connector.splits(scan.ref.schema, scan.ref.table, scan.columns, scan.filters)
            schema = scan.info.arrow_schema(scan.columns)
            streams.append(SourceStream(connector, splits, schema, deadline, str(scan.ref)))
        return plan, streams, executed_sql


class _Run:
    """One query in DuckDB, on a thread of its own so that the caller is answered by the
    deadline (plus grace) whatever DuckDB does. A timer interrupts DuckDB at the deadline and
    the memory watchdog when the process grows too much; a query that does not stop in time
    is left to finish (it cleans up after itself) and counted as an overrun meanwhile."""

    def __init__(
        self,
        engine: QueryEngine,
        cursor: duckdb.DuckDBPyConnection | None,
        plan: Plan,
        streams: list[SourceStream],
        executed_sql: str,
        row_limit: int,
        deadline: float,
        limit_s: float,
    ) -> None:
        self.engine = engine
        self.cursor = cursor
        self.plan = plan
        self.streams = streams
        self.executed_sql = executed_sql
        self.row_limit = row_limit
        self.deadline = deadline
        self.limit_s = limit_s
        self.reason: str | None = None  # why DuckDB was interrupted: "time" or "memory"
        self.growth = 0  # bytes the process had grown by when the watchdog stopped it
        self.limit_bytes = engine.limits.memory_growth_bytes()
        self.start_rss = _rss()
        self.outcome: tuple[pa.Table, bool, list[ResultColumn]] | None = None
        self.error: DataError | None = None
        self.done = threading.Event()
        self.abandoned = False
        self.interrupted_at: float | None = None
        self._wake = threading.Event()  # set when DuckDB finishes or is interrupted
        self._state = threading.Lock()

    def wait(self, grace_s: float) -> tuple[pa.Table, bool, list[ResultColumn]]:
        timer = threading.Timer(
            max(0.0, self.deadline - time.monotonic()), self.interrupt, args=("time",)
        )
        timer.daemon = True
        worker = threading.Thread(target=self._execute, name="dagwright-query", daemon=True)
        self.engine._watch.add(self)
        if self.engine._stopping:  # stopped after this query's start, before the watch had it
            self.interrupt("shutdown")
        timer.start()
        worker.start()
        try:
            # Answered when DuckDB finishes, or ``grace_s`` after it was interrupted (by the
            # timer at the deadline or by the memory watchdog before) if it goes on anyway.
            while not self.done.is_set():
                give_up = self.deadline + grace_s
                if self.interrupted_at is not None:
                    give_up = min(give_up, self.interrupted_at + grace_s)
                remaining = give_up - time.monotonic()
                if remaining <= 0:
                    with self._state:
                        if not self.done.is_set():
                            self.abandoned = True
                            with self.engine._lock:
                                self.engine._overruns += 1
                    break
                self._wake.wait(remaining)
                self._wake.clear()
        finally:
            timer.cancel()
        if not self.abandoned:
            # The worker has released DuckDB's objects; let it end here, so none of them is
            # ever freed by a thread the interpreter is stopping (C++ would abort).
            worker.join()
        if self.abandoned:
            if self.reason == "memory":
                raise self._memory_error()
            if self.reason == "shutdown":
                raise _stopping_error()
            raise QueryError(
                f"the query ran past its time limit ({self.limit_s:g} s)", code="query_timeout"
            )
        if self.error is not None:
            raise self.error
        assert self.outcome is not None
        return self.outcome

    def interrupt(self, reason: str) -> None:
        with self._state:
            cursor = self.cursor
            if self.done.is_set() or cursor is None:
                return
            if self.reason is None:
                self.reason = reason
                self.interrupted_at = time.monotonic()
        with contextlib.suppress(duckdb.Error):  # closed meanwhile: nothing to stop
            cursor.interrupt()
        self._wake.set()

    def _execute(self) -> None:
        cursor = self.cursor
        assert cursor is not None
        relation: duckdb.DuckDBPyRelation | None = None
        try:
            for scan, stream in zip(self.plan.scans, self.streams, strict=True):
                source = stream.reader() if scan.stream else stream.table()
                cursor.register(scan.name, source)
            relation = cursor.sql(self.executed_sql)
            columns = [
                ResultColumn(name, str(type_))
                for name, type_ in zip(relation.columns, relation.types, strict=True)
            ]
            table, truncated = _fetch(relation, self.row_limit, self.engine.limits.max_result_bytes)
            self.outcome = (table, truncated, columns)
        except (duckdb.Error, DataError) as exc:
            # Without its traceback: the frames hold DuckDB's objects (see finally).
            self.error = self._failure(exc).with_traceback(None)
        except RecursionError:
            self.error = SqlRefusedError(
                "the SQL is nested too deeply to be run; flatten it", code="sql_too_deep"
            )
        except BaseException as exc:  # reported to the caller, never lost in the thread
            self.error = QueryError(f"the query failed: {type(exc).__name__}: {exc}")
        finally:
            self.engine._watch.remove(self)
            _close_streams(self.streams)
            relation = None  # DuckDB's objects are freed here, on this thread, before done
            with self._state:
                self.cursor = None
            try:
                cursor.close()
                del cursor
            finally:
                with self._state:
                    self.done.set()
                    self._wake.set()
                    if self.abandoned:
                        with self.engine._lock:
                            self.engine._overruns -= 1

    def _memory_error(self) -> QueryError:
        return QueryError(
            f"the query needs more memory than allowed: the process grew by"
            f" {self.growth / 2**20:,.0f} MiB while it ran (at most"
            f" {self.limit_bytes / 2**20:,.0f} MiB)",
            code="query_memory",
        )

    def _failure(self, exc: BaseException) -> DataError:
        """The error to report: a source's own failure first (DuckDB only wraps it), then
        the watchdog's or the timer's interruption, the memory limit, or DuckDB's message
        with registered names put back."""
        errors = [stream.error for stream in self.streams if stream.error is not None]
        for stream in self.streams:
            # The error leaves with the query's frames in its traceback; a worker still
            # blocked on a slow source holds its stream, which must not keep them.
            stream.error = None
        if errors:
            return errors[0]
        if isinstance(exc, DataError):
            return exc
        message = str(exc)
        for scan in self.plan.scans:
            message = message.replace(scan.name, str(scan.ref))
        if self.reason == "memory":
            return self._memory_error()
        if self.reason == "shutdown":
            return _stopping_error()
        if "max expression depth" in message.lower():
            return SqlRefusedError(
                f"an expression of the SQL is nested more than {MAX_EXPRESSION_DEPTH} deep"
                " (a long chain of operators, say); split it, with WITH for instance",
                code="sql_too_deep",
            )
        if isinstance(exc, duckdb.InterruptException) or time.monotonic() >= self.deadline:
            return QueryError(
                f"the query ran past its time limit ({self.limit_s:g} s)", code="query_timeout"
            )
        if isinstance(exc, duckdb.OutOfMemoryException):
            return QueryError(
                f"the query needs more memory than allowed: {message}", code="query_memory"
            )
        return QueryError(message, code="query_failed")


def _stopping_error() -> QueryError:
    return QueryError("the server is stopping: the query was interrupted", "shutting_down")


class _MemoryWatch:
    """Samples the process's resident memory while queries run, and interrupts a query once
    the process has grown by more than its limit since the query started. Linux only
    (``/proc/self/statm``); elsewhere DuckDB's own memory limit is all there is."""

    def __init__(self) -> None:
        self._runs: set[_Run] = set()
        self._lock = threading.Lock()
        self._running = False

    def add(self, run: _Run) -> None:
        if run.start_rss is None:
            return
        with self._lock:
            self._runs.add(run)
            if self._running:
                return
            self._running = True
        threading.Thread(target=self._loop, name="dagwright-memory-watch", daemon=True).start()

    def remove(self, run: _Run) -> None:
        with self._lock:
            self._runs.discard(run)

    def running(self) -> list[_Run]:
        with self._lock:
            return list(self._runs)

    def _loop(self) -> None:
        while True:
            with self._lock:
                runs = list(self._runs)
                if not runs:
                    self._running = False
                    return
            rss = _rss()
            if rss is not None:
                for run in runs:
                    growth = rss - (run.start_rss or rss)
                    if growth > run.limit_bytes and run.reason is None:
                        run.growth = growth
                        run.interrupt("memory")
            time.sleep(WATCH_INTERVAL_S)


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _rss() -> int | None:
    """The process's resident memory in bytes (None where /proc is not there)."""
    try:
        with open("/proc/self/statm", "rb") as handle:
            return int(handle.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


def _close_streams(streams: Sequence[SourceStream]) -> None:
    for stream in streams:
        stream.close()


def _bounded(
    work: Callable[[], T],
    deadline: float,
    limit_s: float,
    discard: Callable[[T], None] | None = None,
) -> T:
    """``work()`` on a thread of its own, given up at the deadline (a source that does not
    answer cannot hold the query past its time; the thread ends with the source's own
    timeout). What a given-up ``work`` still returns is handed to ``discard``."""
    outcome: list[T] = []
    failure: list[BaseException] = []
    done = threading.Event()
    state = threading.Lock()
    given_up = False

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:
            failure.append(exc)
        finally:
            with state:
                done.set()
                late = given_up
            if late and outcome and discard is not None:
                discard(outcome[0])

    threading.Thread(target=run, name="dagwright-prepare", daemon=True).start()
    finished = done.wait(max(0.0, deadline - time.monotonic()))
    with state:
        if not finished and not done.is_set():
            given_up = True
    if given_up:
        raise QueryError(
            f"the query ran past its time limit ({limit_s:g} s) while checking it and reading"
            " the sources' metadata",
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


def _fetch(
    relation: duckdb.DuckDBPyRelation, row_limit: int, max_bytes: int
) -> tuple[pa.Table, bool]:
    """At most ``row_limit`` rows, and whether there were more; QueryError
    (``query_result_too_large``) past ``max_bytes`` of Arrow data."""
    reader = relation.to_arrow_reader(batch_size=max(1, min(row_limit + 1, RESULT_BATCH_ROWS)))
    batches, count, size = [], 0, 0
    for batch in reader:
        batches.append(batch)
        count += batch.num_rows
        size += batch.nbytes
        if size > max_bytes:
            raise QueryError(
                f"the result is larger than {max_bytes / 2**20:g} MiB: select fewer columns"
                " or rows (LIMIT), or aggregate",
                code="query_result_too_large",
            )
        if count > row_limit:
            break
    table = pa.Table.from_batches(batches, schema=reader.schema)
    return table.slice(0, row_limit), count > row_limit
