"""The database: where it is, the engine, migrations and sessions.

SQLite (one file under the data directory) is the default; the setting DAGWRIGHT_DATABASE_URL
names a PostgreSQL URL (`postgresql+psycopg://...`) to share one database between server
replicas. Nothing here reads the environment: the composition root gives the URL.
The schema is made by the Alembic migrations in store/migrations, applied by `migrate` at
start-up. A new migration (after changing store/models.py) is generated with
`alembic.command.revision(alembic_config(url=...), message=..., autogenerate=True)` against
a database at head.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session

if TYPE_CHECKING:
    from alembic.config import Config

SQLITE_FILE = "dagwright.db"
MIGRATIONS = Path(__file__).resolve().parent / "migrations"

# Any fixed number: every dagwright process that migrates the same database takes this lock.
MIGRATION_LOCK = 0x64_61_67_77  # "dagw"
SQLITE_BUSY_MS = 5000
# A migration may copy whole tables (SQLite batch mode): other processes wait longer for it.
SQLITE_MIGRATION_BUSY_MS = 120_000


def database_url(data_dir: Path, configured: str | None = None) -> str:
    """The configured URL (the setting DAGWRIGHT_DATABASE_URL) when there is one, else the
    SQLite file in the data directory."""
    if configured:
        return configured
    return f"sqlite:///{(data_dir / SQLITE_FILE).resolve()}"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        # WAL lets readers go on while one writer writes; NORMAL is durable at checkpoints and
        # safe from corruption in WAL mode. SQLite leaves foreign keys off unless asked.
        # The busy timeout first: switching to WAL needs a lock another process may hold.
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()


def make_engine(url: str, *, connect_args: dict[str, Any] | None = None) -> Engine:
    """An engine for a SQLite or PostgreSQL URL, configured for dagwright's use: threads
    share it (the API runs service calls in a thread pool)."""
    args = dict(connect_args or {})
    if url.startswith("sqlite"):
        args.setdefault("check_same_thread", False)
        engine = create_engine(url, connect_args=args)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(
        url,
        connect_args=args,
        # A replica outlives database restarts and idle-connection reaping by proxies.
        pool_pre_ping=True,
        pool_size=10,
        max_overflow=20,
        pool_recycle=1800,
    )


@contextmanager
def session(engine: Engine) -> Iterator[Session]:
    """A session whose objects stay readable after commit and after it closes, so services
    can hand rows back as plain data. The caller commits; leaving with an error rolls back."""
    with Session(engine, expire_on_commit=False) as db:
        yield db


@cache
def head_revision() -> str:
    """The newest migration's revision id, read from the migration files (importing Alembic
    to ask it takes a quarter of a second, which a server start should not pay)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS / "versions").glob("[0-9]*.py"):
        source = path.read_text(encoding="utf-8")
        found = re.search(r'^revision(?:: str)? = "([^"]+)"', source, re.MULTILINE)
        parent = re.search(r'^down_revision(?:: [^=]+)? = "([^"]+)"', source, re.MULTILINE)
        if found:
            revisions.add(found.group(1))
        if parent:
            parents.add(parent.group(1))
    heads = revisions - parents
    if len(heads) != 1:
        raise RuntimeError(f"the migrations have {len(heads)} heads: {sorted(heads)}")
    return heads.pop()


def _at_head(engine: Engine) -> bool:
    try:
        with engine.connect() as connection:
            current = connection.execute(text("SELECT version_num FROM alembic_version"))
            return [row[0] for row in current] == [head_revision()]
    except DBAPIError:  # a new database: no alembic_version table yet
        return False


def alembic_config(connection: Connection | None = None, *, url: str | None = None) -> Config:
    """Alembic's configuration, built in code (no alembic.ini). With a connection, env.py
    migrates through it; else it opens `url` (a migration needs one or the other)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url)
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the database to `revision` (the latest by default). Idempotent, and safe when
    several processes start at once: they take turns, and the later ones find nothing to do."""
    if revision == "head" and _at_head(engine):
        return
    if engine.dialect.name == "sqlite":
        _migrate_sqlite(engine, revision)
        return
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            # Transaction-scoped: released by the commit or rollback below, even if the
            # migration fails, so a pooled connection never keeps it. PostgreSQL DDL is
            # transactional, so a failed migration leaves nothing half done.
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
        from alembic import command

        command.upgrade(alembic_config(connection), revision)
        connection.commit()


def _migrate_sqlite(engine: Engine, revision: str) -> None:
    with engine.connect() as connection:
        raw = connection.connection.driver_connection
        assert raw is not None
        # Table rebuilds (batch mode) drop tables that others reference: foreign keys are
        # off while migrating and checked as a whole afterwards. The pragma is ignored inside
        # a transaction, so it is set before the transaction begins.
        raw.execute("PRAGMA foreign_keys=OFF")
        raw.execute(f"PRAGMA busy_timeout={SQLITE_MIGRATION_BUSY_MS}")
        try:
            # One write transaction for the whole migration (Alembic sees the connection in a
            # transaction and leaves it to us): a process migrating at the same time waits
            # here, then finds the database at head; a failure leaves nothing half done.
            connection.exec_driver_sql("BEGIN IMMEDIATE")
            try:
                from alembic import command

                command.upgrade(alembic_config(connection), revision)
                broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                if broken:
                    raise RuntimeError(f"the migration broke foreign keys: {broken[:5]}")
            except BaseException:
                connection.rollback()
                raise
            connection.commit()
        finally:
            raw.execute("PRAGMA foreign_keys=ON")
            raw.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
