"""Real data sources for the data-layer tests: a fresh schema in the PostgreSQL test server, a
fresh database in the MariaDB (MySQL protocol) test server, and a small HTTP server answering
JSON. Each test module makes its own, with a random name, and drops it afterwards.

PostgreSQL and MariaDB tests are skipped, saying why, when the server does not answer; set
DAGWRIGHT_TEST_PG_DATA_URL or DAGWRIGHT_TEST_MYSQL_URL to use other servers.
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pyarrow as pa
import pymysql
import pytest

from dagwright.data.connector import Connector, Filter, Split, TableInfo
from dagwright.registry.services import Secrets

# A database of its own, beside the one the servers under test keep their store in (`test`):
# a source over the store's database is refused (source_is_own_store). Created on first use.
POSTGRES_URL = os.environ.get(
    "DAGWRIGHT_TEST_PG_DATA_URL", "postgresql://postgres@127.0.0.1:5432/dagwright_data"
)
POSTGRES_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/test"
MYSQL_URL = os.environ.get("DAGWRIGHT_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")


def unique_name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@functools.cache
def postgres_problem() -> str | None:
    """Why PostgreSQL cannot be used, or None when it can (asked once per test run)."""
    try:
        _create_data_database()
        with psycopg.connect(POSTGRES_URL, connect_timeout=3) as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"PostgreSQL at {POSTGRES_URL} is not reachable: {exc}"
    return None


def _create_data_database() -> None:
    """The default data database, when it is missing (several test processes may try at
    once: the loser's duplicate is fine)."""
    if "DAGWRIGHT_TEST_PG_DATA_URL" in os.environ:
        return
    name = urlsplit(POSTGRES_URL).path.lstrip("/")
    with psycopg.connect(POSTGRES_ADMIN_URL, connect_timeout=3, autocommit=True) as connection:
        found = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
        if found.fetchone() is None:
            with suppress(psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
                connection.execute(f'CREATE DATABASE "{name}"')


@functools.cache
def mysql_problem() -> str | None:
    """Why the MySQL-protocol server cannot be used, or None when it can."""
    try:
        mysql_connect().close()
    except pymysql.MySQLError as exc:
        return f"MySQL/MariaDB at {MYSQL_URL} is not reachable: {exc}"
    return None


def mysql_connect(database: str | None = None) -> pymysql.connections.Connection[Any]:
    parts = urlsplit(MYSQL_URL)
    return pymysql.connect(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 3306,
        user=parts.username or "root",
        password=parts.password or "",
        database=database,
        autocommit=True,
        connect_timeout=3,
    )


@dataclass
class PostgresSchema:
    """A schema of its own in the PostgreSQL test server."""

    name: str
    url: str = POSTGRES_URL

    def execute(self, *statements: str) -> None:
        with psycopg.connect(self.url, autocommit=True) as connection:
            for statement in statements:
                connection.execute(statement.replace("{schema}", self.name))


@contextmanager
def postgres_schema(prefix: str = "dw_data") -> Iterator[PostgresSchema]:
    """A new, empty schema, dropped with everything in it afterwards."""
    problem = postgres_problem()
    if problem is not None:
        pytest.skip(problem)
    schema = PostgresSchema(unique_name(prefix))
    schema.execute(f"CREATE SCHEMA {schema.name}")
    try:
        yield schema
    finally:
        schema.execute(f"DROP SCHEMA {schema.name} CASCADE")


@dataclass
class MysqlDatabase:
    """A database of its own in the MySQL-protocol test server."""

    name: str

    @property
    def url(self) -> str:
        parts = urlsplit(MYSQL_URL)
        return (
            f"mysql://{parts.username or 'root'}@{parts.hostname}:{parts.port or 3306}/{self.name}"
        )

    def execute(self, *statements: str) -> None:
        connection = mysql_connect(self.name)
        try:
            with connection.cursor() as cursor:
                for statement in statements:
                    cursor.execute(statement)
        finally:
            connection.close()


@contextmanager
def mysql_database(prefix: str = "dw_data") -> Iterator[MysqlDatabase]:
    """A new, empty database, dropped afterwards."""
    problem = mysql_problem()
    if problem is not None:
        pytest.skip(problem)
    database = MysqlDatabase(unique_name(prefix))
    connection = mysql_connect()
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE {database.name} CHARACTER SET utf8mb4")
        yield database
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {database.name}")
        connection.close()


Answer = Any | Callable[[], Any]


@dataclass
class JsonServer:
    """An HTTP server on 127.0.0.1 answering GET ``path`` with ``routes[path]`` as JSON (a
    callable is called per request; an int is answered as that HTTP status). It counts the
    requests per path and keeps the headers of the last one."""

    routes: dict[str, Answer]
    delay_s: float = 0.0
    hits: dict[str, int] = field(default_factory=dict)
    last_headers: dict[str, str] = field(default_factory=dict)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def json_server(routes: Mapping[str, Answer], delay_s: float = 0.0) -> Iterator[JsonServer]:
    state = JsonServer(dict(routes), delay_s)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.hits[self.path] = state.hits.get(self.path, 0) + 1
            state.last_headers = {key.lower(): value for key, value in self.headers.items()}
            time.sleep(state.delay_s)
            answer = state.routes.get(self.path, 404)
            if callable(answer):
                answer = answer()
            status = answer if isinstance(answer, int) else 200
            body = json.dumps({"error": status} if isinstance(answer, int) else answer).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: pytest shows failures, not every request."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.port = server.server_address[1]
    # A short poll interval: shutdown() waits for it (0.5 s by default, per test).
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


class RecordingConnector(Connector):
    """Wraps a real connector and records what crosses the interface: the splits asked for
    and, per read, the columns and rows of every batch actually delivered. It observes; the
    source behind it is real."""

    kind = "recording"

    def __init__(self, inner: Connector) -> None:
        super().__init__(inner.source)
        self.inner = inner
        self.splits_asked: list[tuple[str, tuple[str, ...], tuple[Filter, ...]]] = []
        self.batches: list[tuple[tuple[str, ...], int]] = []
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, source: str, config: Mapping[str, Any], secrets: Secrets) -> Any:
        raise NotImplementedError("wrap a connector instead")

    def schemas(self) -> list[str]:
        return self.inner.schemas()

    def tables(self, schema: str) -> list[str]:
        return self.inner.tables(schema)

    def table_info(self, schema: str, table: str) -> TableInfo:
        return self.inner.table_info(schema, table)

    def splits(
        self, schema: str, table: str, columns: Sequence[str], filters: Sequence[Filter] = ()
    ) -> list[Split]:
        with self._lock:
            self.splits_asked.append((table, tuple(columns), tuple(filters)))
        return self.inner.splits(schema, table, columns, filters)

    def read(self, split: Split) -> Iterator[pa.RecordBatch]:
        for batch in self.inner.read(split):
            with self._lock:
                self.batches.append((tuple(batch.schema.names), batch.num_rows))
            yield batch

    def rows_read(self) -> int:
        return sum(rows for _columns, rows in self.batches)

    def columns_read(self) -> set[tuple[str, ...]]:
        return {columns for columns, _rows in self.batches}

    def close(self) -> None:
        self.inner.close()
