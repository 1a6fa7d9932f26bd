"""The job queue itself: Procrastinate on the PostgreSQL the service already uses.

Two tasks. `dagwright.run`, whose job carries a run id, its inputs and its deadline; the
run's row (services/runs) carries the job id. `dagwright.evaluate`, a whole evaluation,
whose examples run in the worker that has it: an evaluation keeps each example's result as it
comes, so a job taken up again after its worker died goes on with the examples left.

A run's job is deferred inside the transaction that records the queued run (Procrastinate
defers on a connection it is given), so a run is queued exactly when its job exists: a crash
can leave neither a job without a run nor a queued run without a job. The API processes only
defer, through the run writer's connection; workers open an async connection pool and fetch
(services/queue/worker.py).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, Final

import procrastinate
from procrastinate.exceptions import AlreadyEnqueued
from procrastinate.schema import SchemaManager
from sqlalchemy import Connection, Engine, text
from sqlalchemy.engine import make_url

from dagwright.services.queue.settings import QueueConfigError

TASK: Final = "dagwright.run"
EVALUATION_TASK: Final = "dagwright.evaluate"  # a whole evaluation, resumable by design
QUEUE: Final = "runs"
# Any fixed number: the transaction-scoped lock under which one process installs the schema.
_SCHEMA_LOCK: Final = 0x6461_6777_7269_6768  # "dagwrigh"


class Priority(IntEnum):
    """Which queued runs a worker takes first: higher before lower, then oldest first."""

    INTERACTIVE = 100  # someone is watching: debug runs, conversations
    PUBLISHED = 50  # async calls of published apps
    SCHEDULED = 20  # schedules and webhooks
    BATCH = 0  # evaluation items


def conninfo(database_url: str | None) -> str:
    """The libpq URI of a SQLAlchemy PostgreSQL URL (its `options`, e.g. a search_path,
    kept). Queue mode needs PostgreSQL (None is the embedded SQLite): the jobs live there."""
    backend = "sqlite" if database_url is None else make_url(database_url).get_backend_name()
    if database_url is None or backend != "postgresql":
        raise QueueConfigError(
            "queue mode keeps its jobs in PostgreSQL: set DAGWRIGHT_DATABASE_URL to a "
            f"postgresql+psycopg:// URL (the database is {backend})"
        )
    return make_url(database_url).set(drivername="postgresql").render_as_string(False)


def install_schema(engine: Engine) -> bool:
    """Create Procrastinate's tables, types and functions in the database (its search path)
    unless they are there; True when it did. Processes starting together take turns under
    an advisory lock, so exactly one installs it."""
    with engine.begin() as conn:
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEMA_LOCK})
        if conn.execute(text("SELECT to_regclass('procrastinate_jobs')")).scalar() is not None:
            return False
        # Through the driver: the schema's SQL has % signs that are not placeholders.
        conn.connection.driver_connection.execute(SchemaManager.get_schema())  # type: ignore[union-attr]
    return True


def deferring_app(database_url: str | None) -> procrastinate.App:
    """An app that only defers, on connections it is given (never opened: no pool)."""
    connector = procrastinate.SyncPsycopgConnector(conninfo=conninfo(database_url))
    return procrastinate.App(connector=connector)


def defer_run(
    app: procrastinate.App,
    conn: Connection,
    run_id: str,
    inputs: dict[str, Any],
    *,
    priority: Priority,
    deadline: float | None,
) -> int:
    """Queue the run's job in `conn`'s transaction; returns the job id."""
    deferrer = app.configure_task(
        TASK,
        queue=QUEUE,
        priority=int(priority),
        connection=conn.connection.driver_connection,
    )
    return deferrer.defer(run_id=run_id, inputs=inputs, deadline=deadline)


def defer_evaluation(
    app: procrastinate.App, conn: Connection, evaluation_id: str, concurrency: int
) -> int | None:
    """Queue an evaluation's job in `conn`'s transaction; returns the job id, or None when
    the evaluation is already waiting in the queue. Its lock keeps two jobs of one
    evaluation from running at once."""
    key = f"evaluation:{evaluation_id}"
    deferrer = app.configure_task(
        EVALUATION_TASK,
        queue=QUEUE,
        priority=int(Priority.BATCH),
        lock=key,
        queueing_lock=key,
        connection=conn.connection.driver_connection,
    )
    try:
        return deferrer.defer(evaluation_id=evaluation_id, concurrency=concurrency)
    except AlreadyEnqueued:
        return None
