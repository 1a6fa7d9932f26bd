"""Test databases: a SQLite file, or a fresh schema in the PostgreSQL test server.

A test module declares its own fixture with these helpers, e.g.

    @pytest.fixture(scope="module", params=DATABASES)
    def engine(request, tmp_path_factory):
        yield from migrated_engine(request.param, tmp_path_factory)

PostgreSQL tests are skipped (saying why) when the server does not answer; set
DAGWRIGHT_TEST_POSTGRES_URL to use another server.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

from dagwright.store.db import make_engine, migrate

POSTGRES_URL = os.environ.get(
    "DAGWRIGHT_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
DATABASES = ["sqlite", "postgresql"]

# Children first: the order in which `clear` empties the tables.
TABLES = ("run_nodes", "runs", "api_keys", "versions", "apps", "secrets")


@functools.cache
def postgres_problem() -> str | None:
    """Why PostgreSQL cannot be used, or None when it can (asked once per test run)."""
    admin = create_engine(POSTGRES_URL, poolclass=NullPool)
    try:
        with admin.connect() as connection:
            connection.execute(text("SELECT 1"))
    except OperationalError as exc:
        return f"PostgreSQL at {POSTGRES_URL} is not reachable: {exc.orig}"
    finally:
        admin.dispose()
    return None


@contextmanager
def fresh_engine(kind: str, folder: Path) -> Iterator[Engine]:
    """An engine on an empty database: a new SQLite file in `folder`, or a new PostgreSQL
    schema (dropped afterwards), so no two tests or runs share tables."""
    if kind == "sqlite":
        engine = make_engine(f"sqlite:///{folder / f'{uuid.uuid4().hex[:8]}.db'}")
        try:
            yield engine
        finally:
            engine.dispose()
        return
    problem = postgres_problem()
    if problem is not None:
        pytest.skip(problem)
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(POSTGRES_URL, poolclass=NullPool)
    with admin.begin() as connection:
        connection.execute(text(f"CREATE SCHEMA {schema}"))
    engine = make_engine(POSTGRES_URL, connect_args={"options": f"-csearch_path={schema}"})
    try:
        yield engine
    finally:
        engine.dispose()
        with admin.begin() as connection:
            connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def migrated_engine(kind: str, factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """For a module-scoped fixture: a fresh database migrated to head."""
    with fresh_engine(kind, factory.mktemp("db")) as engine:
        migrate(engine)
        yield engine


def clear(engine: Engine) -> None:
    """Empties every table, so tests of one module sharing a database start clean."""
    with engine.begin() as connection:
        connection.execute(text("UPDATE apps SET published_version_id = NULL"))
        for table in TABLES:
            connection.execute(text(f"DELETE FROM {table}"))
